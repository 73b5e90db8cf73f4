"""Index: the full-text search index of every extracted document's best text, kept level; the search itself.

Guarantees:
- `index(ctx)` records each document's best text (c33_best_text: the OCR merge of a scanned PDF,
  its text layer, or the court's own text where both are empty or very poor), then brings the
  workspace's index (c18_search_index: `ky_search/` and its catalog `ky_search.sqlite`) level with
  the state database incrementally: a document newly extracted, or whose best text or indexed
  fields changed, is indexed again from its text; one no longer extracted leaves; the rest is not
  touched. Writes are committed every INDEX_COMMIT_DOCUMENTS documents and at the end (a stop
  keeps what was committed); readers only ever see a whole commit.
- The index holds no copy of the texts: snippets are read from the workspace's texts. A document
  whose text neither the workspace nor the store holds is counted and left for a later run.
- Fields: court and its code (the court system's, c28_court_words), year, case number, case type,
  docket entry type, description, publication status, judge, filed date, kind, the text indexed
  (`text_source`), from `documents` and, where present, `cases`, `docket_entries` and `derived`
  (found by name and column at run time; null when absent).
- The store holds the commit's own files (`ky_search/`: a name never holds other bytes) and the
  catalog as page packs (`db/ky_search/`, c22) sealed with the commit's meta.json: the catalog's
  manifest is the one commit point. When the index changed or the store is not level with it,
  `push_search_index` sends the files the store lacks, then the catalog's changed pages, then
  removes what the commit no longer names and an earlier version's or layout's copies; a push
  that fails leaves the store's earlier commit whole. A fresh runtime takes the commit the catalog
  records, checked (c18 `install_search_index`), else an earlier `ky_search.tar`, and catches up;
  with neither (or a file missing or damaged) the index is built from the texts. A damaged index
  is moved aside and rebuilt, one of another version (FTS5 included) deleted and rebuilt.
- `search_archive()` is the one search of the CLI, `serve`, the notebook and the benchmark: the
  query read by c18_query_syntax (never an error; case numbers in the court system's forms), the
  filters (--court by its codes), the sort and the page, each hit with a snippet of its text and
  its title, the query's words [marked]; a page past the last says so (`page_past_last`, in the
  JSON's `notes` too). `text_places()` marks them in a whole text (the document page). A missing
  or unusable index raises `IndexMissingError` (c18 `open_search_index`). Where the archive holds
  documents the court does not serve to the public (no text to search), the result says how many
  and why (`NotPublic`: counted once per state database read, as serve's copy), and lists those of
  the case numbers searched.

Knobs read: COURT_SYSTEM (index: its codes, years, days), WORKSPACE, PROGRESS, MIN_TEXT_QUALITY (the store
through the context).
"""
from __future__ import annotations

import functools
import hashlib
import heapq
import html
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .c00_config import DEFAULT_COURT_SYSTEM, IntegrityError, StoreError, count_noun, court_day
from .c05_durable import durable_write
from .c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME, SEARCH_PACK_FILENAME, TEXT_LAYER, text_name
from .c10_database import Database, is_sqlite_file
from .c11_reads import extracted_fingerprint, iter_document_records
from .c12_queues import WorkQueues, not_public_reason
from .c18_query_syntax import COMMON_WORDS, AllOf, AnyOf, CaseNumber, Near, Phrase, SearchQuery, Word, parse_query
from .c18_search_index import (SEARCH_SORTS, SearchFilters, SearchIndex, SearchIndexOutdated, SearchQueryError,
                               commit_file_names, composed, copy_search_index, index_words, install_search_index,
                               open_search_index, remove_search_index, seal_search_copy, sealed_commit,
                               unpack_search_index, word_stems)
from .c22_page_packs import PagePacks
from .c28_court_words import SystemWords, system_words, words_of_config
from .c34_mirror import progress
from .c35_context import Context, archive_words, not_public_words
from .c33_best_text import fetch_from_store, fetch_into_workspace, read_text, record_text_sources

log_index = logging.getLogger("kycourt.index")

