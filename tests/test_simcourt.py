"""The simulated court behaves as ctrack-api.md says the real one does, misbehaviours included."""
from __future__ import annotations

import collections
import datetime as dt
import email.utils
import http.client
import io
import resource
import time
from urllib.parse import urlsplit

import pypdf
import pytest
import requests

from notebook_builder.simcourt import FAULTS, NEVER, TRANSIENT_FAULTS, SimCourt, corpus_counts

HEADERS = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true",
           "x-ctrack-paging-calculatetotalcount": "true"}
DOCUMENT_SEARCH = ("/publicaccessdocuments/search?queryString=true"
                   "&searchFields[0].searchType=Starts With&searchFields[0].operation=="
                   "&searchFields[0].values[0]={prefix}"
                   "&searchFields[0].indexFieldName=caseHeader.caseNumber")
CASE_SEARCH = ("/cases/search?queryString=true&searchFields[0].searchType=Starts With"
               "&searchFields[0].operation==&searchFields[0].values[0]={prefix}"
               "&searchFields[0].indexFieldName=caseNumber")


@pytest.fixture
def court(served_court):
    return served_court


@pytest.fixture
def session():
    with requests.Session() as http:
        yield http


def search(http, court, prefix, start=1, size=50, path=DOCUMENT_SEARCH, headers=HEADERS):
    return http.get(court.base_url + path.format(prefix=prefix), headers={
        **headers, "x-ctrack-paging-startindex": str(start),
        "x-ctrack-paging-maxresults": str(size)}, timeout=10)


def download(http, court, document, method="GET", **kwargs):
    url = f"{court.base_url}/publicaccessdocuments/{document.document_id}/download"
    return http.request(method, url, **{"timeout": 10, **kwargs})


def first(court, fault):
    return court.documents_with(fault)[0]


def is_retry_after(value: str) -> bool:
    """delta-seconds, or an HTTP-date (RFC 9110)."""
    return value.isdigit() or email.utils.parsedate_to_datetime(value) is not None


def retry_after_seconds(answer) -> float:
    value = answer.headers["Retry-After"]
    if value.isdigit():
        return float(value)
    return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())


def text_of(data: bytes) -> str:
    return "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(data)).pages)


# ------------------------------------------------------------------ search


def test_search_without_excludeselflinks_is_an_empty_200_trap(court, session):
    trapped = search(session, court, "2019-CA", headers={"Accept": "application/json"})
    honest = search(session, court, "2019-CA")
    assert trapped.status_code == 200 and trapped.json()["resultItems"] == []
    assert honest.json()["resultItems"]


def test_paging_is_one_based_and_capped_by_max_page():
    with SimCourt(docs=300, seed=2, max_page=7, unstable=False,
                  first_year=2019, last_year=2020) as court, requests.Session() as http:
        everything = search(http, court, "2020-CA", size=7)
        total = int(everything.headers["x-ctrack-paging-totalcount"])
        assert total > 14
        capped = search(http, court, "2020-CA", start=1, size=50)
        assert capped.headers["x-ctrack-paging-resultcount"] == "7" == str(len(capped.json()["resultItems"]))
        assert capped.headers["x-ctrack-paging-moreresults"] == "true"
        assert capped.headers["x-ctrack-paging-resultslimit"] == "10000"
        second = search(http, court, "2020-CA", start=2, size=7).json()["resultItems"]
        assert second[0] == capped.json()["resultItems"][1]      # startindex 2 is the 2nd row
        last = search(http, court, "2020-CA", start=total, size=7)
        assert last.headers["x-ctrack-paging-resultcount"] == "1"
        assert last.headers["x-ctrack-paging-moreresults"] == "false"


def test_window_past_results_limit_is_400():
    with SimCourt(docs=400, seed=1, results_limit=20, first_year=2019, last_year=2020) as court, \
            requests.Session() as http:
        assert search(http, court, "2019-CA", start=11, size=10).status_code == 200
        refused = search(http, court, "2019-CA", start=12, size=10)
        assert refused.status_code == 400 and "message" in refused.json()
        assert refused.headers["x-ctrack-paging-resultslimit"] == "20"


