"""A command whose output cannot be written (a full disk, /dev/full) says so in one line and exits
non-zero: never a traceback, with stdout buffered or not (PYTHONUNBUFFERED)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from archive_fixture import build_archive, document_id
from support import REPO_ROOT

from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c87_index import index

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    cfg = build_archive(tmp_path_factory.mktemp("output"))
    ctx = open_context(cfg)
    try:
        index(ctx)
    finally:
        ctx.close()
    return cfg


COMMANDS = {
    "status": ["status"],
    "show": ["show", document_id(0)],
    "search": ["search", "suppression"],
    "report": ["report"],
    "export": ["export", "--format", "jsonl", "--out", "{out}"],
    "verify": ["verify", "--store", "{store}"],
    "help": ["--help"],
}


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_stdout_is_one_line_and_a_non_zero_exit(archive, tmp_path, command, unbuffered):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("KY_", "PYTHONUNBUFFERED"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    args = [part.format(out=tmp_path / "export", store=archive.STORE) for part in COMMANDS[command]]
    if command != "help":
        args += ["--workspace", archive.WORKSPACE]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "notebook_builder", *args], stdout=full, stderr=subprocess.PIPE,
                              env=env, cwd=tmp_path, text=True, timeout=180)
    said = [line for line in done.stderr.splitlines() if line.startswith("kycourt-pipeline:")]
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert said == ["kycourt-pipeline: cannot write the output: No space left on device"], done.stderr
