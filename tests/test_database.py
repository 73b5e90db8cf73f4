"""The database: schema, migrations, queues defined once, consistent checkpoints."""
import shutil
import sqlite3
import threading

import pytest

from notebook_builder.cells import c10_database
from notebook_builder.cells.c00_config import IntegrityError, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import RELEASED_ERROR, WITHHELD_ERROR, DiscoveryState
from notebook_builder.cells.c17_snapshots import checkpoint, snapshot_sequence

CFG = load_config({})


def _doc(i, **extra):
    return {"document_id": f"{i:064x}", "case_number": f"2019-CA-{i:04d}", "court": "CA", **extra}


@pytest.fixture
def db(tmp_path):
    database = Database.open(tmp_path / "ky_court.sqlite")
    yield database
    database.close()


def test_schema_is_created_idempotently_with_version_wal_and_busy_timeout(tmp_path):
    path = tmp_path / "ky_court.sqlite"
    first = Database.open(path)
    DiscoveryState(first).upsert_discovered([_doc(1)])
    first.close()
    again = Database.open(path)  # re-open: migrations do not run twice, data kept
    assert again.kv_get("schema_version") == str(c10_database.SCHEMA_VERSION)
    assert WorkQueues(again).document_count() == 1
    assert again.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert again.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    columns = {row[1] for row in again.conn.execute("PRAGMA table_info(documents)")}
    contract = {"document_id", "case_number", "court", "case_title", "docket_entry_id", "description",
                "filed_date", "status", "attempts", "http_status", "last_error", "sha256", "size_bytes",
                "local_pdf", "pages", "extracted_chars", "likely_scanned", "extract_attempts",
                "discovered_at", "updated_at"}
    assert contract <= columns
    tables = {row[0] for row in again.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"documents", "discovery_runs", "extraction_log", "kv"} <= tables
    again.close()


def test_forward_migration_runs_once_in_order(tmp_path, monkeypatch):
    path = tmp_path / "ky_court.sqlite"
    Database.open(path).close()
    following = c10_database.SCHEMA_VERSION + 1
    monkeypatch.setitem(c10_database.MIGRATIONS, following, "ALTER TABLE documents ADD COLUMN ocr_text TEXT;")
    monkeypatch.setattr(c10_database, "SCHEMA_VERSION", following)
    db = Database.open(path)
    assert db.kv_get("schema_version") == str(following)
    assert "ocr_text" in {row[1] for row in db.conn.execute("PRAGMA table_info(documents)")}
    db.close()
    Database.open(path).close()  # a second ALTER would raise "duplicate column"


def test_a_version_1_database_gains_downloaded_at_and_keeps_its_rows(tmp_path, monkeypatch):
    path = tmp_path / "ky_court.sqlite"
    with monkeypatch.context() as patched:        # a database made by the code before version 2
        patched.setattr(c10_database, "MIGRATIONS", {1: c10_database.MIGRATIONS[1]})
        patched.setattr(c10_database, "SCHEMA_VERSION", 1)
        old = Database.open(path)
        DiscoveryState(old).upsert_discovered([_doc(0)])
        old.close()
    db = Database.open(path)
    assert db.kv_get("schema_version") == str(c10_database.SCHEMA_VERSION)
    row = db.get_document(_doc(0)["document_id"])
    assert row["status"] == "discovered" and row["downloaded_at"] is None
    assert DownloadRecords(db).mark_downloaded(_doc(0)["document_id"], sha256="a" * 64, size_bytes=1, local_pdf="x")
    assert db.get_document(_doc(0)["document_id"])["downloaded_at"] is not None
    db.close()


def test_newer_schema_than_the_code_is_refused(tmp_path):
    db = Database.open(tmp_path / "x.sqlite")
    db.kv_set("schema_version", "99")
    db.close()
    with pytest.raises(IntegrityError, match="newer"):
        Database.open(tmp_path / "x.sqlite")


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "ky_court.sqlite"
    path.write_bytes(b"this is a tarball, not a database" * 10)
    with pytest.raises(IntegrityError, match="not an SQLite database"):
        Database.open(path)
    assert path.read_bytes().startswith(b"this is a tarball")


