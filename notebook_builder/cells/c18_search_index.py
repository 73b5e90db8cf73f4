"""The search index: tantivy's inverted index of each document's best text, and its catalog.

Guarantees:
- The index lives beside ky_court.sqlite, outside the state snapshot: `ky_search/` (tantivy's
  segments: title, description and text with their places; each hit's fields stored) and
  `ky_search.sqlite`, the catalog (a row per indexed document: the text it was indexed with and
  the digests the index stage compares). A search reads one tantivy commit, published whole: it
  never sees a half-written index. The catalog is written after each commit, never ahead of it.
- Words are runs of letters and digits, accents composed, lowercased, folded to ASCII. The text is
  indexed with each of COMMON_WORDS followed by a term joining it to the next word (Lucene's
  CommonGrams): a phrase with common words matches exactly without reading every "of" or "the".
- `search()` builds tantivy's query in code from a SearchQuery (c18_query_syntax), never through
  tantivy's parser: every required node matches and no excluded one does; a word matches itself and
  the index's words with its English stem, a quoted phrase its words in order, a case number its
  case or the text that writes it, a prefix every word it begins.
- Every match is ranked: BM25 (title x4, description x2, text) plus fixed scores for the typed
  words in their order (a pasted sentence brings its document first), all of them near each other,
  a title holding them (a caption), and the typed case number's own documents. `total` is exact
  under the filters; pages are disjoint and in order; sort by relevance or filed date; an empty
  query lists the documents under the filters, newest first.
- Filters: court code or part of its name, kind, the case number's year, filed day range
  (inclusive), publication status; `facets()` counts each among the matches under the others (a
  court as typed is read by the court system's words, c28 `court_filter`).
- `open_search_index()` opens a workspace's index read-only (the search, serve, the feeds); a
  missing or unusable one raises IndexMissingError, saying how to build it.
- The store's copy is the commit's own files (c87 sends them) and its catalog, sealed
  (`seal_search_copy`: the catalog records the commit's meta.json, `sealed_commit` reads it):
  `commit_file_names()` names the files from meta.json (a segment's files are never rewritten,
  only deleted once unused);
  `index_file_sound()` checks one against the CRC-32 tantivy wrote in its footer;
  `install_search_index()` puts a fetched index in place only once every file of its commit is
  there and sound, it opens, and its catalog records that commit and as many documents.
  `unpack_search_index()` does so for an earlier version's one-file copy (`ky_search.tar`).
  A read-only copy is read through a private folder of links (tantivy locks beside meta.json).
- An index of another SEARCH_SCHEMA_VERSION (the FTS5 index of earlier versions included) raises
  SearchIndexOutdated, one that cannot be read IntegrityError: derived data, built again.
- `index_coverage()` compares the catalog with the extracted documents (verify, status).

Knobs read: none.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import struct
import tarfile
import tempfile
import unicodedata
import zlib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import tantivy

from .c00_config import IntegrityError, PipelineError, utc_now
from .c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME, TEXT_LAYER, text_name
from .c10_database import connect, is_sqlite_file
from .c11_reads import extracted_fingerprint, text_source_inputs
from .c17_snapshots import backup_database
from .c18_query_syntax import (CAPTION_CONNECTORS, COMMON_WORDS, AllOf, AnyOf, CaseNumber, Near, Phrase, SearchQuery,
                               Word)

SEARCH_SCHEMA_VERSION = 7          # 7: tantivy with common-word grams (6 and older: SQLite FTS5)
SEARCH_KINDS = ("opinion", "order", "brief", "other")
SEARCH_SORTS = ("relevance", "newest", "oldest")
GRAM_JOINER = "\u01c2"             # a letter no text writes: joins a common word to the next in one term
SEARCH_WORD_MAX = 64               # a longer run of letters is no word (tantivy's remove_long)
BOOST_TITLE, BOOST_DESCRIPTION = 4.0, 2.0
SCORE_EXACT = 1000.0               # the typed words in their order
SCORE_NEAR = 30.0                  # all of them within NEAR_SLOP places a word of each other
SCORE_TITLE_NEAR = 60.0            # a title holding them all
SCORE_CASE = 10_000.0              # a document of the typed case number
NEAR_SLOP = 3
STEM_PREFIX_MIN = 4                # a shorter shared start of a word and its stem is not looked up
WRITER_HEAP = 200_000_000
BUILD_HINT = "build it with `kycourt-pipeline index` (or a run whose phases include index)"
_DAY_UNKNOWN_FIRST, _DAY_UNKNOWN_LAST = 0, 99_999_999
SEARCH_META_KEY = "index_meta"     # a sealed copy's catalog: the meta.json of its commit

_SEARCH_WORDS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(
    tantivy.Filter.remove_long(SEARCH_WORD_MAX)).filter(tantivy.Filter.lowercase()).filter(
    tantivy.Filter.ascii_fold()).build()
_SEARCH_STEMS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(
    tantivy.Filter.stemmer("english")).build()


class SearchIndexOutdated(IntegrityError):
    """The index was made by another version of the code: it is built again, not repaired."""


class IndexMissingError(PipelineError):
    """There is no usable search index in the workspace (the message says how to build one)."""


class SearchQueryError(ValueError):
    """A search parameter that cannot be used (a page or limit below 1, an unknown sort)."""


# ------------------------------------------------------------------ words


def composed(text: str) -> str:
    """`text` with its accents composed (NFC): a PDF's "Pen" + U+0303 + "a" is the one word Peña."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def index_words(text: str) -> list[str]:
    """The words of `text` as the index holds them: letters and digits, lowercased, folded to ASCII."""
    return _SEARCH_WORDS.analyze(composed(text))


