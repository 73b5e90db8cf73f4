"""The database: schema, migrations, the two work queues, checkpoints. All SQL lives here.

Guarantees:
- `Database.open()` creates the CONTRACT.md schema idempotently, records the
  schema version in `kv` and applies forward migrations in order; the file is
  in WAL mode with busy_timeout=30000 and synchronous=NORMAL.
- The download and extract queues are defined once (`DOWNLOAD_QUEUE_SQL`,
  `EXTRACT_QUEUE_SQL`); the stages take work from them and verify counts
  them with the same text, so `done` is true by construction.
- Discovery upserts refresh metadata and never move a status backwards.
- `checkpoint()` makes a consistent single-file snapshot with SQLite's online
  backup API from a separate connection, in one step (a stepped backup
  livelocks under a busy writer, see MEASURED.md), and records a monotonically
  increasing `checkpoint_seq` that restore uses to pick the newest state.

Knobs read: MAX_ATTEMPTS, MAX_EXTRACT_ATTEMPTS, RETRY_HARD (through callers).
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .c00_config import Config, IntegrityError, utc_now

DB_FILENAME = "ky_court.sqlite"
STATUSES = ("discovered", "downloaded", "extracted", "failed")
PERMANENT_HTTP_STATUSES = (400, 401, 403, 404, 413)

_PERMANENT_LIST = ",".join(str(code) for code in PERMANENT_HTTP_STATUSES)

# The one definition of each queue. Parameters: :max_attempts / :max_extract_attempts.
DOWNLOAD_QUEUE_SQL = f"""
    status IN ('discovered', 'failed')
    AND attempts < :max_attempts
    AND (http_status IS NULL OR http_status NOT IN ({_PERMANENT_LIST}))
"""
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

# Forward migrations: version -> SQL. Append only; never edit a released step.
MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 4: _SCHEMA_V4}
SCHEMA_VERSION = max(MIGRATIONS)

DOCUMENT_METADATA_COLUMNS = (
    "case_number", "court", "case_title", "docket_entry_id", "description",
    "filed_date", "case_id", "document_name", "shard",
)


# The database's checkpoint_seq at a write, read in the write's own transaction: a row committed
# after checkpoint N was taken carries N or more, one committed before it less (the bump and the
# row's commit are serialized by SQLite's write lock). Clock-free.
_CURRENT_CHECKPOINT_SQL = "COALESCE((SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'checkpoint_seq'), 0)"
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


def connect(path: str | os.PathLike, *, readonly: bool = False) -> sqlite3.Connection:
    """One connection with the pipeline's pragmas; autocommit, explicit transactions."""
    if readonly:
        conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True,
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


def is_sqlite_file(path: str | os.PathLike) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


