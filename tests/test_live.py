"""Live smoke tests against the real court: KY_LIVE=1 only, 10 requests at most in total.

Every request goes through one session whose adapter counts it and refuses
the eleventh, so the budget holds however many tests are added here.
"""
from __future__ import annotations

import re

import pytest
import requests
from requests.adapters import HTTPAdapter

from notebook_builder.cells.c00_config import RunClock, load_config
from notebook_builder.cells.c30_client import CourtClient, CourtTrapError, classify_http_status

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(not load_config().LIVE, reason="live court tests need KY_LIVE=1")]

LIVE_REQUEST_BUDGET = 10
HEX64 = re.compile(r"^[0-9a-f]{64}$")


class BudgetAdapter(HTTPAdapter):
    """Counts every request sent to the court and refuses any past the budget."""

    sent = 0     # class-level: one budget for every session of the test run

    def __init__(self, *args, strip_selflinks: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.strip_selflinks = strip_selflinks

    def send(self, request, *args, **kwargs):
        if BudgetAdapter.sent >= LIVE_REQUEST_BUDGET:
            pytest.fail(f"live request budget of {LIVE_REQUEST_BUDGET} spent")
        BudgetAdapter.sent += 1
        if self.strip_selflinks:
            request.headers.pop("x-ctrack-excludeselflinks", None)
        return super().send(request, *args, **kwargs)


def live_client(strip_selflinks: bool = False) -> CourtClient:
    cfg = load_config(env={"KY_SEARCH_ATTEMPTS": "2", "KY_BACKOFF_BASE": "2", "KY_HTTP_TIMEOUT": "30"})
    session = requests.Session()
    session.mount("https://", BudgetAdapter(strip_selflinks=strip_selflinks))
    return CourtClient(cfg, RunClock(600), session=session)


@pytest.fixture(scope="module")
def first_page():
    with live_client() as client:
        return client.search_documents("2019-SC", 1, 5)     # 1 request (2 at most)


def test_live_document_search_pages_by_headers(first_page):
    assert first_page.total_count > 0 and first_page.results_limit
    assert 0 < first_page.result_count <= 5 and len(first_page.items) == first_page.result_count
    row = first_page.items[0]
    assert HEX64.match(row["document_id"]) and row["case_number"].startswith("2019-SC-")


def test_live_trap_is_not_read_as_an_empty_shard():
    with live_client(strip_selflinks=True) as client:          # 1 request
        try:
            page = client.search_documents("2019-SC", 1, 5)
        except CourtTrapError:
            return
    # Headers present and an honest-looking zero: discover's shard and sweep checks catch this form.
    assert page.total_count == 0 and page.items == []


def test_live_download_answers_a_pdf(first_page):
    with live_client() as client:                                # 1 request
        response = client.download_response(first_page.items[0]["document_id"])
        try:
            assert classify_http_status(response.status_code) in ("ok", "permanent")
            if response.status_code == 200:
                assert response.headers.get("Content-Type", "").startswith("application/pdf")
                assert next(response.iter_content(5)).startswith(b"%PDF")
        finally:
            response.close()
    assert BudgetAdapter.sent <= LIVE_REQUEST_BUDGET