def word_stems(words: Sequence[str]) -> list[str]:
    """The English stem of each of `words` (words as index_words gives them)."""
    if not words:
        return []
    stems = _SEARCH_STEMS.analyze(" ".join(words))
    if len(stems) == len(words):
        return stems
    return [(_SEARCH_STEMS.analyze(word) or [word])[0] for word in words]


def body_stream(text: str) -> str:
    """What the index is given of a text: its words, each common word followed by its gram term
    (the common word, GRAM_JOINER, the next word), separated by spaces."""
    words = _SEARCH_WORDS.analyze(composed(text))
    words.append("")
    return " ".join([word + " " + word + GRAM_JOINER + after if after and word in COMMON_WORDS else word
                     for word, after in zip(words, words[1:])])


def filed_day(date: str | None) -> int | None:
    """yyyymmdd of an ISO date (its first ten characters); None when it is no date."""
    text = (date or "")[:10]
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return int(text.replace("-", ""))
    return None


# ----------------------------------------------------------------- schema

# A hit's fields, stored in the index; the catalog has the same columns and the index stage's digests.
SEARCH_FIELDS = (
    "document_id", "sha256", "text_source", "text_name", "case_number", "court", "court_code", "year",
    "case_title", "case_type", "docket_entry_type", "description", "publication_status", "judge", "filed_date",
    "document_name", "pages", "text_chars", "kind",
)
_SEARCH_INTEGERS = ("year", "pages", "text_chars")
_SEARCH_CATALOG_COLUMNS = SEARCH_FIELDS + ("text_key", "source_key", "indexed_at")
_SEARCH_CATALOG = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS docs (
    document_id        TEXT PRIMARY KEY,
    sha256             TEXT,
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
    text_key           TEXT NOT NULL,
    source_key         TEXT NOT NULL,
    indexed_at         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_case_number ON docs(case_number);
CREATE INDEX IF NOT EXISTS docs_court_year ON docs(court_code, year);
"""


def _search_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in SEARCH_FIELDS:
        if name in _SEARCH_INTEGERS:
            builder.add_integer_field(name, stored=True, indexed=name == "year", fast=name == "year")
        elif name in ("case_title", "description", "court"):
            builder.add_text_field(name, stored=True, tokenizer_name="ky_words")
        else:
            builder.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic",
                                   fast=name in ("court_code", "publication_status"))
    builder.add_text_field("body", tokenizer_name="ky_stream")
    builder.add_text_field("kinds", tokenizer_name="raw", index_option="basic", fast=True)
    builder.add_text_field("entry", tokenizer_name="ky_lower", index_option="basic")
    builder.add_integer_field("filed", indexed=True, fast=True)       # yyyymmdd, unknown _DAY_UNKNOWN_FIRST
    builder.add_integer_field("filed_last", fast=True)                # yyyymmdd, unknown _DAY_UNKNOWN_LAST
    return builder.build()


def _register_analyzers(index: tantivy.Index) -> None:
    """The analyzers the schema names (tantivy keeps their names only): every open registers them."""
    index.register_tokenizer("ky_words", _SEARCH_WORDS)
    index.register_tokenizer("ky_stream", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    index.register_tokenizer("ky_lower", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(
        tantivy.Filter.lowercase()).build())


def search_kinds(kind: str | None, docket_entry_type: str | None, description: str | None) -> list[str]:
    """The SEARCH_KINDS whose kind filter accepts a document: its derived kind, or, not derived
    yet, those its docket entry type or description begins with (ASCII case folded)."""
    if kind is not None:
        return [kind] if kind in SEARCH_KINDS else []
    return [name for name in SEARCH_KINDS
            if any(text[:len(name)].isascii() and text[:len(name)].lower() == name
                   for text in (docket_entry_type or "", description or ""))]


def _search_document(fields: Mapping[str, Any], text: str) -> tantivy.Document:
    document = tantivy.Document()
    for name in SEARCH_FIELDS:
        value = fields.get(name)
        if value is None or value == "":
            continue
        if name in _SEARCH_INTEGERS:
            document.add_integer(name, int(value))
        else:
            document.add_text(name, composed(str(value)))
    kind = fields.get("kind")
    for name in dict.fromkeys(search_kinds(kind, fields.get("docket_entry_type"), fields.get("description"))
                              + ([kind.lower()] if kind else [])):
        document.add_text("kinds", name)
    if kind is None:    # not derived yet: the type filter reads the start of these
        for value in (fields.get("docket_entry_type"), fields.get("description")):
            if value:
                document.add_text("entry", value)
    day = filed_day(fields.get("filed_date"))
    document.add_integer("filed", _DAY_UNKNOWN_FIRST if day is None else day)
    document.add_integer("filed_last", _DAY_UNKNOWN_LAST if day is None else day)
    document.add_text("body", body_stream(text))
    return document


# ------------------------------------------------------------------ queries


@dataclass(frozen=True)
class SearchFilters:
    court_code: str | None = None
    court_like: str | None = None     # part of the court's name
    kind: str | None = None
    year: int | None = None           # the case number's
    after: str | None = None          # YYYY-MM-DD, the filed day, inclusive
    before: str | None = None         # YYYY-MM-DD, inclusive
    publication_status: str | None = None

    def without(self, name: str) -> "SearchFilters":
        """These filters less `name` (court_code takes court_like with it)."""
        changes = {name: None, **({"court_like": None} if name == "court_code" else {})}
        return replace(self, **changes)

    def active(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self) if getattr(self, item.name) is not None}


@dataclass
class SearchIndexPage:
    total: int                        # every match under the filters
    hits: list[dict[str, Any]] = field(default_factory=list)


# A facet's index column and the filter it leaves out.
SEARCH_FACETS = {"court_code": "court_code", "year": "year", "kinds": "kind", "publication_status": "publication_status"}


class _SearchCompiler:
    """A SearchQuery and its filters as tantivy queries."""

    def __init__(self, schema: tantivy.Schema, searcher: tantivy.Searcher):
        self.schema = schema
        self.searcher = searcher
        self.families: dict[str, list[str]] = {}

    def term(self, name: str, value: str) -> tantivy.Query:
        return tantivy.Query.term_query(self.schema, name, value)

    @staticmethod
    def words(texts: Iterable[str]) -> list[str]:
        return [word for text in texts for word in index_words(text)]

    def family(self, word: str) -> list[str]:
        """`word` and the index's words that share its English stem."""
        if word in self.families:
            return self.families[word]
        family = [word]
        if len(word) >= STEM_PREFIX_MIN and not word.isdigit() and word not in COMMON_WORDS:
            stem = word_stems([word])[0]
            shared = 0
            while shared < min(len(word), len(stem)) and word[shared] == stem[shared]:
                shared += 1
            prefix = word[:shared]
            # The start of a common word would walk every one of that word's gram terms.
            if len(prefix) >= STEM_PREFIX_MIN and not any(common.startswith(prefix) for common in COMMON_WORDS):
                others = [term for term, _ in self.searcher.terms_with_prefix("body", prefix)
                          if GRAM_JOINER not in term and term != word]
                family += [term for term, term_stem in zip(others, word_stems(others)) if term_stem == stem]
        self.families[word] = family
        return family

    def body_phrase(self, words: Sequence[str], slop: int = 0) -> tantivy.Query:
        """`words` in order in the text: a common word and the word after it are one gram term, in
        the place after the common word's (body_stream), so a common word's own places are read
        only when it ends the phrase."""
        terms, offset, covered, last = [], 0, False, len(words) - 1
        for number, word in enumerate(words):
            common = word in COMMON_WORDS
            if common and number < last:
                terms.append((offset + 1, word + GRAM_JOINER + words[number + 1]))
            elif not covered:
                terms.append((offset, word))
            covered = common and number < last
            offset += 2 if common else 1
        if len(terms) == 1:
            return self.term("body", terms[0][1])
        return tantivy.Query.phrase_query(self.schema, "body", terms, slop)

    def field_phrase(self, name: str, words: Sequence[str], slop: int = 0) -> tantivy.Query:
        if len(words) == 1:
            return self.term(name, words[0])
        return tantivy.Query.phrase_query(self.schema, name, list(words), slop)

    def any_field(self, body: tantivy.Query, title: tantivy.Query, description: tantivy.Query) -> tantivy.Query:
        return tantivy.Query.boolean_query([
            (tantivy.Occur.Should, body),
            (tantivy.Occur.Should, tantivy.Query.boost_query(title, BOOST_TITLE)),
            (tantivy.Occur.Should, tantivy.Query.boost_query(description, BOOST_DESCRIPTION))])

    def phrase(self, words: Sequence[str]) -> tantivy.Query:
        if not words:
            return tantivy.Query.empty_query()
        return self.any_field(self.body_phrase(words), self.field_phrase("case_title", words),
                              self.field_phrase("description", words))

    def word(self, node: Word) -> tantivy.Query:
        words = self.words([node.word])
        if len(words) != 1:
            return self.phrase(words)
        word = words[0]
        if node.prefix:
            pattern = re.escape(word) + f"[^{GRAM_JOINER}]*"
            return tantivy.Query.boolean_query([
                (tantivy.Occur.Should, tantivy.Query.regex_query(self.schema, name, pattern))
                for name in ("body", "case_title", "description")])
        family = self.family(word)

        def any_of(name: str) -> tantivy.Query:
            if len(family) == 1:
                return self.term(name, word)
            return tantivy.Query.boolean_query([(tantivy.Occur.Should, self.term(name, term)) for term in family])
        return self.any_field(any_of("body"), any_of("case_title"), any_of("description"))

    def node(self, node: Any) -> tantivy.Query:
        if isinstance(node, Word):
            return self.word(node)
        if isinstance(node, Phrase):
            return self.phrase(self.words(node.words))
        if isinstance(node, CaseNumber):
            options = [(tantivy.Occur.Should,
                        tantivy.Query.const_score_query(self.term("case_number", node.case_number), SCORE_CASE))]
            for words in dict.fromkeys((tuple(self.words(node.words)), tuple(self.words(node.case_number.split("-"))))):
                if words:
                    options.append((tantivy.Occur.Should, self.phrase(words)))
            return tantivy.Query.boolean_query(options)
        if isinstance(node, Near):
            # A common word between two words takes two places of the stream: its own and its gram's.
            return self.body_phrase(self.words(node.words), slop=2 * node.distance)
        if isinstance(node, AnyOf):
            return tantivy.Query.boolean_query([(tantivy.Occur.Should, self.node(option)) for option in node.options])
        if isinstance(node, AllOf):
            return tantivy.Query.boolean_query([(tantivy.Occur.Must, self.node(part)) for part in node.parts])
        raise TypeError(f"not a query node: {node!r}")

    def nearness(self, query: SearchQuery) -> list[tuple[Any, tantivy.Query]]:
        """Should-clauses rewarding the typed words' order and nearness. Each needs every word it
        names, so tantivy evaluates it only on the documents the required words matched."""
        words = self.words(query.sequence)
        while words and words[-1] in COMMON_WORDS:     # a last common word would read its every place
            words.pop()
        if len(words) < 2:
            return []
        if len(query.required) == 1 and isinstance(query.required[0], (Phrase, CaseNumber)) and not query.optional:
            return []
        clauses = [(tantivy.Occur.Should, tantivy.Query.const_score_query(self.body_phrase(words), SCORE_EXACT))]
        kept = [word for word in words if word not in COMMON_WORDS]
        if len(kept) >= 2:
            clauses.append((tantivy.Occur.Should, tantivy.Query.const_score_query(
                self.body_phrase(kept, slop=NEAR_SLOP * len(kept)), SCORE_NEAR)))
        title = [word for word in kept if word not in CAPTION_CONNECTORS]
        if len(title) >= 2:
            clauses.append((tantivy.Occur.Should, tantivy.Query.const_score_query(
                self.field_phrase("case_title", title, slop=2 * len(title)), SCORE_TITLE_NEAR)))
        return clauses

    def filters(self, filters: SearchFilters) -> list[tuple[Any, tantivy.Query]]:
        clauses = []
        if filters.court_code:
            clauses.append(self.term("court_code", filters.court_code))
        if filters.court_like:
            words = self.words([filters.court_like])
            clauses.append(self.field_phrase("court", words) if words else tantivy.Query.empty_query())
        if filters.kind:
            lowered = filters.kind.strip().lower()
            if lowered in SEARCH_KINDS:
                clauses.append(self.term("kinds", lowered))
            else:     # another derived kind, or the start of the docket entry type or description
                clauses.append(tantivy.Query.boolean_query([
                    (tantivy.Occur.Should, self.term("kinds", lowered)),
                    (tantivy.Occur.Should, tantivy.Query.regex_query(self.schema, "entry", re.escape(lowered) + ".*"))]))
        if filters.year is not None:
            clauses.append(tantivy.Query.range_query(self.schema, "year", tantivy.FieldType.Integer,
                                                     filters.year, filters.year))
        if filters.after or filters.before:
            clauses.append(tantivy.Query.range_query(
                self.schema, "filed", tantivy.FieldType.Integer, filed_day(filters.after) or _DAY_UNKNOWN_FIRST + 1,
                filed_day(filters.before) or _DAY_UNKNOWN_LAST - 1))
        if filters.publication_status:
            clauses.append(self.term("publication_status", filters.publication_status))
        return [(tantivy.Occur.Must, clause) for clause in clauses]

    def compile(self, query: SearchQuery, filters: SearchFilters, *, rank: bool) -> tantivy.Query:
        clauses = [(tantivy.Occur.Must, self.node(node)) for node in query.required]
        clauses += [(tantivy.Occur.MustNot, self.node(node)) for node in query.excluded]
        clauses += self.filters(filters)
        if not any(occur == tantivy.Occur.Must for occur, _ in clauses):
            clauses.append((tantivy.Occur.Must, tantivy.Query.all_query()))
        if rank:
            clauses += self.nearness(query)
        return tantivy.Query.boolean_query(clauses)


# ------------------------------------------------------------------ the index


def _read_only_shadow(index_path: Path) -> Path:
    """A private folder of links to the files of an index this process cannot write (a read-only
    copy): tantivy takes a lock file beside meta.json even to read, which read-only media refuse."""
    shadow = Path(tempfile.mkdtemp(prefix="kycourt-search-"))
    for entry in index_path.iterdir():
        if entry.is_file() and not entry.name.endswith(".lock"):
            (shadow / entry.name).symlink_to(entry.resolve())
    return shadow


class SearchIndex:
    """The search index of one folder (the workspace, or serve's copy): tantivy's and the catalog."""

    def __init__(self, folder: Path, catalog: sqlite3.Connection, index: tantivy.Index, readonly: bool,
                 shadow: Path | None = None):
        self.folder = folder
        self.catalog = catalog
        self.index = index
        self.readonly = readonly
        self._shadow = shadow        # the private folder of links a read-only copy is read through
        self._writer: tantivy.IndexWriter | None = None
        self._pending: list[tuple[str, dict[str, Any] | None]] = []

    @staticmethod
    def exists(folder: str | os.PathLike) -> bool:
        folder = Path(folder)
        return (folder / SEARCH_DB_FILENAME).is_file() and (folder / SEARCH_INDEX_DIRNAME / "meta.json").is_file()

    @classmethod
    def open(cls, folder: str | os.PathLike, *, readonly: bool = False) -> "SearchIndex":
        """The index of `folder`, created empty by a writer where there is none. IntegrityError when
        it cannot be read (or, read-only, does not exist), SearchIndexOutdated when another
        version of the code made it."""
        folder = Path(folder)
        catalog_path, index_path = folder / SEARCH_DB_FILENAME, folder / SEARCH_INDEX_DIRNAME
        if readonly and not cls.exists(folder):
            raise IntegrityError(f"no search index in {folder}")
        catalog = _open_catalog(catalog_path, readonly=readonly)
        try:
            version = _catalog_version(catalog)
            if version == 0 and not readonly:
                if index_path.exists():       # an index without its catalog: nothing to keep
                    shutil.rmtree(index_path)
                _create_catalog(catalog)
            elif version != SEARCH_SCHEMA_VERSION:
                raise SearchIndexOutdated(f"{catalog_path} is search index version {version}, this code's is "
                                          f"{SEARCH_SCHEMA_VERSION}: it is built again")
            if not readonly:
                index_path.mkdir(exist_ok=True)
                if not (index_path / "meta.json").is_file() and _catalog_rows(catalog):
                    raise IntegrityError(f"{index_path} is missing while its catalog lists documents")
            shadow = _read_only_shadow(index_path) if readonly and not os.access(index_path, os.W_OK) else None
            try:
                index = tantivy.Index(_search_schema(), path=str(shadow or index_path), reuse=True)
                _register_analyzers(index)
                searcher = index.searcher()
            except (OSError, ValueError, RuntimeError) as exc:
                if shadow is not None:
                    shutil.rmtree(shadow, ignore_errors=True)
                raise IntegrityError(f"{index_path} cannot be opened: {exc}") from None
            recorded = int((_kv(catalog, "index_opstamp") or "0"))
            if recorded > _meta_opstamp(index_path):
                raise IntegrityError(f"{catalog_path} records a commit {index_path} does not have")
            del searcher
        except BaseException:
            catalog.close()
            raise
        return cls(folder, catalog, index, readonly, shadow)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.rollback()
            self._writer = None
        self.catalog.close()
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None

    # ----- the catalog

    def indexed(self) -> dict[str, tuple[str, str, str]]:
        """document_id -> (text_name, text_key, source_key) of every indexed document."""
        return {row[0]: (row[1], row[2], row[3]) for row in self.catalog.execute(
            "SELECT document_id, text_name, text_key, source_key FROM docs")}

    def indexed_count(self) -> int:
        return _catalog_rows(self.catalog)

    def get(self, document_id: str) -> dict[str, Any] | None:
        row = self.catalog.execute("SELECT * FROM docs WHERE document_id = ?", (document_id,)).fetchone()
        return None if row is None else dict(row)

    # ----- writes

    def writer(self) -> tantivy.IndexWriter:
        if self.readonly:
            raise IntegrityError(f"the search index of {self.folder} was opened read-only")
        if self._writer is None:
            self._writer = self.index.writer(WRITER_HEAP, 1)
        return self._writer

    def add(self, fields: Mapping[str, Any], text: str) -> None:
        """Indexes a document (its catalog `fields`) with `text` at the next commit, in place of
        whatever the index held of it."""
        writer = self.writer()
        writer.delete_documents_by_term("document_id", fields["document_id"])
        writer.add_document(_search_document(fields, text))
        self._pending.append((fields["document_id"], dict(fields)))

    def remove(self, document_id: str) -> None:
        self.writer().delete_documents_by_term("document_id", document_id)
        self._pending.append((document_id, None))

    @property
    def pending(self) -> int:
        return len(self._pending)

    def commit(self, **kv: Any) -> int:
        """Publishes the pending writes (tantivy's commit), then records them and `kv` in the
        catalog; returns how many there were."""
        if not self._pending and not kv:
            return 0
        opstamp = self.writer().commit()
        now = utc_now()
        self.catalog.execute("BEGIN IMMEDIATE")
        try:
            for document_id, values in self._pending:
                if values is None:
                    self.catalog.execute("DELETE FROM docs WHERE document_id = ?", (document_id,))
                    continue
                row = [values.get(column) for column in _SEARCH_CATALOG_COLUMNS[:-1]] + [now]
                self.catalog.execute(
                    f"INSERT INTO docs({', '.join(_SEARCH_CATALOG_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(_SEARCH_CATALOG_COLUMNS))}) ON CONFLICT(document_id) DO UPDATE SET "
                    f"{', '.join(f'{column} = excluded.{column}' for column in _SEARCH_CATALOG_COLUMNS[1:])}", row)
            for key, value in {**kv, "index_opstamp": opstamp}.items():
                self.catalog.execute("INSERT INTO kv(key, value) VALUES (?, ?) "
                                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, str(value)))
            self.catalog.execute("COMMIT")
        except BaseException:
            self.catalog.execute("ROLLBACK")
            raise
        written, self._pending = len(self._pending), []
        self.index.reload()
        return written

    def finish(self) -> None:
        """Ends the writer: tantivy's merges finish and the files no commit uses are deleted."""
        if self._writer is not None:
            self._writer.garbage_collect_files()
            self._writer.wait_merging_threads()
            self._writer = None
        self.index.reload()

    # ----- search

    def search(self, query: SearchQuery, filters: SearchFilters = SearchFilters(), *, sort: str = "relevance",
               page: int = 1, limit: int = 20) -> SearchIndexPage:
        """Page `page` (from 1) of `limit` hits of `query` under `filters`, with the total; each hit
        is its SEARCH_FIELDS and `score` (higher is better; None when sorted by date)."""
        if page < 1 or limit < 1:
            raise SearchQueryError(f"page and limit count from 1 (page {page}, limit {limit})")
        if sort not in SEARCH_SORTS:
            raise SearchQueryError(f"sort is one of {', '.join(SEARCH_SORTS)}, not {sort!r}")
        searcher = self.index.searcher()
        if searcher.num_docs == 0:
            return SearchIndexPage(0)
        if query.empty and sort == "relevance":
            sort = "newest"
        compiled = _SearchCompiler(self.index.schema, searcher).compile(query, filters, rank=sort == "relevance")
        offset = (page - 1) * limit
        if sort == "relevance":
            result = searcher.search(compiled, limit, count=True, offset=offset)
        elif sort == "newest":
            result = searcher.search(compiled, limit, count=True, order_by_field="filed", offset=offset,
                                     order=tantivy.Order.Desc)
        else:
            result = searcher.search(compiled, limit, count=True, order_by_field="filed_last", offset=offset,
                                     order=tantivy.Order.Asc)
        hits = []
        for key, address in result.hits:
            stored = searcher.doc(address).to_dict()
            hit: dict[str, Any] = {name: stored[name][0] if stored.get(name) else None for name in SEARCH_FIELDS}
            hit["score"] = float(key) if sort == "relevance" else None
            hits.append(hit)
        return SearchIndexPage(result.count, hits)

    def count(self, query: SearchQuery, filters: SearchFilters = SearchFilters()) -> int:
        searcher = self.index.searcher()
        if searcher.num_docs == 0:
            return 0
        compiled = _SearchCompiler(self.index.schema, searcher).compile(query, filters, rank=False)
        return searcher.search(compiled, 1, count=True).count

    def matching(self, query: SearchQuery, filters: SearchFilters, document_ids: Sequence[str]) -> set[str]:
        """Which of `document_ids` match `query` under `filters` (a saved search's feed asks this of
        the newest documents)."""
        searcher = self.index.searcher()
        found: set[str] = set()
        if searcher.num_docs == 0:
            return found
        compiled = _SearchCompiler(self.index.schema, searcher).compile(query, filters, rank=False)
        for start in range(0, len(document_ids), 1000):
            chunk = list(document_ids[start:start + 1000])
            among = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, compiled),
                (tantivy.Occur.Must, tantivy.Query.term_set_query(self.index.schema, "document_id", chunk))])
            for _, address in searcher.search(among, len(chunk), count=False).hits:
                found.add(searcher.doc(address)["document_id"][0])
        return found

    def facets(self, query: SearchQuery, filters: SearchFilters, columns: Sequence[str] = SEARCH_FACETS
               ) -> dict[str, list[tuple[Any, int]]]:
        """Per column of SEARCH_FACETS, (value, documents) among the matches of `query` under
        `filters` less the column's own: the choices a user has. Most documents first. The columns
        whose filter is not set are counted together, in one pass over the matches."""
        searcher = self.index.searcher()
        counts: dict[str, list[tuple[Any, int]]] = {column: [] for column in columns}
        if searcher.num_docs == 0:
            return counts
        groups: dict[SearchFilters, list[str]] = {}
        for column in columns:
            own = SEARCH_FACETS[column]
            unset = getattr(filters, own) is None and (own != "court_code" or filters.court_like is None)
            groups.setdefault(filters if unset else filters.without(own), []).append(column)
        for under, names in groups.items():
            compiled = _SearchCompiler(self.index.schema, searcher).compile(query, under, rank=False)
            result = searcher.aggregate(compiled, {name: {"terms": {"field": name, "size": 500}} for name in names})
            for name in names:
                counts[name] = [(int(bucket["key"]) if name == "year" else bucket["key"], bucket["doc_count"])
                                for bucket in result[name]["buckets"]]
        return counts


