"""The database: schema, migrations, the two work queues, checkpoints. All SQL lives here.

Guarantees:
- `Database.open()` creates the CONTRACT.md schema idempotently, records the
  schema version in `kv` and applies forward migrations in order; the file is
  in WAL mode with busy_timeout=30000 and synchronous=NORMAL.
- The download and extract queues are defined once (`DOWNLOAD_QUEUE_SQL`,
  `EXTRACT_QUEUE_SQL`); the stages take work from them and verify counts
  them with the same text, so `done` is true by construction. The download
  queue hands opinions (`OPINION_SQL`) out first.
- Discovery upserts refresh metadata and never move a status backwards.
- `checkpoint()` makes a consistent single-file snapshot with SQLite's online
  backup API from a separate connection, in one step (a stepped backup
  livelocks under a busy writer, see MEASURED.md), and records a monotonically
  increasing `checkpoint_seq` that restore uses to pick the newest state.

- `Database.open()` judges the file read-only first (`schema_state`): an
  older version's database (a `documents` table and no `schema_version`, or
  a version stamped without its columns) raises `LegacyDatabaseError` before
  anything is written (connect() alone would turn WAL on): c38_legacy adopts
  it, against `target_schema()`, what MIGRATIONS build on an empty database.
  migrate() never stamps a version on a schema it did not build.
- Schema version 9 keeps what adoption brought per row (`legacy_documents`);
  the download queue holds an adopted row whose id discovery has not
  confirmed, or found to be a docket entry's or a case's (LEGACY_HELD_KINDS).
- Schema version 11 orders the crawl's work (c75_schedule): a case's search
  row fingerprint (an unchanged case is not walked again), the sweep whose
  details were fetched, and a partial index of the rows the download queue
  can hold.
- Schema version 5 adds what is derived of each document (`derived`,
  `derived_case_numbers`, `citations`) and the provenance of each download
  response (`download_events`); the derive queue (`derive_queue`) reads
  `docket_entries` and the documents' own entry columns.
  `cites`/`cited_by`/`citations_of`/`derived`/`derived_facets` are the query
  layer's reads of them.
- The search index is a database of its own (`SearchDatabase`,
  ky_search.sqlite, its own `search_schema_version`): FTS5 over each
  document's best text without a copy of it (external content read from the
  text files), the filter columns in `docs`, rows placed in (year, court)
  rowid ranges.
  The query layer's reads of ky_court.sqlite (`iter_document_records`,
  `documents_matching`, `rows_where`) join the optional tables other
  features add (cases, docket_entries, derived) only when they exist.

Knobs read: MAX_ATTEMPTS, MAX_EXTRACT_ATTEMPTS, RETRY_HARD (through callers).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import unicodedata
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .c00_config import Config, IntegrityError, utc_now
from .c05_durable import durable_rename

DB_FILENAME = "ky_court.sqlite"
STATUSES = ("discovered", "downloaded", "extracted", "failed")
PERMANENT_HTTP_STATUSES = (400, 401, 403, 404, 413)

# kv keys read or written by more than one module (the kv table's other keys are one module's own).
KV_CHECKPOINT_SEQ = "checkpoint_seq"               # the newest snapshot taken (bumped by checkpoint)
KV_CHECKPOINT_AT = "checkpoint_at"                 # when it was taken
KV_STORE_CHECKPOINT_SEQ = "store_checkpoint_seq"   # the newest snapshot the store holds; never back
KV_DISCOVERY_CONVERGED_AT = "discovery_converged_at"
KV_ARCHIVE_UPDATED_AT = "archive_updated_at"
KV_DISCOVERY_STRATEGY = "discovery_strategy"
KV_COMPLETE_THROUGH = "complete_through"           # the Kentucky day up to which the archive is complete
KV_DOWNLOAD_PATH = "download_path"                 # the download path that answers PDFs (c30 DOWNLOAD_PATHS)
KV_LEGACY_ADOPTION = "legacy_adoption"             # JSON: what adopting an older version's database brought
KV_CRAWL_FIGURES = "crawl_figures"                 # what each kind of the crawl's work cost (c75), JSON
KV_OPINIONS_ARCHIVED_AT = "opinions_archived_at"   # when every opinion the court lists was first archived

_PERMANENT_LIST = ",".join(str(code) for code in PERMANENT_HTTP_STATUSES)

# The one definition of each queue. Parameters: :max_attempts / :max_extract_attempts.
# A document the court withholds (document_available 0) is never requested, whatever its status.
# An adopted legacy row (c38_legacy) whose id discovery has not confirmed yet, or has shown to be a
# docket entry's or a case's, is held: nothing is downloaded under an id that may not be a documentID.
# (NOT IN builds the held ids once per query, through legacy_documents_kind: once none are held it
# costs nothing, where a correlated NOT EXISTS costs a lookup per row, 0.9 s a count at full scale.)
LEGACY_HELD_KINDS = ("unchecked", "docket_entry", "case")
_LEGACY_HELD_LIST = ", ".join(f"'{kind}'" for kind in LEGACY_HELD_KINDS)
DOWNLOAD_QUEUE_SQL = f"""
    status IN ('discovered', 'failed')
    AND attempts < :max_attempts
    AND (http_status IS NULL OR http_status NOT IN ({_PERMANENT_LIST}))
    AND document_available IS NOT 0
    AND document_id NOT IN (SELECT document_id FROM legacy_documents WHERE id_kind IN ({_LEGACY_HELD_LIST}))
"""
# An opinion: a document whose docket entry's type or description names one, as every entry the
# opinion search lists does ("DISPOSITION - OPINION OF THE COURT BY A JUSTICE", "CA - OPINION",
# "MEMORANDUM OPINION AND ORDER"). The download queue hands opinions out first.
OPINION_SQL = "(entry_type LIKE '%OPINION%' OR description LIKE '%OPINION%')"
# The download queue's order: opinions first, then rowid; one integer, so paging stays a keyset
# (`after` is the last row's queue_key).
_QUEUE_KEY_SQL = f"((CASE WHEN {OPINION_SQL} THEN 0 ELSE 1 END) << 40 | rowid)"
EXTRACT_QUEUE_SQL = """
    status = 'downloaded'
    AND extract_attempts < :max_extract_attempts
"""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS documents (
    document_id      TEXT PRIMARY KEY,
    case_number      TEXT,
    court            TEXT,
    case_title       TEXT,
    docket_entry_id  TEXT,
    description      TEXT,
    filed_date       TEXT,
    status           TEXT NOT NULL DEFAULT 'discovered'
                     CHECK (status IN ('discovered', 'downloaded', 'extracted', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    http_status      INTEGER,
    last_error       TEXT,
    sha256           TEXT,
    size_bytes       INTEGER,
    local_pdf        TEXT,
    pages            INTEGER,
    extracted_chars  INTEGER,
    likely_scanned   INTEGER,
    extract_attempts INTEGER NOT NULL DEFAULT 0,
    discovered_at    TEXT,
    updated_at       TEXT,
    case_id          TEXT,
    document_name    TEXT,
    shard            TEXT
);
CREATE INDEX IF NOT EXISTS documents_status ON documents(status);
CREATE INDEX IF NOT EXISTS documents_sha256 ON documents(sha256);
CREATE INDEX IF NOT EXISTS documents_case_number ON documents(case_number);

CREATE TABLE IF NOT EXISTS discovery_runs (
    run_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep        INTEGER NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT,
    shards       INTEGER NOT NULL DEFAULT 0,
    pages        INTEGER NOT NULL DEFAULT 0,
    rows_seen    INTEGER NOT NULL DEFAULT 0,
    rows_new     INTEGER NOT NULL DEFAULT 0,
    errors       INTEGER NOT NULL DEFAULT 0,
    seconds      REAL NOT NULL DEFAULT 0,
    complete     INTEGER NOT NULL DEFAULT 0
);

-- Shard progress of a sweep, so a killed sweep resumes where it stopped.
CREATE TABLE IF NOT EXISTS discovery_shards (
    sweep        INTEGER NOT NULL,
    shard        TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'done', 'split', 'error')),
    total_count  INTEGER,
    pages        INTEGER NOT NULL DEFAULT 0,
    rows_seen    INTEGER NOT NULL DEFAULT 0,
    rows_new     INTEGER NOT NULL DEFAULT 0,
    error        TEXT,
    updated_at   TEXT,
    PRIMARY KEY (sweep, shard)
);

CREATE TABLE IF NOT EXISTS extraction_log (
    log_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id  TEXT NOT NULL,
    sha256       TEXT,
    attempt      INTEGER NOT NULL,
    engine       TEXT,
    outcome      TEXT NOT NULL,
    pages        INTEGER,
    chars        INTEGER,
    seconds      REAL,
    error        TEXT,
    logged_at    TEXT NOT NULL
);

-- Store names written locally but not yet mirrored (quota, outage): a later run catches up.
CREATE TABLE IF NOT EXISTS store_pending (
    name         TEXT PRIMARY KEY,
    local_path   TEXT NOT NULL,
    reason       TEXT,
    queued_at    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS kv (
    key   TEXT PRIMARY KEY,
    value TEXT
);
"""

# v2: when a document's PDF was committed downloaded (downloaded_at), and the checkpoint_seq of
# the database at that commit (download_checkpoint: the store's download journal is keyed by it).
_SCHEMA_V2 = """
ALTER TABLE documents ADD COLUMN downloaded_at TEXT;
ALTER TABLE documents ADD COLUMN download_checkpoint INTEGER;
"""

# v3: the court's record as captured (ctrack-api.md, "What real captured responses show"): cases,
# their docket entries, parties and lower courts; per document the entry's type and subtype, the
# court's file ids, availability and the real case numbers an ADMIN-numbered one names; the
# court's own text of each document (`court_text`, the text under the store's court_text/<sha256>.txt);
# per shard the count the court announced in `discovery_shards.total_count` (already there), and
# per case the sweep that last walked it (the case walk resumes per case).
_SCHEMA_V3 = """
CREATE TABLE IF NOT EXISTS cases (
    case_id              TEXT PRIMARY KEY,
    case_number          TEXT,
    court                TEXT,
    court_level          TEXT,
    title                TEXT,
    case_type            TEXT,
    classification       TEXT,
    status               TEXT,
    status_date          TEXT,
    filed_date           TEXT,
    closed               INTEGER,
    category             TEXT,
    shard                TEXT,
    related_case_numbers TEXT,
    walked_sweep         INTEGER,
    walked_at            TEXT,
    updated_at           TEXT
);
CREATE INDEX IF NOT EXISTS cases_case_number ON cases(case_number);
CREATE INDEX IF NOT EXISTS cases_shard ON cases(shard);

CREATE TABLE IF NOT EXISTS docket_entries (
    docket_entry_id      TEXT PRIMARY KEY,
    case_id              TEXT,
    entry_type           TEXT,
    subtype              TEXT,
    description          TEXT,
    filed_date           TEXT,
    has_documents        INTEGER,
    related_case_numbers TEXT,
    updated_at           TEXT
);
CREATE INDEX IF NOT EXISTS docket_entries_case ON docket_entries(case_id);

CREATE TABLE IF NOT EXISTS parties (
    case_id      TEXT NOT NULL,
    position     INTEGER NOT NULL,
    name         TEXT,
    role         TEXT,
    status       TEXT,
    pro_se       INTEGER,
    address      TEXT,
    attorneys    TEXT,
    PRIMARY KEY (case_id, position)
);

CREATE TABLE IF NOT EXISTS lower_courts (
    case_id      TEXT NOT NULL,
    position     INTEGER NOT NULL,
    name         TEXT,
    case_number  TEXT,
    case_title   TEXT,
    PRIMARY KEY (case_id, position)
);

CREATE TABLE IF NOT EXISTS court_text (
    document_id        TEXT PRIMARY KEY,
    sha256             TEXT NOT NULL,
    pages              INTEGER NOT NULL,
    chars              INTEGER NOT NULL,
    replacement_chars  INTEGER NOT NULL,
    fetched_at         TEXT
);

ALTER TABLE documents ADD COLUMN entry_type TEXT;
ALTER TABLE documents ADD COLUMN entry_subtype TEXT;
ALTER TABLE documents ADD COLUMN dms_document_id TEXT;
ALTER TABLE documents ADD COLUMN mime_type TEXT;
ALTER TABLE documents ADD COLUMN document_description TEXT;
ALTER TABLE documents ADD COLUMN document_available INTEGER;
ALTER TABLE documents ADD COLUMN related_case_numbers TEXT;
CREATE INDEX IF NOT EXISTS documents_docket_entry ON documents(docket_entry_id);
"""

# v4: what extraction learnt. Per page of each PDF (by sha256): its text layer's non-blank
# characters, whether it shows an image and the share of the page images cover (where the engine
# measures it), whether it needs OCR, the engine that read it, and the characters OCR gave it.
# Per document: the pages that need OCR (an image and no text layer), the kept text's quality
# score, a permanent extraction failure's reason (encrypted, empty, too large, unparseable), and
# whether (and on how many pages) OCR text was merged in. Per attempt: the text's quality.
_SCHEMA_V4 = """
CREATE TABLE IF NOT EXISTS pages (
    sha256      TEXT NOT NULL,
    page        INTEGER NOT NULL,
    chars       INTEGER NOT NULL,
    has_images  INTEGER NOT NULL,
    image_cover REAL,
    needs_ocr   INTEGER NOT NULL DEFAULT 0,
    engine      TEXT,
    ocr_chars   INTEGER,
    PRIMARY KEY (sha256, page)
);
ALTER TABLE documents ADD COLUMN pages_needing_ocr INTEGER;
ALTER TABLE documents ADD COLUMN text_quality REAL;
ALTER TABLE documents ADD COLUMN extract_failure TEXT;
ALTER TABLE documents ADD COLUMN extracted_by_ocr INTEGER;
ALTER TABLE documents ADD COLUMN ocr_pages INTEGER;
ALTER TABLE extraction_log ADD COLUMN quality REAL;
"""

