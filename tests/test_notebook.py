"""'Run all' of the committed notebook under nbclient, against the simulated court.

Outside Colab the notebook reads the same KY_* variables as the CLI; here
they point it at a SimCourt on 127.0.0.1 and a local store. Running it a
second time is a no-op that still ends in PASS.
"""
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from notebook_builder.simcourt import SimCourt
from support import stored_database

pytestmark = pytest.mark.slow   # the whole pipeline

NOTEBOOK = Path(__file__).resolve().parents[1] / "ky_court_pipeline.ipynb"
CAP = 2 * 1024 * 1024


def _outputs_text(notebook) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append("".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def _run_all(path: Path, cwd: Path):
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook


def test_run_all_ends_in_pass_and_again_is_a_no_op(tmp_path, monkeypatch):
    court = SimCourt(120, seed=5, results_limit=60, max_page=50, first_year=2024, last_year=2026,
                     oversize_bytes=CAP + 1024 * 1024, stall_seconds=0.1)   # a stall fails once, however long
    with court:
        for key, value in {
            "KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01",
            "KY_BACKOFF_CAP": "0.05", "KY_MAX_PDF_BYTES": str(CAP), "KY_FIRST_YEAR": "2024",
            "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "50", "KY_CONVERGENCE_DELTA": "1",
            "KY_WORKERS": "2", "KY_PROGRESS": "1",
        }.items():
            monkeypatch.setenv(key, value)
        first = _run_all(NOTEBOOK, tmp_path)
        requests = court.download_requests
        assert "PASS" in _outputs_text(first)
        outputs = [output for cell in first.cells for output in cell.get("outputs", [])]
        streams = {name: "".join(output["text"] for output in outputs if output.get("name") == name)
                   for name in ("stdout", "stderr")}
        assert " INFO kycourt.run" in streams["stdout"] or " INFO kycourt." in streams["stdout"]
        assert " INFO kycourt." not in streams["stderr"]            # the log is no red box
        assert "IProgress not found" not in streams["stderr"]
        assert any("application/vnd.jupyter.widget-view+json" in output.get("data", {}) for output in outputs)
        assert "documents match 'opinion'" in _outputs_text(first)    # the search cell, over the index just built
        status = json.loads((tmp_path / "store" / "status.json").read_text())
        assert status["done"] is True and status["verify"] == "PASS"
        assert status["counts"]["extracted"] > 0
        second = _run_all(NOTEBOOK, tmp_path)
        assert "PASS" in _outputs_text(second)
        assert court.download_requests == requests  # nothing fetched again


def test_interrupting_the_run_cell_stops_cleanly_with_state_saved(tmp_path, monkeypatch):
    """Colab's interrupt is SIGINT to the kernel: the run cell stops, saves, and says so."""
    import time

    from jupyter_client.manager import start_new_kernel

    court = SimCourt(150, seed=6, faults=False, first_year=2025, last_year=2026)
    with court:
        for key, value in {
            "KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "1", "KY_PACING_DL": "0.05,0.05",
            "KY_PACING_SEARCH": "0,0", "KY_FIRST_YEAR": "2025", "KY_LAST_YEAR": "2026",
            "KY_CONVERGENCE_DELTA": "1", "KY_PROGRESS": "0", "KY_WORKERS": "1",
        }.items():
            monkeypatch.setenv(key, value)
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        manager, kernel = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
        try:
            run_index = next(i for i, source in enumerate(code) if "RUN_REPORT = run_session" in source)
            for source in code[:run_index]:
                reply = kernel.execute_interactive(source, timeout=120, output_hook=lambda msg: None)
                assert reply["content"]["status"] == "ok"
            outputs = []
            message_id = kernel.execute(code[run_index])
            status = tmp_path / "workspace" / "status.json"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # interrupt once downloads are under way
                if status.exists() and json.loads(status.read_text()).get("phase") == "download":
                    break
                time.sleep(0.1)
            time.sleep(1.0)
            interrupted_at = time.monotonic()
            manager.interrupt_kernel()
            while True:
                message = kernel.get_iopub_msg(timeout=60)
                if message["parent_header"].get("msg_id") != message_id:
                    continue
                if message["msg_type"] == "stream":
                    outputs.append(message["content"]["text"])
                if message["msg_type"] == "error":
                    outputs.append(f"{message['content']['ename']}: {message['content']['evalue']}")
                if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                    break
            assert time.monotonic() - interrupted_at < 30
            text = "".join(outputs)
            assert "stopped early: SIGINT" in text
            # "Run all" stops visibly at the run cell: the session did not end in PASS.
            assert "SessionNotPassed: exit status 130: interrupted" in text
            saved = json.loads((tmp_path / "store" / "status.json").read_text())
            assert saved["phase"] == "verify" and saved["verify"] == "PASS"
            assert saved["done"] is False and saved["queues"]["download"] > 0
            assert stored_database(tmp_path / "store") is not None
            assert not list((tmp_path / "workspace" / "tmp").glob("*.part"))
        finally:
            kernel.stop_channels()
            manager.shutdown_kernel(now=True)
