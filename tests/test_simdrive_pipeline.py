"""The whole pipeline with Google Drive as the store: the simulated Drive, the real pydrive2 stack.

KY_STORE=drive and KY_DRIVE_API point the run at notebook_builder.simdrive on
127.0.0.1; the simulated court is the torture court. Each test ends with the
store level (every name the database refers to held once, with the bytes its
hash names) and the court's planned verdicts, after the faults of the issue:
a rate-limit storm with 5xx, dropped connections and an expiring token; the
quota filling in the middle of a group; a file trashed by hand; and every
switch of the simulated Drive at once (phantom writes, listings that lag,
another runtime's copies of titles) through SIGKILLs and a fresh runtime,
after which every title is held once.
"""
from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
import subprocess
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from support import REPO_ROOT, RecordingClock, quick_court, torture, torture_court

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c90_verify import referenced_store_names
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.cells.drive_store import text_pack_members
from notebook_builder.simdrive import SimDrive

DOCS = 30
FOLDER = "ky_court"


@pytest.fixture
def court():
    # The torture's court, its faults answered at once: these runs are about the Drive store.
    with quick_court(DOCS, seed=5) as court:
        yield court


@pytest.fixture
def sim():
    with SimDrive(seed=5) as drive:
        yield drive


def drive_env(court, sim, tmp_path, **extra) -> dict:
    env = torture.pipeline_env(court, tmp_path)
    env.update({"KY_STORE": "drive", "KY_DRIVE_API": sim.api_root, "KY_DRIVE_FOLDER": FOLDER,
                "KY_DRIVE_WRITES": "400", "KY_HTTP_TIMEOUT": "5"})
    env.update(extra)
    return env


def run(cfg):
    report = run_pipeline(cfg, clock=RecordingClock(), handle_signals=False)
    status = json.loads((Path(cfg.WORKSPACE) / "status.json").read_text())
    return report, status


def run_until_done(cfg, runs: int = 4):
    for _ in range(runs):
        report, status = run(cfg)
        if report.exit_status == 0 and status["done"]:
            break
    return report, status


def drive_lags(sim: SimDrive, cfg) -> list[str]:
    """Referenced names the simulated Drive lacks, holds twice, or holds with other bytes."""
    db = Database.open(Path(cfg.WORKSPACE) / "ky_court.sqlite")
    try:
        names, problems = referenced_store_names(DownloadRecords(db).documents_claiming_files())
    finally:
        db.close()
    assert not problems
    lags = []
    for folder in ("pdf_by_hash", "text"):
        held = sim.files_in(f"{FOLDER}/{folder}")
        counts = Counter(f["title"] for f in held)
        lags += [f"{folder}/{title} x{n}" for title, n in counts.items() if n > 1]
        contents = {f["title"]: sim.content(f["id"]) for f in held}
        for pack in held:                        # a text pack's members, read from the zip itself
            if text_pack_members(pack["title"], pack.get("description")) is not None:
                with zipfile.ZipFile(io.BytesIO(sim.content(pack["id"]))) as archive:
                    for member in archive.namelist():
                        if member in contents:
                            lags.append(f"{folder}/{member} loose and packed")
                        contents[member] = archive.read(member)
        for name in sorted(n for n in names if n.startswith(folder + "/")):
            data = contents.get(name.split("/", 1)[1])
            if data is None:
                lags.append(f"{name} missing")
            elif folder == "pdf_by_hash" and hashlib.sha256(data).hexdigest() != name.split("/")[1][:-4]:
                lags.append(f"{name} other bytes")
            elif folder == "text" and (Path(cfg.WORKSPACE) / name).is_file() \
                    and (Path(cfg.WORKSPACE) / name).read_bytes() != data:
                lags.append(f"{name} other bytes")
    return lags


def text_files_per_text(sim: SimDrive, cfg) -> float:
    texts = sum(1 for name in referenced(cfg) if name.startswith("text/"))
    return len(sim.files_in(f"{FOLDER}/text")) / max(1, texts)


