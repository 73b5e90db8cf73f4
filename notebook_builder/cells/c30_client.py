"""The court's HTTP client: one polite requests.Session, and the pure decisions about its answers.

Guarantees:
- One session carries the court's headers (`court.headers()`: c25 MANDATORY_HEADERS, also sent
  with every request, so a session handed in cannot drop them; a download sends
  `court.download_headers()`) and a User-Agent naming the project; every request follows a
  redirect only where the court's lead to what was asked (`follows_redirects`; else a 3xx on a
  JSON request is a refusal); proxy and CA-bundle variables are read once, for API_BASE. URLs,
  paging headers and rows are the court's (`CourtClient.court`: COURT_SYSTEM's, c27, unless
  given): the client names none. This is the C-Track Public Access client; c31 makes the configured family's.
- Pacing: before each request a random pause in PACING_SEARCH (JSON) or PACING_DL (downloads),
  times PACING (0: none), slept on the run clock, so a stop raises `StopRequested` before anything
  is sent.
- Searches (`search_documents`, `search_cases`, `search_opinions`) page by headers (1-based) and
  return a `SearchPage`. A 400 raises `ResultsLimitExceeded` (the caller splits the shard); a
  permanent status `SearchRefused`; transient answers (5xx, 408, 429, resets, timeouts, a 200 that
  is not JSON) are retried after `retry_delay(failures)` (BACKOFF_BASE, doubling to BACKOFF_CAP),
  or the court's longer Retry-After, up to SEARCH_ATTEMPTS tries, then `TransientFetchError`.
  An answer without a total count, or announcing rows and sending none on its first page, raises
  `CourtTrapError` (the excludeselflinks trap never reads as "empty").
- `get_json` fetches a case resource or a list with the same retries (a 404 raises
  `PermanentFetchError`); lists are asked with paging headers and LIST_MAX_RESULTS rows and
  followed while the court says there are more; what makes a list doubtful is counted in
  `list_warnings`, never raised.
- `download_response()` makes one streamed GET by one of the court's download paths and never
  retries: the download stage owns attempts (persisted per document) and the path.
- The breaker (`CourtHealth`): once no usable answer came for COURT_DOWN_SECONDS (at most
  NEVER_ANSWERED_SECONDS before the first) and COURT_DOWN_FAILURES requests in a row failed, the
  next pause or backoff raises `CourtUnreachable` before anything is sent (the run exits 3).
- A transport failure is logged as one short phrase (`describe_failure`); a backoff of
  BACKOFF_LOG_SECONDS or more is INFO once per thing retried. `pace_figures()` says the requests
  so far, the latency observed and the hours the downloads left take at the current pacing.

Why a small loop and not urllib3's `Retry`: a 400 on search means "split the shard", a torn or
HTML 200 is known only after the body is read, and download attempts are counted in the database,
one per request. The loop reuses `Retry.parse_retry_after` for the header's two forms.

Knobs read: API_BASE, COURT_SYSTEM, PACING, PACING_SEARCH, PACING_DL, BACKOFF_BASE, BACKOFF_CAP, SEARCH_ATTEMPTS,
HTTP_TIMEOUT, COURT_DOWN_SECONDS, COURT_DOWN_FAILURES.
"""
from __future__ import annotations

import collections
import logging
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import requests
from urllib3.util.retry import Retry

from .c00_config import (Config, CourtUnreachable, IntegrityError, PermanentFetchError, ResultsLimitExceeded,
                         RunClock, StopRequested, TransientFetchError, retry_delay)
from .c10_database import PERMANENT_HTTP_STATUSES
from .c25_court import KENTUCKY, LIST_ENDPOINTS, CTrackCourt
from .c27_court_systems import court_of_config

log_client = logging.getLogger("kycourt.client")

