"""The simulated court lives: advanced, it serves exactly what its plan says changed, the same plan from the
same seed, withdrawals as the real court shows them, and it counts the next run's requests apart."""
from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.parse

import pytest
import requests

from notebook_builder.cells.c25_court import ENDPOINTS
from notebook_builder.simcourt import SimCourt
from notebook_builder.simcourt.living import month_activity, update_floor
from notebook_builder.simcourt.server import (ADVANCE_PATH, PERIOD_PATH,
                                              PLANS_PATH, STATS_PATH)

HEADERS = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true",
           "x-ctrack-paging-calculatetotalcount": "true", "x-ctrack-paging-startindex": "1",
           "x-ctrack-paging-maxresults": "1000"}
DAY = dt.date(2026, 6, 1)       # the court's day before it advances (a fixed day: the same plan every day)


def living_court(**options) -> SimCourt:
    settings = dict(docs=400, seed=3, shape="captured", today=DAY, release_withheld=False)
    return SimCourt(**{**settings, **options})


def root_of(court: SimCourt) -> str:
    return court.base_url.rsplit("/api/api/v1", 1)[0]


def get(http: requests.Session, sim: SimCourt, endpoint: str, **values) -> requests.Response:
    return http.get(sim.base_url + ENDPOINTS[endpoint].format(**values), headers=HEADERS, timeout=10)


def case_row(http, court, case_number: str) -> dict | None:
    rows = get(http, court, "case_search", prefix=case_number).json()["resultItems"]
    return next((row["rowMap"] for row in rows if row["rowMap"]["caseNumber"] == case_number), None)


def files_of(http, court, entry_id: str) -> dict[str, dict]:
    return {file["documentID"]: file for file in get(http, court, "entry_documents", docket_entry_id=entry_id).json()}


def download(http, court, document_id: str, method: str = "GET") -> requests.Response:
    return http.request(method, court.base_url + ENDPOINTS["download"].format(document_id=document_id), timeout=10)


def opinion_entries(http, court, court_name: str, first: str, last: str) -> set[str]:
    day = lambda iso: dt.date.fromisoformat(iso).strftime("%m/%d/%Y")    # noqa: E731
    answer = get(http, court, "opinion_search", court=court_name, first_day=day(first), last_day=day(last)).json()
    return {row["id"] for row in answer["resultItems"]}


