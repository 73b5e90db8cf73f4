"""SIGINT and SIGTERM in each stage: exit 130 soon, nothing in flight left torn, a checkpoint pushed, resumable.

The court is slowed a little (download pacing 0.05 s, search pacing 0.02 s) so
each stage lasts long enough to be hit; the stage is read from status.json.
Discovery is hit as its own stage (in the crawl its units are short between
the downloads of what each found), downloads as the crawl's drain of a queue a
discover-only run filled (test_schedule stops and kills the crawl's units). The
extract case needs no pacing (one worker and small batches make extract last),
and the court's stalled bodies stall 0.1 s, not 1 s (a stall fails its request
once, however long it is): neither is what these tests are about.
"""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from support import REPO_ROOT, stored_database, torture, torture_court

pytestmark = pytest.mark.slow   # the whole pipeline

DOCS = 60   # every fault once (the first faulty slots cycle through them all)


def checkpoint_seq(db_path: Path | None) -> int:
    if db_path is None or not db_path.is_file():
        return 0
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = 'checkpoint_seq'").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


def rows_are_consistent(workspace: Path, store: Path) -> list[str]:
    """Every row claiming a PDF (or a text) has it under its hash, locally and in the store."""
    problems = []
    for row in torture.document_rows(workspace.parent).values():
        if row["status"] not in ("downloaded", "extracted"):
            continue
        name = f"pdf_by_hash/{row['sha256']}.pdf"
        if row["local_pdf"] != name or not (store / name).is_file():
            problems.append(f"{row['document_id'][:12]}: {row['status']} but {name} is not in the store")
        elif torture.sha256_file(store / name) != row["sha256"]:
            problems.append(f"{row['document_id'][:12]}: store {name} does not hold its hash")
        if row["status"] == "extracted" and not (store / f"text/{row['sha256']}.txt").is_file():
            problems.append(f"{row['document_id'][:12]}: extracted but its text is not in the store")
    return problems


def wait_for_stage(child: subprocess.Popen, workspace: Path, stage: str, spawned_ns: int) -> None:
    deadline = time.monotonic() + 120
    while torture.observe_stage(workspace, spawned_ns) != stage:
        assert child.poll() is None, f"the run ended before {stage}"
        assert time.monotonic() < deadline, f"{stage} never began"
        time.sleep(0.005)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("stage", ["discover", "download", "extract"])
def test_signal_in_a_stage_exits_130_saves_state_and_the_next_run_resumes(tmp_path, stage, signum):
    with torture_court(DOCS, seed=7, stall_seconds=0.1) as court:
        env = torture.pipeline_env(court, tmp_path)
        env.update({"KY_PACING": "1", "KY_PACING_DL": "0.05,0.05", "KY_PACING_SEARCH": "0.02,0.02",
                    "KY_CHECKPOINT_SECONDS": "30"})   # the checkpoint after the signal is the stop's own
        if stage == "extract":  # extract is CPU-bound and quick: one worker, small batches, an early signal
            env.update({"KY_WORKERS": "1", "KY_EXTRACT_BATCH": "2", "KY_PACING": "0"})
        if stage == "download":
            # The crawl downloads what each unit of discovery found before the next one: a queue that a
            # discover-only run filled makes its first drain last long enough to be hit.
            subprocess.run(torture.pipeline_command(), env={**env, "KY_PHASES": "discover", "KY_PACING": "0"},
                           cwd=REPO_ROOT, check=True, capture_output=True)
        phases = "discover" if stage == "discover" else None   # discover as its own stage: units back to back
        workspace, store = tmp_path / "workspace", tmp_path / "store"
        spawned_ns = time.time_ns()
        with open(tmp_path / "interrupted.log", "wb") as log:
            child = subprocess.Popen(torture.pipeline_command(), env={**env, **({"KY_PHASES": phases} if phases else {})},
                                     cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_stage(child, workspace, stage, spawned_ns)
            time.sleep(0.02 if stage == "extract" else 0.3)
            assert torture.observe_stage(workspace, spawned_ns) == stage, "the stage ended too soon"
            seq_before = checkpoint_seq(stored_database(store))
            signalled = time.monotonic()
            child.send_signal(signum)
            status = child.wait(timeout=30)
            waited = time.monotonic() - signalled
        finally:
            torture.kill_group(child)
        output = (tmp_path / "interrupted.log").read_text()
        assert status == 130, output[-3000:]
        assert waited < 30
        assert f"{signal.Signals(signum).name} received" in output
        assert not list((workspace / "tmp").glob("*.part"))
        assert rows_are_consistent(workspace, store) == []
        assert checkpoint_seq(stored_database(store)) > seq_before
        assert checkpoint_seq(stored_database(store)) == checkpoint_seq(workspace / "ky_court.sqlite")

        env["KY_PACING"] = "0"
        runs, final = torture.run_to_completion(env, tmp_path, "resume")
        assert final == 0, (tmp_path / f"resume-{runs}.log").read_text()[-3000:]
        assert torture.wrong_verdicts(court, tmp_path) == []
        assert rows_are_consistent(workspace, store) == []
