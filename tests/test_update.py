"""Keeping up with a living court (issue 37): an update against a court that moved a month on archives
everything it shows at the cost of what changed, records each change once (SIGKILL and a fresh runtime
included), keeps what the court withdrew, and says it all in the change log, the feeds and status.json.
The plan of what the court did is the simulated court's own (living.py), which the pipeline never sees."""
from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import signal
import sqlite3
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from notebook_builder import cli
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c15_discovery_state import Transitions
from notebook_builder.cells.c19_changes import CHANGE_FIELDS, ChangeLog
from notebook_builder.cells.c25_court import KENTUCKY
from notebook_builder.cells.c44_discovery_rules import update_shards
from notebook_builder.cells.c48_update import update_words
from notebook_builder.cells.c89_feed import ATOM, atom_feed
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.cells.c96_web import ArchiveWeb, ServedArchive, web_route
from notebook_builder.simcourt import SimCourt, update_floor

DAY = dt.date(2026, 6, 1)
COURT = dict(docs=300, seed=11, faults=False, shape="captured", document_search="absent", first_year=2012,
             last_year=2026, real_counts=True, today=DAY)


def config(court, workspace: Path, today: dt.date, **knobs):
    return load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.05"},
                       WORKSPACE=str(workspace), STORE=str(workspace.parent / "store"), API_BASE=court.base_url,
                       FIRST_YEAR=2012, LAST_YEAR=2026, TODAY=today.isoformat(), CASE_DETAILS=False,
                       CHECKPOINT_SECONDS=1.0, **knobs)


def crawl_to_done(court, workspace: Path, **knobs) -> None:
    for _ in range(3):
        report = run_pipeline(config(court, workspace, DAY, **knobs), handle_signals=False)
        status = json.loads((workspace / "status.json").read_text())
        if status["discovery_converged"] and not status["queues"]["download"]:
            return
    raise AssertionError(report.summary())


