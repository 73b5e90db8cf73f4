"""The demo's first steps run as printed, and a demo run again carries on as if never stopped.

- The commands the demo prints run as printed in the shell the README leaves (the venv not
  activated, so `kycourt-pipeline` is not on PATH), from the folder the demo ran in; a plain
  `status` there reads the demo's archive.
- The simulated court carries on from its progress (SimCourt.progress/resume, kept by the demo
  in demo/.simcourt-state.json): a document whose transient faults were partly served before an
  interrupt is not failed again from the start.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from support import REPO_ROOT

from notebook_builder.cli import DEMO_COURT_STATE, demo_court_carried_on, typed_program
from notebook_builder.simcourt import SimCourt


def _console_script() -> Path | None:
    script = Path(sys.executable).parent / "kycourt-pipeline"
    return script if script.is_file() else None


def _shell_without_the_venv() -> dict[str, str]:
    """The environment of a shell the README leaves: no KY_*, the venv's bin not on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KY_")}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if part != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    return env


def _serve_answers(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+", process.stdout.readline())
        assert url, process.stderr.read()
        assert requests.get(f"{url.group(0)}/?q=restitution", timeout=30).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0


def test_every_command_the_demo_prints_runs_as_printed_where_the_demo_ran(tmp_path):
    script = _console_script()
    if script is None:
        pytest.skip("the package is not installed in this Python's environment (no kycourt-pipeline script)")
    env = _shell_without_the_venv()
    demo = subprocess.run([str(script), "demo", "--docs", "40"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    printed = demo.stdout.split("query it with:\n", 1)[1].splitlines()
    commands = [shlex.split(line, comments=True) for line in printed if line.startswith("  ")]
    assert len(commands) >= 4 and all(command[0] == commands[0][0] for command in commands)
    for command in commands:
        if command[1] == "serve":
            _serve_answers(command, tmp_path, env)
            continue
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])

    plain = subprocess.run([str(script), "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    # The demo's archive: its 40 documents and what the court filed in the month the demo moved it on.
    shown = json.loads((tmp_path / "demo" / "workspace" / "status.json").read_text(encoding="utf-8"))["documents"]
    assert json.loads(plain.stdout)["documents"] == shown >= 40
    assert "reading the demo's" in plain.stderr and not (tmp_path / "ky_court_workspace").exists()


def test_the_program_is_printed_as_it_can_be_typed_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / ".venv" / "bin" / "kycourt-pipeline"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert typed_program(str(script)) == ".venv/bin/kycourt-pipeline"
    assert typed_program(".venv/bin/kycourt-pipeline") == ".venv/bin/kycourt-pipeline"
    monkeypatch.setenv("PATH", str(script.parent) + os.pathsep + "/usr/bin:/bin")
    assert typed_program(str(script)) == "kycourt-pipeline"        # an activated venv: PATH finds it
    assert typed_program(str(REPO_ROOT / "notebook_builder" / "__main__.py")).endswith(" -m notebook_builder")


def _download_until_served(court: SimCourt, document_id: str) -> int:
    """Requests of the document's PDF until one is a PDF; how many were refused."""
    refused = 0
    with requests.Session() as http:
        while True:
            answer = http.get(f"{court.base_url}/publicaccessdocuments/{document_id}/download", timeout=10)
            if answer.status_code == 200 and answer.content.startswith(b"%PDF"):
                return refused
            refused += 1
            assert refused < 10


def test_a_court_carried_on_from_its_progress_does_not_fail_a_document_from_the_start_again(tmp_path):
    with SimCourt(60, 3, enforce_retry_after=False) as court:
        document = next(doc for doc in court.documents_with("http_503") if doc.transient_failures == 2)
        answer = requests.get(f"{court.base_url}/publicaccessdocuments/{document.document_id}/download", timeout=10)
        assert answer.status_code == 503       # one of its two failures served, then the demo stopped
        with demo_court_carried_on(court, tmp_path, 60, 3):
            pass
    assert (tmp_path / DEMO_COURT_STATE).is_file()
    with SimCourt(60, 3, enforce_retry_after=False) as again:
        with demo_court_carried_on(again, tmp_path, 60, 3):
            assert _download_until_served(again, document.document_id) == 1
    with SimCourt(60, 3, enforce_retry_after=False) as fresh:
        assert _download_until_served(fresh, document.document_id) == 2
    with SimCourt(60, 4, enforce_retry_after=False) as other_seed:    # another court's progress is not taken
        with demo_court_carried_on(other_seed, tmp_path, 60, 4):
            assert other_seed.progress()["downloads"] == {}


@pytest.mark.slow
def test_the_demo_of_a_tr_portal_court_system_archives_it_and_its_update(tmp_path, capsys):
    from notebook_builder.cli import main
    assert main(["demo", "--court-system", "alabama", "--docs", "40", "--workspace", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "simulated court (alabama)" in out and "the update found" in out and "verify PASS" in out
    status = json.loads((tmp_path / "demo" / "workspace" / "status.json").read_text())
    assert status["court_system"] == "alabama" and status["done"] and status["last_update"]["complete"]
    assert status["final_states"]["not_public"] > 0
    # The folder is Alabama's now: a Kentucky demo there is refused in one line, nothing written.
    assert main(["demo", "--workspace", str(tmp_path / "demo")]) == 2
    assert "holds a demo archive of court system alabama" in capsys.readouterr().err