INDEX_BATCH = 200                 # documents read between two looks at the stop flag
INDEX_COMMIT_DOCUMENTS = 10_000   # documents indexed between two commits
INDEX_COMMIT_SECONDS = 120.0      # or seconds, whichever comes first
SEARCH_LIMIT_MAX = 500            # hits on one page, at most
# (name, type, description) of the archive's fields: the export's records, in this order, and the
# column descriptions Datasette shows.
EXPORT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("document_id", "string", "the court's document id (64 hex digits)"),
    ("case_number", "string", "the case number, e.g. 2019-CA-0012"),
    ("court", "string", "the court's name"),
    ("court_code", "string", "the court's code: CA (Court of Appeals) or SC (Supreme Court) in Kentucky; "
                             "`kycourt-pipeline courts` lists each court system's"),
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
    ("access_state", "string", "why the court does not serve the document to the public, as its API says: "
                               "purchasable, in_cart, unavailable, secured or wall; null: public"),
    ("not_public_reason", "string", "what the public would need for the document: registration or purchase "
                                    "(never requested); null: public"),
    ("sha256", "string", "SHA-256 of the PDF; the store holds it as pdf_by_hash/<sha256>.pdf"),
    ("size_bytes", "int64", "size of the PDF in bytes"),
    ("pages", "int64", "pages of the PDF"),
    ("extracted_chars", "int64", "characters of extracted text (0: no text layer)"),
    ("likely_scanned", "bool", "too few characters per page: probably a scan"),
    ("extract_failure", "string", "why no text will ever be extracted (unparseable, encrypted, empty, too "
                                  "large, ...); null otherwise"),
    ("pdf", "string", "the PDF's name in the store"),
    ("text_note", "string", "why an extracted document's text is empty (a blank scan, scanned pages not "
                            "recognised yet, no text on any page); null when it has text"),
    ("last_error", "string", "the pipeline's last word on the document: why it failed, or why extraction gave "
                             "up; null when none"),
    ("text_source", "string", "which text `text` is: text_layer (the PDF's), ocr (its scanned pages "
                              "recognised and merged in) or court_text (the court's own, where ours is empty or poor)"),
    ("text", "string", "the document's best text (null when not extracted, or its file is unavailable)"),
)
SEARCH_STORE_META = f"{SEARCH_INDEX_DIRNAME}/meta.json"       # an earlier layout's commit point: read, then removed
SEARCH_STORE_HELD = "checkpoint/ky_search.held.json"          # the meta.json the store holds, as last sent or read
_SEARCH_WHOLE_FILES = (SEARCH_PACK_FILENAME, SEARCH_DB_FILENAME)   # an earlier version's copies in the store


@dataclass
class IndexResult:
    indexed: int = 0          # documents indexed with a new or changed text
    refreshed: int = 0        # documents indexed again for their fields alone
    removed: int = 0          # documents no longer extracted
    missing_texts: int = 0    # documents whose text neither workspace nor store holds
    total: int = 0            # documents in the index afterwards
    text_bytes: int = 0       # bytes of text read
    restored_from_store: bool = False
    rebuilt: bool = False     # a damaged or outdated index was set aside
    pushed: bool = False      # mirrored to the store
    push_seconds: float = 0.0  # of the run, those spent mirroring the index to the store
    push_files: int = 0       # index files sent to the store
    push_bytes: int = 0       # their bytes and those of the catalog's changed pages
    stopped: bool = False


# ------------------------------------------------------------- decisions


def year_of(case_number: str | None, filed_date: str | None, words: SystemWords | None = None) -> int | None:
    """The case number's year (c28 `year_of`), else the filed date's (a day in the system's zone)."""
    words = words or system_words(DEFAULT_COURT_SYSTEM)
    year = words.year_of(case_number)
    if year is not None:
        return year
    head = (court_day(filed_date, words.time_zone) or "")[:4]
    return int(head) if head.isdigit() and 1900 <= int(head) <= 2100 else None


def search_fields(record: Any, words: SystemWords) -> dict[str, Any]:
    """The catalog row of one state-database record (documents + optional fields), its text named
    by the recorded best text (the text layer where none is recorded yet); `text_key` digests
    which text it is, `source_key` every field."""
    fields = {
        "document_id": record["document_id"], "sha256": record["sha256"],
        "text_source": record["text_source"] or TEXT_LAYER,
        "case_number": record["case_number"], "court": record["court"],
        "court_code": words.code_of(record["case_number"], record["court"]),
        "year": year_of(record["case_number"], record["filed_date"], words),
        "case_title": _one_line(record["case_title"]), "case_type": record["case_type"],
        "docket_entry_type": record["docket_entry_type"], "description": record["description"],
        "publication_status": record["publication_status"], "judge": record["judge"],
        "filed_date": court_day(record["filed_date"], words.time_zone), "document_name": record["document_name"],
        "pages": record["pages"], "kind": record["kind"],
    }
    fields["text_name"] = text_name(fields["text_source"], record["sha256"], record["court_text_sha256"])
    fields["text_key"] = _digest(fields["text_name"])
    fields["source_key"] = _digest(*(fields[name] for name in sorted(fields) if name != "text_key"))
    return fields


