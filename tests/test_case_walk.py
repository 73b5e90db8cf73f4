"""The simulated court as captured, the case walk, the auto strategy, incremental updates, the probe."""
from __future__ import annotations

import collections
import datetime as dt
import os
import re

import captured_shapes as captured
import pytest
import requests
from support import RecordingClock

from notebook_builder import cli
from notebook_builder.cells.c00_config import kentucky_today, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c30_client import CourtClient
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c25_court import KENTUCKY, choose_strategy, opinion_windows
from notebook_builder.cells.c44_discovery_rules import DISCOVER_DETAILS_BATCH, OPEN_CASE_REWALK_DAYS, walk_kind
from notebook_builder.cells.c50_discover import Discovery, discover
from notebook_builder.cells.c55_probe import PROBE_MAX_REQUESTS, probe
from notebook_builder.cells.c97_report import report_table
from notebook_builder.simcourt import SimCourt

HEADERS = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true",
           "x-ctrack-paging-calculatetotalcount": "true", "x-ctrack-paging-maxresults": "500"}
CASE_SEARCH = ("/cases/search?queryString=true&searchFields[0].searchType=Starts With&searchFields[0].operation=="
               "&searchFields[0].values[0]={}&searchFields[0].indexFieldName=caseNumber")


class CountingClient(CourtClient):
    """Counts JSON requests per endpoint; can request a stop after N walked cases."""

    def __init__(self, *args, stop_after_cases: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.endpoints = collections.Counter()
        self.stop_after_cases = stop_after_cases

    def get_json(self, endpoint, **values):
        self.endpoints[endpoint] += 1
        if (endpoint == "docket_entries" and self.stop_after_cases is not None
                and self.endpoints[endpoint] > self.stop_after_cases):
            self.clock.request_stop("signal")
        return super().get_json(endpoint, **values)


@pytest.fixture
def make_context(make_context, monkeypatch):
    """conftest's builder, for a court: its years, a CountingClient, workspace `name`, store `name`-store."""
    monkeypatch.setenv("KY_PROGRESS", "0")

    def build(court, name="w", client_kwargs=None, **knobs):
        return make_context(court, name=name, store_name=f"{name}-store", clock=RecordingClock(),
                            client=lambda cfg, clock: CountingClient(cfg, clock, **(client_kwargs or {})),
                            FIRST_YEAR=court.corpus.first_year, LAST_YEAR=court.corpus.last_year, **knobs)

    return build


def ids(ctx):
    return {row["document_id"] for row in ctx.db.iter_documents()}


def served_ids(court):
    """Every document id the court lists: its documents and the files it withholds."""
    return {doc.document_id for doc in court.documents} | set(court.withheld_files())


# ------------------------------------------------------------ the court


def test_the_captured_court_serves_every_confirmed_endpoint_field_for_field():
    with SimCourt(200, seed=3, shape="captured", document_search="absent", first_year=2022,
                  last_year=2024) as court, requests.Session() as http:
        http.headers.update(HEADERS)
        cases = http.get(court.base_url + CASE_SEARCH.format("2023-CA"), timeout=10)
        assert int(cases.headers["x-ctrack-paging-totalcount"]) == len(cases.json()["resultItems"]) > 0
        row = cases.json()["resultItems"][0]["rowMap"]
        assert "\r\nV.\r\n" in row["shortTitle"] and re.fullmatch(r".*\.000\+0000", row["filedDate"])
        case_id = row["caseID"]
        assert set(http.get(f"{court.base_url}/cases/{case_id}", timeout=10).json()) == captured.CASE_HEADER_KEYS
        walk = [http.get(f"{court.base_url}/cases/{case['id']}/docketentries", timeout=10).json()
                for case in http.get(court.base_url + CASE_SEARCH.format("202"), timeout=10,
                                     headers={"x-ctrack-paging-maxresults": "200"}).json()["resultItems"]]
        entries = [entry for case in walk for entry in case]
        assert {entry["hasDocuments"] for entry in entries} == {True, False}
        files = [file for entry in entries if entry["hasDocuments"] for file in http.get(
            f"{court.base_url}/publicaccessdocuments?filter=parentCategory=docketentries,"
            f"parentID={entry['docketEntryID']}", timeout=10).json()]
        assert all(set(file) == captured.FILE_KEYS for file in files)
        assert all(set(file["caseHeader"]) == captured.CASE_HEADER_KEYS for file in files)
        unavailable = [file for file in files if not file["documentAvailable"]]
        assert unavailable and all(isinstance(file["documentText"], list) for file in files if file["documentAvailable"])
        hidden = http.get(f"{court.base_url}/publicaccessdocuments/{unavailable[0]['documentID']}/download", timeout=10)
        assert hidden.status_code == 404
        assert http.get(f"{court.base_url}/cases/{case_id}/parties", timeout=10).json()[0]["attorneys"] is not None
        assert http.get(f"{court.base_url}/cases/{case_id}/lowercourts", timeout=10).json()[0]["lowerCourtName"]
        absent = http.get(court.base_url + "/publicaccessdocuments/search?queryString=true", timeout=10)
        assert absent.status_code == 404


def test_admin_numbers_are_only_in_their_own_prefix_and_name_real_numbers_in_the_description():
    with SimCourt(400, seed=2, shape="captured", first_year=2022, last_year=2024) as court, \
            requests.Session() as http:
        http.headers.update(HEADERS)
        admin = [doc for doc in court.documents if " ADMIN - " in doc.case_number]
        assert admin and all(re.match(r"\d{4}-(CA|SC)-\d{4}", doc.description) for doc in admin)
        year = admin[0].case_number[:4]
        regular = http.get(court.base_url + CASE_SEARCH.format(f"{year}-CA"), timeout=10,
                           headers={"x-ctrack-paging-maxresults": "500"}).json()["resultItems"]
        assert all(" ADMIN" not in item["rowMap"]["caseNumber"] for item in regular)
        found = http.get(court.base_url + CASE_SEARCH.format(f"{year} CA ADMIN"), timeout=10).json()["resultItems"]
        assert found and all("NON-CONFIDENTIAL OPINION" in item["rowMap"]["caseNumber"] for item in found)


def test_the_opinion_search_pages_by_filed_date_with_headers_and_facets():
    with SimCourt(600, seed=4, shape="captured", first_year=2023, last_year=2024) as court, \
            requests.Session() as http:
        http.headers.update(HEADERS)
        url = (court.base_url + "/opinions/search?queryString=true&searchFields[0].operation=>="
               "&searchFields[0].values[0]=01/01/2024&searchFields[0].indexFieldName=filedDate"
               "&searchFields[1].operation=<=&searchFields[1].values[0]=12/31/2024"
               "&searchFields[1].indexFieldName=filedDate&searchFilters[0].operation=="
               "&searchFilters[0].indexFieldName=caseHeader.court&searchFilters[0].values[0]=Kentucky Court of Appeals")
        page = http.get(url, timeout=10, headers={"x-ctrack-paging-maxresults": "100"})
        body = page.json()
        assert len(body["resultItems"]) == 25 and page.headers["x-ctrack-paging-moreresults"] == "true"
        assert {header["property"] for header in body["headers"]} >= {"docketEntryType", "filedDate"}
        court_facet = body["facets"][0]
        assert court_facet["searchFacetName"] == "Court"
        selected = [item for item in court_facet["searchFacetItems"] if item["selected"]]
        assert selected[0]["count"] == int(page.headers["x-ctrack-paging-totalcount"])
        for item in body["resultItems"]:
            assert set(item["rowMap"]) == captured.OPINION_ROW_KEYS and item["id"] == item["rowMap"]["docketEntryID"]
            assert item["rowMap"]["filedDate"].startswith("2024-")


# ---------------------------------------------------------- pure decisions


def test_a_case_is_walked_when_new_unwalked_or_its_search_row_changed_never_twice_in_a_sweep():
    walked = lambda sweep, closed, row: {"walked_sweep": sweep, "closed": closed, "search_row": row}  # noqa: E731
    assert walk_kind(None, {"closed": 1, "search_row": "a"}, 1) == "new"
    assert walk_kind(walked(None, 1, None), {"closed": 1, "search_row": "a"}, 2) == "new"
    assert walk_kind(walked(2, 0, "a"), {"closed": 0, "search_row": "b"}, 2) is None      # walked in this sweep
    # Walked in an earlier sweep: again only when the court's row for it changed (it closed, say).
    assert walk_kind(walked(1, 0, "a"), {"closed": 0, "search_row": "a"}, 2) is None
    assert walk_kind(walked(1, 0, "a"), {"closed": 1, "search_row": "b"}, 2) == "changed"
    assert walk_kind(walked(1, 1, "a"), {"closed": 1, "search_row": "a"}, 2) is None
    # An open case walked OPEN_CASE_REWALK_DAYS ago, or with FULL_SWEEP, is walked again.
    assert walk_kind(walked(1, 0, "a"), {"closed": 0, "search_row": "a"}, 2,
                     days_since_walk=OPEN_CASE_REWALK_DAYS) == "again"
    assert walk_kind(walked(1, 0, "a"), {"closed": 0, "search_row": "a"}, 2, days_since_walk=2) is None
    assert walk_kind(walked(1, 1, "a"), {"closed": 1, "search_row": "a"}, 2, days_since_walk=400) is None
    assert walk_kind(walked(1, 0, "a"), {"closed": 0, "search_row": "a"}, 2, rewalk_open=True) == "again"
    assert walk_kind(walked(1, 1, "a"), {"closed": 1, "search_row": "a"}, 2, rewalk_open=True) is None
    # Walked before rows were fingerprinted: open ones, or reopened ones, as before.
    assert walk_kind(walked(1, 0, None), {"closed": 0, "search_row": "a"}, 2) == "again"
    assert walk_kind(walked(1, 1, None), {"closed": 1, "search_row": "a"}, 2) is None
    assert walk_kind(walked(1, 1, None), {"closed": 0, "search_row": "a"}, 2) == "again"


def test_an_update_walks_new_changed_and_open_cases_and_leaves_unchanged_closed_ones_alone():
    walked = lambda sweep, closed, row: {"walked_sweep": sweep, "closed": closed, "search_row": row}  # noqa: E731
    assert walk_kind(None, {"closed": 1, "search_row": "a"}, 5, update=True) == "new"
    assert walk_kind(walked(1, 1, "a"), {"closed": 0, "search_row": "b"}, 5, update=True) == "changed"   # reopened
    assert walk_kind(walked(1, 1, "a"), {"closed": 1, "search_row": "b"}, 5, update=True) == "changed"   # retitled
    assert walk_kind(walked(1, 0, "a"), {"closed": 0, "search_row": "a"}, 5, update=True) == "open"      # any age
    assert walk_kind(walked(1, 1, "a"), {"closed": 1, "search_row": "a"}, 5, update=True, days_since_walk=400) is None
    assert walk_kind(walked(5, 0, "a"), {"closed": 0, "search_row": "a"}, 5, update=True) is None        # resumed


def test_a_changed_case_whose_walk_failed_is_still_walked_in_the_next_sweep(tmp_path):
    # The fingerprint says "walked at this row": a sweep that saw the changed row but could not walk
    # the case (the court refused its entries) must not record the new row as walked.
    db = Database.open(tmp_path / "ky_court.sqlite")
    try:
        case = {"case_id": "c1", "case_number": "2024-CA-0001", "closed": 1, "search_row": "a"}
        DiscoveryState(db).record_case_walk(1, case, [], [])
        DiscoveryState(db).record_case_walk(None, {**case, "search_row": "b"}, [], [])    # sweep 2 saw "b", walk refused
        previous = DiscoveryState(db).cases_to_walk(3, ["c1"])["c1"]
    finally:
        db.close()
    assert previous["search_row"] == "a" and walk_kind(previous, {**case, "search_row": "b"}, 3) == "changed"


def test_a_strategy_fails_when_most_of_its_answers_are_unusable_never_on_one_missing_case():
    from notebook_builder.cells.c44_discovery_rules import STRATEGY_EVIDENCE, strategy_failing
    assert not strategy_failing(0, STRATEGY_EVIDENCE - 1)                  # too early to judge mid-sweep
    assert strategy_failing(0, STRATEGY_EVIDENCE) and strategy_failing(3, 2, complete=False) is False
    assert strategy_failing(0, 2, complete=True) and strategy_failing(1, 2, complete=True)
    assert not strategy_failing(0, 1, complete=True)                       # one removed case is no verdict
    assert not strategy_failing(40, 12) and not strategy_failing(5, 5, complete=True)


def test_auto_decides_on_evidence_and_no_rows_is_no_evidence():
    document_row = {"id": "a" * 64, "rowMap": {"documentID": "a" * 64}}
    assert choose_strategy("auto", [], "rows")[0] == "cases"
    assert choose_strategy("auto", [], "absent")[0] == "documents"        # the search that answers
    assert choose_strategy("auto", [captured.opinion_row()], "absent")[0] == "documents"   # resolvable rows
    assert choose_strategy("auto", None, "absent") == ("", "the document search and the case search both answer 404")
    assert choose_strategy("auto", [document_row], "absent")[0] == "documents"


def test_auto_takes_the_document_search_only_when_its_rows_carry_documentid():
    document_row = {"id": "a" * 64, "rowMap": {"documentID": "a" * 64}}
    assert choose_strategy("auto", [document_row])[0] == "documents"
    assert choose_strategy("auto", [captured.opinion_row()])[0] == "cases"
    assert choose_strategy("auto", [document_row, captured.opinion_row()])[0] == "cases"
    assert choose_strategy("auto", None)[0] == "cases" and choose_strategy("auto", [])[0] == "cases"
    assert choose_strategy("documents", None)[0] == "documents"


def test_a_sweep_and_an_update_alike_page_every_year_and_its_admin_shards():
    assert KENTUCKY.sweep_shards(2025, 2026) == [
        "2025 CA ADMIN", "2025 SC ADMIN", "2025-CA", "2025-SC", "2026 CA ADMIN", "2026 SC ADMIN", "2026-CA", "2026-SC"]
    assert len(KENTUCKY.sweep_shards(1990, 2026)) == 4 * 37
    windows = opinion_windows(dt.date(2024, 4, 1), dt.date(2024, 4, 16))
    assert windows == [("04/01/2024", "04/07/2024"), ("04/08/2024", "04/14/2024"), ("04/15/2024", "04/16/2024")]


# ------------------------------------------------------------- the walk


def fetch_details(ctx):
    """The details pass, as the crawl runs it once the PDFs are downloaded (`discover` alone leaves it
    while any waits to be downloaded); its result."""
    discovery = Discovery(ctx)
    try:
        while discovery.details(DISCOVER_DETAILS_BATCH):
            pass
    finally:
        result = discovery.finish()
    return result


@pytest.mark.parametrize("document_search", ["absent", "entries"])
def test_auto_walks_the_cases_of_a_court_without_a_usable_document_search(make_context, document_search):
    with SimCourt(120, seed=5, shape="captured", document_search=document_search, faults=False,
                  results_limit=12, max_page=6, first_year=2021, last_year=2024) as court:
        ctx = make_context(court, PAGE_SIZE=6, CONVERGENCE_DELTA=1)
        result = discover(ctx)
        assert result.strategy == "cases" and result.converged and ctx.db.kv_get("discovery_strategy") == "cases"
        withheld = set(court.withheld_files())
        assert withheld and ids(ctx) == served_ids(court)
        rows = [ctx.db.get_document(document_id) for document_id in withheld]
        assert {(row["status"], row["http_status"], row["document_available"]) for row in rows} == {("failed", 404, 0)}
        entry_ids = {row[0] for row in ctx.db.conn.execute("SELECT docket_entry_id FROM docket_entries")}
        assert not ids(ctx) & entry_ids and result.unavailable > 0
        splits = ctx.db.conn.execute("SELECT COUNT(*) FROM discovery_shards WHERE state = 'split'").fetchone()[0]
        assert splits > 0, "a case shard over the announced limit was split"
        cases = ctx.db.conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
        assert cases == len(set(doc.case_id for doc in court.documents))
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM parties").fetchone()[0] == 0     # PDFs wait
        assert fetch_details(ctx).details_cases == cases
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM parties").fetchone()[0] >= cases
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM lower_courts").fetchone()[0] == cases
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM docket_entries WHERE has_documents = 0").fetchone()[0] > 0
        admin = ctx.db.conn.execute("SELECT case_number, related_case_numbers FROM documents "
                                    "WHERE case_number LIKE '% ADMIN - %'").fetchall()
        assert admin and all(re.fullmatch(r"\d{4}-(CA|SC)-\d{4}(, \d{4}-(CA|SC)-\d{4})*", row[1]) for row in admin)
        titles = [row[0] for row in ctx.db.conn.execute("SELECT case_title FROM documents")]
        assert all("\r" not in title and "\n" not in title for title in titles)
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM court_text").fetchone()[0] == len(court.documents)


def test_the_walk_makes_no_request_the_data_does_not_need(make_context):
    with SimCourt(90, seed=6, shape="captured", document_search="absent", faults=False, first_year=2023,
                  last_year=2024) as court:
        ctx = make_context(court, DISCOVERY="cases", CASE_DETAILS=False, MAX_SWEEPS=1)
        discover(ctx)
        cases = len(set(doc.case_id for doc in court.documents))
        entries = len(set(doc.docket_entry_id for doc in court.documents))
        assert court.endpoint_requests["docketentries"] == cases
        assert court.endpoint_requests["entry_documents"] == entries      # never an entry without documents
        assert court.endpoint_requests["parties"] == court.endpoint_requests["lowercourts"] == 0
        assert court.endpoint_requests["case_search"] == len(KENTUCKY.sweep_shards(2023, 2024))


def test_a_killed_walk_resumes_per_case_and_never_walks_a_case_twice_in_a_sweep(make_context):
    with SimCourt(150, seed=7, shape="captured", document_search="absent", faults=False, first_year=2022,
                  last_year=2024) as court:
        ctx = make_context(court, DISCOVERY="cases", CASE_DETAILS=False, client_kwargs={"stop_after_cases": 20})
        first = discover(ctx)
        assert first.stopped and 0 < len(ids(ctx)) < 150
        walked = dict(ctx.db.conn.execute("SELECT case_id, walked_sweep FROM cases WHERE walked_sweep IS NOT NULL"))
        assert len(walked) == 20
        ctx.client.stop_after_cases = None
        ctx.client.endpoints.clear()
        ctx.clock = ctx.client.clock = RecordingClock()
        ctx.cfg = ctx.cfg.replace(MAX_SWEEPS=1)
        before = court.endpoint_requests["docketentries"]
        discover(ctx)
        cases = len(set(doc.case_id for doc in court.documents))
        assert court.endpoint_requests["docketentries"] - before == cases - 20
        assert ids(ctx) == served_ids(court)


def test_once_converged_an_update_searches_every_shard_and_walks_the_open_cases_unless_full_sweep(make_context):
    with SimCourt(160, seed=8, shape="captured", document_search="absent", faults=False, first_year=2020,
                  last_year=2026) as court:
        ctx = make_context(court, CONVERGENCE_DELTA=1, CASE_DETAILS=False)
        assert discover(ctx).converged and ctx.db.kv_get("archive_updated_at")
        ctx.db.kv_set("opinions_checked_through", kentucky_today().isoformat())
        # Documents the archive lacks (as if the court added them since) in an open case, of any year.
        open_case = ctx.db.conn.execute(
            "SELECT case_id FROM cases WHERE closed = 0 AND case_number NOT LIKE '% ADMIN%' "
            "AND case_id IN (SELECT case_id FROM documents) ORDER BY case_number LIMIT 1").fetchone()[0]
        added = ctx.db.conn.execute("DELETE FROM documents WHERE case_id = ?", (open_case,)).rowcount
        open_cases = ctx.db.conn.execute("SELECT COUNT(*) FROM cases WHERE closed = 0").fetchone()[0]
        searches_before = court.endpoint_requests["case_search"]
        walks_before = court.endpoint_requests["docketentries"]
        update = discover(ctx)
        # Every shard's case search, and a walk of each open case (its row unchanged: any age).
        assert added and update.incremental and update.converged and update.rows_new == added
        assert court.endpoint_requests["docketentries"] - walks_before == open_cases
        assert court.endpoint_requests["case_search"] - searches_before == len(KENTUCKY.sweep_shards(2020, 2026))
        assert court.endpoint_requests["opinion_search"] > 0 and update.cases_unchanged > 0
        assert ctx.db.kv_get("opinions_checked_through") == kentucky_today().isoformat()
        assert ctx.db.kv_get("complete_through") == kentucky_today().isoformat()
        ctx.cfg = ctx.cfg.replace(FULL_SWEEP=True, MAX_SWEEPS=1)
        searches_before = court.endpoint_requests["case_search"]
        full = discover(ctx)
        assert not full.incremental
        assert court.endpoint_requests["case_search"] - searches_before == len(KENTUCKY.sweep_shards(2020, 2026))


def test_a_late_filing_in_an_open_case_is_found_by_the_next_update_whatever_its_year(make_context):
    # A crawl's sweeps do not walk a case again while its search row is unchanged; an update walks
    # every open case and lists its entries new to the table, so a document filed since in an entry
    # of its own is found. One that joined an entry the archive listed before waits for FULL_SWEEP.
    with SimCourt(120, seed=5, shape="captured", document_search="absent", faults=False, late_docs=3,
                  unavailable_files=False, first_year=2023, last_year=2024) as court:     # an update sweeps them all
        corpus = court.corpus
        late = {court.documents[doc].document_id for doc in corpus.late}
        own_entry = {court.documents[doc].document_id for doc in corpus.late
                     if set(corpus.entry_docs(corpus.doc_entry[doc])) <= corpus.late}
        court.hold_late_documents()
        ctx = make_context(court, CONVERGENCE_DELTA=1, CASE_DETAILS=False)
        assert discover(ctx).converged and not late & ids(ctx)
        court.hold_late_documents(False)        # filed now, in cases the crawl walked while open
        ctx.cfg = ctx.cfg.replace(MAX_SWEEPS=2)
        update = discover(ctx)
        assert update.incremental and update.converged and update.cases_unchanged > 0
        assert own_entry and late & ids(ctx) == own_entry
        ctx.cfg = ctx.cfg.replace(FULL_SWEEP=True, MAX_SWEEPS=1)
        discover(ctx)
        assert ids(ctx) == served_ids(court)


# ------------------------------------------------------------- the probe


@pytest.mark.parametrize("court_kwargs, strategy, exit_status", [
    ({"shape": "inferred"}, "documents", 0),
    ({"shape": "captured", "document_search": "absent"}, "cases", 0),
    ({"shape": "captured", "document_search": "entries"}, "cases", 0),
    ({"shape": "captured", "document_search": "absent", "renamed_fields": {"documentID": "documentId"}}, "cases", 1),
    ({"shape": "captured", "renamed_fields": {"docketEntryID": "docketEntryId"}}, "documents", 0),
])
def test_the_probe_says_whether_the_pipeline_can_run(court_kwargs, strategy, exit_status, capsys, monkeypatch):
    for name in [name for name in os.environ if name.startswith("KY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KY_PACING", "0")
    with SimCourt(150, seed=1, faults=False, first_year=2024, last_year=2026, **court_kwargs) as court:
        status = cli.main(["probe", "--api-base", court.base_url])
        sent = sum(court.endpoint_requests.values())
    out = capsys.readouterr().out
    assert status == exit_status, out
    assert f"strategy: {strategy}" in out and sent <= PROBE_MAX_REQUESTS
    assert re.search(r"^endpoint\s+HTTP\s+ms\s+expected\s+present\s+missing\s+verdict", out, re.M)
    if exit_status:
        assert re.search(r"^entry_documents .* documentID +FAIL", out, re.M)


def test_the_probe_of_an_unreachable_court_fails_without_raising():
    cfg = load_config(env={"KY_PACING": "0", "KY_HTTP_TIMEOUT": "1"}, API_BASE="http://127.0.0.1:9/api/api/v1")
    report = probe(cfg)
    assert not report.ok and {row.verdict for row in report.rows if row.status is None} >= {"FAIL"}


# ------------------------------------------------------- the coverage audit


def test_the_audit_shows_what_the_court_announced_next_to_what_the_archive_holds(make_context):
    from notebook_builder.cells.c15_discovery_state import coverage_gaps
    from notebook_builder.cells.c90_verify import format_verify_report, verify
    from notebook_builder.cells.c97_report import report_table
    with SimCourt(120, seed=9, shape="captured", document_search="absent", faults=False, first_year=2023,
                  last_year=2024) as court:
        ctx = make_context(court, CASE_DETAILS=False, MAX_SWEEPS=1)
        discover(ctx)
        audit = {row["shard"]: dict(row) for row in DiscoveryState(ctx.db).coverage_audit()}
        assert audit["2024-CA"]["announced"] == audit["2024-CA"]["cases"] > 0 and coverage_gaps(audit.values()) == []
        assert "0 shards short" in report_table(ctx.db, ctx.cfg)
        ctx.db.conn.execute("DELETE FROM cases WHERE case_id IN (SELECT case_id FROM cases WHERE shard = '2024-CA' LIMIT 2)")
        gaps = coverage_gaps(DiscoveryState(ctx.db).coverage_audit())
        assert gaps == [{"shard": "2024-CA", "announced": audit["2024-CA"]["announced"],
                         "held": audit["2024-CA"]["announced"] - 2, "unit": "cases"}]
        table = report_table(ctx.db, ctx.cfg)
        assert "1 shard short" in table and f"gap: 2024-CA: {gaps[0]['held']} of {gaps[0]['announced']} cases" in table
        result = verify(ctx)
        assert result.passed and result.coverage_gaps == gaps        # a warning, not a failure
        assert "warning: 1 shards hold fewer than the court announced (2024-CA" in format_verify_report(result)


def test_a_drifted_court_is_counted_per_field_stores_nothing_guessed_and_never_converges(make_context):
    with SimCourt(60, seed=10, shape="captured", document_search="absent", faults=False, first_year=2024,
                  last_year=2025, renamed_fields={"documentID": "documentId", "hasDocuments": "hasDocs"}) as court:
        ctx = make_context(court, CASE_DETAILS=False, MAX_SWEEPS=2)
        result = discover(ctx)
        assert ids(ctx) == set() and not result.converged and result.errors == 0
        assert ctx.db.kv_get("discovery_converged_at") is None
        # hasDocuments missing reads as "has documents", so every entry's files were asked: none named an id.
        assert result.shape_problems["documentID"] >= len(court.documents)
        assert ctx.db.conn.execute("SELECT COUNT(*) FROM docket_entries").fetchone()[0] > 0


def _walk_in_a_child(workspace: str, base_url: str) -> None:
    cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=workspace, STORE=workspace + "-store",
                      API_BASE=base_url, FIRST_YEAR=2022, LAST_YEAR=2024, DISCOVERY="cases", CASE_DETAILS=False,
                      MAX_SWEEPS=1)
    ctx = open_context(cfg)
    discover(ctx)


def test_a_sigkilled_walk_loses_no_walked_case_and_asks_again_only_the_case_in_flight(tmp_path):
    import multiprocessing
    import signal
    import time
    with SimCourt(300, seed=12, shape="captured", document_search="absent", faults=False, first_year=2022,
                  last_year=2024) as court:
        workspace = str(tmp_path / "w")
        child = multiprocessing.get_context("fork").Process(target=_walk_in_a_child, args=(workspace, court.base_url))
        child.start()
        deadline = time.monotonic() + 30
        while court.endpoint_requests["docketentries"] < 25 and time.monotonic() < deadline and child.is_alive():
            time.sleep(0.002)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        asked_before = court.endpoint_requests["docketentries"]
        assert 25 <= asked_before < len({doc.case_id for doc in court.documents})
        _walk_in_a_child(workspace, court.base_url)
        cases = len({doc.case_id for doc in court.documents})
        assert court.endpoint_requests["docketentries"] - cases <= 1, "only the case in flight is walked again"
        ctx = open_context(load_config(env={"KY_PROGRESS": "0"}, WORKSPACE=workspace, STORE=workspace + "-store"))
        ctx.open_database()
        assert ids(ctx) == served_ids(court)
        ctx.close()


def test_probe_first_stops_the_run_before_any_stage_when_the_court_drifted(tmp_path, monkeypatch):
    from notebook_builder.cells.c95_run import run_pipeline
    monkeypatch.setenv("KY_PROGRESS", "0")
    with SimCourt(60, seed=13, shape="captured", document_search="absent", faults=False, first_year=2024,
                  last_year=2025, renamed_fields={"documentID": "documentId"}) as court:
        cfg = load_config(env={"KY_PACING": "0", "KY_PROBE_FIRST": "1"}, WORKSPACE=str(tmp_path / "w"),
                          STORE=str(tmp_path / "s"), API_BASE=court.base_url, FIRST_YEAR=2024, LAST_YEAR=2025)
        report = run_pipeline(cfg, handle_signals=False)
        asked = sum(court.endpoint_requests.values())
    assert report.exit_status == 1 and "probe" in report.error and "discover" not in report.stages
    assert asked <= PROBE_MAX_REQUESTS and report.verify is not None


# ------------------------------------------- the real court, second contact (issue 24)


def test_auto_probes_until_a_shard_answers_rows_and_prefers_the_search_that_answers(make_context):
    # The newest shards are empty (the court ends in 2024, the years run to 2026) and the case walk's
    # endpoints answer 404: "no rows" is no evidence, and the document search answers.
    with SimCourt(60, seed=31, faults=False, case_walk="absent", first_year=2022, last_year=2024) as court:
        ctx = make_context(court, CONVERGENCE_DELTA=1)
        ctx.cfg = ctx.cfg.replace(LAST_YEAR=2026)
        result = discover(ctx)
        assert result.strategy == "documents" and result.converged and result.fallback is None
        assert ids(ctx) == {doc.document_id for doc in court.documents}
        assert court.endpoint_requests["document_search"] > 2, "the probe went on past the empty shards"
        assert "rows with documentID" in ctx.db.kv_get("discovery_strategy_reason")


@pytest.mark.parametrize("case_walk", ["absent", "search-only"])
def test_a_strategy_whose_endpoints_answer_404_falls_back_and_never_converges_on_unusable_answers(make_context,
                                                                                                  case_walk):
    with SimCourt(60, seed=32, faults=False, case_walk=case_walk, first_year=2023, last_year=2024) as court:
        ctx = make_context(court, CONVERGENCE_DELTA=1, CASE_DETAILS=False)
        ctx.db.kv_set("discovery_strategy", "cases")      # an earlier run chose the case walk on no evidence
        result = discover(ctx)
        assert result.strategy == "documents" and result.fallback and result.converged
        assert ctx.db.kv_get("discovery_strategy") == "documents"
        assert ids(ctx) == {doc.document_id for doc in court.documents}
        first = DiscoveryState(ctx.db).discovery_runs()[0]
        assert first["errors"] > 0, "the abandoned sweep counts as an error, never as converged"
        if case_walk == "search-only":
            # The cases it met are recorded but not walked: a later walk would ask for them again.
            assert ctx.db.conn.execute("SELECT COUNT(*) FROM cases WHERE walked_sweep IS NOT NULL").fetchone()[0] == 0


def test_when_no_strategy_works_the_run_stops_as_the_breaker_does(tmp_path, monkeypatch):
    from notebook_builder.cells.c95_run import run_pipeline
    monkeypatch.setenv("KY_PROGRESS", "0")
    with SimCourt(40, seed=33, faults=False, document_search="absent", case_walk="search-only", first_year=2024,
                  last_year=2025) as court:
        cfg = load_config(env={"KY_PACING": "0"}, WORKSPACE=str(tmp_path / "w"), STORE=str(tmp_path / "s"),
                          API_BASE=court.base_url, FIRST_YEAR=2024, LAST_YEAR=2025, CASE_DETAILS=False)
        report = run_pipeline(cfg, handle_signals=False)
    assert report.exit_status == 3, report.summary()
    lines = [line for line in report.summary().splitlines() if line.startswith("court unreachable:")]
    assert len(lines) == 1 and "no discovery strategy works" in lines[0] and "HTTP 404" in lines[0], lines


def test_withheld_files_are_records_never_requested_and_a_released_one_is_queued(make_context):
    from notebook_builder.cells.c70_download import download
    with SimCourt(80, seed=34, shape="captured", document_search="absent", faults=False, release_withheld=True,
                  first_year=2023, last_year=2024) as court:
        withheld = court.withheld_files()
        assert any(withheld.values()) and not all(withheld.values())
        ctx = make_context(court, CASE_DETAILS=False, MAX_SWEEPS=1, CONVERGENCE_DELTA=1)
        discover(ctx)
        rows = {document_id: ctx.db.get_document(document_id) for document_id in withheld}
        assert {(row["status"], row["http_status"], row["document_available"]) for row in rows.values()} \
            == {("failed", 404, 0)}
        download(ctx)
        assert court.endpoint_requests["download"] == len(court.documents)     # never a withheld one
        discover(ctx)          # the next sweep asks the withheld entries again: the court released some
        for document_id, released in withheld.items():
            row = ctx.db.get_document(document_id)
            if released:
                assert (row["status"], row["attempts"], row["http_status"], row["document_available"]) \
                    == ("discovered", 0, None, 1)
            else:
                assert (row["status"], row["http_status"], row["document_available"]) == ("failed", 404, 0)
        download(ctx)
        for document_id, released in withheld.items():
            assert ctx.db.get_document(document_id)["status"] == ("downloaded" if released else "failed")
        asked = {event["document_id"] for event in ctx.db.conn.execute("SELECT document_id FROM download_events")}
        assert not asked & {document_id for document_id, released in withheld.items() if not released}
        still = sum(1 for released in withheld.values() if not released)
        assert f"withheld by the court: {still} documents" in report_table(ctx.db, ctx.cfg)


def test_an_entry_that_lists_no_file_is_kept_and_asked_again_and_a_null_text_is_no_text(make_context):
    with SimCourt(90, seed=35, shape="captured", document_search="absent", faults=False, empty_file_lists=True,
                  null_texts=True, unavailable_files=False, first_year=2023, last_year=2024) as court:
        ctx = make_context(court, CASE_DETAILS=False, MAX_SWEEPS=1)
        first = discover(ctx)
        missing = DiscoveryState(ctx.db).entries_missing_files()
        assert first.empty_entries > 0 and missing.get("empty", 0) == first.empty_entries
        assert ids(ctx) < {doc.document_id for doc in court.documents}
        empty = [row[0] for row in ctx.db.conn.execute("SELECT docket_entry_id FROM docket_entries "
                                                        "WHERE files_missing = 'empty'")]
        ctx.cfg = ctx.cfg.replace(CONVERGENCE_DELTA=1, MAX_SWEEPS=3)
        second = discover(ctx)
        # Each is asked again in the next sweep: by the walk of its case (open), or else by itself.
        assert second.entries_asked_again > 0
        asked = dict(ctx.db.conn.execute("SELECT docket_entry_id, files_asked_sweep FROM docket_entries"))
        assert all(asked[entry] >= 2 for entry in empty)
        assert ids(ctx) == {doc.document_id for doc in court.documents}
        # Entries that say hasDocuments and never list one stay counted, and asked again.
        phantoms = ctx.db.conn.execute("SELECT COUNT(*) FROM docket_entries WHERE files_missing = 'empty'").fetchone()[0]
        assert phantoms == sum(1 for case in range(len(court.corpus.case_keys)) if court.phantom_entries(case))
        texts = ctx.db.conn.execute("SELECT COUNT(*) FROM court_text").fetchone()[0]
        assert 0 < texts < len(court.documents) and not first.shape_problems.get("documentText")


@pytest.mark.parametrize("discovery", ["documents", "cases"])
def test_neighbouring_case_numbers_are_dropped_and_never_move_a_shards_totals(make_context, discovery):
    from notebook_builder.cells.c15_discovery_state import coverage_gaps
    with SimCourt(80, seed=36, shape="captured", faults=False, neighbours=True, unavailable_files=False,
                  results_limit=20, max_page=8, first_year=2023, last_year=2024) as court:
        ctx = make_context(court, DISCOVERY=discovery, CASE_DETAILS=False, PAGE_SIZE=8, CONVERGENCE_DELTA=1)
        result = discover(ctx)
        assert result.converged and result.foreign_rows > 0
        assert ids(ctx) == {doc.document_id for doc in court.documents}
        shards = dict(ctx.db.conn.execute("SELECT document_id, shard FROM documents"))
        assert all(shards[doc.document_id] == doc.shard for doc in court.documents)
        assert coverage_gaps(DiscoveryState(ctx.db).coverage_audit()) == []
        audit = {row["shard"]: row for row in DiscoveryState(ctx.db).coverage_audit()}
        unit = "documents" if discovery == "documents" else "cases"
        assert all(row["announced"] == row[unit] for row in audit.values())


def test_convergence_closes_the_window_an_opinion_filed_meanwhile_in_a_closed_case_is_found(make_context):
    with SimCourt(80, seed=37, shape="captured", document_search="absent", faults=False, late_opinions=1,
                  unavailable_files=False, first_year=2023, last_year=2024) as court:
        (late,) = court.corpus.late_opinions
        document_id = court.documents[late].document_id
        ctx = make_context(court, CASE_DETAILS=False, CONVERGENCE_DELTA=1)
        result = discover(ctx)
        assert result.converged and document_id in ids(ctx)
        row = ctx.db.conn.execute("SELECT c.closed, c.walked_sweep FROM cases c JOIN documents d USING (case_id) "
                                  "WHERE d.document_id = ?", (document_id,)).fetchone()
        assert row["closed"] == 1 and row["walked_sweep"] == 1, "walked once, closed: only the opinion search finds it"
        assert result.complete_through == kentucky_today().isoformat() == ctx.db.kv_get("complete_through")


def test_paged_lists_are_followed_and_nothing_is_cut(make_context):
    with SimCourt(70, seed=38, shape="captured", document_search="absent", faults=False, paged_lists=2,
                  first_year=2023, last_year=2024) as court:
        ctx = make_context(court, CONVERGENCE_DELTA=1)
        result = discover(ctx)
        assert result.converged and ids(ctx) == served_ids(court) and not result.list_warnings
        assert not fetch_details(ctx).list_warnings
        parties = ctx.db.conn.execute("SELECT COUNT(*) FROM parties").fetchone()[0]
        assert parties == sum(len(court.corpus.parties(case)) for case in range(len(court.corpus.case_keys)))
        entries = ctx.db.conn.execute("SELECT COUNT(*) FROM docket_entries").fetchone()[0]
        assert entries > 2 * ctx.db.conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0] / 2


