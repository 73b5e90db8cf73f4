"""Court systems as configuration: the knob, the registry, `courts`, the days of each system's zone,
the schema's access state and opinion mark, and a workspace and store bound to one court system."""
from __future__ import annotations

import datetime as dt
import json
import os
import zoneinfo
from pathlib import Path

import pytest

from notebook_builder import cli
from notebook_builder.cells.c00_config import (COURT_SYSTEMS, REAL_API_BASE, ConfigError, CourtSystemMismatch,
                                               court_day, load_config)
from notebook_builder.cells.c12_queues import WorkQueues, not_public_reason
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c27_court_systems import COURTS, court_system, describe_all
from notebook_builder.cells.c35_context import archive_court_system, court_system_conflict, open_context, status_document

NAMES = ["kentucky", "delaware-county-pa", "nevada", "alabama", "oregon", "north-dakota", "wyoming", "florida"]


# ---------------------------------------------------------------- the knob


def test_every_court_system_is_a_name_of_the_knob_and_kentucky_is_the_default():
    assert list(COURT_SYSTEMS) == NAMES == list(COURTS)
    assert load_config({}).COURT_SYSTEM == "kentucky"
    assert load_config({"KY_COURT_SYSTEM": " Nevada "}).COURT_SYSTEM == "nevada"
    with pytest.raises(ConfigError, match="KY_COURT_SYSTEM='texas' is not valid: expected one of kentucky"):
        load_config({"KY_COURT_SYSTEM": "texas"})


def test_a_bad_court_system_flag_exits_2_naming_the_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--workspace", str(tmp_path / "w"), "--court-system", "texas"])
    assert exited.value.code == 2
    assert "--court-system: 'texas' is not valid" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_the_api_base_is_the_systems_unless_ky_api_base_gives_one():
    assert load_config({}).API_BASE == REAL_API_BASE
    assert load_config({"KY_COURT_SYSTEM": "nevada"}).API_BASE == "https://acis-api.nvcourts.gov"
    assert load_config({"KY_COURT_SYSTEM": "alabama", "KY_API_BASE": ""}).API_BASE == COURT_SYSTEMS["alabama"].api_base
    given = load_config({"KY_COURT_SYSTEM": "nevada", "KY_API_BASE": "http://127.0.0.1:9/root"})
    assert given.API_BASE == "http://127.0.0.1:9/root"
    assert load_config({"KY_COURT_SYSTEM": "oregon"}, API_BASE="http://127.0.0.1:8/").API_BASE == "http://127.0.0.1:8/"


def test_today_and_a_court_day_are_in_the_systems_time_zone():
    nevada, kentucky = load_config({"KY_COURT_SYSTEM": "nevada"}), load_config({})
    assert nevada.time_zone == "America/Los_Angeles" and kentucky.time_zone == "America/New_York"
    assert load_config({"KY_COURT_SYSTEM": "wyoming"}).time_zone == "America/Denver"
    assert load_config({"KY_COURT_SYSTEM": "north-dakota"}).time_zone == "America/Chicago"
    before = dt.datetime.now(zoneinfo.ZoneInfo("America/Los_Angeles")).date()
    assert nevada.today() in (before, dt.datetime.now(zoneinfo.ZoneInfo("America/Los_Angeles")).date())
    # 06:30 UTC on New Year's Day is New Year's Eve in Las Vegas and New Year's Day in Frankfort.
    instant = "2026-01-01T06:30:00.000+00:00"
    assert nevada.court_day(instant) == "2025-12-31" and kentucky.court_day(instant) == "2026-01-01"
    assert court_day("2026-01-01T00:00:00.000-08:00", "America/Los_Angeles") == "2026-01-01"
    assert load_config({"KY_COURT_SYSTEM": "nevada", "KY_TODAY": "2026-03-01"}).today() == dt.date(2026, 3, 1)


# ------------------------------------------------------------ the registry


def test_each_court_answers_the_seams_questions():
    for name in NAMES:
        court = court_system(name)
        assert court.system == name and court.family in ("ctrack", "trportal")
        assert court.time_zone == COURT_SYSTEMS[name].time_zone and court.api_base == COURT_SYSTEMS[name].api_base
        assert court.courts and all(isinstance(code, str) and court.api_ids(code) for code in court.courts)
    with pytest.raises(ConfigError):
        court_system("texas")