class Database:
    """A thin layer over one sqlite3 connection; every statement of the pipeline."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._lock = threading.RLock()

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def open(cls, path: str | os.PathLike) -> "Database":
        path = Path(path)
        if path.exists() and path.stat().st_size > 0 and not is_sqlite_file(path):
            raise IntegrityError(f"{path} is not an SQLite database (bad header); "
                                 "move it aside or delete it to start over")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = cls(connect(path), path)
            db.migrate()
        except sqlite3.DatabaseError as exc:
            raise IntegrityError(f"{path} cannot be opened as SQLite: {exc}") from None
        return db

    def close(self) -> None:
        self.conn.close()

    def migrate(self) -> int:
        with self.transaction():
            self.conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT)")
            current = int(self.kv_get("schema_version", "0"))
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
        """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception (re-entrant)."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

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

    # -------------------------------------------------------------- queues

    @staticmethod
    def _queue_params(cfg: Config) -> dict[str, int]:
        return {"max_attempts": cfg.MAX_ATTEMPTS, "max_extract_attempts": cfg.MAX_EXTRACT_ATTEMPTS}

    def download_queue(self, cfg: Config, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        """The next `limit` documents to fetch, in rowid order after `after_rowid`."""
        return self.conn.execute(
            f"SELECT rowid, * FROM documents WHERE ({DOWNLOAD_QUEUE_SQL}) AND rowid > :after "
            "ORDER BY rowid LIMIT :limit",
            {**self._queue_params(cfg), "after": after_rowid, "limit": limit}).fetchall()

    def download_queue_size(self, cfg: Config) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM documents WHERE {DOWNLOAD_QUEUE_SQL}",
                                 self._queue_params(cfg)).fetchone()[0]

    def extract_queue(self, cfg: Config, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        return self.conn.execute(
            f"SELECT rowid, * FROM documents WHERE ({EXTRACT_QUEUE_SQL}) AND rowid > :after "
            "ORDER BY rowid LIMIT :limit",
            {**self._queue_params(cfg), "after": after_rowid, "limit": limit}).fetchall()

    def extract_queue_size(self, cfg: Config) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM documents WHERE {EXTRACT_QUEUE_SQL}",
                                 self._queue_params(cfg)).fetchone()[0]

    def queue_sizes(self, cfg: Config) -> dict[str, int]:
        return {"download": self.download_queue_size(cfg), "extract": self.extract_queue_size(cfg)}

    def forgive_failures(self) -> int:
        """RETRY_HARD: put every failed document back in the download queue, once per run."""
        with self.transaction():
            cursor = self.conn.execute(
                "UPDATE documents SET attempts = 0, http_status = NULL, "
                "last_error = 'retry-hard; was: ' || COALESCE(http_status, '') || ' ' || COALESCE(last_error, ''), "
                "updated_at = ? WHERE status = 'failed'", (utc_now(),))
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

    def coverage_by_year_court(self) -> list[sqlite3.Row]:
        """Per case-number year and court: documents in each status (for reports)."""
        return self.conn.execute(
            "SELECT substr(case_number, 1, 4) AS year, court, "
            "COUNT(*) AS discovered, "
            "SUM(status IN ('downloaded', 'extracted')) AS downloaded, "
            "SUM(status = 'extracted') AS extracted, "
            "SUM(status = 'failed') AS failed "
            "FROM documents GROUP BY year, court ORDER BY year, court").fetchall()

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
            return new

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
        """(document_id, *DOCUMENT_METADATA_COLUMNS) of every document, for discovery's change check."""
        yield from self.conn.execute(
            f"SELECT document_id, {', '.join(DOCUMENT_METADATA_COLUMNS)} FROM documents")

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

    def mark_extracted(self, document_id: str, *, pages: int, extracted_chars: int,
                       likely_scanned: bool) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET status = 'extracted', pages = ?, extracted_chars = ?, "
                "likely_scanned = ?, extract_attempts = extract_attempts + 1, updated_at = ? "
                "WHERE document_id = ? AND status = 'downloaded'",
                (pages, extracted_chars, int(likely_scanned), utc_now(), document_id))

    def mark_extract_failed(self, document_id: str, error: str, *, reason: str | None = None,
                            spend_all: int | None = None) -> None:
        """One failed extraction attempt; a permanent one (`reason`) spends them all (`spend_all`:
        MAX_EXTRACT_ATTEMPTS), so the document leaves the queue of CONTRACT.md with its reason."""
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET extract_attempts = MAX(extract_attempts + 1, COALESCE(?, 0)), "
                "last_error = ?, extract_failure = ?, updated_at = ? WHERE document_id = ? AND status = 'downloaded'",
                (spend_all, error[:500], reason, utc_now(), document_id))

    def log_extraction(self, document_id: str, *, sha256: str | None, attempt: int, engine: str,
                       outcome: str, pages: int | None, chars: int | None, seconds: float,
                       error: str | None) -> None:
        with self.transaction():
            self.conn.execute(
                "INSERT INTO extraction_log(document_id, sha256, attempt, engine, outcome, pages, chars, "
                "seconds, error, logged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (document_id, sha256, attempt, engine, outcome, pages, chars, seconds,
                 None if error is None else error[:500], utc_now()))

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
        `pages` ((sha256, page, chars, has_images, image_cover, needs_ocr, engine)), and for each entry (document_id, sha256,
        attempt, engine, pages, chars, seconds, likely_scanned; optional quality, pages_needing_ocr,
        extracted_by_ocr, ocr_pages) its `ok` log row and the document `extracted`."""
        now = utc_now()
        with self.transaction():
            self.log_extraction_attempts(list(attempts))
            self.conn.executemany(
                "INSERT INTO pages(sha256, page, chars, has_images, image_cover, needs_ocr, engine) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256, page) DO UPDATE SET chars = excluded.chars, "
                "has_images = excluded.has_images, image_cover = excluded.image_cover, "
                "needs_ocr = excluded.needs_ocr, engine = excluded.engine", pages)
            self.log_extraction_attempts([{**entry, "outcome": "ok", "error": None} for entry in entries])
            self.conn.executemany(
                "UPDATE documents SET status = 'extracted', pages = :pages, extracted_chars = :chars, "
                "likely_scanned = :likely_scanned, pages_needing_ocr = :pages_needing_ocr, "
                "text_quality = :quality, extracted_by_ocr = :extracted_by_ocr, ocr_pages = :ocr_pages, "
                "extract_failure = NULL, extract_attempts = extract_attempts + 1, updated_at = :now "
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

    def page_count(self, sha256: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM pages WHERE sha256 = ?", (sha256,)).fetchone()[0]

    def record_ocr(self, sha256: str, ocr_chars: Mapping[int, int], *, failed: bool = False) -> int:
        """OCR's outcome for every document holding `sha256`: the characters it gave each page, and
        `extracted_by_ocr` 1 with `ocr_pages` (or 0 when it failed). Returns the documents changed."""
        with self.transaction():
            self.conn.executemany("UPDATE pages SET ocr_chars = ? WHERE sha256 = ? AND page = ?",
                                  [(chars, sha256, page) for page, chars in ocr_chars.items()])
            return self.conn.execute(
                "UPDATE documents SET extracted_by_ocr = ?, ocr_pages = ?, updated_at = ? "
                "WHERE sha256 = ? AND status = 'extracted'",
                (0 if failed else 1, 0 if failed else len(ocr_chars), utc_now(), sha256)).rowcount

    def extraction_failures(self, cfg: Config) -> list[sqlite3.Row]:
        """Downloaded documents whose extraction attempts are used up."""
        return self.conn.execute(
            "SELECT * FROM documents WHERE status = 'downloaded' AND extract_attempts >= ? "
            "ORDER BY document_id", (cfg.MAX_EXTRACT_ATTEMPTS,)).fetchall()

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
    def snapshot_problems(path: str | os.PathLike) -> list[str]:
        """`PRAGMA quick_check` of a snapshot file, read-only ([] when sound); never writes to it."""
        try:
            conn = sqlite3.connect(f"file:{Path(path)}?mode=ro&immutable=1", uri=True)
            try:
                problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        return [] if problems == ["ok"] else problems


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
    rollback-journal mode (one self-contained file), checked, then renamed.
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
            row = source.execute("SELECT value FROM kv WHERE key = 'checkpoint_seq'").fetchone()
            sequence = (int(row[0]) if row else 0) + 1
            taken_at = utc_now()
            source.executemany(
                "INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [("checkpoint_seq", str(sequence)), ("checkpoint_at", taken_at)])
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
    with open(temp_path, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temp_path, snapshot_path)
    return {"checkpoint_seq": sequence, "checkpoint_at": taken_at,
            "seconds": round(time.monotonic() - started, 4), "path": str(snapshot_path)}


def journal_rows(path: str | os.PathLike) -> tuple[int, list[dict[str, Any]]]:
    """(S, the documents committed downloaded since snapshot S was taken) of the database at `path`,
    S being the newest snapshot known to be in the store (kv `store_checkpoint_seq`); read on a
    connection of its own (the checkpointer's thread). Nothing (S = 0) before a snapshot reached
    the store: there is none for a journal to follow."""
    conn = connect(path, readonly=True)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = 'store_checkpoint_seq'").fetchone()
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
            conn.execute(
                "INSERT INTO kv(key, value) VALUES ('store_checkpoint_seq', :seq) ON CONFLICT(key) DO UPDATE "
                "SET value = excluded.value WHERE CAST(kv.value AS INTEGER) < CAST(excluded.value AS INTEGER)",
                {"seq": str(sequence)})
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
        conn = sqlite3.connect(f"file:{Path(path)}?mode=ro&immutable=1", uri=True)
        try:
            rows = dict(conn.execute(
                "SELECT key, value FROM kv WHERE key IN ('checkpoint_seq', 'checkpoint_at')").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(f"{path} cannot be read: {exc}") from None
    try:
        sequence = int(rows.get("checkpoint_seq", 0))
    except (TypeError, ValueError):
        raise IntegrityError(f"{path} records checkpoint_seq {rows.get('checkpoint_seq')!r}, "
                             "not a number") from None
    return sequence, str(rows.get("checkpoint_at") or "")
