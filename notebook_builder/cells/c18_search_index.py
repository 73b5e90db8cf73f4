"""The search index (ky_search.sqlite) and its query language.

Guarantees:
- The index is a database of its own next to ky_court.sqlite, so the state snapshot every
  checkpoint pushes does not grow; it has its own schema version (kv `search_schema_version`)
  and is built again, not migrated, when that or the Unicode tables differ (derived data).
- `docs` holds one row per indexed document: its filter and facet columns and the name of the
  text it was indexed with (`text_name`, the best text c83 chose). `docs_fts` (FTS5, porter over
  unicode61) indexes title, description, that text and the filter tokens (`facets`), without
  SEARCH_COMMON_WORDS and without a copy of the texts: its content is the view `docs_text`, which
  reads the text files (kycourt_text), so FTS5's own deletes read them too.
- Rows are placed in (year, court) rowid ranges (`search_bucket`): a year filter is a range FTS5
  seeks to; a court code, kind or publication status is a facet token it intersects.
- Every query goes through `index_query` (common words left out); a query FTS5 cannot parse
  raises SearchQueryError, one of common words alone CommonWordsQuery.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .c00_config import IntegrityError, utc_now
from .c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, TEXT_LAYER, text_name
from .c10_database import connect, is_sqlite_file, split_sql
from .c11_reads import extracted_fingerprint, text_source_inputs

SEARCH_TEXT_FUNCTION = "kycourt_text"


SEARCH_WORDS_FUNCTION = "kycourt_words"


SEARCH_QUERY_FUNCTION = "kycourt_query"


SEARCH_TOKENIZE = "porter unicode61 remove_diacritics 2"


# The common words the index leaves out of every column, as Westlaw's and Lexis's noise words and
# PostgreSQL's english configuration do: function words with no legal meaning of their own ("not",
# "no", "shall", "may" and "will" are kept). They are a quarter of a filing's words (26% of 40 real
# PDFs' text, 37% of bench/search.py's corpus) and their position lists the bulk of what a phrase
# query reads: "ineffective assistance of counsel" read every "of" of the documents holding the
# other words, twice (its match, then bm25's count of its documents): 36 ms, 20 without. A query's
# common words are left out too (`index_query`), so a phrase matches with any or none of them
# between its other words: "abuse of discretion" also finds "abuse the discretion".
SEARCH_COMMON_WORDS = frozenset((
    "a an and are as at be been but by for from had has have his in into is it its of on or such that the "
    "their this to was were which with").split())


# Characters unicode61 reads as part of a word that Python's \\w does not: the nonspacing marks it
# folds away ("Peña" spelled n + U+0303 is one word) and private-use characters (BMP).
_WORD_JOINERS = frozenset(chr(code) for code in range(0x10000)
                          if unicodedata.category(chr(code)) == "Mn" or 0xE000 <= code <= 0xF8FF)


def _class_of(characters: Iterable[str]) -> str:
    """A regular-expression character class of `characters`, as ranges of code points."""
    codes, ranges = sorted(map(ord, characters)), []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "[" + "".join(f"\\u{first:04x}-\\u{last:04x}" for first, last in ranges) + "]"


# A word as unicode61 reads one (letters and digits, and _WORD_JOINERS).
INDEX_WORD = re.compile(f"(?:[^\\W_]|{_class_of(_WORD_JOINERS)})+")


_LETTERS_AND_DIGITS = re.compile(r"([^\W_]+)")


def index_words(text: str | None) -> str | None:
    """What docs_fts is given of a text (kycourt_words): the text with each of its INDEX_WORDs that
    is one of SEARCH_COMMON_WORDS (any case) replaced by a space, everything else as it was.

    It splits on letters and digits alone (twice as fast at full scale) and keeps a common word
    that a _WORD_JOINERS character touches: that word is part of a longer INDEX_WORD."""
    if text is None:
        return None
    parts = _LETTERS_AND_DIGITS.split(text)
    parts[1::2] = [" " if word.lower() in SEARCH_COMMON_WORDS and parts[2 * number][-1:] not in _WORD_JOINERS
                   and parts[2 * number + 2][:1] not in _WORD_JOINERS else word
                   for number, word in enumerate(parts[1::2])]
    return "".join(parts)


# Filter and facet columns of `docs`, in order; the index stage fills them from the state database.
# `facets` holds the document's filter tokens (`search_facets`); `text_key` digests what docs_fts
# holds of a document (its text's name, title, description, facets and rowid bucket), `source_key`
# the rest.
SEARCH_FIELDS = (
    "document_id", "sha256", "text_source", "text_name", "case_number", "court", "court_code", "year",
    "case_title", "case_type", "docket_entry_type", "description", "publication_status", "judge", "filed_date",
    "document_name", "pages", "text_chars", "kind", "facets", "text_key", "source_key",
)


_SEARCH_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS docs (
    doc_rowid          INTEGER PRIMARY KEY,
    document_id        TEXT NOT NULL UNIQUE,
    sha256             TEXT NOT NULL,
    text_source        TEXT,
    text_name          TEXT NOT NULL,
    case_number        TEXT,
    court              TEXT,
    court_code         TEXT,
    year               INTEGER,
    case_title         TEXT,
    case_type          TEXT,
    docket_entry_type  TEXT,
    description        TEXT,
    publication_status TEXT,
    judge              TEXT,
    filed_date         TEXT,
    document_name      TEXT,
    pages              INTEGER,
    text_chars         INTEGER,
    kind               TEXT,
    facets             TEXT NOT NULL,
    text_key           TEXT NOT NULL,
    source_key         TEXT NOT NULL,
    indexed_at         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_court_year ON docs(court_code, year);
CREATE INDEX IF NOT EXISTS docs_year ON docs(year);
CREATE INDEX IF NOT EXISTS docs_case_number ON docs(case_number);
CREATE INDEX IF NOT EXISTS docs_kind ON docs(kind);
CREATE VIEW IF NOT EXISTS docs_text AS
    SELECT doc_rowid, {SEARCH_WORDS_FUNCTION}(case_title) AS case_title,
           {SEARCH_WORDS_FUNCTION}(description) AS description,
           {SEARCH_WORDS_FUNCTION}({SEARCH_TEXT_FUNCTION}(text_name)) AS body, facets FROM docs;
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    case_title, description, body, facets, content = 'docs_text', content_rowid = 'doc_rowid',
    tokenize = '{SEARCH_TOKENIZE}'
);
INSERT INTO docs_fts(docs_fts, rank) VALUES ('rank', 'bm25(10.0, 4.0, 1.0, 0.0)');
"""


