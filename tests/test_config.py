"""CFG: defaults, env overrides, one clear error per bad value, nothing written."""
import os
import subprocess
import sys

import pytest

from notebook_builder.cells.c00_config import KNOBS, ConfigError, RunClock, load_config


def test_defaults_match_the_original_pipeline():
    cfg = load_config({})
    assert cfg.BUDGET_SECONDS == 10 * 3600
    assert cfg.SHUTDOWN_SECONDS == 15 * 60
    assert cfg.PACING_SEARCH == (0.3, 0.7) and cfg.PACING_DL == (0.3, 0.5)
    assert cfg.MAX_ATTEMPTS == 4 and cfg.MAX_EXTRACT_ATTEMPTS == 3
    assert cfg.MAX_PDF_BYTES == 200 * 1024 * 1024
    assert cfg.PHASES == ("discover", "backfill", "download", "extract", "ocr", "derive", "index")
    assert (cfg.BACKOFF_BASE, cfg.BACKOFF_CAP) == (5.0, 60.0)
    assert cfg.RETRY_HARD is False and cfg.DRY_RUN is False and cfg.LIVE is False
    assert cfg.DOWNLOAD_BATCH == 50 and cfg.EXTRACT_BATCH == 500


def test_env_overrides_are_parsed_to_their_types():
    cfg = load_config({"KY_BUDGET": "90", "KY_PHASES": "extract, discover", "KY_PACING": "0",
                       "KY_RETRY_HARD": "1", "KY_DRY": "true", "KY_MAX_PDF_BYTES": "1024",
                       "KY_PACING_DL": "0.1,0.2", "KY_LIVE": "0"})
    assert cfg.BUDGET_SECONDS == 90.0
    assert cfg.PHASES == ("discover", "extract")  # pipeline order, not typed order
    assert cfg.PACING == 0 and cfg.RETRY_HARD and cfg.DRY_RUN and not cfg.LIVE
    assert cfg.MAX_PDF_BYTES == 1024 and cfg.PACING_DL == (0.1, 0.2)


def test_overrides_beat_the_environment():
    cfg = load_config({"KY_BUDGET": "9000"}, BUDGET_SECONDS="3000", WORKSPACE=None)
    assert cfg.BUDGET_SECONDS == 3000.0
    assert cfg.WORKSPACE == os.path.abspath("ky_court_workspace")


def test_relative_workspace_and_store_are_made_absolute_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config({"KY_WORKSPACE": "w", "KY_STORE": "~/s"})
    assert cfg.WORKSPACE == str(tmp_path / "w")
    assert cfg.STORE == os.path.join(os.path.expanduser("~"), "s")
    assert load_config({"KY_STORE": "drive"}).STORE == "drive"


@pytest.mark.parametrize("env", [{"KY_PHASES": ""}, {"KY_PHASES": " , "}, {"KY_API_BASE": "http://"},
                                 {"KY_API_BASE": "https:///api"}, {"KY_API_BASE": "http://host:port/x"}],
                         ids=["empty phases", "blank phases", "no host", "empty host", "bad port"])
def test_configuration_that_would_silently_do_nothing_is_one_clear_error(env):
    with pytest.raises(ConfigError) as caught:
        load_config(env)
    assert next(iter(env)) in str(caught.value)


def test_a_shutdown_margin_longer_than_half_the_budget_is_scaled_with_a_warning(caplog):
    cfg = load_config({}, BUDGET_SECONDS="600")
    assert cfg.SHUTDOWN_SECONDS == 60.0
    assert len(cfg.warnings) == 1 and "KY_SHUTDOWN=900" in cfg.warnings[0] and "600" in cfg.warnings[0]
    assert cfg.warnings[0] in caplog.text
    clock = RunClock(cfg.BUDGET_SECONDS, cfg.SHUTDOWN_SECONDS)
    assert not clock.should_stop() and clock.remaining() > 500
    untouched = load_config({"KY_BUDGET": "3600", "KY_SHUTDOWN": "900"})
    assert untouched.SHUTDOWN_SECONDS == 900.0 and untouched.warnings == ()


