"""The command line of CONTRACT.md."""
import json
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


@pytest.mark.parametrize("workspace_state", ["missing", "empty"])
def test_status_on_a_missing_or_empty_workspace_prints_valid_json(tmp_path, workspace_state, capsys):
    workspace = tmp_path / "ws"
    if workspace_state == "empty":
        workspace.mkdir()
    assert main(["status", "--workspace", str(workspace)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["counts"] == {"discovered": 0, "downloaded": 0, "extracted": 0, "failed": 0}
    assert document["queues"] == {"download": 0, "extract": 0}
    assert document["done"] is False and document["verify"] is None
    assert workspace.exists() == (workspace_state == "empty")  # status writes nothing


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


def test_demo_runs_the_whole_pipeline_to_pass_whatever_ky_variables_the_user_exported(tmp_path):
    import os
    env = {**os.environ, "KY_DRY": "1", "KY_PHASES": "discover", "KY_STORE": "drive", "KY_WORKERS": "x"}
    done = _run("demo", "--docs", "120", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ignoring KY_DRY, KY_PHASES, KY_STORE, KY_WORKERS" in done.stdout
    for stage in ("restore", "discover", "backfill", "download", "extract", "verify"):
        assert any(line.split()[:1] == [stage] for line in done.stdout.splitlines()), stage
    assert "verify PASS" in done.stdout and "done: yes" in done.stdout
    status = json.loads((tmp_path / "demo" / "store" / "status.json").read_text())
    assert status["done"] is True and status["verify"] == "PASS"
    assert status["counts"]["extracted"] > 0 and sum(status["counts"].values()) == 120