def test_tr_portal_courts_carry_the_readmes_ids_and_read_their_case_numbers():
    nevada = court_system("nevada")
    assert nevada.family == "trportal" and nevada.courts == {"SC": "Nevada Supreme Court", "COA": "Nevada Court of Appeals"}
    assert nevada.api_ids("SC") == {"guid": "dc01122c-a19d-4eb7-bfe9-5b96e93c26fd", "court_id": "1",
                                    "abbreviation": "Supreme Court"}
    assert nevada.api_ids("COA")["guid"] == "74764f58-a87f-4ec5-8233-7a1255e410b3"
    assert nevada.code_of("90509") == "SC" and nevada.code_of("90082-COA") == "COA" and nevada.code_of("x-1") is None
    assert nevada.court_of("90082-coa") == "Nevada Court of Appeals"
    alabama = court_system("alabama")
    assert [alabama.api_ids(code)["court_id"] for code in alabama.courts] == ["1", "3", "2"]
    assert alabama.code_of("SC-2024-0492") == "SC" and alabama.code_of("CR-2023-0911") == "CR"
    assert court_system("oregon").code_of("A190411") == "CA" and court_system("oregon").code_of("S072851") == "SC"
    assert court_system("florida").code_of("4D2024-0001") == "4D" and court_system("florida").code_of("SC2026-0899") == "SC"
    assert court_system("wyoming").code_of("anything") == "SC"      # one court: every number is its
    kentucky = court_system("kentucky")
    assert kentucky.family == "ctrack" and kentucky.code_of("2019-CA-0012") == "CA"
    assert kentucky.court_of("2024 SC ADMIN - 001") == "Kentucky Supreme Court"


def test_courts_lists_every_system_and_json_describes_each(capsys):
    assert cli.main(["courts", "--json"]) == 0
    systems = json.loads(capsys.readouterr().out)
    assert [system["name"] for system in systems] == NAMES == [system["name"] for system in describe_all()]
    nevada = systems[NAMES.index("nevada")]
    assert nevada["family"] == "trportal" and nevada["api_base"] == "https://acis-api.nvcourts.gov"
    assert nevada["portal"] == "https://acis.nvcourts.gov"
    assert [court["code"] for court in nevada["courts"]] == ["SC", "COA"]
    assert nevada["courts"][1]["ids"]["court_id"] == "2"
    assert any("90082-COA" in form for form in nevada["case_number_forms"])
    assert "1000014" in nevada["opinions"] and nevada["verified"] and nevada["inferred"]
    assert systems[0]["default"] and not nevada["default"]
    assert cli.main(["courts"]) == 0
    text = capsys.readouterr().out
    assert text.count("\n  court ") == sum(len(system["courts"]) for system in systems)
    assert "nevada: Nevada Supreme Court and Court of Appeals" in text


# --------------------------------------------------------------- schema


def test_a_document_not_public_is_kept_out_of_the_queue_and_counted_apart(make_context):
    ctx = make_context(name="ws")
    db = ctx.open_database()
    DiscoveryState(db).upsert_discovered([{"document_id": name} for name in ("public", "paid", "login", "withheld")])
    db.conn.execute("UPDATE documents SET document_available = 0, access_state = 'purchasable' WHERE document_id = 'paid'")
    db.conn.execute("UPDATE documents SET document_available = 0, access_state = 'unavailable' WHERE document_id = 'login'")
    db.conn.execute("UPDATE documents SET document_available = 0, status = 'failed', http_status = 404 "
                    "WHERE document_id = 'withheld'")
    queued = [row["document_id"] for row in WorkQueues(db).download_queue(ctx.cfg, 10)]
    assert queued == ["public"]
    document = status_document(db, ctx.cfg, phase="none")
    assert document["final_states"]["not_public"] == 2
    assert document["final_states"]["not_public_reasons"] == {"purchase": 1, "registration": 1}
    assert document["final_states"]["withheld"] == 1 and document["counts"]["failed"] == 1
    assert "discovered 3 = 2 not public at the court (purchase 1, registration 1) + 1 to download" \
        in document["counts_explained"]
    assert DiscoveryState(db).withheld_count() == 1      # not public is not withheld
    assert not_public_reason("in_cart") == "purchase" and not_public_reason(None) is None


def test_a_document_the_court_marks_an_opinion_is_queued_first_whatever_its_words(make_context):
    ctx = make_context(name="ws")
    db = ctx.open_database()
    DiscoveryState(db).upsert_discovered([{"document_id": name} for name in ("brief", "kentucky", "marked", "says")])
    db.conn.execute("UPDATE documents SET description = 'OPINION AFFIRMING' WHERE document_id IN ('kentucky', 'says')")
    db.conn.execute("UPDATE documents SET opinion = 1, description = 'Dispositional decision' WHERE document_id = 'marked'")
    db.conn.execute("UPDATE documents SET opinion = 0 WHERE document_id = 'says'")
    queued = [row["document_id"] for row in WorkQueues(db).download_queue(ctx.cfg, 10)]
    assert queued == ["kentucky", "marked", "brief", "says"]
    assert WorkQueues(db).opinions_to_download(ctx.cfg) == 2


