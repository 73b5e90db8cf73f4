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


def test_a_bad_value_in_the_environment_is_named_by_its_variable(capsys, monkeypatch):
    monkeypatch.setenv("KY_BUDGET", "soon")
    assert main(["run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "KY_BUDGET='soon' is not valid" in err[0]


def test_a_store_that_cannot_be_opened_exits_2_and_writes_no_workspace(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    workspace = tmp_path / "ws"
    assert main(["run", "--workspace", str(workspace), "--store", str(blocker / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "store" in err[0]
    assert not workspace.exists()


def test_an_empty_store_flag_is_refused_not_taken_as_the_current_directory(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run", "--store", "  "])
    assert exited.value.code == 2
    assert "argument --store: '  ' is not valid: expected a directory path" in capsys.readouterr().err

# ------------------------------------------------- every error one line, exit 2, nothing written


@pytest.mark.parametrize("argv, flag, expected", [
    (["run", "--budget", "soon"], "--budget", "a positive number of seconds"),
    (["run", "--api-base", "ftp://court"], "--api-base", "an http(s) URL"),
    (["demo", "--docs", "0"], "--docs", "an integer >= 1"),
    (["demo", "--docs", "-5"], "--docs", "an integer >= 1"),
    (["sim", "--docs", "-1"], "--docs", "an integer >= 0"),
    (["sim", "--port", "99999"], "--port", "a TCP port from 0 to 65535"),
    (["sim", "--docs", "3", "--late-docs", "5"], "--late-docs", "is more than --docs 3"),
    (["search", "x", "--limit", "0"], "--limit", "an integer >= 1"),
    (["search", "x", "--year", "nineteen"], "--year", "a year like 2019"),
    (["serve", "--port", "-1"], "--port", "a TCP port"),
])
def test_a_bad_flag_value_prints_the_commands_usage_and_names_the_flag(argv, flag, expected, capsys, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(f"usage: kycourt-pipeline {argv[0]} ")
    error = err.strip().splitlines()[-1]
    assert error.startswith(f"kycourt-pipeline {argv[0]}: error: argument {flag}") and expected in error
    assert "KY_" not in error
    assert list(tmp_path.iterdir()) == []


def test_demo_into_a_folder_that_cannot_be_made_is_one_line(capsys, tmp_path):
    assert main(["demo", "--workspace", "/dev/null/x"]) == 2
    err = capsys.readouterr().err
    assert err == "kycourt-pipeline: cannot create the demo folder /dev/null/x: Not a directory\n"


def test_sim_on_a_busy_port_is_one_line(tmp_path):
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        done = _run("sim", "--docs", "5", "--port", str(busy.getsockname()[1]))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "is in use: choose another with --port" in done.stderr


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_status_into_a_pipe_closed_early_says_nothing(tmp_path, unbuffered):
    """`kycourt-pipeline status | head -5`: the reader leaves; no BrokenPipeError, no traceback,
    whether stdout is block-buffered (a user's shell) or not (PYTHONUNBUFFERED=1)."""
    import os
    from notebook_builder.cells.c10_database import Database
    Database.open(tmp_path / "ws" / "ky_court.sqlite").close()
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    process = subprocess.Popen([sys.executable, "-m", "notebook_builder", "status", "--workspace", str(tmp_path / "ws")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    process.stdout.close()                      # the reader is gone before anything is written
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141 and err == ""


def test_a_demo_folder_given_as_workspace_says_where_its_archive_is(tmp_path, capsys):
    from notebook_builder.cells.c10_database import Database
    Database.open(tmp_path / "demo" / "workspace" / "ky_court.sqlite").close()
    for command in ("status", "search", "show"):
        argv = [command, "--workspace", str(tmp_path / "demo")] + (["x"] if command != "status" else [])
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"it is a demo folder, the archive is in {tmp_path / 'demo' / 'workspace'}" in err
        assert f"--workspace {tmp_path / 'demo' / 'workspace'}" in err


def test_query_commands_find_the_store_the_workspace_names(tmp_path, capsys, monkeypatch):
    """A run records its store in status.json; show, report and export read it without --store."""
    from archive_fixture import build_archive, document_id
    from notebook_builder.cells.c35_context import open_context, write_status
    cfg = build_archive(tmp_path / "archive")
    ctx = open_context(cfg)
    ctx.open_database()
    write_status(ctx)
    ctx.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KY_STORE", raising=False)
    assert main(["show", document_id(0), "--workspace", cfg.WORKSPACE]) == 0
    out = capsys.readouterr().out
    assert re.search(r"pdf\s+pdf_by_hash/\S+: workspace \d+ bytes; store \d+ bytes", out), out
    assert "NOT in the store" not in out and "no store at" not in out
    assert main(["status", "--workspace", cfg.WORKSPACE]) == 0
    assert json.loads(capsys.readouterr().out)["store"] == cfg.STORE
    assert not (tmp_path / "ky_court_store").exists()         # the default store was never made
    assert main(["show", document_id(0), "--workspace", cfg.WORKSPACE, "--store", str(tmp_path / "elsewhere")]) == 0
    assert f"no store at {tmp_path / 'elsewhere'}" in capsys.readouterr().out   # a flag still wins
    assert not (tmp_path / "elsewhere").exists()


def test_the_demo_prints_the_commands_that_query_its_archive():
    from pathlib import Path
    from notebook_builder.cli import demo_next_steps
    text = demo_next_steps(Path("demo") / "workspace", "2019-SC-0003")
    lines = text.splitlines()
    assert lines[0] == "demo: the archive is in demo/workspace; query it with:"
    assert "  kycourt-pipeline status --workspace demo/workspace" in lines
    assert "  kycourt-pipeline search restitution --type order --workspace demo/workspace" in lines
    assert "  kycourt-pipeline show 2019-SC-0003 --workspace demo/workspace" in lines
    assert any(line.startswith("  kycourt-pipeline serve --workspace demo/workspace") for line in lines)
    assert "--store" not in text                                # the workspace names its store


@pytest.mark.slow
def test_the_demo_passes_then_its_printed_commands_and_the_documented_searches_work(tmp_path, capsys, monkeypatch):
    """The README's quick start as a new user runs it, whatever KY_* variables they exported:
    `demo` (its defaults: the first crawl, then the court a month on and the update), then what it
    printed, then docs/searching.md's search examples on its archive; nothing is created beside `demo/`."""
    import os
    import shlex
    from pathlib import Path
    env = {**os.environ, "KY_DRY": "1", "KY_PHASES": "discover", "KY_STORE": "drive", "KY_WORKERS": "x"}
    done = _run("demo", env=env, cwd=tmp_path)

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
    plan_added = int(re.search(r"the court has filed (\d+) documents", done.stdout).group(1))
    assert status["counts"]["extracted"] > 0 and sum(status["counts"].values()) == 400 + plan_added
    assert status["last_update"]["complete"] and status["last_update"]["counts"]["added"] == plan_added
    assert f"the update found {status['last_update']['words']}" in done.stdout
    assert (tmp_path / "demo" / "store" / "feed.atom").is_file()
    assert len(list((tmp_path / "demo" / "store" / "changes").glob("*.jsonl"))) == 1

    for name in [name for name in os.environ if name.startswith("KY_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    # Run as a module, the demo prints `<its python> -m notebook_builder ...` (test_demo runs them as typed).
    printed = [shlex.split(line, comments=True) for line in done.stdout.split("query it with:\n", 1)[1].splitlines()
               if line.startswith("  ")]
    printed = [words[words.index("notebook_builder") + 1:] for words in printed]
    assert [words[0] for words in printed] == ["status", "search", "show", "changes", "export", "serve"]
    for words in printed[:5]:
        assert main(words) == 0, words
        out = capsys.readouterr().out
        if words[0] == "search":
            assert re.match(r"\d+ documents match 'restitution'", out), out[:500]
        if words[0] == "show":
            assert "NOT in the store" not in out and "; store " in out
    searching = (Path(__file__).resolve().parents[1] / "docs" / "searching.md").read_text(encoding="utf-8")
    examples = [line.split("#")[0] for line in searching.splitlines() if line.startswith("kycourt-pipeline search ")]
    assert len(examples) >= 2
    for example in examples:
        assert main([*shlex.split(example)[1:], "--workspace", "demo/workspace"]) == 0, example
        out = capsys.readouterr().out
        assert re.match(r"\d+ documents match", out) or json.loads(out)["total"] > 0, (example, out[:300])
        assert "no hits" not in out
    assert main(["status", "--workspace", "demo"]) == 2
    assert "the archive is in" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["demo"]


@pytest.mark.parametrize("version", [6, 8])
def test_status_and_report_read_an_earlier_versions_database_before_the_run_that_migrates_it(tmp_path, capsys,
                                                                                          version):
    """A user upgrading looks first: `status` and `report` read the last release's database (schema 6)
    as it is, counts and queues included, and change nothing in it."""
    import hashlib
    import sqlite3
    from notebook_builder.cells.c10_database import MIGRATIONS
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    conn = sqlite3.connect(workspace / "ky_court.sqlite")
    for step in range(1, version + 1):
        conn.executescript(MIGRATIONS[step])
    conn.execute("INSERT OR REPLACE INTO kv(key, value) VALUES ('schema_version', ?)", (str(version),))
    conn.executemany("INSERT INTO documents(document_id, status) VALUES (?, ?)",
                     [("a", "discovered"), ("b", "discovered"), ("c", "extracted")])
    conn.commit()
    conn.close()
    before = hashlib.sha256((workspace / "ky_court.sqlite").read_bytes()).hexdigest()
    assert main(["status", "--workspace", str(workspace)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["counts"]["discovered"] == 2 and status["queues"]["download"] == 2 and status["database"] is True
    (tmp_path / "store").mkdir()
    assert main(["report", "--workspace", str(workspace), "--store", str(tmp_path / "store")]) == 0
    assert "queues: download 2" in capsys.readouterr().out
    assert hashlib.sha256((workspace / "ky_court.sqlite").read_bytes()).hexdigest() == before
