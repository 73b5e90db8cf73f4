"""Adopt: bring an older version's archive (v1.2) into the pipeline, losing nothing of it.

Guarantees:
- `judge_database` (read-only) calls a database legacy when it has a `documents` table and no
  `schema_version`, or a version stamped without its tables or columns; it can be adopted when
  SQLite reads it, it passes `quick_check` and its `document_id`s are present and distinct; else
  `LegacyDatabaseError` names what is wrong (exit 2) and nothing is changed anywhere. Restore ranks
  legacy states by the judgement's newest `updated_at`, then row count.
- `adopt()` (after restore, before the database opens; a dry run too: it asks nothing of the
  court): (1) the legacy database (and its `-wal`) is kept byte for byte as
  `legacy/ky_court-v1-<sha256[:16]>.sqlite` in the workspace and the store (the checkpoint uploads
  it before the first snapshot replaces the store's ky_court.sqlite, should the store refuse it
  now: `keep_legacy_originals`); (2) a copy of it is made whole against c10's `target_schema` in
  ONE transaction: every legacy column, table and kv key kept (a table the pipeline cannot fill as
  `legacy_<name>`, kv keys as `legacy:<key>`), statuses outside the four mapped by the row
  (`provisional_status`), one `legacy_documents` row per row; (3) the copy replaces the workspace
  database. A kill at any instant is followed by a run that adopts again or finishes the rest.
- Then, until kv `legacy_adoption` is `done`: pdf_backup/ is folded (`fold`: c60 backfill) and
  every adopted row claiming a PDF is settled: its PDF found by sha256 (workspace or store) keeps
  its status with local_pdf `pdf_by_hash/<sha256>.pdf`, what the store lacks is mirrored, and a
  row whose PDF is nowhere goes back to the download queue, named. A row whose text the archive
  holds keeps that text (never rewritten: c80), and is `extracted` only with its figures: one
  v1.2 read nothing from or judged likely scanned, one it left `downloaded`, and one it recorded
  no character count or pages of go back to the extract queue with the held text's character
  count, so extraction measures the PDF (a twin's figures are copied) and keeps the text; one
  whose text is nowhere is extracted again.
- `merge_legacy_rows`: restore's two legacy states, the rows only the older one has added.
- `reconcile_legacy_ids()` (after discovery): an adopted id discovery shows to be a docket
  entry's or a case's is linked to their real documents and never downloaded; one it listed is a
  document; after convergence the rest are `unlisted`. Until then an adopted row without a PDF
  waits out of the download queue (c12 `LEGACY_HELD_KINDS`).
- `AdoptResult` is the run summary's `adopt` line; kv `legacy_adoption` is status.json's.

This module owns the SQL it runs on a legacy file before that file is the pipeline's database;
everything on the adopted database goes through c10's `Database`.

Knobs read: none of its own (WORKSPACE and STORE through the context).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .c00_config import StoreError, utc_now
from .c05_durable import durable_rename, durable_write, raise_if_disk_full
from .c06_layout import DB_FILENAME, pdf_store_name, text_store_name
from .c10_database import (KV_LEGACY_ADOPTION, KV_STORE_CHECKPOINT_SEQ, PERMANENT_HTTP_STATUSES, SCHEMA_VERSION,
                           STATUSES, ColumnSpec, Database, LegacyDatabaseError, SchemaSpec, database_uri,
                           is_sqlite_file, open_reader, read_schema, schema_state, target_schema)
from .c13_records import DownloadRecords, TextRecords
from .c16_legacy_state import LEGACY_METADATA_SQL, LegacyState
from .c20_store import sha256_file
from .c35_context import Context

log_legacy = logging.getLogger("kycourt.legacy")

LEGACY_FOLDER = "legacy"
LEGACY_KV_PREFIX = "legacy:"
KV_LEGACY_ORIGINALS = "legacy_originals"   # JSON list: legacy/ names kept in the workspace, for the store
_LEGACY_SHOWN = 5                          # ids named in one log line
_LEGACY_STATUS_FUNCTION = "kycourt_provisional_status"


# ------------------------------------------------------------------ decisions


def legacy_original_name(sha256: str) -> str:
    """The store and workspace name an adopted original is kept under (distinct per original)."""
    return f"{LEGACY_FOLDER}/ky_court-v1-{sha256[:16]}.sqlite"


def provisional_status(status: Any, sha256: Any, extracted_chars: Any, http_status: Any) -> str:
    """A legacy row's status in the pipeline's four, judged by the row alone (settling then checks
    the files): one of the four stays; otherwise a sha256 makes it downloaded (extracted when a
    character count was recorded), a permanent http_status failed, another error status failed
    (still queued), and anything else discovered."""
    if status in STATUSES:
        return status
    if sha256:
        return "extracted" if extracted_chars is not None else "downloaded"
    try:
        code = int(http_status) if http_status is not None else None
    except (TypeError, ValueError):
        code = None
    if code is not None and (code in PERMANENT_HTTP_STATUSES or code >= 400):
        return "failed"
    return "discovered"


@dataclass
class AdoptionPlan:
    """What makes a legacy schema whole: tables created, columns added, tables set aside."""
    create: list[str] = field(default_factory=list)                      # pipeline tables it lacks
    add_columns: list[tuple[str, ColumnSpec]] = field(default_factory=list)
    fill: list[tuple[str, ColumnSpec]] = field(default_factory=list)     # NULLs to give the default
    set_aside: list[tuple[str, str]] = field(default_factory=list)       # (table, legacy_<table>)
    kept: list[str] = field(default_factory=list)                        # tables the pipeline does not know
    document_extras: list[ColumnSpec] = field(default_factory=list)      # legacy columns of documents


def adoption_plan(present: SchemaSpec, target: SchemaSpec) -> AdoptionPlan:
    """Pure: how `present` (a legacy schema) becomes `target` keeping everything it holds.
    `documents` is always rebuilt (the caller copies its rows); it appears in no other list."""
    plan = AdoptionPlan()
    taken = set(present.tables)
    for table, (_, columns) in target.tables.items():
        if table == "documents":
            names = {column.name for column in columns}
            plan.document_extras = [c for c in present.columns(table) if c.name not in names]
            continue
        if table not in present.tables:
            plan.create.append(table)
            continue
        have = {column.name: column for column in present.columns(table)}
        missing = [column for column in columns if column.name not in have]
        if any(column.pk or (column.notnull and column.default is None) for column in missing):
            aside = f"legacy_{table}"
            number = 2
            while aside in taken:
                aside, number = f"legacy_{table}_{number}", number + 1
            taken.add(aside)
            plan.set_aside.append((table, aside))
            plan.create.append(table)
            continue
        plan.add_columns.extend((table, column) for column in missing)
        plan.fill.extend((table, column) for column in columns if column.name in have and column.notnull
                         and column.default is not None and not have[column.name].notnull)
    plan.kept = sorted(table for table in present.tables if table not in target.tables)
    return plan


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_definition(column: ColumnSpec, *, constraints: bool = True) -> str:
    """`name type [NOT NULL] [DEFAULT x]` for ALTER TABLE ADD COLUMN (no key, no CHECK: SQLite
    cannot add those to a table with rows)."""
    text = f"{_quote(column.name)} {column.type}".rstrip()
    if constraints and column.default is not None:
        text += (" NOT NULL" if column.notnull else "") + f" DEFAULT {column.default}"
    return text


# ------------------------------------------------------------------ judging


@dataclass
class LegacyJudgement:
    """What a database file holds, as adoption and restore need to know it."""
    path: str
    kind: str                        # schema_state's kind, or 'unreadable'
    version: int = 0
    rows: int = 0
    newest_updated_at: str = ""
    statuses: dict[str, int] = field(default_factory=dict)   # legacy status -> rows ('NULL' for none)
    problems: list[str] = field(default_factory=list)        # why it cannot be adopted

    @property
    def legacy(self) -> bool:
        return self.kind in ("legacy", "incomplete")

    @property
    def content_rank(self) -> tuple[str, int]:
        """How restore orders states that record no checkpoint: newest row update, then rows."""
        return self.newest_updated_at, self.rows


def judge_database(path: str | os.PathLike) -> LegacyJudgement:
    """Reads (never writes) what the database at `path` is and, if legacy, whether it can be adopted."""
    try:
        kind, version = schema_state(path)
    except (sqlite3.DatabaseError, ValueError) as exc:
        return LegacyJudgement(str(path), "unreadable", problems=[f"SQLite cannot read it ({exc})"])
    judgement = LegacyJudgement(str(path), kind, version)
    if kind == "foreign":
        judgement.problems.append("it has tables but no documents table")
    if not judgement.legacy:
        return judgement
    try:
        conn = open_reader(path)
        try:
            _judge_documents(conn, judgement)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        judgement.problems.append(f"SQLite cannot read it ({exc})")
    return judgement


def _judge_documents(conn: sqlite3.Connection, judgement: LegacyJudgement) -> None:
    checked = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    if checked != ["ok"]:
        judgement.problems.append(f"it fails quick_check ({'; '.join(checked[:3])})")
        return
    columns = {column.name for column in read_schema(conn).columns("documents")}
    judgement.rows = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    if "updated_at" in columns:
        judgement.newest_updated_at = str(conn.execute("SELECT MAX(updated_at) FROM documents").fetchone()[0] or "")
    if "status" in columns:
        judgement.statuses = {("NULL" if status is None else str(status)): count for status, count in
                              conn.execute("SELECT status, COUNT(*) FROM documents GROUP BY status")}
    else:
        judgement.statuses = {"NULL": judgement.rows}
    if "document_id" not in columns:
        judgement.problems.append("its documents table has no document_id column")
        return
    empty = conn.execute("SELECT COUNT(*) FROM documents WHERE document_id IS NULL "
                         "OR trim(CAST(document_id AS TEXT)) = ''").fetchone()[0]
    if empty:
        judgement.problems.append(f"{empty} documents rows have a NULL or empty document_id")
    duplicated = conn.execute("SELECT COUNT(*), SUM(n) FROM (SELECT COUNT(*) AS n FROM documents "
                              "WHERE document_id IS NOT NULL GROUP BY document_id HAVING n > 1)").fetchone()
    if duplicated[0]:
        example = conn.execute("SELECT document_id FROM documents WHERE document_id IS NOT NULL "
                               "GROUP BY document_id HAVING COUNT(*) > 1 LIMIT 1").fetchone()[0]
        judgement.problems.append(f"{duplicated[0]} document_id values occur more than once "
                                  f"({duplicated[1]} rows; e.g. {example!r})")


def refuse(judgement: LegacyJudgement, what: str) -> LegacyDatabaseError:
    return LegacyDatabaseError(f"{what} cannot be adopted: {'; '.join(judgement.problems)}; nothing was changed "
                               "(move it aside, or mend it, and run again)")


# ------------------------------------------------------------------ the adoption transaction


def adopt_connection(conn: sqlite3.Connection, *, legacy_kv: bool, record: dict[str, Any],
                     kv: dict[str, str] | None = None) -> dict[str, Any]:
    """Makes the legacy database open on `conn` (autocommit, a copy) whole, in one transaction that
    also writes schema_version, kv legacy_adoption (`record` plus what was done) and `kv`. Returns
    the record."""
    present = read_schema(conn)
    target = target_schema()
    plan = adoption_plan(present, target)
    legacy_columns = {column.name for column in present.columns("documents")}
    conn.create_function(_LEGACY_STATUS_FUNCTION, 4, provisional_status, deterministic=True)
    conn.execute("PRAGMA legacy_alter_table = ON")     # views naming a table keep naming it
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, aside in plan.set_aside:
            conn.execute(f"ALTER TABLE {_quote(table)} RENAME TO {_quote(aside)}")
        for table in plan.create:
            conn.execute(target.tables[table][0])
        for table, column in plan.add_columns:
            conn.execute(f"ALTER TABLE {_quote(table)} ADD COLUMN {column_definition(column)}")
        for table, column in plan.fill:
            conn.execute(f"UPDATE {_quote(table)} SET {_quote(column.name)} = {column.default} "
                         f"WHERE {_quote(column.name)} IS NULL")
        mapped = _adopt_documents(conn, target, plan, legacy_columns)
        if legacy_kv:
            conn.execute("UPDATE kv SET key = ? || key WHERE key NOT LIKE ?",
                         (LEGACY_KV_PREFIX, LEGACY_KV_PREFIX + "%"))
        for name, _table, sql in target.indexes:
            conn.execute(sql.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
                         .replace("CREATE UNIQUE INDEX ", "CREATE UNIQUE INDEX IF NOT EXISTS ", 1))
        record = {**record, "state": "schema", "rows": conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
                  "statuses_mapped": mapped,
                  "columns_added": [f"{table}.{column.name}" for table, column in plan.add_columns]
                  + [f"documents.{c.name}" for c in target.columns("documents") if c.name not in legacy_columns],
                  "tables_created": [table for table in plan.create if table not in dict(plan.set_aside)],
                  "tables_set_aside": [aside for _, aside in plan.set_aside], "tables_kept": plan.kept,
                  "document_columns_kept": [column.name for column in plan.document_extras],
                  "misfiled_ids": conn.execute("SELECT COUNT(*) FROM legacy_documents "
                                               "WHERE id_kind = 'docket_entry'").fetchone()[0]}
        conn.executemany("INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         [("schema_version", str(SCHEMA_VERSION)),
                          (KV_LEGACY_ADOPTION, json.dumps(record, sort_keys=True)), *(kv or {}).items()])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return record


def _adopt_documents(conn: sqlite3.Connection, target: SchemaSpec, plan: AdoptionPlan,
                     legacy_columns: set[str]) -> dict[str, int]:
    """Rebuilds `documents` as the pipeline's table with every legacy column; returns the status
    mappings made ('legacy -> status': rows)."""
    def legacy(column: str) -> str:
        return f"o.{_quote(column)}" if column in legacy_columns else "NULL"

    status_sql = (f"{_LEGACY_STATUS_FUNCTION}({legacy('status')}, {legacy('sha256')}, "
                  f"{legacy('extracted_chars')}, {legacy('http_status')})")
    mapped = {f"{'NULL' if status is None else status} -> {new}": count for status, new, count in conn.execute(
        f"SELECT {legacy('status')}, {status_sql}, COUNT(*) FROM documents o "
        f"WHERE {legacy('status')} IS NULL OR {legacy('status')} NOT IN ({', '.join('?' * len(STATUSES))}) "
        "GROUP BY 1, 2", STATUSES)}
    order = "o.rowid" if _has_rowid(conn, "documents") else "o.document_id"
    conn.execute("ALTER TABLE documents RENAME TO kycourt_adopting_documents")
    conn.execute(target.tables["documents"][0])
    for column in plan.document_extras:
        conn.execute(f"ALTER TABLE documents ADD COLUMN {column_definition(column, constraints=False)}")
    targets, sources = [], []
    for column in target.columns("documents"):
        if column.name == "status":
            targets.append("status")
            sources.append(status_sql)
        elif column.name in legacy_columns:
            targets.append(_quote(column.name))
            sources.append(f"COALESCE(o.{_quote(column.name)}, {column.default})" if column.notnull
                           and column.default is not None else f"o.{_quote(column.name)}")
    for column in plan.document_extras:
        targets.append(_quote(column.name))
        sources.append(f"o.{_quote(column.name)}")
    conn.execute(f"INSERT INTO documents ({', '.join(targets)}) SELECT {', '.join(sources)} "
                 f"FROM kycourt_adopting_documents o ORDER BY {order}")
    conn.execute(
        "INSERT INTO legacy_documents(document_id, legacy_status, id_kind, metadata) "
        f"SELECT d.document_id, {legacy('status')}, "
        "CASE WHEN d.docket_entry_id = d.document_id THEN 'docket_entry' ELSE 'unchecked' END, "
        f"{LEGACY_METADATA_SQL} FROM documents d JOIN kycourt_adopting_documents o ON o.document_id = d.document_id "
        "ON CONFLICT(document_id) DO NOTHING")
    conn.execute("DROP TABLE kycourt_adopting_documents")
    return mapped


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {_quote(table)} LIMIT 1").fetchall()
        return True
    except sqlite3.OperationalError:
        return False


def merge_legacy_rows(target: str | os.PathLike, older: str | os.PathLike) -> int:
    """Adds to the legacy database `target` (a copy: it is written) the documents rows of `older`
    whose ids it lacks, with the columns only `older` has. Returns the rows added."""
    conn = sqlite3.connect(database_uri(target), uri=True, isolation_level=None, timeout=30)
    try:
        conn.execute("ATTACH DATABASE ? AS older", (database_uri(older, mode="ro"),))
        mine = {column.name for column in read_schema(conn).columns("documents")}
        theirs = read_schema(conn, "older").columns("documents")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for column in theirs:
                if column.name not in mine:
                    conn.execute(f"ALTER TABLE main.documents ADD COLUMN {column_definition(column, constraints=False)}")
            names = ", ".join(_quote(column.name) for column in theirs)
            added = conn.execute(
                f"INSERT INTO main.documents ({names}) SELECT {names} FROM older.documents "
                "WHERE document_id NOT IN (SELECT document_id FROM main.documents)").rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("DETACH DATABASE older")
        return added
    finally:
        conn.close()


# ------------------------------------------------------------------ the stage


@dataclass
class AdoptResult:
    adopted: bool = False          # a legacy database was adopted in this session
    resumed: bool = False          # an adoption a kill interrupted was finished in this session
    original: str | None = None    # legacy/<name>: the database as adoption found it
    record: dict[str, Any] = field(default_factory=dict)   # kv legacy_adoption
    backfill: Any = None           # the fold of pdf_backup/ (c60's BackfillResult)
    pdfs: int = 0                  # adopted rows whose PDF the archive holds
    distinct_pdfs: int = 0
    texts_reused: int = 0
    texts_missing: int = 0         # extracted rows whose text is nowhere, or empty (v1.2 read none): extracted again
    rescanned: int = 0             # of the texts reused, likely scans: their pages measured again for OCR
    measured: int = 0              # of the texts reused, rows v1.2 recorded no figures of: measured, text kept
    requeued: list[str] = field(default_factory=list)   # rows whose PDF is nowhere: queued again
    uploaded: int = 0              # PDFs and texts the store lacked, mirrored
    held: int = 0                  # rows waiting for discovery to confirm their ids
    seconds: float = 0.0

    @property
    def acted(self) -> bool:
        return self.adopted or self.resumed


def adopt(ctx: Context, fold: Callable[[Context], Any]) -> AdoptResult:
    """Adopts the workspace's legacy database, if it holds one, and finishes an adoption a kill
    interrupted; then the database is open (`ctx.db`). `fold(ctx)` folds pdf_backup/ into the
    archive (the session hands in c60's backfill, forced), before rows are settled."""
    started = time.monotonic()
    result = AdoptResult()
    path = ctx.db_path
    judgement = judge_database(path) if path.is_file() else LegacyJudgement(str(path), "empty")
    if judgement.kind == "unreadable" and is_sqlite_file(path):
        # A hot journal a killed writer left (v1.2's too) stops a read-only reader: rolled back, as
        # any writer would, the file holds its last committed state again.
        with contextlib.suppress(sqlite3.DatabaseError):
            schema_state(path, recover=True)
        judgement = judge_database(path)
    if judgement.kind == "unreadable":
        return result        # restore has judged it already; Database.open says what is wrong
    if judgement.problems:
        raise refuse(judgement, str(path))
    if judgement.legacy:
        result.original = _adopt_workspace_database(ctx, judgement)
        result.adopted = True
    db = ctx.open_database()
    record = json.loads(db.kv_get(KV_LEGACY_ADOPTION) or "null")
    if not record or record.get("state") == "done":
        return result
    result.resumed = not result.adopted
    result.record = record
    result.original = result.original or record.get("original")
    result.backfill = fold(ctx)
    settle_adopted_rows(ctx, db, result)
    result.held = LegacyState(db).legacy_held_count()
    record.update(state="done", settled_at=utc_now(), pdfs=result.pdfs, distinct_pdfs=result.distinct_pdfs,
                  texts_reused=result.texts_reused, texts_missing=result.texts_missing, rescanned=result.rescanned,
                  measured=result.measured,
                  requeued=len(result.requeued), held=result.held,
                  backups=_backfill_counts(result.backfill))
    db.kv_set(KV_LEGACY_ADOPTION, json.dumps(record, sort_keys=True))
    result.seconds = round(time.monotonic() - started, 3)
    log_legacy.info("%s", describe_adoption(result))
    return result


def _backfill_counts(backfill: Any) -> dict[str, int]:
    get = lambda key: getattr(backfill, key, 0) or 0   # noqa: E731
    return {"files": get("files"), "distinct": get("distinct"), "credited": get("credited"),
            "not_pdf": len(getattr(backfill, "not_pdf", []) or [])}


def describe_adoption(result: AdoptResult) -> str:
    """The summary's one line about an adoption (what it brought, what is left)."""
    record = result.record
    backups = record.get("backups") or _backfill_counts(result.backfill)
    mapped = sum((record.get("statuses_mapped") or {}).values())
    rescanned = f"{result.rescanned} of them scans whose pages are measured again for OCR; " if result.rescanned else ""
    if result.measured:
        rescanned += f"{result.measured} of them measured (v1.2 recorded no characters or pages); "
    text = (f"{'v1.2 archive adopted' if result.adopted else 'adoption of a v1.2 archive finished'}: "
            f"{record.get('rows', 0)} rows, {result.pdfs} with their PDF ({result.distinct_pdfs} distinct), "
            f"{result.texts_reused} texts reused ({rescanned}{result.texts_missing} to extract again), "
            f"{backups['files']} backup files folded ({backups['distinct']} distinct PDFs, "
            f"{backups['credited']} rows credited, {backups['not_pdf']} not PDFs), "
            f"{len(result.requeued)} rows back to the download queue (PDF nowhere)")
    if mapped:
        text += f", {mapped} statuses mapped"
    if result.held:
        text += f", {result.held} rows wait for discovery to confirm their ids"
    if record.get("tables_set_aside"):
        text += f", tables set aside: {', '.join(record['tables_set_aside'])}"
    return text + (f"; original kept as {result.original}" if result.original else "")


def _adopt_workspace_database(ctx: Context, judgement: LegacyJudgement) -> str:
    """Steps 1-3 of the module docstring for the workspace's legacy database; returns the kept name."""
    path = ctx.db_path
    for status, count in judgement.statuses.items():
        if status not in STATUSES:
            log_legacy.warning("adopting %s: %d rows have status %s, not one of %s: mapped by what the row "
                               "and the files show", path.name, count, status, ", ".join(STATUSES))
    name = keep_original(ctx, path)
    kept = ctx.path(name)
    temp_root = ctx.path("tmp") / "adopting"
    shutil.rmtree(temp_root, ignore_errors=True)
    temp_root.mkdir(parents=True)
    try:
        source = kept
        if Path(f"{kept}-wal").is_file():
            # Read beside a copy of its -wal, so SQLite's -shm is made there, not in legacy/.
            source = temp_root / "source.sqlite"
            shutil.copyfile(kept, source)
            shutil.copyfile(f"{kept}-wal", f"{source}-wal")
        copy = temp_root / DB_FILENAME
        _backup(source, copy)
        conn = sqlite3.connect(str(copy), isolation_level=None, timeout=30)
        try:
            # A scratch copy, made durable (and put in place) only once adopted: a kill discards it, so
            # its journal may stay in memory, and a large cache keeps the rebuild off the disk.
            for pragma in ("journal_mode = MEMORY", "synchronous = OFF", "cache_size = -131072"):
                conn.execute(f"PRAGMA {pragma}")
            adopt_connection(conn, legacy_kv=judgement.kind == "legacy",
                             record={"adopted_at": utc_now(), "original": name, "legacy_rows": judgement.rows,
                                     "legacy_statuses": judgement.statuses, "legacy_version": judgement.version},
                             kv={KV_LEGACY_ORIGINALS: json.dumps(_originals(ctx))})
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
        for sidecar in ("-wal", "-shm", "-journal"):   # the legacy file's: kept in legacy/ (or empty)
            Path(f"{path}{sidecar}").unlink(missing_ok=True)
        durable_rename([(copy, path)])
    except OSError as exc:
        raise_if_disk_full(exc, ctx.workspace)
        raise
    finally:
        shutil.rmtree(temp_root, ignore_errors=True)
    log_legacy.info("adopted %s (%d rows; original kept as %s)", path, judgement.rows, name)
    return name


def _backup(source: Path, target: Path) -> None:
    """A one-file copy of `source` through SQLite's online backup API (its WAL read as SQLite reads it)."""
    reader = sqlite3.connect(database_uri(source, mode="ro"), uri=True, timeout=30)
    try:
        writer = sqlite3.connect(str(target))
        try:
            reader.backup(writer, pages=-1)
        finally:
            writer.close()
    finally:
        reader.close()


def _originals(ctx: Context) -> list[str]:
    """Every file kept under the workspace's legacy/ (the originals and their -wal), by name."""
    folder = ctx.path(LEGACY_FOLDER)
    return sorted(f"{LEGACY_FOLDER}/{path.name}" for path in folder.iterdir() if path.is_file()) \
        if folder.is_dir() else []


def keep_original_locally(ctx: Context, path: Path) -> str:
    """Keeps the legacy database at `path` (and its -wal) byte for byte as legacy/<name> in the
    workspace (durable); returns the name. A file kept before (same bytes, same name) is reused.
    Restore keeps each legacy state so before it merges two; the store gets them with the rest of
    legacy/ (`keep_original`, or `keep_legacy_originals` before the first checkpoint)."""
    name = legacy_original_name(sha256_file(path))
    kept = ctx.path(name)
    kept.parent.mkdir(parents=True, exist_ok=True)
    if not (kept.is_file() and kept.stat().st_size == path.stat().st_size):
        _copy_durably(path, kept)
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        _copy_durably(wal, Path(f"{kept}-wal"))
    return name


def keep_original(ctx: Context, path: Path) -> str:
    """Keeps the legacy database at `path` as `keep_original_locally` does and tries the store with
    everything legacy/ holds; returns the name."""
    name = keep_original_locally(ctx, path)
    for stored in _originals(ctx):
        if not ctx.mirror.put(stored, ctx.path(stored)):
            log_legacy.warning("the store could not take %s now: it is kept in the workspace and uploaded "
                               "before the first checkpoint replaces the store's %s", stored, DB_FILENAME)
    return name


def _copy_durably(source: Path, target: Path) -> None:
    def copy(handle) -> None:
        with open(source, "rb") as reader:
            shutil.copyfileobj(reader, handle, 1024 * 1024)
    durable_write(target, copy)


def keep_legacy_originals(ctx: Context) -> bool:
    """Whether a checkpoint may replace the store's ky_court.sqlite. Until this database has a
    snapshot in the store (kv store_checkpoint_seq), the originals adoption kept (kv
    legacy_originals) are put in the store first, and a legacy database the store holds as
    ky_court.sqlite is kept as legacy/<name> (workspace and store). False while the store cannot
    take one of them: the store keeps its ky_court.sqlite, and a later checkpoint tries again."""
    db = ctx.db
    if db is None or ctx.legacy_kept or int(db.kv_get(KV_STORE_CHECKPOINT_SEQ, "0") or 0) > 0:
        return True
    originals = json.loads(db.kv_get(KV_LEGACY_ORIGINALS) or "[]")
    try:
        in_store = ctx.store.exists(DB_FILENAME)
    except StoreError as exc:
        log_legacy.warning("cannot ask the store whether its %s is a legacy database (%s): not replaced yet",
                           DB_FILENAME, exc)
        return False
    if in_store:
        snapshot = ctx.path("tmp") / "store-snapshot.sqlite"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        try:
            if not ctx.mirror.fetch(DB_FILENAME, snapshot):
                return False
            if judge_database(snapshot).legacy:
                name = keep_original_locally(ctx, snapshot)
                if name not in originals:
                    originals.append(name)
                    db.kv_set(KV_LEGACY_ORIGINALS, json.dumps(originals))
                log_legacy.info("the store's %s is a legacy database: kept as %s before a checkpoint replaces it",
                                DB_FILENAME, name)
        finally:
            snapshot.unlink(missing_ok=True)
    for name in originals:
        if not ctx.path(name).is_file() and not ctx.mirror.has(name):
            log_legacy.error("%s (a legacy original) is neither in the workspace nor in the store", name)
            return False
        if ctx.path(name).is_file() and not ctx.mirror.put(name, ctx.path(name)):
            return False
    ctx.legacy_kept = True
    return True


# ------------------------------------------------------------------ settling


def settle_adopted_rows(ctx: Context, db: Database, result: AdoptResult) -> None:
    """Every adopted row claiming a PDF: found (workspace or store, by sha256) keeps its status with
    its local_pdf rewritten, else queued again; extracted rows' texts reused or extracted again."""
    store_pdfs = set(ctx.store.list_dir("pdf_by_hash"))
    store_texts = set(ctx.store.list_dir("text"))
    pointers, requeue, reextract, unread, rescan, measure, uploads = [], [], [], [], [], [], []
    distinct: set[str] = set()
    for row in LegacyState(db).adopted_rows_claiming_files():
        sha, size = row["sha256"], row["size_bytes"]
        if not sha:
            sha = _sha_named_by(row["local_pdf"])
        name = pdf_store_name(sha) if sha else None
        local = name is not None and ctx.path(name).is_file()
        if name is None or not (local or name in store_pdfs):
            requeue.append(row["document_id"])
            continue
        if local:
            size = ctx.path(name).stat().st_size
            if name not in store_pdfs:
                uploads.append(name)
        elif size is None:
            size = ctx.store.size(name)
        distinct.add(sha)
        if (row["sha256"], row["size_bytes"], row["local_pdf"]) != (sha, size, name):
            pointers.append((sha, size, name, row["document_id"]))
        text = text_store_name(sha)
        text_local = ctx.path(text).is_file()
        if row["status"] == "extracted" and row["extracted_chars"] == 0:
            unread.append(row["document_id"])     # its text is empty, and extracting again keeps it
        elif text_local or text in store_texts:
            if text_local and text not in store_texts:
                uploads.append(text)
            result.texts_reused += 1
            if row["status"] != "extracted" or row["extracted_chars"] is None or row["pages"] is None:
                # No figures: extraction measures it (a twin's are copied) and keeps the held text.
                measure.append((row["document_id"], row["extracted_chars"], text))
            elif row["likely_scanned"] == 1:
                rescan.append(row["document_id"])   # v1.2 read a stamp or a junk layer: measure its pages
        elif row["status"] == "extracted":
            reextract.append(row["document_id"])
    with db.transaction():
        LegacyState(db).set_pdf_pointers(pointers)
        TextRecords(db).back_to_extract(
            [(document_id, chars if chars is not None else ctx.held_characters(text))
             for document_id, chars, text in measure],
            "adopted from an older version that recorded no figures of it (characters, pages): measured "
            "by extracting it again, its text kept")
        for document_ids, reason in (
                (reextract, "adopted from an older version: its text is in neither the workspace nor the store; "
                            "extracted again"),
                (unread, "adopted from an older version that read no text from it and had no OCR: extracted "
                         "again, so its scanned pages are measured and recognised"),
                (rescan, "adopted from an older version that judged it likely scanned and had no OCR: its pages "
                         "are measured (its text kept), so its scanned pages are recognised")):
            TextRecords(db).back_to_extract([(document_id, None) for document_id in document_ids], reason)
        if requeue:
            DownloadRecords(db).revert_to_discovered(requeue, "adopted from an older version: its PDF is in neither the "
                                             "workspace, the store, nor pdf_backup/; downloaded again")
            LegacyState(db).note_legacy(requeue, "requeued: PDF nowhere")
    for name in sorted(set(uploads)):
        result.uploaded += bool(ctx.mirror.put(name, ctx.path(name)))
    result.pdfs = LegacyState(db).adopted_rows_holding_pdfs()
    result.distinct_pdfs = len(distinct)
    result.texts_missing = len(reextract) + len(unread)
    result.rescanned = len(rescan)
    result.measured = len(measure)
    result.requeued = requeue
    if requeue:
        log_legacy.warning("%d adopted rows claimed a PDF that is nowhere (workspace, store, pdf_backup/): back "
                           "in the download queue: %s%s (all listed in legacy_documents.note)", len(requeue),
                           ", ".join(requeue[:_LEGACY_SHOWN]), ", ..." if len(requeue) > _LEGACY_SHOWN else "")
    if reextract:
        log_legacy.warning("%d adopted extracted rows have no text in the workspace or the store: extracted "
                           "again (%s%s)", len(reextract), ", ".join(reextract[:_LEGACY_SHOWN]),
                           ", ..." if len(reextract) > _LEGACY_SHOWN else "")


def _sha_named_by(local_pdf: Any) -> str | None:
    """The sha256 a legacy `.../pdf_by_hash/<sha256>.pdf` pointer names, if it names one."""
    if not local_pdf:
        return None
    stem = str(local_pdf).replace("\\", "/").rsplit("/", 1)[-1]
    stem = stem[:-4].lower() if stem.lower().endswith(".pdf") else ""
    return stem if len(stem) == 64 and all(c in "0123456789abcdef" for c in stem) else None


# ------------------------------------------------------------------ after discovery


@dataclass
class ReconcileResult:
    """What one check of the adopted ids changed."""
    confirmed: int = 0             # ids discovery listed as documentIDs
    docket_entries: int = 0        # ids found to be docket entries' (linked, never downloaded)
    cases: int = 0                 # ids found to be cases'
    linked: int = 0                # real documents those rows were linked to
    matched: int = 0               # legacy PDFs now known equal (sha256) to a linked document's
    unlisted: int = 0              # after convergence: ids the court lists nowhere (withdrawn)
    held: int = 0                  # rows still waiting for discovery

    @property
    def changed(self) -> bool:
        return bool(self.confirmed or self.docket_entries or self.cases or self.linked or self.matched
                    or self.unlisted)

    def add(self, later: "ReconcileResult") -> "ReconcileResult":
        """This check and a later one of the same session, as one."""
        summed = {name: getattr(self, name) + getattr(later, name) for name in
                  ("confirmed", "docket_entries", "cases", "linked", "matched", "unlisted")}
        return ReconcileResult(**summed, held=later.held)


def reconcile_legacy_ids(ctx: Context) -> ReconcileResult:
    """Checks the adopted ids against what discovery found (see the module docstring); the session
    runs it after discovery and after download (a linked document's PDF may match the legacy one)."""
    db = ctx.open_database()
    result = ReconcileResult(**LegacyState(db).reconcile_legacy_ids())
    if result.changed:
        log_legacy.info("%s", describe_reconcile(result))
    return result


def describe_reconcile(result: ReconcileResult) -> str:
    parts = []
    if result.confirmed:
        parts.append(f"{result.confirmed} confirmed as documents")
    if result.docket_entries or result.cases:
        parts.append(f"{result.docket_entries} were docket entries' and {result.cases} cases' ids (never "
                     "downloaded under those ids)")
    if result.linked:
        parts.append(f"{result.linked} real documents linked to them")
    if result.matched:
        parts.append(f"{result.matched} of their legacy PDFs match a linked document's by sha256")
    if result.unlisted:
        parts.append(f"{result.unlisted} listed nowhere by the court (withdrawn: kept)")
    text = "adopted ids checked: " + (", ".join(parts) or "nothing new")
    return text + (f"; {result.held} still wait for discovery" if result.held else "")
