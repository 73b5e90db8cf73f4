"""The TR Portal client: the envelope and 0-based pages, the size the court answers, the results window
(400, 500 and an empty 200 past it), date windows that meet exactly, UUIDs in any case, ids as numbers,
the headers, and the retries, Retry-After and breaker of the Kentucky client."""
from __future__ import annotations

import datetime as dt
import urllib.parse

import pytest
import responses

from notebook_builder.cells.c00_config import CourtUnreachable, TransientFetchError, load_config
from notebook_builder.cells.c26_trportal import (CourtDirectory, access_document, case_row, docket_entry, envelope,
                                                 feed_document, instant_text, publication_documents)
from notebook_builder.cells.c27_court_systems import ALABAMA, NEVADA
from notebook_builder.cells.c30_client import SearchRefused
from notebook_builder.cells.c31_court_client import PastWindow, TRPortalClient, court_client
from support import RecordingClock

BASE = "https://portal-api.test"
CASES = BASE + "/courts/cms/cases"
UTC = dt.timezone.utc


def make_client(system="nevada", clock=None, **env):
    cfg = load_config(env={"KY_PACING": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.08",
                           "KY_SEARCH_ATTEMPTS": "4", "KY_COURT_SYSTEM": system, **env}, API_BASE=BASE)
    return court_client(cfg, clock or RecordingClock())


def case(n: int, filed: str, *, uuid=None, court_id="1") -> dict:
    return {"caseHeader": {"caseInstanceUUID": uuid or f"00000000-0000-4000-8000-{n:012x}", "caseNumber": str(90000 + n),
                           "caseTitle": f"A VS. B {n}", "caseCategory": "Civil Appeal", "courtID": court_id,
                           "courtAbbreviation": "Supreme Court", "filedDate": filed, "closedFlag": False}}