def test_rediscovery_refreshes_metadata_but_never_moves_status_back(db):
    assert DiscoveryState(db).upsert_discovered([_doc(1, case_title="OLD"), _doc(2)]) == 2
    DownloadRecords(db).mark_downloaded(_doc(1)["document_id"], sha256="a" * 64, size_bytes=10, local_pdf="pdf_by_hash/x.pdf")
    assert DiscoveryState(db).upsert_discovered([_doc(1, case_title="NEW"), _doc(2), _doc(3)]) == 1
    row = db.get_document(_doc(1)["document_id"])
    assert row["status"] == "downloaded" and row["case_title"] == "NEW" and row["sha256"] == "a" * 64
    assert WorkQueues(db).status_counts() == {"discovered": 2, "downloaded": 1, "extracted": 0, "failed": 0}


def test_queues_exclude_permanent_failures_and_exhausted_attempts(db):
    DiscoveryState(db).upsert_discovered([_doc(i) for i in range(6)])
    ids = [_doc(i)["document_id"] for i in range(6)]
    DownloadRecords(db).mark_download_failed(ids[0], http_status=404, error="withdrawn")      # permanent
    DownloadRecords(db).mark_download_failed(ids[1], http_status=503, error="busy")           # transient, retry
    for _ in range(CFG.MAX_ATTEMPTS):
        DownloadRecords(db).record_download_attempt(ids[2])
    DownloadRecords(db).mark_download_failed(ids[2], http_status=503, error="busy")           # exhausted
    DownloadRecords(db).mark_downloaded(ids[3], sha256="b" * 64, size_bytes=1, local_pdf="pdf_by_hash/b.pdf")
    queued = [row["document_id"] for row in WorkQueues(db).download_queue(CFG, 100)]
    assert queued == [ids[1], ids[4], ids[5]]
    assert WorkQueues(db).download_queue_size(CFG) == 3
    assert [r["document_id"] for r in WorkQueues(db).extract_queue(CFG, 10)] == [ids[3]]
    for _ in range(CFG.MAX_EXTRACT_ATTEMPTS):
        TextRecords(db).mark_extract_failed(ids[3], "cannot parse")
    assert WorkQueues(db).extract_queue_size(CFG) == 0
    assert [r["document_id"] for r in WorkQueues(db).extraction_failures(CFG)] == [ids[3]]
    assert WorkQueues(db).forgive_failures() == 3  # RETRY_HARD puts all three failures back
    assert WorkQueues(db).download_queue_size(CFG) == 5


def test_keyset_paging_of_the_queue(db):
    DiscoveryState(db).upsert_discovered([_doc(i) for i in range(7)])
    first = WorkQueues(db).download_queue(CFG, 3)
    second = WorkQueues(db).download_queue(CFG, 3, after=first[-1]["queue_key"])
    assert len(first) == 3 and len(second) == 3
    assert not {r["document_id"] for r in first} & {r["document_id"] for r in second}


def test_a_group_of_extractions_is_logged_and_marked_and_twins_are_found_by_hash(db):
    DiscoveryState(db).upsert_discovered([_doc(i) for i in range(4)])
    ids = [_doc(i)["document_id"] for i in range(4)]
    for number, document_id in enumerate(ids):
        DownloadRecords(db).mark_downloaded(document_id, sha256=f"{number % 2:064x}", size_bytes=1, local_pdf="x")
    db.conn.execute("UPDATE documents SET status = 'failed' WHERE document_id = ?", (ids[3],))

    TextRecords(db).record_extracted([
        {"document_id": document_id, "sha256": f"{0:064x}", "attempt": 1, "engine": "pypdf", "pages": 3,
         "chars": 45, "seconds": 0.5, "likely_scanned": True} for document_id in (ids[0], ids[3])])

    first, untouched = db.get_document(ids[0]), db.get_document(ids[3])
    assert (first["status"], first["pages"], first["extracted_chars"], first["likely_scanned"],
            first["extract_attempts"]) == ("extracted", 3, 45, 1, 1)
    assert (untouched["status"], untouched["pages"]) == ("failed", None)   # only `downloaded` rows move
    logged = db.conn.execute("SELECT document_id, outcome, pages FROM extraction_log ORDER BY log_id").fetchall()
    assert [tuple(row) for row in logged] == [(ids[0], "ok", 3), (ids[3], "ok", 3)]
    twins = TextRecords(db).extracted_twins([f"{0:064x}", f"{1:064x}", f"{0:064x}"])
    assert list(twins) == [f"{0:064x}"] and twins[f"{0:064x}"]["document_id"] == ids[0]
    assert TextRecords(db).extracted_twin(f"{1:064x}") is None