def test_a_file_naming_another_entry_as_its_parent_is_counted_and_never_stored(make_context, monkeypatch):
    from notebook_builder.cells.c30_client import CourtClient
    with SimCourt(40, seed=39, shape="captured", document_search="absent", faults=False, unavailable_files=False,
                  first_year=2024, last_year=2024) as court:
        original = CourtClient.get_json

        def stray_parent(self, endpoint, **values):
            answer = original(self, endpoint, **values)
            if endpoint == "entry_documents" and answer:
                answer[0] = {**answer[0], "parentID": "9" * 64}
            return answer

        monkeypatch.setattr(CourtClient, "get_json", stray_parent)
        ctx = make_context(court, CASE_DETAILS=False, MAX_SWEEPS=1)
        result = discover(ctx)
        assert result.shape_problems.get("parentID", 0) > 0
        assert not ctx.db.conn.execute("SELECT 1 FROM documents WHERE docket_entry_id = ?", ("9" * 64,)).fetchone()
        assert len(ids(ctx)) == len(court.documents) - result.shape_problems["parentID"]


def test_the_probe_tries_both_download_paths_and_says_what_a_crawl_costs(capsys, monkeypatch):
    for name in [name for name in os.environ if name.startswith("KY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KY_PACING", "0")
    with SimCourt(150, seed=1, faults=False, first_year=2024, last_year=2026, shape="captured",
                  document_search="absent", download_paths="site") as court:
        status = cli.main(["probe", "--api-base", court.base_url])
        sent = sum(court.endpoint_requests.values())
    out = capsys.readouterr().out
    assert status == 0 and sent <= PROBE_MAX_REQUESTS, out
    assert re.search(r"^download +404 .*absent|^download +404 .*FAIL", out, re.M), out
    assert re.search(r"^download_site +200 .* ok", out, re.M) and "download path: site" in out, out
    assert re.search(r"politeness: observed latency \d+\.\d\d s a request; a whole first crawl .* projects to "
                     r"\d+\.\d h", out), out