def _one_line(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


def _digest(*values: Any) -> str:
    return hashlib.blake2b(repr(values).encode("utf-8"), digest_size=12).hexdigest()


def plan_index(wanted: dict[str, dict[str, Any]], indexed: dict[str, tuple[str, str, str]]
               ) -> tuple[list[str], list[str], list[str]]:
    """(ids to index for a new or changed text; ids to index again for changed fields alone; ids
    to remove). `indexed` is the catalog's id -> (text_name, text_key, source_key)."""
    texts, fields_only = [], []
    for document_id, fields in wanted.items():
        have = indexed.get(document_id)
        if have is None or have[1] != fields["text_key"]:
            texts.append(document_id)
        elif have[2] != fields["source_key"]:
            fields_only.append(document_id)
    removed = [document_id for document_id in indexed if document_id not in wanted]
    return sorted(texts), sorted(fields_only), sorted(removed)


# ----------------------------------------------------------------- stage


def index(ctx: Context) -> IndexResult:
    """Brings the search index level with the extracted documents; mirrors it to the store."""
    result = IndexResult()
    db = ctx.open_database()
    if not SearchIndex.exists(ctx.workspace):
        result.restored_from_store = restore_search_index(ctx)
    search = _index_open(ctx, result)
    try:
        changed = _index_catch_up(ctx, db, search, result)
        result.total = search.indexed_count()
        if changed or not _index_store_level(ctx):
            started = time.monotonic()
            pushed = push_search_index(ctx)
            result.push_seconds = time.monotonic() - started
            if pushed is not None:
                result.pushed, result.push_files, result.push_bytes = True, pushed.files, pushed.bytes
    finally:
        search.close()
    log_index.info("index: %d texts indexed (%.1f MB), %d refreshed, %d removed, %d texts missing; "
                   "%d documents in the index", result.indexed, result.text_bytes / 1e6, result.refreshed,
                   result.removed, result.missing_texts, result.total)
    return result


def _index_open(ctx: Context, result: IndexResult) -> SearchIndex:
    try:
        return SearchIndex.open(ctx.workspace)
    except SearchIndexOutdated as exc:   # nothing in it is worth keeping: its size is the disk's
        remove_search_index(ctx.workspace)
        log_index.warning("%s; building the index anew from the texts", exc)
    except IntegrityError as exc:
        aside = _index_move_aside(ctx.workspace)
        log_index.warning("search index unusable (%s); moved to %s, rebuilding it from the texts", exc, aside)
    result.rebuilt = True
    return SearchIndex.open(ctx.workspace)


def _index_move_aside(workspace: Path) -> str:
    """The index's catalog and files renamed to <name>.damaged-N; returns the catalog's new name."""
    number = 1
    while any((workspace / f"{name}.damaged-{number}").exists() for name in (SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME)):
        number += 1
    for name in (SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME):
        if (workspace / name).exists():
            os.replace(workspace / name, workspace / f"{name}.damaged-{number}")
    for suffix in ("-wal", "-shm"):
        Path(f"{workspace / SEARCH_DB_FILENAME}{suffix}").unlink(missing_ok=True)
    return f"{SEARCH_DB_FILENAME}.damaged-{number}"


def restore_search_index(ctx: Context) -> bool:
    """The store's copy of the index into the workspace (which has none), if it holds a sound one:
    the catalog its packs make and the files of the commit it records, else an earlier version's
    `ky_search.tar`. False: the index is built from the texts."""
    if _store_has_catalog(ctx) and _restore_commit(ctx):
        return True
    if not ctx.mirror.has(SEARCH_PACK_FILENAME):
        return False
    pack = ctx.path("tmp") / f"{SEARCH_PACK_FILENAME}.restore"
    try:
        if not ctx.mirror.fetch(SEARCH_PACK_FILENAME, pack):
            return False
        unpack_search_index(pack, ctx.workspace)
    except IntegrityError as exc:
        log_index.warning("the store's %s is not usable (%s); building the index from the texts",
                          SEARCH_PACK_FILENAME, exc)
        return False
    finally:
        pack.unlink(missing_ok=True)
    log_index.info("search index restored from the store's %s; catching up", SEARCH_PACK_FILENAME)
    return True


def _store_has_catalog(ctx: Context) -> bool:
    try:
        return bool(catalog_packs(ctx).held())
    except StoreError as exc:
        log_index.warning("the store's search index cannot be listed (%s)", exc)
        return False


def _restore_commit(ctx: Context) -> bool:
    """The store's catalog, the commit it records and that commit's files, checked and put in place.
    A catalog sent before it recorded its commit goes with the store's `ky_search/meta.json`."""
    staging = ctx.path("tmp") / "search-restore"
    shutil.rmtree(staging, ignore_errors=True)
    index_path = staging / SEARCH_INDEX_DIRNAME
    index_path.mkdir(parents=True)
    try:
        catalog_packs(ctx).restore(staging / SEARCH_DB_FILENAME)
        meta = sealed_commit(staging / SEARCH_DB_FILENAME)
        if meta is not None:
            durable_write(index_path / "meta.json", meta.encode("utf-8"))
        elif ctx.mirror.fetch(SEARCH_STORE_META, index_path / "meta.json"):
            meta = (index_path / "meta.json").read_text(encoding="utf-8")
        else:
            raise IntegrityError("the store's catalog records no commit")
        for name in commit_file_names(meta):
            if not ctx.mirror.fetch(f"{SEARCH_INDEX_DIRNAME}/{name}", index_path / name):
                raise IntegrityError(f"the store lacks {SEARCH_INDEX_DIRNAME}/{name}, a file of its commit")
        install_search_index(staging, ctx.workspace)
    except (IntegrityError, StoreError, UnicodeDecodeError) as exc:
        log_index.warning("the store's search index is not usable (%s)", exc)
        return False
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    durable_write(ctx.path(SEARCH_STORE_HELD), meta.encode("utf-8"))
    log_index.info("search index restored from the store; catching up")
    return True


def _index_catch_up(ctx: Context, db: Database, search: SearchIndex, result: IndexResult) -> bool:
    record_text_sources(db, ctx.cfg.MIN_TEXT_QUALITY)
    fingerprint = extracted_fingerprint(db.conn)
    words = words_of_config(ctx.cfg)
    wanted = {record["document_id"]: search_fields(record, words)
              for record in iter_document_records(db.conn, "d.status = 'extracted'")}
    texts, fields_only, removed = plan_index(wanted, search.indexed())
    for document_id in removed:
        search.remove(document_id)
    result.removed = len(removed)
    fetch = fetch_into_workspace(ctx)
    todo = texts + fields_only
    changed_text = set(texts)
    bar = progress(ctx.cfg, len(todo), "index")
    committed = time.monotonic()
    try:
        for start in range(0, len(todo), INDEX_BATCH):
            if ctx.clock.should_stop():
                result.stopped = True
                break
            for document_id in todo[start:start + INDEX_BATCH]:
                fields = wanted[document_id]
                body = read_text(ctx.workspace, fields["text_name"], fetch)
                if body is None:
                    result.missing_texts += 1
                    continue
                result.text_bytes += len(body)
                text = body.decode("utf-8", "replace")
                search.add({**fields, "text_chars": len(text)}, text)
                if document_id in changed_text:
                    result.indexed += 1
                else:
                    result.refreshed += 1
            bar.update(min(INDEX_BATCH, len(todo) - start))
            if search.pending >= INDEX_COMMIT_DOCUMENTS or time.monotonic() - committed > INDEX_COMMIT_SECONDS:
                search.commit()
                committed = time.monotonic()
    finally:
        bar.close()
    if result.missing_texts:
        log_index.warning("index: %d texts to index are neither in the workspace nor in the store; a later run "
                          "indexes them", result.missing_texts)
    level = not (result.stopped or result.missing_texts)
    # The state this index is level with, recorded with the commit that makes it so.
    search.commit(**({"state_fingerprint": fingerprint} if level else {}))
    search.finish()
    return bool(result.indexed or result.refreshed or result.removed)


@dataclass
class IndexPush:
    files: int = 0         # index files sent
    bytes: int = 0         # their bytes and those of the catalog's packs
    removed: int = 0       # store files removed: superseded segment files, an earlier version's copies


def catalog_packs(ctx: Context) -> PagePacks:
    """The store's page packs of the index's catalog (c22, `db/ky_search/`)."""
    return PagePacks(ctx.store, SEARCH_DB_FILENAME, ctx.path("checkpoint"))


def _index_store_level(ctx: Context) -> bool:
    """Whether the store holds the workspace's index as it is: the last push or restore recorded
    this meta.json, the store lists every file of its commit and the catalog's state, and no earlier
    version's or layout's copy is left."""
    index_path = ctx.workspace / SEARCH_INDEX_DIRNAME
    try:
        held = ctx.path(SEARCH_STORE_HELD).read_text(encoding="utf-8")
        meta = (index_path / "meta.json").read_text(encoding="utf-8")
        if held != meta:
            return False
        listed = ctx.store.list_files(SEARCH_INDEX_DIRNAME)
        unsent = _index_files_to_send(index_path, commit_file_names(meta), listed)
        packs = catalog_packs(ctx)
        state = packs.state()
        catalog = bool(state) and set(state) <= set(packs.held())
    except (OSError, UnicodeDecodeError, StoreError, IntegrityError):
        return False
    return (not unsent and catalog and SEARCH_STORE_META not in listed
            and not any(ctx.mirror.has(name) for name in _SEARCH_WHOLE_FILES))


def _index_files_to_send(index_path: Path, names: list[str], listed: dict[str, Any]) -> list[str]:
    """The files of a commit the store does not hold: not listed, or listed with another size (a
    torn upload). A name held whole is never sent again: a segment's files never change."""
    return [name for name in names if (found := listed.get(f"{SEARCH_INDEX_DIRNAME}/{name}")) is None
            or found.size != (index_path / name).stat().st_size]


def push_search_index(ctx: Context) -> IndexPush | None:
    """Sends the store what it lacks of the index's latest commit: its files the store does not list
    (a segment's files never change, so a name held is not sent again), then the catalog's changed
    pages (c22), sealed with the commit's meta.json (c18 `seal_search_copy`): the catalog's
    manifest, written last, is the one commit point. Then removes the `ky_search/` files the commit
    no longer names, the catalog's packs its state does not name and an earlier version's or
    layout's copies. None when the store refused a write: the store keeps the commit it held, whole,
    and the next session sends the rest."""
    staging = ctx.path("checkpoint") / "search-push"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        copy_search_index(ctx.workspace, staging)   # links to the commit's files: a merge deletes none
        index_path = staging / SEARCH_INDEX_DIRNAME
        meta = seal_search_copy(staging)
        names = commit_file_names(meta)
        try:
            listed = ctx.store.list_files(SEARCH_INDEX_DIRNAME)
        except StoreError as exc:
            log_index.warning("cannot list the store's %s/ to send the index: %s", SEARCH_INDEX_DIRNAME, exc)
            return None
        pushed = IndexPush()
        # Not queued for later (mutable=True): the catalog must follow every file of its commit.
        for name in _index_files_to_send(index_path, names, listed):
            if not ctx.mirror.put(f"{SEARCH_INDEX_DIRNAME}/{name}", index_path / name, mutable=True):
                return None
            pushed.files += 1
            pushed.bytes += (index_path / name).stat().st_size
        catalog = ctx.mirror.push_pages(catalog_packs(ctx), staging / SEARCH_DB_FILENAME)
        if catalog is None:
            return None
        pushed.bytes += catalog.bytes_sent
        durable_write(ctx.path(SEARCH_STORE_HELD), meta.encode("utf-8"))
        kept = {f"{SEARCH_INDEX_DIRNAME}/{name}" for name in names}
        superseded = sorted(set(listed) - kept) + [name for name in _SEARCH_WHOLE_FILES if ctx.mirror.has(name)]
        pushed.removed = sum(ctx.mirror.remove(name) for name in superseded)
        pushed.removed += ctx.mirror.prune_pages(catalog_packs(ctx), set(catalog.packs))   # a killed push's
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log_index.info("index: %d files (%.1f MB with the catalog's changed pages) sent to the store, %d it "
                   "no longer needs removed", pushed.files, pushed.bytes / 1e6, pushed.removed)
    return pushed


# ------------------------------------------------------------------ search


@dataclass
class SearchResult:
    """One page of a search: the query as typed and as read, the filters, the exact total."""
    query: str
    read_as: str
    notes: list[str]
    total: int
    page: int
    limit: int
    sort: str
    filters: dict[str, Any]
    hits: list[dict[str, Any]] = field(default_factory=list)
    not_public: dict[str, Any] | None = None     # the archive's documents not public at the court, when any

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.limit))

    @property
    def first(self) -> int:
        """The number of the page's first hit (from 1); 0 when the page has none."""
        return (self.page - 1) * self.limit + 1 if self.hits else 0

    @property
    def last(self) -> int:
        return self.first + len(self.hits) - 1 if self.hits else 0

    def as_json(self) -> dict[str, Any]:
        """The object `search --json` prints and /search.json answers (a page past the last says so
        in `notes`)."""
        past = page_past_last(self)
        found = {"query": self.query, "read_as": self.read_as, "notes": self.notes + ([past] if past else []),
                 "total": self.total, "count": len(self.hits), "page": self.page, "pages": self.pages,
                 "limit": self.limit, "sort": self.sort, "filters": self.filters, "hits": self.hits}
        return {**found, "not_public": self.not_public} if self.not_public else found

    def not_public_lines(self) -> list[str]:
        """What the search cannot find, in words: the archive's documents the court does not serve to the
        public, and those of the case numbers searched."""
        if not self.not_public:
            return []
        lines = [f"not public at the court: {not_public_words(self.not_public)}; they have no text to search"]
        lines += [f"  {row['case_number'] or '?'}  {row['document_id']}  {row['description'] or ''}  "
                  f"(not public: {row['reason']})" for row in self.not_public["documents"]]
        return lines


