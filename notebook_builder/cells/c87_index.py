"""Index: the full-text search index of every extracted document's best text (`ky_search.sqlite`), kept level.

Guarantees:
- `index(ctx)` first records each document's best text (c33_best_text: the
  OCR merge of a scanned PDF, its text layer, or the court's own text where
  both are empty or very poor), then brings the workspace's
  `ky_search.sqlite` level with the state database, incrementally: a document
  newly extracted, or whose best text changed (OCR's text appeared, another
  PDF, the court's text replaced a poor one), is indexed with that text; one
  whose title, description, year or filter tokens (court code, kind,
  publication status) changed is indexed again with the same text; one
  whose other fields changed (the court's name, the other optional fields)
  gets them rewritten without its text being read; one no longer extracted
  leaves the index. What is indexed and unchanged is not touched.
- The index holds no copy of the texts (SearchDatabase: FTS5 over the text
  files): snippets are read from the workspace's texts, and re-indexing or
  removing a document reads its former text again (workspace, else store). A
  document whose text (new or former) neither holds is counted and left as
  it is for a later run, never a crash.
- Filter and facet columns: court (and its code CA/SC), year, case number,
  case type, docket entry type, description, publication status, judge,
  filed date, which text was indexed (`text_source`), from `documents` and,
  when other parts of the project have added them, the `cases`,
  `docket_entries` and `derived` tables (found by name and column at run
  time; null when absent). Ranking is FTS5's bm25 (title x10, description x4,
  text x1). A court code, kind or publication status filter is applied by
  FTS5 itself (the document's filter tokens, SearchDatabase), a year by its
  rowid range.
- A fresh runtime (no index in the workspace) takes the store's copy first,
  checked (quick_check, schema version), and catches up from there; with
  none, the index is built from the texts (the workspace's, else fetched
  from the store). A damaged index is moved aside and rebuilt; one of an
  older schema version is deleted and rebuilt: it is derived data.
- The stage runs last, so the index is mirrored to the store (a consistent
  one-file copy, `ky_search.sqlite`) once per session, when it changed or
  the store lacks it; never at checkpoints: the state snapshot that every
  checkpoint pushes does not grow.
- `index_coverage()` tells verify and the CLI which extracted documents the
  index lacks or holds with another text; `search_archive()` is the query of
  the CLI, the notebook and the benchmark. The index leaves out the common
  words (c10 SEARCH_COMMON_WORDS) and so does every query (c10 index_query):
  a phrase matches whichever of them stand between its other words, and
  snippets still mark it whole. A query FTS5 cannot parse raises
  `SearchQueryError`; one of common words alone (or with one beside an
  operator) its subclass `CommonWordsQuery`; a missing or outdated index
  `IndexMissingError`.

Knobs read: WORKSPACE, PROGRESS, MIN_TEXT_QUALITY (the store through the context).
"""
from __future__ import annotations

import hashlib
import html
import itertools
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .c00_config import IntegrityError, PipelineError, kentucky_date
from .c06_layout import SEARCH_DB_FILENAME, TEXT_LAYER, text_name
from .c10_database import Database, is_sqlite_file
from .c11_reads import extracted_fingerprint, iter_document_records
from .c17_snapshots import backup_database, snapshot_problems
from .c18_search_index import (INDEX_WORD, SEARCH_COMMON_WORDS, SEARCH_RANK_CAP, SearchDatabase, SearchIndexOutdated,
                               SearchQueryError, query_terms, search_bucket, search_facets, term_words)
from .c34_mirror import progress
from .c35_context import Context
from .c33_best_text import fetch_from_store, fetch_into_workspace, read_text, record_text_sources

log_index = logging.getLogger("kycourt.index")

INDEX_BATCH = 200             # documents written per transaction
INDEX_OPTIMIZE_MIN = 1000     # a build that indexed at least this many texts (and a tenth of the
                              # index) merges its segments: queries after a full build are faster