def open_search_index(workspace: str | os.PathLike) -> SearchIndex:
    """The workspace's index, read-only; IndexMissingError says how to build it."""
    if not SearchIndex.exists(workspace):
        raise IndexMissingError(f"no search index in {workspace}: {BUILD_HINT}")
    try:
        return SearchIndex.open(workspace, readonly=True)
    except IntegrityError as exc:
        raise IndexMissingError(f"search index unusable ({exc}): {BUILD_HINT}") from None


def _open_catalog(path: Path, *, readonly: bool) -> sqlite3.Connection:
    if readonly and not is_sqlite_file(path):
        raise IntegrityError(f"{path} is not a search index catalog")
    try:
        catalog = connect(path, readonly=readonly)
        _catalog_version(catalog)
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(f"{path} cannot be read: {exc}") from None
    return catalog


def _create_catalog(catalog: sqlite3.Connection) -> None:
    catalog.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SEARCH_CATALOG.split(";"):
            if statement.strip():
                catalog.execute(statement)
        catalog.execute("INSERT OR REPLACE INTO kv(key, value) VALUES ('search_schema_version', ?)",
                        (str(SEARCH_SCHEMA_VERSION),))
        catalog.execute("COMMIT")
    except BaseException:
        catalog.execute("ROLLBACK")
        raise