def search_archive(workspace: str | os.PathLike, query: str | None, *, court: str | None = None,
                   year: int | None = None, kind: str | None = None, publication_status: str | None = None,
                   after: str | None = None, before: str | None = None, sort: str = "relevance", page: int = 1,
                   limit: int = 20, notes: Iterable[str] = (), search: SearchIndex | None = None,
                   store: Any = None, system: str | None = None,
                   not_public: NotPublic | None = None) -> SearchResult:
    """Page `page` of `limit` hits of `query` (whatever was typed; empty: every document under the
    filters, newest first) filtered by court (code or part of the name), the case number's year,
    kind (type), publication status and filed day (`after`/`before`, inclusive), sorted by
    relevance, newest or oldest. Each hit carries its fields, `score`, a `snippet` of its text with
    the query's words [marked] (`snippet_marks`: where), and `title_highlighted`. Snippets come
    from the workspace's texts; with a `store`, a hit's text the workspace lacks (a fresh runtime)
    is fetched from it first (a text found nowhere: no snippet). `notes` are added to the
    result's own (what was read differently from how it was typed). Case numbers and --court are
    read in the forms of `system` (None: the archive's court system). `not_public`: the documents
    not public, counted once for the state database read (None: the workspace's, counted now)."""
    if limit < 1 or limit > SEARCH_LIMIT_MAX:
        raise SearchQueryError(f"limit is 1 to {SEARCH_LIMIT_MAX}, not {limit}")
    if page < 1:
        raise SearchQueryError(f"pages count from 1, not {page}")
    if sort not in SEARCH_SORTS:
        raise SearchQueryError(f"sort is one of {', '.join(SEARCH_SORTS)}, not {sort!r}")
    words = archive_words(workspace, system)
    parsed = parse_query(query, words.typed_numbers)
    filters = SearchFilters(**words.court_filter(court), kind=kind or None, year=year, after=after or None,
                            before=before or None, publication_status=publication_status or None)
    if parsed.empty and sort == "relevance":
        sort = "newest"
    own = search is None
    search = search or open_search_index(workspace)
    try:
        found = search.search(parsed, filters, sort=sort, page=page, limit=limit)
        if not found.total:
            _refuse_unmatched_filters(search, filters, court=court)
    finally:
        if own:
            search.close()
    hits = found.hits
    if hits:
        _add_snippets(Path(workspace), hits, parsed, fetch_from_store(workspace, store))
    return SearchResult(query=query or "", read_as=parsed.read_as, notes=list(notes) + list(parsed.notes),
                        total=found.total, page=page, limit=limit, sort=sort, filters=filters.active(), hits=hits,
                        not_public=(not_public or NotPublic(Path(workspace) / DB_FILENAME, words)).of(parsed))


