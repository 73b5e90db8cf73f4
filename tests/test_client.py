"""The court client: mandatory headers, header paging, retries with backoff, the trap, pure decisions."""
from __future__ import annotations

import datetime as dt
import email.utils

import pytest
import requests
import responses

from notebook_builder.cells.c00_config import (ResultsLimitExceeded, StopRequested,
                                               TransientFetchError, load_config, retry_delay)
from notebook_builder.cells.c25_court import ENDPOINTS, KENTUCKY, MANDATORY_HEADERS
from notebook_builder.cells.c30_client import CourtClient, CourtTrapError, classify_http_status, retry_after_seconds
from support import RecordingClock

BASE = "https://court.test/api/api/v1"
SEARCH_URL = BASE + "/publicaccessdocuments/search"


def make_client(clock=None, **env):
    cfg = load_config(env={"KY_PACING": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.08",
                           "KY_SEARCH_ATTEMPTS": "4", **env}, API_BASE=BASE)
    return CourtClient(cfg, clock or RecordingClock())


def row(n: int) -> dict:
    document_id = f"{n:064x}"
    return {"id": document_id, "rowMap": {
        "documentID": document_id, "documentName": f"2019-CA-{n:06d} opinion.pdf",
        "mimeType": "application/pdf", "caseHeader.caseNumber": f"2019-CA-{n:04d}",
        "caseHeader.caseID": "ab" * 8, "caseHeader.shortTitle": "SMITH VS. COMMONWEALTH",
        "caseHeader.court": "Kentucky Court of Appeals", "docketEntryID": "cd" * 8,
        "docketEntryDescription": "OPINION AFFIRMING", "filedDate": "2019-03-01T00:00:00.000-05:00",
        "documentAvailable": True}}


def page_headers(total, count, more, limit=10000):
    return {"x-ctrack-paging-totalcount": str(total), "x-ctrack-paging-resultcount": str(count),
            "x-ctrack-paging-moreresults": "true" if more else "false",
            "x-ctrack-paging-resultslimit": str(limit)}


def answer(items, total, more=False, limit=10000, status=200):
    return responses.Response(responses.GET, SEARCH_URL, json={"resultItems": items, "facets": []},
                              status=status, headers=page_headers(total, len(items), more, limit))


# ------------------------------------------------------------ pure decisions


@pytest.mark.parametrize("code, kind", [(200, "ok"), (400, "permanent"), (401, "permanent"),
                                        (403, "permanent"), (404, "permanent"), (413, "permanent"),
                                        (500, "transient"), (503, "transient"), (408, "transient"),
                                        (429, "transient"), (302, "transient"), (418, "transient")])
def test_http_status_is_classified_for_the_download_stage(code, kind):
    assert classify_http_status(code) == kind


def test_backoff_doubles_up_to_the_cap_and_a_longer_retry_after_wins():
    # counted in failed tries: the first failure waits the base
    assert [retry_delay(n, base=5, cap=60) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert retry_delay(1, base=5, cap=60, retry_after=30) == 30
    assert retry_delay(4, base=5, cap=60, retry_after=1) == 40


def test_retry_delay_jitter_stretches_the_delay_by_the_callers_draw():
    assert retry_delay(2, base=5, cap=60, jitter=0.5) == 15
    assert retry_delay(9, base=5, cap=60, jitter=0.25) == 75      # the cap, stretched
    assert retry_delay(1, base=5, cap=60, jitter=0.5, retry_after=9) == 9


def test_retry_after_reads_seconds_and_http_dates():
    class Answer:
        def __init__(self, value):
            self.headers = {} if value is None else {"Retry-After": value}
    assert retry_after_seconds(Answer("7")) == 7
    assert retry_after_seconds(Answer(None)) is None
    assert retry_after_seconds(Answer("soon")) is None
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=120)
    seconds = retry_after_seconds(Answer(email.utils.format_datetime(later, usegmt=True)))
    assert 100 < seconds <= 120


