"""Small promises of the tools around the pipeline: the simulated court's stats, store file modes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.simcourt import SimCourt
from notebook_builder.simcourt.server import STATS_PATH


def test_sim_stats_endpoint_counts_requests_and_faults():
    with SimCourt(60, seed=2, search_fault_rate=0.5) as court:
        root = court.base_url.rsplit("/api/api/v1", 1)[0]
        faulty = next(doc for doc in court.documents if doc.fault == "http_404")
        request = urllib.request.Request(f"{court.base_url}/publicaccessdocuments/{faulty.document_id}/download")
        try:
            urllib.request.urlopen(request, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        # The 404 reaches us before its handler thread counts itself out of in_flight: wait for it.
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(root + STATS_PATH, timeout=10) as answer:
                stats = json.load(answer)
            if stats["in_flight"] <= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
    assert stats["requests"]["download"] == 1
    assert stats["faults_served"] == 1 and stats["faults_by_kind"] == {"http_404": 1}
    assert stats["in_flight"] == 1     # the stats request itself


def test_sim_prints_its_totals_on_exit(tmp_path):
    child = subprocess.Popen([sys.executable, "-m", "notebook_builder", "sim", "--port", "0", "--docs", "20"],
                             stdout=subprocess.PIPE, text=True)
    try:
        base = child.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:") and "stats:" in child.stdout.readline()
        urllib.request.urlopen(base.rsplit("/api/api/v1", 1)[0] + STATS_PATH, timeout=10).read()
        child.send_signal(signal.SIGINT)
        rest = child.communicate(timeout=30)[0]
    finally:
        if child.poll() is None:
            child.kill()
    totals = [line for line in rest.splitlines() if line.startswith("totals: ")]
    assert totals and json.loads(totals[0][len("totals: "):])["requests"] == {
        "download": 0, "entry_documents": 0, "search": 0}


def test_store_files_take_the_umask_like_any_tool(tmp_path):
    old = os.umask(0o022)
    try:
        store = LocalStore(tmp_path / "store")
        source = tmp_path / "a.pdf"
        source.write_bytes(b"%PDF-1.4 x")
        store.upload_file("pdf_by_hash/" + "a" * 64 + ".pdf", source)
        store.upload_file("status.json", source)
    finally:
        os.umask(old)
    for path in (tmp_path / "store").rglob("*"):
        if path.is_file():
            assert path.stat().st_mode & 0o777 == 0o644, path