INDEX_COURT_CODES = {"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"}
# (name, type, description) of the archive's fields: the export's records, in this order, and the
# column descriptions Datasette shows.
EXPORT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("document_id", "string", "the court's document id (64 hex digits)"),
    ("case_number", "string", "the case number, e.g. 2019-CA-0012"),
    ("court", "string", "the court's name"),
    ("court_code", "string", "CA (Court of Appeals) or SC (Supreme Court)"),
    ("year", "int64", "the case number's year (else the filed date's)"),
    ("case_title", "string", "the case's short title, on one line"),
    ("case_type", "string", "the case type, when known"),
    ("case_id", "string", "the court's case id"),
    ("docket_entry_id", "string", "the docket entry the document belongs to"),
    ("docket_entry_type", "string", "the docket entry's type, when known"),
    ("description", "string", "the docket entry's description, e.g. OPINION AFFIRMING"),
    ("document_name", "string", "the file name the court gives the document"),
    ("filed_date", "string", "when the document was filed (ISO 8601)"),
    ("publication_status", "string", "TO BE PUBLISHED / NOT TO BE PUBLISHED, when known"),
    ("judge", "string", "the authoring judge, when known"),
    ("kind", "string", "opinion, order, brief or other, as derive found it; null when unknown"),
    ("rendered_date", "string", "the date the opinion or order was rendered (ISO 8601), as derive read it"),
    ("disposition", "string", "the decision, e.g. AFFIRMING or REVERSING AND REMANDING, as derive read it"),
    ("lower_court", "string", "the court appealed from, as derive read it"),
    ("citations", "list<string>", "the citations derive found in the text, normalized, in the order they "
                                  "first appear"),
    ("status", "string", "discovered, downloaded, extracted or failed"),
    ("http_status", "int64", "the court's last HTTP status for the download"),
    ("document_available", "bool", "false: the court lists the document but withholds its file (a failed one "
                                   "is withheld: never requested, its 404 not the court's answer); null when unknown"),
    ("sha256", "string", "SHA-256 of the PDF; the store holds it as pdf_by_hash/<sha256>.pdf"),
    ("size_bytes", "int64", "size of the PDF in bytes"),
    ("pages", "int64", "pages of the PDF"),
    ("extracted_chars", "int64", "characters of extracted text (0: no text layer)"),
    ("likely_scanned", "bool", "too few characters per page: probably a scan"),
    ("extract_failure", "string", "why no text will ever be extracted (unparseable, encrypted, empty, too "
                                  "large, ...); null otherwise"),
    ("pdf", "string", "the PDF's name in the store"),
    ("text_source", "string", "which text `text` is: text_layer (the PDF's), ocr (its scanned pages "
                              "recognised and merged in) or court_text (the court's own, where ours is empty or poor)"),
    ("text", "string", "the document's best text (null when not extracted, or its file is unavailable)"),
)
BUILD_HINT = "build it with `kycourt-pipeline index` (or a run whose phases include index)"


class IndexMissingError(PipelineError):
    """There is no usable search index in the workspace (the message says how to build one)."""


@dataclass
class IndexResult:
    indexed: int = 0          # texts (re)indexed
    refreshed: int = 0        # metadata-only rewrites
    removed: int = 0          # documents no longer extracted
    missing_texts: int = 0    # documents whose text (or former text) neither workspace nor store holds
    total: int = 0            # documents in the index afterwards
    text_bytes: int = 0       # bytes of text read
    restored_from_store: bool = False
    rebuilt: bool = False     # a damaged or outdated index was set aside
    optimized: bool = False
    pushed: bool = False      # mirrored to the store
    stopped: bool = False


# ------------------------------------------------------------- decisions


def court_code_of(case_number: str | None, court: str | None) -> str | None:
    """CA or SC, from the case number ("2019-CA-0012", "2024 CA ADMIN - ...") or the court's name."""
    code = (case_number or "")[5:7].upper()
    if code in INDEX_COURT_CODES:
        return code
    name = (court or "").lower()
    if "appeals" in name:
        return "CA"
    if "supreme" in name:
        return "SC"
    return None


def year_of(case_number: str | None, filed_date: str | None) -> int | None:
    """The case number's year, else the filed date's."""
    for text in (case_number, kentucky_date(filed_date)):
        head = (text or "")[:4]
        if head.isdigit() and 1900 <= int(head) <= 2100:
            return int(head)
    return None