def test_rows_are_normalized_to_document_columns():
    normalized = KENTUCKY.document_row(row(12))
    assert normalized == {
        "document_id": f"{12:064x}", "case_number": "2019-CA-0012", "court": "Kentucky Court of Appeals",
        "case_title": "SMITH VS. COMMONWEALTH", "docket_entry_id": "cd" * 8,
        "description": "OPINION AFFIRMING", "filed_date": "2019-03-01T00:00:00.000-05:00",
        "case_id": "ab" * 8, "document_name": "2019-CA-000012 opinion.pdf", "document_available": 1}
    assert KENTUCKY.document_row({"rowMap": {}}) is None


def test_every_endpoint_path_is_in_one_mapping():
    assert set(ENDPOINTS) == {"document_search", "case_search", "entry_documents", "download", "case",
                              "docket_entries", "parties", "lower_courts", "opinion_search", "download_site"}
    client = make_client()
    assert client.url("download", document_id="ab") == BASE + "/publicaccessdocuments/ab/download"
    # The second download path lives at the site root, not under API_BASE.
    assert client.url("download_site", document_id="ab") == BASE.split("/api/")[0] + "/documents/ab/download"


# ------------------------------------------------------------------ search


@responses.activate
def test_search_sends_mandatory_and_paging_headers_and_reads_the_answer():
    responses.add(answer([row(1), row(2)], total=5, more=True, limit=9000))
    client = make_client()
    page = client.search_documents("2019-CA", 3, 50)
    sent = responses.calls[0].request
    assert sent.headers["x-ctrack-excludeselflinks"] == "true"
    assert sent.headers["Accept"] == "application/json"
    assert "kycourt-colab" in sent.headers["User-Agent"]
    assert sent.headers["x-ctrack-paging-startindex"] == "3"
    assert sent.headers["x-ctrack-paging-maxresults"] == "50"
    assert sent.headers["x-ctrack-paging-calculatetotalcount"] == "true"
    assert "values%5B0%5D=2019-CA" in sent.url or "values[0]=2019-CA" in sent.url
    assert (page.total_count, page.result_count, page.more, page.results_limit) == (5, 2, True, 9000)
    assert [item["case_number"] for item in page.items] == ["2019-CA-0001", "2019-CA-0002"]


@responses.activate
def test_a_callers_session_cannot_drop_the_mandatory_headers():
    responses.add(answer([row(1)], total=1))
    session = requests.Session()
    session.headers.clear()
    client = CourtClient(make_client().cfg, RecordingClock(), session=session)
    client.search_documents("2019-CA", 1, 10)
    for name, value in MANDATORY_HEADERS.items():
        assert responses.calls[0].request.headers[name] == value


@responses.activate
def test_search_503s_are_retried_with_growing_backoff():
    responses.add(responses.GET, SEARCH_URL, status=503, body="<html>busy</html>")
    responses.add(responses.GET, SEARCH_URL, status=503, body="<html>busy</html>")
    responses.add(answer([row(1)], total=1))
    clock = RecordingClock()
    page = make_client(clock).search_documents("2019-CA", 1, 10)
    assert page.result_count == 1 and len(responses.calls) == 3
    assert clock.sleeps == [0.01, 0.02]


@responses.activate
def test_429_retry_after_is_honoured():
    responses.add(responses.GET, SEARCH_URL, status=429, headers={"Retry-After": "3"}, json={})
    responses.add(answer([row(1)], total=1))
    clock = RecordingClock()
    make_client(clock).search_documents("2019-CA", 1, 10)
    assert clock.sleeps == [3.0]


@responses.activate
def test_a_200_that_is_not_json_and_a_reset_are_transient():
    responses.add(responses.GET, SEARCH_URL, status=200, body="<!DOCTYPE html><p>Sorry</p>",
                  content_type="text/html")
    responses.add(responses.GET, SEARCH_URL, body=requests.ConnectionError("connection reset"))
    responses.add(answer([row(1)], total=1))
    assert make_client().search_documents("2019-CA", 1, 10).total_count == 1
    assert len(responses.calls) == 3


@responses.activate
def test_search_gives_up_after_search_attempts_with_a_transient_error():
    responses.add(responses.GET, SEARCH_URL, status=502, body="bad gateway")
    with pytest.raises(TransientFetchError) as raised:
        make_client().search_documents("2019-CA", 1, 10)
    assert raised.value.http_status == 502
    assert len(responses.calls) == 4     # KY_SEARCH_ATTEMPTS=4


