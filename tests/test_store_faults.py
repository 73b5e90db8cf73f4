"""Store faults and a full workspace disk: the run keeps or stops cleanly, and a later run loses nothing.

- A store that refuses uploads (quota exceeded, then 5xx): the run goes on on
  local state, status.json says the store lags, verify FAILs naming the lag;
  a run with a healthy store brings it level and PASSes.
- A workspace disk that fills (ENOSPC while a .part or a text is written):
  one clear message naming the disk, nothing torn promoted, the next run completes.
"""
from __future__ import annotations

import builtins
import errno
import hashlib
import json
import os
from pathlib import Path

import pytest
from support import (RecordingClock, expected_verdicts_hold, quick_court, run_until_done, store_is_level, stored_database,
                     torture)

from notebook_builder.cells import c05_durable, c70_download
from notebook_builder.cells.c00_config import StoreError, StoreQuotaExceeded, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c17_snapshots import StoreState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c95_run import run_pipeline

DOCS = 60   # every fault once; enough uploads and bytes for each refusal and full disk below


class FailingUploads(LocalStore):
    """A LocalStore whose first `quota` uploads say quota exceeded and the next `outage` say 503."""

    def __init__(self, root, *, quota: int, outage: int):
        super().__init__(root)
        self.quota_left, self.outage_left = quota, outage
        self.refused = 0

    def _refuse(self, name: str) -> None:
        if self.quota_left > 0:
            self.quota_left -= 1
            self.refused += 1
            raise StoreQuotaExceeded(f"storageQuotaExceeded uploading {name}")
        if self.outage_left > 0:
            self.outage_left -= 1
            self.refused += 1
            raise StoreError(f"HTTP 503 Service Unavailable uploading {name}")

    def upload_file(self, name, local_path):
        self._refuse(name)
        super().upload_file(name, local_path)


@pytest.fixture
def court():
    # The torture's court, its faults answered at once: these runs are about the store and the disk.
    with quick_court(DOCS, seed=4) as court:
        yield court


def fault_config(court, tmp_path, monkeypatch, relative: bool):
    """The torture's configuration; `relative` gives the workspace and store as relative paths
    (as the default workspace and the demo's are), from tmp_path as the current directory."""
    env = torture.pipeline_env(court, tmp_path)
    if relative:
        monkeypatch.chdir(tmp_path)
        env.update({"KY_WORKSPACE": "workspace", "KY_STORE": "store"})
    return load_config(env)


@pytest.mark.slow
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_store_refusing_uploads_lags_fails_verify_then_a_healthy_run_levels_it(court, tmp_path, monkeypatch,
                                                                                relative):
    cfg = fault_config(court, tmp_path, monkeypatch, relative)
    failing = FailingUploads(cfg.STORE, quota=5, outage=100_000)   # quota, then 5xx for the whole run
    report = run_pipeline(cfg, store=failing, clock=RecordingClock(), handle_signals=False)

    assert failing.refused > 5
    assert report.error is None, report.summary()
    assert report.exit_status == 1 and not report.verify.passed
    lag = [reason for reason in report.verify.reasons if reason.startswith("store lags:")]
    assert lag and "pending" in lag[0], report.verify.reasons
    assert report.stages["download"].downloaded > 0 and report.stages["extract"].extracted > 0
    status = json.loads((tmp_path / "workspace" / "status.json").read_text())
    assert status["store_lagging"] and status["store_pending"] > 0
    assert status["verify"] == "FAIL"
    assert store_is_level(cfg), "the store should lag after a run whose uploads all failed"

    report, status = run_until_done(cfg, lambda: LocalStore(cfg.STORE))
    assert report.exit_status == 0, report.summary()
    assert status["store_pending"] == 0 and not status["store_lagging"]
    assert store_is_level(cfg) == []
    assert expected_verdicts_hold(court, cfg) == []
    assert stored_database(cfg.STORE) is not None


@pytest.mark.slow
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_store_that_recovers_mid_run_is_caught_up_by_the_same_run(court, tmp_path, monkeypatch, relative):
    cfg = fault_config(court, tmp_path, monkeypatch, relative)
    failing = FailingUploads(cfg.STORE, quota=5, outage=15)
    report, status = run_until_done(cfg, lambda: failing)
    assert failing.refused == 20
    assert report.exit_status == 0, report.summary()
    assert status["store_pending"] == 0
    assert store_is_level(cfg) == []
    assert expected_verdicts_hold(court, cfg) == []