# v5: what is known about each document beyond the court's metadata, and where its bytes came from.
# `derived`: one row per document, re-derivable from the database and the texts (`method`,
# `version`: a better extractor redoes them); list fields are JSON arrays; NULL is unknown.
# `derived_case_numbers`: a document's own appellate case numbers (an ADMIN-numbered public opinion
# has its real ones only in its caption and description), the key citations resolve by.
# `citations`: every citation of a document's text, with its span in the text file.
# `download_events`: one row per download response: when it was asked for, what the court answered
# and the headers that identify the bytes.
_SCHEMA_V5 = """
CREATE TABLE IF NOT EXISTS derived (
    document_id          TEXT PRIMARY KEY,
    method               TEXT NOT NULL,
    version              INTEGER NOT NULL,
    source_sha256        TEXT,
    source_description   TEXT,
    text_sha256          TEXT,
    text_chars           INTEGER,
    kind                 TEXT,
    publication_status   TEXT,
    rendered_date        TEXT,
    judge                TEXT,
    judge_title          TEXT,
    disposition          TEXT,
    lower_court          TEXT,
    lower_court_judge    TEXT,
    lower_court_numbers  TEXT,
    trial_court          TEXT,
    trial_court_numbers  TEXT,
    case_numbers         TEXT,
    related_case_numbers TEXT,
    citation_count       INTEGER,
    warnings             TEXT,
    derived_at           TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS derived_kind ON derived(kind);
CREATE INDEX IF NOT EXISTS derived_judge ON derived(judge);

CREATE TABLE IF NOT EXISTS derived_case_numbers (
    document_id  TEXT NOT NULL,
    case_number  TEXT NOT NULL,
    PRIMARY KEY (document_id, case_number)
);
CREATE INDEX IF NOT EXISTS derived_case_numbers_number ON derived_case_numbers(case_number);

CREATE TABLE IF NOT EXISTS citations (
    citation_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id   TEXT NOT NULL,
    start         INTEGER NOT NULL,
    end           INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    form          TEXT NOT NULL,
    matched_text  TEXT NOT NULL,
    normalized    TEXT NOT NULL,
    case_number   TEXT,
    year          TEXT,
    court         TEXT,
    extractor     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS citations_document ON citations(document_id);
CREATE INDEX IF NOT EXISTS citations_case_number ON citations(case_number);
CREATE INDEX IF NOT EXISTS citations_normalized ON citations(normalized);

CREATE TABLE IF NOT EXISTS download_events (
    event_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id     TEXT NOT NULL,
    requested_at    TEXT NOT NULL,
    http_status     INTEGER,
    content_length  TEXT,
    etag            TEXT,
    last_modified   TEXT,
    content_type    TEXT
);
CREATE INDEX IF NOT EXISTS download_events_document ON download_events(document_id);
"""

# v6: where the court's own text of a document is known (`court_text`), how far the extracted
# text agrees with it (word Jaccard, c80's text_agreement): a free cross-check of extraction.
_SCHEMA_V6 = """
ALTER TABLE documents ADD COLUMN court_text_agreement REAL;
"""

# v7: why the engine of each page was kept (`pages.engine_reason`: good text, the others poor,
# whole words where engines disagreed, or poor in every engine: then the page needs OCR).
_SCHEMA_V7 = """
ALTER TABLE pages ADD COLUMN engine_reason TEXT;
"""

# v8: docket entries whose file list is asked again on a later sweep. `files_missing` says why
# ('empty': the entry says hasDocuments and the court listed no file; 'withheld': a file is listed
# with documentAvailable false), NULL once the list was complete; `files_asked_sweep` is the sweep
# that last asked for the list.
_SCHEMA_V8 = """
ALTER TABLE docket_entries ADD COLUMN files_missing TEXT;
ALTER TABLE docket_entries ADD COLUMN files_asked_sweep INTEGER;
CREATE INDEX IF NOT EXISTS docket_entries_files_missing ON docket_entries(files_missing)
    WHERE files_missing IS NOT NULL;
"""

# v9: what adoption (c38_legacy) kept of each row an older writer's database (v1.2) brought: its
# status there, whether discovery has confirmed its id (`id_kind`: unchecked until discovery
# rewrote its metadata (a documentID) or converged without listing it (unlisted), or docket_entry /
# case when the id is one of those, with the real documents in `linked_documents`, a JSON array),
# its discovery metadata at adoption (`metadata`, LEGACY_METADATA_SQL: discovery writing the row
# changes it), and a note (why it went back to a queue).
_SCHEMA_V9 = """
CREATE TABLE IF NOT EXISTS legacy_documents (
    document_id       TEXT PRIMARY KEY,
    legacy_status     TEXT,
    id_kind           TEXT NOT NULL DEFAULT 'unchecked',
    metadata          TEXT,
    linked_documents  TEXT,
    matched_sha256    INTEGER,
    note              TEXT,
    checked_at        TEXT
);
CREATE INDEX IF NOT EXISTS legacy_documents_kind ON legacy_documents(id_kind);
"""

# v10: which of a document's texts its readers use (`documents.text_source`: text_layer, ocr or
# court_text, as c83_best_text chooses), the quality of the text OCR merged (`ocr_quality`, one of
# the choice's inputs), the text a derived row was read from (`derived.text_source`), and the
# rotation OCR's orientation detection gave each page before recognising it (`pages.rotation`,
# degrees clockwise; NULL where none was detected).
_SCHEMA_V10 = """
ALTER TABLE documents ADD COLUMN text_source TEXT;
ALTER TABLE documents ADD COLUMN ocr_quality REAL;
ALTER TABLE derived ADD COLUMN text_source TEXT;
ALTER TABLE pages ADD COLUMN rotation INTEGER;
"""

# v11: the order of the crawl's work (c75_schedule). `cases.search_row`: a fingerprint of the case
# search row as it was when the case was last walked (a case whose row is unchanged is not walked
# again); `cases.details_sweep`: the walked sweep whose parties and lower courts were fetched (the
# details pass, after the documents; NULL: not yet). Cases walked before this step with their details
# (the walk fetched them itself) count as fetched. `documents_download_queue`: the rows the download
# queue can hold, without the withheld ones, so the crawl's look at the queue after each unit of work
# reads the queue, not every failure.
_SCHEMA_V11 = """
ALTER TABLE cases ADD COLUMN search_row TEXT;
ALTER TABLE cases ADD COLUMN details_sweep INTEGER;
UPDATE cases SET details_sweep = walked_sweep WHERE walked_sweep IS NOT NULL
    AND (EXISTS (SELECT 1 FROM parties p WHERE p.case_id = cases.case_id)
         OR EXISTS (SELECT 1 FROM lower_courts l WHERE l.case_id = cases.case_id));
CREATE INDEX IF NOT EXISTS cases_details_due ON cases(case_number)
    WHERE walked_sweep IS NOT NULL AND (details_sweep IS NULL OR details_sweep < walked_sweep);
CREATE INDEX IF NOT EXISTS documents_download_queue ON documents(status)
    WHERE status IN ('discovered', 'failed') AND document_available IS NOT 0;
"""

# Forward migrations: version -> SQL. Append only; never edit a released step.
MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4, 5: _SCHEMA_V5,
                              6: _SCHEMA_V6, 7: _SCHEMA_V7, 8: _SCHEMA_V8,
                              9: _SCHEMA_V9, 10: _SCHEMA_V10, 11: _SCHEMA_V11}
SCHEMA_VERSION = max(MIGRATIONS)

# The response headers that identify a download's bytes (download_events), in its column order.
IDENTIFYING_HEADERS = ("Content-Length", "ETag", "Last-Modified", "Content-Type")

DOCUMENT_METADATA_COLUMNS = (
    "case_number", "court", "case_title", "docket_entry_id", "description",
    "filed_date", "case_id", "document_name", "shard",
)
# A document's discovery metadata as one value (alias d): adoption records it, and a different value
# later means discovery wrote the row, i.e. the court listed its id as a documentID.
LEGACY_METADATA_SQL = " || '|' || ".join(f"quote(d.{column})" for column in DOCUMENT_METADATA_COLUMNS)
# What the case walk (and a resolved row) adds to a document (v3); written only when a row has them.
DOCUMENT_DETAIL_COLUMNS = (
    "entry_type", "entry_subtype", "dms_document_id", "mime_type", "document_description",
    "document_available", "related_case_numbers",
)
CASE_COLUMNS = ("case_id", "case_number", "court", "court_level", "title", "case_type", "classification",
                "status", "status_date", "filed_date", "closed", "category", "shard", "related_case_numbers")
DOCKET_ENTRY_COLUMNS = ("docket_entry_id", "case_id", "entry_type", "subtype", "description", "filed_date",
                        "has_documents", "related_case_numbers")


# The database's checkpoint_seq at a write, read in the write's own transaction: a row committed
# after checkpoint N was taken carries N or more, one committed before it less (the bump and the
# row's commit are serialized by SQLite's write lock). Clock-free.
_CURRENT_CHECKPOINT_SQL = f"COALESCE((SELECT CAST(value AS INTEGER) FROM kv WHERE key = '{KV_CHECKPOINT_SEQ}'), 0)"
# Notes the store's newest snapshot; the WHERE keeps the note from ever moving backwards.
_STORE_CHECKPOINT_SQL = (
    "INSERT INTO kv(key, value) VALUES (:key, :seq) ON CONFLICT(key) DO UPDATE "
    "SET value = excluded.value WHERE CAST(kv.value AS INTEGER) < CAST(excluded.value AS INTEGER)")
_DOWNLOAD_CHECKPOINT_SET = f"download_checkpoint = {_CURRENT_CHECKPOINT_SQL}"

# What a document reusing an extracted twin's text takes from it.
_TWIN_COLUMNS = ("document_id, pages, extracted_chars, likely_scanned, pages_needing_ocr, text_quality, "
                 "extracted_by_ocr, ocr_pages")

_DISCOVERED_COLUMNS = ("document_id",) + DOCUMENT_METADATA_COLUMNS
_INSERT_DISCOVERED_SQL = (
    f"INSERT INTO documents ({', '.join(_DISCOVERED_COLUMNS)}, status, discovered_at, updated_at) "
    f"VALUES ({', '.join('?' for _ in _DISCOVERED_COLUMNS)}, 'discovered', ?, ?) "
    "ON CONFLICT(document_id) DO NOTHING")
# Metadata only (a NULL never erases what the court said before); status and the rest are left alone.
_REFRESH_DISCOVERED_SQL = (
    f"UPDATE documents SET {', '.join(f'{c} = COALESCE(?, {c})' for c in DOCUMENT_METADATA_COLUMNS)} "
    "WHERE document_id = ?")
_DETAILS_SQL = (
    f"UPDATE documents SET {', '.join(f'{c} = COALESCE(?, {c})' for c in DOCUMENT_DETAIL_COLUMNS)} "
    "WHERE document_id = ?")
# A withheld document (the court lists it with documentAvailable false) is a permanent failure
# that was never requested: `failed`, http_status 404, document_available 0, this last_error.
WITHHELD_ERROR = "withheld: the court lists this file with documentAvailable false; not requested"
RELEASED_ERROR = "released: the court lists this file as available again; queued"
# The court's word on availability, as it changes: a document not yet downloaded that the court
# withholds becomes a withheld failure; a withheld one it lists as available again goes back to the
# download queue (status discovered, attempts 0): the explicit way out of the permanent-404 rule.
# A downloaded document keeps its status (its bytes are held) and only records the court's word.
_WITHHOLD = "(:available = 0 AND status IN ('discovered', 'failed'))"
_RELEASE = "(:available = 1 AND status = 'failed' AND document_available = 0)"
_AVAILABILITY_SQL = (
    f"UPDATE documents SET "
    f"status = CASE WHEN {_WITHHOLD} THEN 'failed' WHEN {_RELEASE} THEN 'discovered' ELSE status END, "
    f"http_status = CASE WHEN {_WITHHOLD} THEN 404 WHEN {_RELEASE} THEN NULL ELSE http_status END, "
    f"attempts = CASE WHEN {_RELEASE} THEN 0 ELSE attempts END, "
    f"last_error = CASE WHEN {_WITHHOLD} THEN :withheld WHEN {_RELEASE} THEN :released ELSE last_error END, "
    "document_available = :available, updated_at = :now "
    "WHERE document_id = :id AND document_available IS NOT :available")
# A case row from a search refreshes what it carries; a walk's fuller header fills the rest.
_UPSERT_CASE_SQL = (
    f"INSERT INTO cases ({', '.join(CASE_COLUMNS)}, updated_at) VALUES ({', '.join('?' for _ in CASE_COLUMNS)}, ?) "
    "ON CONFLICT(case_id) DO UPDATE SET "
    + ", ".join(f"{c} = COALESCE(excluded.{c}, {c})" for c in CASE_COLUMNS[1:]) + ", updated_at = excluded.updated_at")
