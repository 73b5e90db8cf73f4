"""The court's client for the configured court system, and TR Portal's client.

Guarantees:
- `court_client(cfg, clock)` is the one way a stage gets a client of the court COURT_SYSTEM names
  (c27), or of the `court` given: the client class of the court's family (CLIENTS), made for it. The stages ask it
  and the court it holds (`client.court`); none names a family.
- `TRPortalClient` is c30's client (pacing, retries with Retry-After, the breaker, one request at
  a time) speaking TR Portal (c26): every JSON request carries `Accept: application/json` (and the
  court's Referer); `page()` asks one page of a list (0-based `page`, `size` at most MAX_PAGE_SIZE)
  and reads its envelope; `pages()` follows a list to its end in the page size the court answers
  (a size other than the one asked is asked from then on), never past the results window.
- The results window: a page that begins past it is never asked once the window is known
  (RESULTS_WINDOW, or lower once learnt); an answer past it (a 400, an empty 200 while rows are
  announced, a 500 asked twice) raises `PastWindow`, never read as the end of the data or a
  failure, and teaches the window.
- `case_search(low, high)` pages the case search by filed date, oldest first; when the window
  holds fewer rows than the search, the next window begins at the last filed instant read, so
  windows meet exactly (a case filed at 00:00:00.000 is never lost between two; one read twice is
  the same case). `get_object` asks an unenveloped resource (a case, a publication).
- Downloads go to `document_url(row)`: the document's path as the court wrote its ids; a redirect
  is not followed (c70 records the wall), nor on a JSON request (a 3xx on a list raises
  `SearchRefused`, on an object PermanentFetchError).

Knobs read: COURT_SYSTEM, PAGE_SIZE (and the client's: API_BASE, PACING*, BACKOFF_*,
SEARCH_ATTEMPTS, HTTP_TIMEOUT, COURT_DOWN_*).
"""
from __future__ import annotations

import datetime as _dt
import logging
import random
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import requests

from .c00_config import Config, PipelineError, RunClock, TransientFetchError
from .c25_court import ShapeProblem
from .c26_trportal import MAX_PAGE_SIZE, PATHS, RESULTS_WINDOW, TRPortalCourt, envelope, instant_of, instant_text
from .c27_court_systems import court_of_config
from .c30_client import CourtClient, SearchRefused, classify_http_status, is_redirect, retry_after_seconds

log_trportal = logging.getLogger("kycourt.client")

CASE_SEARCH_SORT = "caseHeader.filedDate,asc"