def paged(rows, total, number, size):
    page = {"size": size, "totalElements": total, "totalPages": -(-total // size), "number": number}
    return {"_embedded": {"results": rows}, "page": page} if rows else {"page": page}


def asked(call) -> dict:
    return {name: values[0] for name, values in urllib.parse.parse_qs(urllib.parse.urlsplit(call.request.url).query).items()}


# ------------------------------------------------------------- the envelope


def test_the_envelope_has_no_embedded_on_an_empty_page_and_counts_as_strings_or_numbers():
    assert envelope({"page": {"size": "25", "totalElements": 0, "totalPages": 0, "number": "0"}}) == (
        [], {"size": 25, "totalElements": 0, "totalPages": 0, "number": 0})
    rows, page = envelope(paged([{"a": 1}], 26, 1, 25))
    assert rows == [{"a": 1}] and page["totalElements"] == 26


def test_the_family_table_makes_each_systems_client():
    assert isinstance(make_client("nevada"), TRPortalClient)
    assert type(make_client("kentucky")).__name__ == "CourtClient"


@responses.activate
def test_pages_are_zero_based_and_every_request_carries_accept_and_nevadas_referer():
    for number, rows in enumerate(([case(1, "x"), case(2, "x")], [case(3, "x"), case(4, "x")], [case(5, "x")])):
        responses.get(CASES, json=paged(rows, 5, number, 2))
    client = make_client()
    pages = list(client.pages("/courts/cms/cases", {"a": "b"}, "cases", size=2))
    assert [len(page.results) for page in pages] == [2, 2, 1]
    assert [asked(call)["page"] for call in responses.calls] == ["0", "1", "2"]
    assert all(asked(call)["size"] == "2" and asked(call)["a"] == "b" for call in responses.calls)
    headers = responses.calls[0].request.headers
    assert headers["Accept"] == "application/json" and headers["Referer"] == "https://acis.nvcourts.gov/"
    assert "x-ctrack-excludeselflinks" not in {name.lower() for name in headers}
    alabama = make_client("alabama")
    responses.get(CASES, json=paged([], 0, 0, 500))
    assert list(alabama.pages("/courts/cms/cases", {}, "cases"))[0].results == []
    assert "Referer" not in responses.calls[-1].request.headers


@responses.activate
def test_a_page_size_other_than_the_one_asked_is_asked_from_then_on():
    responses.get(CASES, json=paged([case(n, "x") for n in range(3)], 7, 0, 3))
    responses.get(CASES, json=paged([case(n, "x") for n in range(3, 6)], 7, 1, 3))
    responses.get(CASES, json=paged([case(6, "x")], 7, 2, 3))
    pages = list(make_client(KY_PAGE_SIZE="500").pages("/courts/cms/cases", {}, "cases"))
    assert sum(len(page.results) for page in pages) == 7
    assert [(asked(call)["page"], asked(call)["size"]) for call in responses.calls] == [("0", "500"), ("1", "3"), ("2", "3")]


# --------------------------------------------------------------- the window


@pytest.mark.parametrize("answer", ["400", "empty", "500"])
@responses.activate
def test_an_answer_past_the_window_is_past_the_window_never_the_end_or_a_failure(answer):
    responses.get(CASES, json=paged([case(1, "x"), case(2, "x")], 9, 0, 2))
    responses.get(CASES, json=paged([case(3, "x"), case(4, "x")], 9, 1, 2))
    past = {"400": dict(status=400, json={"status": 400}), "500": dict(status=500, json={"status": 500}),
            "empty": dict(json=paged([], 9, 2, 2))}[answer]
    responses.get(CASES, **past)
    if answer == "500":
        responses.get(CASES, **past)       # asked twice: a 500 once is a fault, twice the window's answer
    client = make_client()
    seen = []
    with pytest.raises(PastWindow) as raised:
        for page in client.pages("/courts/cms/cases", {}, "cases", size=2):
            seen += page.results
    assert len(seen) == 4 and raised.value.offset == 4 and client.window == 4
    assert client.health.failures_in_a_row == 0           # the court answered: no outage
    calls = len(responses.calls)
    with pytest.raises(PastWindow):                       # known now: never asked again
        client.page("/courts/cms/cases", {}, 2, 2, "cases")
    assert len(responses.calls) == calls


@responses.activate
def test_a_page_cut_short_while_rows_are_announced_teaches_the_window_without_asking_past_it():
    responses.get(CASES, json=paged([case(n, "x") for n in range(3)], 9, 0, 3))
    responses.get(CASES, json=paged([case(3, "x")], 9, 1, 3))      # the window is at 4
    client = make_client()
    with pytest.raises(PastWindow):
        list(client.pages("/courts/cms/cases", {}, "cases", size=3))
    assert len(responses.calls) == 2 and client.window == 4


@responses.activate
def test_the_case_search_goes_on_from_the_last_instant_read_and_windows_meet_exactly():
    day = "2024-01-0{}T00:00:00.000-08:00".format
    responses.get(CASES, json=paged([case(1, day(1)), case(2, day(2))], 5, 0, 2))
    responses.get(CASES, json=paged([case(3, day(2)), case(4, day(3))], 5, 1, 2))
    responses.get(CASES, status=400, json={"status": 400})               # page 2 begins past the window
    responses.get(CASES, json=paged([case(4, day(3)), case(5, day(4))], 2, 0, 2))   # from case 4's midnight
    low = dt.datetime(2024, 1, 1, 8, tzinfo=UTC)
    high = dt.datetime(2024, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone(dt.timedelta(hours=-8)))
    found, windows = {}, []
    for window, page, _ in make_client().case_search(low, high, size=2):
        windows.append(instant_text(window))
        for row in page.results:
            found.setdefault(row["caseHeader"]["caseNumber"], row)
    assert sorted(found) == ["90001", "90002", "90003", "90004", "90005"]
    queries = [asked(call) for call in responses.calls]
    assert queries[0]["caseHeader.filedDateFrom"] == "2024-01-01T08:00:00.000+00:00"
    assert queries[0]["caseHeader.filedDateTo"] == "2024-12-31T23:59:59.999-08:00"
    assert queries[3]["caseHeader.filedDateFrom"] == day(3) == windows[-1]     # meets the first exactly
    assert queries[3]["page"] == "0" and len(queries) == 4
    assert all(query["sort"] == "caseHeader.filedDate,asc" for query in queries)


@responses.activate
def test_more_cases_at_one_instant_than_the_window_holds_is_said_not_lost_silently():
    midnight = "2024-01-01T00:00:00.000-08:00"
    responses.get(CASES, json=paged([case(1, midnight), case(2, midnight)], 5, 0, 2))
    responses.get(CASES, json=paged([], 5, 1, 2))
    low = dt.datetime(2024, 1, 1, 8, tzinfo=UTC)
    with pytest.raises(PastWindow, match="filed at one instant"):
        list(make_client().case_search(low, low + dt.timedelta(days=9), size=2))


# ----------------------------------------------------------------- retries


@responses.activate
def test_retry_after_and_backoff_as_the_kentucky_client_and_a_refusal_is_said():
    responses.get(CASES, status=429, headers={"Retry-After": "7"})
    responses.get(CASES, status=503)
    responses.get(CASES, json=paged([case(1, "x")], 1, 0, 500))
    clock = RecordingClock()
    page = make_client(clock=clock).page("/courts/cms/cases", {}, 0, 500, "cases")
    assert len(page.results) == 1 and clock.sleeps[0] == 7 and len(clock.sleeps) == 2
    responses.get(BASE + "/courts/cms/publications", status=403)
    with pytest.raises(SearchRefused):
        make_client().page("/courts/cms/publications", {}, 0, 25, "publications")


@responses.activate
def test_a_court_that_never_answers_opens_the_breaker():
    responses.get(CASES, status=503)
    clock = RecordingClock()
    client = make_client(clock=clock, KY_COURT_DOWN_FAILURES="2", KY_COURT_DOWN_SECONDS="1", KY_SEARCH_ATTEMPTS="3")
    client.health._now = iter(range(0, 1000, 30)).__next__      # half a minute passes at every look
    with pytest.raises((CourtUnreachable, TransientFetchError)):
        client.page("/courts/cms/cases", {}, 0, 500, "cases")
    with pytest.raises(CourtUnreachable):
        client.page("/courts/cms/cases", {}, 0, 500, "cases")


# -------------------------------------------------------------------- rows


def test_rows_keep_uuids_as_written_and_compare_them_in_lower_case():
    directory = CourtDirectory.configured(ALABAMA)
    upper = "270EE6FF-1A2B-4C3D-8E9F-0123456789AB"
    row = case_row(ALABAMA, directory, {"caseHeader": {"caseInstanceUUID": upper, "caseNumber": "SC-2024-0492",
                                                       "courtID": 1, "caseTitle": "Ex parte\r\nSmith",
                                                       "filedDate": "2024-05-01T00:00:00.000-05:00"}})
    assert row["case_id"] == upper.lower() and row["court"] == "Alabama Supreme Court" and row["title"] == "Ex parte Smith"
    assert row["court_path"] == f"/courts/68f021c4-6a44-4735-9a76-5360b2e8af13/cms/cases/{upper}"
    entry = docket_entry(ALABAMA, {"docketEntryHeader": {"docketEntryUUID": "AB" * 4 + "-0000-4000-8000-000000000001",
                                                         "docketEntryType": "Decision", "docketEntryTypeID": 1000020,
                                                         "docketEntrySubType": "Opinion", "documentCount": 2,
                                                         "filedDate": "2024-06-01T15:00:00.000+00:00"}}, row["case_id"])
    assert entry["opinion"] == 1 and entry["has_documents"] == 1 and entry["docket_entry_id"].islower()
    served = directory.by_code("SC")
    document = access_document({"documentLinkUUID": "7A4902E2-0000-4000-8000-000000000009", "documentName": "Opinion",
                                "docketEntryUUID": "AB" * 4 + "-0000-4000-8000-000000000001",
                                "userDocumentState": "DC195201-C792-4883-AB2A-5730DC357CA2"}, entry, row, served)
    assert document["document_id"] == "7a4902e2-0000-4000-8000-000000000009"
    assert document["access_state"] == "purchasable" and document["opinion"] == 1
    assert document["court_path"].endswith(f"/case/{upper}/docketentrydocuments/7A4902E2-0000-4000-8000-000000000009")
    released = publication_documents(ALABAMA, served, {"publicationDate": "2026-01-23T14:20:37.335+00:00", "publicationItems": [
        {"caseInstanceUUID": upper, "caseNumber": "SC-2024-0492", "decision": "Affirmed.",
         "documents": [{"documentLinkUUID": "A1" * 4 + "-0000-4000-8000-000000000002", "documentName": "Opinion"},
                       {"documentLinkUUID": "A1" * 4 + "-0000-4000-8000-000000000003", "documentName": "Appendix"}]},
        {"caseInstanceUUID": upper, "caseNumber": "SC-2024-0492", "decision": "Denied.",
         "documents": [{"documentLinkUUID": "A1" * 4 + "-0000-4000-8000-000000000004", "documentName": "Order"}]}]})
    assert [document["opinion"] for document in released] == [1, 1, 0]
    assert all(document["access_state"] is None for document in released)


def test_ids_as_numbers_and_a_secured_feed_row_is_not_public():
    directory = CourtDirectory.configured(NEVADA)
    row = feed_document(NEVADA, directory, {
        "documentLinkUUID": "22bb78a8-83d9-4ed2-8de8-400b81ca343b", "documentName": "142pn045",
        "docketEntryHeader": {"filedDate": "2026-06-18T15:30:25.000+00:00", "docketEntryType": "Opinion/Dispositional",
                              "docketEntryTypeID": 1000014, "securedDocument": True},
        "caseHeader": {"caseInstanceUUID": "7def2361-d88e-4df4-a4d2-d006b53cd8f3", "caseNumber": "90082-COA",
                       "courtID": 2, "courtAbbreviation": "Court of Appeals"}})
    assert row["opinion"] == 1 and row["access_state"] == "secured" and row["court"] == "Nevada Court of Appeals"
    assert row["court_path"].startswith("/courts/74764f58-a87f-4ec5-8233-7a1255e410b3/cms/case/7def2361")


def test_the_directory_reads_the_courts_as_served_and_finds_florida_s_districts_by_abbreviation():
    from notebook_builder.cells.c27_court_systems import FLORIDA
    rows = [{"resourceID": "68F021C4-6A44-4735-9A76-5360B2E8AF13", "externalIdentifier": 1, "displayName": "Florida Supreme Court"},
            {"resourceID": "5a1c3e0b-7d51-4c7e-9d3b-1f0a2b6c1d03", "externalIdentifier": "4", "displayName": "3DCA"}]
    directory = CourtDirectory.from_rows(FLORIDA, rows)
    assert directory.by_code("SC").guid == "68F021C4-6A44-4735-9A76-5360B2E8AF13"      # as served
    assert directory.by_code("3D").court_id == "4" and directory.by_code("1D") is None
    assert directory.of_header(FLORIDA, {"courtID": 4}).code == "3D"
    assert CourtDirectory.from_json(directory.to_json()).by_guid("5A1C3E0B-7D51-4C7E-9D3B-1F0A2B6C1D03").code == "3D"


def test_a_secured_entrys_document_is_not_public_even_when_the_access_list_says_viewable():
    directory = CourtDirectory.configured(NEVADA)
    case = case_row(NEVADA, directory, {"caseHeader": {"caseInstanceUUID": "7def2361-d88e-4df4-a4d2-d006b53cd8f3",
                                                       "caseNumber": "90509", "courtID": 1}})
    header = {"docketEntryUUID": "ab" * 4 + "-0000-4000-8000-000000000001", "docketEntryType": "Motion",
              "documentCount": 1, "filedDate": "2024-06-01T15:00:00.000+00:00"}
    raw = {"documentLinkUUID": "7a4902e2-0000-4000-8000-000000000009", "documentName": "Motion",
           "docketEntryUUID": header["docketEntryUUID"], "userDocumentState": "b64d1d1e-f926-4c87-ab6b-df5c96d3b186"}
    served = directory.by_code("SC")
    public = docket_entry(NEVADA, {"docketEntryHeader": header}, case["case_id"])
    secured = docket_entry(NEVADA, {"docketEntryHeader": {**header, "securedDocument": True}}, case["case_id"])
    assert access_document(raw, public, case, served)["access_state"] is None
    assert access_document(raw, secured, case, served)["access_state"] == "secured"


@responses.activate
def test_a_redirect_on_a_json_request_is_a_refusal_never_followed_to_the_wall():
    from notebook_builder.cells.c00_config import PermanentFetchError
    wall = "https://portal-wall.test/login"
    responses.get(wall, json=paged([case(1, "x")], 1, 0, 500))      # what a followed redirect would read
    responses.get(CASES, status=302, headers={"Location": wall})
    case_path = BASE + "/courts/g/cms/cases/c"
    responses.get(case_path, status=302, headers={"Location": wall})
    client = make_client()
    with pytest.raises(SearchRefused) as refused:
        client.page("/courts/cms/cases", {}, 0, 500, "cases")
    assert refused.value.http_status == 302
    with pytest.raises(PermanentFetchError) as permanent:
        client.get_object("/courts/g/cms/cases/c", "case")
    assert permanent.value.http_status == 302
    assert all(call.request.url.startswith(BASE) for call in responses.calls)      # the wall never asked
    assert len(responses.calls) == 2                                              # and nothing retried


@responses.activate
def test_a_page_and_an_object_are_retried_by_the_kentucky_clients_one_loop(monkeypatch):
    from notebook_builder.cells.c30_client import CourtClient
    loops = []
    original = CourtClient._retrying

    def counting(self, label, attempt):
        loops.append(label)
        return original(self, label, attempt)
    monkeypatch.setattr(CourtClient, "_retrying", counting)
    responses.get(CASES, status=503)
    responses.get(CASES, json=paged([case(1, "x")], 1, 0, 500))
    responses.get(BASE + "/courts/g/cms/cases/c", status=502)
    responses.get(BASE + "/courts/g/cms/cases/c", json={"caseHeader": {"caseNumber": "90509"}})
    clock = RecordingClock()
    client = make_client(clock=clock)
    assert len(client.page("/courts/cms/cases", {}, 0, 500, "cases").results) == 1
    assert client.get_object("/courts/g/cms/cases/c", "case")["caseHeader"]["caseNumber"] == "90509"
    assert loops == ["cases page 0", "case"] and client.retries == 2 and len(clock.sleeps) == 2