_UPSERT_ENTRY_SQL = (
    f"INSERT INTO docket_entries ({', '.join(DOCKET_ENTRY_COLUMNS)}, updated_at) "
    f"VALUES ({', '.join('?' for _ in DOCKET_ENTRY_COLUMNS)}, ?) ON CONFLICT(docket_entry_id) DO UPDATE SET "
    + ", ".join(f"{c} = COALESCE(excluded.{c}, {c})" for c in DOCKET_ENTRY_COLUMNS[1:])
    + ", updated_at = excluded.updated_at")



class LegacyDatabaseError(IntegrityError):
    """A database an older version of the pipeline wrote (v1.2: a `documents` table, no
    `schema_version`), or one stamped with a version whose tables it lacks: c38_legacy adopts it;
    one it cannot adopt is refused naming why (exit status 2), and nothing is changed."""


@dataclass(frozen=True)
class ColumnSpec:
    """One column as `PRAGMA table_info` describes it."""
    name: str
    type: str
    notnull: bool
    default: str | None      # the DEFAULT clause's SQL text, or None
    pk: bool


@dataclass(frozen=True)
class SchemaSpec:
    """Tables (name -> CREATE TABLE statement and columns) and indexes ((name, table, CREATE INDEX
    statement)) of a database."""
    tables: dict[str, tuple[str, tuple[ColumnSpec, ...]]]
    indexes: tuple[tuple[str, str, str], ...]

    def columns(self, table: str) -> tuple[ColumnSpec, ...]:
        return self.tables[table][1] if table in self.tables else ()