class PastWindow(PipelineError):
    """A page begins past the court's results window: what lies beyond is reached another way (a
    narrower date window, the other order), never read as the end of the data."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass
class TRPage:
    """One page of a TR Portal list: its rows as sent, the court's count, the page's number and size."""
    results: list
    total: int
    number: int
    size: int
    offset: int


class TRPortalClient(CourtClient):
    """The TR Portal client (see the module docstring)."""

    court: TRPortalCourt

    def __init__(self, cfg: Config, clock: RunClock, session: requests.Session | None = None, *,
                 rng: random.Random | None = None, court: TRPortalCourt | None = None):
        super().__init__(cfg, clock, session, rng=rng, court=court)
        self.window = RESULTS_WINDOW           # rows a search can be paged through, as last learnt
        self.windows_learnt = 0

    # ------------------------------------------------------------ answers

    def url_of(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        query = urllib.parse.urlencode(list(_tr_pairs(params or {})), safe=":,")
        return self.base + path + (f"?{query}" if query else "")

    def document_url(self, row: Mapping[str, Any], path: str = "api") -> str:
        return self.base + row["court_path"]

    def get_object(self, path: str, label: str) -> Any:
        """An unenveloped resource (a case detail, a publication), retried like a page; a 404 (or another
        permanent status) raises PermanentFetchError."""
        return self._json_answer(self.url_of(path), {}, label)[0]

    def page(self, path: str, params: Mapping[str, Any], number: int, size: int, label: str) -> TRPage:
        """Page `number` (0-based) of `size` rows of a list (see the module docstring)."""
        size = max(1, min(size, MAX_PAGE_SIZE))
        offset = number * size
        if offset and offset >= self.window:
            raise PastWindow(f"{label}: page {number} begins at {offset}, past the window of {self.window}", offset)
        url = self.url_of(path, {**params, "page": number, "size": size})
        outcome = self._retrying(f"{label} page {number}",
                                 lambda failures: self._page_outcome(self._get(url, {}), label, offset, failures))
        if isinstance(outcome, PastWindow):
            self._learn_window(outcome.offset)
            raise outcome
        return outcome

    def _page_outcome(self, response: requests.Response, label: str, offset: int,
                      failures: int) -> TRPage | PastWindow | TransientFetchError:
        code = response.status_code
        past = PastWindow(f"{label}: the court answered {code} at row {offset}, past its results window", offset)
        if code == 400 and offset:
            return past
        if code == 500 and offset and failures:
            return past            # a 500 twice at a later page: the window's answer, not a fault
        if code != 200:
            if classify_http_status(code) == "permanent" or is_redirect(code, self.court):
                self.health.usable()
                raise SearchRefused(f"{label}: the court answered {code}: {response.text[:200]!r}", code)
            return TransientFetchError(f"HTTP {code}", http_status=code, retry_after=retry_after_seconds(response))
        try:
            results, page = envelope(response.json())
        except (ValueError, ShapeProblem) as exc:
            return TransientFetchError(f"{label}: 200 whose body is not a page ({response.headers.get('Content-Type')}):"
                                       f" {exc}", http_status=200)
        if not results and offset < page["totalElements"]:
            if offset:
                return past
            return TransientFetchError(f"{label}: the court announced {page['totalElements']} rows and sent none",
                                       http_status=200)
        return TRPage(results=results, total=page["totalElements"], number=page["number"],
                      size=page["size"] or len(results), offset=offset)

    def _learn_window(self, offset: int) -> None:
        if 0 < offset < self.window:
            log_trportal.info("the court's results window is %d rows (an answer past it at row %d)", offset, offset)
            self.window = offset
            self.windows_learnt += 1

    def pages(self, path: str, params: Mapping[str, Any], label: str, *, start: int = 0,
              size: int | None = None) -> Iterator[TRPage]:
        """Every page of a list from page `start` (of `size` rows), in the size the court answers; raises
        PastWindow before asking a page past the window."""
        size = min(size or self.cfg.PAGE_SIZE, MAX_PAGE_SIZE)
        number = start
        while True:
            page = self.page(path, params, number, size, label)
            yield page
            if not page.results:
                return
            size = page.size or size          # a page size other than the one asked: asked from now on
            number = max(number, page.number) + 1
            reached = page.offset + len(page.results)
            if reached >= page.total:
                return
            if len(page.results) < size:      # a page cut short with rows still to come: the window's edge
                self._learn_window(reached)
                raise PastWindow(f"{label}: the court cut the page at row {reached} of {page.total}", reached)

    # -------------------------------------------------------- the case search

    def case_search(self, low: _dt.datetime, high: _dt.datetime, *, start_page: int = 0, size: int | None = None,
                    latest: _dt.datetime | None = None
                    ) -> Iterator[tuple[_dt.datetime, TRPage, _dt.datetime | None]]:
        """(the window's first instant, a page, the last filed instant read in the window) of the case
        search over [low, high] (see the module docstring); the window moves on past the results
        window. `start_page` (of `size` rows, `latest` read before it) resumes a window at its page."""
        first = low
        while True:
            params = {"caseHeader.filedDateFrom": instant_text(first), "caseHeader.filedDateTo": instant_text(high),
                      "sort": CASE_SEARCH_SORT}
            try:
                for page in self.pages(PATHS["case_search"], params, f"case search from {instant_text(first)}",
                                       start=start_page, size=size):
                    for row in page.results:
                        header = row.get("caseHeader") if isinstance(row, Mapping) else None
                        moment = instant_of(header.get("filedDate")) if isinstance(header, Mapping) else None
                        if moment is not None and (latest is None or moment > latest):
                            latest = moment
                    yield first, page, latest
                return
            except PastWindow as exc:
                if latest is None or latest <= first:
                    raise PastWindow(f"case search from {instant_text(first)}: more than {self.window} cases filed "
                                     "at one instant; the rest cannot be reached", exc.offset) from None
                log_trportal.debug("case search: %s; going on from %s", exc, instant_text(latest))
                first, start_page, size, latest = latest, 0, None, None


def _tr_pairs(params: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for name, value in params.items():
        for one in value if isinstance(value, (list, tuple)) else (value,):
            yield name, str(one)


# The court's API family (c25 CTrackCourt.family, c26 TRPortalCourt.family) -> its client class.
CLIENTS: dict[str, type] = {"ctrack": CourtClient, "trportal": TRPortalClient}


def court_client(cfg: Config, clock: RunClock, session: requests.Session | None = None, *,
                 rng: random.Random | None = None, court=None) -> CourtClient:
    """A client of the configured court system's court, or of `court` (see the module docstring)."""
    court = court if court is not None else court_of_config(cfg)
    return CLIENTS[court.family](cfg, clock, session, rng=rng, court=court)