CLIENT_USER_AGENT = "kycourt-colab/0.1 (Kentucky appellate public record archive; polite, paced crawler)"
LIST_MAX_RESULTS = 1000
# A list of exactly this many rows, with nothing saying it is whole, may be the court's default page
# cut short (searches sent without paging headers answer about 20 rows).
SUSPICIOUS_LIST_SIZE = 20
# How far a list is followed when the court never says it has no more (its results limit when it
# announced one).
LIST_RESULTS_LIMIT = 10000
# While the court has not given one usable answer since the run began, the breaker opens after
# COURT_DOWN_FAILURES failures and this long (or COURT_DOWN_SECONDS if shorter), whichever is later.
NEVER_ANSWERED_SECONDS = 60.0
# A wait this long or longer is said in the log (INFO): a progress bar alone would just stand still.
BACKOFF_LOG_SECONDS = 5.0

_TRANSIENT_EXCEPTIONS = (requests.ConnectionError, requests.Timeout,
                         requests.exceptions.ChunkedEncodingError,
                         requests.exceptions.ContentDecodingError)


class CourtTrapError(IntegrityError):
    """The court answered a search as if the x-ctrack-excludeselflinks header were missing."""


class SearchRefused(IntegrityError):
    """The court answered a search with a permanent status (401/403/404): this search is not its."""

    def __init__(self, message: str, http_status: int):
        super().__init__(message)
        self.http_status = http_status


@dataclass
class SearchPage:
    """One page of a document search, as the paging headers describe it.

    `raw_items` are the court's resultItems as sent; `items` the same as `documents` rows
    (`normalize`: the court's `document_row`), made on first use: Discover normalizes only the
    rows it must write, which in every sweep after the first is almost none.
    """
    raw_items: list[dict]
    total_count: int
    result_count: int
    more: bool
    results_limit: int | None
    start_index: int = 1
    facets: list = field(default_factory=list)     # the body's `facets`, as sent (opinion search)
    normalize: Callable[[Any], dict | None] = field(default=KENTUCKY.document_row, repr=False, compare=False)
    _items: list[dict] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def items(self) -> list[dict]:
        if self._items is None:
            self._items = [row for row in map(self.normalize, self.raw_items) if row is not None]
            if len(self._items) < len(self.raw_items):
                log_client.warning("search page at %d: %d rows without a document id skipped",
                                   self.start_index, len(self.raw_items) - len(self._items))
        return self._items

    @property
    def raw_count(self) -> int:
        return len(self.raw_items)


# ----------------------------------------------------------- pure decisions


def classify_http_status(code: int) -> str:
    """'ok' (200), 'permanent' (PERMANENT_HTTP_STATUSES) or 'transient' (5xx, 408, 429, anything else)."""
    if code == 200:
        return "ok"
    if code in PERMANENT_HTTP_STATUSES:
        return "permanent"
    return "transient"


def is_redirect(code: int, court: Any) -> bool:
    """A 3xx of a court whose redirects are not followed (c26 `follows_redirects`): a refusal."""
    return 300 <= code < 400 and not court.follows_redirects


_RETRY_AFTER_PARSER = Retry(0)


def retry_after_seconds(response: Any) -> float | None:
    """Seconds the Retry-After header asks for (delta-seconds or HTTP-date); None if absent or unreadable."""
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After")
    if value is None or not str(value).strip():
        return None
    try:
        return max(0.0, float(_RETRY_AFTER_PARSER.parse_retry_after(str(value).strip())))
    except Exception:   # urllib3 raises InvalidHeader; a garbled header means "no advice"
        return None


_ERRNO_REASON = re.compile(r"\[Errno -?\d+\] ([^'\"()\]]+)")
_POOL_PREFIX = re.compile(r"^\w*ConnectionPool\([^)]*\):\s*")