def _catalog_version(catalog: sqlite3.Connection) -> int:
    if not catalog.execute("SELECT 1 FROM sqlite_master WHERE name = 'kv'").fetchone():
        return 0
    value = _kv(catalog, "search_schema_version")
    return int(value) if value and value.isdigit() else 0


def _catalog_rows(catalog: sqlite3.Connection) -> int:
    if not catalog.execute("SELECT 1 FROM sqlite_master WHERE name = 'docs'").fetchone():
        return 0
    return catalog.execute("SELECT COUNT(*) FROM docs").fetchone()[0]


def _kv(catalog: sqlite3.Connection, key: str) -> str | None:
    row = catalog.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _meta_opstamp(index_path: Path) -> int:
    try:
        return int(json.loads((index_path / "meta.json").read_text(encoding="utf-8")).get("opstamp", 0))
    except (OSError, ValueError, AttributeError):
        return 0


# ------------------------------------------------------------------ the store's copy

_SEARCH_PACK_MEMBER = re.compile(rf"{re.escape(SEARCH_DB_FILENAME)}|{re.escape(SEARCH_INDEX_DIRNAME)}/[\w.-]+")
# The files of a tantivy segment of this schema, by suffix (its delete file apart): a commit needs each.
SEGMENT_FILE_SUFFIXES = ("fast", "fieldnorm", "idx", "pos", "store", "term")
_FOOTER_MAGIC = 1337               # tantivy's footer: its JSON (with the CRC-32), its length, this number


