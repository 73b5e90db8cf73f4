"""Bad input everywhere gives a clear error and destroys nothing.

- A resume archive in the store that is truncated, corrupt, or hostile (path
  traversal, absolute path, a symlink leading out): refused with its reason;
  files outside stay untouched, the store's archives stay where they were.
- A workspace database that is not SQLite: `kycourt-pipeline run` names it in
  one error and leaves it as it was.
- A store that refuses every write (read-only): the run says why, keeps its
  work locally, and a later run with a writable store levels it.
"""
from __future__ import annotations

import errno
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support import (REPO_ROOT, RecordingClock, expected_verdicts_hold, quick_court, run_until_done, store_is_level,
                     torture)

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c95_run import run_pipeline

ARCHIVE = "ky_court-WIP-resume-20261201T120000Z-3.tar.gz"
SECRET = b"the operator's file outside the workspace\n"


def run_cli(tmp_path: Path, *extra_env: tuple[str, str]) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("KY_")}
    env.update({"KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
                "KY_DRY": "1", "KY_PACING": "0", "KY_PROGRESS": "0", "PYTHONPATH": str(REPO_ROOT)})
    env.update(dict(extra_env))
    return subprocess.run([sys.executable, "-m", "notebook_builder", "run"], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def database_bytes(tmp_path: Path, sequence: int) -> bytes:
    path = tmp_path / f"made-{sequence}" / "ky_court.sqlite"
    db = Database.open(path)
    db.kv_set("checkpoint_seq", sequence)
    db.conn.execute("PRAGMA journal_mode = DELETE")
    db.close()
    return path.read_bytes()


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def symlink(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, None


def bad_archive(kind: str, tmp_path: Path) -> bytes:
    database = database_bytes(tmp_path, 3)
    status = json.dumps({"phase": "verify"}).encode()
    good = tar_gz([regular("ky_court.sqlite", database), regular("status.json", status)])
    outside = tmp_path / "outside.txt"
    if kind == "truncated":
        return good[:len(good) // 2]
    if kind == "corrupt":
        middle = len(good) // 2
        return good[:middle] + bytes(64) + good[middle + 64:]
    if kind == "not_gzip":
        return b"<html>Drive says: quota exceeded</html>" * 20
    if kind == "gzip_not_tar":
        return gzip.compress(b"plain text, no tar inside" * 100)
    if kind == "traversal":
        return tar_gz([regular("ky_court.sqlite", database), regular("../../outside.txt", b"pwned")])
    if kind == "absolute":
        return tar_gz([regular("ky_court.sqlite", database), regular(str(outside), b"pwned")])
    if kind == "symlink_out":
        return tar_gz([symlink("status.json", "../../outside.txt"), regular("ky_court.sqlite", database)])
    if kind == "symlink_database":
        return tar_gz([symlink("ky_court.sqlite", str(outside))])
    raise ValueError(kind)


KINDS = ["truncated", "corrupt", "not_gzip", "gzip_not_tar", "traversal", "absolute", "symlink_out",
         "symlink_database"]


def plant(tmp_path: Path, kind: str) -> bytes:
    (tmp_path / "outside.txt").write_bytes(SECRET)
    data = bad_archive(kind, tmp_path)
    store = tmp_path / "store"
    store.mkdir(parents=True, exist_ok=True)
    (store / ARCHIVE).write_bytes(data)
    return data


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_holding_only_a_bad_archive_is_refused_and_nothing_is_touched(tmp_path, kind):
    archive = plant(tmp_path, kind)
    done = run_cli(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and ARCHIVE in errors[0] and "none of it is usable" in errors[0], done.stdout
    assert "nothing was changed" in errors[0]
    assert (tmp_path / "outside.txt").read_bytes() == SECRET
    assert (tmp_path / "store" / ARCHIVE).read_bytes() == archive
    assert sorted(path.name for path in (tmp_path / "store").iterdir()) == [ARCHIVE]
    assert not (tmp_path / "workspace" / "ky_court.sqlite").exists()
    assert not any(tmp_path.glob("pwned*")) and not (tmp_path / "workspace" / "status.json").is_symlink()


@pytest.mark.parametrize("kind", ["truncated", "traversal", "symlink_out"])
def test_a_bad_archive_beside_a_good_checkpoint_is_skipped_with_its_reason(tmp_path, kind):
    archive = plant(tmp_path, kind)
    (tmp_path / "store" / "ky_court.sqlite").write_bytes(database_bytes(tmp_path, 2))
    done = run_cli(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"restore rejects {ARCHIVE}" in done.stderr
    assert "restored ky_court.sqlite (checkpoint 2" in done.stderr
    assert (tmp_path / "outside.txt").read_bytes() == SECRET
    assert (tmp_path / "store" / ARCHIVE).read_bytes() == archive


@pytest.mark.parametrize("content", [b"this is not sqlite, just the operator's notes\n" * 10,
                                     b"SQLite format 2\x00" + bytes(4080)], ids=["text", "bad_header"])
def test_a_workspace_database_that_is_not_sqlite_is_named_in_one_error_and_left_intact(tmp_path, content):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "ky_court.sqlite").write_bytes(content)
    done = run_cli(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stdout
    assert str(workspace / "ky_court.sqlite") in errors[0] and "not an SQLite database" in errors[0]
    assert (workspace / "ky_court.sqlite").read_bytes() == content
    assert not (tmp_path / "workspace-pre-restore").exists()
    assert not (tmp_path / "store" / "ky_court.sqlite").exists()


def test_a_workspace_database_that_is_not_sqlite_is_moved_aside_when_the_store_can_restore(tmp_path):
    content = b"garbled by a crash\n" * 10
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "ky_court.sqlite").write_bytes(database_bytes(tmp_path, 4))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "ky_court.sqlite").write_bytes(content)
    done = run_cli(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "workspace-pre-restore" / "ky_court.sqlite").read_bytes() == content


class ReadOnlyStore(LocalStore):
    """A store directory the runtime may read but not write (a shared Drive folder, a read-only mount)."""

    def _write_temp(self, target, write, *, durable):
        raise self._error(target, PermissionError(errno.EACCES, "Permission denied"))


@pytest.mark.slow
def test_a_read_only_store_fails_verify_with_the_reason_and_a_writable_one_is_levelled_later(tmp_path):
    earlier = tmp_path / "store" / "ky_court-WIP-resume-20261101T000000Z-1.tar.gz"
    with quick_court(80, seed=9) as court:     # the torture's court, its faults answered at once
        cfg = load_config(torture.pipeline_env(court, tmp_path))
        earlier.parent.mkdir(parents=True)
        earlier.write_bytes(bad_archive("truncated", tmp_path))   # unusable, but not ours to delete
        (tmp_path / "store" / "ky_court.sqlite").write_bytes(database_bytes(tmp_path, 1))
        before = {path: path.read_bytes() for path in (tmp_path / "store").iterdir()}

        report = run_pipeline(cfg, store=ReadOnlyStore(cfg.STORE), clock=RecordingClock(), handle_signals=False)
        assert report.exit_status == 1 and not report.verify.passed
        reasons = " ".join(report.verify.reasons)
        assert "store lags" in reasons and "Permission denied" in reasons, reasons
        status = json.loads((tmp_path / "workspace" / "status.json").read_text())
        assert status["store_pending"] > 0 and "Permission denied" in status["store_lagging"]
        assert {path: path.read_bytes() for path in (tmp_path / "store").iterdir()} == before
        local = [row for row in torture.document_rows(tmp_path).values() if row["status"] == "extracted"]
        assert local and all((tmp_path / "workspace" / row["local_pdf"]).is_file() for row in local)

        report, status = run_until_done(cfg, lambda: LocalStore(cfg.STORE))
        assert report.exit_status == 0, report.summary()
        assert store_is_level(cfg) == [] and status["store_pending"] == 0
        assert expected_verdicts_hold(court, cfg) == []
        assert earlier.read_bytes() == before[earlier]


HOT_JOURNAL = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode = DELETE")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE documents SET status = 'failed'")
conn.execute("PRAGMA cache_spill = 1")
conn.execute("UPDATE documents SET description = hex(randomblob(2000))")   # spills: the file is written
os._exit(0)   # killed mid-transaction: the rollback journal stays hot
"""


def test_status_after_a_kill_mid_transaction_reads_what_was_committed_and_changes_nothing(tmp_path):
    workspace = tmp_path / "workspace"
    db = Database.open(workspace / "ky_court.sqlite")
    DiscoveryState(db).upsert_discovered([{"document_id": f"{number:064x}", "case_number": "2020-CA-0001"}
                          for number in range(400)])
    db.conn.execute("PRAGMA journal_mode = DELETE")
    db.close()
    subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(workspace / "ky_court.sqlite")], check=True)
    journal = workspace / "ky_court.sqlite-journal"
    assert journal.is_file() and journal.stat().st_size > 0
    before = (journal.read_bytes(), (workspace / "ky_court.sqlite").read_bytes())

    env = {key: value for key, value in os.environ.items() if not key.startswith("KY_")}
    env.update({"KY_WORKSPACE": str(workspace), "PYTHONPATH": str(REPO_ROOT)})
    shown = subprocess.run([sys.executable, "-m", "notebook_builder", "status"], env=env, cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=60)
    # status reads what was committed (the journal rolled back in a private copy), changing nothing
    assert shown.returncode == 0, shown.stderr
    shown_status = json.loads(shown.stdout)
    assert shown_status["database"] is True and shown_status["counts"]["discovered"] == 400
    assert (journal.read_bytes(), (workspace / "ky_court.sqlite").read_bytes()) == before

    done = run_cli(tmp_path)   # a writer rolls the journal back: the 400 discovered rows are intact
    assert done.returncode == 0, done.stdout + done.stderr
    rows = torture.document_rows(tmp_path)
    assert len(rows) == 400 and {row["status"] for row in rows.values()} == {"discovered"}
