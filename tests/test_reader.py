"""Every reader of a database (status, show, search, export, report, serve's snapshots) opens it
through c10 open_reader: any copy reads as the original, and nothing is written beside it."""
from __future__ import annotations

import glob
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import (Database, connect, is_sqlite_file, open_reader,
                                                 schema_state)
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c17_snapshots import backup_database


def _files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def _writer_with_commits_in_its_wal(path: Path, rows: int) -> sqlite3.Connection:
    """A writer whose commits are all still in its -wal (no checkpoint yet): a run in progress."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (a)")
    conn.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(rows)])
    return conn


def _reader_temps() -> set[str]:
    return set(glob.glob(str(Path(tempfile.gettempdir()) / "kycourt-reader-*")))


def test_a_closed_archive_is_read_by_every_reader_and_nothing_appears_beside_it(tmp_path):
    path = tmp_path / DB_FILENAME
    db = Database.open(path)
    DiscoveryState(db).upsert_discovered([{"document_id": f"{n:064x}"} for n in range(3)])
    db.close()
    assert _files(tmp_path) == [DB_FILENAME]      # a writer that closes leaves no -wal
    before = path.read_bytes()

    assert is_sqlite_file(path)
    assert schema_state(path)[0] == "current"
    reader = Database.open_readonly(path)
    assert WorkQueues(reader).document_count() == 3
    reader.close()
    conn = connect(path, readonly=True)
    assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 3
    conn.close()
    backup_database(path, tmp_path / "copies" / "snapshot.sqlite")

    assert _files(tmp_path) == ["copies", DB_FILENAME]
    assert path.read_bytes() == before


def test_a_reader_refuses_to_write(tmp_path):
    path = tmp_path / DB_FILENAME
    Database.open(path).close()
    conn = open_reader(path)
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("INSERT INTO kv VALUES ('x', 'y')")
    conn.close()


def test_a_reader_beside_a_live_writer_reads_its_commits_through_the_wal(tmp_path):
    path = tmp_path / "live.sqlite"
    writer = _writer_with_commits_in_its_wal(path, 5)
    try:
        assert {"live.sqlite-wal", "live.sqlite-shm"} <= set(_files(tmp_path))
        reader = open_reader(path)
        assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 5
        writer.execute("INSERT INTO t VALUES (99)")
        assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 6
        reader.close()
    finally:
        writer.close()


@pytest.mark.parametrize("sidecars", [("-wal", "-shm"), ("-wal",)], ids=["wal and shm", "wal alone"])
def test_a_copy_taken_while_a_writer_ran_reads_every_commit_and_gets_nothing_beside_it(tmp_path, sidecars):
    source, copy = tmp_path / "source", tmp_path / "copy"
    source.mkdir()
    copy.mkdir()
    writer = _writer_with_commits_in_its_wal(source / "x.sqlite", 7)
    try:
        for suffix in ("",) + sidecars:
            shutil.copyfile(source / f"x.sqlite{suffix}", copy / f"x.sqlite{suffix}")
    finally:
        writer.close()
    # Beside a -wal and a -shm a reader reads as any reader of a live database: through SQLite's
    # shared-memory index in the -shm, the one file it may touch.
    before = {name: (copy / name).read_bytes() for name in _files(copy) if not name.endswith("-shm")}
    names = _files(copy)
    temps = _reader_temps()

    conn = open_reader(copy / "x.sqlite")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 7
    conn.close()

    assert _files(copy) == names
    assert {name: (copy / name).read_bytes() for name in names if not name.endswith("-shm")} == before
    assert _reader_temps() == temps     # a private copy, if one was made, went with its connection


def test_a_file_that_is_missing_or_not_a_database_is_said_so(tmp_path):
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        open_reader(tmp_path / "missing.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        open_reader(junk)
    assert _files(tmp_path) == ["junk.sqlite"]
