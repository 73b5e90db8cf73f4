"""Snapshots of the state database, and what the store holds of it.

Guarantees:
- `checkpoint()` makes a consistent one-file snapshot with SQLite's online backup API from a
  connection of its own, in one step (a stepped backup livelocks under a busy writer), checked
  with quick_check and renamed into place durably; it bumps `checkpoint_seq` first, so restore
  picks the newest snapshot by the number inside it.
- `kv store_checkpoint_seq` (the newest snapshot the store holds) never moves backwards; the
  download journal (`journal_rows`) lists what was downloaded since that snapshot.
- `snapshot_problems` and `snapshot_sequence` read a snapshot file without ever writing to it.
- `StoreState` keeps the names not yet mirrored to the store (`store_pending`).
"""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from .c00_config import IntegrityError, utc_now
from .c05_durable import durable_rename
from .c10_database import (KV_CHECKPOINT_AT, KV_CHECKPOINT_SEQ, KV_STORE_CHECKPOINT_SEQ, Tables, connect, database_uri,
                           is_sqlite_file, open_reader)

# Notes the store's newest snapshot; the WHERE keeps the note from ever moving backwards.
_STORE_CHECKPOINT_SQL = (
    "INSERT INTO kv(key, value) VALUES (:key, :seq) ON CONFLICT(key) DO UPDATE "
    "SET value = excluded.value WHERE CAST(kv.value AS INTEGER) < CAST(excluded.value AS INTEGER)")


def _temp_beside(path: Path) -> Path:
    """A fresh temp name beside `path` (its folder made), for a copy renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp_path = path.with_name(path.name + ".tmp")
    temp_path.unlink(missing_ok=True)
    return temp_path


def _backup_into(source: sqlite3.Connection, temp_path: Path, *, check: bool) -> None:
    """The online backup of `source` into a one-file database (rollback journal) at `temp_path`, in one
    step (a stepped backup livelocks under a busy writer); `check`: quick_check it or raise."""
    target = sqlite3.connect(str(temp_path))
    try:
        source.backup(target, pages=-1)
        target.execute("PRAGMA journal_mode = DELETE")
        if check:
            problems = target.execute("PRAGMA quick_check").fetchall()
            if [p[0] for p in problems] != ["ok"]:
                raise IntegrityError(f"snapshot failed quick_check: {problems[:3]}")
    finally:
        target.close()


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
    temp_path = _temp_beside(snapshot_path)
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
        _backup_into(source, temp_path, check=True)
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


def backup_database(source_path: str | os.PathLike, target_path: str | os.PathLike) -> Path:
    """A consistent one-file copy of a database (online backup API in one step, rollback journal),
    written under a temp name and renamed; the source's readers and writer are not disturbed, and
    nothing is written beside the source (c10 open_reader: a read-only copy is copied too)."""
    target_path = Path(target_path)
    temp_path = _temp_beside(target_path)
    source = open_reader(source_path)
    try:
        _backup_into(source, temp_path, check=False)
    finally:
        source.close()
    os.replace(temp_path, target_path)   # a copy to mirror or read: its durable source stays
    return target_path


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


class StoreState(Tables):
    """What the store holds of the state: its newest snapshot, and the names not yet mirrored."""

    def record_store_checkpoint(self, sequence: int) -> None:
        """Notes that the store holds snapshot `sequence` (as `record_store_checkpoint`; never back)."""
        with self.transaction():
            self.conn.execute(_STORE_CHECKPOINT_SQL, {"key": KV_STORE_CHECKPOINT_SEQ, "seq": str(sequence)})

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
