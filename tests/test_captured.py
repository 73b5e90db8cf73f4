"""The court as captured: the client reads real shapes field for field, and discovery never keys a
document by a docket entry's id (fixtures: tests/captured_shapes.py, written from the captures)."""
from __future__ import annotations

import json
import re
import urllib.parse
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from notebook_builder.cells.c00_config import PermanentFetchError, TransientFetchError, load_config
from notebook_builder.cells.c25_court import KENTUCKY, ShapeProblem, court_date, document_id_of
from notebook_builder.cells.c30_client import CourtClient
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c50_discover import discover
from support import RecordingClock
import captured_shapes as captured

BASE = "https://court.test/api/api/v1"


def make_client(**env):
    cfg = load_config(env={"KY_PACING": "0", "KY_BACKOFF_BASE": "0", "KY_BACKOFF_CAP": "0",
                           "KY_SEARCH_ATTEMPTS": "3", **env}, API_BASE=BASE)
    return CourtClient(cfg, RecordingClock())


def paging(total, count, more=False):
    return {"x-ctrack-paging-totalcount": str(total), "x-ctrack-paging-resultcount": str(count),
            "x-ctrack-paging-moreresults": "true" if more else "false", "x-ctrack-paging-resultslimit": "10000"}


# ------------------------------------------------------------ pure shapes


def test_a_captured_search_row_names_no_document_even_though_its_id_is_64_hex():
    row = captured.opinion_row()
    assert set(row["rowMap"]) == captured.OPINION_ROW_KEYS
    assert len(row["id"]) == 64 and row["id"] == row["rowMap"]["docketEntryID"]
    assert document_id_of(row) is None
    assert document_id_of({"id": captured.DOCUMENT_SC, "rowMap": {"documentID": captured.DOCUMENT_SC.upper()}}) \
        == captured.DOCUMENT_SC


def test_a_captured_file_becomes_a_document_row_with_every_field():
    file = captured.entry_file()
    assert set(file) == captured.FILE_KEYS and set(file["caseHeader"]) == captured.CASE_HEADER_KEYS
    entry = KENTUCKY.docket_entry(captured.docket_entry(), captured.CASE_SC)
    row = KENTUCKY.entry_file(file, entry, None)
    assert row["document_id"] == captured.DOCUMENT_SC != row["docket_entry_id"] == captured.ENTRY_SC
    assert row["case_title"] == "COMMONWEALTH OF KENTUCKY V. RICKY D. ULLMAN, JR."
    assert row["court"] == "Kentucky Supreme Court" and row["case_number"] == "2022-SC-0293"
    assert row["filed_date"] == "2024-04-18T09:03:02.000+00:00"
    assert row["document_name"].startswith("OPINION OF THE COURT") and row["mime_type"] == "application/pdf"
    assert row["dms_document_id"] == "119508" and row["document_available"] == 1
    assert row["entry_type"] == "DISPOSITION - OPINION OF THE COURT BY A JUSTICE"
    assert row["description"].startswith("OPINION OF THE COURT BY JUSTICE LAMBERT")
    assert len(row["court_pages"]) == 2 and "\ufffd" in row["court_pages"][1]


def test_the_case_header_and_entry_and_details_normalize_with_their_value_forms():
    case = KENTUCKY.case_header(captured.case_header())
    assert case["title"] == "COMMONWEALTH OF KENTUCKY V. RICKY D. ULLMAN, JR." and "\r" not in case["title"]
    assert (case["court_level"], case["closed"], case["category"]) == ("Supreme Court", 0, "Appellate")
    assert case["status_date"] == "2024-05-08T18:40:45.000+00:00"
    entry = KENTUCKY.docket_entry(captured.docket_entry(has_documents=False), case["case_id"])
    assert entry["has_documents"] == 0 and entry["subtype"] == "REVERSING AND REINSTATING"
    party = KENTUCKY.party(captured.party(), case["case_id"], 0)
    assert party["name"] == "RICKY D. ULLMAN, JR." and party["attorneys"][0]["bar_number"] == "12345"
    assert party["address"] == "1 MAIN ST, LA GRANGE, KY 40031"
    lower = KENTUCKY.lower_court(captured.lower_court(), case["case_id"], 0)
    assert lower == {"case_id": case["case_id"], "position": 0, "name": "OLDHAM CIRCUIT COURT",
                     "case_number": "13-CR-00124", "case_title": "COMMONWEALTH V. ULLMAN"}