def recorded(workspace: Path) -> list[dict]:
    db = sqlite3.connect(workspace / "ky_court.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in db.execute("SELECT * FROM changes ORDER BY change_id")]
    finally:
        db.close()


def by_kind(records) -> dict[str, dict[str, dict]]:
    kinds: dict[str, dict[str, dict]] = {kind: {} for kind in ("added", "withdrawn", "restored", "changed")}
    for record in records:
        fields = record["fields"]
        kinds[record["change"]][record["document_id"]] = {
            **record, "fields": set(json.loads(fields) if isinstance(fields, str) else fields or [])}
    return kinds


def judge(plan: dict, records: list[dict]) -> None:
    """The changes recorded are the plan's, each once: the same documents added, withdrawn, restored,
    and changed (with the same fields)."""
    pairs = [(record["document_id"], record["change"]) for record in records]
    assert len(pairs) == len(set(pairs)), "a change recorded twice"
    kinds = by_kind(records)
    for kind in ("added", "withdrawn", "restored"):
        assert set(kinds[kind]) == {item["document_id"] for item in plan[kind]}, kind
    assert {document_id: record["fields"] for document_id, record in kinds["changed"].items()} == \
        {item["document_id"]: set(item["fields"]) for item in plan["changed"]}
    assert {record["how"] for record in kinds["withdrawn"].values()} == {item["how"] for item in plan["withdrawn"]}


@pytest.fixture(scope="module")
def updated(tmp_path_factory):
    """A court crawled to done (the whole pipeline), moved 30 days on, and the update run against it."""
    root = tmp_path_factory.mktemp("update")
    workspace = root / "workspace"
    with SimCourt(**COURT) as court:
        crawl_to_done(court, workspace)
        status = json.loads((workspace / "status.json").read_text())
        opinions_from = dt.date.fromisoformat(status["complete_through"]) - dt.timedelta(days=7)
        plan = court.advance(30, seed=1)
        report = run_pipeline(config(court, workspace, dt.date.fromisoformat(plan["today"])), handle_signals=False)
        period = court.stats()["period"]
        floor = update_floor(court.corpus, [plan], KENTUCKY.sweep_shards(2012, 2026), page_size=500,
                             opinions_from=opinions_from)
        yield {"workspace": workspace, "store": root / "store", "plan": plan, "report": report,
               "requests": period["requests"], "endpoints": period["endpoints"], "floor": floor}


def test_the_update_records_what_the_court_did_once_at_the_cost_of_what_changed(updated):
    plan, report = updated["plan"], updated["report"]
    assert report.exit_status == 0, report.summary()
    assert plan["counts"]["added"] and plan["counts"]["withdrawn"] == 2 and plan["counts"]["restored"] == 1
    judge(plan, recorded(updated["workspace"]))
    floor = sum(updated["floor"].values())
    assert updated["requests"] <= 1.1 * floor, (updated["requests"], updated["floor"], updated["endpoints"])
    status = json.loads((updated["workspace"] / "status.json").read_text())
    assert status["complete_through"] == plan["today"] and status["done"]
    last = status["last_update"]
    assert last["complete"] and last["since"] == DAY.isoformat() and last["through"] == plan["today"]
    assert last["counts"] == {kind: len(plan[kind]) for kind in ("added", "withdrawn", "restored", "changed")}
    assert last["requests"] == updated["requests"] and last["words"].startswith(
        f"{len(plan['added'])} new documents, 2 withdrawn, 1 restored")
    assert "update: " + last["words"] in report.summary()


def test_every_new_document_is_archived_and_a_withdrawn_one_is_kept_searchable_never_a_failure(updated):
    workspace, plan = updated["workspace"], updated["plan"]
    db = sqlite3.connect(workspace / "ky_court.sqlite")
    db.row_factory = sqlite3.Row
    rows = {row["document_id"]: row for row in db.execute("SELECT * FROM documents")}
    db.close()
    assert all(rows[item["document_id"]]["status"] == "extracted" for item in plan["added"])
    for item in plan["withdrawn"]:
        row = rows[item["document_id"]]
        assert row["status"] == "extracted" and row["sha256"] and row["withdrawn_on"] == plan["today"]
        assert (workspace / "pdf_by_hash" / f"{row['sha256']}.pdf").is_file()
    index = sqlite3.connect(workspace / "ky_search.sqlite")
    try:                # search still finds them: they stay in the index
        indexed = {row[0] for row in index.execute("SELECT document_id FROM docs")}
    finally:
        index.close()
    assert {item["document_id"] for item in plan["withdrawn"]} <= indexed
    status = json.loads((workspace / "status.json").read_text())
    assert status["verify"] == "PASS" and status["final_states"]["withdrawn"] == 2
    assert "2 withdrawn by the court (kept)" in updated["report"].summary()
    # The report's "withheld by the court" (listed, never held) does not count what it withdrew.
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c15_discovery_state import DiscoveryState
    held = Database.open_readonly(workspace / "ky_court.sqlite")
    try:
        withheld = {row["document_id"] for row in DiscoveryState(held).withheld_documents()}
        assert DiscoveryState(held).withheld_count() == len(withheld)
    finally:
        held.close()
    assert not withheld & {item["document_id"] for item in plan["withdrawn"]}
    site = ServedArchive(workspace=workspace, folder=workspace)
    web = ArchiveWeb(site, datasette_app=None)
    page = web.respond(web_route(f"/document/{plan['withdrawn'][0]['document_id']}"), "")
    assert f"withdrawn by the court on or before {plan['today']}" in page.body.decode()


def test_the_changes_command_prints_the_contract_s_records_oldest_first(updated, capsys):
    workspace, plan = updated["workspace"], updated["plan"]
    assert cli.main(["changes", "--workspace", str(workspace), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records and all(list(record)[:len(CHANGE_FIELDS)] == list(CHANGE_FIELDS) for record in records)
    judge(plan, records)
    assert [record["seen_at"] for record in records] == sorted(record["seen_at"] for record in records)
    added = by_kind(records)["added"]
    assert all(record["court_code"] in ("CA", "SC") and record["sha256"] and record["kind"] for record in added.values())
    assert all(record["seen_at"].endswith("Z") for record in records)
    assert cli.main(["changes", "--workspace", str(workspace), "--since", "2999-01-01"]) == 0
    assert capsys.readouterr().out == ""
    assert cli.main(["changes", "--workspace", str(workspace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(records) and all(record["document_id"] in line for record, line in zip(records, lines))


def test_the_store_holds_the_run_s_changes_and_a_feed_of_them(updated):
    store, plan = updated["store"], updated["plan"]
    files = sorted((store / "changes").glob("*.jsonl"))
    assert len(files) == 1
    judge(plan, [json.loads(line) for line in files[0].read_text().splitlines()])
    feed = ET.parse(store / "feed.atom").getroot()
    assert feed.tag == f"{{{ATOM}}}feed" and feed.find(f"{{{ATOM}}}id") is not None
    entries = feed.findall(f"{{{ATOM}}}entry")
    total = sum(len(plan[kind]) for kind in ("added", "withdrawn", "restored", "changed"))
    assert len(entries) == total and len({entry.find(f"{{{ATOM}}}id").text for entry in entries}) == total
    for entry in entries:
        links = {link.get("rel"): link.get("href") for link in entry.findall(f"{{{ATOM}}}link")}
        assert links["alternate"].startswith("document/")
        if entry.find(f"{{{ATOM}}}title").text.startswith("New: "):
            assert (store / links["enclosure"]).is_file()       # the PDF beside the feed, in the store


def test_serve_answers_the_changes_page_and_both_feeds(updated):
    workspace, plan = updated["workspace"], updated["plan"]
    web = ArchiveWeb(ServedArchive(workspace=workspace, folder=workspace), datasette_app=None)
    page = web.respond(web_route("/changes"), "").body.decode()
    assert all(item["document_id"] in page for item in plan["added"])
    feed = web.respond(web_route("/feed.atom"), "")
    assert feed.status == 200 and feed.content_type.startswith("application/atom+xml")
    assert len(ET.fromstring(feed.body).findall(f"{{{ATOM}}}entry")) == len(recorded(workspace))
    # A saved search: the new documents whose text matches it (an opinion's word), by court and type.
    opinion = next(item for item in plan["added"] if item["opinion"])
    code = "SC" if "Supreme" in opinion["court"] else "CA"
    searched = web.respond(web_route("/feed.atom"), f"q=opinion&court={code}&type=opinion")
    assert searched.status == 200, searched.body
    found = {entry.find(f"{{{ATOM}}}link").get("href").rsplit("/", 1)[1]
             for entry in ET.fromstring(searched.body).findall(f"{{{ATOM}}}entry")}
    assert opinion["document_id"] in found and found <= {item["document_id"] for item in plan["added"]}
    assert web.respond(web_route("/feed.atom"), "q=%22unterminated").status == 200     # any query is read


# ------------------------------------------------------------ SIGKILL, fresh runtime


def _update_in_a_child(workspace: str, base_url: str, today: str) -> None:
    class Court:
        pass
    court = Court()
    court.base_url = base_url
    run_pipeline(config(court, Path(workspace), dt.date.fromisoformat(today), PHASES=("discover", "download")),
                 handle_signals=False)


@pytest.mark.slow
@pytest.mark.parametrize("fresh_runtime", [False, True])
def test_a_sigkill_mid_update_loses_no_change_and_records_none_twice(tmp_path, fresh_runtime):
    workspace = tmp_path / "workspace"
    with SimCourt(**{**COURT, "docs": 200}) as court:
        crawl_to_done(court, workspace, PHASES=("discover", "download"))
        plan = court.advance(30, seed=2)
        child = multiprocessing.get_context("fork").Process(
            target=_update_in_a_child, args=(str(workspace), court.base_url, plan["today"]))
        child.start()
        deadline = time.monotonic() + 60
        while court.stats()["period"]["endpoints"].get("docketentries", 0) < 20 and time.monotonic() < deadline \
                and child.is_alive():
            time.sleep(0.002)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL, "the update ended before the kill"
        killed = len(recorded(workspace))
        if fresh_runtime:       # the workspace is gone with the runtime: the store's state is restored
            workspace = tmp_path / "fresh"
        report = run_pipeline(config(court, workspace, dt.date.fromisoformat(plan["today"]),
                                     PHASES=("discover", "download")), handle_signals=False)
    assert report.exit_status == 0, report.summary()
    assert killed, "the kill came before any change was recorded"
    judge(plan, recorded(workspace))
    exported = [json.loads(line) for path in sorted((tmp_path / "store" / "changes").glob("*.jsonl"))
                for line in path.read_text().splitlines()]
    judge(plan, exported)
    assert json.loads((workspace / "status.json").read_text())["complete_through"] == plan["today"]


# ------------------------------------------------------------ pure pieces


def test_a_change_the_log_holds_already_is_not_recorded_again(tmp_path):
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c15_discovery_state import DiscoveryState
    db = Database.open(tmp_path / "ky_court.sqlite")
    try:
        DiscoveryState(db).upsert_discovered([{"document_id": "d1", "case_number": "2019-CA-0001", "case_title": "A"}])
        log = ChangeLog(db)
        with db.transaction():
            assert log.record("r1", Transitions(withdrawn={"d1": "unavailable"}), "2026-07-01", KENTUCKY.numbers.code_of) == 1
        exported = log.rows(run="r1")
        db.conn.execute("DELETE FROM changes")
        assert log.replay([{**record, "after": None} for record in exported]) == 1     # read back from the store
        with db.transaction():     # the restored snapshot's row says served: the same withdrawal is seen again
            assert log.record("r2", Transitions(withdrawn={"d1": "unavailable"}), "2026-07-02", KENTUCKY.numbers.code_of) == 0
            assert log.record("r2", Transitions(restored=["d1"]), "2026-07-02", KENTUCKY.numbers.code_of) == 1
            assert log.record("r2", Transitions(changed={"d1": {"case_title"}}), "2026-07-02", KENTUCKY.numbers.code_of) == 1
            assert log.record("r3", Transitions(changed={"d1": {"case_title"}}), "2026-07-02", KENTUCKY.numbers.code_of) == 0
        records = log.rows()
        assert [(record["run"], record["change"]) for record in records] == [("r1", "withdrawn"), ("r2", "restored"),
                                                                             ("r2", "changed")]
        assert records[0]["court_code"] == "CA" and records[2]["fields"] == ["case_title"]
        assert db.conn.execute("SELECT withdrawn_on FROM documents").fetchone()[0] is None      # restored
    finally:
        db.close()


def test_the_log_reads_its_court_systems_zone_once_however_many_rows_it_reads(tmp_path):
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c15_discovery_state import DiscoveryState
    db = Database.open(tmp_path / "ky_court.sqlite")
    try:
        ids = [f"d{number}" for number in range(30)]
        DiscoveryState(db).upsert_discovered([{"document_id": document_id, "case_number": "2019-CA-0001",
                                               "filed_date": "2019-06-04T01:30:00.000+0000"} for document_id in ids])
        log = ChangeLog(db)
        with db.transaction():
            log.record("r1", Transitions(added=ids), "2026-07-01", KENTUCKY.numbers.code_of)
        asked = []
        db.conn.set_trace_callback(lambda sql: asked.append(sql) if "FROM kv" in sql else None)
        rows, newest = log.rows(since="2026-06-01"), log.newest(20, since="2026-06-01")
        db.conn.set_trace_callback(None)
    finally:
        db.close()
    assert len(rows) == 30 and len(newest) == 20 and rows[0]["filed_date"] == "2019-06-03"
    assert len(asked) <= 2                  # once a read, not once a row


def test_an_update_says_what_it_found_in_words():
    figures = {"counts": {"added": 12, "withdrawn": 3, "restored": 0, "changed": 1}, "since": "2026-11-28",
               "complete": True, "through": "2026-12-28", "requests": 11234, "hours_at_default_pacing": 2.46}
    assert update_words(figures) == ("12 new documents, 3 withdrawn, 1 changed since 2026-11-28; complete through "
                                     "2026-12-28 (11,234 requests, 2.5 h at the default pacing)")
    assert update_words({**figures, "complete": False}).startswith("update not complete yet: 12 new documents")
    assert update_words({"counts": {}, "complete": True, "through": "2026-12-28"}).startswith("nothing new")


def test_an_atom_feed_is_well_formed_with_stable_ids_and_links():
    record = {"document_id": "d" * 64, "change": "added", "seen_at": "2026-07-01T10:00:00Z", "run": "r1",
              "case_number": "2019-CA-0001", "court_code": "CA", "kind": "opinion", "filed_date": "2026-06-30",
              "sha256": "a" * 64, "fields": None, "how": None, "description": "OPINION <AFFIRMING> & more",
              "case_title": "A V. B", "withdrawn_on": None, "held": True}
    root = ET.fromstring(atom_feed([record], title="t", self_link="/feed.atom", root="/"))
    entry = root.find(f"{{{ATOM}}}entry")
    assert entry.find(f"{{{ATOM}}}title").text == "New: 2019-CA-0001 · OPINION <AFFIRMING> & more"
    assert entry.find(f"{{{ATOM}}}id").text.endswith(":r1:" + "d" * 64 + ":added")
    links = {link.get("rel"): link.get("href") for link in entry.findall(f"{{{ATOM}}}link")}
    assert links == {"alternate": "/document/" + "d" * 64, "enclosure": "/pdf_by_hash/" + "a" * 64 + ".pdf"}
    assert root.find(f"{{{ATOM}}}updated").text == "2026-07-01T10:00:00Z"


def test_a_day_the_changes_are_read_by_is_kentucky_s_and_filed_date_is_the_court_s_day(tmp_path, capsys):
    """A change seen at 21:16 in Frankfort on June 5 (01:16 UTC on the 6th) is one of the 5th, for
    `changes --since`, serve's /changes and the feed alike; its filed_date is the court's day."""
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c15_discovery_state import DiscoveryState
    db = Database.open(tmp_path / "ky_court.sqlite")
    try:           # filed at 21:30 on June 3 in Frankfort: the court writes the instant in UTC
        DiscoveryState(db).upsert_discovered([{"document_id": "d1", "case_number": "2026-CA-0001", "case_title": "A",
                                               "filed_date": "2026-06-04T01:30:00.000+0000"}])
        with db.transaction():
            ChangeLog(db).record("r1", Transitions(added=["d1"]), "2026-06-05", KENTUCKY.numbers.code_of)
        db.conn.execute("UPDATE changes SET seen_at = '2026-06-06T01:16:00Z'")
    finally:
        db.close()
    since = {day: cli.main(["changes", "--workspace", str(tmp_path), "--since", day, "--json"]) == 0
             and [json.loads(line) for line in capsys.readouterr().out.splitlines()]
             for day in ("2026-06-05", "2026-06-06")}
    assert [record["document_id"] for record in since["2026-06-05"]] == ["d1"] and since["2026-06-06"] == []
    assert since["2026-06-05"][0]["filed_date"] == "2026-06-03"
    assert cli.main(["changes", "--workspace", str(tmp_path)]) == 0
    assert "  2026-06-03  d1" in capsys.readouterr().out
    web = ArchiveWeb(ServedArchive(workspace=tmp_path, folder=tmp_path), datasette_app=None)
    changes = {since: web.respond(web_route("/changes"), f"since={since}").body.decode()
               for since in ("2026-06-05", "2026-06-06", "June")}
    assert "<li>2026-06-05 · " in changes["2026-06-05"]
    assert "No change seen on or after 2026-06-06" in changes["2026-06-06"]
    assert "since &#x27;June&#x27; is not a day like 2019-03-31: left out" in changes["June"]
    feeds = {day: web.respond(web_route("/feed.atom"), f"since={day}") for day in ("2026-06-05", "2026-06-06", "x")}
    assert [len(ET.fromstring(feeds[day].body).findall(f"{{{ATOM}}}entry")) for day in ("2026-06-05", "2026-06-06")] \
        == [1, 0]
    assert feeds["x"].status == 400


def test_an_update_starts_from_the_crawl_s_leaf_shards_and_never_truncates(tmp_path):
    """With a results limit that splits most shards, an update asks the case search the floor: the
    shards the crawl split are not asked again (their children are), a leaf grown over the limit is
    split, and a year new since the crawl (FIRST_YEAR moved back) is asked at top level and split."""
    limit, workspace = 4, tmp_path / "workspace"

    def discover(court, first_year: int, today: dt.date) -> None:
        cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=str(workspace),
                          STORE=str(tmp_path / "store"), API_BASE=court.base_url, FIRST_YEAR=first_year,
                          LAST_YEAR=2026, TODAY=today.isoformat(), CASE_DETAILS=False, PHASES=("discover",))
        assert run_pipeline(cfg, handle_signals=False).exit_status == 0

    def shards(sweep: int, state: str | None = None) -> set[str]:
        db = sqlite3.connect(workspace / "ky_court.sqlite")
        try:
            return {row[0] for row in db.execute("SELECT shard FROM discovery_shards WHERE sweep = ? AND state = "
                                                 "COALESCE(?, state)", (sweep, state))}
        finally:
            db.close()

    with SimCourt(**{**COURT, "docs": 200, "first_year": 2021}, results_limit=limit) as court:
        for _ in range(3):
            discover(court, 2022, DAY)
            if json.loads((workspace / "status.json").read_text())["discovery_converged"]:
                break
        crawl = max(sweep for sweep in range(1, 9) if shards(sweep))
        plan = court.advance(30, seed=1, activity={"new_cases": 40})
        discover(court, 2021, dt.date.fromisoformat(plan["today"]))
        asked = court.stats()["period"]["endpoints"]["case_search"]
        floor = update_floor(court.corpus, [plan], KENTUCKY.sweep_shards(2021, 2026), page_size=500,
                             opinions_from=DAY, results_limit=limit)["case search pages"]
    update = crawl + 1
    split_before, split_now = shards(crawl, "split"), shards(update, "split")
    assert len(split_before) >= 10 and not shards(update) & split_before      # no split learnt again
    leaves = shards(crawl, "done")
    grown = {shard for shard in split_now if not shard.startswith("2021")}   # a leaf grown over the limit
    assert grown and all(any(shard[:end] in leaves for end in range(7, len(shard) + 1)) for shard in grown)
    assert "2021-CA" in split_now and "2021-SC" in shards(update)              # a new year, asked at top level
    assert asked == floor + len(split_now), (asked, floor, len(split_now))    # each split asked once
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c15_discovery_state import DiscoveryState, coverage_gaps
    db = Database.open_readonly(workspace / "ky_court.sqlite")
    try:                    # the coverage audit reads the update's leaves: what the court announced now
        audit = {row["shard"]: row for row in DiscoveryState(db).coverage_audit()}
    finally:
        db.close()
    assert audit["2026-CA"]["sweep"] == update and audit["2026-CA"]["announced"] == audit["2026-CA"]["cases"]
    assert coverage_gaps(audit.values()) == []


def test_an_update_sweeps_the_leaves_under_each_top_level_shard_or_the_shard_itself():
    leaves = ["2019-CA-0", "2019-CA-10", "2019-CA-11", "2019-SC", "2018-CA", "2019 CA ADMIN"]
    assert update_shards(["2019-CA", "2019-SC", "2019 CA ADMIN", "2020-CA"], leaves, KENTUCKY.numbers.top_level_shard) \
        == ["2019 CA ADMIN", "2019-CA-0", "2019-CA-10", "2019-CA-11", "2019-SC", "2020-CA"]