def read_schema(conn: sqlite3.Connection, schema: str = "main") -> SchemaSpec:
    """The tables and indexes of an open database (SQLite's own tables left out)."""
    tables: dict[str, tuple[str, tuple[ColumnSpec, ...]]] = {}
    indexes = []
    for kind, name, table, sql in conn.execute(
            f"SELECT type, name, tbl_name, sql FROM {schema}.sqlite_master WHERE type IN ('table', 'index') "
            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall():
        if kind == "table":
            columns = tuple(ColumnSpec(row[1], row[2] or "", bool(row[3]), row[4], bool(row[5]))
                            for row in conn.execute(f"PRAGMA {schema}.table_info({_quote_name(name)})"))
            tables[name] = (sql or "", columns)
        elif sql:     # an index SQLite made for a UNIQUE or PRIMARY KEY has no statement of its own
            indexes.append((name, table, sql))
    return SchemaSpec(tables, tuple(indexes))


@functools.lru_cache(maxsize=None)
def target_schema(version: int | None = None) -> SchemaSpec:
    """What MIGRATIONS build on an empty database, up to `version` (default: SCHEMA_VERSION): the
    schema an adopted database is made whole against, read at run time from the migrations."""
    conn = sqlite3.connect(":memory:")
    try:
        for step in sorted(v for v in MIGRATIONS if version is None or v <= version):
            for statement in _split_sql(MIGRATIONS[step]):
                conn.execute(statement)
        return read_schema(conn)
    finally:
        conn.close()


def schema_gaps(present: SchemaSpec, target: SchemaSpec) -> list[str]:
    """What `present` lacks of `target`'s tables and columns ('table' or 'table.column'); [] when whole."""
    gaps = []
    for table, (_, columns) in target.tables.items():
        if table not in present.tables:
            gaps.append(table)
            continue
        have = {column.name for column in present.columns(table)}
        gaps.extend(f"{table}.{column.name}" for column in columns if column.name not in have)
    return gaps


def not_adopted_message(path: str | os.PathLike, version: int = 0) -> str:
    """What a command that needs this version's database says of an older version's, not adopted yet."""
    return (f"{path} was written by an older version of the pipeline (v1.2)"
            + (f" and records schema version {version} without its columns" if version else "")
            + ": `kycourt-pipeline run` (or the notebook's Run all) adopts it first")


def schema_state(path: str | os.PathLike, *, recover: bool = False) -> tuple[str, int]:
    """(kind, recorded schema_version) of the database at `path`, read on a read-only connection
    (`recover`: a read-write one that writes nothing, except that SQLite rolls back the hot
    journal a killed writer left, as any writer would):
    'empty' (no file, or no table), 'current' (the pipeline's, whole for the version it records,
    which migrate() takes forward), 'legacy' (a `documents` table and no schema_version: an older
    writer's, v1.2), 'incomplete' (a schema_version, but tables or columns of that version missing:
    a version stamped on a legacy database without its columns), 'foreign' (tables, no `documents`
    and no schema_version). Raises sqlite3.DatabaseError when SQLite cannot read it."""
    try:
        if Path(path).stat().st_size == 0:
            return "empty", 0
    except FileNotFoundError:
        return "empty", 0
    conn = sqlite3.connect(database_uri(path, **({} if recover else {"mode": "ro"})), uri=True, timeout=30)
    try:
        present = read_schema(conn)
        version = 0
        if "kv" in present.tables and "value" in {c.name for c in present.columns("kv")}:
            row = conn.execute("SELECT value FROM kv WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row and str(row[0]).isdigit() else 0
    finally:
        conn.close()
    if version:
        return ("incomplete" if version <= SCHEMA_VERSION and schema_gaps(present, target_schema(version))
                else "current"), version
    if "documents" in present.tables:
        return "legacy", 0
    return ("foreign" if present.tables else "empty"), 0


def database_uri(path: str | os.PathLike, **params: str) -> str:
    """A `file:` URI for `path` (absolute, percent-encoded) with query parameters such as mode=ro."""
    uri = Path(path).absolute().as_uri()
    return uri + ("?" + "&".join(f"{key}={value}" for key, value in params.items()) if params else "")


def connect(path: str | os.PathLike, *, readonly: bool = False) -> sqlite3.Connection:
    """One connection with the pipeline's pragmas; autocommit, explicit transactions."""
    if readonly:
        conn = sqlite3.connect(database_uri(path, mode="ro"), uri=True,
                               isolation_level=None, timeout=30, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=30,
                               check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _reader_view(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A read-only connection able to run the shared queue SQL on an older version's database too
    (`status` or `report` before the run that migrates it): DOWNLOAD_QUEUE_SQL names legacy_documents
    (schema 9), which such a reader sees empty, in its connection's own temp schema."""
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'legacy_documents'").fetchone() is None:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS legacy_documents "
                         "(document_id TEXT PRIMARY KEY, id_kind TEXT)")
    except sqlite3.DatabaseError:
        pass        # not a database (yet): the reader's first query says so
    return conn


def is_sqlite_file(path: str | os.PathLike) -> bool:
    """Whether `path` holds an SQLite database, asked of SQLite itself on a read-only connection.

    The file is never opened by hand: on Linux, closing any descriptor of a file drops every POSIX
    lock this process holds on it, so a plain open()/close() of a database that another connection
    of this process (the store uploader, the checkpointer) is using lets a concurrent reader
    (a user's `sqlite3`) believe it is alone, checkpoint and delete the -wal and -shm files under a
    live writer: lost commits, then "disk I/O error" or a malformed database (SQLite's "How To
    Corrupt", 2.2). SQLite's own connections share one descriptor table per file and never do that.
    A missing or empty file is no database.
    """
    try:
        if Path(path).stat().st_size == 0:
            return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(database_uri(path, mode="ro"), uri=True, timeout=30)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return "not a database" not in str(exc)   # locked or busy: a database all the same
    return True


class _ThreadConnection:
    """One thread's connection to a Database; closed when the thread ends (its thread-local slot
    held the last reference), so worker threads leave no connection behind."""

    def __init__(self, db: "Database", conn: sqlite3.Connection):
        self.conn = conn
        self._db = weakref.ref(db)
        with db._connections_lock:
            db._connections.append(conn)

    def __del__(self) -> None:
        db = self._db()
        if db is not None:
            with db._connections_lock:
                if self.conn in db._connections:
                    db._connections.remove(self.conn)
        self.conn.close()


class Database:
    """Every statement of the pipeline, over one sqlite3 connection per thread.

    Threads never share a connection: the store uploader, the checkpointer and the extract saver
    each get their own on first use (`conn`), as SQLite means them to
    be used. A shared one failed under load: a read still stepping in one thread holds a WAL
    snapshot that makes another thread's write fail at once ("database is locked",
    SQLITE_BUSY_SNAPSHOT), and statements interleaved on one connection fail with "no more rows
    available". Several connections of one process are safe with POSIX locks: SQLite shares one
    lock table per file among them. Writers of this process take turns on a lock, so none spends
    its busy_timeout waiting for another; another process's writer is waited for by busy_timeout.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()              # one write transaction of this process at a time
        self._connections: list[sqlite3.Connection] = []     # every open one, for close()
        self._connections_lock = threading.Lock()
        self._local = threading.local()
        self._local.holder = _ThreadConnection(self, conn)

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        holder = getattr(self._local, "holder", None)
        if holder is None:
            conn = connect(self.path, readonly=self.readonly)
            holder = self._local.holder = _ThreadConnection(self, _reader_view(conn) if self.readonly else conn)
        return holder.conn

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def open(cls, path: str | os.PathLike) -> "Database":
        # SQLite itself says whether the file is a database: the live file is never opened by hand
        # (see is_sqlite_file), and SQLite writes nothing to a file whose header is not its own.
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Judged before the first write: connect() alone turns WAL on, which rewrites the header.
            kind, version = schema_state(path, recover=True)
            if kind in ("legacy", "incomplete"):
                raise LegacyDatabaseError(not_adopted_message(path, version))
            if kind == "foreign":
                raise IntegrityError(f"{path} is an SQLite database but not this pipeline's (no documents "
                                     "table, no schema_version); move it aside to start an archive there")
            db = cls(connect(path), path)
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise IntegrityError(f"{path} is not an SQLite database (bad header); "
                                     "move it aside or delete it to start over") from None
            raise IntegrityError(f"{path} cannot be opened as SQLite: {exc}") from None
        try:
            db.migrate()
        except sqlite3.DatabaseError as exc:
            db.close()
            raise IntegrityError(f"{path} cannot be opened as SQLite: {exc}") from None
        return db

    @classmethod
    def open_readonly(cls, path: str | os.PathLike) -> "Database":
        """A reader's view (reports, the CLI's queries): never writes, never migrates."""
        return cls(_reader_view(connect(path, readonly=True)), Path(path), readonly=True)

    def close(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()

    def migrate(self) -> int:
        with self.transaction():
            self.conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT)")
            current = int(self.kv_get("schema_version", "0"))
            if current == 0 and self.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'").fetchone():
                # CREATE TABLE IF NOT EXISTS would keep its documents table as it is and stamp a version
                # whose columns it lacks: adoption (c38_legacy) makes such a schema whole instead.
                raise LegacyDatabaseError(f"{self.path} has a documents table but no schema_version: "
                                          "an older version's database, to be adopted, not migrated")
            if current > SCHEMA_VERSION:
                raise IntegrityError(f"{self.path} has schema version {current}, newer than "
                                     f"this code's {SCHEMA_VERSION}: upgrade kycourt-colab")
            for version in sorted(v for v in MIGRATIONS if v > current):
                for statement in _split_sql(MIGRATIONS[version]):
                    self.conn.execute(statement)
                self.kv_set("schema_version", str(version))
        return SCHEMA_VERSION

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT on this thread's connection, or ROLLBACK on any exception
        (re-entrant within a thread)."""
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def integrity_check(self) -> list[str]:
        rows = self.conn.execute("PRAGMA integrity_check").fetchall()
        problems = [row[0] for row in rows]
        return [] if problems == ["ok"] else problems

    # ------------------------------------------------------------------- kv

    def kv_get(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def kv_set(self, key: str, value: Any) -> None:
        with self.transaction():
            self.conn.execute(
                "INSERT INTO kv(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, str(value)))

    def record_store_checkpoint(self, sequence: int) -> None:
        """Notes that the store holds snapshot `sequence` (as `record_store_checkpoint`; never back)."""
        with self.transaction():
            self.conn.execute(_STORE_CHECKPOINT_SQL, {"key": KV_STORE_CHECKPOINT_SEQ, "seq": str(sequence)})

    # -------------------------------------------------------------- queues

    @staticmethod
    def _queue_params(cfg: Config) -> dict[str, int]:
        return {"max_attempts": cfg.MAX_ATTEMPTS, "max_extract_attempts": cfg.MAX_EXTRACT_ATTEMPTS}

    def _queue(self, where: str, cfg: Config, limit: int, after_rowid: int) -> list[sqlite3.Row]:
        return self.conn.execute(
            f"SELECT rowid, * FROM documents WHERE ({where}) AND rowid > :after ORDER BY rowid LIMIT :limit",
            {**self._queue_params(cfg), "after": after_rowid, "limit": limit}).fetchall()

    def _queue_size(self, where: str, cfg: Config) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}",
                                 self._queue_params(cfg)).fetchone()[0]

    def download_queue(self, cfg: Config, limit: int, after: int = -1) -> list[sqlite3.Row]:
        """The next `limit` documents to fetch after the row whose `queue_key` is `after`: opinions
        first, then in rowid order."""
        return self.conn.execute(
            f"SELECT rowid, {_QUEUE_KEY_SQL} AS queue_key, * FROM documents WHERE ({DOWNLOAD_QUEUE_SQL}) "
            f"AND {_QUEUE_KEY_SQL} > :after ORDER BY queue_key LIMIT :limit",
            {**self._queue_params(cfg), "after": after, "limit": limit}).fetchall()

    def download_queue_size(self, cfg: Config) -> int:
        return self._queue_size(DOWNLOAD_QUEUE_SQL, cfg)

    def opinions_to_download(self, cfg: Config) -> int:
        """Opinions (OPINION_SQL) in the download queue."""
        return self._queue_size(f"({DOWNLOAD_QUEUE_SQL}) AND {OPINION_SQL}", cfg)

    def extract_queue(self, cfg: Config, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        """The next `limit` documents to extract, in rowid order after `after_rowid`."""
        return self._queue(EXTRACT_QUEUE_SQL, cfg, limit, after_rowid)

    def extract_queue_size(self, cfg: Config) -> int:
        return self._queue_size(EXTRACT_QUEUE_SQL, cfg)

    def queue_sizes(self, cfg: Config) -> dict[str, int]:
        return {"download": self.download_queue_size(cfg), "extract": self.extract_queue_size(cfg)}

    def forgive_failures(self) -> int:
        """RETRY_HARD: put every failed document back in the download queue, once per run (but a
        withheld one: the court does not serve it; a sweep that sees it available queues it)."""
        with self.transaction():
            cursor = self.conn.execute(
                "UPDATE documents SET attempts = 0, http_status = NULL, "
                "last_error = 'retry-hard; was: ' || COALESCE(http_status, '') || ' ' || COALESCE(last_error, ''), "
                "updated_at = ? WHERE status = 'failed' AND document_available IS NOT 0", (utc_now(),))
            return cursor.rowcount

    # -------------------------------------------------------------- counts

    def status_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for status, count in self.conn.execute(
                "SELECT status, COUNT(*) FROM documents GROUP BY status"):
            counts[status] = count
        return counts

    def document_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def permanent_failure_count(self) -> int:
        return self.conn.execute(
            f"SELECT COUNT(*) FROM documents WHERE status = 'failed' "
            f"AND http_status IN ({_PERMANENT_LIST})").fetchone()[0]

    def final_states(self, cfg: Config) -> dict[str, Any]:
        """Documents no normal run changes, by the state they are in for good, and the failed ones
        still retrying: `not_extractable` (downloaded PDFs out of extract attempts) with its
        reasons (extract_failure; 'attempts spent' when none was named), and the failed documents
        split so that they add up to the `failed` count: `withheld` (the court lists the document
        but offers no file: document_available 0), `failed_for_good` (a permanent HTTP answer),
        `out_of_attempts` (transient failures, attempts spent) and `retrying` (still queued)."""
        columns = set(table_columns(self.conn, "documents"))
        available = "COALESCE(document_available, 1)" if "document_available" in columns else "1"
        reason = "COALESCE(extract_failure, 'attempts spent')" if "extract_failure" in columns else "'attempts spent'"
        params = self._queue_params(cfg)
        not_extractable = dict(self.conn.execute(
            f"SELECT {reason} AS reason, COUNT(*) FROM documents WHERE status = 'downloaded' "
            f"AND NOT ({EXTRACT_QUEUE_SQL}) GROUP BY reason ORDER BY COUNT(*) DESC, reason", params).fetchall())
        failed = self.conn.execute(
            f"SELECT COALESCE(SUM({available} = 0), 0), "
            f"COALESCE(SUM({available} != 0 AND http_status IN ({_PERMANENT_LIST})), 0), "
            f"COALESCE(SUM({available} != 0 AND NOT ({DOWNLOAD_QUEUE_SQL}) "
            f"AND (http_status IS NULL OR http_status NOT IN ({_PERMANENT_LIST}))), 0), "
            f"COALESCE(SUM({available} != 0 AND {DOWNLOAD_QUEUE_SQL}), 0) "
            f"FROM documents WHERE status = 'failed'", params).fetchone()
        return {"not_extractable": sum(not_extractable.values()), "not_extractable_reasons": not_extractable,
                "withheld": failed[0], "failed_for_good": failed[1], "out_of_attempts": failed[2],
                "retrying": failed[3]}

    def coverage_by_year_court(self, cfg: Config) -> list[sqlite3.Row]:
        """Per case-number year and court: documents in each status (for reports), and the
        downloaded ones out of extract attempts (`not_extractable`: never extracted by a run)."""
        return self.conn.execute(
            "SELECT substr(case_number, 1, 4) AS year, court, "
            "COUNT(*) AS discovered, "
            "SUM(status IN ('downloaded', 'extracted')) AS downloaded, "
            "SUM(status = 'extracted') AS extracted, "
            "SUM(status = 'failed') AS failed, "
            f"SUM(status = 'downloaded' AND NOT ({EXTRACT_QUEUE_SQL})) AS not_extractable "
            "FROM documents GROUP BY year, court ORDER BY year, court", self._queue_params(cfg)).fetchall()

    def get_document(self, document_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT rowid, * FROM documents WHERE document_id = ?",
                                 (document_id,)).fetchone()

    def iter_documents(self, where: str = "1", params: Sequence[Any] = ()) -> Iterator[sqlite3.Row]:
        yield from self.conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY document_id", params)

    # ----------------------------------------------------------- discovery

    def upsert_discovered(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Inserts new documents as `discovered`; refreshes metadata of known ones.

        Returns how many document ids were new. Status, attempts and every
        download/extract column are left alone, so a status never moves back.
        """
        now = utc_now()
        values = [[row.get(c) for c in _DISCOVERED_COLUMNS] for row in rows]
        with self.transaction():
            # changes() of a DO NOTHING insert counts the new ids exactly, without two COUNT(*)s
            # over the table; only a page that held known ids needs the metadata refresh.
            before = self.conn.total_changes
            self.conn.executemany(_INSERT_DISCOVERED_SQL, (v + [now, now] for v in values))
            new = self.conn.total_changes - before
            if new < len(values):
                self.conn.executemany(_REFRESH_DISCOVERED_SQL, (v[1:] + v[:1] for v in values))
            details = [[row.get(c) for c in DOCUMENT_DETAIL_COLUMNS] + [row["document_id"]] for row in rows
                       if any(row.get(c) is not None for c in DOCUMENT_DETAIL_COLUMNS)] if isinstance(rows, list) else []
            if details:
                # Availability first: it reads the stored document_available the details then refresh.
                self.conn.executemany(_AVAILABILITY_SQL, (
                    {"id": row["document_id"], "available": row["document_available"], "now": now,
                     "withheld": WITHHELD_ERROR, "released": RELEASED_ERROR}
                    for row in rows if row.get("document_available") is not None))
                self.conn.executemany(_DETAILS_SQL, details)
            return new

    # ------------------------------------------------------------ case walk

    def cases_to_walk(self, sweep: int, case_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """case_id -> (walked_sweep, walked_at, closed, search_row) of the given cases the table holds."""
        found: dict[str, sqlite3.Row] = {}
        wanted = list(case_ids)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for row in self.conn.execute(
                    f"SELECT case_id, walked_sweep, walked_at, closed, search_row FROM cases "
                    f"WHERE case_id IN ({', '.join('?' * len(chunk))})", chunk):
                found[row["case_id"]] = row
        return found

    def record_case_walk(self, sweep: int | None, case: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]],
                         documents: list[dict], court_texts: Sequence[Mapping[str, Any]] = ()) -> int:
        """One walked case in one transaction: its row (walked in `sweep`, with the search row's
        fingerprint it was walked at; None: seen, not walked, so the fingerprint of its last walk
        stays; a case of None: entries alone), entries, documents and the court's texts. Returns the
        new documents."""
        now = utc_now()
        with self.transaction():
            if case is not None:
                self.conn.execute(_UPSERT_CASE_SQL, [case.get(c) for c in CASE_COLUMNS] + [now])
            if sweep is not None and case is not None:
                self.conn.execute("UPDATE cases SET walked_sweep = ?, walked_at = ?, search_row = ? WHERE case_id = ?",
                                  (sweep, now, case.get("search_row"), case["case_id"]))
            self.conn.executemany(_UPSERT_ENTRY_SQL, ([entry.get(c) for c in DOCKET_ENTRY_COLUMNS] + [now]
                                                      for entry in entries))
            # Entries whose file list was asked: why it must be asked again (NULL: it need not).
            self.conn.executemany(
                "UPDATE docket_entries SET files_missing = ?, files_asked_sweep = ? WHERE docket_entry_id = ?",
                ((entry["files_missing"], entry["files_asked_sweep"], entry["docket_entry_id"])
                 for entry in entries if "files_asked_sweep" in entry))
            new = self.upsert_discovered(documents) if documents else 0
            self.conn.executemany(
                "INSERT INTO court_text(document_id, sha256, pages, chars, replacement_chars, fetched_at) "
                "VALUES (:document_id, :sha256, :pages, :chars, :replacement_chars, :now) "
                "ON CONFLICT(document_id) DO UPDATE SET sha256 = excluded.sha256, pages = excluded.pages, "
                "chars = excluded.chars, replacement_chars = excluded.replacement_chars, fetched_at = excluded.fetched_at",
                ({**text, "now": now} for text in court_texts))
            return new

    # The details pass: walked cases whose parties and lower courts are not fetched for their last walk.
    _DETAILS_DUE_SQL = "walked_sweep IS NOT NULL AND (details_sweep IS NULL OR details_sweep < walked_sweep)"

    def cases_needing_details(self, limit: int, after: str = "") -> list[sqlite3.Row]:
        """The next `limit` walked cases whose details are due, in case-number order after `after`."""
        return self.conn.execute(
            f"SELECT case_id, case_number, walked_sweep FROM cases WHERE {self._DETAILS_DUE_SQL} "
            "AND case_number > ? ORDER BY case_number LIMIT ?", (after, limit)).fetchall()

    def details_due_count(self) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM cases WHERE {self._DETAILS_DUE_SQL}").fetchone()[0]

    def record_case_details(self, case_id: str, walked_sweep: int, parties: Sequence[Mapping[str, Any]] | None,
                            lower_courts: Sequence[Mapping[str, Any]] | None) -> None:
        """A case's parties and lower courts (each None: the court gave no usable list, the old rows
        stay), and that they were fetched for the walk of `walked_sweep`; one transaction."""
        with self.transaction():
            if parties is not None:
                self.conn.execute("DELETE FROM parties WHERE case_id = ?", (case_id,))
                self.conn.executemany(
                    "INSERT INTO parties(case_id, position, name, role, status, pro_se, address, attorneys) "
                    "VALUES (:case_id, :position, :name, :role, :status, :pro_se, :address, :attorneys)",
                    ({**party, "attorneys": json.dumps(party.get("attorneys") or [])} for party in parties))
            if lower_courts is not None:
                self.conn.execute("DELETE FROM lower_courts WHERE case_id = ?", (case_id,))
                self.conn.executemany(
                    "INSERT INTO lower_courts(case_id, position, name, case_number, case_title) "
                    "VALUES (:case_id, :position, :name, :case_number, :case_title)", lower_courts)
            self.conn.execute("UPDATE cases SET details_sweep = ? WHERE case_id = ?", (walked_sweep, case_id))

    def entries_to_ask_again(self, sweep: int, limit: int = -1, after: str = "") -> list[sqlite3.Row]:
        """The next `limit` docket entries (by id, after `after`) whose file list came back empty or with
        withheld files, not asked in `sweep` yet (with their case's number, for the documents' rows)."""
        return self.conn.execute(
            "SELECT e.*, c.case_number, c.court, c.title FROM docket_entries e "
            "LEFT JOIN cases c ON c.case_id = e.case_id "
            "WHERE e.files_missing IS NOT NULL AND COALESCE(e.files_asked_sweep, 0) < ? AND e.docket_entry_id > ? "
            "ORDER BY e.docket_entry_id LIMIT ?", (sweep, after, limit)).fetchall()

    def entries_missing_files(self) -> dict[str, int]:
        """How many docket entries wait for their files to be listed again, by reason."""
        return dict(self.conn.execute(
            "SELECT files_missing, COUNT(*) FROM docket_entries WHERE files_missing IS NOT NULL "
            "GROUP BY files_missing").fetchall())

    def withheld_documents(self, limit: int | None = None) -> list[sqlite3.Row]:
        """Documents the court lists but withholds (documentAvailable false), by case number."""
        return self.conn.execute(
            "SELECT document_id, case_number, description, document_name, filed_date, status FROM documents "
            "WHERE document_available = 0 ORDER BY case_number, document_id LIMIT ?",
            (-1 if limit is None else limit,)).fetchall()

    def withheld_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM documents WHERE document_available = 0").fetchone()[0]

    def known_docket_entries_with_documents(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these docket entries already have a document in the table that the court listed:
        an adopted row discovery has not confirmed as a document (legacy_documents: unchecked, or an
        entry's or case's id) does not count, so its entry is asked and the answer confirms it, or
        finds the entry's real documents (c38_legacy)."""
        known: set[str] = set()
        wanted = list(entry_ids)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            known.update(row[0] for row in self.conn.execute(
                f"SELECT DISTINCT docket_entry_id FROM documents d WHERE docket_entry_id IN ({', '.join('?' * len(chunk))}) "
                "AND NOT EXISTS (SELECT 1 FROM legacy_documents l WHERE l.document_id = d.document_id "
                "AND l.id_kind != 'document')", chunk))
        return known

    def coverage_audit(self) -> list[sqlite3.Row]:
        """Per top-level shard of the latest sweep that paged it: what the court announced
        (`announced`: documents for the document search, cases for the case walk; for a split shard,
        the sum of its paged leaves, whose totals leave out neighbouring numbers) next to what the
        tables hold (`documents`, `cases`)."""
        return self.conn.execute(
            "WITH latest AS (SELECT shard, MAX(sweep) AS sweep FROM discovery_shards "
            "                WHERE total_count IS NOT NULL AND length(shard) IN (7, 13) GROUP BY shard) "
            "SELECT latest.shard, latest.sweep, "
            "  (SELECT SUM(leaf.total_count) FROM discovery_shards leaf WHERE leaf.sweep = latest.sweep "
            "   AND leaf.state = 'done' AND substr(leaf.shard, 1, length(latest.shard)) = latest.shard) AS announced, "
            "  (SELECT COUNT(*) FROM documents d WHERE d.shard = latest.shard) AS documents, "
            "  (SELECT COUNT(*) FROM cases c WHERE c.shard = latest.shard) AS cases, "
            f"  (SELECT value FROM kv WHERE key = '{KV_DISCOVERY_STRATEGY}') AS strategy "
            "FROM latest "
            "ORDER BY latest.shard").fetchall()

    def start_sweep(self, sweep: int, shards: Sequence[str]) -> int:
        """Creates the sweep's run row and pending shard rows, unless they exist (resume)."""
        now = utc_now()
        with self.transaction():
            row = self.conn.execute("SELECT run_id FROM discovery_runs WHERE sweep = ?", (sweep,)).fetchone()
            if row is None:
                run_id = self.conn.execute(
                    "INSERT INTO discovery_runs(sweep, started_at) VALUES (?, ?)", (sweep, now)).lastrowid
            else:
                run_id = row[0]
            self.conn.executemany(
                "INSERT OR IGNORE INTO discovery_shards(sweep, shard, state, updated_at) VALUES (?, ?, 'pending', ?)",
                ((sweep, shard, now) for shard in shards))
            return run_id

    def pending_shards(self, sweep: int) -> list[str]:
        return [row[0] for row in self.conn.execute(
            "SELECT shard FROM discovery_shards WHERE sweep = ? AND state = 'pending' ORDER BY shard", (sweep,))]

    def finish_shard(self, sweep: int, shard: str, *, state: str, total_count: int | None = None,
                     pages: int = 0, rows_seen: int = 0, rows_new: int = 0, error: str | None = None,
                     children: Sequence[str] = ()) -> None:
        """Records a shard's outcome; a split adds its children as pending, atomically."""
        now = utc_now()
        with self.transaction():
            self.conn.execute(
                "UPDATE discovery_shards SET state = ?, total_count = ?, pages = pages + ?, "
                "rows_seen = rows_seen + ?, rows_new = rows_new + ?, error = ?, updated_at = ? "
                "WHERE sweep = ? AND shard = ?",
                (state, total_count, pages, rows_seen, rows_new, error, now, sweep, shard))
            self.conn.executemany(
                "INSERT OR IGNORE INTO discovery_shards(sweep, shard, state, updated_at) VALUES (?, ?, 'pending', ?)",
                ((sweep, child, now) for child in children))

    def add_shard_progress(self, sweep: int, shard: str, *, pages: int, rows_seen: int, rows_new: int) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE discovery_shards SET pages = pages + ?, rows_seen = rows_seen + ?, "
                "rows_new = rows_new + ?, updated_at = ? WHERE sweep = ? AND shard = ?",
                (pages, rows_seen, rows_new, utc_now(), sweep, shard))

    def finish_sweep(self, sweep: int, seconds: float, *, complete: bool) -> sqlite3.Row:
        """Totals the sweep's shard rows into its `discovery_runs` row."""
        with self.transaction():
            totals = self.conn.execute(
                "SELECT COUNT(*) AS shards, COALESCE(SUM(pages), 0) AS pages, "
                "COALESCE(SUM(rows_seen), 0) AS rows_seen, COALESCE(SUM(rows_new), 0) AS rows_new, "
                "COALESCE(SUM(state = 'error'), 0) AS errors FROM discovery_shards WHERE sweep = ?",
                (sweep,)).fetchone()
            self.conn.execute(
                "UPDATE discovery_runs SET finished_at = ?, shards = ?, pages = ?, rows_seen = ?, "
                "rows_new = ?, errors = ?, seconds = seconds + ?, complete = ? WHERE sweep = ?",
                (utc_now(), totals["shards"], totals["pages"], totals["rows_seen"], totals["rows_new"],
                 totals["errors"], seconds, int(complete), sweep))
        return self.conn.execute("SELECT * FROM discovery_runs WHERE sweep = ?", (sweep,)).fetchone()

    def abandon_sweep(self, sweep: int, reason: str, seconds: float) -> sqlite3.Row:
        """Ends a sweep whose strategy the court's answers showed unusable: its pending shards are
        errors (so it never counts as converged), and the next sweep starts afresh."""
        with self.transaction():
            self.conn.execute("UPDATE discovery_shards SET state = 'error', error = ?, updated_at = ? "
                              "WHERE sweep = ? AND state = 'pending'", (reason[:500], utc_now(), sweep))
        return self.finish_sweep(sweep, seconds, complete=True)

    def discovery_runs(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM discovery_runs ORDER BY sweep").fetchall()

    def shard_has_documents(self, shard: str) -> bool:
        """Whether any document was discovered in a top-level shard ("2019-CA") before."""
        return self.conn.execute("SELECT 1 FROM documents WHERE shard = ? LIMIT 1", (shard,)).fetchone() is not None

    def shard_states(self, sweep: int) -> dict[str, int]:
        """How many of the sweep's shards are in each state (pending, done, split, error)."""
        return dict(self.conn.execute(
            "SELECT state, COUNT(*) FROM discovery_shards WHERE sweep = ? GROUP BY state", (sweep,)).fetchall())

    def iter_document_metadata(self) -> Iterator[tuple]:
        """(document_id, *DOCUMENT_METADATA_COLUMNS, document_available) of every document, for
        discovery's change check."""
        yield from self.conn.execute(
            f"SELECT document_id, {', '.join(DOCUMENT_METADATA_COLUMNS)}, document_available FROM documents")

    # ------------------------------------------------------------ download

    def record_download_attempt(self, document_id: str) -> int:
        """Counts an attempt before the request is sent, so a kill cannot hide one."""
        with self.transaction():
            self.conn.execute("UPDATE documents SET attempts = attempts + 1, updated_at = ? "
                              "WHERE document_id = ?", (utc_now(), document_id))
        return self.conn.execute("SELECT attempts FROM documents WHERE document_id = ?",
                                 (document_id,)).fetchone()[0]

    def mark_downloaded(self, document_id: str, *, sha256: str, size_bytes: int, local_pdf: str,
                        http_status: int | None = 200) -> bool:
        """A `discovered`/`failed` row becomes `downloaded`; True if it did."""
        now = utc_now()
        with self.transaction():
            return self.conn.execute(
                "UPDATE documents SET status = 'downloaded', sha256 = ?, size_bytes = ?, local_pdf = ?, "
                f"http_status = ?, last_error = NULL, updated_at = ?, downloaded_at = ?, {_DOWNLOAD_CHECKPOINT_SET} "
                "WHERE document_id = ? AND status IN ('discovered', 'failed')",
                (sha256, size_bytes, local_pdf, http_status, now, now, document_id)).rowcount > 0

    def refund_download_attempts(self, attempts: Mapping[str, int], note: str) -> int:
        """Gives back download attempts that an outage of the court spent (document id -> attempts),
        so documents it exhausted are queued again; returns the attempts given back."""
        given = 0
        with self.transaction() as conn:
            for document_id, count in attempts.items():
                row = conn.execute("SELECT attempts FROM documents WHERE document_id = ? AND status = 'failed'",
                                   (document_id,)).fetchone()
                if row is None:
                    continue
                back = min(count, row["attempts"] or 0)
                conn.execute("UPDATE documents SET attempts = attempts - ?, last_error = ?, updated_at = ? "
                             "WHERE document_id = ?", (back, note[:500], utc_now(), document_id))
                given += back
        return given

    def mark_download_failed(self, document_id: str, *, http_status: int | None, error: str) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET status = 'failed', http_status = ?, last_error = ?, updated_at = ? "
                "WHERE document_id = ? AND status IN ('discovered', 'failed')",
                (http_status, error[:500], utc_now(), document_id))

    def documents_claiming_files(self) -> Iterator[sqlite3.Row]:
        """Rows whose status says a PDF is on disk (for recover() and verify)."""
        yield from self.conn.execute(
            "SELECT document_id, status, sha256, local_pdf, size_bytes, extracted_by_ocr FROM documents "
            "WHERE status IN ('downloaded', 'extracted')")

    def revert_to_discovered(self, document_ids: Sequence[str], reason: str) -> int:
        with self.transaction():
            cursor = self.conn.executemany(
                "UPDATE documents SET status = 'discovered', sha256 = NULL, size_bytes = NULL, "
                "local_pdf = NULL, pages = NULL, extracted_chars = NULL, likely_scanned = NULL, "
                "pages_needing_ocr = NULL, text_quality = NULL, extract_failure = NULL, extracted_by_ocr = NULL, "
                "ocr_pages = NULL, "
                "attempts = 0, extract_attempts = 0, http_status = NULL, downloaded_at = NULL, "
                "download_checkpoint = NULL, "
                "last_error = ?, updated_at = ? WHERE document_id = ?",
                ((reason, utc_now(), doc_id) for doc_id in document_ids))
            return cursor.rowcount

    def fail_spent_attempts(self, cfg: Config) -> int:
        """Documents whose attempts were all spent by killed runs (never answered) become
        `failed`, so they are listed in failed_inventory.csv and RETRY_HARD can forgive them."""
        with self.transaction():
            return self.conn.execute(
                "UPDATE documents SET status = 'failed', "
                "last_error = 'attempts spent by interrupted runs', updated_at = ? "
                "WHERE status = 'discovered' AND attempts >= ?", (utc_now(), cfg.MAX_ATTEMPTS)).rowcount

    def documents_with_local_pdf(self) -> list[sqlite3.Row]:
        """Rows whose local_pdf names a file (backfill matches legacy paths against pdf_backup/)."""
        return self.conn.execute(
            "SELECT document_id, status, sha256, local_pdf FROM documents "
            "WHERE local_pdf IS NOT NULL AND local_pdf != ''").fetchall()

    def existing_document_ids(self, candidates: Iterable[str]) -> list[str]:
        """Which of these strings are document ids of the table (one query per 500)."""
        wanted, found = list(candidates), []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found.extend(row[0] for row in self.conn.execute(
                f"SELECT document_id FROM documents WHERE document_id IN ({', '.join('?' * len(chunk))})", chunk))
        return found

    def document_ids_with_sha256(self, sha256s: Iterable[str]) -> list[tuple[str, str]]:
        """(document_id, sha256) of the rows recording one of these hashes (one query per 500)."""
        wanted, found = list(sha256s), []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found.extend((row[0], row[1]) for row in self.conn.execute(
                f"SELECT document_id, sha256 FROM documents WHERE sha256 IN ({', '.join('?' * len(chunk))})", chunk))
        return found

    def credit_backup(self, document_id: str, *, sha256: str, size_bytes: int, local_pdf: str) -> bool:
        """Backfill: a verified backup PDF is this document's. Returns True if the row changed.

        `discovered`/`failed` rows become `downloaded`; a `downloaded`/`extracted` row keeps
        its status and only takes the hash, size and normalized path when it has no hash
        or the same one (a different hash is left alone: the download is authoritative).
        """
        with self.transaction():
            cursor = self.conn.execute(
                "UPDATE documents SET "
                "downloaded_at = CASE WHEN status IN ('discovered', 'failed') THEN :now ELSE downloaded_at END, "
                "download_checkpoint = CASE WHEN status IN ('discovered', 'failed') "
                f"THEN {_CURRENT_CHECKPOINT_SQL} ELSE download_checkpoint END, "
                "status = CASE WHEN status IN ('discovered', 'failed') THEN 'downloaded' ELSE status END, "
                "http_status = CASE WHEN status IN ('discovered', 'failed') THEN NULL ELSE http_status END, "
                "last_error = CASE WHEN status IN ('discovered', 'failed') THEN NULL ELSE last_error END, "
                "sha256 = :sha, size_bytes = :size, local_pdf = :local, updated_at = :now "
                "WHERE document_id = :id "
                "AND (status IN ('discovered', 'failed') OR sha256 IS NULL OR sha256 = :sha) "
                "AND NOT (status IN ('downloaded', 'extracted') AND sha256 IS :sha "
                "         AND size_bytes IS :size AND local_pdf IS :local)",
                {"id": document_id, "sha": sha256, "size": size_bytes, "local": local_pdf, "now": utc_now()})
            return cursor.rowcount > 0

    # ------------------------------------------------------------- extract

    def mark_extract_failed(self, document_id: str, error: str, *, reason: str | None = None,
                            spend_all: int | None = None) -> None:
        """One failed extraction attempt; a permanent one (`reason`) spends them all (`spend_all`:
        MAX_EXTRACT_ATTEMPTS), so the document leaves the queue of CONTRACT.md with its reason."""
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET extract_attempts = MAX(extract_attempts + 1, COALESCE(?, 0)), "
                "last_error = ?, extract_failure = ?, updated_at = ? WHERE document_id = ? AND status = 'downloaded'",
                (spend_all, error[:500], reason, utc_now(), document_id))

    def log_extraction_attempts(self, entries: list[dict]) -> None:
        """Many extraction_log rows: document_id, sha256, attempt, engine, outcome, pages, chars,
        seconds, error, quality."""
        now = utc_now()
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO extraction_log(document_id, sha256, attempt, engine, outcome, pages, chars, "
                "seconds, error, quality, logged_at) VALUES (:document_id, :sha256, :attempt, :engine, :outcome, "
                ":pages, :chars, :seconds, :error, :quality, :now)",
                [{**entry, "error": None if entry.get("error") is None else str(entry["error"])[:500],
                  "quality": entry.get("quality"), "now": now} for entry in entries])

    def record_extracted(self, entries: list[dict], *, attempts: Sequence[dict] = (),
                         pages: Sequence[tuple] = ()) -> None:
        """In one transaction: the chains' other `attempts` (`log_extraction_attempts`), the facts of
        `pages` ((sha256, page, chars, has_images, image_cover, needs_ocr, engine, engine_reason)), and for each
        entry (document_id, sha256,
        attempt, engine, pages, chars, seconds, likely_scanned; optional quality, pages_needing_ocr,
        extracted_by_ocr, ocr_pages) its `ok` log row and the document `extracted`."""
        now = utc_now()
        with self.transaction():
            self.log_extraction_attempts(list(attempts))
            self.conn.executemany(
                "INSERT INTO pages(sha256, page, chars, has_images, image_cover, needs_ocr, engine, engine_reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256, page) DO UPDATE SET chars = excluded.chars, "
                "has_images = excluded.has_images, image_cover = excluded.image_cover, "
                "needs_ocr = excluded.needs_ocr, engine = excluded.engine, engine_reason = excluded.engine_reason",
                pages)
            self.log_extraction_attempts([{**entry, "outcome": "ok", "error": None} for entry in entries])
            self.conn.executemany(
                "UPDATE documents SET status = 'extracted', pages = :pages, extracted_chars = :chars, "
                "likely_scanned = :likely_scanned, pages_needing_ocr = :pages_needing_ocr, "
                "text_quality = :quality, extracted_by_ocr = :extracted_by_ocr, ocr_pages = :ocr_pages, "
                "ocr_quality = NULL, extract_failure = NULL, extract_attempts = extract_attempts + 1, "
                "updated_at = :now "
                "WHERE document_id = :document_id AND status = 'downloaded'",
                [{"document_id": entry["document_id"], "pages": entry["pages"], "chars": entry["chars"],
                  "likely_scanned": int(entry["likely_scanned"]), "quality": entry.get("quality"),
                  "pages_needing_ocr": entry.get("pages_needing_ocr"),
                  "extracted_by_ocr": entry.get("extracted_by_ocr"), "ocr_pages": entry.get("ocr_pages"),
                  "now": now} for entry in entries])

    def extracted_twin(self, sha256: str) -> sqlite3.Row | None:
        """An `extracted` document holding this sha256 (pages, extracted_chars, likely_scanned), if any.

        Its commit came after its text file was written, so that file can be trusted.
        """
        return self.conn.execute(
            f"SELECT {_TWIN_COLUMNS} FROM documents "
            "WHERE sha256 = ? AND status = 'extracted' AND pages IS NOT NULL LIMIT 1",
            (sha256,)).fetchone()

    def extracted_twins(self, sha256s: Iterable[str]) -> dict[str, sqlite3.Row]:
        """`extracted_twin` of many sha256 at once (one query per 500): sha256 -> its row, for those
        an `extracted` document holds."""
        wanted = list(dict.fromkeys(sha256s))
        twins: dict[str, sqlite3.Row] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for row in self.conn.execute(
                    f"SELECT sha256, {_TWIN_COLUMNS} FROM documents "
                    f"WHERE sha256 IN ({', '.join('?' * len(chunk))}) AND status = 'extracted' "
                    "AND pages IS NOT NULL", chunk):
                twins.setdefault(row["sha256"], row)
        return twins

    # ----------------------------------------------------------------- ocr

    def ocr_queue(self) -> list[tuple[str, list[int]]]:
        """(sha256, its page numbers needing OCR) of each PDF an `extracted` document holds that OCR
        has not handled yet, in the order the documents were discovered."""
        shas = [row[0] for row in self.conn.execute(
            "SELECT sha256 FROM documents WHERE status = 'extracted' AND pages_needing_ocr > 0 "
            "AND extracted_by_ocr IS NULL AND sha256 IS NOT NULL GROUP BY sha256 ORDER BY MIN(rowid)")]
        queue = []
        for sha in shas:
            pages = [row[0] for row in self.conn.execute(
                "SELECT page FROM pages WHERE sha256 = ? AND needs_ocr = 1 ORDER BY page", (sha,))]
            queue.append((sha, pages))
        return queue

    def unreadable_text_pages(self, poor_reason: str) -> int:
        """Pages of extracted documents whose kept text was poor in every engine (`engine_reason`
        begins with `poor_reason`) and that OCR gave no text (not run yet, failed, or empty)."""
        return self.conn.execute(
            "SELECT COUNT(*) FROM pages WHERE substr(engine_reason, 1, length(:reason)) = :reason "
            "AND COALESCE(ocr_chars, 0) = 0 AND sha256 IN (SELECT sha256 FROM documents WHERE status = 'extracted')",
            {"reason": poor_reason}).fetchone()[0]

    def page_count(self, sha256: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM pages WHERE sha256 = ?", (sha256,)).fetchone()[0]

    def record_ocr(self, sha256: str, recognised: Mapping[int, tuple[int, int | None]], *,
                   quality: float | None = None, failed: bool = False) -> int:
        """OCR's outcome for every document holding `sha256`: per recognised page (chars it gave,
        rotation applied), and `extracted_by_ocr` 1 with `ocr_pages` and the merged text's
        `ocr_quality` (or 0 when it failed). Their court-text agreement is measured again (it
        compares the best text, which OCR may have changed). Returns the documents changed."""
        with self.transaction():
            self.conn.executemany("UPDATE pages SET ocr_chars = ?, rotation = ? WHERE sha256 = ? AND page = ?",
                                  [(chars, rotation, sha256, page) for page, (chars, rotation) in recognised.items()])
            return self.conn.execute(
                "UPDATE documents SET extracted_by_ocr = ?, ocr_pages = ?, ocr_quality = ?, "
                "court_text_agreement = NULL, updated_at = ? WHERE sha256 = ? AND status = 'extracted'",
                (0 if failed else 1, 0 if failed else len(recognised), None if failed else quality, utc_now(),
                 sha256)).rowcount

    def set_text_sources(self, changes: Sequence[tuple[str | None, str]]) -> None:
        """(text_source, document_id) pairs: the best text each document's readers use now."""
        if not changes:
            return
        now = utc_now()
        with self.transaction():
            self.conn.executemany("UPDATE documents SET text_source = ?, updated_at = ? WHERE document_id = ?",
                                  [(source, now, document_id) for source, document_id in changes])

    def extraction_failures(self, cfg: Config) -> list[sqlite3.Row]:
        """Downloaded documents whose extraction attempts are used up."""
        return self.conn.execute(
            "SELECT * FROM documents WHERE status = 'downloaded' AND extract_attempts >= ? "
            "ORDER BY document_id", (cfg.MAX_EXTRACT_ATTEMPTS,)).fetchall()

    # -------------------------------------------------------------- derive

    def _docket_entry_join(self) -> tuple[str, str, str]:
        """(select columns, join clause, description expression): each document's entry type,
        subtype and description, from its own columns (v3) or else its docket entry's row."""
        select = ("COALESCE(d.entry_type, de.entry_type) AS entry_type, "
                  "COALESCE(d.entry_subtype, de.subtype) AS entry_subtype")
        join = "LEFT JOIN docket_entries de ON de.docket_entry_id = d.docket_entry_id"
        return select, join, "COALESCE(d.description, de.description)"

    def _derive_queue_sql(self, what: str, *, redo: bool) -> str:
        select, join, description = self._docket_entry_join()
        # A derived row older than text_source read the text layer; a document whose source is not
        # recorded yet is read from it too. The court's text is named by its hash.
        stale = "1" if redo else (
            "(x.document_id IS NULL OR x.method != :method OR x.version < :version "
            f"OR x.source_description IS NOT {description} "
            "OR (d.status = 'extracted' AND (x.source_sha256 IS NOT d.sha256 "
            "OR COALESCE(x.text_source, 'text_layer') IS NOT COALESCE(d.text_source, 'text_layer') "
            "OR (d.text_source = 'court_text' AND x.text_sha256 IS NOT ct.sha256))))")
        columns = ("COUNT(*)" if what == "count" else
                   "d.rowid AS rowid, d.document_id, d.case_number, d.court, d.status, d.sha256, "
                   f"d.extracted_chars, d.document_name, d.text_source, ct.sha256 AS court_sha256, "
                   f"{description} AS description, {select}")
        return (f"SELECT {columns} FROM documents d LEFT JOIN derived x ON x.document_id = d.document_id "
                f"LEFT JOIN court_text ct ON ct.document_id = d.document_id {join} WHERE {stale}")

    def derive_queue(self, method: str, version: int, limit: int, after_rowid: int = 0, *,
                     redo: bool = False) -> list[sqlite3.Row]:
        """Documents whose derived row is missing or stale (older method or version, another
        description, a text extracted since, or a new PDF): the next `limit` after `after_rowid`.
        With `redo`, every document."""
        return self.conn.execute(
            self._derive_queue_sql("rows", redo=redo) + " AND d.rowid > :after ORDER BY d.rowid LIMIT :limit",
            {"method": method, "version": version, "after": after_rowid, "limit": limit}).fetchall()

    def derive_queue_size(self, method: str, version: int, *, redo: bool = False) -> int:
        return self.conn.execute(self._derive_queue_sql("count", redo=redo),
                                 {"method": method, "version": version}).fetchone()[0]

    def court_text_agreement_queue(self, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        """Extracted documents whose court text is known and whose agreement is not recorded yet:
        rowid and `text_source_inputs` (c83_best_text names the text of ours to compare)."""
        return [row for row in text_source_inputs(
            self.conn, "d.rowid IN (SELECT d.rowid FROM documents d JOIN court_text ct "
            "ON ct.document_id = d.document_id WHERE d.status = 'extracted' AND d.sha256 IS NOT NULL "
            "AND d.court_text_agreement IS NULL AND ct.chars > 0 AND d.rowid > ? ORDER BY d.rowid LIMIT ?)",
            (after_rowid, limit))]

    def record_court_text_agreement(self, agreements: Sequence[tuple[float, str]]) -> None:
        """(agreement, document_id) pairs."""
        with self.transaction():
            self.conn.executemany("UPDATE documents SET court_text_agreement = ? WHERE document_id = ?",
                                  agreements)

    def save_derived(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Replaces, in one transaction, each entry's `derived` row (entry["row"]: its columns),
        its citations (entry["citations"]: dicts of the citations columns) and its own case
        numbers (entry["case_numbers"])."""
        if not entries:
            return
        columns = list(entries[0]["row"])
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "document_id")
        citation_columns = ("document_id", "start", "end", "kind", "form", "matched_text", "normalized",
                            "case_number", "year", "court", "extractor")
        with self.transaction():
            self.conn.executemany(
                f"INSERT INTO derived ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
                f"ON CONFLICT(document_id) DO UPDATE SET {updates}",
                [[entry["row"][c] for c in columns] for entry in entries])
            ids = [(entry["row"]["document_id"],) for entry in entries]
            self.conn.executemany("DELETE FROM citations WHERE document_id = ?", ids)
            self.conn.executemany("DELETE FROM derived_case_numbers WHERE document_id = ?", ids)
            self.conn.executemany(
                f"INSERT INTO citations ({', '.join(citation_columns)}) "
                f"VALUES ({', '.join('?' for _ in citation_columns)})",
                [[citation.get(c) for c in citation_columns] for entry in entries
                 for citation in entry.get("citations", ())])
            self.conn.executemany(
                "INSERT OR IGNORE INTO derived_case_numbers(document_id, case_number) VALUES (?, ?)",
                [(entry["row"]["document_id"], number) for entry in entries
                 for number in entry.get("case_numbers", ())])

    def derived(self, document_id: str) -> sqlite3.Row | None:
        """The document's derived row (list fields are JSON text), or None."""
        return self.conn.execute("SELECT * FROM derived WHERE document_id = ?", (document_id,)).fetchone()

    def citations_of(self, document_id: str) -> list[sqlite3.Row]:
        """Every citation of the document's text, in text order."""
        return self.conn.execute("SELECT * FROM citations WHERE document_id = ? ORDER BY start, end, kind",
                                 (document_id,)).fetchall()

    def cites(self, document_id: str) -> list[sqlite3.Row]:
        """The archive's opinions that this document cites (by an appellate case number in its
        text): document_id, case_number, case_title, rendered_date and the cited case number."""
        return self.conn.execute(
            "SELECT DISTINCT n.document_id, d.case_number, d.case_title, x.rendered_date, "
            "c.case_number AS cited_case_number FROM citations c "
            "JOIN derived_case_numbers n ON n.case_number = c.case_number "
            "JOIN documents d ON d.document_id = n.document_id "
            "JOIN derived x ON x.document_id = n.document_id AND x.kind = 'opinion' "
            "WHERE c.document_id = ? AND n.document_id != ? ORDER BY c.case_number, n.document_id",
            (document_id, document_id)).fetchall()

    def cited_by(self, document_id: str) -> list[sqlite3.Row]:
        """The archive's documents whose texts cite one of this document's case numbers."""
        return self.conn.execute(
            "SELECT DISTINCT c.document_id, d.case_number, d.case_title, x.kind, x.rendered_date, "
            "c.case_number AS cited_case_number FROM derived_case_numbers n "
            "JOIN citations c ON c.case_number = n.case_number "
            "JOIN documents d ON d.document_id = c.document_id "
            "LEFT JOIN derived x ON x.document_id = c.document_id "
            "WHERE n.document_id = ? AND c.document_id != ? ORDER BY c.document_id",
            (document_id, document_id)).fetchall()

    def derived_facets(self, top: int = 20) -> dict[str, list[tuple[Any, int]]]:
        """Counts for the query layer's filters: kind, publication status, judge (the `top` most
        frequent), rendered year. A NULL (unknown) is a value of its own."""
        facets = {}
        for name, expression, limit in (("kind", "kind", -1), ("publication_status", "publication_status", -1),
                                        ("judge", "judge", top), ("year", "substr(rendered_date, 1, 4)", -1)):
            facets[name] = [tuple(row) for row in self.conn.execute(
                f"SELECT {expression} AS value, COUNT(*) AS n FROM derived GROUP BY value "
                "ORDER BY n DESC, value LIMIT ?", (limit,))]
        return facets

    def derive_warning_counts(self) -> dict[str, int]:
        """How many derived rows carry each kind of warning (the text before the first colon)."""
        counts: dict[str, int] = {}
        for (warnings,) in self.conn.execute("SELECT warnings FROM derived WHERE warnings IS NOT NULL "
                                             "AND warnings != '[]'"):
            for warning in json.loads(warnings):
                key = str(warning).split(":", 1)[0]
                counts[key] = counts.get(key, 0) + 1
        return counts

    # ----------------------------------------------------------- provenance

    def record_download_event(self, document_id: str, *, requested_at: str, http_status: int | None,
                              headers: Mapping[str, str] | None) -> None:
        """One download response: when it was asked for, its status, the headers naming its bytes."""
        headers = headers or {}
        with self.transaction():
            self.conn.execute(
                "INSERT INTO download_events(document_id, requested_at, http_status, content_length, etag, "
                "last_modified, content_type) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (document_id, requested_at, http_status, *(headers.get(name) for name in IDENTIFYING_HEADERS)))

    def download_events(self, document_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM download_events WHERE document_id = ? ORDER BY event_id",
                                 (document_id,)).fetchall()

    def manifest_rows(self) -> list[tuple[str, str]]:
        """(sha256 of the bytes, store name) of every PDF the archive holds and of every text whose
        hash derive recorded, sorted by name: the lines of a BagIt-style manifest."""
        rows = self.conn.execute(
            "SELECT DISTINCT sha256, 'pdf_by_hash/' || sha256 || '.pdf' FROM documents "
            "WHERE status IN ('downloaded', 'extracted') AND sha256 IS NOT NULL "
            "UNION SELECT DISTINCT x.text_sha256, CASE COALESCE(x.text_source, 'text_layer') "
            "WHEN 'ocr' THEN 'text/' || x.source_sha256 || '.ocr.txt' "
            "WHEN 'court_text' THEN 'court_text/' || x.text_sha256 || '.txt' "
            "ELSE 'text/' || x.source_sha256 || '.txt' END FROM derived x "
            "JOIN documents d ON d.document_id = x.document_id AND d.sha256 = x.source_sha256 "
            "WHERE d.status = 'extracted' AND x.text_sha256 IS NOT NULL").fetchall()
        return sorted(((row[0], row[1]) for row in rows), key=lambda pair: pair[1])

    def audit_candidates(self) -> list[sqlite3.Row]:
        """Each distinct PDF the archive holds: sha256, size_bytes, whether a text was extracted,
        its extracted_chars, and the sha256 derive recorded of the PDF's text it read (or NULL) with
        that text's source (text_layer or ocr; a derived row older than the column read the layer)."""
        return self.conn.execute(
            "SELECT d.sha256, MAX(d.size_bytes) AS size_bytes, MAX(d.status = 'extracted') AS extracted, "
            "MAX(CASE WHEN d.status = 'extracted' THEN d.extracted_chars END) AS extracted_chars, "
            "MAX(x.text_sha256) AS text_sha256, MAX(COALESCE(x.text_source, 'text_layer')) AS text_source "
            "FROM documents d LEFT JOIN derived x ON x.document_id = d.document_id AND x.source_sha256 = d.sha256 "
            "AND COALESCE(x.text_source, 'text_layer') IN ('text_layer', 'ocr') "
            "WHERE d.status IN ('downloaded', 'extracted') AND d.sha256 IS NOT NULL "
            "GROUP BY d.sha256 ORDER BY d.sha256").fetchall()

    # ------------------------------------------------------ adopted legacy rows (c38_legacy)

    def adopted_rows_claiming_files(self) -> list[sqlite3.Row]:
        """Adopted rows whose status says a PDF is held, with their legacy status."""
        return self.conn.execute(
            "SELECT d.document_id, d.status, d.sha256, d.size_bytes, d.local_pdf, d.extracted_chars, d.likely_scanned, "
            "l.legacy_status "
            "FROM documents d JOIN legacy_documents l ON l.document_id = d.document_id "
            "WHERE d.status IN ('downloaded', 'extracted') ORDER BY d.rowid").fetchall()

    def adopted_rows_holding_pdfs(self) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM documents d JOIN legacy_documents l ON l.document_id = d.document_id "
            "WHERE d.status IN ('downloaded', 'extracted')").fetchone()[0]

    def set_pdf_pointers(self, pointers: Sequence[tuple[str, int | None, str, str]]) -> None:
        """(sha256, size_bytes, local_pdf, document_id): where an adopted row's PDF is."""
        with self.transaction():
            self.conn.executemany("UPDATE documents SET sha256 = ?, size_bytes = ?, local_pdf = ?, updated_at = ? "
                                  "WHERE document_id = ?", [(sha, size, local, utc_now(), document_id)
                                                            for sha, size, local, document_id in pointers])

    def mark_text_found(self, document_ids: Sequence[str]) -> None:
        """Downloaded rows whose text the archive already holds become `extracted`."""
        with self.transaction():
            self.conn.executemany("UPDATE documents SET status = 'extracted', updated_at = ? "
                                  "WHERE document_id = ? AND status = 'downloaded'",
                                  [(utc_now(), document_id) for document_id in document_ids])

    def extract_again(self, document_ids: Sequence[str], reason: str) -> None:
        """Extracted rows back in the extract queue, attempts reset (their text gone, or their pages
        never measured; a text the archive holds is kept: c80)."""
        with self.transaction():
            self.conn.executemany(
                "UPDATE documents SET status = 'downloaded', extract_attempts = 0, extract_failure = NULL, "
                "last_error = ?, updated_at = ? WHERE document_id = ? AND status = 'extracted'",
                [(reason, utc_now(), document_id) for document_id in document_ids])

    def note_legacy(self, document_ids: Sequence[str], note: str) -> None:
        with self.transaction():
            self.conn.executemany("UPDATE legacy_documents SET note = ? WHERE document_id = ?",
                                  [(note, document_id) for document_id in document_ids])

    def legacy_held_count(self) -> int:
        """Adopted rows the download queue holds back until discovery confirms their ids."""
        return self.conn.execute(
            f"SELECT COUNT(*) FROM legacy_documents l WHERE l.id_kind IN ({_LEGACY_HELD_LIST}) AND EXISTS "
            "(SELECT 1 FROM documents d WHERE d.document_id = l.document_id AND d.status IN ('discovered', 'failed'))"
        ).fetchone()[0]

    def reconcile_legacy_ids(self) -> dict[str, int]:
        """Checks unchecked adopted ids against the discovery tables (c38_legacy): discovery rewrote
        the row's metadata -> document; the id is a docket entry's or a case's (their tables, or the
        columns of other documents) -> linked to their documents, and the legacy PDF matched against
        theirs by sha256; discovery has converged -> the rest unlisted. Counts what changed."""
        now = utc_now()
        counts: dict[str, int] = {}
        links_sql = ("SELECT COALESCE(SUM(json_array_length(linked_documents)), 0), COALESCE(SUM(matched_sha256 > 0), 0) "
                     "FROM legacy_documents WHERE id_kind IN ('docket_entry', 'case')")
        with self.transaction():
            linked_before = self.conn.execute(links_sql).fetchone()
            counts["confirmed"] = self.conn.execute(
                "UPDATE legacy_documents SET id_kind = 'document', checked_at = :now WHERE id_kind = 'unchecked' "
                f"AND metadata IS NOT (SELECT {LEGACY_METADATA_SQL} FROM documents d "
                "WHERE d.document_id = legacy_documents.document_id)", {"now": now}).rowcount
            for kind, column, table in (("docket_entry", "docket_entry_id", "docket_entries"),
                                        ("case", "case_id", "cases")):
                counts[table] = self.conn.execute(
                    f"UPDATE legacy_documents SET id_kind = :kind, checked_at = :now "
                    f"WHERE id_kind = 'unchecked' AND (document_id IN (SELECT {column} FROM {table}) "
                    f"OR document_id IN (SELECT d.{column} FROM documents d WHERE d.{column} IS NOT NULL "
                    f"AND d.document_id != d.{column}))", {"kind": kind, "now": now}).rowcount
                # Link (again: discovery may have found more of their documents since) and count matches.
                self.conn.execute(
                    "UPDATE legacy_documents SET linked_documents = (SELECT json_group_array(d.document_id) FROM "
                    f"(SELECT document_id FROM documents WHERE {column} = legacy_documents.document_id "
                    "AND document_id != legacy_documents.document_id ORDER BY document_id) d), "
                    "matched_sha256 = (SELECT COUNT(*) FROM documents d JOIN documents mine "
                    "ON mine.document_id = legacy_documents.document_id "
                    f"WHERE d.{column} = legacy_documents.document_id AND d.document_id != mine.document_id "
                    "AND d.sha256 IS NOT NULL AND d.sha256 = mine.sha256) "
                    "WHERE id_kind = :kind", {"kind": kind})
            converged = self.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
            counts["unlisted"] = self.conn.execute(
                "UPDATE legacy_documents SET id_kind = 'unlisted', checked_at = ? WHERE id_kind = 'unchecked'",
                (now,)).rowcount if converged else 0
            linked = self.conn.execute(links_sql).fetchone()
        # Both since the last call: documents discovery has found for those rows since, PDFs matched since.
        counts["linked"], counts["matched"] = linked[0] - linked_before[0], linked[1] - linked_before[1]
        counts["held"] = self.legacy_held_count()
        return counts

    def legacy_summary(self) -> dict[str, int]:
        """Adopted rows by id_kind (status.json, the report)."""
        return dict(self.conn.execute("SELECT id_kind, COUNT(*) FROM legacy_documents GROUP BY id_kind").fetchall())

    # -------------------------------------------------------- store backlog

    def store_pending_add(self, name: str, local_path: str, reason: str) -> None:
        with self.transaction():
            self.conn.execute(
                "INSERT INTO store_pending(name, local_path, reason, queued_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET reason = excluded.reason",
                (name, local_path, reason[:300], utc_now()))

    def store_pending(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM store_pending ORDER BY queued_at, name").fetchall()

    def store_pending_done(self, name: str) -> None:
        with self.transaction():
            self.conn.execute("DELETE FROM store_pending WHERE name = ?", (name,))

    def store_pending_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM store_pending").fetchone()[0]

    # ------------------------------------------------------ restore/verify

    def document_columns(self) -> list[str]:
        """Every column of `documents`, in table order (inventory headers)."""
        return [row[1] for row in self.conn.execute("PRAGMA table_info(documents)")]

    def failed_documents(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM documents WHERE status = 'failed' ORDER BY document_id").fetchall()

    @staticmethod
    def snapshot_problems(path: str | os.PathLike, *, thorough: bool = False) -> list[str]:
        """`PRAGMA quick_check` (`thorough`: `integrity_check`) of a snapshot file, read-only ([] when
        sound); never writes to it."""
        pragma = "PRAGMA integrity_check" if thorough else "PRAGMA quick_check"
        try:
            conn = sqlite3.connect(database_uri(path, mode="ro", immutable="1"), uri=True)
            try:
                problems = [row[0] for row in conn.execute(pragma).fetchall()]
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        return [] if problems == ["ok"] else problems


def coverage_gaps(audit: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Shards of `Database.coverage_audit()` holding fewer than the court announced: documents for the
    document search, cases for the case walk. [] when every shard is whole."""
    gaps = []
    for row in audit:
        held = row["cases"] if row["strategy"] == "cases" else row["documents"]
        if row["announced"] is not None and held < row["announced"]:
            gaps.append({"shard": row["shard"], "announced": row["announced"], "held": held,
                         "unit": "cases" if row["strategy"] == "cases" else "documents"})
    return gaps


def _split_sql(script: str) -> list[str]:
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return [s for s in statements if s]


def checkpoint(db_path: str | os.PathLike, snapshot_path: str | os.PathLike) -> dict[str, Any]:
    """Writes a consistent snapshot of the database at `db_path` to `snapshot_path`.

    Uses its own connection, so it can run from a background thread while the
    stages commit. The sequence number is bumped in the live database first, so
    the snapshot records it; the snapshot is written under a temp name, set to
    rollback-journal mode (one self-contained file), checked, then made durable and
    renamed (`durable_rename`).
    """
    started = time.monotonic()
    snapshot_path = Path(snapshot_path)
    snapshot_path.parent.mkdir(parents=True, exist_ok=True)
    temp_path = snapshot_path.with_name(snapshot_path.name + ".tmp")
    temp_path.unlink(missing_ok=True)
    source = connect(db_path)
    try:
        source.execute("BEGIN IMMEDIATE")
        try:
            row = source.execute("SELECT value FROM kv WHERE key = ?", (KV_CHECKPOINT_SEQ,)).fetchone()
            sequence = (int(row[0]) if row else 0) + 1
            taken_at = utc_now()
            source.executemany(
                "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(KV_CHECKPOINT_SEQ, str(sequence)), (KV_CHECKPOINT_AT, taken_at)])
            source.execute("COMMIT")
        except BaseException:
            source.execute("ROLLBACK")
            raise
        target = sqlite3.connect(str(temp_path))
        try:
            source.backup(target, pages=-1)  # one step: consistent, no livelock
            target.execute("PRAGMA journal_mode = DELETE")
            problems = target.execute("PRAGMA quick_check").fetchall()
            if [p[0] for p in problems] != ["ok"]:
                raise IntegrityError(f"checkpoint snapshot failed quick_check: {problems[:3]}")
        finally:
            target.close()
    finally:
        source.close()
    durable_rename([(temp_path, snapshot_path)])
    return {"checkpoint_seq": sequence, "checkpoint_at": taken_at,
            "seconds": round(time.monotonic() - started, 4), "path": str(snapshot_path)}


def journal_rows(path: str | os.PathLike) -> tuple[int, list[dict[str, Any]]]:
    """(S, the documents committed downloaded since snapshot S was taken) of the database at `path`,
    S being the newest snapshot known to be in the store (kv `store_checkpoint_seq`); read on a
    connection of its own (the checkpointer's thread). Nothing (S = 0) before a snapshot reached
    the store: there is none for a journal to follow."""
    conn = connect(path, readonly=True)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (KV_STORE_CHECKPOINT_SEQ,)).fetchone()
        sequence = int(row[0]) if row and str(row[0]).isdigit() else 0
        if sequence == 0:
            return 0, []
        rows = conn.execute(
            "SELECT document_id, sha256, size_bytes FROM documents "
            "WHERE status IN ('downloaded', 'extracted') AND sha256 IS NOT NULL AND download_checkpoint >= ? "
            "ORDER BY download_checkpoint, downloaded_at, rowid", (sequence,)).fetchall()
        return sequence, [dict(row) for row in rows]
    finally:
        conn.close()


def record_store_checkpoint(path: str | os.PathLike, sequence: int) -> None:
    """Notes in the database at `path` that the store holds its snapshot `sequence` (the download
    journal follows it); never moves backwards. Its own connection: any thread may call it."""
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_STORE_CHECKPOINT_SQL, {"key": KV_STORE_CHECKPOINT_SEQ, "seq": str(sequence)})
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def snapshot_sequence(path: str | os.PathLike) -> tuple[int, str]:
    """(checkpoint_seq, checkpoint_at) recorded inside a snapshot; raises IntegrityError if unreadable."""
    if not is_sqlite_file(path):
        raise IntegrityError(f"{path} is not an SQLite database")
    try:
        conn = sqlite3.connect(database_uri(path, mode="ro", immutable="1"), uri=True)
        try:
            rows = dict(conn.execute("SELECT key, value FROM kv WHERE key IN (?, ?)",
                                     (KV_CHECKPOINT_SEQ, KV_CHECKPOINT_AT)).fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(f"{path} cannot be read: {exc}") from None
    try:
        sequence = int(rows.get(KV_CHECKPOINT_SEQ, 0))
    except (TypeError, ValueError):
        raise IntegrityError(f"{path} records checkpoint_seq {rows.get(KV_CHECKPOINT_SEQ)!r}, "
                             "not a number") from None
    return sequence, str(rows.get(KV_CHECKPOINT_AT) or "")


# ------------------------------------------- the search index (ky_search.sqlite) and the query layer
#
# The index lives in a database of its own, next to ky_court.sqlite, so the state snapshot that
# every checkpoint pushes stays as small as it was; it has its own schema version (kv
# `search_schema_version`). `docs` holds one row per indexed document, its filter and facet
# columns and the name of the text it was indexed with (`text_name`: a file of the workspace and
# the store, c83_best_text's choice); `docs_fts` (FTS5, porter stemming over unicode61) is the
# inverted index over title, description, that text and the document's filter tokens (`facets`),
# rowid = docs.doc_rowid, each column without SEARCH_COMMON_WORDS (kycourt_words). It keeps no copy
# of the texts: its content is the view `docs_text`, whose body is kycourt_words of the function
# kycourt_text(name) reading the text file, so FTS5's own deletes read the files (a connection
# without the functions can still search and rank).

SEARCH_DB_FILENAME = "ky_search.sqlite"
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
            for statement in _split_sql(_SEARCH_SCHEMA):
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


def backup_database(source_path: str | os.PathLike, target_path: str | os.PathLike) -> Path:
    """A consistent one-file copy of a database (online backup API in one step, rollback journal),
    written under a temp name and renamed; the source's readers and writer are not disturbed."""
    target_path = Path(target_path)
    target_path.parent.mkdir(parents=True, exist_ok=True)
    temp_path = target_path.with_name(target_path.name + ".tmp")
    temp_path.unlink(missing_ok=True)
    source = sqlite3.connect(database_uri(source_path, mode="ro"), uri=True, timeout=30)
    try:
        target = sqlite3.connect(str(temp_path))
        try:
            source.backup(target, pages=-1)
            target.execute("PRAGMA journal_mode = DELETE")
        finally:
            target.close()
    finally:
        source.close()
    os.replace(temp_path, target_path)   # a copy to mirror or read: its durable source stays
    return target_path


# ----------------------------------------------- reads of ky_court.sqlite for the query layer

# A document's fields kept outside `documents` (the search index's and the export's):
# field -> (table, column, documents' key, the table's key). An archive older than the table
# (read without migrating) gives NULL for the field.
OPTIONAL_SOURCES: dict[str, tuple[str, str, str, str]] = {
    "case_type": ("cases", "case_type", "case_id", "case_id"),
    "docket_entry_type": ("docket_entries", "entry_type", "docket_entry_id", "docket_entry_id"),
    "publication_status": ("derived", "publication_status", "document_id", "document_id"),
    "judge": ("derived", "judge", "document_id", "document_id"),
    "kind": ("derived", "kind", "document_id", "document_id"),
    "rendered_date": ("derived", "rendered_date", "document_id", "document_id"),
    "disposition": ("derived", "disposition", "document_id", "document_id"),
    "lower_court": ("derived", "lower_court", "document_id", "document_id"),
    "court_text_sha256": ("court_text", "sha256", "document_id", "document_id"),   # its name (the best text's)
}


def table_columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    """The columns of `table` ([] when there is no such table)."""
    return [row[1] for row in conn.execute(f"PRAGMA {schema}.table_info({_quote_name(table)})")]


def _quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def optional_field_sql(conn: sqlite3.Connection, field_name: str, *, alias: str = "d",
                       schema: str = "main") -> str:
    """SQL for one optional search field of the document `alias`: a column of `documents` if it has
    one, else (or where that is NULL) its OPTIONAL_SOURCES table's column, else NULL."""
    candidates = []
    document_columns = set(table_columns(conn, "documents", schema))
    if field_name in document_columns:
        candidates.append(f"{alias}.{field_name}")
    if field_name in OPTIONAL_SOURCES:
        table, column, mine, theirs = OPTIONAL_SOURCES[field_name]
        if column in table_columns(conn, table, schema) and mine in document_columns:
            candidates.append(f"(SELECT t.{column} FROM {schema}.{table} t WHERE t.{theirs} = {alias}.{mine} LIMIT 1)")
    if not candidates:
        return "NULL"
    return candidates[0] if len(candidates) == 1 else f"COALESCE({', '.join(candidates)})"


OPTIONAL_FIELDS = tuple(OPTIONAL_SOURCES)


def document_records_sql(conn: sqlite3.Connection, *, where: str = "1", schema: str = "main") -> str:
    """SELECT of every documents column plus the optional fields (OPTIONAL_SOURCES: null where
    nothing in the database knows them), by document_id."""
    optional = ", ".join(f"{optional_field_sql(conn, name, schema=schema)} AS {name}"
                         for name in OPTIONAL_FIELDS
                         if name not in table_columns(conn, "documents", schema))
    return (f"SELECT d.*{', ' + optional if optional else ''} FROM {schema}.documents d "
            f"WHERE {where} ORDER BY d.document_id")


def iter_document_records(conn: sqlite3.Connection, where: str = "1",
                          params: Sequence[Any] | Mapping[str, Any] = ()) -> Iterator[sqlite3.Row]:
    yield from conn.execute(document_records_sql(conn, where=where), params)


def document_citations(conn: sqlite3.Connection, document_id: str) -> list[str]:
    """The distinct normalized citations of a document's text, in the order they first appear
    (the export's `citations`); [] in an archive without a citations table."""
    if not table_columns(conn, "citations"):
        return []
    return [row[0] for row in conn.execute(
        "SELECT normalized FROM citations WHERE document_id = ? GROUP BY normalized ORDER BY MIN(start)",
        (document_id,))]


def text_source_inputs(conn: sqlite3.Connection, where: str = "1",
                       params: Sequence[Any] | Mapping[str, Any] = ()) -> Iterator[sqlite3.Row]:
    """What c83_best_text's choice reads, for each document `where` (over alias d) selects, in
    rowid order: rowid, document_id, status, sha256, extracted_chars, text_quality, extracted_by_ocr, the recorded
    text_source, ocr_chars (what OCR gave the PDF's pages), ocr_quality (of the merged text, any
    document holding the PDF), court_chars and court_sha256 (the court's own text). A column an
    older archive (read without migrating) lacks is NULL."""
    documents, pages = set(table_columns(conn, "documents")), set(table_columns(conn, "pages"))
    merged = "d.extracted_by_ocr = 1" if "extracted_by_ocr" in documents else "0"
    columns = ["d.rowid AS rowid"] + [f"d.{name}" if name in documents else f"NULL AS {name}" for name in (
        "document_id", "status", "sha256", "extracted_chars", "text_quality", "extracted_by_ocr", "text_source")]
    columns.append(f"CASE WHEN {merged} THEN (SELECT SUM(p.ocr_chars) FROM pages p WHERE p.sha256 = d.sha256) END "
                   "AS ocr_chars" if "ocr_chars" in pages else "NULL AS ocr_chars")
    columns.append(f"CASE WHEN {merged} THEN (SELECT MAX(o.ocr_quality) FROM documents o "
                   "WHERE o.sha256 = d.sha256) END AS ocr_quality" if "ocr_quality" in documents
                   else "NULL AS ocr_quality")
    join = ""
    if table_columns(conn, "court_text"):
        columns += ["ct.chars AS court_chars", "ct.sha256 AS court_sha256"]
        join = "LEFT JOIN court_text ct ON ct.document_id = d.document_id"
    else:
        columns += ["NULL AS court_chars", "NULL AS court_sha256"]
    yield from conn.execute(f"SELECT {', '.join(columns)} FROM documents d {join} WHERE {where} "
                            "ORDER BY d.rowid", params)


def extracted_fingerprint(conn: sqlite3.Connection) -> str:
    """Count and newest update of the extracted documents: changes whenever one is added, removed
    or given another text (each of those writes updated_at). A cheap "is the index current?"."""
    count, newest = conn.execute(
        "SELECT COUNT(*), MAX(updated_at) FROM documents WHERE status = 'extracted'").fetchone()
    return f"{count}/{newest}"


def tables_with_column(conn: sqlite3.Connection, column: str) -> list[str]:
    """Every table of the database that has `column` (the show command's related rows)."""
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return [table for table in tables if column in table_columns(conn, table)]


def rows_where(conn: sqlite3.Connection, table: str, column: str, value: Any,
               limit: int = 1000) -> list[dict[str, Any]]:
    order = "rowid" if table != "documents" else "document_id"
    try:
        rows = conn.execute(f"SELECT * FROM {_quote_name(table)} WHERE {_quote_name(column)} = ? "
                            f"ORDER BY {order} LIMIT ?", (value, limit)).fetchall()
    except sqlite3.OperationalError:    # a WITHOUT ROWID table
        rows = conn.execute(f"SELECT * FROM {_quote_name(table)} WHERE {_quote_name(column)} = ? LIMIT ?",
                            (value, limit)).fetchall()
    return [dict(row) for row in rows]


def documents_matching(conn: sqlite3.Connection, identifier: str) -> tuple[str, list[dict[str, Any]]]:
    """(what matched: 'document_id' | 'sha256' | 'case_number' | '', the document rows) of an ID."""
    for column in ("document_id", "sha256", "case_number"):
        rows = rows_where(conn, "documents", column, identifier)
        if rows:
            return column, rows
    rows = [dict(row) for row in conn.execute(
        "SELECT * FROM documents WHERE case_number = ? COLLATE NOCASE ORDER BY document_id LIMIT 1000",
        (identifier.strip(),))]
    return ("case_number", rows) if rows else ("", [])