def test_admin_numbers_keep_their_real_case_numbers_from_the_description():
    assert KENTUCKY.numbers.related("2022-CA-1454, 1456, 1457 OPINION AFFIRMING BY JUDGE A. JONES") == \
        "2022-CA-1454, 2022-CA-1456, 2022-CA-1457"
    assert KENTUCKY.numbers.related("V. NOS. 2021-CA-0077, 2021-CA-0111, & 2021-CA-0112") == \
        "2021-CA-0077, 2021-CA-0111, 2021-CA-0112"
    assert KENTUCKY.numbers.related("OPINION AFFIRMING") is None and KENTUCKY.numbers.related(None) is None


def test_court_dates_gain_a_colon_in_the_offset_and_other_forms_pass_through():
    assert court_date("2024-04-18T09:03:02.000+0000") == "2024-04-18T09:03:02.000+00:00"
    assert court_date("2019-03-01T00:00:00.000-05:00") == "2019-03-01T00:00:00.000-05:00"
    assert court_date(None) is None


@pytest.mark.parametrize("mutate, field", [
    (lambda f: f.pop("documentID"), "documentID"),
    (lambda f: f.update(documentID=""), "documentID"),
    (lambda f: f.update(documentID=["x"]), "documentID"),
    (lambda f: f.update(documentAvailable="maybe"), "documentAvailable"),
    (lambda f: f.update(documentText="one string"), "documentText"),
    (lambda f: f.update(parentDate=20240418), "parentDate"),
    (lambda f: f["caseHeader"].pop("caseNumber"), "caseNumber"),
])
def test_a_file_of_the_wrong_shape_names_the_field(mutate, field):
    file = captured.entry_file()
    mutate(file)
    entry = KENTUCKY.docket_entry(captured.docket_entry(), captured.CASE_SC)
    with pytest.raises(ShapeProblem) as raised:
        KENTUCKY.entry_file(file, entry, None)
    assert raised.value.field == field


# ------------------------------------------------------- client, responses


@responses.activate
def test_the_opinion_search_is_asked_by_filed_date_and_court_and_reads_headers_and_facets():
    responses.add(responses.GET, re.compile(re.escape(BASE + "/opinions/search") + ".*"),
                  json={"resultItems": [captured.opinion_row()], "headers": captured.OPINION_HEADERS,
                        "facets": captured.OPINION_FACETS}, headers=paging(22, 1))
    page = make_client().search_opinions("Kentucky Supreme Court", "04/12/2024", "04/18/2024", 1, 25)
    sent = responses.calls[0].request
    query = {key: values[0] for key, values in parse_qs(urlsplit(sent.url).query).items()}
    assert (query["searchFields[0].indexFieldName"], query["searchFields[0].operation"],
            query["searchFields[0].values[0]"]) == ("filedDate", ">=", "04/12/2024")
    assert (query["searchFields[1].operation"], query["searchFields[1].values[0]"]) == ("<=", "04/18/2024")
    assert (query["searchFilters[0].indexFieldName"], query["searchFilters[0].values[0]"]) == \
        ("caseHeader.court", "Kentucky Supreme Court")
    assert sent.headers["x-ctrack-excludeselflinks"] == "true" and sent.headers["x-ctrack-paging-startindex"] == "1"
    assert page.total_count == 22 and page.raw_items == [captured.opinion_row()]
    assert [facet["searchFacetName"] for facet in page.facets] == ["Court", "Case Final"]
    assert page.items == []          # docket entries, not documents


@responses.activate
def test_a_case_resource_is_fetched_with_the_mandatory_headers_and_retried_when_torn():
    url = f"{BASE}/cases/{captured.CASE_SC}/docketentries"
    responses.add(responses.GET, url, body="<html>busy</html>", status=200, content_type="text/html")
    responses.add(responses.GET, url, body="", status=200)
    responses.add(responses.GET, url, json=[captured.docket_entry(), captured.docket_entry(has_documents=False)])
    client = make_client()
    entries = client.get_json("docket_entries", case_id=captured.CASE_SC)
    assert [entry["hasDocuments"] for entry in entries] == [True, False]
    assert len(responses.calls) == 3 and client.retries == 2
    assert all(call.request.headers["Accept"] == "application/json" for call in responses.calls)


@responses.activate
def test_a_missing_case_resource_is_permanent_and_a_failing_one_transient():
    responses.add(responses.GET, f"{BASE}/cases/{'0' * 64}/parties", status=404, json={"message": "No HTTP resource"})
    responses.add(responses.GET, f"{BASE}/cases/{'1' * 64}/parties", status=503)
    client = make_client()
    with pytest.raises(PermanentFetchError) as missing:
        client.get_json("parties", case_id="0" * 64)
    assert missing.value.http_status == 404
    with pytest.raises(TransientFetchError):
        client.get_json("parties", case_id="1" * 64)
    assert len(responses.calls) == 1 + 3