def commit_file_names(meta: str) -> list[str]:
    """The file names of the tantivy commit whose meta.json is `meta` (meta.json apart): each of its
    segments' files and, for a segment with deletes, the delete file of the opstamp it records.
    IntegrityError when `meta` is not a commit's meta.json."""
    try:
        segments = json.loads(meta)["segments"]
        names = []
        for segment in segments:
            segment_id = segment["segment_id"].replace("-", "")
            if not re.fullmatch(r"[0-9a-f]{32}", segment_id):
                raise ValueError(f"segment id {segment_id!r}")
            names += [f"{segment_id}.{suffix}" for suffix in SEGMENT_FILE_SUFFIXES]
            if segment.get("deletes"):
                names.append(f"{segment_id}.{int(segment['deletes']['opstamp'])}.del")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise IntegrityError(f"not a search index commit (meta.json): {exc}") from None
    return sorted(names)


def index_file_sound(path: str | os.PathLike) -> bool:
    """Whether a file of a tantivy segment holds the bytes it was written with: the CRC-32 its footer
    records (tantivy's own, over the bytes before the footer) is theirs."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < 8:
                return False
            handle.seek(size - 8)
            length, magic = struct.unpack("<II", handle.read(8))
            if magic != _FOOTER_MAGIC or length + 8 > size:
                return False
            body = size - 8 - length
            handle.seek(body)
            recorded = json.loads(handle.read(length))["crc"]
            handle.seek(0)
            crc, left = 0, body
            while left:
                chunk = handle.read(min(left, 1 << 20))
                if not chunk:
                    return False
                crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return crc == recorded


def _search_commit_files(index_path: Path) -> tuple[str, list[Path]]:
    """(meta.json's text, the files of the commit it names): a consistent set even while a writer
    commits or merges, or FileNotFoundError when one of them was deleted meanwhile (ask again).
    IntegrityError when a segment has a file SEGMENT_FILE_SUFFIXES does not name (another format)."""
    meta = (index_path / "meta.json").read_text(encoding="utf-8")
    files = [index_path / name for name in commit_file_names(meta)]
    segments = {path.name.split(".", 1)[0] for path in files}
    named = {path.name for path in files}
    unknown = [path.name for path in index_path.iterdir() if path.name.split(".", 1)[0] in segments
               and path.name not in named and not path.name.endswith(".del")]
    if unknown:
        raise IntegrityError(f"{index_path} has segment files this code does not know ({unknown[0]})")
    for path in files:
        path.stat()
    return meta, files


def _search_commit(index_path: Path, place: Any) -> None:
    """`place(path, name)` for each file of the index's latest commit, then its meta.json text as
    place(None, text); asks again (three times) when a writer deletes a file meanwhile."""
    for attempt in range(3):
        try:
            meta, files = _search_commit_files(index_path)
            for path in files:
                place(path, path.name)
            place(None, meta)
            return
        except FileNotFoundError:
            if attempt == 2:
                raise


def seal_search_copy(folder: str | os.PathLike) -> str:
    """Records, in the catalog of a copy `copy_search_index` made in `folder`, the meta.json of its
    commit (kv SEARCH_META_KEY): the catalog alone then names the files it goes with, so the store's
    catalog is the index's one commit point. Returns meta.json's text."""
    folder = Path(folder)
    meta = (folder / SEARCH_INDEX_DIRNAME / "meta.json").read_text(encoding="utf-8")
    catalog = _open_catalog(folder / SEARCH_DB_FILENAME, readonly=False)
    try:
        with catalog:
            catalog.execute("INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
                            "excluded.value", (SEARCH_META_KEY, meta))
    finally:
        catalog.close()
    return meta


def sealed_commit(catalog_path: str | os.PathLike) -> str | None:
    """The meta.json a sealed copy's catalog records (`seal_search_copy`); None when it records none."""
    catalog = _open_catalog(Path(catalog_path), readonly=True)
    try:
        return _kv(catalog, SEARCH_META_KEY) if _catalog_version(catalog) else None
    finally:
        catalog.close()


def copy_search_index(folder: str | os.PathLike, target: str | os.PathLike) -> None:
    """A consistent read-only copy of `folder`'s index in `target` (replacing one there): the catalog
    through SQLite's backup, tantivy's files of the latest commit as hard links (copies across
    file systems): its segment files are never rewritten, only deleted once unused."""
    folder, target = Path(folder), Path(target)
    staging = target / f"{SEARCH_INDEX_DIRNAME}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    def place(path: Path | None, name: str) -> None:
        if path is None:
            (staging / "meta.json").write_text(name, encoding="utf-8")
            return
        try:
            os.link(path, staging / name)
        except OSError:
            shutil.copy2(path, staging / name)
    _search_commit(folder / SEARCH_INDEX_DIRNAME, place)
    backup_database(folder / SEARCH_DB_FILENAME, target / SEARCH_DB_FILENAME)
    shutil.rmtree(target / SEARCH_INDEX_DIRNAME, ignore_errors=True)
    os.replace(staging, target / SEARCH_INDEX_DIRNAME)


def install_search_index(staging: str | os.PathLike, folder: str | os.PathLike, *, same_commit: bool = True) -> None:
    """Moves the index in `staging` (`ky_search/`: meta.json and the files of its commit;
    `ky_search.sqlite`) into `folder` (which has none), once every file of the commit is there and
    sound (index_file_sound), it opens, is this version's, and its catalog lists as many documents as
    tantivy holds and (`same_commit`) records the commit meta.json names. IntegrityError
    (SearchIndexOutdated) otherwise, with nothing put in place."""
    staging, folder = Path(staging), Path(folder)
    index_path = staging / SEARCH_INDEX_DIRNAME
    try:
        meta = (index_path / "meta.json").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{index_path} has no readable meta.json: {exc}") from None
    for name in commit_file_names(meta):
        if not (index_path / name).is_file():
            raise IntegrityError(f"{index_path} lacks {name}, a file of its commit")
        if not index_file_sound(index_path / name):
            raise IntegrityError(f"{index_path}/{name} is damaged: its bytes do not agree with its checksum")
    restored = SearchIndex.open(staging, readonly=True)
    try:
        documents, listed = restored.index.searcher().num_docs, restored.indexed_count()
        recorded = int(_kv(restored.catalog, "index_opstamp") or 0)
    finally:
        restored.close()
    if documents != listed:
        raise IntegrityError(f"{staging}: the index holds {documents} documents, its catalog lists {listed}")
    if same_commit and recorded != _meta_opstamp(index_path):
        raise IntegrityError(f"{staging}: the catalog records commit {recorded}, the index is commit "
                             f"{_meta_opstamp(index_path)}")
    os.replace(staging / SEARCH_DB_FILENAME, folder / SEARCH_DB_FILENAME)
    for suffix in ("-wal", "-shm"):
        Path(f"{folder / SEARCH_DB_FILENAME}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(folder / SEARCH_INDEX_DIRNAME, ignore_errors=True)
    os.replace(index_path, folder / SEARCH_INDEX_DIRNAME)


def unpack_search_index(pack: str | os.PathLike, folder: str | os.PathLike) -> None:
    """Puts the index of an earlier version's one-file copy (a tar of `ky_search/` and
    `ky_search.sqlite`) in `folder` (which has none), checked by install_search_index (its catalog
    may be of an earlier commit: the index stage catches up); IntegrityError otherwise, with nothing
    put in place."""
    folder = Path(folder)
    staging = folder / "tmp" / "search-restore"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        try:
            with tarfile.open(pack) as tar:
                members = tar.getmembers()
                if not members or any(not member.isfile() or not _SEARCH_PACK_MEMBER.fullmatch(member.name)
                                      for member in members):
                    raise IntegrityError(f"{pack} is not a search index pack")
                for member in members:
                    tar.extract(member, staging, set_attrs=False)
        except (tarfile.TarError, OSError) as exc:
            raise IntegrityError(f"{pack} cannot be read: {exc}") from None
        install_search_index(staging, folder, same_commit=False)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_search_index(folder: str | os.PathLike) -> None:
    """Deletes `folder`'s index (catalog and tantivy's files): derived data, built again."""
    folder = Path(folder)
    shutil.rmtree(folder / SEARCH_INDEX_DIRNAME, ignore_errors=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{folder / SEARCH_DB_FILENAME}{suffix}").unlink(missing_ok=True)


# ------------------------------------------------------------------ coverage


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
    if not SearchIndex.exists(workspace):
        return IndexCoverage(exists=False, problem=f"no search index in {workspace}")
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
        search = SearchIndex.open(workspace, readonly=True)
    except IntegrityError as exc:
        return IndexCoverage(exists=False, extracted=len(wanted), problem=str(exc))
    try:
        indexed = {document_id: name for document_id, (name, _, _) in search.indexed().items()}
    finally:
        search.close()
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
        catalog = connect(workspace / SEARCH_DB_FILENAME, readonly=True)
        try:
            seen = _kv(catalog, "state_fingerprint") if _catalog_version(catalog) == SEARCH_SCHEMA_VERSION else None
        finally:
            catalog.close()
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