def test_a_backlog_recorded_relative_to_the_wrong_folder_heals(tmp_path, monkeypatch):
    """Before paths were made absolute, a relative workspace `w` recorded `w/pdf_by_hash/...` and
    resolved it against the workspace again (`w/w/...`): every such name was dropped as gone locally
    and verify failed for good. catch_up now finds the file at its content-addressed place."""
    from notebook_builder.cells.c34_mirror import StoreMirror
    monkeypatch.chdir(tmp_path)
    workspace = tmp_path / "w"
    (workspace / "pdf_by_hash").mkdir(parents=True)
    body = b"%PDF-1.4 healed"
    sha = hashlib.sha256(body).hexdigest()
    (workspace / "pdf_by_hash" / f"{sha}.pdf").write_bytes(body)
    db = Database.open(workspace / "ky_court.sqlite")
    StoreState(db).store_pending_add(f"pdf_by_hash/{sha}.pdf", f"elsewhere/w/pdf_by_hash/{sha}.pdf", "store failed")
    StoreState(db).store_pending_add("status.json", "gone/status.json", "store failed")   # really gone: dropped
    mirror = StoreMirror(LocalStore(tmp_path / "store"))
    mirror.db = db
    try:
        assert mirror.catch_up(workspace) == {"uploaded": 1, "left": 0}
    finally:
        db.close()
    assert (tmp_path / "store" / "pdf_by_hash" / f"{sha}.pdf").read_bytes() == body


class DiskFills:
    """`open` for one module: writes to matching paths fail with ENOSPC after `budget` bytes, half-written."""

    def __init__(self, budget: int, match):
        self.budget, self.match = budget, match
        self.failed = 0

    def __call__(self, file, mode="r", *args, **kwargs):
        handle = builtins.open(file, mode, *args, **kwargs)
        if not any(flag in mode for flag in "wax") or not self.match(str(file)):
            return handle
        return _FillingFile(handle, self)


class _FillingFile:
    def __init__(self, handle, disk: DiskFills):
        self._handle, self._disk = handle, disk

    def write(self, data):
        if len(data) > self._disk.budget:
            self._handle.write(data[:len(data) // 2])   # a torn write, as a full disk leaves it
            self._handle.flush()
            self._disk.failed += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._disk.budget -= len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()


def no_torn_file(cfg) -> list[str]:
    problems = []
    for root in (Path(cfg.WORKSPACE), Path(cfg.STORE)):
        for path in (root / "pdf_by_hash").glob("*.pdf"):
            if torture.sha256_file(path) != path.stem:
                problems.append(f"{path} does not hold its hash")
        problems += [str(path) for path in (root / "text").glob(".*.tmp")]
    problems += [str(path) for path in (Path(cfg.WORKSPACE) / "tmp").glob("*.part")]
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("where", ["download", "extract"])
def test_full_workspace_disk_stops_cleanly_naming_the_disk_then_the_next_run_completes(
        court, tmp_path, monkeypatch, where):
    cfg = load_config(torture.pipeline_env(court, tmp_path))
    if where == "download":
        disk = DiskFills(60 * 1024, lambda path: path.endswith(".part"))
        monkeypatch.setattr(c70_download, "open", disk, raising=False)    # a streamed part
        monkeypatch.setattr(c05_durable, "open", disk, raising=False)     # a part held in memory
    else:
        disk = DiskFills(40 * 1024, lambda path: path.endswith(".txt.tmp"))
        monkeypatch.setattr(c05_durable, "open", disk, raising=False)
    report = run_pipeline(cfg, clock=RecordingClock(), handle_signals=False)

    assert report.exit_status == 1
    assert report.error and "workspace disk is full" in report.error and "free space on" in report.error
    assert report.summary().count("workspace disk is full") <= 2   # "stopped early" and "error": one message
    assert no_torn_file(cfg) == []
    if where == "download":
        downloaded = [row for row in torture.document_rows(tmp_path).values() if row["status"] == "downloaded"]
        assert disk.failed == 1 and downloaded   # stopped part-way, at the document that hit the full disk

    monkeypatch.undo()
    report, status = run_until_done(cfg, lambda: None)
    assert report.exit_status == 0, report.summary()
    assert status["done"]
    assert no_torn_file(cfg) == []
    assert store_is_level(cfg) == []
    assert expected_verdicts_hold(court, cfg) == []
