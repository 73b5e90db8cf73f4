"""A download killed with SIGKILL mid-run loses nothing committed and resumes to the same end state."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import (REPO_ROOT, court_env, discovered_rows, download_context, download_court, expected_download_row,
                     sha256)

from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c70_download import _DOWNLOAD_GROUP, download

pytestmark = pytest.mark.slow   # the whole pipeline

CHILD = """
import logging
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c70_download import download
ctx = open_context(load_config())
ctx.open_database()
download(ctx)
print("finished", flush=True)
"""


def committed_downloads(db_path: Path) -> int:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM documents WHERE status = 'downloaded'").fetchone()[0]
    finally:
        conn.close()


def test_sigkill_mid_download_resumes_with_no_part_and_no_false_claim(tmp_path):
    # The resumed half runs on the tests' recording clock, which does not really wait out a Retry-After.
    with download_court() as court:
        ctx = download_context(court, tmp_path)
        documents = list(court.documents)
        DiscoveryState(ctx.db).upsert_discovered(discovered_rows(documents))
        ctx.close()
        env = {**os.environ, **court_env(court, tmp_path), "KY_PROGRESS": "0",
               "KY_CHECKPOINT_SECONDS": "0.5", "PYTHONPATH": str(REPO_ROOT)}
        child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=REPO_ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            db_path = tmp_path / "workspace" / "ky_court.sqlite"
            deadline = time.monotonic() + 60
            while committed_downloads(db_path) < 60 and time.monotonic() < deadline:
                assert child.poll() is None, child.communicate()
                time.sleep(0.01)
            assert child.poll() is None, "the child finished before it could be killed"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL
        killed_at = committed_downloads(db_path)
        assert 60 <= killed_at < 290   # killed mid-run, well before the end

        ctx = download_context(court, tmp_path)
        # Right after the kill, before any healing: no row claims a file that is not there.
        for row in DownloadRecords(ctx.db).documents_claiming_files():
            assert ctx.path(row["local_pdf"]).is_file() and ctx.store.exists(row["local_pdf"])
        result = download(ctx)
        assert list(ctx.path("tmp").iterdir()) == []
        assert result.left == 0

        for document in documents:
            row = ctx.db.get_document(document.document_id)
            status, http_status, attempts = expected_download_row(court, document, ctx.cfg.MAX_ATTEMPTS)
            assert (row["status"], row["http_status"]) == (status, http_status), document.fault
            # The kill can cost a document in flight (fetching, or fetched and not yet committed) one
            # attempt, never more.
            assert attempts <= row["attempts"] <= attempts + 1
            if status == "downloaded":
                data = court.pdf_bytes(document.document_id)
                assert row["sha256"] == sha256(data)
                assert ctx.path(row["local_pdf"]).read_bytes() == data
                assert ctx.store.read_file(row["local_pdf"]) == data
        extra = sum(court.requests_for(d.document_id) for d in documents) - sum(
            expected_download_row(court, d, ctx.cfg.MAX_ATTEMPTS)[2] for d in documents)
        # Fetched but uncommitted when killed: the one being fetched and its group's. Each is
        # fetched once more; none is claimed.
        assert 0 <= extra <= _DOWNLOAD_GROUP + 1
        ctx.close()