class NotPublic:
    """The archive's documents not public at the court, as one state database holds them: how many and
    why, counted once (`counts`; None when it holds none, its court has no access states, or there is
    no database), and per search those of the query's case numbers (`of`)."""

    def __init__(self, database: Path, words: SystemWords):
        self.database = Path(database)
        self.counts: dict[str, Any] | None = None
        if words.access_states and is_sqlite_file(self.database):
            db = Database.open_readonly(self.database)
            try:
                counts = WorkQueues(db).not_public_counts()
            finally:
                db.close()
            self.counts = counts if counts["not_public"] else None

    def of(self, query: SearchQuery) -> dict[str, Any] | None:
        """The counts and the documents of the case numbers `query` requires (None: the archive has none)."""
        if self.counts is None:
            return None
        numbers = [node.case_number for node in query.required if isinstance(node, CaseNumber)]
        documents = []
        if numbers:
            db = Database.open_readonly(self.database)
            try:
                documents = [{**row, "reason": not_public_reason(row["access_state"])}
                             for row in WorkQueues(db).not_public_documents(numbers)]
            finally:
                db.close()
        return {**self.counts, "documents": documents}


class UnmatchedFilter(SearchQueryError):
    """A filter no document of the archive answers to (a typo in --court or --type): the message
    names it and the values the archive holds."""