# An index of an older version is not migrated but built again (it is derived data): version 3 is
# the first without a copy of the texts, version 4 the first with the filter tokens (`facets`),
# version 6 the first without SEARCH_COMMON_WORDS (and with kv `search_unicode_version`).
SEARCH_SCHEMA_VERSION = 6


class SearchIndexOutdated(IntegrityError):
    """The index was made by an older version of the code: it is built again, not repaired."""


# The names kycourt_text reads: an archive's texts (text layer, OCR merge, court text), nothing else,
# so that SQL a user types (Datasette's query box) can never read a file outside the archive.
_SEARCH_TEXT_NAME = re.compile(r"(?:text/[0-9a-f]{64}(?:\.ocr)?|court_text/[0-9a-f]{64})\.txt")


def search_text_reader(root: str | os.PathLike, *, strict: bool) -> Any:
    """kycourt_text(name): the text file `root/name` as SQLite reads it for docs_text (UTF-8, bad
    bytes replaced, as the index stage inserted it). A name that is not an archive text's is NULL;
    a missing file is NULL, or, `strict` (a writer, whose deletes must see every token they
    remove), an error."""
    root = Path(root)

    def kycourt_text(name: str | None) -> str | None:
        if not isinstance(name, str) or not _SEARCH_TEXT_NAME.fullmatch(name):
            return None
        try:
            return (root / name).read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            if strict:
                raise
            return None
    return kycourt_text


# doc_rowid = bucket << SEARCH_BUCKET_BITS | sequence, the bucket being year * 4 + court (0 unknown,
# 1 CA, 2 SC): the documents of one year, or of one court in one year, are one range of rowids.
SEARCH_BUCKET_BITS = 24


_SEARCH_COURT_SLOTS = {None: 0, "CA": 1, "SC": 2}


