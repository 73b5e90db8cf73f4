"""SIGKILL at any instant loses nothing: the short torture, and a fresh runtime after a kill.

The full version is `scripts/torture.py --kills 20`; see its docstring for what is compared.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from support import REPO_ROOT, stored_database, torture, torture_court

pytestmark = pytest.mark.slow   # the whole pipeline


def claimed_documents(db_path: Path | None) -> set[str]:
    if db_path is None or not db_path.is_file():
        return set()
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return {row[0] for row in conn.execute(
            "SELECT document_id FROM documents WHERE status IN ('downloaded', 'extracted')")}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()


def test_five_sigkills_in_every_stage_end_where_an_uninterrupted_run_ends(tmp_path):
    report = torture.torture(kills=5, docs=200, seed=5, root=tmp_path / "torture", log=lambda line: None)
    print(report.figures())
    assert report.ok, report.figures()
    assert report.kills == 5
    assert {"discover", "backfill", "download"} <= set(report.stages_hit), report.figures()
    assert report.invariants > 1000
    assert report.reader_reads > 10    # a user watched the killed side's database throughout


def test_fresh_runtime_after_a_kill_restores_and_fetches_nothing_the_store_holds(tmp_path):
    with torture_court(200, seed=3, stall_seconds=0.1) as court:   # a stall fails once, however long
        env = torture.pipeline_env(court, tmp_path)
        workspace, store = tmp_path / "workspace", tmp_path / "store"
        child = subprocess.Popen(torture.pipeline_command(), env=env, cwd=REPO_ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            # Killed mid-download, once the store's checkpoint already records some PDFs.
            while len(claimed_documents(stored_database(store))) < 40 and time.monotonic() < deadline:
                assert child.poll() is None, "the run finished before it could be killed"
                time.sleep(0.02)
        finally:
            torture.kill_group(child)
        assert child.returncode == -signal.SIGKILL
        in_store = claimed_documents(stored_database(store))
        assert len(in_store) >= 40
        requests_before = {doc_id: court.requests_for(doc_id) for doc_id in in_store}

        shutil.rmtree(workspace)   # a new runtime: nothing local survives
        runs, status = torture.run_to_completion(env, tmp_path, "fresh")
        assert status == 0
        assert "restored db/ky_court" in (tmp_path / "fresh-1.log").read_text()
        assert {doc_id: court.requests_for(doc_id) for doc_id in in_store} == requests_before
        assert torture.wrong_verdicts(court, tmp_path) == []
        assert not list((workspace / "tmp").glob("*.part"))
        assert os.path.isdir(store / "pdf_by_hash")


def journaled_documents(store: Path) -> set[str]:
    listed = set()
    for path in (store / "journal").glob("downloads-after-*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                listed.add(json.loads(line)["document_id"])
            except (ValueError, KeyError):
                pass     # a line read mid-rewrite
    return listed


def test_a_fresh_runtime_asks_the_court_for_nothing_the_journal_says_the_store_holds(tmp_path):
    with torture_court(200, seed=8, stall_seconds=0.1) as court:
        env = torture.pipeline_env(court, tmp_path)
        workspace, store = tmp_path / "workspace", tmp_path / "store"
        discovered = subprocess.run(torture.pipeline_command(), env={**env, "KY_PHASES": "discover"},
                                    cwd=REPO_ROOT, capture_output=True, timeout=120)
        assert discovered.returncode == 0, discovered.stderr[-2000:]      # the store's snapshot: all discovered
        # No snapshot while it downloads, only the journal: a kill loses the database's record of
        # every download since the one above.
        child = subprocess.Popen(torture.pipeline_command(),
                                 env={**env, "KY_CHECKPOINT_SECONDS": "3600", "KY_JOURNAL_SECONDS": "0.2"},
                                 cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while len(journaled_documents(store)) < 40 and time.monotonic() < deadline:
                assert child.poll() is None, "the run finished before it could be killed"
                time.sleep(0.05)
        finally:
            torture.kill_group(child)
        assert child.returncode == -signal.SIGKILL
        journaled = journaled_documents(store)
        assert len(journaled) >= 40 and not claimed_documents(store / "ky_court.sqlite")
        requests_before = {doc_id: court.requests_for(doc_id) for doc_id in journaled}

        shutil.rmtree(workspace)   # a new runtime: nothing local survives
        runs, status = torture.run_to_completion(env, tmp_path, "fresh")
        assert status == 0
        assert {doc_id: court.requests_for(doc_id) for doc_id in journaled} == requests_before
        assert "later downloads from the store's journal" in (tmp_path / "fresh-1.log").read_text()
        assert torture.wrong_verdicts(court, tmp_path) == []