def search_fields(record: Any) -> dict[str, Any]:
    """The `docs` row of one state-database record (documents + optional fields), its text named
    by the recorded best text (the text layer where none is recorded yet)."""
    fields = {
        "document_id": record["document_id"], "sha256": record["sha256"],
        "text_source": record["text_source"] or TEXT_LAYER,
        "case_number": record["case_number"], "court": record["court"],
        "court_code": court_code_of(record["case_number"], record["court"]),
        "year": year_of(record["case_number"], record["filed_date"]),
        "case_title": _one_line(record["case_title"]), "case_type": record["case_type"],
        "docket_entry_type": record["docket_entry_type"], "description": record["description"],
        "publication_status": record["publication_status"], "judge": record["judge"],
        "filed_date": kentucky_date(record["filed_date"]), "document_name": record["document_name"],
        "pages": record["pages"], "kind": record["kind"],
    }
    fields["text_name"] = text_name(fields["text_source"], record["sha256"], record["court_text_sha256"])
    fields["facets"] = search_facets(fields)
    fields["text_key"] = _digest(fields["text_name"], fields["case_title"], fields["description"],
                                 fields["facets"], search_bucket(fields["year"], fields["court_code"]))
    fields["source_key"] = _digest(*(fields[name] for name in sorted(fields) if name != "text_key"))
    return fields


