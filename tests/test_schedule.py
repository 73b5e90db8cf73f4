"""The order of the crawl's work (c75): PDFs from the first requests, opinions before the rest, the
details after every document, each kind of unit resumable after SIGKILL; and the projection of
status.json (c35) from what the crawl's units cost."""
from __future__ import annotations

import collections
import datetime as dt
import json
import math
import multiprocessing
import os
import signal
import time

import pytest
from support import FAST_ENV

from notebook_builder.cells import c75_schedule
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c30_client import CourtClient, TransientFetchError
from notebook_builder.cells.c35_context import crawl_projection, crawl_words
from notebook_builder.cells.c25_court import KENTUCKY
from notebook_builder.cells.c44_discovery_rules import (DISCOVER_ASK_AGAIN_UPDATE_SHARE, next_opinion_window,
                                                        opinion_pass_due, opinion_windows_left)
from notebook_builder.cells.c75_schedule import CrawlState, add_figures, next_work
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.cells.c97_report import report_table
from notebook_builder.simcourt import SimCourt

# ------------------------------------------------------------ decisions


def test_what_a_unit_discovered_is_downloaded_before_discovery_goes_on():
    state = CrawlState(stopping=False, discovery="walk", queue=12, downloads_open=True)
    assert next_work(state) == "download"
    assert next_work(CrawlState(stopping=False, discovery="opinions", queue=0, downloads_open=True)) == "opinions"
    assert next_work(CrawlState(stopping=False, discovery="walk", queue=0, downloads_open=True)) == "walk"
    # DOWNLOAD_LIMIT reached (downloads closed), or a drain that took nothing: discovery goes on.
    assert next_work(CrawlState(stopping=False, discovery="walk", queue=12, downloads_open=False)) == "walk"
    assert next_work(CrawlState(stopping=False, discovery="walk", queue=3, downloads_open=True,
                                drained_nothing=True)) == "walk"
    assert next_work(CrawlState(stopping=True, discovery="walk", queue=12, downloads_open=True)) is None


def test_the_details_never_come_before_a_pdf_that_is_still_missing():
    waiting = CrawlState(stopping=False, discovery=None, queue=4, downloads_open=True, details_due=True)
    assert next_work(waiting) == "download"
    assert next_work(CrawlState(stopping=False, discovery="walk", queue=0, downloads_open=True,
                                details_due=True)) == "walk"
    done = CrawlState(stopping=False, discovery=None, queue=0, downloads_open=True, details_due=True)
    assert next_work(done) == "details"
    # DOWNLOAD_LIMIT (downloads closed) holds the details back too: the PDFs come first, next run.
    assert next_work(CrawlState(stopping=False, discovery=None, queue=4, downloads_open=False,
                                details_due=True)) is None
    # A drain that could take nothing (every waiting PDF failed this run) does not.
    assert next_work(CrawlState(stopping=False, discovery=None, queue=4, downloads_open=True,
                                drained_nothing=True, details_due=True)) == "details"
    assert next_work(CrawlState(stopping=False, discovery=None, queue=0, downloads_open=True)) is None


def test_the_opinion_pass_goes_back_a_week_at_a_time_from_the_day_it_began():
    top, first = dt.date(2024, 3, 20), dt.date(2024, 3, 1)
    assert next_opinion_window(top, None, first) == (dt.date(2024, 3, 14), top)
    assert next_opinion_window(top, dt.date(2024, 3, 14), first) == (dt.date(2024, 3, 7), dt.date(2024, 3, 13))
    assert next_opinion_window(top, dt.date(2024, 3, 7), first) == (first, dt.date(2024, 3, 6))
    assert next_opinion_window(top, first, first) is None
    assert [opinion_windows_left(top, swept, first) for swept in (None, dt.date(2024, 3, 14), first)] == [3, 2, 0]
    assert opinion_pass_due("cases", False, (first, top))
    assert not opinion_pass_due("documents", False, (first, top))    # its rows carry document ids
    assert not opinion_pass_due("cases", True, (first, top))         # an update has its own opinion sweep
    assert not opinion_pass_due("cases", False, None)