def test_small_limit_forces_splitting_at_two_digit_levels():
    with SimCourt(docs=400, seed=1, results_limit=20, first_year=2019, last_year=2020) as court, \
            requests.Session() as http:
        def total(prefix):
            return int(search(http, court, prefix, size=1).headers["x-ctrack-paging-totalcount"])
        assert total("2019-CA") > 20 and total("2019-CA-0") > 20 and total("2019-CA-00") > 20
        assert total("2019-CA-00") == sum(total(f"2019-CA-00{digit}") for digit in "0123456789")


def test_shard_totals_add_up_and_match_the_corpus(court, session):
    by_shard = collections.Counter(document.shard for document in court.documents)
    assert sum(by_shard.values()) == 300 == sum(corpus_counts(300).values())
    for shard in ("2019-CA", "2005-SC"):
        whole = int(search(session, court, shard, size=1).headers["x-ctrack-paging-totalcount"])
        parts = sum(int(search(session, court, f"{shard}-{digit}", size=1)
                        .headers["x-ctrack-paging-totalcount"]) for digit in "0123456789")
        assert whole == parts == by_shard[shard] > 0
    both = int(search(session, court, "2019", size=1).headers["x-ctrack-paging-totalcount"])
    assert both == by_shard["2019-CA"] + by_shard["2019-SC"]


def test_rows_carry_the_documented_fields(court, session):
    row = search(session, court, "2019-CA", size=1).json()["resultItems"][0]
    document = court.document(row["id"])
    assert row["rowMap"]["caseHeader.caseNumber"] == document.case_number
    assert row["rowMap"]["documentName"].startswith(
        document.case_number[:8] + "00" + document.case_number[8:])        # 2019-CA-001234
    assert len(row["id"]) == 64 and row["id"] == row["rowMap"]["documentID"]
    entry = session.get(court.base_url + "/publicaccessdocuments", timeout=10, headers=HEADERS, params={
        "filter": f"parentCategory=docketentries,parentID={document.docket_entry_id}"}).json()
    assert isinstance(entry, list) and document.document_id in [item["documentID"] for item in entry]
    case = search(session, court, document.case_number, path=CASE_SEARCH).json()["resultItems"]
    assert [item["rowMap"]["caseNumber"] for item in case] == [document.case_number]
    assert case[0]["id"] == document.case_id


def test_naive_paging_misses_rows_but_repeated_sweeps_see_everything():
    with SimCourt(docs=300, seed=3, max_page=5, first_year=2019, last_year=2020) as court, requests.Session() as http:
        expected = {d.document_id for d in court.documents if d.shard == "2019-CA"}
        seen, imperfect = set(), 0
        for _ in range(8):
            sweep = []
            for start in range(1, len(expected) + 1, 5):
                sweep += [row["id"] for row in search(http, court, "2019-CA", start, 5).json()["resultItems"]]
            imperfect += sorted(sweep) != sorted(expected)
            seen.update(sweep)
        assert imperfect > 0 and seen == expected


def test_late_documents_appear_while_a_crawl_runs(session):
    with SimCourt(docs=300, seed=1, late_docs=6) as court:
        late = [document for document in court.documents if document.late]
        assert len(late) == 6 and sum(d.expected_status == "extracted" for d in court.documents) > 6
        hidden = download(session, court, late[0])
        assert hidden.status_code == 404 and court.reveal_after(late[0].document_id) >= 1
        visible = set()
        for _ in range(court.estimated_sweep_requests()):
            visible.update(row["id"] for row in search(session, court, "", size=1000).json()["resultItems"])
        assert {document.document_id for document in late} <= visible
        assert download(session, court, late[0]).content.startswith(b"%PDF-")


def test_json_faults_answer_503_429_resets_and_torn_bodies(session):
    with SimCourt(docs=50, seed=1, search_fault_rate=0.5, enforce_retry_after=False) as court:
        outcomes = collections.Counter()
        for _ in range(80):
            try:
                answer = search(session, court, "2019")
            except requests.exceptions.ChunkedEncodingError:
                outcomes["torn"] += 1
            except requests.ConnectionError:
                outcomes["reset"] += 1
            else:
                outcomes[answer.status_code] += 1
                if answer.status_code == 429:
                    assert is_retry_after(answer.headers["Retry-After"])
                    assert retry_after_seconds(answer) <= 1.0
        assert outcomes[200] and outcomes[503] and outcomes[429] and outcomes["reset"] and outcomes["torn"]
        assert court.search_requests == 80