# ------------------------------------------- discovery fed the captured rows


@pytest.fixture
def captured_court():
    """A court (responses) whose document search answers the captured rows: docket entries."""
    rows = [captured.opinion_row(), captured.opinion_row(captured.ENTRY_CA, captured.CASE_CA, "2023-CA-0192"),
            {"id": "f" * 64, "rowMap": {"caseHeader.caseNumber": "2022-SC-0001", "filedDate": "2024-04-18T09:03:02.000+0000"}}]
    files = {captured.ENTRY_SC: [captured.entry_file()],
             captured.ENTRY_CA: [captured.entry_file(captured.DOCUMENT_CA, captured.ENTRY_CA, captured.case_header(
                 captured.CASE_CA, "2023-CA-0192", "KELLEY HEAVENER\r\nV.\r\nJOSEPH CARLISLE ROGERS ET. AL.",
                 "Kentucky Court of Appeals")),
                 captured.entry_file("e" * 64, captured.ENTRY_CA, available=False)]}

    def search(request):
        prefix = re.search(r"values%5B0%5D=([^&]+)|values\[0\]=([^&]+)", request.url)
        prefix = urllib.parse.unquote_plus(next(group for group in prefix.groups() if group))
        items = [row for row in rows if row["rowMap"]["caseHeader.caseNumber"].startswith(prefix)]
        return 200, paging(len(items), len(items)), json.dumps({"resultItems": items, "facets": []})

    def file_list(request):
        entry = request.url.rsplit("parentID%3D", 1)[-1].rsplit("parentID=", 1)[-1]
        return 200, {}, json.dumps(files.get(entry, []))

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, re.compile(re.escape(BASE + "/publicaccessdocuments/search") + ".*"), search)
        mock.add_callback(responses.GET, re.compile(re.escape(BASE + "/publicaccessdocuments?") + ".*"), file_list)
        # The opinion search over the days since the crawl began (convergence closes the window): nothing new.
        mock.add_callback(responses.GET, re.compile(re.escape(BASE + "/opinions/search") + ".*"),
                          lambda request: (200, paging(0, 0), json.dumps({"resultItems": [], "facets": []})))
        yield mock


def test_the_captured_rows_through_discovery_are_keyed_by_documentid_never_by_a_docket_entry(captured_court, tmp_path):
    cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=str(tmp_path / "w"),
                      STORE=str(tmp_path / "s"), API_BASE=BASE, FIRST_YEAR=2022, LAST_YEAR=2024,
                      DISCOVERY="documents", MAX_SWEEPS=2)
    ctx = open_context(cfg, clock=RecordingClock())
    try:
        result = discover(ctx)
        rows = {row["document_id"]: dict(row) for row in ctx.db.iter_documents()}
        assert set(rows) == {captured.DOCUMENT_SC, captured.DOCUMENT_CA, "e" * 64}
        assert not set(rows) & {captured.ENTRY_SC, captured.ENTRY_CA, "f" * 64}
        withheld = rows["e" * 64]      # listed with documentAvailable false: a record, never queued
        assert (withheld["status"], withheld["http_status"], withheld["document_available"]) == ("failed", 404, 0)
        assert rows[captured.DOCUMENT_SC]["docket_entry_id"] == captured.ENTRY_SC
        assert rows[captured.DOCUMENT_CA]["case_title"] == "KELLEY HEAVENER V. JOSEPH CARLISLE ROGERS ET. AL."
        assert rows[captured.DOCUMENT_CA]["court"] == "Kentucky Court of Appeals"
        # The row without documentID nor docketEntryID is counted, not stored; the unavailable file counted.
        assert result.unresolved >= 1 and result.unavailable >= 1 and result.converged
        texts = ctx.db.conn.execute("SELECT * FROM court_text WHERE document_id = ?", (captured.DOCUMENT_SC,)).fetchone()
        assert texts["pages"] == 2 and texts["replacement_chars"] == 1
        stored = (ctx.workspace / "court_text" / f"{texts['sha256']}.txt").read_text(encoding="utf-8")
        assert stored.split("\f")[0].startswith("RENDERED:  APRIL 18, 2024")
        assert ctx.store.exists(f"court_text/{texts['sha256']}.txt")
        file_lists = [call for call in captured_court.calls if "parentID" in call.request.url]
        assert len(file_lists) == 2
        # The next run (an update): entries whose documents are known are not asked for again, but the
        # one holding a withheld file is (once a sweep, in case the court released it).
        discover(ctx)
        file_lists = [call for call in captured_court.calls if "parentID" in call.request.url]
        assert len(file_lists) == 3 and captured.ENTRY_CA in file_lists[-1].request.url
    finally:
        ctx.close()