def test_figures_add_up_per_kind_of_unit():
    figures = add_figures({}, "opinions", requests=11, units=1, documents=5, answers=11, answer_seconds=2.2)
    figures = add_figures(figures, "opinions", requests=9, units=1, documents=3, answers=9, answer_seconds=1.8)
    figures = add_figures(figures, "downloads", requests=8, units=8, answers=8, answer_seconds=0.8)
    assert figures["opinions"] == {"requests": 20, "units": 2, "documents": 8, "cases": 0}
    assert figures["downloads"]["requests"] == 8 and figures["latency"] == {"answers": 28, "seconds": 4.8}


PAUSES = (0.5, 0.4)


def test_the_projection_says_requests_and_hours_left_in_the_crawls_order():
    figures = {"opinions": {"requests": 30, "units": 10, "documents": 20},     # 3 requests, 2 opinions a window
               "walk": {"requests": 400, "units": 2, "documents": 150, "cases": 200},
               "downloads": {"requests": 170, "units": 170},
               "details": {"requests": 0, "units": 0},
               "latency": {"answers": 600, "seconds": 150.0},                  # 0.25 s a request
               "left": {"windows": 100, "shards": 4}}
    projection = crawl_projection(figures, opinions_queued=5, queued=7, details_due=3, converged=False,
                                  details=True, pauses=PAUSES)
    opinions, documents, details = (projection[name] for name in ("opinions", "documents", "details"))
    # opinions: 100 windows x 3 JSON requests, (100 x 2 found + 5 waiting) downloads.
    assert opinions["requests_left"] == 300 + 205
    assert opinions["hours"] == round((300 * 0.75 + 205 * 0.65) / 3600, 2)
    # documents: then 4 shards x 200 requests, (4 x 75 found + the 2 others waiting) downloads.
    assert documents["requests_left"] == 505 + 800 + 302
    # details: then (3 due + 4 shards x 100 cases) x 2 lists (no details fetched yet: two a case).
    assert details["requests_left"] == 1607 + 806
    assert details["hours"] > documents["hours"] > opinions["hours"] > 0
    assert not opinions["archived"] and not documents["archived"]
    assert "every opinion in 505 requests" in crawl_words(projection)


def test_the_projection_knows_nothing_before_the_first_unit_of_a_kind_and_says_what_is_archived():
    unknown = crawl_projection({"left": {"windows": 50, "shards": 148}}, opinions_queued=0, queued=0, details_due=0,
                               converged=False, details=True, pauses=PAUSES)
    assert unknown["opinions"]["requests_left"] is None and unknown["details"]["hours"] is None
    assert "every opinion: not known yet" in crawl_words(unknown)
    passed = {"opinions": {"requests": 30, "units": 10, "documents": 20}, "opinion_pass_complete": True,
              "left": {"windows": 0, "shards": 148}}
    projection = crawl_projection(passed, opinions_queued=0, queued=0, details_due=0, converged=False, details=True,
                                  pauses=PAUSES)
    assert projection["opinions"]["archived"] and projection["opinions"]["requests_left"] == 0
    assert projection["documents"]["requests_left"] is None            # no shard walked yet
    done = crawl_projection({}, opinions_queued=0, queued=0, details_due=0, converged=True, details=False,
                            pauses=PAUSES)
    assert all(done[name]["archived"] and done[name]["requests_left"] == 0
               for name in ("opinions", "documents", "details"))


# ------------------------------------------------------------ the crawl

COURT = dict(docs=90, seed=41, shape="captured", document_search="absent", faults=False, unstable=False,
             real_counts=True, first_year=2025, last_year=2026, record_requests=True)


def crawl_config(court, workspace, **knobs):
    return load_config(env=FAST_ENV,
                       **{"WORKSPACE": str(workspace), "STORE": f"{workspace}-store", "API_BASE": court.base_url,
                          "FIRST_YEAR": 2025, "LAST_YEAR": 2026, "PHASES": ("discover", "download"),
                          "CONVERGENCE_DELTA": 1, **knobs})