def referenced(cfg) -> set[str]:
    db = Database.open(Path(cfg.WORKSPACE) / "ky_court.sqlite")
    try:
        return referenced_store_names(DownloadRecords(db).documents_claiming_files())[0]
    finally:
        db.close()


@pytest.mark.slow
def test_rate_limit_storm_5xx_drops_and_an_expiring_token_lose_nothing_and_a_fresh_runtime_restores(
        court, sim, tmp_path):
    sim.write_rate, sim._bucket.burst = 20.0, 2.0      # the pacer starts at 400 a second: a storm
    sim.error_rate, sim.drop_rate, sim.token_seconds = 0.03, 0.02, 0.5
    cfg = load_config(drive_env(court, sim, tmp_path))
    report, status = run_until_done(cfg)

    assert report.exit_status == 0, report.summary()
    assert status["store_pending"] == 0 and not status["store_lagging"] and status["store_eta_seconds"] == 0.0
    assert sim.rate_refusals() > 0
    assert sim.rejected["backendError"] > 0 and sim.rejected["dropped"] > 0
    assert sim.requests["token"] > 0
    assert drive_lags(sim, cfg) == []
    assert text_files_per_text(sim, cfg) < 0.5                  # texts travel in packs
    assert torture.wrong_verdicts(court, tmp_path) == []

    # A fresh runtime: the workspace is gone; the run restores from Drive and asks the court for no PDF.
    shutil.rmtree(tmp_path / "workspace")
    downloads_before = court.download_requests
    report, status = run(cfg)
    assert report.stages["restore"].restored, report.summary()
    assert report.exit_status == 0, report.summary()
    assert report.stages["download"].downloaded == 0
    assert court.download_requests == downloads_before
    assert drive_lags(sim, cfg) == []