def advance_over_http(http, court, **query) -> dict:
    answer = http.post(root_of(court) + ADVANCE_PATH + "?" + urllib.parse.urlencode(query), timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def session():
    with requests.Session() as http:
        yield http


@pytest.mark.parametrize("options", [
    {}, {"shape": "inferred"},
    # The real court's behaviours that leave a listing whole (paged lists and first listings that
    # come back empty are the client's to follow and ask again).
    {"neighbours": True, "null_texts": True, "midnight_instants": True, "late_opinions": 1, "release_withheld": True},
], ids=["captured", "inferred", "real-behaviours"])
def test_the_plan_is_what_the_court_then_serves(session, options):
    with living_court(**options) as court:
        http = session
        rows_before = {number: case_row(http, court, number) for number in court.corpus.case_keys}
        withheld_before = court.withheld_files()
        plan = advance_over_http(http, court, days=30, seed=7)
        counts = plan["counts"]
        assert counts["added"] >= 10 and counts["withdrawn"] == 2 and counts["restored"] == 1
        assert counts["opinions"] >= 3 and counts["new_cases"] >= 2 and counts["changed"] >= 1
        assert plan["day_before"] == DAY.isoformat() and plan["today"] == (DAY + dt.timedelta(days=30)).isoformat()
        assert json.loads(http.get(root_of(court) + STATS_PATH, timeout=10).text)["today"] == plan["today"]

        # Every new document: in its case's docket, listed available in its entry, served; opinions in the
        # opinion search on their filed day; nothing filed on or after the court's new day.
        for item in plan["added"]:
            assert plan["filed_from"] <= item["filed_date"] <= plan["filed_through"] < plan["today"]
            entries = {entry["docketEntryID"]: entry for entry in
                       get(http, court, "docket_entries", case_id=item["case_id"]).json()}
            assert entries[item["docket_entry_id"]]["docketEntryDescription"] == item["description"]
            listed = files_of(http, court, item["docket_entry_id"])
            assert listed[item["document_id"]]["documentAvailable"] is True
            assert listed[item["document_id"]]["caseHeader"]["caseNumber"] == item["case_number"]
            answer = download(http, court, item["document_id"])
            assert answer.status_code == 200 and answer.content.startswith(b"%PDF-")
            in_search = item["docket_entry_id"] in opinion_entries(http, court, item["court"], item["filed_date"],
                                                                  item["filed_date"])
            assert in_search == item["opinion"]
            assert item["seen_by"], item        # an update that reads what changed can see it

        # Cases: a changed row shows its changed fields, an unchanged one is as it was; new cases are found.
        for case in plan["cases"]:
            row = case_row(http, court, case["case_number"])
            assert row is not None and row["closed"] is case["closed_after"]
            if case["new"]:
                assert case["case_number"] not in rows_before and row["caseID"] == case["case_id"]
                continue
            before = rows_before[case["case_number"]]
            assert sorted(key for key in row if row[key] != before[key]) == case["row_fields"], case
            assert before["closed"] is case["closed_before"]
        reopened = [case for case in plan["cases"] if case["why"][0] == "reopened"]
        assert [(case["closed_before"], case["closed_after"], case["row_fields"]) for case in reopened] == \
            [(True, False, ["closed"])]
        unchanged = set(rows_before) - {case["case_number"] for case in plan["cases"]}
        assert all(case_row(http, court, number) == rows_before[number] for number in sorted(unchanged)[::7])

        # Withdrawn: listed as not available, or gone from the list; 404 either way.
        for item in plan["withdrawn"]:
            listed = files_of(http, court, item["docket_entry_id"])
            if item["how"] == "unavailable":
                assert listed[item["document_id"]]["documentAvailable"] is False
            else:
                assert item["document_id"] not in listed
            assert download(http, court, item["document_id"]).status_code == 404
            assert "case_search" in item["seen_by"]
        assert {item["how"] for item in plan["withdrawn"]} == {"unavailable", "delisted"}

        # Restored: a file withheld before is listed available and served.
        for item in plan["restored"]:
            assert withheld_before.get(item["document_id"]) is False and item["was"] == "withheld"
            assert files_of(http, court, item["docket_entry_id"])[item["document_id"]]["documentAvailable"] is True
            assert download(http, court, item["document_id"]).status_code == 200

        # Changed metadata: the title in the files' case header, the description in the docket.
        for item in plan["changed"]:
            header = get(http, court, "case", case_id=item["case_id"]).json()
            if "case_title" in item["fields"]:
                assert header["shortTitle"] != rows_before[item["case_number"]]["shortTitle"]
            if "description" in item["fields"]:
                entries = get(http, court, "docket_entries", case_id=item["case_id"]).json()
                assert any(entry["docketEntryDescription"].endswith("(CORRECTED)") for entry in entries)
        assert any("description" in item["fields"] for item in plan["changed"])
        assert http.get(root_of(court) + PLANS_PATH, timeout=10).json() == [plan]


def test_open_cases_of_many_years_get_filings_and_a_2019_case_reopens():
    court = SimCourt(docs=3000, seed=5, shape="captured", today=DAY)
    plan = court.advance(30, seed=1)
    years = {int(item["case_number"][:4]) for item in plan["added"] if item["why"] == "open case"}
    assert len(years) >= 3 and min(years) < 2000, years
    reopened = [case for case in plan["cases"] if "reopened" in case["why"]]
    assert [case["case_number"][:4] for case in reopened] == ["2019"]
    closed_opinions = [item for item in plan["added"] if item["why"] == "opinion in a closed case"]
    assert closed_opinions and all(item["seen_by"] == ["opinion_search"] for item in closed_opinions)
    retitled = [case for case in plan["cases"] if "retitled" in case["why"]]
    assert len(retitled) >= 4 and all(case["row_fields"] == ["shortTitle"] for case in retitled)


def test_same_seed_same_plan_and_bytes_other_seed_other_plan():
    def advanced(seed: int) -> tuple[SimCourt, list[dict]]:
        court = living_court()
        return court, [court.advance(30, seed=seed), court.advance(14, seed=seed)]

    first, plans = advanced(7)
    second, again = advanced(7)
    _, other = advanced(8)
    assert plans == again and plans[0] != other[0]
    assert plans[1]["day_before"] == plans[0]["today"] and plans[1]["advance"] == 2
    added = plans[0]["added"][0]["document_id"]
    assert first.pdf_bytes(added) == second.pdf_bytes(added) is not None
    assert [d.document_id for d in first.documents] == [d.document_id for d in second.documents]


def test_a_withdrawal_shows_as_the_court_shows_it_and_a_later_advance_restores_one(session):
    with living_court(shape="inferred", unavailable_files=False) as court:
        http = session
        plan = court.advance(30, seed=2)
        unavailable, delisted = (next(item for item in plan["withdrawn"] if item["how"] == how)
                                 for how in ("unavailable", "delisted"))
        assert plan["restored"] == []          # nothing withheld before, nothing withdrawn before
        listed = files_of(http, court, unavailable["docket_entry_id"])
        assert listed[unavailable["document_id"]]["documentAvailable"] is False
        assert delisted["document_id"] not in files_of(http, court, delisted["docket_entry_id"])
        for item in (unavailable, delisted):
            assert download(http, court, item["document_id"]).status_code == 404
            assert download(http, court, item["document_id"], "HEAD").status_code == 404
        rows = {item["document_id"]: {row["id"]: row["rowMap"]["documentAvailable"] for row in get(
            http, court, "document_search", prefix=item["case_number"]).json()["resultItems"]}
            for item in (unavailable, delisted)}
        assert rows[unavailable["document_id"]][unavailable["document_id"]] is False
        assert delisted["document_id"] not in rows[delisted["document_id"]]

        later = court.advance(30, seed=2, activity={"withdrawals": 0})
        [restored] = later["restored"]
        assert restored["was"] == "withdrawn"
        assert restored["document_id"] in {unavailable["document_id"], delisted["document_id"]}
        assert files_of(http, court, restored["docket_entry_id"])[restored["document_id"]]["documentAvailable"] is True
        assert download(http, court, restored["document_id"]).status_code == 200


def test_the_next_runs_requests_are_counted_apart(session):
    with living_court(record_requests=True) as court:
        http = session
        for prefix in ("2019-CA", "2020-SC"):
            get(http, court, "case_search", prefix=prefix)
        plan = advance_over_http(http, court, days=7, seed=1)
        stats = http.get(root_of(court) + STATS_PATH, timeout=10).json()
        assert stats["period"]["number"] == 2 and stats["period"]["requests"] == 0
        assert stats["period"]["began"] == "advance 1" and stats["period"]["today"] == plan["today"]
        assert stats["periods"][0]["endpoints"] == {"case_search": 2}
        get(http, court, "case_search", prefix="2021-CA")
        download(http, court, plan["added"][0]["document_id"])
        ended = http.post(root_of(court) + PERIOD_PATH, timeout=10).json()
        assert ended["endpoints"] == {"case_search": 1, "download": 1} and ended["request_log_start"] == 2
        stats = court.stats()
        assert stats["period"]["number"] == 3 and stats["endpoints"] == {"case_search": 3, "download": 1}
        assert stats["requests"]["search"] == 3          # the totals are the court's whole life


def test_advance_is_refused_under_a_request_and_for_unknown_activity(session):
    with living_court() as court:
        answer = session.post(root_of(court) + ADVANCE_PATH + "?days=30&floods=3", timeout=10)
        assert answer.status_code == 400 and "floods" in answer.json()["message"]
        court.advance_wait_s = 0.2
        with court._lock:
            court.in_flight += 1            # a request of another client being answered, and not ending
        try:
            assert session.post(root_of(court) + ADVANCE_PATH, timeout=10).status_code == 409
            with pytest.raises(RuntimeError):
                court.advance(30)
        finally:
            with court._lock:
                court.in_flight -= 1
        assert court.plans == [] and court.stats()["today"] == DAY.isoformat()
        assert session.post(court.base_url + "/cases/search", timeout=10).status_code == 405
        # A request whose answer the client has read but whose thread has not yet counted it done:
        # the advance waits for it instead of being refused.
        court.advance_wait_s = 5.0
        with court._lock:
            court.in_flight += 1

        def end_it():
            with court._lock:
                court.in_flight -= 1
                court._quiet.notify_all()
        threading.Timer(0.1, end_it).start()
        assert court.advance(30)["advance"] == 1 and court.in_flight == 0


def test_the_default_month_scales_with_the_court_and_its_floor_counts_what_changed():
    small = month_activity(living_court().corpus, 30)
    assert small["withdrawals"] == 2 and small["restorations"] == 1 and small["open_case_filings"] >= 4
    court = living_court()
    plan = court.advance(30, seed=4)
    shards = [f"{year}-{code}" for year in range(1990, 2027) for code in ("CA", "SC")]
    floor = update_floor(court.corpus, [plan], shards, page_size=500, opinions_from=DAY - dt.timedelta(days=7))
    open_cases = sum(1 for case in range(len(court.corpus.case_keys)) if not court.corpus.case_closed(case))
    changed_closed = sum(1 for case in plan["cases"] if case["row_fields"] and case["closed_after"])
    assert floor["docket-entry lists"] == open_cases + changed_closed
    assert floor["downloads"] == plan["counts"]["added"] + plan["counts"]["restored"]
    assert floor["case search pages"] == len(shards)          # a page a shard at this size
    assert floor["opinion search pages"] == 2 * 6             # 38 days: six 7-day windows, both courts