# ------------------------------------------------ one archive, one system


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(root.rglob("*"))}


def test_a_run_of_another_system_on_a_workspace_exits_2_and_writes_nothing(tmp_path, capsys):
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    store.mkdir()
    (ws / "status.json").write_text(json.dumps({"court_system": "kentucky", "store": str(store)}))
    before = _listing(tmp_path)
    assert cli.main(["run", "--workspace", str(ws), "--store", str(store), "--court-system", "nevada"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the workspace {ws} belongs to court system kentucky" in err
    assert "--court-system nevada would mix two archives: use another workspace" in err
    assert _listing(tmp_path) == before
    env = {"KY_WORKSPACE": str(ws), "KY_STORE": str(store), "KY_COURT_SYSTEM": "alabama"}
    with pytest.raises(CourtSystemMismatch, match="belongs to court system kentucky"):
        open_context(load_config(env))
    assert _listing(tmp_path) == before


def test_an_archive_that_records_no_system_is_kentuckys(tmp_path, capsys):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "status.json").write_text(json.dumps({"phase": "verify"}))      # written before court systems
    assert archive_court_system(ws) == "kentucky" and archive_court_system(tmp_path / "none") is None
    before = _listing(tmp_path)
    for command in ("verify", "report", "derive", "index"):
        assert cli.main([command, "--workspace", str(ws), "--court-system", "florida"]) == 2, command
        assert "belongs to court system kentucky" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_a_store_of_another_system_is_refused_for_a_new_workspace(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "status.json").write_text(json.dumps({"court_system": "nevada"}))
    before = _listing(tmp_path)
    assert cli.main(["run", "--workspace", str(tmp_path / "ws"), "--store", str(store)]) == 2
    assert f"the store {store} belongs to court system nevada; --court-system kentucky would mix two archives: " \
           "use another store" in capsys.readouterr().err
    assert _listing(tmp_path) == before
    assert court_system_conflict(load_config({"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(store),
                                              "KY_COURT_SYSTEM": "nevada"})) is None


def test_a_run_binds_its_archive_and_a_command_given_no_system_takes_the_archives(tmp_path, capsys):
    ws, store = tmp_path / "ws", tmp_path / "store"
    env = {"KY_WORKSPACE": str(ws), "KY_STORE": str(store), "KY_COURT_SYSTEM": "nevada", "KY_PROGRESS": "0"}
    cfg = load_config(env)
    ctx = open_context(cfg)
    try:
        db = ctx.open_database()
        assert db.kv_get("court_system") == "nevada"
        assert status_document(db, cfg, phase="none")["court_system"] == "nevada"
        from notebook_builder.cells.c35_context import write_status
        write_status(ctx)
    finally:
        ctx.close()
    assert json.loads((store / "status.json").read_text())["court_system"] == "nevada"
    assert archive_court_system(ws) == "nevada"
    os.remove(ws / "status.json")                      # the database alone says it too
    assert archive_court_system(ws) == "nevada"
    assert cli.main(["status", "--workspace", str(ws)]) == 0
    assert json.loads(capsys.readouterr().out)["court_system"] == "nevada"
    assert cli.main(["run", "--workspace", str(ws), "--court-system", "kentucky", "--dry-run"]) == 2
    assert "belongs to court system nevada" in capsys.readouterr().err


def test_restore_refuses_a_stores_state_of_another_system(tmp_path):
    from notebook_builder.cells.c40_restore import restore
    nevada = load_config({"KY_WORKSPACE": str(tmp_path / "nv"), "KY_STORE": str(tmp_path / "nv-store"),
                          "KY_COURT_SYSTEM": "nevada"})
    ctx = open_context(nevada)
    ctx.open_database()
    ctx.close()
    store = tmp_path / "drive-like"        # a store whose status.json is not read before restore (Drive's)
    store.mkdir()
    (store / "ky_court.sqlite").write_bytes((tmp_path / "nv" / "ky_court.sqlite").read_bytes())
    kentucky = load_config({"KY_WORKSPACE": str(tmp_path / "ky"), "KY_STORE": str(store)})
    ctx = open_context(kentucky)
    try:
        with pytest.raises(CourtSystemMismatch, match="belongs to court system nevada"):
            restore(ctx)
        assert not (tmp_path / "ky" / "ky_court.sqlite").exists()
    finally:
        ctx.close()