def search_bucket(year: int | None, court_code: str | None) -> int:
    return (year or 0) * 4 + _SEARCH_COURT_SLOTS.get(court_code, 3)


def search_bucket_range(year: int, court_code: str | None = None) -> tuple[int, int]:
    """The doc_rowids of one year's documents (of one court, if given)."""
    if court_code:
        first = last = search_bucket(year, court_code)
    else:
        first, last = year * 4, year * 4 + 3
    return first << SEARCH_BUCKET_BITS, ((last + 1) << SEARCH_BUCKET_BITS) - 1


# A document's filter tokens (docs.facets, a column of docs_fts weighted 0 in the ranking): one per
# filter value it answers to (its court code, each kind the kind filter accepts for it, its
# publication status), so that FTS5 applies those filters itself, stepping over the posting lists
# of the query's words to the documents holding the token, instead of a join reading a docs row
# for every match.
SEARCH_KINDS = ("opinion", "order", "brief", "other")


def search_facet_token(name: str, value: str) -> str:
    """The token of filter `name` = `value`: letters and digits (one unicode61 token) no text holds."""
    return "kyf" + hashlib.blake2b(f"{name}={value}".encode("utf-8"), digest_size=8).hexdigest()


def search_kinds(kind: str | None, docket_entry_type: str | None, description: str | None) -> list[str]:
    """The SEARCH_KINDS whose kind filter accepts a document: its derived kind, or, not derived
    yet, those its docket entry type or description begins with (as SQL's LIKE 'kind%', ASCII
    case folded)."""
    if kind is not None:
        return [kind] if kind in SEARCH_KINDS else []
    return [name for name in SEARCH_KINDS
            if any(text[:len(name)].isascii() and text[:len(name)].lower() == name
                   for text in (docket_entry_type or "", description or ""))]


def search_facets(fields: Mapping[str, Any]) -> str:
    """docs.facets of a docs row's `fields`: its filter tokens, space-separated."""
    tokens = [search_facet_token("court_code", fields["court_code"])] if fields.get("court_code") else []
    tokens += [search_facet_token("kind", name)
               for name in search_kinds(fields.get("kind"), fields.get("docket_entry_type"), fields.get("description"))]
    if fields.get("publication_status") is not None:
        tokens.append(search_facet_token("publication_status", fields["publication_status"]))
    return " ".join(tokens)


# A query matching more documents than this is ranked among this many of the most recent
# matches: bm25 costs about a microsecond a match, over every match of a word in every document
# ~0.12 s at full scale. 10,000 (a tenth of the archive, its latest two years or so) keeps the p95
# of bench/search.py's queries under 50 ms with both cores busy.
SEARCH_RANK_CAP = 10000


class SearchQueryError(ValueError):
    """The FTS5 query cannot be parsed, or asks only for words the index leaves out (exit status 2
    in the CLI)."""


class CommonWordsQuery(SearchQueryError):
    """The query has only words the index leaves out (SEARCH_COMMON_WORDS), or one beside an
    operator: the message says what to change (exit status 2 in the CLI)."""


# An FTS5 query's tokens: a quoted phrase or a bareword, each with its prefix star (FTS5 allows a
# space before it), or one of FTS5's punctuation marks.
QUERY_TOKEN = re.compile(r'"(?:[^"]|"")*"(?:\s*\*)?|[^\s(){}:^+,"*]+(?:\s*\*)?|[(){}:^+,*]')


_QUERY_MARKS = ("(", ")", "{", "}", ":", "^", "+", ",", "*")


def query_terms(query: str) -> list[tuple[str, bool]]:
    """Each token of an FTS5 query (QUERY_TOKEN) and whether it is a term, a phrase or word to
    match, rather than an operator (AND, OR, NOT, NEAR before its parenthesis), a punctuation mark,
    a column name or NEAR's distance."""
    tokens = QUERY_TOKEN.findall(query)
    terms = []
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        syntax = (token in ("AND", "OR", "NOT") or (token == "NEAR" and following == "(") or token in _QUERY_MARKS
                  or following == ":" or (token.isdigit() and index > 0 and tokens[index - 1] == ","))
        terms.append((token, not syntax))
    return terms