def opinion_documents(court) -> set[int]:
    """The documents of the entries the court's opinion search lists."""
    return {doc for _, entry in court.corpus.opinion_entries() for doc in court.corpus.entry_docs(entry)}


def archived(workspace) -> dict:
    db = Database.open(f"{workspace}/ky_court.sqlite")
    try:
        return {"documents": {row["document_id"]: row["status"] for row in db.iter_documents()},
                "details": DiscoveryState(db).details_due_count(),
                "parties": db.conn.execute("SELECT COUNT(DISTINCT case_id) FROM parties").fetchone()[0],
                "cases": db.conn.execute("SELECT COUNT(*) FROM cases WHERE walked_sweep IS NOT NULL").fetchone()[0]}
    finally:
        db.close()


@pytest.mark.slow
def test_the_crawl_downloads_from_the_first_requests_opinions_first_details_last(tmp_path):
    with SimCourt(**COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False)
        log = list(court.request_log)
    assert report.exit_status == 0, report.summary()
    state = archived(tmp_path / "w")
    served = {doc.document_id for doc in court.documents}
    assert served <= set(state["documents"]) and all(state["documents"][doc] == "downloaded" for doc in served)
    assert state["details"] == 0 and state["parties"] == state["cases"] > 0
    downloads = [number for number, (endpoint, _) in enumerate(log) if endpoint == "download"]
    walk = [number for number, (endpoint, _) in enumerate(log) if endpoint == "docketentries"]
    details = [number for number, (endpoint, _) in enumerate(log) if endpoint in ("parties", "lowercourts")]
    # The first PDF within the first week's requests: a search for each court, its opinions' file lists.
    assert downloads[0] < 20
    # Every opinion the opinion search lists is downloaded before the walk asks for its first case.
    opinions = opinion_documents(court)
    assert opinions and {item for endpoint, item in log[:walk[0]] if endpoint == "download"} >= opinions
    # What the walk finds is downloaded as it goes, not after the whole walk.
    assert any(walk[0] < number < walk[-1] for number in downloads)
    # The details come after the last PDF; no file list is asked twice but those listing a withheld
    # file (asked again once a sweep, in case the court released it).
    assert details and details[0] > downloads[-1]
    asked = collections.Counter(item for endpoint, item in log if endpoint == "entry_documents")
    assert {entry for entry, times in asked.items() if times > 1} <= {
        entry for entry in asked if court.corpus.unavailable_file(entry) is not None}
    status = json.loads((tmp_path / "w" / "status.json").read_text())
    crawl = status["crawl"]
    assert crawl["opinions"]["archived"] and crawl["documents"]["archived"] and crawl["details"]["archived"]
    assert crawl["opinions_archived_at"] and crawl["documents"]["requests_left"] == 0
    assert "every opinion archived (since" in report.summary()
    assert report.stages["discover"].opinion_pass_complete and report.stages["discover"].details_cases > 0
    # The notebook's status cell (the report's table) says it too.
    db = Database.open(f"{tmp_path / 'w'}/ky_court.sqlite")
    try:
        table = report_table(db, crawl_config(court, tmp_path / "w"))
    finally:
        db.close()
    assert "archive: every opinion archived (since" in table and "every detail archived" in table