@responses.activate
def test_a_400_raises_results_limit_exceeded_so_the_shard_splits():
    responses.add(answer([], total=0, status=400, limit=100))
    client = make_client()
    client.results_limit = 100
    with pytest.raises(ResultsLimitExceeded):
        client.search_documents("2019-CA", 51, 50)
    assert len(responses.calls) == 1


@responses.activate
def test_an_unknown_limit_is_learned_from_the_400_and_the_window_clamped():
    responses.add(responses.GET, SEARCH_URL, status=400, json={"message": "window"},
                  headers={"x-ctrack-paging-resultslimit": "30"})
    responses.add(answer([row(1)], total=1, limit=30))
    client = make_client()
    client.search_documents("2019-CA", 1, 500)
    assert responses.calls[1].request.headers["x-ctrack-paging-maxresults"] == "30"
    assert client.results_limit == 30


@responses.activate
def test_an_answer_without_paging_headers_is_the_trap_not_an_empty_shard():
    responses.add(responses.GET, SEARCH_URL, json={"resultItems": [], "facets": []})
    with pytest.raises(CourtTrapError, match="excludeselflinks"):
        make_client().search_documents("2019-CA", 1, 10)


@responses.activate
def test_a_total_with_no_rows_on_the_first_page_is_the_trap():
    responses.add(answer([], total=40))
    with pytest.raises(CourtTrapError):
        make_client().search_documents("2019-CA", 1, 10)


@responses.activate
def test_a_stop_interrupts_the_backoff():
    responses.add(responses.GET, SEARCH_URL, status=503)
    clock = RecordingClock()
    clock.request_stop("signal")
    with pytest.raises(StopRequested):
        make_client(clock, KY_PACING="1").search_documents("2019-CA", 1, 10)
    assert len(responses.calls) == 0     # the pacing pause was interrupted before sending


@responses.activate
def test_pacing_uses_the_search_window_times_the_multiplier():
    responses.add(answer([row(1)], total=1))
    clock = RecordingClock()
    make_client(clock, KY_PACING="2", KY_PACING_SEARCH="0.3,0.7").search_documents("2019-CA", 1, 10)
    assert len(clock.sleeps) == 1 and 0.6 <= clock.sleeps[0] <= 1.4


# ---------------------------------------------------------------- download


@responses.activate
def test_download_is_one_streamed_get_without_retries():
    url = BASE + "/publicaccessdocuments/" + "ab" * 32 + "/download"
    responses.add(responses.GET, url, status=503)
    client = make_client()
    response = client.download_response("ab" * 32)
    assert response.status_code == 503 and len(responses.calls) == 1
    assert responses.calls[0].request.headers["x-ctrack-excludeselflinks"] == "true"


@responses.activate
def test_download_connection_errors_are_transient():
    url = BASE + "/publicaccessdocuments/" + "ab" * 32 + "/download"
    responses.add(responses.GET, url, body=requests.ConnectTimeout("stalled"))
    with pytest.raises(TransientFetchError):
        make_client().download_response("ab" * 32)
    assert len(responses.calls) == 1


# ------------------------------------------------------- the environment