def test_a_docket_entrys_document_list_misbehaves_like_search(session):
    with SimCourt(docs=50, seed=1, search_fault_rate=0.6, enforce_retry_after=False) as court:
        entry = court.documents[0].docket_entry_id
        url = f"{court.base_url}/publicaccessdocuments?filter=parentCategory=docketentries,parentID={entry}"
        codes = collections.Counter()
        for _ in range(30):
            try:
                answer = session.get(url, headers=HEADERS, timeout=10)
                codes[answer.status_code] += 1
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                codes["broken"] += 1
        assert codes[200] and codes[503] and len(codes) >= 3


@pytest.mark.parametrize("accept", [None, "application/xml", "text/html,*/*;q=0.8"])
def test_a_json_endpoint_refuses_a_request_that_does_not_accept_json(court, session, accept):
    headers = {name: value for name, value in HEADERS.items() if name != "Accept"}
    if accept is not None:
        headers["Accept"] = accept
    session.headers.pop("Accept", None)        # requests sends "*/*" unless told otherwise
    answer = search(session, court, "2019", headers=headers)
    assert answer.status_code == 406
    assert search(session, court, "2019").status_code == 200   # the same with Accept: application/json


def test_coming_back_before_retry_after_is_refused_and_counted(court, session):
    document = first(court, "rate_limited")
    assert download(session, court, document).status_code == 429
    assert download(session, court, document).status_code == 429     # at once: too early
    assert court.early_requests == 1
    assert court.requests_for(document.document_id) == 1              # the early one is not an attempt


# ---------------------------------------------------------------- the plan


def test_every_fault_appears_at_least_twice_in_300_documents(court):
    counts = collections.Counter(document.fault for document in court.documents)
    assert set(counts) == set(FAULTS) and min(counts.values()) >= 2
    assert 0.6 < counts["ok"] / 300 < 0.8
    for document in court.documents:
        if document.fault in TRANSIENT_FAULTS:
            assert 1 <= document.transient_failures <= (1 if document.fault == "stalled" else 2)
    assert first(court, "always_503").transient_failures == NEVER


def test_faults_off_means_every_document_is_ok():
    assert {document.fault for document in SimCourt(docs=300, seed=1, faults=False).documents} == {"ok"}


def test_same_seed_same_documents_and_bytes_other_seed_other_ids():
    one, two, other = SimCourt(docs=120, seed=7), SimCourt(docs=120, seed=7), SimCourt(docs=120, seed=8)
    assert list(one.documents) == list(two.documents)
    for document in one.documents[:10]:
        assert one.pdf_bytes(document.document_id) == two.pdf_bytes(document.document_id)
    assert one.documents[0].document_id != other.documents[0].document_id


def test_a_court_given_its_day_has_filed_nothing_on_or_after_it_and_differs_only_in_dates():
    from notebook_builder.simcourt.corpus import PlannedCorpus
    day = dt.date(2026, 10, 1)
    free, bounded = PlannedCorpus(400, seed=7, admin_share=0.05), PlannedCorpus(400, seed=7, admin_share=0.05,
                                                                                  today=day)
    assert max(free.doc_filed) >= day.toordinal()       # a plan left to the calendar runs past that day
    assert max(bounded.doc_filed) < day.toordinal() and max(bounded.case_filed) < day.toordinal()
    assert all(doc >= case for doc, case in zip(bounded.doc_filed, (bounded.case_filed[c] for c in bounded.doc_case)))
    assert (bounded.case_keys, list(bounded.doc_description), list(bounded.doc_entry)) == (
        free.case_keys, list(free.doc_description), list(free.doc_entry))
    moved = sum(a != b for a, b in zip(free.doc_filed, bounded.doc_filed))
    assert 0 < moved < len(free.doc_filed) // 4


# ----------------------------------------------------------------- faults