def _failing_opinion_weeks(monkeypatch, fails) -> list:
    """The opinion search's first page of a (court, week) fails while `fails(key, times_asked)` says so;
    returns [(the documents' statuses when kv opinions_archived_at was set, whether discovery had
    converged then)] as the crawl records them."""
    real, asked, noted = CourtClient.search_opinions, collections.Counter(), []

    def search_opinions(self, court, first_day, last_day, start_index, max_results):
        key = (court, first_day, last_day)
        if start_index == 1:
            asked[key] += 1
            if fails(key, asked[key]):
                raise TransientFetchError(f"simulated 503 for {key}")
        return real(self, court, first_day, last_day, start_index, max_results)

    real_note = c75_schedule._Scheduler._note_opinions_archived

    def note(scheduler):
        before = scheduler.db.kv_get("opinions_archived_at")
        real_note(scheduler)
        if before is None and scheduler.db.kv_get("opinions_archived_at"):
            noted.append(({row["document_id"]: row["status"] for row in scheduler.db.iter_documents()},
                          scheduler.db.kv_get("discovery_converged_at") is not None))

    monkeypatch.setattr(CourtClient, "search_opinions", search_opinions)
    monkeypatch.setattr(c75_schedule._Scheduler, "_note_opinions_archived", note)
    return noted


def test_an_opinion_week_whose_search_failed_is_asked_again_before_every_opinion_is_called_archived(
        tmp_path, monkeypatch):
    noted = _failing_opinion_weeks(monkeypatch, lambda key, times: times == 1)     # every week fails once
    with SimCourt(**COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path / "w", MAX_SWEEPS=1), handle_signals=False)
        log = list(court.request_log)
        opinions = opinion_documents(court)
        ids = {court.documents[doc].document_id for doc in opinions}
    assert report.stages["discover"].opinion_pass_complete, report.summary()
    walk = [number for number, (endpoint, _) in enumerate(log) if endpoint == "docketentries"]
    assert opinions and opinions <= {item for endpoint, item in log[:walk[0]] if endpoint == "download"}
    statuses, converged = noted[0]
    assert not converged and all(statuses.get(doc) == "downloaded" for doc in ids)
    db = Database.open(f"{tmp_path / 'w'}/ky_court.sqlite")
    try:
        assert json.loads(db.kv_get("opinion_pass_failed")) == []
    finally:
        db.close()


def test_an_opinion_week_that_never_answers_keeps_the_pass_incomplete_until_the_walk_has_converged(
        tmp_path, monkeypatch):
    first: list = []

    def fails(key, times):
        first.append(key)
        return key == first[0]          # the pass's first week, every time it is asked
    noted = _failing_opinion_weeks(monkeypatch, fails)
    with SimCourt(**COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False)
    assert not report.stages["discover"].opinion_pass_complete and report.stages["discover"].converged
    # Said archived only once the walk had converged (it lists every opinion too), not after the pass.
    assert len(noted) == 1 and noted[0][1]
    assert "every opinion archived (since" in report.summary()
    db = Database.open(f"{tmp_path / 'w'}/ky_court.sqlite")
    try:
        failed = json.loads(db.kv_get("opinion_pass_failed"))
        assert len(failed) == 1 and failed[0][1] == dt.datetime.strptime(first[0][2], "%m/%d/%Y").date().isoformat()
    finally:
        db.close()


def test_the_opinion_pass_of_a_year_limited_archive_asks_for_no_later_week(tmp_path, monkeypatch):
    real, weeks = CourtClient.search_opinions, []

    def search_opinions(self, court, first_day, last_day, start_index, max_results):
        weeks.append(dt.datetime.strptime(last_day, "%m/%d/%Y").date())
        return real(self, court, first_day, last_day, start_index, max_results)
    monkeypatch.setattr(CourtClient, "search_opinions", search_opinions)
    with SimCourt(**COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path / "w", LAST_YEAR=2025, MAX_SWEEPS=1),
                              handle_signals=False)
    assert report.stages["discover"].opinion_pass_complete, report.summary()
    pass_weeks = weeks[:report.stages["discover"].opinion_windows * 2]        # both courts a week
    assert pass_weeks and max(pass_weeks) == dt.date(2025, 12, 31)


def test_discover_alone_leaves_the_details_until_nothing_waits_to_be_downloaded(tmp_path):
    with SimCourt(**COURT) as court:
        first = run_pipeline(crawl_config(court, tmp_path / "w", PHASES=("discover",)), handle_signals=False)
        assert first.stages["discover"].converged and first.stages["discover"].details_cases == 0
        assert court.endpoint_requests["parties"] == court.endpoint_requests["lowercourts"] == 0
        run_pipeline(crawl_config(court, tmp_path / "w", PHASES=("download",)), handle_signals=False)
        last = run_pipeline(crawl_config(court, tmp_path / "w", PHASES=("discover",)), handle_signals=False)
    assert last.stages["discover"].details_cases > 0
    assert archived(tmp_path / "w")["details"] == 0