def _writer(path, stop, committed, ready):
    conn = c10_database.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER PRIMARY KEY)")
    ready.set()
    n = 0
    while not stop.is_set():
        n += 1
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO counter(n) VALUES (?)", (n,))
        conn.execute("COMMIT")
        committed.append(n)
    conn.close()


def test_checkpoint_under_a_busy_writer_is_a_consistent_committed_prefix(tmp_path):
    path = tmp_path / "ky_court.sqlite"
    Database.open(path).close()
    stop, ready, committed = threading.Event(), threading.Event(), []
    writer = threading.Thread(target=_writer, args=(path, stop, committed, ready))
    writer.start()
    ready.wait(10)
    snapshots = []
    try:
        for i in range(25):
            before = len(committed)
            info = checkpoint(path, tmp_path / f"snap{i}.sqlite")
            after = len(committed)
            snapshots.append((tmp_path / f"snap{i}.sqlite", before, after, info))
    finally:
        stop.set()
        writer.join()
    in_flight = []
    for snap, before, after, info in snapshots:
        conn = sqlite3.connect(snap)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = [r[0] for r in conn.execute("SELECT n FROM counter ORDER BY n")]
        conn.close()
        # a prefix of the committed writes, with nothing missing inside it
        assert rows == list(range(1, len(rows) + 1))
        # the writer appends to `committed` after its COMMIT: one row may be in the snapshot already
        assert before <= len(rows) <= after + 1
        in_flight.append(after - before)
        assert snapshot_sequence(snap)[0] == info["checkpoint_seq"]
    assert [s[3]["checkpoint_seq"] for s in snapshots] == list(range(1, 26))
    assert len(committed) > 100  # the writer really was busy
    print(f"\ncheckpoint: {len(snapshots)} snapshots, {len(committed)} writes, "
          f"writes during one checkpoint: min {min(in_flight)} max {max(in_flight)}")


def test_plain_copy_of_the_main_file_misses_wal_committed_rows(tmp_path):
    """Why checkpoint() uses the backup API: the WAL holds committed rows the main file lacks."""
    path = tmp_path / "ky_court.sqlite"
    db = Database.open(path)
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep commits in the WAL, as a busy run does
    DiscoveryState(db).upsert_discovered([_doc(i) for i in range(500)])
    shutil.copyfile(path, tmp_path / "copy.sqlite")
    checkpoint(path, tmp_path / "snap.sqlite")
    copied = sqlite3.connect(tmp_path / "copy.sqlite")
    try:
        copied_rows = copied.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    except sqlite3.DatabaseError:
        copied_rows = 0  # the copy does not even have the table yet
    copied.close()
    snap = sqlite3.connect(tmp_path / "snap.sqlite")
    assert snap.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 500
    snap.close()
    assert copied_rows < 500
    db.close()