# The filters a typo can make empty, by SearchFilters field: (how the user names it, its facet column).
_CHECKED_FILTERS = {"court_code": ("court", "court_code"), "court_like": ("court", "court_code"),
                    "kind": ("type", "kinds"), "year": ("year", "year"),
                    "publication_status": ("publication status", "publication_status")}


def _refuse_unmatched_filters(search: SearchIndex, filters: SearchFilters, *, court: str | None) -> None:
    """Raises UnmatchedFilter for the first filter that alone matches no document of the index, so
    "no hits" is never the answer to a misspelt filter. The index's own values are named."""
    everything = parse_query("")
    for name, (said, column) in _CHECKED_FILTERS.items():
        value = getattr(filters, name)
        if value is None or search.count(everything, SearchFilters(**{name: value})):
            continue
        held = search.facets(everything, SearchFilters(), (column,))[column]
        shown = ", ".join(f"{key} {count}" for key, count in sorted(held, key=lambda pair: str(pair[0]))[:12])
        typed = court if name in ("court_code", "court_like") and court else value
        raise UnmatchedFilter(f"{said} {typed!r} matches no document in the archive "
                              f"({'it holds ' + shown if shown else 'the index is empty'})")


def _add_snippets(workspace: Path, hits: list[dict[str, Any]], query: SearchQuery, fetch) -> None:
    """Each hit's `snippet` (None when its text is nowhere), `snippet_marks` and `title_highlighted`."""
    marks, stems = query_marks(query), {}
    for hit in hits:
        data = read_text(workspace, hit["text_name"], fetch) if hit.get("text_name") else None
        text = None if data is None else composed(data.decode("utf-8", "replace"))
        hit["snippet"], hit["snippet_marks"] = (None, []) if text is None else make_snippet(
            text, text_places(text, marks, stems, limit=SNIPPET_PLACES))
        title = hit.get("case_title") or ""
        hit["title_highlighted"] = mark(title, text_places(title, marks, stems))