def test_a_later_sweep_is_priced_at_its_own_shards_not_the_first_sweeps(tmp_path):
    with SimCourt(**COURT) as court:
        run_pipeline(crawl_config(court, tmp_path / "w", MAX_SWEEPS=1), handle_signals=False)
        first = len(court.request_log)
        crawl = json.loads((tmp_path / "w" / "status.json").read_text())["crawl"]
        report = run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False)
        second = len(court.request_log) - first
    assert report.stages["discover"].converged
    # Sweep 2 re-walks only new and changed cases (here: none); the first sweep's cost a shard
    # (hundreds of requests for this court) would say several times what it takes.
    projected = crawl["documents"]["requests_left"]
    assert projected is None or projected <= 2 * second, (projected, second)
    assert "every document: not known yet" in crawl_words(crawl) or projected is not None

@pytest.mark.slow
def test_download_limit_ends_the_downloads_and_the_crawl_goes_on(tmp_path):
    with SimCourt(**COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path / "w", DOWNLOAD_LIMIT=5), handle_signals=False)
    assert report.stages["download"].stopped == "limit" and report.stages["download"].downloaded == 5
    assert report.stages["discover"].converged and report.stages["discover"].details_cases == 0
    assert court.endpoint_requests["download"] == 5
    assert court.endpoint_requests["parties"] == court.endpoint_requests["lowercourts"] == 0


# The kills' court: the dense corpus, so that the walk and the details pass have cases enough to be hit.
KILL_COURT = {**COURT, "docs": 120, "real_counts": False}


def _crawl_in_a_child(workspace: str, base_url: str) -> None:
    class Court:      # what crawl_config reads of a court
        pass
    court = Court()
    court.base_url = base_url
    run_pipeline(crawl_config(court, workspace), handle_signals=False)


def _counts(court) -> dict:
    return {name: court.endpoint_requests[name] for name in
            ("opinion_search", "case_search", "docketentries", "entry_documents", "download", "parties", "lowercourts")}


@pytest.fixture(scope="module")
def clean_counts(tmp_path_factory):
    """What an uninterrupted crawl of the test court asks, endpoint by endpoint."""
    with SimCourt(**KILL_COURT) as court:
        report = run_pipeline(crawl_config(court, tmp_path_factory.mktemp("clean") / "w"), handle_signals=False)
        assert report.exit_status == 0, report.summary()
        return _counts(court)


# (the unit a SIGKILL hits: the endpoint whose count says it is under way, how many, and how many of
# each endpoint's requests the resumed crawl may ask again: the unit in flight)
KILLS = {
    "opinion window": ("opinion_search", 60, {"opinion_search": 2, "entry_documents": 4, "download": 6}),
    "walk": ("docketentries", 15, {"case_search": 3, "docketentries": 1, "entry_documents": 4, "download": 6}),
    "drain": ("download", 40, {"entry_documents": 4, "download": 6}),
    "details": ("parties", 10, {"parties": 1, "lowercourts": 1}),
}