@pytest.mark.parametrize("fault, code", [("http_500", 500), ("http_503", 503), ("rate_limited", 429)])
def test_transient_status_fails_k_times_then_serves_the_pdf(court, session, fault, code):
    document = first(court, fault)
    for _ in range(document.transient_failures):
        answer = download(session, court, document)
        assert answer.status_code == code
        if code == 429:
            assert is_retry_after(answer.headers["Retry-After"])
            time.sleep(retry_after_seconds(answer))
    good = download(session, court, document)
    assert good.status_code == 200 and good.content == court.pdf_bytes(document.document_id)
    assert good.content.startswith(b"%PDF-")
    assert court.requests_for(document.document_id) == document.transient_failures + 1


def test_reset_closes_without_an_answer_then_recovers(court, session):
    document = first(court, "reset")
    for _ in range(document.transient_failures):
        with pytest.raises(requests.ConnectionError):
            download(session, court, document)
    assert download(session, court, document).content.startswith(b"%PDF-")


def test_truncated_body_is_shorter_than_content_length_then_recovers(court, session):
    document = first(court, "truncated")
    address = urlsplit(court.base_url)
    for _ in range(document.transient_failures):
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        connection.request("GET", f"{address.path}/publicaccessdocuments/{document.document_id}/download")
        answer = connection.getresponse()
        promised = int(answer.getheader("Content-Length"))
        with pytest.raises(http.client.IncompleteRead) as torn:
            answer.read()
        assert len(torn.value.partial) < promised
        connection.close()
    assert download(session, court, document).content == court.pdf_bytes(document.document_id)


def test_html_error_page_is_a_200_that_is_not_a_pdf(court, session):
    document = first(court, "html")
    answer = download(session, court, document)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html")
    assert not answer.content.startswith(b"%PDF-")


@pytest.mark.parametrize("fault, code", [("always_503", 503), ("http_401", 401),
                                         ("http_403", 403), ("http_404", 404)])
def test_never_succeeding_documents_keep_failing(court, session, fault, code):
    document = first(court, fault)
    assert [download(session, court, document).status_code for _ in range(5)] == [code] * 5
    assert document.expected_status == "failed" and document.expected_http_status == code
    assert court.pdf_bytes(document.document_id) is None


def test_oversized_body_is_not_sent_when_the_client_hangs_up(court, session):
    document = first(court, "oversized")
    head = download(session, court, document, method="HEAD")
    assert int(head.headers["Content-Length"]) == 201 * 1024 * 1024
    answer = download(session, court, document, stream=True)
    assert int(answer.headers["Content-Length"]) == 201 * 1024 * 1024
    assert answer.raw.read(10).startswith(b"%PDF-")
    answer.close()
    time.sleep(0.3)
    assert court.body_bytes_sent(document.document_id) < 16 * 1024 * 1024
    assert document.expected_http_status == 413


def test_lying_length_streams_past_the_limit_without_content_length(session):
    with SimCourt(docs=300, seed=1, oversize_bytes=1024 * 1024) as court:
        kinds = set()
        for document in court.documents_with("lying_length"):
            answer = download(session, court, document, stream=True)
            assert "Content-Length" not in answer.headers
            kinds.add(answer.headers.get("Transfer-Encoding", "close"))
            assert sum(len(chunk) for chunk in answer.iter_content(65536)) > 1024 * 1024
        assert kinds == {"chunked", "close"}


def test_duplicate_serves_exactly_the_bytes_of_another_document(court, session):
    document = first(court, "duplicate")
    original = court.document(document.duplicate_of)
    assert original.fault == "ok" and original.docket_entry_id != document.docket_entry_id
    assert download(session, court, document).content == download(session, court, original).content


def test_ok_pdf_text_holds_the_case_number(court, session):
    document = first(court, "ok")
    assert document.case_number in text_of(download(session, court, document).content)


def test_record_prose_is_as_long_as_the_records_and_the_courts_text_is_still_its_pdfs():
    plain = SimCourt(docs=30, seed=4, faults=False, shape="captured")
    court = SimCourt(docs=30, seed=4, faults=False, shape="captured", prose="record")
    lengths = [len("".join(court.corpus.court_pages(doc))) for doc in range(30)]
    assert 5_000 < min(lengths) and max(lengths) < 70_000 and 14_000 < sum(lengths) / 30
    assert sum(len("".join(plain.corpus.court_pages(doc))) for doc in range(30)) / 30 < 9_000
    document = court.documents[0]
    text = text_of(court.pdf_bytes(document.document_id))
    assert document.case_number in text and len(text) > 0.9 * lengths[0]
    assert court.corpus.court_pages(0)[1].split(" \r\n")[5] in text       # the court's text is the PDF's
    with pytest.raises(ValueError, match="prose"):
        SimCourt(docs=3, prose="novel")


