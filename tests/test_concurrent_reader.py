"""A user reading the database while a run writes it never harms the run (SQLite's promise).

On Linux, closing any descriptor of a file drops every POSIX lock the process
holds on it. A plain open()/close() of the live database while another
connection of the same process holds a lock let a concurrent `sqlite3`
believe it was alone: it checkpointed and deleted the -wal and -shm files
under the writer, the writer's later commits were lost, and runs died with
"disk I/O error" or left a malformed database.
"""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import REPO_ROOT, torture

from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import Database, is_sqlite_file
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c17_snapshots import StoreState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c22_page_packs import PagePacks
from notebook_builder.cells.c40_restore import workspace_has_database
from notebook_builder.cells.c97_report import _report_open_readonly
from notebook_builder.simcourt import SimCourt

# A user's `sqlite3` in another process: open, count, close. Closing the last connection to a WAL
# database checkpoints it and deletes the -wal and -shm files; SQLite decides it is the last one when
# it can lock the database file exclusively, which the locks of this process's connections prevent.
_READ_AND_CLOSE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=10)
conn.execute("SELECT count(*) FROM documents").fetchall()
conn.close()
"""


def another_process_reads(path: Path) -> None:
    subprocess.run([sys.executable, "-c", _READ_AND_CLOSE, str(path)], check=True, timeout=60)


def _open_and_close(path: Path) -> None:
    Database.open(path).close()


def _report_reader(path: Path) -> None:
    db = _report_open_readonly(path)
    assert db is not None
    db.close()


@pytest.mark.parametrize("look", [
    _open_and_close,
    is_sqlite_file,
    lambda path: workspace_has_database(path.parent),
    _report_reader,
], ids=["Database.open", "is_sqlite_file", "workspace_has_database", "report_open_readonly"])
def test_looking_at_the_live_database_keeps_this_process_locks(tmp_path, look):
    path = tmp_path / DB_FILENAME
    wal = tmp_path / (DB_FILENAME + "-wal")
    db = Database.open(path)    # a stage's connection, open for the whole run
    try:
        DiscoveryState(db).upsert_discovered([{"document_id": "a" * 64}])
        another_process_reads(path)
        assert wal.exists()
        look(path)
        # A plain open()/close() of the file here drops this process's locks: the reader's close
        # would then delete the -wal under the open connection, and later commits would be lost.
        another_process_reads(path)
        assert wal.exists()
        DiscoveryState(db).upsert_discovered([{"document_id": "b" * 64}])
        assert WorkQueues(db).document_count() == 2
    finally:
        db.close()
    assert WorkQueues(Database.open(path)).document_count() == 2


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / DB_FILENAME
    path.write_bytes(b"<html>not a database</html>" * 10)
    before = path.read_bytes()
    assert not is_sqlite_file(path)
    with pytest.raises(Exception, match="not an SQLite database"):
        Database.open(path)
    assert path.read_bytes() == before
    assert not is_sqlite_file(tmp_path / "missing.sqlite")


def _run(env, root: Path, label: str, *, interrupt_when=None) -> int:
    with open(root / f"{label}.log", "wb") as log:
        child = subprocess.Popen(torture.pipeline_command(), env=env, cwd=REPO_ROOT, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if interrupt_when is not None:
                deadline = time.monotonic() + 120
                while not interrupt_when() and child.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)
            return child.wait(timeout=torture.RUN_TIMEOUT)
        finally:
            if child.poll() is None:
                torture.kill_group(child)


def _downloaded(db_path: Path) -> int:
    try:
        conn = sqlite3.connect(str(db_path), timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM documents WHERE sha256 IS NOT NULL").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def verdicts(root: Path) -> dict[str, tuple]:
    """Each document's verdicts (torture's compared columns) and attempts: a clean stop costs none."""
    columns = torture.COMPARED_COLUMNS + ("attempts", "extract_attempts")
    return {doc_id: tuple(row[c] for c in columns) for doc_id, row in torture.document_rows(root).items()}


@pytest.mark.slow
def test_a_reader_every_100ms_through_interrupted_runs_changes_nothing(tmp_path):
    """The reader polls through a run that is interrupted mid-download, then a run to the end: the
    end state is the undisturbed run's, and the court served each document exactly once."""
    docs, seed = 150, 21
    clean_root, read_root = tmp_path / "clean", tmp_path / "read"
    with SimCourt(docs, seed=seed, faults=False, first_year=2020, last_year=2026) as clean_court, \
            SimCourt(docs, seed=seed, faults=False, first_year=2020, last_year=2026) as court:
        assert _run(torture.pipeline_env(clean_court, clean_root), tmp_path, "clean") == 0
        env = torture.pipeline_env(court, read_root)
        with torture.Reader(read_root / "workspace" / DB_FILENAME) as reader:
            first = _run(env, tmp_path, "interrupted",
                         interrupt_when=lambda: _downloaded(read_root / "workspace" / DB_FILENAME) >= 40)
            second = _run(env, tmp_path, "resumed")
        served = [court.requests_for(doc.document_id) for doc in court.documents]
    assert first == 130, (tmp_path / "interrupted.log").read_text()[-3000:]
    assert second == 0, (tmp_path / "resumed.log").read_text()[-3000:]
    assert reader.reads >= 10 and reader.errors == []
    assert "disk I/O error" not in (tmp_path / "interrupted.log").read_text()
    assert verdicts(read_root) == verdicts(clean_root)
    assert max(served) == 1, f"{sum(1 for n in served if n > 1)} documents fetched more than once"
    assert sum(served) == docs
    assert torture.read_status(read_root / "workspace")["verify"] == "PASS"