@pytest.mark.slow
@pytest.mark.parametrize("unit", KILLS)
def test_a_sigkill_in_each_kind_of_unit_loses_only_the_unit_in_flight(tmp_path, clean_counts, unit):
    endpoint, after, again = KILLS[unit]
    with SimCourt(**KILL_COURT) as court:
        workspace = str(tmp_path / "w")
        child = multiprocessing.get_context("fork").Process(target=_crawl_in_a_child,
                                                            args=(workspace, court.base_url))
        child.start()
        deadline = time.monotonic() + 60
        while court.endpoint_requests[endpoint] < after and time.monotonic() < deadline and child.is_alive():
            time.sleep(0.001)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL, "the crawl ended before the kill"
        report = run_pipeline(crawl_config(court, workspace), handle_signals=False)
        counts = _counts(court)
    assert report.exit_status == 0, report.summary()
    state = archived(workspace)
    assert all(state["documents"][doc.document_id] == "downloaded" for doc in court.documents)
    assert state["details"] == 0 and state["parties"] == state["cases"]
    if unit == "details":
        # Discovery had converged: the resumed run is an update (its opinion weeks, every shard's case
        # search, a walk of each open case, at most its budget of file lists asked again) before the
        # details left.
        open_cases = sum(not court.corpus.case_closed(case) for case in range(len(court.corpus.case_keys)))
        again = {**again, "opinion_search": 4, "case_search": len(KENTUCKY.sweep_shards(2025, 2026)),
                 "docketentries": open_cases,
                 "entry_documents": math.ceil(len(court.withheld_files()) * DISCOVER_ASK_AGAIN_UPDATE_SHARE)}
    extra = {name: counts[name] - clean_counts[name] for name in counts}
    assert all(extra[name] <= again.get(name, 0) for name in extra), (unit, extra)


@pytest.mark.slow
@pytest.mark.parametrize("endpoint, after", [("search_opinions", 30), ("get_json", 120)])
def test_a_stop_ends_the_crawl_in_its_unit_and_the_next_run_goes_on_from_there(tmp_path, monkeypatch, clean_counts,
                                                                               endpoint, after):
    # The budget's end (or a signal) in the opinion pass, or in the walk: the crawl stops within the
    # unit in flight, and the next run asks again only what that unit had not committed.
    original = getattr(CourtClient, endpoint)
    asked = []

    def stopping(self, *args, **kwargs):
        asked.append(args)
        if len(asked) == after:
            self.clock.request_stop("budget")
        return original(self, *args, **kwargs)

    with SimCourt(**KILL_COURT) as court:
        monkeypatch.setattr(CourtClient, endpoint, stopping)
        first = run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False)
        monkeypatch.undo()
        assert first.stopped == "budget" and first.stages["discover"].stopped
        assert not first.stages["discover"].converged
        second = run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False)
        counts = _counts(court)
    assert second.exit_status == 0, second.summary()
    state = archived(tmp_path / "w")
    assert all(state["documents"][doc.document_id] == "downloaded" for doc in court.documents)
    extra = {name: counts[name] - clean_counts[name] for name in counts}
    assert all(extra[name] <= KILLS["walk"][2].get(name, 0) + KILLS["opinion window"][2].get(name, 0)
               for name in extra), extra


@pytest.mark.slow
def test_a_resumed_sweep_keeps_the_walk_figures_of_its_earlier_sessions(tmp_path, monkeypatch):
    # The first unit of a run comes before discovery has resumed its sweep: it must not take the
    # sweep's figures for another sweep's and start them afresh (status.json would say "not known
    # yet" until a shard ends, and the earlier sessions' cost of the sweep would be lost).
    original = CourtClient.get_json
    asked = []

    def stopping(self, *args, **kwargs):
        asked.append(args)
        if len(asked) in (120, 121 + 5):
            self.clock.request_stop("budget")
        return original(self, *args, **kwargs)

    def walk_figures():
        db = Database.open(tmp_path / "w" / "ky_court.sqlite")
        try:
            return json.loads(db.kv_get("crawl_figures"))["walk"]
        finally:
            db.close()

    with SimCourt(**KILL_COURT) as court:
        monkeypatch.setattr(CourtClient, "get_json", stopping)
        assert run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False).stopped == "budget"
        before = walk_figures()
        asked.append(None)       # the second run stops within the sweep it resumes
        assert run_pipeline(crawl_config(court, tmp_path / "w"), handle_signals=False).stopped == "budget"
        after = walk_figures()
    assert before["sweep"] >= 1 and after["sweep"] == before["sweep"], (before, after)
    assert after["requests"] > before["requests"], (before, after)
