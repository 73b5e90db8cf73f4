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


@pytest.mark.slow
def test_run_all_ends_in_pass_and_again_is_a_no_op(tmp_path, monkeypatch):
    court = SimCourt(120, seed=5, results_limit=60, max_page=50, first_year=2024, last_year=2026,
                     oversize_bytes=CAP + 1024 * 1024)
    with court:
        for key, value in {
            "KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01",
            "KY_BACKOFF_CAP": "0.05", "KY_MAX_PDF_BYTES": str(CAP), "KY_FIRST_YEAR": "2024",
            "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "50", "KY_CONVERGENCE_DELTA": "1",
            "KY_WORKERS": "2", "KY_PROGRESS": "0",
        }.items():
            monkeypatch.setenv(key, value)
        first = _run_all(NOTEBOOK, tmp_path)
        requests = court.download_requests
        assert "PASS" in _outputs_text(first)
        status = json.loads((tmp_path / "store" / "status.json").read_text())
        assert status["done"] is True and status["verify"] == "PASS"
        assert status["counts"]["extracted"] > 0
        second = _run_all(NOTEBOOK, tmp_path)
        assert "PASS" in _outputs_text(second)
        assert court.download_requests == requests  # nothing fetched again