# ---------------------------------------------------------------- marks and snippets
#
# A snippet is made here, from the text file: the places where each mark of the query may begin are
# found by str.find in the lowercased text, its accented letters folded in place (Peña is pena, the
# same length, so the places stay the text's); the mark's regular expression is matched at each, and
# a word matched by its stem is checked against the mark's stem. The snippet is the stretch of the first SNIPPET_MATCHES matches
# where most of the query's marks lie close together.

SNIPPET_WORDS = 16
SNIPPET_PLACES = 200      # candidate places looked at in one text, at most
SNIPPET_MATCHES = 12      # matches gathered in one text before its snippet is chosen
_WORD_START, _WORD_END = re.compile(r"\b\w"), re.compile(r"\w\b")

# A mark: the words of one thing the query matches, each (word as the index holds it, how it
# matches: "exact", "stem" or "prefix").
Mark = tuple[tuple[str, str], ...]


def query_marks(query: SearchQuery) -> list[Mark]:
    """What a snippet marks of a query: its required words (not a common word alone), phrases, case
    numbers (as typed and in the archive's form), NEAR's words; never what it excludes."""
    marks: list[Mark] = []

    def visit(node: Any) -> None:
        if isinstance(node, Word):
            for word in index_words(node.word):
                if node.prefix:
                    marks.append(((word, "prefix"),))
                elif word not in COMMON_WORDS or len(query.required) == 1:
                    marks.append(((word, "stem"),))
        elif isinstance(node, Phrase):
            words = index_words(" ".join(node.words))
            if words:
                marks.append(tuple((word, "exact") for word in words))
        elif isinstance(node, CaseNumber):
            for words in (index_words(" ".join(node.words)), index_words(node.case_number.replace("-", " "))):
                if words:
                    marks.append(tuple((word, "exact") for word in words))
        elif isinstance(node, Near):
            marks.extend(((word, "stem"),) for word in index_words(" ".join(node.words)))
        elif isinstance(node, (AnyOf, AllOf)):
            for part in node.options if isinstance(node, AnyOf) else node.parts:
                visit(part)
    for node in query.required:
        visit(node)
    return list(dict.fromkeys(marks))


@functools.lru_cache(maxsize=256)
def _mark_pattern(mark: Mark) -> re.Pattern:
    """The places a mark may match: its words in order, punctuation and spaces between; a stemmed
    word by its first letters (the stem is checked at each place)."""
    parts = []
    for term, mode in mark:
        if mode == "exact":
            parts.append(re.escape(term))
        elif mode == "prefix":
            parts.append(re.escape(term) + r"[^\W_]*")
        else:
            parts.append(f"({re.escape(term[:max(1, len(term) - 3)])}[^\\W_]*)")
    return re.compile(r"[\W_]+".join(parts) + r"(?![^\W_])")