@pytest.mark.parametrize("fault", ["image_only", "no_text"])
def test_image_only_and_blank_pdfs_have_no_text(court, fault):
    document = first(court, fault)
    data = court.pdf_bytes(document.document_id)
    assert data.startswith(b"%PDF-") and text_of(data).strip() == ""
    assert document.expected_status == "extracted" and document.expected_text_chars_zero


def test_unparseable_pdf_defeats_pypdf(court):
    document = first(court, "unparseable")
    data = court.pdf_bytes(document.document_id)
    assert data.startswith(b"%PDF-") and document.expected_status == "downloaded"
    with pytest.raises(Exception):
        text_of(data)


# ------------------------------------------------------------ performance


def test_keep_alive_requests_are_not_delayed_by_nagle(court, session):
    document = first(court, "ok")
    download(session, court, document)
    started = time.perf_counter()
    for _ in range(50):
        assert download(session, court, document).status_code == 200
    assert time.perf_counter() - started < 1.0      # ~1.4 s with Nagle's 28 ms per request


def test_full_size_corpus_builds_quickly_in_little_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    court = SimCourt(docs=98724, seed=1, late_docs=500)
    seconds = time.perf_counter() - started
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(court.documents) == 98724 and court.documents[-1].index == 98723
    assert seconds < 10 and grown_mib < 200


def test_the_real_record_has_the_yearly_case_counts_mostly_empty_cases_and_a_fifth_opinions():
    from notebook_builder.simcourt.corpus import FULL_CORPUS, yearly_cases
    court = SimCourt(docs=FULL_CORPUS, seed=1, faults=False, shape="captured", document_search="absent",
                     real_counts=True)
    corpus = court.corpus
    per_shard = collections.Counter(corpus.shard_of_case(case) for case in range(len(corpus.case_keys)))
    assert all(per_shard[f"{year}-{court_code}"] == yearly_cases(year, court_code)
               for year in range(1990, 2027) for court_code in ("CA", "SC"))
    sizes = [len(corpus.case_docs(case)) for case in range(len(corpus.case_keys))]
    assert sum(size <= 1 for size in sizes) > 0.75 * len(sizes) and sizes.count(0) > len(sizes) / 2
    opinions = sum(1 for doc in range(len(corpus)) if corpus.is_opinion(corpus.doc_entry[doc]))
    assert 0.17 < opinions / len(corpus) < 0.23
    assert max(corpus.doc_filed) < dt.date.today().toordinal()      # nothing filed today or later
    assert all(corpus.doc_description[doc] == corpus.doc_description[corpus.doc_entry[doc]]
               for doc in range(len(corpus)))                       # an entry's files share its description


def test_a_recording_court_logs_every_request_in_order_with_its_document_or_entry(session):
    with SimCourt(docs=40, seed=2, shape="captured", document_search="absent", faults=False,
                  record_requests=True) as court:
        document = court.documents[3]
        session.get(f"{court.base_url}/publicaccessdocuments", params={
            "filter": f"parentCategory=docketentries,parentID={document.docket_entry_id}"}, timeout=10)
        download(session, court, document)
        session.get(f"{court.base_url}/cases/{document.case_id}/parties", timeout=10)
    assert list(court.request_log) == [("entry_documents", court.corpus.doc_entry[3]), ("download", 3),
                                       ("parties", -1)]


def test_a_stalled_body_stops_half_way_then_the_court_hangs_up(session):
    with SimCourt(docs=300, seed=1, stall_seconds=1.5) as court:
        document = first(court, "stalled")
        started = time.monotonic()
        with pytest.raises((requests.ConnectionError, requests.Timeout)):   # a read timeout shorter than the stall
            download(session, court, document, timeout=(5, 0.5)).content
        assert time.monotonic() - started < 1.4
        answer = session.get(f"{court.base_url}/publicaccessdocuments/{document.document_id}/download",
                             timeout=10, stream=True)
        assert answer.status_code == 200                   # the stall was its only failure
        assert answer.raw.read() == court.pdf_bytes(document.document_id)
