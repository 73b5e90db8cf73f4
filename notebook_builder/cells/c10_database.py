"""The database: its connection, its schema and migrations, and the `kv` table.

Guarantees:
- `Database.open()` judges the file read-only first (`schema_state`): an older version's database
  (a `documents` table and no `schema_version`, or a version stamped without its columns) raises
  `LegacyDatabaseError` before anything is written; c38_legacy adopts it against
  `target_schema()`, what MIGRATIONS build on an empty database. Otherwise it creates the
  CONTRACT.md schema idempotently and applies the forward migrations in order; migrate() never
  stamps a version on a schema it did not build.
- The file is in WAL mode with busy_timeout=30000 and synchronous=NORMAL. Each thread has its own
  connection (`Database.conn`); `transaction()` is BEGIN IMMEDIATE ... COMMIT, re-entrant.
- `open_readonly()` never writes and never migrates: a reader's view for reports and queries.
  Every reader opens the file through `open_reader()`, which writes nothing beside it: any copy
  of an archive (read-only media, no -wal/-shm) reads as the original.
- The live file is never opened by hand (`is_sqlite_file`): SQLite alone reads it.
- Each concern's statements live in a module of their own beside this one, as a `Tables` over a
  Database: the work queues (c12), what the stages record of a document (c13), derive's rows
  (c14), discovery's state (c15), adopted v1.2 rows (c16), the store's snapshots and backlog
  (c17); the query layer's reads (c11) and the search index (c18) are functions over a connection.

Knobs read: none.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .c00_config import IntegrityError

STATUSES = ("discovered", "downloaded", "extracted", "failed")
PERMANENT_HTTP_STATUSES = (400, 401, 403, 404, 413)

# kv keys read or written by more than one module (the kv table's other keys are one module's own).
KV_CHECKPOINT_SEQ = "checkpoint_seq"               # the newest snapshot taken (bumped by checkpoint)
KV_CHECKPOINT_AT = "checkpoint_at"                 # when it was taken
KV_STORE_CHECKPOINT_SEQ = "store_checkpoint_seq"   # the newest snapshot the store holds; never back
KV_DISCOVERY_CONVERGED_AT = "discovery_converged_at"
KV_ARCHIVE_UPDATED_AT = "archive_updated_at"
KV_DISCOVERY_STRATEGY = "discovery_strategy"
KV_COMPLETE_THROUGH = "complete_through"           # the court system's day up to which the archive is complete
KV_DOWNLOAD_PATH = "download_path"                 # the download path that answers PDFs (c30 DOWNLOAD_PATHS)
KV_LEGACY_ADOPTION = "legacy_adoption"             # JSON: what adopting an older version's database brought
KV_CRAWL_FIGURES = "crawl_figures"                 # what each kind of the crawl's work cost (c75), JSON
KV_OPINIONS_ARCHIVED_AT = "opinions_archived_at"   # when every opinion the court lists was first archived
KV_COURT_SYSTEM = "court_system"                   # the court system the archive is of (c27; none: kentucky)


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
# court_text, as c33_best_text chooses), the quality of the text OCR merged (`ocr_quality`, one of
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

# v12: what changed since the archive's first complete crawl (c19_changes). `changes`: one row a
# change a run found (added, withdrawn, restored, changed), written in the transaction that made
# the archive's rows say so; a run records a document's change of one kind once (UNIQUE);
# `fields` (JSON) names the metadata columns a "changed" row changed and `after` (JSON) their new
# values, `how` how a withdrawn document was withdrawn. `documents.withdrawn_on`: the
# Kentucky day a document the court withdrew was first seen withdrawn (NULL while it is served).
_SCHEMA_V12 = """
CREATE TABLE IF NOT EXISTS changes (
    change_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    run          TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    change       TEXT NOT NULL CHECK (change IN ('added', 'withdrawn', 'restored', 'changed')),
    seen_at      TEXT NOT NULL,
    case_number  TEXT,
    court_code   TEXT,
    filed_date   TEXT,
    fields       TEXT,
    after        TEXT,
    how          TEXT,
    UNIQUE (run, document_id, change)
);
CREATE INDEX IF NOT EXISTS changes_document ON changes(document_id);
CREATE INDEX IF NOT EXISTS changes_seen_at ON changes(seen_at);
ALTER TABLE documents ADD COLUMN withdrawn_on TEXT;
"""

# v13: fixity (c21_fixity). `fixity`: per stored file (PDFs and texts, Drive's text packs) what its
# bytes were proven to be (sha256, md5, size), the audit run that first saw it and the last that
# proved it, and its damage while it has one; `fixity_events`: each damage found, where (store or
# workspace), and how it was healed or why it could not be. (v12 is another change's.)
_SCHEMA_V13 = """
CREATE TABLE IF NOT EXISTS fixity (
    name         TEXT PRIMARY KEY,
    sha256       TEXT,
    md5          TEXT,
    size         INTEGER,
    first_run    INTEGER NOT NULL,
    checked_run  INTEGER,
    checked_at   TEXT,
    damage       TEXT
);
CREATE INDEX IF NOT EXISTS fixity_damaged ON fixity(name) WHERE damage IS NOT NULL;
CREATE TABLE IF NOT EXISTS fixity_events (
    event_id  INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    run       INTEGER NOT NULL,
    place     TEXT NOT NULL,
    name      TEXT NOT NULL,
    damage    TEXT NOT NULL,
    outcome   TEXT NOT NULL
);
"""

# v14: court systems other than Kentucky (c26_trportal, c27_court_systems). `documents.access_state`:
# why the court does not serve a listed document to the public (c12 ACCESS_STATE_REASONS; NULL: public,
# as every Kentucky document is); such a document has document_available 0 and stays `discovered`, out
# of the download queue and never a failure. `documents.opinion`: 1 an opinion, 0 not, as the court's
# own listing says (NULL: judged by its entry's words, c12 OPINION_SQL). `documents.court_path` and
# `cases.court_path`: the document's download path and the case's path under the API root, their ids
# written as the court writes them (TR Portal; NULL where the court's paths are made from the ids).
_SCHEMA_V14 = """
ALTER TABLE documents ADD COLUMN access_state TEXT;
ALTER TABLE documents ADD COLUMN opinion INTEGER;
ALTER TABLE documents ADD COLUMN court_path TEXT;
ALTER TABLE cases ADD COLUMN court_path TEXT;
"""

# v15: `docket_entries.secured`: 1 when a TR Portal court marks the entry securedDocument (its
# documents are not public whatever their access list says, c26 `document_state`), 0 when it does
# not; NULL where the court has no such mark (C-Track Public Access).
_SCHEMA_V15 = """
ALTER TABLE docket_entries ADD COLUMN secured INTEGER;
"""

# Forward migrations: version -> SQL. Append only; never edit a released step.
MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4, 5: _SCHEMA_V5,
                              6: _SCHEMA_V6, 7: _SCHEMA_V7, 8: _SCHEMA_V8,
                              9: _SCHEMA_V9, 10: _SCHEMA_V10, 11: _SCHEMA_V11, 12: _SCHEMA_V12,
                              13: _SCHEMA_V13, 14: _SCHEMA_V14, 15: _SCHEMA_V15}
SCHEMA_VERSION = max(MIGRATIONS)


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
                            for row in conn.execute(f"PRAGMA {schema}.table_info({quote_name(name)})"))
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
            for statement in split_sql(MIGRATIONS[step]):
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
    conn = sqlite3.connect(database_uri(path), uri=True, timeout=30) if recover else open_reader(path)
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
    """One connection with the pipeline's pragmas; autocommit, explicit transactions (`readonly`: a
    reader's, `open_reader`)."""
    if readonly:
        conn = open_reader(path)
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=30,
                               check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def open_reader(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection to the database at `path` that creates and leaves nothing beside it,
    whatever the copy: read-only media, a copy without its -wal and -shm, a live database.

    mode=ro alone makes a -wal and a -shm beside a WAL database (and cannot read one where they
    cannot be made). So: beside a writer's -wal and -shm (a run in progress, or one killed) it
    reads through them with mode=ro as any reader of a live database does (SQLite's shared index
    in the -shm is the one file it may touch); with no -wal (a writer that closes leaves none:
    every commit is in the file) it opens the file immutable; where neither reads it (a -wal and
    no usable -shm) it reads a private copy of the file and its journal in a temp folder, removed
    with the connection. An immutable reader takes no lock and does not see a run that starts
    after it: a reader that lasts (serve) reads a snapshot (c17 backup_database, made through here).
    Raises sqlite3.DatabaseError as sqlite3.connect would (no file: unable to open)."""
    path = Path(path)
    wal, shm = _sidecar(path, "-wal"), _sidecar(path, "-shm")
    live_wal = wal.exists() and (wal.stat().st_size > 0 or shm.exists())
    if live_wal and not shm.exists():
        return _reader_of_private_copy(path)
    mode = {"mode": "ro"} if live_wal or _sidecar(path, "-journal").exists() else {"mode": "ro", "immutable": "1"}
    conn = sqlite3.connect(database_uri(path, **mode), uri=True, isolation_level=None, timeout=30,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA schema_version").fetchone()   # SQLite opens the file on first use
    except sqlite3.OperationalError as exc:
        conn.close()
        if "immutable" in mode or not path.is_file() or not _cannot_open_in_place(exc):
            raise
        return _reader_of_private_copy(path)
    return conn


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _cannot_open_in_place(exc: sqlite3.OperationalError) -> bool:
    """SQLite could not open or map the -wal or -shm where they are (read-only media)."""
    name = getattr(exc, "sqlite_errorname", "")   # Python 3.11+
    return name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")) or any(
        words in str(exc) for words in ("unable to open", "readonly database"))


class _PrivateCopyConnection(sqlite3.Connection):
    """A reader of a private copy: its temp folder goes with it (closed, collected, or at exit)."""

    def close(self) -> None:
        super().close()
        finalizer = getattr(self, "_remove_copy", None)
        if finalizer is not None:
            finalizer()


def _reader_of_private_copy(path: Path) -> sqlite3.Connection:
    folder = Path(tempfile.mkdtemp(prefix="kycourt-reader-"))
    copy = folder / path.name
    try:
        for suffix in ("", "-wal", "-journal"):
            if _sidecar(path, suffix).exists():
                shutil.copyfile(_sidecar(path, suffix), _sidecar(copy, suffix))
        # A writer's open and close folds the copied journal into the copy; then it reads as any file.
        writer = sqlite3.connect(str(copy), timeout=30)
        try:
            writer.execute("PRAGMA schema_version").fetchone()
        finally:
            writer.close()
        conn = sqlite3.connect(database_uri(copy, mode="ro", immutable="1"), uri=True, isolation_level=None,
                               timeout=30, check_same_thread=False, factory=_PrivateCopyConnection)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    conn._remove_copy = weakref.finalize(conn, shutil.rmtree, str(folder), ignore_errors=True)
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
    Corrupt", 2.2). SQLite's own connections share one descriptor table per file and never do that
    (open_reader copies a file by hand only where SQLite cannot read it in place: no live writer).
    The connection is immutable (no lock, no sidecar, no copy): only the header is asked for.
    A missing or empty file is no database.
    """
    try:
        if Path(path).stat().st_size == 0:
            return False
    except OSError:
        return False
    conn = sqlite3.connect(database_uri(path, mode="ro", immutable="1"), uri=True)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        return "not a database" not in str(exc)   # locked or busy: a database all the same
    finally:
        conn.close()
    return True


class _ThreadConnection:
    """One thread's connection to a Database; closed when the thread ends (its thread-local slot
    held the last reference), so worker threads leave no connection behind. In a process forked
    from the one that opened it (an extract or OCR worker, whose copy of every other thread's slot
    is dropped at once) it is left alone: the lock it would take may have been held by a thread
    that does not exist there, and SQLite's connection is never carried across a fork."""

    def __init__(self, db: "Database", conn: sqlite3.Connection):
        self.conn = conn
        self._db = weakref.ref(db)
        self._pid = os.getpid()
        with db._connections_lock:
            db._connections.append(conn)

    def __del__(self) -> None:
        if os.getpid() != self._pid:
            return
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
                for statement in split_sql(MIGRATIONS[version]):
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
        """What `PRAGMA integrity_check` finds wrong ([] when sound); a database SQLite cannot even
        check is one problem, its error."""
        try:
            problems = [row[0] for row in self.conn.execute("PRAGMA integrity_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
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


    # ------------------------------------------------------------ documents

    def get_document(self, document_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT rowid, * FROM documents WHERE document_id = ?",
                                 (document_id,)).fetchone()

    def iter_documents(self, where: str = "1", params: Sequence[Any] = ()) -> Iterator[sqlite3.Row]:
        yield from self.conn.execute(f"SELECT * FROM documents WHERE {where} ORDER BY document_id", params)

    def document_columns(self) -> list[str]:
        """Every column of `documents`, in table order (inventory headers)."""
        return [row[1] for row in self.conn.execute("PRAGMA table_info(documents)")]


def split_sql(script: str) -> list[str]:
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return [s for s in statements if s]


def table_columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    """The columns of `table` ([] when there is no such table)."""
    return [row[1] for row in conn.execute(f"PRAGMA {schema}.table_info({quote_name(table)})")]


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def rows_in(conn: sqlite3.Connection, sql: str, ids: Iterable[Any], chunk: int = 500) -> Iterator[sqlite3.Row]:
    """The rows of `sql` for these ids, asked `chunk` at a time (SQLite's limit on variables): its
    `{ids}` stands for one chunk's placeholders."""
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), chunk):
        part = wanted[start:start + chunk]
        yield from conn.execute(sql.format(ids=", ".join("?" * len(part))), part)


class Tables:
    """One concern's statements over a Database (the work queues, discovery's state, ...): they run
    on the database's connection of the calling thread, in its transactions."""

    def __init__(self, db: Database):
        self.db = db

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self.db.transaction()

    def kv_get(self, key: str, default: str | None = None) -> str | None:
        return self.db.kv_get(key, default)


