"""The command line of CONTRACT.md."""
import json
import re
import subprocess
import sys

import pytest

from notebook_builder.cli import build_parser, main


def _run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "notebook_builder", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


def test_help_lists_every_contract_command():
    done = _run("--help")
    assert done.returncode == 0
    for command in ("run", "verify", "status", "demo", "sim"):
        assert command in done.stdout


@pytest.mark.parametrize("command", ["status", "verify", "report"])
@pytest.mark.parametrize("workspace_state", ["missing", "empty"])
def test_looking_at_a_folder_with_no_archive_says_so_exits_2_and_writes_nothing(
        tmp_path, workspace_state, command, capsys):
    workspace, store = tmp_path / "ws", tmp_path / "store"
    if workspace_state == "empty":
        workspace.mkdir()
    flags = ["--workspace", str(workspace)] + (["--store", str(store)] if command != "status" else [])
    assert main([command, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(workspace) in err[0] and "kycourt-pipeline run" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == (["ws"] if workspace_state == "empty" else [])
    assert not workspace.exists() or list(workspace.iterdir()) == []


def test_report_in_an_empty_directory_creates_nothing(tmp_path):
    done = _run("report", cwd=tmp_path)
    assert done.returncode == 2 and "no workspace at" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command, flag", [
    ("status", "--budget"), ("status", "--dry-run"), ("status", "--store"), ("status", "--phases"),
    ("verify", "--budget"), ("verify", "--retry-hard"), ("verify", "--api-base"), ("verify", "--phases"),
    ("report", "--dry-run"), ("report", "--budget"),
])
def test_commands_refuse_flags_they_do_not_use(command, flag, capsys):
    value = [] if flag in ("--dry-run", "--retry-hard") else ["1"]
    with pytest.raises(SystemExit) as exited:
        main([command, flag, *value])
    assert exited.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_status_of_a_workspace_prints_its_json_and_writes_nothing(tmp_path, capsys):
    from notebook_builder.cells.c10_database import Database
    workspace = tmp_path / "ws"
    Database.open(workspace / "ky_court.sqlite").close()
    before = (workspace / "ky_court.sqlite").read_bytes()
    assert main(["status", "--workspace", str(workspace)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["counts"] == {"discovered": 0, "downloaded": 0, "extracted": 0, "failed": 0}
    assert document["done"] is False and document["remaining"] == "0 to download, 0 to extract, " \
        "discovery not converged"
    assert (workspace / "ky_court.sqlite").read_bytes() == before
    # SQLite's own shared-memory files of a read-only connection, and nothing else
    assert {p.name for p in workspace.iterdir()} <= {"ky_court.sqlite", "ky_court.sqlite-wal", "ky_court.sqlite-shm"}


def test_flags_override_the_environment():
    from notebook_builder.cli import config_from_args
    args = build_parser().parse_args(["run", "--budget", "12", "--phases", "download", "--retry-hard"])
    cfg = config_from_args(args, env={"KY_BUDGET": "99", "KY_PHASES": "discover"})
    assert cfg.BUDGET_SECONDS == 12 and cfg.PHASES == ("download",) and cfg.RETRY_HARD


def test_bad_flag_value_exits_2_with_one_line(capsys):
    assert main(["run", "--budget", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "KY_BUDGET" in err[0]


def test_a_store_that_cannot_be_opened_exits_2_and_writes_no_workspace(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    workspace = tmp_path / "ws"
    assert main(["run", "--workspace", str(workspace), "--store", str(blocker / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "store" in err[0]
    assert not workspace.exists()


def test_an_empty_store_flag_is_refused_not_taken_as_the_current_directory(capsys):
    assert main(["run", "--store", "  "]) == 2
    assert "KY_STORE" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline_to_pass_whatever_ky_variables_the_user_exported(tmp_path):
    import os
    env = {**os.environ, "KY_DRY": "1", "KY_PHASES": "discover", "KY_STORE": "drive", "KY_WORKERS": "x"}
    done = _run("demo", "--docs", "40", env=env, cwd=tmp_path)   # 40 documents still hold a dozen faults

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ignoring KY_DRY, KY_PHASES, KY_STORE, KY_WORKERS" in done.stdout
    for stage in ("restore", "discover", "backfill", "download", "extract", "ocr", "derive", "index", "verify"):
        lines = [line for line in done.stdout.splitlines() if line.split()[:1] == [stage]]
        assert lines, stage
        assert "=" not in lines[0], f"internal counters in the summary: {lines[0]}"
    assert "WARNING lines below are those simulated faults" in done.stdout
    assert re.search(r"served [1-9]\d* simulated faults", done.stdout)
    assert "verify PASS" in done.stdout and "done: yes" in done.stdout
    status = json.loads((tmp_path / "demo" / "store" / "status.json").read_text())
    assert status["done"] is True and status["verify"] == "PASS"
    assert status["counts"]["extracted"] > 0 and sum(status["counts"].values()) == 40