def term_words(token: str) -> tuple[list[str], list[str], bool]:
    """A query term's (query_terms') words, those of them the index holds (SEARCH_COMMON_WORDS left
    out; the last word of a prefix kept: it matches other words) and whether it is a prefix."""
    prefix = token.endswith("*")
    body = token[1:token.rindex('"')].replace('""', '"') if token.startswith('"') else token.rstrip("*").rstrip()
    words = INDEX_WORD.findall(body)
    return words, [word for number, word in enumerate(words)
                   if word.lower() not in SEARCH_COMMON_WORDS or (prefix and number == len(words) - 1)], prefix


def index_query(query: str) -> str:
    """`query` as the index answers it: SEARCH_COMMON_WORDS left out of its phrases and words (a
    prefix, `the*`, is kept: it matches other words). A phrase or word of common words alone is
    dropped where the rest still says what to match (beside other words, inside NEAR); beside an
    operator, a column filter, `^` or `+`, or as the whole query, CommonWordsQuery names it. A
    query with an unterminated phrase is left as it is, for FTS5 to say so."""
    if query.count('"') % 2:
        return query
    terms = query_terms(query)
    kept: list[str] = []
    dropped: dict[int, str] = {}     # position in `kept`: a phrase or word of common words alone
    for token, is_term in terms:
        if not is_term:
            kept.append(token)
            continue
        words, left, prefix = term_words(token)
        if not left and words:
            dropped[len(kept)] = token
        kept.append(token if len(left) == len(words) else '"' + " ".join(left) + '"' + "*" * prefix)
    if kept == [token for token, _ in terms]:
        return query
    if not dropped:
        return " ".join(kept)
    common = ", ".join(sorted({word.lower() for token in dropped.values() for word in INDEX_WORD.findall(token)}))
    if all(at in dropped or not is_term for at, (_, is_term) in enumerate(terms)):
        raise CommonWordsQuery(f"the query has only common words the index leaves out ({common}): "
                               "add a word that says what to find")
    for at, token in dropped.items():
        if any(side in ("AND", "OR", "NOT", ":", "^", "+") for side in kept[max(0, at - 1):at] + kept[at + 1:at + 2]):
            raise CommonWordsQuery(f"{token} is a common word the index leaves out: take it out of the query")
    left_tokens = [token for at, token in enumerate(kept) if at not in dropped]
    if any(token == "(" and after in (")", ",") for token, after in zip(left_tokens, left_tokens[1:])):
        raise CommonWordsQuery(f"a group of the query has only common words the index leaves out ({common})")
    return " ".join(left_tokens)


def add_search_functions(conn: sqlite3.Connection, text_root: str | os.PathLike, *, strict: bool) -> None:
    """The SQL functions of the index on `conn`: kycourt_text (search_text_reader over `text_root`)
    and kycourt_words, which the view docs_text calls, and kycourt_query (index_query, for raw
    FTS5 in SQL)."""
    conn.execute("PRAGMA trusted_schema = ON")   # docs_text calls them (builds may default OFF)
    conn.create_function(SEARCH_TEXT_FUNCTION, 1, search_text_reader(text_root, strict=strict), deterministic=True)
    conn.create_function(SEARCH_WORDS_FUNCTION, 1, index_words, deterministic=True)
    conn.create_function(SEARCH_QUERY_FUNCTION, 1, index_query, deterministic=True)