def test_proxy_and_ca_bundle_variables_are_honoured_and_read_once(monkeypatch, tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not read by this test")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = make_client()
    assert client.session.proxies.get("https") == "http://proxy.example:3128"
    assert client.session.verify == str(bundle)

    monkeypatch.setenv("NO_PROXY", "court.test")
    assert "https" not in make_client().session.proxies      # the court's host bypasses the proxy


@responses.activate
def test_the_environment_is_not_scanned_again_for_every_request(monkeypatch):
    client = make_client()
    scans = []
    real = requests.utils.get_environ_proxies
    monkeypatch.setattr(requests.sessions, "get_environ_proxies",
                        lambda *args, **kwargs: scans.append(args) or real(*args, **kwargs))
    for _ in range(3):
        responses.add(answer([row(1)], total=1))
    for _ in range(3):
        assert client.search_documents("2019-CA", 1, 10).total_count == 1
    assert scans == []


# ----------------------------------------------------------- paged lists


def _list_url(case_id="ab" * 32):
    return f"{BASE}/cases/{case_id}/docketentries"


@responses.activate
def test_a_list_is_asked_with_paging_headers_and_followed_while_the_court_says_more():
    pages = [[{"n": 1}, {"n": 2}], [{"n": 3}, {"n": 4}], [{"n": 5}]]
    for number, page in enumerate(pages):
        more = "true" if number < len(pages) - 1 else "false"
        responses.add(responses.GET, _list_url(), json=page, headers={
            "x-ctrack-paging-moreresults": more, "x-ctrack-paging-totalcount": "5"})
    client = make_client()
    assert [row["n"] for row in client.get_json("docket_entries", case_id="ab" * 32)] == [1, 2, 3, 4, 5]
    starts = [call.request.headers["x-ctrack-paging-startindex"] for call in responses.calls]
    assert starts == ["1", "3", "5"] and not client.list_warnings
    assert all(int(call.request.headers["x-ctrack-paging-maxresults"]) >= 1000 for call in responses.calls)


@responses.activate
def test_a_list_whose_more_never_turns_false_stops_at_the_results_limit_and_warns():
    responses.add(responses.GET, _list_url(), json=[{"n": 1}, {"n": 2}],
                  headers={"x-ctrack-paging-moreresults": "true", "x-ctrack-paging-resultslimit": "6"})
    client = make_client()
    rows = client.get_json("docket_entries", case_id="ab" * 32)
    assert len(rows) == 6 and len(responses.calls) == 3
    assert client.list_warnings == {"moreresults still true past the results limit 6": 1}


@responses.activate
def test_a_bad_list_answer_is_a_counted_warning_never_a_crash():
    url = _list_url()
    responses.add(responses.GET, url, json=[{"n": 1}], headers={"x-ctrack-paging-moreresults": "true"})
    responses.add(responses.GET, url, json={"message": "not a list"})
    client = make_client()
    assert client.get_json("docket_entries", case_id="ab" * 32) == [{"n": 1}]
    responses.replace(responses.GET, url, json={"message": "not a list"})
    assert client.get_json("docket_entries", case_id="ab" * 32) == {"message": "not a list"}   # the caller counts it
    responses.replace(responses.GET, url, json=[], headers={"x-ctrack-paging-moreresults": "true"})
    assert client.get_json("docket_entries", case_id="ab" * 32) == []
    assert client.list_warnings == {"a later page is not a list": 1, "moreresults with no rows": 1}


@responses.activate
def test_a_list_of_exactly_the_default_page_that_nothing_says_is_whole_is_a_warning():
    responses.add(responses.GET, _list_url(), json=[{"n": n} for n in range(20)])
    client = make_client()
    assert len(client.get_json("docket_entries", case_id="ab" * 32)) == 20
    assert client.list_warnings == {"exactly 20 rows and nothing says the list is whole": 1}
    responses.replace(responses.GET, _list_url(), json=[{"n": n} for n in range(20)],
                      headers={"x-ctrack-paging-totalcount": "20", "x-ctrack-paging-moreresults": "false"})
    client.get_json("docket_entries", case_id="ab" * 32)
    assert sum(client.list_warnings.values()) == 1          # the court said 20 is the whole list


def test_a_transport_failure_is_one_short_phrase_without_the_pool_repr():
    from notebook_builder.cells.c30_client import describe_failure
    refused = requests.ConnectionError(
        "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /api/api/v1/cases/search?x=1 "
        "(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f00>: Failed to establish "
        "a new connection: [Errno 111] Connection refused'))")
    assert describe_failure(refused) == "ConnectionError: Connection refused"
    timeout = requests.ReadTimeout("HTTPConnectionPool(host='court', port=443): Read timed out. (read timeout=60)")
    assert describe_failure(timeout) == "ReadTimeout: Read timed out. (read timeout=60)"


def test_the_projected_hours_are_requests_times_the_mean_pause_plus_the_latency():
    from notebook_builder.cells.c30_client import projected_hours
    assert projected_hours(3600, (0.3, 0.7), 1.0, 0.25) == pytest.approx(0.75)
    assert projected_hours(3600, (0.3, 0.7), 0.0, 0.25) == pytest.approx(0.25)