def describe_failure(exc: BaseException) -> str:
    """A transport failure in one short phrase (`ConnectionError: Connection refused`), without
    the HTTPConnectionPool(...) and object reprs requests puts in its messages."""
    text = str(exc)
    reason = _ERRNO_REASON.search(text)
    if reason:
        phrase = reason.group(1).strip()
    else:
        phrase = _POOL_PREFIX.sub("", text).split(" (Caused by", 1)[0]
        phrase = re.sub(r"Max retries exceeded with url: \S+", "", phrase).strip(" .:") or type(exc).__name__
    return f"{type(exc).__name__}: {phrase}"[:160]


def projected_hours(requests: int, pause_window: tuple[float, float], pacing: float,
                    latency_seconds: float) -> float:
    """Hours `requests` take one at a time: each the mean pacing pause (PACING x the window's mean)
    plus the latency observed."""
    pause = pacing * (pause_window[0] + pause_window[1]) / 2
    return requests * (pause + max(0.0, latency_seconds)) / 3600


class CourtHealth:
    """The circuit breaker: has the court given any usable answer lately?

    A usable answer is one that says the court is there: a search page, a 400 on a paging window,
    a PDF, or a permanent 401/403/404. A failure is a request that got none (refused, reset, timed
    out, 5xx, 429, a page that is not the API's). The court is unreachable once `down_failures`
    requests in a row failed and `down_seconds` have passed since the last usable answer (or since
    this tracker was made). Both are needed: one slow failure after a long quiet spell is not an
    outage, and neither are a few quick failures. Download attempts spent during such an outage say
    nothing about their documents: `outage_attempts` names them so the stage can give them back.
    """

    def __init__(self, down_seconds: float, down_failures: int,
                 now: Callable[[], float] = time.monotonic):
        self.down_seconds, self.down_failures = down_seconds, down_failures
        self._now = now
        self.last_usable = now()
        self.answered = False          # any usable answer since the run (this tracker) began
        self.failures_in_a_row = 0
        self.last_failure: str | None = None
        self.outage_attempts: collections.Counter = collections.Counter()   # document id -> attempts

    def usable(self) -> None:
        self.last_usable = self._now()
        self.answered = True
        self.failures_in_a_row = 0
        self.last_failure = None
        self.outage_attempts.clear()

    def threshold_seconds(self) -> float:
        """The silence that opens the breaker: down_seconds, or at most NEVER_ANSWERED_SECONDS while
        the court has not answered once (a wrong API_BASE or no network should not cost minutes)."""
        return self.down_seconds if self.answered else min(self.down_seconds, NEVER_ANSWERED_SECONDS)

    def seconds_until_open(self) -> float | None:
        """How long until the breaker opens if nothing usable comes (None: not enough failures yet)."""
        if self.failures_in_a_row < self.down_failures:
            return None
        return max(0.0, self.threshold_seconds() - self.silent_seconds())

    def failure(self, what: object, document_id: str | None = None) -> None:
        self.failures_in_a_row += 1
        self.last_failure = str(what)[:200]
        if document_id is not None:
            self.outage_attempts[document_id] += 1

    def silent_seconds(self) -> float:
        return self._now() - self.last_usable

    def unreachable(self) -> bool:
        return (self.failures_in_a_row >= self.down_failures
                and self.silent_seconds() >= self.threshold_seconds())

    def check(self, base: str) -> None:
        """Raises CourtUnreachable when the breaker is open."""
        if self.unreachable():
            since = "for" if self.answered else "since the run began,"
            raise CourtUnreachable(
                f"the court at {base} gave no usable answer {since} {self.silent_seconds():.0f} s "
                f"({self.failures_in_a_row} failed requests in a row; last: {self.last_failure})")


# ------------------------------------------------------------------ client


