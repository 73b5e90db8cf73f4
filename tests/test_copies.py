"""Any copy of an archive is readable by the read-only commands, and nothing is written into it;
a path that holds no archive is never made into one.

A copy is what a user gets by copying an archive off Drive, a USB stick, or with `cp` without the
-wal/-shm files: here a run's workspace and store copied with `cp -r`, then `chmod -R a-w`, read
by a user who cannot write it (root writes anything, so CI, which runs as root, reads it as
`nobody` through setpriv), and a writable copy, and the database the store's page packs make as a
workspace.
The paths: a store path with a typo, a workspace that is a file, a moved store, a copied folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from support import REPO_ROOT, pipeline_env, quick_court

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c22_page_packs import PagePacks
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.cli import main

READ_COMMANDS = ("status", "show", "search", "export", "report", "verify")


@pytest.fixture(scope="module")
def archive():
    """A finished run's folder (workspace/ and store/) in a folder any user can read; the case
    number and a word to query it by."""
    root = Path(tempfile.mkdtemp(prefix="kycourt-copies-"))
    os.chmod(root, 0o755)
    try:
        with quick_court(30, 5) as court:
            cfg = load_config(pipeline_env(court, root / "archive"))
            report = run_pipeline(cfg, handle_signals=False)
        assert report.exit_status == 0, report.summary()
        case_number = next(row.case_number for row in court.documents if row.case_number)
        yield root, case_number
    finally:
        _make_writable(root)
        shutil.rmtree(root, ignore_errors=True)


def _make_writable(root: Path) -> None:
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(Path(folder) / name, 0o644)


def _tree(root: Path) -> dict[str, str]:
    """Every path under root and a hash of its bytes (folders: 'dir')."""
    found = {}
    for path in sorted(root.rglob("*")):
        found[str(path.relative_to(root))] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _copy(archive_root: Path, name: str, *, read_only: bool) -> Path:
    copy = archive_root / name
    shutil.copytree(archive_root / "archive", copy)
    assert not [path for path in copy.rglob("*") if path.name.endswith(("-wal", "-shm"))]
    if read_only:
        for folder, _, files in os.walk(copy):
            for file_name in files:
                os.chmod(Path(folder) / file_name, 0o444)
            os.chmod(folder, 0o555)
    return copy


def _reader_prefix(scratch: Path) -> list[str]:
    """The command prefix that runs as a user who cannot write a chmod a-w copy: this user when
    not root; else `nobody` through setpriv, or, where nobody cannot reach the package (a checkout
    under a private folder), root with every capability dropped (no CAP_DAC_OVERRIDE: a 0444 file
    and a 0555 folder refuse it as they refuse anyone); skips the test when neither works."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no user that a read-only copy refuses")
    failures = []
    for prefix in ([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"],
                   [setpriv, "--bounding-set=-all", "--inh-caps=-all"]):
        probe = subprocess.run([*prefix, sys.executable, "-c", "import os, sys, notebook_builder.cli; "
                                "sys.exit(0 if not os.access(sys.argv[1], os.W_OK) else 3)",
                                str(scratch)], env=_reader_env(scratch), capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return prefix
        failures.append(f"{prefix[1]}: {probe.stderr.strip()[-200:] or probe.returncode}")
    pytest.skip("no user here that a read-only copy refuses: " + "; ".join(failures))


def _reader_env(scratch: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KY_")}
    home = scratch.parent / "home"
    home.mkdir(exist_ok=True)
    os.chmod(home, 0o777)
    env.update({"PYTHONPATH": str(REPO_ROOT), "HOME": str(home), "MPLCONFIGDIR": str(home)})
    return env


def _command(name: str, workspace: Path, case_number: str, out: Path) -> list[str]:
    flags = ["--workspace", str(workspace)]
    return {"status": ["status", *flags], "show": ["show", case_number, *flags],
            "search": ["search", "court", *flags], "export": ["export", "--format", "csv", "--out", str(out), *flags],
            "report": ["report", *flags], "verify": ["verify", *flags]}[name]


def _run(prefix: list[str], args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "notebook_builder", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def _serve_and_stop(prefix: list[str], workspace: Path, env: dict[str, str]) -> str:
    """serve of `workspace`: its search page's answer, then SIGTERM; returns its stderr."""
    process = subprocess.Popen([*prefix, sys.executable, "-m", "notebook_builder", "serve", "--port", "0",
                                "--workspace", str(workspace)], env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, line + process.stderr.read()
        with urllib.request.urlopen(f"{url.group(0)}/?q=court", timeout=30) as answer:
            assert answer.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return err


def _status(document: str) -> dict:
    shown = json.loads(document)
    return {key: value for key, value in shown.items() if key not in ("updated_at", "workspace")}


def test_a_read_only_copy_without_sidecars_reads_as_the_original_and_nothing_is_written(archive):
    root, case_number = archive
    original = root / "archive" / "workspace"
    copy = _copy(root, "read-only", read_only=True)
    out = root / "exports"
    out.mkdir()
    os.chmod(out, 0o777)
    prefix = _reader_prefix(copy)
    env = _reader_env(copy)
    before = _tree(copy)
    answers = {}
    for name in READ_COMMANDS:
        done = _run(prefix, _command(name, copy / "workspace", case_number, out / "copy"), env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (name, done.stdout, done.stderr)
        answers[name] = done.stdout
    assert "Traceback" not in _serve_and_stop(prefix, copy / "workspace", env)
    assert _tree(copy) == before                      # nothing written into the copy, not even a -shm

    same = {name: _run([], _command(name, original, case_number, out / "original"), env) for name in
            ("status", "show", "search", "export")}
    assert all(done.returncode == 0 for done in same.values()), {name: done.stderr for name, done in same.items()}
    assert _status(answers["status"]) == _status(same["status"].stdout)
    assert answers["show"] == same["show"].stdout.replace(str(original.parent), str(copy))
    assert answers["search"] == same["search"].stdout
    assert (out / "copy" / "documents.csv").read_bytes() == (out / "original" / "documents.csv").read_bytes()
    assert "chart: not written" in answers["report"] and "all" in answers["report"]
    assert answers["verify"].startswith("verify PASS") and "read-only copy: nothing written" in answers["verify"]


def test_a_writable_copy_gets_no_sidecar_from_the_commands_that_only_read(archive):
    root, case_number = archive
    copy = _copy(root, "writable", read_only=False)
    before = _tree(copy)
    env = _reader_env(copy)
    for name in ("status", "show", "search", "export"):
        done = _run([], _command(name, copy / "workspace", case_number, root / "writable-export"), env)
        assert done.returncode == 0, (name, done.stderr)
    _serve_and_stop([], copy / "workspace", env)
    assert _tree(copy) == before


def test_the_database_the_stores_packs_make_is_read_alone_as_a_workspace(archive):
    root, case_number = archive
    workspace = root / "snapshot" / "workspace"
    workspace.mkdir(parents=True)
    PagePacks(LocalStore(root / "archive" / "store", create=False), "ky_court.sqlite",
              root / "snapshot" / "checkpoint").restore(workspace / "ky_court.sqlite")
    os.chmod(workspace / "ky_court.sqlite", 0o444)
    os.chmod(workspace, 0o555)
    before = _tree(workspace)
    env = _reader_env(workspace)
    prefix = _reader_prefix(workspace)
    shown = _run(prefix, ["status", "--workspace", str(workspace)], env)
    assert shown.returncode == 0, shown.stderr
    original = _run([], ["status", "--workspace", str(root / "archive" / "workspace")], env)
    assert json.loads(shown.stdout)["counts"] == json.loads(original.stdout)["counts"]
    assert _run(prefix, ["show", case_number, "--workspace", str(workspace)], env).returncode == 0
    assert _tree(workspace) == before


# ------------------------------------------------ a path that holds no archive is never made one


def _writable_archive(archive_root: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A writable copy of the archive's folder under tmp_path: (workspace, store)."""
    copy = tmp_path / "archive"
    shutil.copytree(archive_root / "archive", copy)
    return copy / "workspace", copy / "store"


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(name in err[0] for name in names), err
    return err[0]


@pytest.mark.parametrize("command", [["verify"], ["report"], ["derive"], ["index"],
                                     ["run", "--phases", "extract", "--dry-run"]])
def test_a_store_path_with_a_typo_is_refused_naming_it_and_nothing_is_made(archive, tmp_path, capsys, command):
    workspace, store = _writable_archive(archive[0], tmp_path)
    typo = tmp_path / "stroe"
    before = _tree(tmp_path)
    assert main([*command, "--workspace", str(workspace), "--store", str(typo)]) == 2
    assert "(a typo?)" in _one_line(capsys, str(typo), str(store))
    assert _tree(tmp_path) == before


def test_a_workspace_that_is_a_file_is_refused_and_no_store_is_left(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    assert main(["run", "--dry-run", "--workspace", str(afile), "--store", str(tmp_path / "st2")]) == 2
    _one_line(capsys, str(afile))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]


def test_run_without_a_store_mirrors_to_the_store_the_workspace_names(archive, tmp_path, capsys, monkeypatch):
    workspace, store = _writable_archive(archive[0], tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KY_STORE", raising=False)
    assert main(["run", "--phases", "extract", "--dry-run", "--workspace", str(workspace)]) == 0, capsys.readouterr()
    assert not (tmp_path / "ky_court_store").exists()
    assert json.loads((workspace / "status.json").read_text())["store"] == str(store)


def test_a_moved_store_is_named_not_remade_and_is_used_where_it_is_named(archive, tmp_path, capsys, monkeypatch):
    workspace, store = _writable_archive(archive[0], tmp_path)
    moved = tmp_path / "moved-store"
    shutil.move(store, moved)
    monkeypatch.delenv("KY_STORE", raising=False)
    assert main(["verify", "--workspace", str(workspace)]) == 2
    assert "moved or deleted?" in _one_line(capsys, str(store))
    assert main(["run", "--phases", "extract", "--dry-run", "--workspace", str(workspace)]) == 2
    _one_line(capsys, str(store))
    assert not store.exists()
    assert main(["run", "--phases", "extract", "--dry-run", "--workspace", str(workspace), "--store", str(moved)]) == 0
    assert json.loads((workspace / "status.json").read_text())["store"] == str(moved)
    capsys.readouterr()
    assert main(["verify", "--workspace", str(workspace)]) == 0, capsys.readouterr()


def test_a_copied_folder_of_workspace_and_store_verifies_against_its_own_store(archive, tmp_path, capsys, monkeypatch):
    """status.json names the store beside the workspace relatively too (store_relative): a copy of
    the folder reads and writes its own store, never the original's."""
    root = archive[0]
    original = root / "archive" / "store"
    assert json.loads((root / "archive" / "workspace" / "status.json").read_text())["store_relative"] == "../store"
    workspace, store = _writable_archive(root, tmp_path)
    monkeypatch.delenv("KY_STORE", raising=False)
    before = _tree(original)
    assert main(["verify", "--workspace", str(workspace)]) == 0, capsys.readouterr()
    assert _tree(original) == before
    assert json.loads((workspace / "status.json").read_text())["store"] == str(store)