@pytest.mark.slow
def test_quota_full_mid_group_lags_names_what_then_a_freed_drive_levels(court, sim, tmp_path):
    cfg = load_config(drive_env(court, sim, tmp_path))
    sim.quota_bytes = sum(len(court.pdf_bytes(doc.document_id) or b"") for doc in court.documents[:DOCS // 3])
    report, status = run(cfg)

    assert report.exit_status == 1 and not report.verify.passed
    lag = [reason for reason in report.verify.reasons if reason.startswith("store lags:")]
    assert lag and "quota exceeded" in lag[0], report.verify.reasons
    assert status["store_lagging"].startswith("quota exceeded") and status["store_pending"] > 0
    assert sim.rejected["storageQuotaExceeded"] > 0
    assert 0 < len(sim.files_in(f"{FOLDER}/pdf_by_hash"))        # some of the group made it, not all
    assert drive_lags(sim, cfg)

    sim.quota_bytes = None
    report, status = run_until_done(cfg)
    assert report.exit_status == 0, report.summary()
    assert status["store_pending"] == 0
    assert drive_lags(sim, cfg) == []
    assert torture.wrong_verdicts(court, tmp_path) == []


@pytest.mark.slow
def test_file_trashed_by_hand_is_named_and_put_back_by_the_next_verify(court, sim, tmp_path):
    cfg = load_config(drive_env(court, sim, tmp_path))
    report, _ = run_until_done(cfg)
    assert report.exit_status == 0, report.summary()
    victim = sorted(sim.files_in(f"{FOLDER}/pdf_by_hash"), key=lambda f: f["title"])[0]
    sim.trash(victim["id"])

    report = run_pipeline(cfg, handle_signals=False, verify_only=True)
    assert report.exit_status == 0, report.summary()
    assert report.verify.fixity.healed == [f"pdf_by_hash/{victim['title']} (from the workspace)"]
    assert f"store pdf_by_hash/{victim['title']}: missing from the store" in report.verify.fixity.found
    assert drive_lags(sim, cfg) == []


@pytest.mark.slow
def test_demo_with_the_simulated_drive_passes_and_says_what_drive_answered(tmp_path):
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "notebook_builder", "demo", "--docs", "40", "--store", "simdrive"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "KY_PROGRESS": "0"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verify PASS" in done.stdout and "done: yes" in done.stdout
    answered = [line for line in done.stdout.splitlines() if line.startswith("demo: simulated Drive answered")]
    assert answered and int(answered[0].split("holds ")[1].split()[0]) > 0
    assert not (tmp_path / "demo" / "store").exists()                 # the store was the simulated Drive


def test_drive_api_knob_must_be_an_http_url():
    from notebook_builder.cells.c00_config import ConfigError
    assert load_config({"KY_DRIVE_API": "http://127.0.0.1:9/"}).DRIVE_API == "http://127.0.0.1:9/"
    assert load_config({"KY_DRIVE_API": ""}).DRIVE_API is None
    with pytest.raises(ConfigError, match="KY_DRIVE_API"):
        load_config({"KY_DRIVE_API": "127.0.0.1:9"})
    with pytest.raises(ConfigError, match="KY_DRIVE_WRITES"):
        load_config({"KY_DRIVE_WRITES": "0"})


def titles_held_twice(sim: SimDrive) -> list[str]:
    """Titles (files and folders) held more than once in one folder of the store, or My Drive's."""
    twice = Counter(f"/{f['title']}" for f in sim.folders_in(""))
    for folder in [FOLDER] + [f"{FOLDER}/{f['title']}" for f in sim.folders_in(FOLDER)]:
        twice.update(f"{folder}/{f['title']}" for f in sim.files_in(folder) + sim.folders_in(folder))
    return sorted(f"{title} x{count}" for title, count in twice.items() if count > 1)


@pytest.mark.slow
def test_sigkills_with_every_drive_switch_on_leave_every_title_held_once_and_a_fresh_runtime_restores(tmp_path):
    rng = random.Random(11)
    weather = dict(list_delay=2.0, phantom_rate=0.08, twin_rate=0.04, error_rate=0.02, drop_rate=0.01,
                   token_seconds=1.0, page_limit=7, write_rate=60.0, write_burst=6.0, seed=11)
    with torture_court(DOCS, seed=11, stall_seconds=0.1) as court, SimDrive(**weather) as sim:
        env = {**torture.pipeline_env(court, tmp_path), "KY_STORE": "drive", "KY_DRIVE_API": sim.api_root,
               "KY_DRIVE_FOLDER": FOLDER, "KY_DRIVE_WRITES": "400", "KY_HTTP_TIMEOUT": "5"}
        for number in range(4):   # each killed a moment after Drive accepted a few more writes
            target = sim.writes_accepted + rng.randint(2, 25)
            with open(tmp_path / f"kill-{number}.log", "wb") as log:
                child = subprocess.Popen(torture.pipeline_command(), env=env, cwd=REPO_ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            try:
                deadline = time.monotonic() + 120
                while sim.writes_accepted < target and child.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.005)
            finally:
                torture.kill_group(child)          # at once: the next run starts inside the listing delay
        assert sim.rejected["phantom"] + sim.rejected["lost"] > 0 and sim.answers["insert 409"] > 0

        sim.twin_rate = 0.0                       # the other runtime is gone; the rest of the weather stays
        time.sleep(weather["list_delay"])         # and Drive lists its last copies by now
        runs, status = torture.run_to_completion(env, tmp_path, "final")
        assert status == 0, (tmp_path / f"final-{runs}.log").read_text()[-3000:]
        assert titles_held_twice(sim) == []
        cfg = load_config(env)
        assert drive_lags(sim, cfg) == []
        logs = "".join(path.read_text(errors="replace") for path in tmp_path.glob("*.log"))
        assert sim.twins_made == 0 or "healing" in logs
        assert torture.wrong_verdicts(court, tmp_path) == []

        shutil.rmtree(tmp_path / "workspace")     # a fresh runtime: restores, asks the court for no PDF
        time.sleep(weather["list_delay"])         # (one starts later than Drive lists the last insert)
        downloads_before = court.download_requests
        runs, status = torture.run_to_completion(env, tmp_path, "fresh")
        assert status == 0 and "kycourt.restore: restored " in (tmp_path / "fresh-1.log").read_text()
        assert court.download_requests == downloads_before
        assert titles_held_twice(sim) == [] and drive_lags(sim, cfg) == []
