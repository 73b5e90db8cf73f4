"""A TR Portal court system archived against the simulated TR Portal (notebook_builder/simcourt/trportal):
crawled to done and judged against the court's own truth (every viewable document once with its bytes,
every other kept with its state and never asked for, opinions before any other document), the results
window split without losing a case, a download answered by the wall, a stopped crawl resumed, faults,
and an update after the court moved on."""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from notebook_builder.cells import c49_trportal_walk
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState, coverage_gaps
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import SimTRPortal

TODAY = dt.date(2026, 10, 1)


def environment(court, root: Path, system: str, **extra) -> dict[str, str]:
    return {"KY_WORKSPACE": str(root / "ws"), "KY_STORE": str(root / "store"), "KY_COURT_SYSTEM": system,
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.05",
            "KY_FIRST_YEAR": "2019", "KY_TODAY": TODAY.isoformat(), "KY_PROGRESS": "0",
            "KY_PHASES": "discover,download", **extra}


def documents(root: Path) -> dict[str, sqlite3.Row]:
    conn = sqlite3.connect(root / "ws" / "ky_court.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return {row["document_id"]: row for row in conn.execute("SELECT * FROM documents")}
    finally:
        conn.close()


def judge(court, root: Path) -> dict:
    """The archive against the court's truth: what differs, and where the downloads fell."""
    truth, rows = court.truth(), documents(root)
    log = [(endpoint, item) for endpoint, item in court.request_log]
    fetched = [item for endpoint, item in log if endpoint == "download"]
    opinions = [index for index, item in enumerate(fetched) if truth[item].opinion]
    others = [index for index, item in enumerate(fetched) if not truth[item].opinion]
    return {
        "missing": [t.document_id for t in truth if t.document_id.lower() not in rows],
        "extra": sorted(set(rows) - {t.document_id.lower() for t in truth}),
        "wrong bytes": [t.document_id for t in truth if t.viewable and rows[t.document_id.lower()]["sha256"] != t.sha256],
        "public not archived as such": [t.document_id for t in truth
                                        if (rows[t.document_id.lower()]["access_state"] is None) != t.viewable],
        "opinion marks": [t.document_id for t in truth if bool(rows[t.document_id.lower()]["opinion"]) != t.opinion],
        "fetched twice": len(fetched) - len(set(fetched)),
        "not viewable fetched": [item for item in fetched if not truth[item].viewable],
        "an opinion after another document": bool(opinions and others and opinions[-1] > others[0]),
        "first opinion at": next((index + 1 for index, (endpoint, item) in enumerate(log)
                                  if endpoint == "download" and truth[item].opinion), None),
        "viewable": sum(t.viewable for t in truth), "fetched": len(set(fetched)),
    }


def clean(judged: dict) -> bool:
    return not any(judged[key] for key in ("missing", "extra", "wrong bytes", "public not archived as such",
                                           "opinion marks", "fetched twice", "not viewable fetched",
                                           "an opinion after another document"))


# ------------------------------------------------------------ a first crawl


@contextlib.contextmanager
def discovered_walk(court, tmp_path, system: str):
    """A workspace of `system` discovered by a run (no details), and a TR Portal walk over it that
    knows the court directory; the walk's client is closed and the context with it."""
    from support import open_test_context

    from notebook_builder.cells.c49_trportal_walk import TRPortalDiscovery
    assert run_pipeline(load_config(environment(court, tmp_path, system, KY_PHASES="discover",
                                                KY_CASE_DETAILS="0"))).exit_status == 0
    ctx = open_test_context(tmp_path / "again", COURT_SYSTEM=system, WORKSPACE=str(tmp_path / "ws"),
                            STORE=str(tmp_path / "store"), API_BASE=court.base_url)
    try:
        walk = TRPortalDiscovery(ctx)
        walk.directory = walk._court_directory()
        yield ctx, walk
        walk.client.close()
    finally:
        ctx.close()


@pytest.mark.parametrize("system, switches", [("nevada", {"numeric_ids": True}), ("alabama", {}), ("oregon", {})])
def test_a_crawl_to_done_archives_every_viewable_document_once_and_keeps_the_rest(tmp_path, system, switches):
    with SimTRPortal(system, docs=60, seed=2, today=TODAY, record_requests=True, **switches) as court:
        report = run_pipeline(load_config(environment(court, tmp_path, system)))
        judged = judge(court, tmp_path)
        walls = court.stats()["walls"]
    assert report.exit_status == 0, report.summary()
    assert clean(judged), judged
    assert judged["fetched"] == judged["viewable"] and not walls
    status = json.loads((tmp_path / "ws" / "status.json").read_text())
    assert status["queues"]["download"] == 0 and status["court_system"] == system and status["discovery_converged"]
    not_viewable = sum(not t.viewable for t in court.truth(hashes=False))
    assert status["final_states"]["not_public"] == not_viewable == status["counts"]["discovered"]
    assert status["counts"]["failed"] == 0
    db = Database.open_readonly(tmp_path / "ws" / "ky_court.sqlite")
    audit = [dict(row) for row in DiscoveryState(db).coverage_audit()]
    db.close()
    assert [(row["shard"], row["announced"], row["cases"]) for row in audit] == [
        ("cases", court.corpus.case_count, court.corpus.case_count)] and coverage_gaps(audit) == []
    if system != "oregon":                   # a feed: an opinion within the first few requests
        assert judged["first opinion at"] <= 5


@pytest.mark.parametrize("window_answer", ["500"])      # 400 and an empty 200: tests/test_trportal_client.py
def test_the_case_search_past_a_small_window_loses_no_case(tmp_path, window_answer):
    with SimTRPortal("nevada", docs=60, seed=4, today=TODAY, record_requests=True, window=12,
                     window_answer=window_answer, page_size=5) as court:
        report = run_pipeline(load_config(environment(court, tmp_path, "nevada", KY_CASE_DETAILS="0")))
        judged = judge(court, tmp_path)
        cases = court.corpus.case_count
    assert report.exit_status == 0, report.summary()
    assert clean(judged), judged
    conn = sqlite3.connect(tmp_path / "ws" / "ky_court.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM cases WHERE walked_sweep IS NOT NULL").fetchone()[0] == cases
    conn.close()


def test_a_download_answered_by_the_wall_is_recorded_not_followed_and_no_failure(tmp_path):
    with SimTRPortal("wyoming", docs=40, seed=5, today=TODAY, record_requests=True) as court:
        env = environment(court, tmp_path, "wyoming", KY_PHASES="discover", KY_CASE_DETAILS="0")
        run_pipeline(load_config(env))
        doc = next(index for index, t in enumerate(court.truth(hashes=False)) if t.viewable)
        court.corpus.doc_state[doc] = 1          # PURCHASABLE since it was listed
        document_id = court.truth(hashes=False)[doc].document_id.lower()
        report = run_pipeline(load_config({**env, "KY_PHASES": "download"}))
        walls = court.stats()["walls"]
    row = documents(tmp_path)[document_id]
    assert report.stages["download"].not_public == 1 and report.exit_status == 0
    assert (row["status"], row["access_state"], row["document_available"], row["http_status"]) == \
        ("discovered", "wall", 0, 302)
    assert not walls                              # the wall's page was never asked for
    status = json.loads((tmp_path / "ws" / "status.json").read_text())
    assert status["queues"]["download"] == 0 and status["discovery_converged"]
    assert status["final_states"]["not_public"] >= 1 and status["counts"]["failed"] == 0


def test_a_stopped_crawl_resumes_at_its_page_and_ends_as_one_never_stopped(tmp_path, monkeypatch):
    from notebook_builder.cells.c31_court_client import TRPortalClient
    with SimTRPortal("oregon", docs=60, seed=6, today=TODAY, record_requests=True, page_size=10) as court:
        env = environment(court, tmp_path, "oregon", KY_CASE_DETAILS="0")
        original = TRPortalClient._get

        def stopping(self, url, headers, **kwargs):
            if self.requests_sent == 45:
                self.clock.request_stop("SIGTERM")
            return original(self, url, headers, **kwargs)
        monkeypatch.setattr(TRPortalClient, "_get", stopping)
        first = run_pipeline(load_config(env), handle_signals=False)
        monkeypatch.setattr(TRPortalClient, "_get", original)
        second = run_pipeline(load_config(env), handle_signals=False)
        judged = judge(court, tmp_path)
        floor = court.floor(page_size=500)
    assert first.exit_status == 130 and second.exit_status == 0, second.summary()
    assert clean(judged), judged
    asked = len(court.request_log)
    assert asked <= floor["total"] - floor["publication details"] + 20       # resumed, not begun again


@pytest.mark.slow
def test_faults_are_retried_and_a_run_again_finishes(tmp_path):
    with SimTRPortal("alabama", docs=60, seed=7, today=TODAY, record_requests=True, fault_rate=0.05) as court:
        env = environment(court, tmp_path, "alabama", KY_CASE_DETAILS="0", KY_SEARCH_ATTEMPTS="8")
        for _ in range(3):
            report = run_pipeline(load_config(env))
            if json.loads((tmp_path / "ws" / "status.json").read_text())["done"]:
                break
        judged = judge(court, tmp_path)
        faults = court.stats()["faults_served"]
    assert faults and report.exit_status == 0, report.summary()
    assert not judged["missing"] and not judged["wrong bytes"] and not judged["not viewable fetched"], judged


# ------------------------------------------------------------------ updates


def test_an_update_after_the_court_moved_on_records_what_it_did(tmp_path, monkeypatch):
    monkeypatch.setattr(c49_trportal_walk, "DISCOVER_ASK_AGAIN_UPDATE_SHARE", 1.0)   # every list not public asked again
    with SimTRPortal("nevada", docs=100, seed=3, today=TODAY, record_requests=True) as court:
        env = environment(court, tmp_path, "nevada")
        run_pipeline(load_config(env))
        plan = court.advance(30, seed=5)
        report = run_pipeline(load_config({**env, "KY_TODAY": plan["today"]}))
        judged = judge(court, tmp_path)
    assert report.exit_status == 0, report.summary()
    withdrawn = {item["document_id"] for item in plan["withdrawn"]}     # seen only when its case is walked again
    assert not judged["missing"] and not judged["wrong bytes"], judged
    assert set(judged["public not archived as such"]) <= withdrawn, judged
    conn = sqlite3.connect(tmp_path / "ws" / "ky_court.sqlite")
    added = {row[0] for row in conn.execute("SELECT document_id FROM changes WHERE change = 'added'")}
    made_public = {item["document_id"].lower() for item in plan["made_public"]}
    new_public = {item["document_id"].lower() for item in plan["added"] if item["viewable"]}
    new_hidden = {item["document_id"].lower() for item in plan["added"] if not item["viewable"]}
    assert made_public and made_public <= added            # a document that became public is added
    assert new_public <= added and not (new_hidden & added)
    last = json.loads(conn.execute("SELECT value FROM kv WHERE key = 'last_update'").fetchone()[0])
    conn.close()
    assert last["complete"] and last["through"] == plan["today"] and last["counts"]["added"] == len(added)
    status = json.loads((tmp_path / "ws" / "status.json").read_text())
    assert status["queues"]["download"] == 0 and status["complete_through"] == plan["today"]
    assert (tmp_path / "store" / "feed.atom").is_file()


def test_the_probe_asks_a_tr_portal_court_at_most_ten_requests_and_says_it_can_run(capsys, monkeypatch):
    from notebook_builder import cli
    for name, value in (("KY_PACING", "0"), ("KY_BACKOFF_BASE", "0.01"), ("KY_BACKOFF_CAP", "0.02")):
        monkeypatch.setenv(name, value)
    with SimTRPortal("nevada", docs=40, seed=1, today=TODAY) as court:
        code = cli.main(["probe", "--court-system", "nevada", "--api-base", court.base_url])
        asked = court.stats()["requests"]
    table = capsys.readouterr().out
    assert code == 0 and sum(asked.values()) <= 10, table
    assert all(f"\n{endpoint} " in table for endpoint in ("courts", "case_search", "docket_entries", "access",
                                                          "document_search", "download"))
    with SimTRPortal("nevada", docs=40, seed=1, today=TODAY, down="503") as court:
        assert cli.main(["probe", "--court-system", "nevada", "--api-base", court.base_url]) == 1


def test_a_crawl_that_ends_days_after_it_began_reads_again_what_the_court_filed_meanwhile(tmp_path, monkeypatch):
    from notebook_builder.cells.c31_court_client import TRPortalClient
    with SimTRPortal("wyoming", docs=60, seed=8, today=TODAY, record_requests=True) as court:
        env = environment(court, tmp_path, "wyoming", KY_CASE_DETAILS="0")
        original = TRPortalClient._get

        def stopping(self, url, headers, **kwargs):
            if self.requests_sent == 30:
                self.clock.request_stop("SIGTERM")
            return original(self, url, headers, **kwargs)
        monkeypatch.setattr(TRPortalClient, "_get", stopping)
        assert run_pipeline(load_config(env), handle_signals=False).exit_status == 130
        monkeypatch.setattr(TRPortalClient, "_get", original)
        cases_before = court.corpus.case_count
        plan = court.advance(5, seed=2, activity={"new_cases": 2, "filings": 2, "opinions": 1, "made_public": 0,
                                                  "withdrawn": 0, "retitled": 0})
        report = run_pipeline(load_config({**env, "KY_TODAY": plan["today"]}), handle_signals=False)
        judged = judge(court, tmp_path)
        cases_after = court.corpus.case_count
    assert report.exit_status == 0, report.summary()
    assert not judged["missing"] and not judged["wrong bytes"] and not judged["not viewable fetched"], judged
    status = json.loads((tmp_path / "ws" / "status.json").read_text())
    assert status["discovery_converged"] and status["complete_through"] == plan["today"]
    db = Database.open_readonly(tmp_path / "ws" / "ky_court.sqlite")
    audit = [dict(row) for row in DiscoveryState(db).coverage_audit()]
    db.close()
    # The closing sweep read only the days since the crawl began: the audit keeps the whole search's count.
    assert cases_after > cases_before
    assert [(row["shard"], row["announced"], row["cases"]) for row in audit] == [("cases", cases_before, cases_after)]
    assert plan["counts"]["added"] and not status["last_update"]          # still the first crawl: no changes


def test_first_and_last_year_bound_the_case_search_and_the_feed_by_filed_date(tmp_path):
    with SimTRPortal("nevada", docs=80, seed=9, today=TODAY) as court:
        env = environment(court, tmp_path, "nevada", KY_FIRST_YEAR="2023", KY_LAST_YEAR="2024", KY_CASE_DETAILS="0")
        assert run_pipeline(load_config(env)).exit_status == 0
        filed = {case: dt.date.fromordinal(court.corpus.case_filed[case]) for case in range(court.corpus.case_count)}
    conn = sqlite3.connect(tmp_path / "ws" / "ky_court.sqlite")
    walked = [row[0][:10] for row in conn.execute("SELECT filed_date FROM cases WHERE walked_sweep IS NOT NULL")]
    dates = [row[0][:10] for row in conn.execute("SELECT filed_date FROM documents")]
    fed = [row[0][:10] for row in conn.execute(        # found by the feed alone: their cases not walked
        "SELECT d.filed_date FROM documents d JOIN cases c USING (case_id) WHERE c.walked_sweep IS NULL")]
    conn.close()
    assert walked and all("2023-01-01" <= day <= "2024-12-31" for day in walked)
    assert len(walked) == sum(2023 <= day.year <= 2024 for day in filed.values())
    assert dates and min(dates) >= "2023-01-01"
    assert all(day <= "2025-01-01" for day in fed)     # instants in UTC: the last evening is the next day


# ------------------------------------------------------- a case's lists refused


@pytest.mark.parametrize("listed, refusal", [
    ("docketentrydocumentsaccess", "403"), ("docketentrydocumentsaccess", "400"),
    ("docketentrydocumentsaccess", "past"), ("docketentries", "past")])
def test_a_case_whose_lists_the_court_refuses_is_recorded_and_the_crawl_goes_on(tmp_path, monkeypatch, listed, refusal):
    """One case's document list (or entries) refused, every time: the case is kept with its documents unknown,
    the rest of the court is archived, and a second run does the same instead of dying on it."""
    from notebook_builder.cells.c30_client import SearchRefused
    from notebook_builder.cells.c31_court_client import PastWindow, TRPortalClient
    with SimTRPortal("wyoming", docs=40, seed=11, today=TODAY, record_requests=True) as court:
        truth = court_truth = court.truth()
        victim = next(t for t in truth if t.viewable).case_id.lower()
        original = TRPortalClient.page

        def refusing(self, path, params, number, size, label):
            aimed = victim in path.lower() or str(params.get("caseHeader.caseInstanceUUID", "")).lower() == victim
            if aimed and path.endswith(listed):
                if refusal == "past":
                    raise PastWindow(f"{label}: the court cut the page", 0)
                raise SearchRefused(f"{label}: the court answered {refusal}", int(refusal))
            return original(self, path, params, number, size, label)
        monkeypatch.setattr(TRPortalClient, "page", refusing)
        env = environment(court, tmp_path, "wyoming", KY_CASE_DETAILS="0")
        reports = [run_pipeline(load_config(env), handle_signals=False) for _ in range(2)]
        fetched = [item for endpoint, item in court.request_log if endpoint == "download"]
    assert [report.exit_status for report in reports] == [0, 0], reports[-1].summary()
    rows = documents(tmp_path)
    lost = {t.document_id.lower() for t in truth if t.case_id.lower() == victim}
    assert lost and {t.document_id.lower() for t in truth} - set(rows) == lost   # that case's documents alone unknown
    assert all(rows[t.document_id.lower()]["sha256"] == t.sha256 for t in court_truth if t.viewable
               and t.document_id.lower() not in lost)
    assert sorted(fetched) == sorted(index for index, t in enumerate(truth)
                                     if t.viewable and t.case_id.lower() != victim)
    conn = sqlite3.connect(tmp_path / "ws" / "ky_court.sqlite")
    kept = conn.execute("SELECT case_number FROM cases WHERE case_id = ?", (victim,)).fetchone()
    conn.close()
    assert kept is not None                                  # the case is recorded
    assert reports[0].stages["discover"].shape_problems      # and the refusal counted


# ------------------------------------------------- the feed has no access states


def feed_row(document_id: str, access_state=None) -> dict:
    return {"document_id": document_id, "case_number": "90509", "court": "Nevada Supreme Court",
            "case_title": "A VS. B", "docket_entry_id": "e-1", "description": "Filed authored opinion.",
            "filed_date": "2026-06-18T15:30:25.000+00:00", "case_id": "c-1", "document_name": "142pn045",
            "entry_type": "Opinion/Dispositional", "entry_subtype": None, "mime_type": None,
            "access_state": access_state, "opinion": 1,
            "court_path": f"/courts/g/cms/case/c-1/docketentrydocuments/{document_id}",
            "case_path": "/courts/g/cms/cases/c-1"}


def test_a_feed_row_never_clears_a_state_the_access_list_gave_and_logs_no_change(tmp_path):
    """The feed (and a publication) says nothing of access: a document the access list said is not
    public stays so (never queued), and an update records no false 'added' or 'withdrawn' for it."""
    from support import open_test_context

    from notebook_builder.cells.c12_queues import WorkQueues
    from notebook_builder.cells.c19_changes import ChangeLog, RunChanges
    from notebook_builder.cells.c49_trportal_walk import TRPortalDiscovery
    ctx = open_test_context(tmp_path, COURT_SYSTEM="nevada")
    try:
        walk = TRPortalDiscovery(ctx)
        walk.changes = RunChanges(ctx.db, "run-1", "2026-10-01", walk.court.code_of)
        walk._write_documents([{**feed_row("held"), "access_state": "purchasable"}, feed_row("public")])
        walk.changes = RunChanges(ctx.db, "run-2", "2026-10-02", walk.court.code_of)
        walk._write_feed([feed_row("held"), feed_row("public"), feed_row("sealed", "secured")])
        rows = {row["document_id"]: row for row in ctx.db.conn.execute(
            "SELECT document_id, access_state, document_available FROM documents")}
        queued = {row["document_id"] for row in WorkQueues(ctx.db).download_queue(ctx.cfg, 100)}
        counts = ChangeLog(ctx.db).counts("run-2")
    finally:
        walk.client.close()
        ctx.close()
    assert (rows["held"]["access_state"], rows["held"]["document_available"]) == ("purchasable", 0)
    assert (rows["public"]["access_state"], rows["public"]["document_available"]) == (None, 1)
    assert (rows["sealed"]["access_state"], rows["sealed"]["document_available"]) == ("secured", 0)
    assert queued == {"public"}
    assert counts == {"added": 0, "withdrawn": 0, "restored": 0, "changed": 0}     # "sealed" was never public


# ------------------------------------------------------------- secured documents


def test_a_secured_entrys_documents_are_never_public_whatever_the_access_list_says(tmp_path, monkeypatch):
    """One rule, as FLP's nev.py has it: a document of an entry the court marks securedDocument is not
    public, even when its access list says VIEWABLE; the feed, the walk and every update agree."""
    monkeypatch.setattr(c49_trportal_walk, "DISCOVER_ASK_AGAIN_UPDATE_SHARE", 1.0)   # every list asked again
    with SimTRPortal("nevada", docs=80, seed=1, today=TODAY, record_requests=True, secured_state="drawn") as court:
        env = environment(court, tmp_path, "nevada", KY_CASE_DETAILS="0")
        first = run_pipeline(load_config(env), handle_signals=False)
        plan = court.advance(10, seed=3)
        update = run_pipeline(load_config({**env, "KY_TODAY": plan["today"]}), handle_signals=False)
        truth = court.truth(hashes=False)
        fetched = {item for endpoint, item in court.request_log if endpoint == "download"}
    assert first.exit_status == update.exit_status == 0, update.summary()
    secured = {index for index, t in enumerate(truth) if t.secured}
    assert any(truth[index].viewable for index in secured) and any(truth[index].opinion for index in secured)
    assert not fetched & secured
    rows = documents(tmp_path)
    assert {rows[truth[index].document_id.lower()]["access_state"] for index in secured} == {"secured"}
    conn = sqlite3.connect(tmp_path / "ws" / "ky_court.sqlite")
    logged = {row[0] for row in conn.execute("SELECT document_id FROM changes")}
    conn.close()
    assert not logged & {truth[index].document_id.lower() for index in secured}


def probe_download(court) -> int | None:
    """The document the probe downloaded from `court` (None: none)."""
    from notebook_builder.cells.c00_config import load_config as config
    from notebook_builder.cells.c55_probe import probe
    before = len(list(court.request_log))
    probe(config({"KY_PACING": "0", "KY_COURT_SYSTEM": "nevada", "KY_API_BASE": court.base_url,
                  "KY_TODAY": TODAY.isoformat(), "KY_CASE_DETAILS": "0"}))
    return next((item for endpoint, item in list(court.request_log)[before:] if endpoint == "download"), None)


def test_the_probe_downloads_no_document_of_a_secured_entry():
    with SimTRPortal("nevada", docs=40, seed=2, today=TODAY, record_requests=True, secured_state="drawn") as court:
        chosen = probe_download(court)
        court.corpus.entry_secured[court.corpus.doc_entry[chosen]] = 1     # its entry secured, its state VIEWABLE
        again = probe_download(court)
        truth = court.truth(hashes=False)
    assert truth[chosen].viewable and truth[chosen].secured
    assert again != chosen and (again is None or (truth[again].viewable and not truth[again].secured))


@pytest.mark.parametrize("fault", ["dropped", "unreachable", "stopped"])
def test_a_probe_whose_download_fails_says_so_in_its_row_and_never_raises(monkeypatch, fault):
    from notebook_builder.cells.c00_config import CourtUnreachable, StopRequested, TransientFetchError
    from notebook_builder.cells.c31_court_client import TRPortalClient
    from notebook_builder.cells.c55_probe import probe
    raised = {"dropped": TransientFetchError("ConnectionError: Connection reset by peer"),
              "unreachable": CourtUnreachable("the court at x gave no usable answer"),
              "stopped": StopRequested("SIGTERM")}[fault]

    def failing(self, document_id, **kwargs):
        raise raised
    monkeypatch.setattr(TRPortalClient, "download_response", failing)
    with SimTRPortal("nevada", docs=40, seed=2, today=TODAY) as court:
        report = probe(load_config({"KY_PACING": "0", "KY_COURT_SYSTEM": "nevada", "KY_API_BASE": court.base_url,
                                    "KY_TODAY": TODAY.isoformat(), "KY_CASE_DETAILS": "0"}))
    row = next(row for row in report.rows if row.endpoint == "download")
    assert row.verdict == "FAIL" and str(raised)[:40] in row.note and not report.ok


def test_the_probe_asks_the_court_it_is_given_not_the_configured_one():
    from notebook_builder.cells.c27_court_systems import ALABAMA
    from notebook_builder.cells.c55_probe import probe
    with SimTRPortal("alabama", docs=30, seed=1, today=TODAY) as court:
        report = probe(load_config({"KY_PACING": "0", "KY_COURT_SYSTEM": "nevada", "KY_API_BASE": court.base_url,
                                    "KY_TODAY": TODAY.isoformat(), "KY_CASE_DETAILS": "0"}), court=ALABAMA)
    endpoints = [row.endpoint for row in report.rows]
    assert report.why.startswith(ALABAMA.name) and "publications" in endpoints and "document_search" not in endpoints
    assert report.ok, report.table()


def test_the_download_path_a_tr_portal_court_answered_is_logged_as_its_own(tmp_path, caplog):
    with SimTRPortal("wyoming", docs=20, seed=5, today=TODAY) as court:
        with caplog.at_level("INFO", logger="kycourt.download"):
            report = run_pipeline(load_config(environment(court, tmp_path, "wyoming", KY_CASE_DETAILS="0")),
                                  handle_signals=False)
    said = [record.getMessage() for record in caplog.records if record.getMessage().startswith("download path:")]
    assert report.exit_status == 0 and len(said) == 1
    assert "/docketentrydocuments/" in said[0] and "publicaccessdocuments" not in said[0], said


def test_a_cases_list_asked_again_reads_its_entries_opinion_marks_in_one_query(tmp_path):
    with SimTRPortal("oregon", docs=60, seed=6, today=TODAY) as court, \
            discovered_walk(court, tmp_path, "oregon") as (ctx, walk):
        conn = ctx.db.conn
        case = dict(conn.execute(
            "SELECT c.* FROM cases c JOIN docket_entries e USING (case_id) WHERE EXISTS (SELECT 1 FROM "
            "documents d WHERE d.case_id = c.case_id AND d.opinion = 1) GROUP BY c.case_id "
            "HAVING COUNT(*) > 3 ORDER BY COUNT(*) DESC LIMIT 1").fetchone())
        case["case_uuid"] = case["court_path"].rsplit("/", 1)[-1]
        marks = dict(conn.execute("SELECT document_id, opinion FROM documents WHERE case_id = ?",
                                  (case["case_id"],)).fetchall())
        asked = []
        conn.set_trace_callback(lambda sql: asked.append(sql))
        walk.walk_case(case, "access")
        conn.set_trace_callback(None)
        after = dict(conn.execute("SELECT document_id, opinion FROM documents WHERE case_id = ?",
                                  (case["case_id"],)).fetchall())
    per_entry = [sql for sql in asked if "FROM documents WHERE docket_entry_id" in sql]
    assert 1 in marks.values() and 0 in marks.values() and after == marks and per_entry == []


def test_a_list_asked_again_walks_the_case_whole_when_its_entries_secured_marks_are_unknown(tmp_path):
    """Entries written before schema v15 have no secured mark (NULL): asking only the access list would
    take a secured entry's VIEWABLE document for public, so that case is walked again in full."""
    with SimTRPortal("nevada", docs=60, seed=6, today=TODAY, record_requests=True) as court, \
            discovered_walk(court, tmp_path, "nevada") as (ctx, walk):
        conn = ctx.db.conn
        known, unknown = (dict(row) for row in conn.execute(
            "SELECT c.* FROM cases c WHERE EXISTS (SELECT 1 FROM docket_entries e WHERE e.case_id = c.case_id "
            "AND e.has_documents = 1) ORDER BY c.case_id LIMIT 2"))
        conn.execute("UPDATE docket_entries SET secured = NULL WHERE case_id = ?", (unknown["case_id"],))
        asked = {}
        for case in (known, unknown):
            case["case_uuid"] = case["court_path"].rsplit("/", 1)[-1]
            before = len(court.request_log)
            walk.walk_case(case, "access")
            asked[case["case_id"]] = sorted(endpoint for endpoint, _ in list(court.request_log)[before:])
        marks = {row[0] for row in conn.execute("SELECT secured FROM docket_entries WHERE case_id = ?",
                                                (unknown["case_id"],))}
    assert asked[known["case_id"]] == ["documents_access"]
    assert asked[unknown["case_id"]] == ["docket_entries", "documents_access"]
    assert None not in marks