def _folded_text(text: str) -> str:
    """`text` lowercased, each accented letter folded to its ASCII letter where that is one letter:
    the same length, so a place in it is the same place in the text (the text itself where
    lowercasing changes the length)."""
    lowered = text.lower()
    if len(lowered) != len(text):
        return text
    if lowered.isascii():
        return lowered
    table = {}
    for char in set(lowered):
        if not char.isascii():
            folded = index_words(char)
            if folded and len(folded[0]) == 1:
                table[ord(char)] = folded[0]
    return lowered.translate(table)


def text_places(text: str, marks: list[Mark], stems: dict[str, str] | None = None, *,
                limit: int | None = SNIPPET_PLACES, matches: int | None = SNIPPET_MATCHES
                ) -> list[tuple[int, int, int]]:
    """(start, end, mark number) of the marks' matches in `text`, in order: at most `matches` of
    them (None: all), among the first `limit` candidate places. `stems` caches word -> stem."""
    if not marks or not text:
        return []
    stems = {} if stems is None else stems
    folded = _folded_text(text)

    def stem_of(word: str) -> str:
        if word not in stems:
            stems[word] = word_stems([word])[0]
        return stems[word]

    def places(number: int, mark: Mark) -> Iterator[tuple[int, int, int, bool]]:
        # str.find scans for the mark's first letters (far faster than a regular expression's own
        # scan); the mark's expression is then matched at each place found.
        pattern, wanted = _mark_pattern(mark), [term for term, mode in mark if mode == "stem"]
        first, mode = mark[0]
        key = first[:max(1, len(first) - 3)] if mode == "stem" else first
        if len(key) < 3 and len(mark) > 1:
            # A phrase opening with a letter or two ("o brien"): its places in a text are few, the
            # letters' many (they would use up the candidate places); the expression finds them.
            for found in re.compile(r"(?<![^\W_])" + pattern.pattern).finditer(folded):
                whole = all(word == term or stem_of(word) == stem_of(term)
                            for word, term in zip(found.groups(), wanted))
                yield found.start(), -found.end(), number, whole
            return
        at = folded.find(key)
        while at != -1:
            found = pattern.match(folded, at) if at == 0 or not folded[at - 1].isalnum() else None
            if found is not None:
                whole = all(word == term or stem_of(word) == stem_of(term)
                            for word, term in zip(found.groups(), wanted))
                yield at, -found.end(), number, whole      # at one place, the longest match first
            else:
                yield at, -at, number, False
            at = folded.find(key, at + 1)

    found: list[tuple[int, int, int]] = []
    for count, (start, minus_end, number, whole) in enumerate(
            heapq.merge(*(places(number, mark) for number, mark in enumerate(marks)))):
        if (limit is not None and count >= limit) or (matches is not None and len(found) >= matches):
            break
        if whole and (not found or start >= found[-1][1]):
            found.append((start, -minus_end, number))
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


def result_heading(result: SearchResult) -> str:
    """'12 documents match 'restitution'' / '1 document matches the filters' / '40 documents in the
    index' (an empty query without filters): how the CLI and the notebook's form open a result."""
    if result.query.strip():
        return f"{count_noun(result.total, 'document')} {'matches' if result.total == 1 else 'match'} {result.query!r}"
    if result.filters:
        return f"{count_noun(result.total, 'document')} {'matches' if result.total == 1 else 'match'} the filters"
    return f"{count_noun(result.total, 'document')} in the index"


def page_past_last(result: SearchResult) -> str:
    """'page 3 is past the last page, 2, of the results' / 'page 3 is past the last page: there are
    no results' for a page past the last ('' for any other): how the CLI, serve, /search.json and
    the notebook's form say it, never 'page 3 of 2'."""
    if result.page <= result.pages:
        return ""
    if not result.total:
        return f"page {result.page} is past the last page: there are no results"
    return f"page {result.page} is past the last page, {result.pages}, of the results"


def format_hits(result: SearchResult) -> str:
    """A page of hits as the CLI prints them: number, case number, date, title, description,
    document id, snippet."""
    lines = []
    for number, hit in enumerate(result.hits, result.first):
        date = (hit.get("filed_date") or "")[:10]
        lines.append(f"{number:>3}. {hit.get('case_number') or '?'}  {date}  {hit.get('case_title') or ''}")
        lines.append(f"     {hit.get('description') or ''} · {hit['document_id']}")
        snippet = " ".join((hit.get("snippet") or "").split())
        if snippet:
            lines.append(f"     {snippet}")
    return "\n".join(lines)