def test_threads_read_and_write_on_connections_of_their_own(tmp_path):
    """The store uploader and checkpointer write, while the
    main thread reads. On one shared connection a read still stepping made another thread's write
    fail ("database is locked", SQLITE_BUSY_SNAPSHOT, or "no more rows available"); each thread now
    has a connection of its own, and a worker's closes as the worker ends."""
    path = tmp_path / DB_FILENAME
    db = Database.open(path)
    try:
        DiscoveryState(db).upsert_discovered([{"document_id": f"{n:064x}"} for n in range(500)])
        errors: list[BaseException] = []
        seen: list[int] = []

        def writer(number: int) -> None:
            try:
                seen.append(id(db.conn))
                for count in range(150):
                    StoreState(db).store_pending_add(f"pdf_by_hash/{number}-{count}.pdf", "/x.pdf", "behind the crawl")
                    other = sqlite3.connect(str(path), isolation_level=None, timeout=5)
                    other.execute("INSERT INTO kv(key, value) VALUES ('elsewhere', ?) "
                                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (count,))
                    other.close()                            # a commit from outside, too
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(number,)) for number in range(2)]
        for thread in threads:
            thread.start()
        rows = 0
        while any(thread.is_alive() for thread in threads):
            for _ in db.conn.execute("SELECT document_id FROM documents"):   # reads step meanwhile
                rows += 1
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(set(seen + [id(db.conn)])) == 3           # one connection per thread
        assert len(StoreState(db).store_pending()) == 300 and rows >= 500
        assert db._connections == [db.conn]                  # the workers' closed as they ended
    finally:
        db.close()


# Another process's checkpoints of the same workspace: what `kycourt-pipeline verify` in a second
# terminal does while a run's checkpointer snapshots the database.
_CHECKPOINT_LOOP = """
import sys
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c39_checkpoint import push_checkpoint
ctx = open_context(load_config(env={"KY_WORKSPACE": sys.argv[1], "KY_STORE": sys.argv[2], "KY_PROGRESS": "0"}))
ctx.open_database()
for _ in range(int(sys.argv[3])):
    push_checkpoint(ctx)
ctx.close()
"""


def test_checkpoints_of_two_processes_in_one_workspace_never_collide(make_context):
    ctx = make_context()
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": f"{number:064x}"} for number in range(2000)])
    other = subprocess.Popen([sys.executable, "-c", _CHECKPOINT_LOOP, str(ctx.workspace), str(ctx.cfg.STORE), "20"],
                             cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    from notebook_builder.cells.c39_checkpoint import push_checkpoint
    pushed = 0
    while other.poll() is None or pushed < 10:
        assert push_checkpoint(ctx)["uploaded"]
        pushed += 1
    assert other.wait(60) == 0, other.stderr.read()[-2000:]
    snapshot = ctx.workspace.parent / "assembled.sqlite"
    PagePacks(LocalStore(ctx.cfg.STORE), DB_FILENAME, ctx.workspace.parent / "assembled").restore(snapshot)
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 2000
    finally:
        conn.close()