@pytest.mark.parametrize("variable,value", [
    ("KY_BUDGET", "abc"), ("KY_BUDGET", "-5"), ("KY_PHASES", "discover,teleport"),
    ("KY_MAX_ATTEMPTS", "-1"), ("KY_DOWNLOAD_BATCH", "0"), ("KY_PACING_DL", "0.5"),
    ("KY_RETRY_HARD", "maybe"), ("KY_API_BASE", "ftp://x"), ("KY_EXTRACT_ENGINES", "ocr"), ("KY_EXTRACT_ENGINES", "pypdf,pypdf"), ("KY_OCR_ENGINE", "gocr"),
    ("KY_BACKOFF_BASE", "nan"), ("KY_PROGRESS", "quiet"),
])
def test_bad_value_names_the_variable_and_the_accepted_form(variable, value):
    with pytest.raises(ConfigError) as caught:
        load_config({variable: value})
    message = str(caught.value)
    assert variable in message and repr(value) in message and "expected" in message


def test_every_knob_default_parses_from_its_own_env_form():
    for knob in KNOBS:
        assert knob.accepted and knob.help, knob.name


@pytest.mark.parametrize("variable,value", [("KY_BUDGET", "abc"), ("KY_PHASES", "nope"),
                                             ("KY_MAX_ATTEMPTS", "-3"), ("KY_PHASES", ""),
                                             ("KY_API_BASE", "http://")])
def test_cli_exits_2_with_one_line_and_writes_nothing(tmp_path, variable, value):
    workspace, store = tmp_path / "ws", tmp_path / "store"
    env = {"PATH": "/usr/bin:/bin", variable: value, "KY_WORKSPACE": str(workspace), "KY_STORE": str(store)}
    done = subprocess.run([sys.executable, "-m", "notebook_builder", "run"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0]
    assert not workspace.exists() and not store.exists()


def test_clock_stops_at_budget_minus_shutdown_and_on_request():
    now = [0.0]
    clock = RunClock(100, 15, now=lambda: now[0])
    assert not clock.should_stop()
    now[0] = 84.9
    assert not clock.should_stop()
    now[0] = 85.0
    assert clock.should_stop() and clock.stop_reason == "budget" and not clock.interrupted
    other = RunClock(100, 0)
    other.request_stop("SIGINT")
    assert other.should_stop() and other.interrupted
    assert other.sleep(5) is False  # an interrupted clock does not sleep


def test_progress_bars_follow_the_progress_knob():
    from notebook_builder.cells.c34_mirror import progress
    with progress(load_config({"KY_PROGRESS": "0"}), 10, "quiet") as bar:
        assert bar.disable
    with progress(load_config({}), 10, "shown") as bar:
        assert not bar.disable


def test_the_old_single_engine_knob_is_refused_with_its_new_name():
    with pytest.raises(ConfigError, match="KY_EXTRACT_ENGINES instead"):
        load_config(env={"KY_EXTRACT_ENGINE": "pypdf"})
    assert load_config(env={"KY_EXTRACT_ENGINES": "pypdf"}).EXTRACT_ENGINES == ("pypdf",)


def test_court_instants_are_kentucky_days_across_a_year_boundary():
    from notebook_builder.cells.c00_config import kentucky_date
    # 8 pm on New Year's Eve in Frankfort is already next year in UTC: the day (and year) is Kentucky's.
    assert kentucky_date("2025-01-01T01:00:00.000+0000") == "2024-12-31"
    assert kentucky_date("2025-01-01T04:59:59.000+0000") == "2024-12-31"
    assert kentucky_date("2025-01-01T05:00:00.000+0000") == "2025-01-01"       # a date-only value (EST midnight)
    assert kentucky_date("2024-07-04T04:00:00.000+0000") == "2024-07-04"       # a date-only value (EDT midnight)
    assert kentucky_date("2024-04-19T00:49:35.000+0000") == "2024-04-18"
    assert kentucky_date("2024-04-19T00:49:35.000+00:00") == "2024-04-18"
    assert kentucky_date("2019-03-01T00:00:00.000-05:00") == "2019-03-01"      # local, with its offset
    assert kentucky_date("2024-12-31") == "2024-12-31" and kentucky_date("2024-12-31T23:30:00Z") == "2024-12-31"
    assert kentucky_date(None) is None and kentucky_date("") is None and kentucky_date("soon") is None