def _one_line(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


def _digest(*values: Any) -> str:
    return hashlib.blake2b(repr(values).encode("utf-8"), digest_size=12).hexdigest()


def plan_index(wanted: dict[str, dict[str, Any]], indexed: dict[str, tuple[int, str, str, str]]
               ) -> tuple[list[str], list[str], list[int]]:
    """(document ids to index with their text: new, or another text, title, description or
    bucket; ids whose other fields only to rewrite; doc_rowids to delete)."""
    texts, fields_only = [], []
    for document_id, fields in wanted.items():
        have = indexed.get(document_id)
        if have is None or have[2] != fields["text_key"]:
            texts.append(document_id)
        elif have[3] != fields["source_key"]:
            fields_only.append(document_id)
    deletes = [have[0] for document_id, have in indexed.items() if document_id not in wanted]
    return sorted(texts), sorted(fields_only), sorted(deletes)


def should_optimize(indexed_now: int, total: int) -> bool:
    return indexed_now >= INDEX_OPTIMIZE_MIN and indexed_now * 10 >= total


def court_filter(value: str | None) -> dict[str, str]:
    """search() arguments of a --court value: CA/SC (or 'appeals'/'supreme'), else part of the name."""
    if not value or not value.strip():
        return {}
    text = value.strip()
    if text.upper() in INDEX_COURT_CODES:
        return {"court_code": text.upper()}
    lowered = text.lower()
    if lowered in ("appeals", "court of appeals", "coa"):
        return {"court_code": "CA"}
    if lowered in ("supreme", "supreme court"):
        return {"court_code": "SC"}
    return {"court_like": text}


_INDEX_BAREWORD = re.compile(r"^[\w\s\"*()^:+]*$", re.UNICODE)


def query_hint(query: str) -> str:
    """What to tell a user whose query FTS5 could not parse."""
    if not _INDEX_BAREWORD.match(query):
        return ('put words with punctuation in double quotes, e.g. "2019-CA-0012" or "v." ; '
                'operators are AND, OR, NOT, NEAR(a b, 5), "a phrase", prefix*')
    return 'check the quotes and parentheses; operators are AND, OR, NOT, NEAR(a b, 5), "a phrase", prefix*'


# ----------------------------------------------------------------- stage


def index(ctx: Context) -> IndexResult:
    """Brings ky_search.sqlite level with the extracted documents; mirrors it to the store."""
    result = IndexResult()
    db = ctx.open_database()
    path = ctx.path(SEARCH_DB_FILENAME)
    if not path.exists():
        result.restored_from_store = _index_restore(ctx, path)
    sdb = _index_open(path, result)
    try:
        changed = _index_catch_up(ctx, db, sdb, result)
        result.total = sdb.indexed_count()
        if changed:
            sdb.kv_set("generation", int(sdb.kv_get("generation", "0")) + 1)
        if changed or not ctx.mirror.has(SEARCH_DB_FILENAME):
            result.pushed = _index_push(ctx, path)
    finally:
        sdb.close()
    log_index.info("index: %d texts indexed (%.1f MB), %d refreshed, %d removed, %d texts missing; "
                   "%d documents in the index", result.indexed, result.text_bytes / 1e6, result.refreshed,
                   result.removed, result.missing_texts, result.total)
    return result


def _index_open(path: Path, result: IndexResult) -> SearchDatabase:
    try:
        return SearchDatabase.open(path)
    except SearchIndexOutdated as exc:   # nothing in it is worth keeping: its size is the disk's
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            name.unlink(missing_ok=True)
        log_index.warning("%s; building the index anew from the texts", exc)
    except IntegrityError as exc:
        aside = _index_move_aside(path)
        log_index.warning("search index unusable (%s); moved to %s, rebuilding it from the texts", exc, aside.name)
    result.rebuilt = True
    return SearchDatabase.open(path)


def _index_move_aside(path: Path) -> Path:
    number = 1
    while (aside := path.with_name(f"{path.name}.damaged-{number}")).exists():
        number += 1
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return aside


def _index_restore(ctx: Context, path: Path) -> bool:
    """The store's copy of the index into the workspace, if it has a sound one."""
    if not ctx.mirror.has(SEARCH_DB_FILENAME):
        return False
    temp = ctx.path("tmp") / f"{SEARCH_DB_FILENAME}.restore"
    if not ctx.mirror.fetch(SEARCH_DB_FILENAME, temp):
        return False
    problems = snapshot_problems(temp) if is_sqlite_file(temp) else ["not an SQLite database"]
    if not problems:
        try:
            SearchDatabase.open(temp, readonly=True).close()
        except IntegrityError as exc:
            problems = [str(exc)]
    if problems:
        log_index.warning("the store's %s is not usable (%s); building the index from the texts",
                          SEARCH_DB_FILENAME, "; ".join(problems[:2]))
        temp.unlink(missing_ok=True)
        return False
    os.replace(temp, path)
    log_index.info("search index restored from the store; catching up")
    return True


def _index_catch_up(ctx: Context, db: Database, sdb: SearchDatabase, result: IndexResult) -> bool:
    record_text_sources(db, ctx.cfg.MIN_TEXT_QUALITY)
    fingerprint = extracted_fingerprint(db.conn)
    wanted = {record["document_id"]: search_fields(record)
              for record in iter_document_records(db.conn, "d.status = 'extracted'")}
    indexed = sdb.indexed()
    texts, fields_only, deletes = plan_index(wanted, indexed)
    fetch = fetch_into_workspace(ctx)
    # A document's former tokens are deleted by reading its former text back: one that cannot be
    # read stays indexed as it is (counted), never half removed.
    former = {have[0]: have[1] for have in indexed.values()}
    removable = [rowid for rowid in deletes if _index_text_at_hand(ctx, former[rowid], fetch)]
    if removable:
        sdb.write_batch(deletes=removable)
    result.removed = len(removable)
    result.missing_texts += len(deletes) - len(removable)
    for start in range(0, len(fields_only), INDEX_BATCH):
        sdb.write_batch(upserts=[(wanted[i], None) for i in fields_only[start:start + INDEX_BATCH]])
    result.refreshed = len(fields_only)
    # Rowids ascend within each (year, court) bucket; FTS5 flushes its pending terms whenever a
    # rowid goes down, so texts are written bucket by bucket (measured: builds 1.6x faster).
    texts.sort(key=lambda i: (search_bucket(wanted[i]["year"], wanted[i]["court_code"]), i))
    bar = progress(ctx.cfg, len(texts), "index")
    try:
        for start in range(0, len(texts), INDEX_BATCH):
            if ctx.clock.should_stop():
                result.stopped = True
                break
            batch = []
            for document_id in texts[start:start + INDEX_BATCH]:
                fields = wanted[document_id]
                body = read_text(ctx.workspace, fields["text_name"], fetch)
                have = indexed.get(document_id)
                if body is None or (have is not None and not _index_text_at_hand(ctx, have[1], fetch)):
                    result.missing_texts += 1
                    continue
                result.text_bytes += len(body)
                text = body.decode("utf-8", "replace")
                batch.append(({**fields, "text_chars": len(text)}, text))
            if batch:
                sdb.write_batch(upserts=batch)
                result.indexed += len(batch)
            bar.update(min(INDEX_BATCH, len(texts) - start))
    finally:
        bar.close()
    if result.missing_texts:
        log_index.warning("index: %d texts (to index, or to take out of the index) are neither in the workspace "
                          "nor in the store; a later run indexes them", result.missing_texts)
    if should_optimize(result.indexed, sdb.indexed_count()):
        sdb.optimize()
        result.optimized = True
    if not (result.stopped or result.missing_texts):
        sdb.kv_set("state_fingerprint", fingerprint)    # the state this index is level with
    return bool(result.indexed or result.refreshed or result.removed)


def _index_text_at_hand(ctx: Context, name: str, fetch) -> bool:
    """Whether text `name` is in the workspace, where docs_text reads it (fetched from the store)."""
    return ctx.path(name).is_file() or fetch(name) is not None


def _index_push(ctx: Context, path: Path) -> bool:
    copy = backup_database(path, ctx.path("checkpoint") / SEARCH_DB_FILENAME)
    return ctx.mirror.put(SEARCH_DB_FILENAME, copy, mutable=True)


# -------------------------------------------------------- coverage, query


def open_search_index(workspace: str | os.PathLike) -> SearchDatabase:
    """The workspace's index, read-only; IndexMissingError says how to build it."""
    path = Path(workspace) / SEARCH_DB_FILENAME
    if not path.is_file():
        raise IndexMissingError(f"no search index at {path}: {BUILD_HINT}")
    try:
        return SearchDatabase.open(path, readonly=True)
    except IntegrityError as exc:
        raise IndexMissingError(f"search index unusable ({exc}): {BUILD_HINT}") from None


def search_archive(workspace: str | os.PathLike, query: str, *, court: str | None = None,
                   year: int | None = None, kind: str | None = None, publication_status: str | None = None,
                   limit: int = 20, rank_all: bool = False, sdb: SearchDatabase | None = None,
                   store: Any = None) -> list[dict[str, Any]]:
    """Ranked hits of an FTS5 query over the workspace's index, filtered by court, year, type, each
    with a snippet of its text and its title, the query's words [marked].

    A query matching more than SEARCH_RANK_CAP documents is ranked among the most recent
    SEARCH_RANK_CAP of them (hits say `rank_capped`) unless `rank_all`. Snippets come from the
    workspace's texts; with a `store`, a hit's text the workspace lacks (a fresh runtime) is
    fetched from it first (a text found nowhere: no snippet)."""
    if not query or not query.strip():
        raise SearchQueryError("the query is empty")
    if limit <= 0:
        raise SearchQueryError(f"limit must be positive, not {limit}")
    own = sdb is None
    sdb = sdb or open_search_index(workspace)
    try:
        hits = sdb.search(query, year=year, kind=kind, publication_status=publication_status, limit=limit,
                          rank_cap=None if rank_all else SEARCH_RANK_CAP, **court_filter(court))
        if hits:
            _add_snippets(Path(workspace), hits, query, sdb, fetch_from_store(workspace, store))
        return hits
    finally:
        if own:
            sdb.close()


def _add_snippets(workspace: Path, hits: list[dict[str, Any]], query: str, sdb: SearchDatabase, fetch) -> None:
    """Each hit's `snippet` (None when its text is nowhere), `snippet_marks` and `title_highlighted`."""
    phrases = query_phrases(query)
    stems = sdb.stems(sorted({word for phrase in phrases for word, _ in phrase}))
    keys, length = phrase_keys(phrases, stems), max((len(phrase) for phrase in phrases), default=1)
    texts, candidates = [], []
    for hit in hits:
        data = read_text(workspace, hit["text_name"], fetch)
        texts.append(None if data is None else data.decode("utf-8", "replace"))
        title = hit["case_title"] or ""
        candidates.append((candidate_words(texts[-1], keys, length) if texts[-1] else [],
                           candidate_words(title, keys, length)))
    words = {word for in_text, in_title in candidates for places in (in_text, in_title)
             for place in places for _, _, word in place}
    stems.update(sdb.stems(sorted(words - stems.keys())))
    for hit, text, (in_text, in_title) in zip(hits, texts, candidates):
        hit["snippet"], hit["snippet_marks"] = (None, []) if text is None else make_snippet(
            text, match_places(in_text, phrases, stems))
        hit["title_highlighted"] = mark(hit["case_title"] or "", match_places(in_title, phrases, stems))


# ---------------------------------------------------------------- snippets
#
# A snippet is made here, from the text file, not by FTS5's snippet(), which tokenizes a hit's whole
# text twice: about 0.7 ms a hit, most of a query's time (a case-insensitive regular expression over
# the whole text is as slow). The places where the query's first words (or their stems) begin are
# found with str.find on the lowercased text; the words there are stemmed as the index stems them
# (SearchDatabase.stems, one call for every hit) and a phrase matches where its words' stems follow
# one another, common words (which the index leaves out) skipped in both; the snippet is the
# stretch where most of the query's phrases lie close together.

SNIPPET_WORDS = 16
SNIPPET_PLACES = 400     # places of the query's first words looked at in one text, at most
_WORD_START, _WORD_END = re.compile(r"\b\w"), re.compile(r"\w\b")

Phrase = list[tuple[str, bool]]   # (word, lowercased; whether it is a prefix)


def query_phrases(query: str) -> list[Phrase]:
    """The phrases of an FTS5 query a snippet marks, each a list of (word, is a prefix): its
    barewords and quoted phrases, without operators, column names, NEAR's distance, what NOT
    leaves out or the common words the index leaves out (a prefix stays)."""
    phrases: list[Phrase] = []
    excluded_depth = depth = 0
    excluding = False
    for token, is_term in query_terms(query):
        if token == "(":
            depth += 1
            if excluding:
                excluded_depth, excluding = depth, False
            continue
        if token == ")":
            if depth == excluded_depth:
                excluded_depth = 0
            depth -= 1
            continue
        if token == "NOT":
            excluding = True
            continue
        if not is_term:
            continue
        _, kept, prefix = term_words(token)
        phrase = [(word.lower(), prefix and number == len(kept) - 1) for number, word in enumerate(kept)]
        if phrase and not excluding and not excluded_depth:
            phrases.append(phrase)
        excluding = False
    return phrases


def phrase_keys(phrases: list[Phrase], stems: dict[str, str]) -> tuple[str, ...]:
    """Lowercase strings one of which every match of a phrase begins with: its first word, and
    that word's stem (a word the stem does not begin, "happy"/"happi", is found by itself)."""
    keys = set()
    for phrase in phrases:
        word, prefix = phrase[0]
        keys.add(word)
        if not prefix and stems.get(word):
            keys.add(stems[word])
    # A key inside another finds the same places: the shorter one does.
    return tuple(sorted(key for key in keys if not any(other != key and other in key for other in keys)))


def candidate_words(text: str, keys: tuple[str, ...], length: int,
                    limit: int = SNIPPET_PLACES) -> list[list[tuple[int, int, str]]]:
    """At each word start where a key occurs (the first `limit`), the `length` words from there
    that the index holds (SEARCH_COMMON_WORDS skipped): (start, end, word lowercased)."""
    lowered = text.lower()
    if len(lowered) != len(text):     # a letter whose lower case is longer: find in the text itself
        lowered = text
        keys = tuple(key for key in keys if key.isascii())
    places = set()
    for key in keys:
        at = lowered.find(key)
        while at != -1 and len(places) < 4 * limit:
            if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
                places.add(at)
            at = lowered.find(key, at + 1)
    return [list(itertools.islice(((match.start(), match.end(), word) for match in INDEX_WORD.finditer(text, at)
                                   if (word := match.group().lower()) not in SEARCH_COMMON_WORDS), length))
            for at in sorted(places)[:limit]]


def _stem_matches(word: str, term: str, prefix: bool, stems: dict[str, str]) -> bool:
    stem = stems.get(word, word)
    if prefix:
        return word.startswith(term) or stem.startswith(stems.get(term, term))
    return word == term or stem == stems.get(term, term)


def match_places(candidates: list[list[tuple[int, int, str]]], phrases: list[Phrase],
                 stems: dict[str, str]) -> list[tuple[int, int, int]]:
    """(start, end, phrase number) of each candidate place where a phrase's words follow one
    another, stem for stem."""
    found = []
    for words in candidates:
        for number, phrase in enumerate(phrases):
            if len(words) >= len(phrase) and all(_stem_matches(word, term, prefix, stems)
                                                 for (_, _, word), (term, prefix) in zip(words, phrase)):
                found.append((words[0][0], words[len(phrase) - 1][1], number))
                break
    return found


def mark(text: str, matches: list[tuple[int, int, int]], start: int = 0, end: int | None = None,
         signs: tuple[str, str] = ("[", "]")) -> str:
    """text[start:end] with each match inside it [marked] (between `signs`)."""
    end = len(text) if end is None else end
    parts, at = [], start
    for first, last, _ in matches:
        if first >= at and last <= end:
            parts += [text[at:first], signs[0], text[first:last], signs[1]]
            at = last
    return "".join(parts) + text[at:end]


# What make_snippet marks with before it knows where the marks end up: characters no text keeps.
_SNIPPET_SIGNS = ("\x02", "\x03")


def make_snippet(text: str, matches: list[tuple[int, int, int]], words: int = SNIPPET_WORDS
                 ) -> tuple[str, list[tuple[int, int]]]:
    """About `words` words of `text` where the most of the query's phrases (then the most matches)
    lie close together, the matches [marked], and where each marked match lies in it (start, end,
    brackets excluded): a bracket the text has itself ("[sic]") is no mark. The text's first words
    when none matches."""
    span = words * 7   # characters: a legal text's words average six and a space
    start = 0
    if matches:
        best, last = None, 0
        for first, match in enumerate(matches):
            last = max(last, first)
            while last + 1 < len(matches) and matches[last + 1][1] <= match[0] + span:
                last += 1
            cluster = matches[first:last + 1]
            score = (len({number for _, _, number in cluster}), len(cluster))
            if best is None or score > best[0]:
                best = (score, match[0])
        start = max(0, best[1] - span // 4)
        start = start if start == 0 else _word_start(text, start)
    end = min(len(text), start + span)
    end = end if end == len(text) else _word_end(text, end)
    if any(sign in text[start:end] for sign in _SNIPPET_SIGNS):
        text = text.replace(_SNIPPET_SIGNS[0], " ").replace(_SNIPPET_SIGNS[1], " ")
    snippet, marks = "… " if start else "", []
    for piece in re.split("([\x02\x03])", " ".join(mark(text, matches, start, end, _SNIPPET_SIGNS).split())):
        if piece == _SNIPPET_SIGNS[0]:
            marks.append((len(snippet) + 1, None))
        elif piece == _SNIPPET_SIGNS[1]:
            marks[-1] = (marks[-1][0], len(snippet))
        snippet += {_SNIPPET_SIGNS[0]: "[", _SNIPPET_SIGNS[1]: "]"}.get(piece, piece)
    return snippet + (" …" if end < len(text) else ""), marks


def snippet_html(snippet: str | None, marks: Iterable[tuple[int, int]]) -> str:
    """A snippet as HTML, each of its `marks` (make_snippet's) a <mark>; its own brackets stay."""
    snippet = snippet or ""
    parts, at = [], 0
    for start, end in marks:
        parts += [html.escape(snippet[at:start - 1]), "<mark>", html.escape(snippet[start:end]), "</mark>"]
        at = end + 1
    return "".join(parts) + html.escape(snippet[at:])


def _word_start(text: str, at: int) -> int:
    """Where the first word at or after `at` begins."""
    found = _WORD_START.search(text, at)
    return found.start() if found else at


def _word_end(text: str, at: int) -> int:
    """Where the word going on at `at` (or the next one) ends."""
    found = _WORD_END.search(text, at)
    return found.end() if found else at


def format_hits(hits: Iterable[dict[str, Any]]) -> str:
    """Hits as the CLI prints them: rank, case number, date, title, document id, snippet."""
    lines = []
    for number, hit in enumerate(hits, 1):
        date = (hit.get("filed_date") or "")[:10]
        lines.append(f"{number:>3}. {hit.get('case_number') or '?'}  {date}  {hit.get('case_title') or ''}")
        # bm25 (lower is better) of a word most documents hold is tiny: significant digits tell hits apart
        lines.append(f"     {hit.get('description') or ''} · {hit['document_id']} · score {hit['score']:.3g}")
        snippet = " ".join((hit.get("snippet") or "").split())
        if snippet:
            lines.append(f"     {snippet}")
    return "\n".join(lines)
