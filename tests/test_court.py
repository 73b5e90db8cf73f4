"""The court seam: what is Kentucky's is configuration of one C-Track court, and another court is another."""
from __future__ import annotations

import datetime as dt

import pytest

from notebook_builder.cells.c25_court import KENTUCKY, CaseNumbers, CTrackCourt, opinion_windows

# A court of the same API at its own host, its API under /api/v1, its own courts and number form
# (illustrative: Delaware County's real forms are not captured here).
DELAWARE_LIKE = CTrackCourt(
    name="Delaware County Court of Common Pleas (illustrative)", api_base="https://delco.example/api/v1",
    courts={"CV": "Civil Division", "OC": "Orphans' Court Division"},
    numbers=CaseNumbers(("CV", "OC"), form="{code}-{year}-{sequence}", digits=6, admin=None),
    opinion_search=False, download_paths={"api": "download"})


def test_kentucky_shards_split_digit_by_digit_and_go_back_up():
    numbers = KENTUCKY.numbers
    assert numbers.shards(2019, 2020) == ["2019-CA", "2019-SC", "2020-CA", "2020-SC"]
    assert KENTUCKY.sweep_shards(2024, 2024) == ["2024 CA ADMIN", "2024 SC ADMIN", "2024-CA", "2024-SC"]
    assert numbers.split_shard("2019-CA")[:2] == ["2019-CA-0", "2019-CA-1"]
    assert numbers.split_shard("2019-CA-01")[-1] == "2019-CA-019"
    assert numbers.split_shard("2019-CA-0123") == [] and numbers.split_shard("2024 CA ADMIN") == []
    assert numbers.top_level_shard("2019-CA-012") == "2019-CA"
    assert numbers.shard_of_number("2024 CA ADMIN - NON-CONFIDENTIAL OPINION - 002") == "2024 CA ADMIN"
    assert numbers.shard_of_number("not a number") is None and numbers.shard_of_number(None) is None
    assert numbers.number(2019, "CA", 12) == "2019-CA-0012"


def test_kentucky_numbers_name_their_court_and_descriptions_name_related_numbers():
    assert KENTUCKY.court_of("2019-CA-0012") == "Kentucky Court of Appeals"
    assert KENTUCKY.court_of("2024 SC ADMIN - NON-CONFIDENTIAL OPINION - 001") == "Kentucky Supreme Court"
    assert KENTUCKY.court_of("2019-XX-0012") is None
    assert KENTUCKY.numbers.related("2022-CA-1454, 1456 OPINION") == "2022-CA-1454, 2022-CA-1456"
    assert KENTUCKY.opinion_courts() == ["Kentucky Court of Appeals", "Kentucky Supreme Court"]


def test_kentucky_urls_are_under_the_api_root_and_the_second_download_path_under_the_site_root():
    base = "https://appellatepublic.kycourts.net/api/api/v1"
    assert KENTUCKY.url(base, "case", case_id="abc") == base + "/cases/abc"
    assert KENTUCKY.url(base, "download_site", document_id="d") == \
        "https://appellatepublic.kycourts.net/documents/d/download"
    assert KENTUCKY.paging_headers(11, 5) == {"x-ctrack-paging-startindex": "11", "x-ctrack-paging-maxresults": "5",
                                              "x-ctrack-paging-calculatetotalcount": "true"}
    paging = KENTUCKY.paging_of({"x-ctrack-paging-totalcount": "7", "x-ctrack-paging-moreresults": "false"})
    assert (paging.total, paging.more, paging.results, paging.limit) == (7, False, None, None)


def test_a_delaware_like_configuration_gives_its_own_urls_shards_and_court_names():
    court = DELAWARE_LIKE
    base = court.api_base
    assert court.url(base, "case_search", prefix="CV-2019").startswith("https://delco.example/api/v1/cases/search?")
    assert court.url(base, "download", document_id="d") == "https://delco.example/api/v1/publicaccessdocuments/d/download"
    assert court.sweep_shards(2019, 2020) == ["CV-2019", "CV-2020", "OC-2019", "OC-2020"]
    assert court.numbers.split_shard("CV-2019")[:2] == ["CV-2019-0", "CV-2019-1"]
    assert court.numbers.split_shard("CV-2019-00123") == [f"CV-2019-00123{d}" for d in range(10)]
    assert court.numbers.split_shard("CV-2019-001234") == []
    assert court.numbers.number(2019, "CV", 1234) == "CV-2019-001234"
    assert court.numbers.top_level_shard("CV-2019-0012") == "CV-2019"
    assert court.court_of("OC-2021-000007") == "Orphans' Court Division"
    assert court.court_of("2019-CA-0012") is None and KENTUCKY.court_of("CV-2019-000001") is None
    assert court.numbers.related("SEE CV-2019-001234, 001240") == "CV-2019-001234, CV-2019-001240"
    assert court.opinion_courts() == [] and list(court.download_paths) == ["api"]
    row = court.case_search_row({"id": "X1", "rowMap": {"caseNumber": "OC-2020-000001", "caseID": "ID1"}})
    assert row["court"] == "Orphans' Court Division" and row["case_id"] == "id1"


def test_a_case_number_form_must_end_with_its_sequence():
    with pytest.raises(ValueError):
        CaseNumbers(("CV",), form="{sequence}-{code}-{year}")


def test_opinion_windows_are_seven_days_in_the_search_s_date_form():
    assert opinion_windows(dt.date(2024, 4, 1), dt.date(2024, 4, 9)) == [("04/01/2024", "04/07/2024"),
                                                                         ("04/08/2024", "04/09/2024")]


def test_a_court_at_another_api_root_with_other_court_names_is_crawled_by_the_same_stages(tmp_path):
    """The simulated court served under /api/v1 with its own court names (Kentucky's number form),
    walked and downloaded by the crawl given that court's configuration: every document is
    archived under the court names this court gives, and every URL asked was under its root."""
    from support import open_test_context

    from notebook_builder.cells.c12_queues import WorkQueues
    from notebook_builder.cells.c30_client import CourtClient
    from notebook_builder.cells.c75_schedule import crawl
    from notebook_builder.simcourt import SimCourt

    names = {"CA": "Common Pleas Civil Division", "SC": "Common Pleas Orphans' Court"}
    other = CTrackCourt(name="A court of the same API", api_base="http://127.0.0.1/api/v1", courts=names)
    with SimCourt(60, seed=5, faults=False, first_year=2024, last_year=2026, shape="captured", document_search="absent",
                  api_path="/api/v1", court_names=names, today=dt.date(2026, 6, 1)) as court:
        assert court.base_url.endswith("/api/v1") and "/api/api/" not in court.base_url
        ctx = open_test_context(tmp_path, court, env={"KY_FIRST_YEAR": "2024", "KY_LAST_YEAR": "2026",
                                                      "KY_DISCOVERY": "cases", "KY_CASE_DETAILS": "0"},
                                client=lambda cfg, clock: CourtClient(cfg, clock, court=other))
        try:
            result = crawl(ctx)
            held = {row["document_id"]: row["court"] for row in ctx.db.iter_documents()}
            queue = WorkQueues(ctx.db).download_queue_size(ctx.cfg)
        finally:
            ctx.close()
        assert result.discover.converged and queue == 0 and result.download.downloaded == len(court.documents)
        assert {document.document_id for document in court.documents} <= set(held)
        assert set(held.values()) <= set(names.values()) and len(set(held.values())) == 2
        assert result.discover.opinion_rows > 0                       # asked by this court's names, answered
        assert court.endpoint_requests["other"] == 0