class CourtClient:
    """The pipeline's only door to the court (see the module docstring)."""

    def __init__(self, cfg: Config, clock: RunClock, session: requests.Session | None = None,
                 *, rng: random.Random | None = None, court: CTrackCourt | None = None):
        self.cfg = cfg
        self.clock = clock
        self.base = cfg.API_BASE.rstrip("/")
        self.session = session if session is not None else requests.Session()
        self.court = court if court is not None else court_of_config(cfg)
        self._headers = dict(self.court.headers())
        self.session.headers.update(self._headers)
        self.session.headers["User-Agent"] = CLIENT_USER_AGENT
        if self.session.trust_env:
            # requests reads the proxy and CA-bundle variables of os.environ again on every request
            # (two scans of the whole environment, ~0.3 ms: a tenth of a loopback download here).
            # Every URL is under API_BASE, so they are read once, for it, as requests would.
            settings = self.session.merge_environment_settings(self.base, {}, None, None, None)
            self.session.proxies.update(settings["proxies"])
            self.session.verify = settings["verify"]
            self.session.trust_env = False
        self._rng = rng or random.Random()
        self.results_limit: int | None = None   # as the court last announced it
        self.requests_sent = 0
        self.downloads_sent = 0                 # of them, GETs of a PDF
        self.retries = 0
        self.answers = 0                        # requests the court answered (any status)
        self.answer_seconds = 0.0               # their time to the answer's headers, summed
        self.list_warnings: collections.Counter = collections.Counter()   # what made a list doubtful
        self.health = CourtHealth(cfg.COURT_DOWN_SECONDS, cfg.COURT_DOWN_FAILURES, now=clock.elapsed)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> "CourtClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing

    def url(self, endpoint: str, **values: str) -> str:
        return self.court.url(self.base, endpoint, **values)

    def observed_latency(self) -> float:
        """Mean seconds from a request to its answer's headers, this run (0 before any answer)."""
        return self.answer_seconds / self.answers if self.answers else 0.0

    def pace_figures(self, downloads_left: int) -> dict:
        """Politeness by evidence: requests so far, the latency observed, and the hours the
        downloads left take one at a time at the current pacing (PACING x PACING_DL)."""
        latency = self.observed_latency()
        return {"requests": self.requests_sent, "latency_seconds": round(latency, 3),
                "downloads_left": downloads_left,
                "projected_hours": round(projected_hours(downloads_left, self.cfg.PACING_DL, self.cfg.PACING,
                                                         latency), 2)}

    def _pace(self, window: tuple[float, float]) -> None:
        self.health.check(self.base)
        if self.cfg.PACING <= 0:
            if self.clock.stop_event.is_set():
                raise StopRequested(self.clock.stop_reason or "stop requested")
            return
        pause = self.cfg.PACING * self._rng.uniform(*window)
        if not self.clock.sleep(pause):
            raise StopRequested(self.clock.stop_reason or "stop requested")

    def backoff(self, failures: int, retry_after: float | None, waiting_for: str) -> None:
        """The wait before retrying `waiting_for` after `failures` failed tries (`retry_delay`); said
        in the log when it is long, refused (the breaker's CourtUnreachable) when the court is
        down, cut short (StopRequested) by a stop."""
        self.health.check(self.base)
        delay = retry_delay(failures, base=self.cfg.BACKOFF_BASE, cap=self.cfg.BACKOFF_CAP)
        if not self.health.answered:
            # Never answered: enough tries fit in the breaker's first-contact window.
            delay = min(delay, NEVER_ANSWERED_SECONDS / max(1, self.health.down_failures))
        delay = max(delay, retry_after or 0.0)      # the court's Retry-After is its word
        opens_in = self.health.seconds_until_open()
        if opens_in is not None and opens_in < delay:
            # The breaker would open during this wait: wait only that long, then say so.
            if not self.clock.sleep(opens_in):
                raise StopRequested(self.clock.stop_reason or "stop requested")
            self.health.check(self.base)
        courts_word = bool(retry_after and retry_after >= delay)
        # Said once for each thing retried (its first wait) or when the court asks for the wait;
        # the other waits are DEBUG: a dead court must not write a line per retry.
        level = logging.INFO if delay >= BACKOFF_LOG_SECONDS and (failures <= 1 or courts_word) else logging.DEBUG
        log_client.log(level, "waiting %.0f s before %s (%s)", delay, waiting_for,
                       "the court's Retry-After" if courts_word else "backoff")
        if not self.clock.sleep(delay):
            raise StopRequested(self.clock.stop_reason or "stop requested")

    def _get(self, url: str, headers: Mapping[str, str], **kwargs: Any) -> requests.Response:
        """One GET; a redirect is followed only where the court's lead to what was asked
        (`court.follows_redirects`): TR Portal's lead to another host, its wall."""
        self.requests_sent += 1
        started = time.monotonic()
        response = self.session.get(url, headers={**self._headers, **headers},
                                    timeout=(self.cfg.HTTP_TIMEOUT, self.cfg.HTTP_TIMEOUT),
                                    allow_redirects=self.court.follows_redirects, **kwargs)
        self.answers += 1
        self.answer_seconds += time.monotonic() - started
        return response

    # -------------------------------------------------------------- search

    def search_documents(self, prefix: str, start_index: int, max_results: int) -> SearchPage:
        """One page of the document search for case numbers starting with `prefix`."""
        return self._search(self.url("document_search", prefix=prefix), prefix, start_index, max_results)

    def search_cases(self, prefix: str, start_index: int, max_results: int) -> SearchPage:
        """One page of the case search for case numbers starting with `prefix`."""
        return self._search(self.url("case_search", prefix=prefix), prefix, start_index, max_results)

    def search_opinions(self, court: str, first_day: str, last_day: str, start_index: int,
                        max_results: int) -> SearchPage:
        """One page of the opinion search: `court` ("Kentucky Court of Appeals"), days MM/DD/YYYY."""
        url = self.url("opinion_search", court=court, first_day=first_day, last_day=last_day)
        return self._search(url, f"opinions {court} {first_day}-{last_day}", start_index, max_results)

    def get_json(self, endpoint: str, **values: str) -> Any:
        """One JSON answer of a case resource or an entry's file list, retried like a search page.

        A list (LIST_ENDPOINTS) is asked with the paging headers and a large maxresults, and
        followed while the court says `moreresults: true`, up to its results limit; a page that
        is not a list, "more" with no rows, "more" past the limit and a list of exactly
        SUSPICIOUS_LIST_SIZE rows that nothing says is whole are counted in `list_warnings` (the
        rows so far are returned). A first answer that is not a list is returned as it is, for the
        caller to count. A 404 (or another permanent status) raises PermanentFetchError; transient
        answers, a 200 that is not JSON and an empty body are retried up to SEARCH_ATTEMPTS tries."""
        url = self.url(endpoint, **values)
        label = f"{endpoint} {next(iter(values.values()), '')[:12]}"
        if endpoint not in LIST_ENDPOINTS:
            return self._json_answer(url, {}, label)[0]
        rows: list = []
        start = 1
        while True:
            body, headers = self._json_answer(url, self.court.paging_headers(start, LIST_MAX_RESULTS), label)
            if not isinstance(body, list):
                if start == 1:
                    return body
                return self._list_warning(rows, f"{label}: a later page is not a list")
            rows += body
            paging = self.court.paging_of(headers)
            if not paging.more:
                break
            if not body:
                return self._list_warning(rows, f"{label}: moreresults with no rows")
            start += len(body)
            limit = paging.limit or self.results_limit or LIST_RESULTS_LIMIT
            if start > limit:
                return self._list_warning(rows, f"{label}: moreresults still true past the results limit {limit}")
        if len(rows) == SUSPICIOUS_LIST_SIZE and paging.total is None:
            self._list_warning(rows, f"{label}: exactly {SUSPICIOUS_LIST_SIZE} rows and nothing says the list is whole")
        return rows

    def _list_warning(self, rows: list, what: str) -> list:
        kind = what.split(": ", 1)[1]
        self.list_warnings[kind] += 1
        log_client.debug("%s", what)
        return rows

    def _json_answer(self, url: str, headers: Mapping[str, str], label: str) -> tuple[Any, Mapping[str, str]]:
        """(body, response headers) of one JSON GET, with get_json's retries."""
        def attempt(failures: int) -> tuple[Any, Mapping[str, str]] | TransientFetchError:
            response = self._get(url, headers)
            code = response.status_code
            if code == 200:
                try:
                    return response.json(), response.headers
                except ValueError as exc:
                    return TransientFetchError(f"{label}: 200 whose body is not JSON "
                                               f"({response.headers.get('Content-Type')}): {exc}", http_status=200)
            if classify_http_status(code) == "permanent" or is_redirect(code, self.court):
                self.health.usable()   # the court answered: it is there, this resource is not
                raise PermanentFetchError(f"{label}: HTTP {code}", http_status=code)
            return TransientFetchError(f"HTTP {code}", http_status=code, retry_after=retry_after_seconds(response))
        return self._retrying(label, attempt)

    def _retrying(self, label: str, attempt: Callable[[int], Any]) -> Any:
        """`attempt(failures)`'s answer, paced (PACING_SEARCH) before each try: an answer that is not a
        TransientFetchError is usable (the breaker hears so) and returned; a transient one, or a
        transport failure, is a failure: retried after `backoff` up to SEARCH_ATTEMPTS tries, then
        raised. What `attempt` raises (a refusal) is not caught."""
        failures = 0
        while True:
            self._pace(self.cfg.PACING_SEARCH)
            try:
                outcome = attempt(failures)
            except _TRANSIENT_EXCEPTIONS as exc:
                outcome = TransientFetchError(f"{label}: {describe_failure(exc)}")
            if not isinstance(outcome, TransientFetchError):
                self.health.usable()
                return outcome
            self.health.failure(outcome)
            failures += 1
            if failures >= self.cfg.SEARCH_ATTEMPTS:
                raise TransientFetchError(f"{label}: {failures} tries failed; last: {outcome}",
                                          http_status=outcome.http_status, retry_after=outcome.retry_after)
            self.retries += 1
            log_client.debug("%s: %s; retry %d of %d", label, outcome, failures, self.cfg.SEARCH_ATTEMPTS - 1)
            self.backoff(failures, outcome.retry_after,
                         f"{label}, try {failures + 1} of {self.cfg.SEARCH_ATTEMPTS}")

    def _search(self, url: str, prefix: str, start_index: int, max_results: int) -> SearchPage:
        if start_index < 1 or max_results < 1:
            raise ValueError("start_index and max_results must be >= 1 (paging is 1-based)")
        window_learned = False
        failures = 0
        while True:
            size = max_results
            if self.results_limit is not None:
                if start_index > self.results_limit:
                    raise ResultsLimitExceeded(
                        f"{prefix}: start index {start_index} is past the results limit {self.results_limit}")
                size = min(max_results, self.results_limit - start_index + 1)
            self._pace(self.cfg.PACING_SEARCH)
            headers = self.court.paging_headers(start_index, size)
            try:
                response = self._get(url, headers)
                outcome = self._search_outcome(prefix, start_index, response)
            except _TRANSIENT_EXCEPTIONS as exc:
                outcome = TransientFetchError(f"{prefix}: {describe_failure(exc)}")
            if isinstance(outcome, TransientFetchError):
                self.health.failure(outcome)
            else:
                self.health.usable()
            if isinstance(outcome, SearchPage):
                return outcome
            if isinstance(outcome, ResultsLimitExceeded):
                # The court announced its limit on the 400: if our window only crossed it because we
                # did not know it yet, ask again inside it, once; otherwise the shard must split.
                if (not window_learned and self.results_limit is not None
                        and start_index + size - 1 > self.results_limit):
                    window_learned = True
                    continue
                raise outcome
            failures += 1
            if failures >= self.cfg.SEARCH_ATTEMPTS:
                raise TransientFetchError(
                    f"{prefix} (start {start_index}): {failures} tries failed; last: {outcome}",
                    http_status=outcome.http_status, retry_after=outcome.retry_after)
            self.retries += 1
            log_client.debug("search %s start %d: %s; retry %d of %d", prefix, start_index, outcome,
                             failures, self.cfg.SEARCH_ATTEMPTS - 1)
            self.backoff(failures, outcome.retry_after,
                         f"search {prefix} start {start_index}, try {failures + 1} of {self.cfg.SEARCH_ATTEMPTS}")

    def _search_outcome(self, prefix: str, start_index: int,
                        response: requests.Response) -> SearchPage | Exception:
        paging = self.court.paging_of(response.headers)
        if paging.limit is not None and paging.limit > 0:
            self.results_limit = paging.limit
        code = response.status_code
        if code == 400:
            return ResultsLimitExceeded(f"{prefix}: the court refused the window at start {start_index} "
                                        f"(400, results limit {self.results_limit})")
        if code != 200:
            kind = classify_http_status(code)
            if kind == "permanent":
                # 401/403/404 on a search is not something a shard split or a retry fixes.
                self.health.usable()   # the court answered: it is there, this search is not
                raise SearchRefused(f"{prefix}: the court answered a search with {code}: "
                                    f"{response.text[:200]!r}", code)
            return TransientFetchError(f"HTTP {code}", http_status=code,
                                       retry_after=retry_after_seconds(response))
        try:
            body = response.json()
            if not isinstance(body, dict):
                raise TypeError(f"the body is a {type(body).__name__}, not an object")
            items = body["resultItems"]
            if not isinstance(items, list):
                raise TypeError("resultItems is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            return TransientFetchError(f"200 whose body is not a search answer "
                                       f"({response.headers.get('Content-Type')}): {exc}", http_status=200)
        total = paging.total
        if total is None:
            raise CourtTrapError(
                f"{prefix}: court answered without paging headers (no total count): "
                "the x-ctrack-excludeselflinks trap? Refusing to conclude the shard is empty")
        result_count = len(items) if paging.results is None else paging.results
        if start_index == 1 and total > 0 and not items:
            raise CourtTrapError(f"{prefix}: court announced {total} results but returned no rows: "
                                 "the x-ctrack-excludeselflinks trap?")
        more = paging.more if paging.more is not None else start_index - 1 + result_count < total
        facets = body.get("facets") if isinstance(body.get("facets"), list) else []
        return SearchPage(raw_items=items, total_count=total, result_count=result_count, more=more,
                          results_limit=self.results_limit, start_index=start_index, facets=facets,
                          normalize=self.court.document_row)

    # ------------------------------------------------------------ download

    def pace_download(self) -> None:
        """The pause before a download (PACING_DL); raises StopRequested, before anything is sent, on a stop."""
        self._pace(self.cfg.PACING_DL)

    def document_url(self, row: Mapping[str, Any], path: str = "api") -> str:
        """The URL of a document (a `documents` row) by one of the court's download paths."""
        return self.url(self.court.download_paths[path], document_id=row["document_id"])

    def download_response(self, document_id: str, *, pace: bool = True, path: str = "api",
                          url: str | None = None) -> requests.Response:
        """One streamed GET of a document's PDF by one of the court's download paths (or at `url`, the
        court's `document_url`); no retries (the download stage owns attempts).

        Paced unless `pace=False` (a caller that records the attempt calls `pace_download()` first,
        so a stop during the pause records nothing). Connection errors and timeouts raise
        TransientFetchError; any status is returned as is (use classify_http_status). The caller
        closes the response.
        """
        if pace:
            self.pace_download()
        self.downloads_sent += 1
        url = url or self.url(self.court.download_paths[path], document_id=document_id)
        try:
            return self._get(url, self.court.download_headers(), stream=True)
        except _TRANSIENT_EXCEPTIONS as exc:
            raise TransientFetchError(f"{document_id}: {describe_failure(exc)}") from exc