class SearchDatabase:
    """The search index: every statement on ky_search.sqlite."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | os.PathLike, *, readonly: bool = False,
             text_root: str | os.PathLike | None = None) -> "SearchDatabase":
        """Opens (and, writable, creates) the index whose texts are under `text_root` (the index's
        folder, the workspace, by default); IntegrityError names what is wrong, SearchIndexOutdated
        an index of an older version."""
        path = Path(path)
        if path.exists() and path.stat().st_size > 0 and not is_sqlite_file(path):
            raise IntegrityError(f"{path} is not an SQLite database (bad header)")
        if readonly and not path.is_file():
            raise IntegrityError(f"{path} does not exist")
        try:
            if not readonly and (not path.exists() or path.stat().st_size == 0):
                # Merging segments (optimize) frees many pages; incremental vacuum gives them back to
                # the disk. It must be set before the header is written (turning WAL on writes it).
                fresh = sqlite3.connect(str(path))
                try:
                    fresh.execute("PRAGMA auto_vacuum = INCREMENTAL")
                    fresh.execute("PRAGMA journal_mode = WAL")
                finally:
                    fresh.close()
            db = cls(connect(path, readonly=readonly), path)
            # Posting lists of common words span many pages: a 64 MiB cache keeps them between queries.
            db.conn.execute("PRAGMA cache_size = -65536")
            add_search_functions(db.conn, path.parent if text_root is None else text_root, strict=not readonly)
            version = db.schema_version()
            if version != SEARCH_SCHEMA_VERSION and (version or readonly):
                db.close()
                if version > SEARCH_SCHEMA_VERSION:
                    raise IntegrityError(f"{path} has search schema version {version}, newer than this "
                                         f"code's {SEARCH_SCHEMA_VERSION}: upgrade kycourt-colab")
                raise SearchIndexOutdated(f"{path} has search schema version {version}, older than "
                                          f"{SEARCH_SCHEMA_VERSION}: rebuild it (kycourt-pipeline index)")
            # kycourt_words splits words by Python's Unicode tables: another version could give FTS5's
            # deletes other tokens than the inserts had, so an index made under another is built again.
            unicode = db.kv_get("search_unicode_version") if version else None
            if unicode not in (None, unicodedata.unidata_version):
                db.close()
                raise SearchIndexOutdated(f"{path} was built with Unicode {unicode}, this Python has "
                                          f"{unicodedata.unidata_version}: rebuild it (kycourt-pipeline index)")
            if not readonly and version == 0:
                db.create()
        except sqlite3.DatabaseError as exc:
            raise IntegrityError(f"{path} cannot be opened as SQLite: {exc}") from None
        return db

    def close(self) -> None:
        self.conn.close()

    def schema_version(self) -> int:
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kv'").fetchone():
            return 0
        row = self.conn.execute("SELECT value FROM kv WHERE key = 'search_schema_version'").fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def create(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in split_sql(_SEARCH_SCHEMA):
                self.conn.execute(statement)
            self.kv_set("search_schema_version", SEARCH_SCHEMA_VERSION)
            self.kv_set("search_unicode_version", unicodedata.unidata_version)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def kv_get(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def kv_set(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT INTO kv(key, value) VALUES (?, ?) "
                          "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, str(value)))

    def indexed(self) -> dict[str, tuple[int, str, str, str]]:
        """document_id -> (doc_rowid, text_name, text_key, source_key) of every indexed document."""
        return {row[0]: (row[1], row[2], row[3], row[4]) for row in self.conn.execute(
            "SELECT document_id, doc_rowid, text_name, text_key, source_key FROM docs")}

    def indexed_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM docs").fetchone()[0]

    def write_batch(self, *, upserts: Sequence[tuple[dict[str, Any], str | None]] = (),
                    deletes: Sequence[int] = ()) -> None:
        """In one transaction: deletes the given doc_rowids, then writes each (fields, body).

        A body is the text `fields["text_name"]` names, indexed with the fields' title and
        description; the document's former tokens are deleted first (FTS5 reads them back through
        docs_text: its former text file must be readable). A body of None rewrites the fields only:
        the caller knows that what docs_fts holds (`text_key`) has not changed. A document's
        doc_rowid lies in the bucket of its year and court (`search_bucket`), so a year or court
        filter is a rowid range FTS5 seeks to.
        """
        now = utc_now()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for rowid in deletes:
                self.conn.execute("DELETE FROM docs_fts WHERE rowid = ?", (rowid,))
                self.conn.execute("DELETE FROM docs WHERE doc_rowid = ?", (rowid,))
            for fields, body in upserts:
                old = self.conn.execute("SELECT doc_rowid FROM docs WHERE document_id = ?",
                                        (fields["document_id"],)).fetchone()
                if body is None:   # the indexed text's length stays
                    self._write_fields(old[0], fields, now, [c for c in SEARCH_FIELDS if c != "text_chars"])
                    continue
                bucket = search_bucket(fields.get("year"), fields.get("court_code"))
                if old is not None:
                    self.conn.execute("DELETE FROM docs_fts WHERE rowid = ?", (old[0],))
                if old is not None and old[0] >> SEARCH_BUCKET_BITS == bucket:
                    rowid = old[0]
                else:
                    if old is not None:
                        self.conn.execute("DELETE FROM docs WHERE doc_rowid = ?", (old[0],))
                    rowid = self.conn.execute(
                        "SELECT COALESCE(MAX(doc_rowid) + 1, :low) FROM docs WHERE doc_rowid BETWEEN :low AND :high",
                        {"low": bucket << SEARCH_BUCKET_BITS,
                         "high": ((bucket + 1) << SEARCH_BUCKET_BITS) - 1}).fetchone()[0]
                self._write_fields(rowid, fields, now)
                self.conn.execute("INSERT INTO docs_fts(rowid, case_title, description, body, facets) "
                                  "VALUES (?, ?, ?, ?, ?)",
                                  (rowid, index_words(fields.get("case_title")), index_words(fields.get("description")),
                                   index_words(body), fields["facets"]))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _write_fields(self, rowid: int, fields: dict[str, Any], now: str,
                      columns: Sequence[str] = SEARCH_FIELDS) -> None:
        self.conn.execute(
            f"INSERT INTO docs(doc_rowid, {', '.join(columns)}, indexed_at) "
            f"VALUES ({', '.join('?' * (len(columns) + 2))}) ON CONFLICT(doc_rowid) DO UPDATE SET "
            f"{', '.join(f'{c} = excluded.{c}' for c in columns)}, indexed_at = excluded.indexed_at",
            [rowid] + [fields.get(column) for column in columns] + [now])

    def optimize(self) -> None:
        """Merges the FTS5 segments into one b-tree (faster queries after a large build) and returns
        the pages that frees to the disk."""
        self.conn.execute("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
        self.conn.executescript("PRAGMA incremental_vacuum;")   # execute() would free one page only

    def search(self, query: str, *, court_code: str | None = None, court_like: str | None = None,
               year: int | None = None, kind: str | None = None, publication_status: str | None = None,
               limit: int = 20, rank_cap: int | None = SEARCH_RANK_CAP) -> list[dict[str, Any]]:
        """Ranked hits (bm25: title x10, description x4, text x1): each its docs row.

        bm25 costs about a microsecond per matching document, so a query that matches more than
        `rank_cap` documents is ranked among the `rank_cap` most recent matches (the highest
        rowids: the latest years); each hit says `ranked_among` and `rank_capped`. None ranks
        every match. Raises SearchQueryError when FTS5 cannot parse `query`.
        """
        source, params = _search_source(query, court_code=court_code, court_like=court_like, year=year,
                                        kind=kind, publication_status=publication_status)
        params.update(limit=limit, cap=rank_cap or -1)
        if rank_cap:
            source += " ORDER BY docs_fts.rowid DESC LIMIT :cap"
        # Materialized once, then counted and sorted: cheaper than COUNT(*) OVER ().
        ranked_sql = (f"WITH ranked AS MATERIALIZED ({source}) SELECT doc_rowid, score, "
                      "(SELECT COUNT(*) FROM ranked) AS considered FROM ranked ORDER BY score LIMIT :limit")
        with _search_query_errors():
            ranked = self.conn.execute(ranked_sql, params).fetchall()
        if not ranked:
            return []
        considered = ranked[0][2]
        rows = {row["doc_rowid"]: row for row in self.conn.execute(
            f"SELECT * FROM docs WHERE doc_rowid IN ({', '.join(str(row[0]) for row in ranked)})")}
        capped = bool(rank_cap) and considered >= rank_cap
        return [_SearchHit(rows[rowid], score, considered, capped) for rowid, score, _ in ranked if rowid in rows]

    def stems(self, words: Sequence[str]) -> dict[str, str]:
        """word -> the term the index holds it as (its porter stem, case and diacritics folded)."""
        self.conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words USING fts5(word, "
                          f"tokenize = '{SEARCH_TOKENIZE}')")
        self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_stems USING "
                          "fts5vocab('temp', 'query_words', 'instance')")
        self.conn.execute("DELETE FROM temp.query_words")
        self.conn.executemany("INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(words))
        return {words[row[0]]: row[1] for row in self.conn.execute("SELECT doc, term FROM temp.query_stems")}

    def match_count(self, query: str, **filters: Any) -> int:
        """How many documents match `query` with `filters` (search()'s), every one counted."""
        source, params = _search_source(query, **filters)
        with _search_query_errors():
            return self.conn.execute(f"SELECT COUNT(*) FROM ({source})", params).fetchone()[0]

    def match_facets(self, query: str | None, columns: Sequence[str], **filters: Any
                     ) -> dict[str, list[tuple[Any, int]]]:
        """Per column, (value, documents) of the documents matching `query` (every indexed document
        when None) and `filters`, leaving out the column's own filter: the choices a user has."""
        facets = {}
        for column in columns:
            if column not in SEARCH_FIELDS:
                raise ValueError(column)
            others = {name: value for name, value in filters.items()
                      if name != column and not (column == "court_code" and name == "court_like")}
            if query is None and not any(others.values()):
                facets[column] = self.facet(column)
                continue
            source, params = _search_source(query, **others)
            with _search_query_errors():
                facets[column] = [tuple(row) for row in self.conn.execute(
                    f"SELECT d.{column}, COUNT(*) FROM ({source}) m JOIN docs d ON d.doc_rowid = m.doc_rowid "
                    f"GROUP BY d.{column} ORDER BY COUNT(*) DESC, d.{column}", params)]
        return facets

    def get(self, document_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM docs WHERE document_id = ?", (document_id,)).fetchone()

    def facet(self, column: str) -> list[tuple[Any, int]]:
        if column not in SEARCH_FIELDS:
            raise ValueError(column)
        return [tuple(row) for row in self.conn.execute(
            f"SELECT {column}, COUNT(*) FROM docs GROUP BY {column} ORDER BY COUNT(*) DESC, {column}")]


class _SearchHit(dict):
    """A search hit: the docs row's fields, the snippet, `score` (bm25: lower is better), and how
    many matches the ranking considered (`ranked_among`; `rank_capped` when there were more)."""

    def __init__(self, row: sqlite3.Row, score: float, considered: int, capped: bool):
        super().__init__({key: row[key] for key in row.keys()})
        self.update(score=score, ranked_among=considered, rank_capped=capped)


def _search_source(query: str | None, *, court_code: str | None = None, court_like: str | None = None,
                   year: int | None = None, kind: str | None = None, publication_status: str | None = None
                   ) -> tuple[str, dict[str, Any]]:
    """SQL selecting (doc_rowid, score) of the documents matching `query` (None: every indexed
    document, score NULL) and the filters; the one definition of search's filters.

    With a query, FTS5 applies the filters itself: a year (and court) is a range of rowids it
    seeks to; a court code, one of SEARCH_KINDS or a publication status is a facet token it
    intersects with the query. Only part of a court's name or another kind joins docs, FTS5
    driving the join (SQLite's planner would drive it from docs' indexes, one query per row)."""
    params: dict[str, Any] = {}
    ranges, filters = [], []     # filters: (facet token, None when there is none; SQL over docs d)
    if year is not None:
        params["low"], params["high"] = search_bucket_range(year, court_code)
        ranges.append("BETWEEN :low AND :high")
    elif court_code:
        filters.append((search_facet_token("court_code", court_code), "d.court_code = :court_code"))
        params["court_code"] = court_code
    if court_like:
        filters.append((None, "d.court LIKE :court_like"))
        params["court_like"] = f"%{court_like}%"
    if kind:   # the derived kind (opinion, order, ...) where known, else the docket entry's words
        known = kind.lower() if kind.isascii() and kind.lower() in SEARCH_KINDS else None
        filters.append((known and search_facet_token("kind", known),
                        "(d.kind = lower(:kind_exact) OR (d.kind IS NULL AND "
                        "(d.docket_entry_type LIKE :kind OR d.description LIKE :kind)))"))
        params.update(kind=f"{kind}%", kind_exact=kind)
    if publication_status:
        filters.append((search_facet_token("publication_status", publication_status),
                        "d.publication_status = :publication_status"))
        params["publication_status"] = publication_status
    if query is None:
        where = [f"d.doc_rowid {condition}" for condition in ranges] + [sql for _, sql in filters]
        return f"SELECT d.doc_rowid AS doc_rowid, NULL AS score FROM docs d WHERE {' AND '.join(where) or '1'}", params
    params["query"] = index_query(query)
    where = ["docs_fts MATCH :query"] + [f"docs_fts.rowid {condition}" for condition in ranges]
    tokens = [token for token, _ in filters if token]
    if tokens:
        where.append("docs_fts MATCH :facets")
        params["facets"] = " AND ".join(f"facets : {token}" for token in tokens)
    joined = [sql for token, sql in filters if not token]
    if joined:
        return (f"SELECT d.doc_rowid AS doc_rowid, docs_fts.rank AS score FROM docs_fts CROSS JOIN docs d "
                f"ON d.doc_rowid = docs_fts.rowid WHERE {' AND '.join(where + joined)}"), params
    return f"SELECT rowid AS doc_rowid, rank AS score FROM docs_fts WHERE {' AND '.join(where)}", params


@contextlib.contextmanager
def _search_query_errors() -> Iterator[None]:
    """A query FTS5 cannot parse (`a-b`, `NEAR(`, `*`) as SearchQueryError; other errors as they are."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if any(sign in message for sign in ("fts5", "no such column", "unterminated", "unknown special query")):
            raise SearchQueryError(message) from None
        raise


@dataclass
class IndexCoverage:
    exists: bool
    extracted: int = 0
    indexed: int = 0
    missing: int = 0          # extracted documents the index lacks
    outdated: int = 0         # indexed with another text than the state's
    extra: int = 0            # indexed documents no longer extracted
    problem: str | None = None

    @property
    def behind(self) -> int:
        return self.missing + self.outdated + self.extra

    def describe(self) -> str:
        if not self.exists:
            return f"no search index ({self.problem or 'not built'})"
        text = f"{self.indexed} documents indexed of {self.extracted} extracted"
        if self.behind:
            text += f"; behind by {self.behind} ({self.missing} missing, {self.outdated} outdated, {self.extra} extra)"
        return text


def index_coverage(workspace: str | os.PathLike, state_conn: sqlite3.Connection | None = None) -> IndexCoverage:
    """How the workspace's index compares with the extracted documents of its state database (and
    the best text recorded for each)."""
    workspace = Path(workspace)
    path = workspace / SEARCH_DB_FILENAME
    if not path.is_file():
        return IndexCoverage(exists=False, problem=f"{path} does not exist")
    own = state_conn is None
    if own:
        state_path = workspace / DB_FILENAME
        if not is_sqlite_file(state_path):
            return IndexCoverage(exists=True, problem=f"{state_path} is not a database")
        state_conn = connect(state_path, readonly=True)
    try:
        wanted = {row["document_id"]: text_name(row["text_source"] or TEXT_LAYER, row["sha256"], row["court_sha256"])
                  for row in text_source_inputs(state_conn, "d.status = 'extracted'")}
    finally:
        if own:
            state_conn.close()
    try:
        sdb = SearchDatabase.open(path, readonly=True)
    except IntegrityError as exc:
        return IndexCoverage(exists=False, extracted=len(wanted), problem=str(exc))
    try:
        indexed = {document_id: name for document_id, (_, name, _, _) in sdb.indexed().items()}
    finally:
        sdb.close()
    coverage = IndexCoverage(exists=True, extracted=len(wanted), indexed=len(indexed))
    for document_id, name in wanted.items():
        have = indexed.get(document_id)
        if have is None:
            coverage.missing += 1
        elif have != name:
            coverage.outdated += 1
    coverage.extra = sum(1 for document_id in indexed if document_id not in wanted)
    return coverage


def index_behind(workspace: str | os.PathLike) -> IndexCoverage | None:
    """None when the index is level with the state (a cheap check of the extracted documents'
    count and newest update against what the last index run saw), else the full coverage."""
    workspace = Path(workspace)
    try:
        sdb = SearchDatabase.open(workspace / SEARCH_DB_FILENAME, readonly=True)
        try:
            seen = sdb.kv_get("state_fingerprint")
        finally:
            sdb.close()
        state = connect(workspace / DB_FILENAME, readonly=True)
        try:
            if seen is not None and seen == extracted_fingerprint(state):
                return None
        finally:
            state.close()
    except (IntegrityError, sqlite3.DatabaseError):
        pass
    coverage = index_coverage(workspace)
    return coverage if coverage.behind or not coverage.exists else None