def test_snapshot_is_one_self_contained_file(tmp_path):
    path = tmp_path / "ky_court.sqlite"
    db = Database.open(path)
    DiscoveryState(db).upsert_discovered([_doc(1)])
    checkpoint(path, tmp_path / "out" / "snap.sqlite")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["snap.sqlite"]
    conn = sqlite3.connect(tmp_path / "out" / "snap.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    db.close()


def test_reverted_document_is_back_in_the_download_queue_with_fresh_attempts(db):
    DiscoveryState(db).upsert_discovered([_doc(1)])
    doc_id = _doc(1)["document_id"]
    for _ in range(CFG.MAX_ATTEMPTS):
        DownloadRecords(db).record_download_attempt(doc_id)
    DownloadRecords(db).mark_downloaded(doc_id, sha256="c" * 64, size_bytes=1, local_pdf="pdf_by_hash/c.pdf")
    DownloadRecords(db).revert_to_discovered([doc_id], "PDF gone")
    assert [r["document_id"] for r in WorkQueues(db).download_queue(CFG, 10)] == [doc_id]


def test_attempts_spent_by_kills_make_a_failure_that_retry_hard_forgives(db):
    DiscoveryState(db).upsert_discovered([_doc(1), _doc(2)])
    killed = _doc(1)["document_id"]
    for _ in range(CFG.MAX_ATTEMPTS):  # every attempt recorded, no outcome: each run was killed
        DownloadRecords(db).record_download_attempt(killed)
    assert WorkQueues(db).download_queue_size(CFG) == 1
    assert WorkQueues(db).fail_spent_attempts(CFG) == 1
    row = db.get_document(killed)
    assert row["status"] == "failed" and "interrupted" in row["last_error"]
    assert WorkQueues(db).forgive_failures() == 1
    assert WorkQueues(db).download_queue_size(CFG) == 2


def test_a_withheld_document_is_a_permanent_failure_and_a_release_queues_it_again(db):
    cfg = load_config(env={})
    row = {"document_id": "a" * 64, "case_number": "2024-CA-0001", "document_available": 0}
    assert DiscoveryState(db).upsert_discovered([row]) == 1
    withheld = db.get_document("a" * 64)
    assert (withheld["status"], withheld["http_status"], withheld["document_available"]) == ("failed", 404, 0)
    assert withheld["last_error"] == WITHHELD_ERROR and WorkQueues(db).download_queue_size(cfg) == 0
    assert WorkQueues(db).forgive_failures() == 0 and WorkQueues(db).download_queue_size(cfg) == 0     # RETRY_HARD never asks for it
    DiscoveryState(db).upsert_discovered([{**row, "document_available": 0}])                     # still withheld: unchanged
    assert db.get_document("a" * 64)["updated_at"] == withheld["updated_at"]
    db.conn.execute("UPDATE documents SET attempts = 4 WHERE document_id = ?", ("a" * 64,))
    DiscoveryState(db).upsert_discovered([{**row, "document_available": 1}])                     # the court released it
    released = db.get_document("a" * 64)
    assert (released["status"], released["attempts"], released["http_status"], released["document_available"]) \
        == ("discovered", 0, None, 1)
    assert released["last_error"] == RELEASED_ERROR and WorkQueues(db).download_queue_size(cfg) == 1
    # Withheld after it was downloaded: the bytes stay, the court's word is recorded.
    DownloadRecords(db).mark_downloaded("a" * 64, sha256="b" * 64, size_bytes=10, local_pdf=f"pdf_by_hash/{'b' * 64}.pdf")
    DiscoveryState(db).upsert_discovered([{**row, "document_available": 0}])
    kept = db.get_document("a" * 64)
    assert (kept["status"], kept["document_available"]) == ("downloaded", 0)
    # A document never requested while withheld, even when a recovery puts it back to discovered.
    DownloadRecords(db).revert_to_discovered(["a" * 64], "test")
    assert WorkQueues(db).download_queue_size(cfg) == 0


def test_entries_to_ask_again_are_the_empty_and_withheld_ones_not_asked_in_this_sweep(db):
    entries = [{"docket_entry_id": f"{n:064x}", "case_id": "c" * 64, "has_documents": 1, "files_missing": missing,
                "files_asked_sweep": 1} for n, missing in enumerate(["empty", "withheld", None])]
    DiscoveryState(db).record_case_walk(None, None, entries, [])
    assert [row["files_missing"] for row in DiscoveryState(db).entries_to_ask_again(2)] == ["empty", "withheld"]
    assert DiscoveryState(db).entries_to_ask_again(1) == []
    assert DiscoveryState(db).entries_missing_files() == {"empty": 1, "withheld": 1}


def test_a_forked_worker_never_waits_on_a_lock_a_thread_held_at_the_fork(tmp_path):
    """A worker forked while another thread held the connection list's lock drops that thread's
    connection slot at once: it must neither wait for the lock (no thread there releases it) nor
    close a connection of the process it was forked from."""
    import os
    import sqlite3
    import time as _time

    from notebook_builder.cells.c10_database import _ThreadConnection
    db = Database.open(tmp_path / "x.sqlite")
    slot = [_ThreadConnection(db, sqlite3.connect(tmp_path / "x.sqlite"))]     # another thread's, say
    with db._connections_lock:                           # held by that thread at the instant of the fork
        child = os.fork()
        if child == 0:                                  # the worker: the other thread's slot goes now
            slot.clear()
            os._exit(0)
        deadline = _time.monotonic() + 10
        while _time.monotonic() < deadline:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                break
            _time.sleep(0.01)
        else:
            os.kill(child, 9)
            os.waitpid(child, 0)
            raise AssertionError("the forked worker waited on a lock no thread of its own held")
    assert os.waitstatus_to_exitcode(status) == 0
    assert db.conn.execute("SELECT COUNT(*) FROM kv").fetchone()[0] >= 1     # the parent's is untouched
    db.close()
