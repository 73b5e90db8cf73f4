"""The court's HTTP client: one polite requests.Session and the pure decisions about its answers.

Guarantees:
- One `requests.Session` carries the mandatory headers (`Accept:
  application/json`, `x-ctrack-excludeselflinks: true`) and a User-Agent
  naming the project. Proxy and CA-bundle variables (HTTPS_PROXY, NO_PROXY,
  REQUESTS_CA_BUNDLE, …) are honoured as requests honours them for API_BASE,
  read once when the client is made instead of on every request (the
  session then stops reading the environment: a redirect to another host
  gets API_BASE's proxy settings). The mandatory headers are also sent with every
  request, so a session handed in by a caller cannot drop them.
- Every endpoint path lives in `ENDPOINTS`; nothing else builds a URL. The
  paths of SITE_ROOT_ENDPOINTS (the second download path,
  `/documents/{id}/download`) are under the site root (scheme://host of
  API_BASE), the others under API_BASE.
- Pacing: before each request a random pause in PACING_SEARCH (searches) or
  PACING_DL (downloads), times PACING (0 turns it off), slept on the run
  clock, so a stop interrupts it and raises `StopRequested` before anything
  is sent.
- `search_documents()` pages by headers (1-based startindex) and returns a
  `SearchPage`: the court's rows, and the same as `documents` rows. A 400 raises
  `ResultsLimitExceeded` (the caller splits the shard); transient answers
  (5xx, 408, 429, resets, timeouts, a 200 that is not JSON) are retried with
  `retry_delay` (BACKOFF_BASE after the first failure, doubling up to
  BACKOFF_CAP), or the server's Retry-After
  when it asks for longer, up to SEARCH_ATTEMPTS tries, then
  `TransientFetchError`.
- The excludeselflinks trap never reads as "empty": an answer without
  `x-ctrack-paging-totalcount` (we always ask for it), or one announcing
  documents while returning none on the first page, raises
  `CourtTrapError`. (Discover adds the checks only a whole shard or sweep
  can make.)
- `download_response()` makes one streamed GET by one of DOWNLOAD_PATHS and
  never retries: the download stage owns attempts (persisted per document)
  and the choice of path.
- A circuit breaker (`CourtHealth`) watches every answer: once the court
  has given no usable answer (a search page, a 400 on a window, a PDF, a
  permanent 401/403/404) for COURT_DOWN_SECONDS and COURT_DOWN_FAILURES
  requests in a row failed (refused, reset, timed out, 5xx, 429, HTML), the
  next pacing pause or backoff raises `CourtUnreachable` before anything
  is sent: the run stops asking, saves state and exits 3 instead of
  spending its session in backoff. While the court has not given one usable
  answer since the run began (a wrong API_BASE, no network, the court
  down from the start), NEVER_ANSWERED_SECONDS (60 s, or less when
  COURT_DOWN_SECONDS is) replaces COURT_DOWN_SECONDS, our own backoff is
  capped so the COURT_DOWN_FAILURES tries fit in it, and a backoff the
  breaker would open during is cut to the moment it opens.
- Logging: a transport failure is one short phrase (`describe_failure`:
  `ConnectionError: Connection refused`, never the HTTPConnectionPool
  repr); retries are DEBUG; a backoff of BACKOFF_LOG_SECONDS or more is INFO
  for the first wait of each thing retried, or when the court's
  Retry-After asks for it, so a progress bar that stands still is
  explained without a line per retry.
- Lists (LIST_ENDPOINTS: a case's docket entries, parties, lower courts and
  an entry's file list) are asked with the paging headers and a maxresults
  of LIST_MAX_RESULTS, and followed while the court says `moreresults`;
  what makes a list doubtful (a later page that is not a list, "more" with
  no rows, "more" past the results limit, exactly SUSPICIOUS_LIST_SIZE rows
  that nothing says is whole) is counted in `list_warnings`, never raised.
- `observed_latency()` and `pace_figures()` say what the run asked of the
  court and what the downloads left cost at the current pacing
  (`projected_hours`).
- The case walk's endpoints (ctrack-api.md's confirmed table): `search_cases`
  and `search_opinions` page like `search_documents`; `get_json` fetches a
  case's docket entries, parties, lower courts or header, or the file list
  of a docket entry, with the same retries (a 404 raises
  `PermanentFetchError`; a 200 that is not JSON, or an empty body, is
  transient and retried, then `TransientFetchError`).
- A document id comes only from a `documentID` field, never from `id`: real
  search rows are docket entries whose `id` is the entry's id, 64 hex digits
  like a document's. The normalizers (`normalize_case_header`,
  `normalize_docket_entry`, `normalize_entry_file`, `normalize_party`,
  `normalize_lower_court`) are pure; a value of the wrong type or a missing
  key raises `ShapeProblem` naming the field, for the caller to count. A
  search row's `documentAvailable` becomes `document_available`
  (`availability_of`). A permanent status on a search raises
  `SearchRefused` (the search is not this court's).

Why a small loop and not urllib3's `Retry` on an `HTTPAdapter`: the stages
need outcomes urllib3 cannot classify. A 400 on search is not a failure but
"split this shard"; a 200 whose body is HTML or torn is only known after the
body is read, which `Retry` never sees; and download attempts must be counted
in the database, one per request, so a kill cannot hide one. The loop is a
dozen lines; it reuses urllib3's `Retry.parse_retry_after` for the header's
two forms (seconds or an HTTP-date).

Knobs read: API_BASE, PACING, PACING_SEARCH, PACING_DL, BACKOFF_BASE,
BACKOFF_CAP, SEARCH_ATTEMPTS, HTTP_TIMEOUT, COURT_DOWN_SECONDS, COURT_DOWN_FAILURES.
"""
from __future__ import annotations

import collections
import logging
import random
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import requests
from urllib3.util.retry import Retry

from .c00_config import (Config, CourtUnreachable, IntegrityError, PermanentFetchError, ResultsLimitExceeded,
                         RunClock, StopRequested, TransientFetchError, retry_delay)
from .c10_database import PERMANENT_HTTP_STATUSES

log_client = logging.getLogger("kycourt.client")

CLIENT_USER_AGENT = "kycourt-colab/0.1 (Kentucky appellate public record archive; polite, paced crawler)"
MANDATORY_HEADERS = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true"}

_SEARCH_FILTER = ("queryString=true&searchFields[0].searchType=Starts With"
                  "&searchFields[0].operation==&searchFields[0].values[0]={prefix}"
                  "&searchFields[0].indexFieldName={field}")

# Every path of the API, relative to CFG.API_BASE (ctrack-api.md).
ENDPOINTS = {
    "document_search": "/publicaccessdocuments/search?" + _SEARCH_FILTER.replace("{field}", "caseHeader.caseNumber"),
    "case_search": "/cases/search?" + _SEARCH_FILTER.replace("{field}", "caseNumber"),
    "entry_documents": "/publicaccessdocuments?filter=parentCategory=docketentries,parentID={docket_entry_id}",
    "download": "/publicaccessdocuments/{document_id}/download",
    "download_site": "/documents/{document_id}/download",     # at the site root, not under API_BASE
    "case": "/cases/{case_id}",
    "docket_entries": "/cases/{case_id}/docketentries",
    "parties": "/cases/{case_id}/parties",
    "lower_courts": "/cases/{case_id}/lowercourts",
    "opinion_search": ("/opinions/search?queryString=true"
                       "&searchFields[0].operation=>=&searchFields[0].values[0]={first_day}"
                       "&searchFields[0].indexFieldName=filedDate"
                       "&searchFields[1].operation=<=&searchFields[1].values[0]={last_day}"
                       "&searchFields[1].indexFieldName=filedDate"
                       "&searchFilters[0].operation==&searchFilters[0].indexFieldName=caseHeader.court"
                       "&searchFilters[0].values[0]={court}"),
}
# Endpoints under the site root (scheme://host of API_BASE) rather than under API_BASE.
SITE_ROOT_ENDPOINTS = frozenset({"download_site"})
# The two download paths in production use (ctrack-api.md), by the name the pipeline keeps.
DOWNLOAD_PATHS = {"api": "download", "site": "download_site"}
# The court's lists (JSON arrays) asked with paging headers, whether or not the court pages them.
LIST_ENDPOINTS = frozenset({"docket_entries", "parties", "lower_courts", "entry_documents"})
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
COURT_NAMES = {"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"}

PAGING_TOTAL = "x-ctrack-paging-totalcount"
PAGING_RESULTS = "x-ctrack-paging-resultcount"
PAGING_MORE = "x-ctrack-paging-moreresults"
PAGING_LIMIT = "x-ctrack-paging-resultslimit"

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


class ShapeProblem(ValueError):
    """A court answer lacks a field, or holds a value of the wrong type: `field` names it."""

    def __init__(self, field: str, detail: str = "missing"):
        super().__init__(f"{field}: {detail}")
        self.field = field


@dataclass
class SearchPage:
    """One page of a document search, as the paging headers describe it.

    `raw_items` are the court's resultItems as sent; `items` the same as `documents` rows
    (normalize_document_row), made on first use: Discover normalizes only the rows it must
    write, which in every sweep after the first is almost none.
    """
    raw_items: list[dict]
    total_count: int
    result_count: int
    more: bool
    results_limit: int | None
    start_index: int = 1
    facets: list = field(default_factory=list)     # the body's `facets`, as sent (opinion search)
    _items: list[dict] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def items(self) -> list[dict]:
        if self._items is None:
            self._items = [row for row in map(normalize_document_row, self.raw_items) if row is not None]
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


# A `documents` column -> the key of a search resultItem's rowMap it is taken from, as is.
DOCUMENT_ROW_FIELDS = {
    "case_number": "caseHeader.caseNumber",
    "court": "caseHeader.court",
    "case_title": "caseHeader.shortTitle",
    "docket_entry_id": "docketEntryID",
    "description": "docketEntryDescription",
    "filed_date": "filedDate",
    "case_id": "caseHeader.caseID",
    "document_name": "documentName",
}


def document_id_of(item: Mapping[str, Any]) -> str | None:
    """The normalized (stripped, lower-case) document id of a search resultItem, or None.

    Only from `rowMap.documentID`: a real row's `id` may be its docket entry's id (64 hex digits
    too), and a document stored under it would be downloaded as a 404 ("withdrawn")."""
    row_map = item.get("rowMap") if isinstance(item, Mapping) else None
    document_id = row_map.get("documentID") if isinstance(row_map, Mapping) else None
    if not isinstance(document_id, str) or not document_id.strip():
        return None
    return document_id.strip().lower()


def normalize_document_row(item: Mapping[str, Any]) -> dict | None:
    """A search resultItem → a `documents` row; None when it names no document id."""
    document_id = document_id_of(item)
    if document_id is None:
        return None
    get = (item.get("rowMap") or {}).get
    row = {"document_id": document_id, **{column: get(key) for column, key in DOCUMENT_ROW_FIELDS.items()},
           "document_available": availability_of(get("documentAvailable"))}
    # Real rows carry neither court nor one-line title, and `+0000` offsets: made what the table holds.
    if row["court"] is None:
        row["court"] = court_of_case_number(row["case_number"])
    if isinstance(row["case_title"], str) and "\n" in row["case_title"]:
        row["case_title"] = one_line(row["case_title"])
    if isinstance(row["filed_date"], str) and _UTC_OFFSET.search(row["filed_date"]):
        row["filed_date"] = court_date(row["filed_date"])
    return row


def availability_of(value: Any) -> int | None:
    """documentAvailable as the table keeps it: 1, 0, or None when the court did not say (or said
    something that is no boolean)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return int(value.strip().lower() == "true")
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


_RELATED_NUMBERS = re.compile(r"\b(\d{4})-(CA|SC)-(\d{4})((?:\s*,\s*(?:&\s*)?\d{4}(?![\d-]))*)")
_UTC_OFFSET = re.compile(r"([+-])(\d\d)(\d\d)$")


def related_case_numbers(description: Any) -> str | None:
    """The case numbers a description names, expanded (`2022-CA-1454, 1456` -> two), comma-joined."""
    if not isinstance(description, str):
        return None
    numbers: list[str] = []
    for match in _RELATED_NUMBERS.finditer(description):
        year, court, first, rest = match.groups()
        for sequence in [first, *re.findall(r"\d{4}(?![\d-])", rest)]:
            number = f"{year}-{court}-{sequence}"
            if number not in numbers:
                numbers.append(number)
    return ", ".join(numbers) or None


def court_date(value: Any, field_name: str = "filedDate") -> str | None:
    """A court timestamp as ISO 8601 with a colon in the offset (`+0000` -> `+00:00`, which Python
    3.10's fromisoformat reads); None stays None; anything but text is a ShapeProblem."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ShapeProblem(field_name, f"not a date string: {value!r}"[:80])
    return _UTC_OFFSET.sub(r"\1\2:\3", value.strip())


def one_line(title: Any) -> str | None:
    """A title on one line: the court puts `\r\n` between the parties."""
    return " ".join(title.split()) if isinstance(title, str) and title.strip() else None


def court_of_case_number(case_number: Any) -> str | None:
    """The court a case number names: `2019-CA-0012` and `2024 CA ADMIN - ...` alike."""
    if not isinstance(case_number, str) or len(case_number) < 7:
        return None
    return COURT_NAMES.get(case_number[5:7].upper())


def _text(raw: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise ShapeProblem(key)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ShapeProblem(key, f"not text: {type(value).__name__}")
    text = str(value).strip()
    if required and not text:
        raise ShapeProblem(key, "empty")
    return text or None


def _flag_value(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return int(value.strip().lower() == "true")
    raise ShapeProblem(key, f"not a boolean: {value!r}"[:80])


def _mapping(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ShapeProblem(what, f"not an object: {type(raw).__name__}")
    return raw


def normalize_case_header(raw: Any, *, case_id: str | None = None) -> dict:
    """A case header (`/cases/{id}`, a file's `caseHeader`, or a case-search rowMap) -> a `cases` row."""
    raw = _mapping(raw, "caseHeader")
    case_number = _text(raw, "caseNumber", required=True)
    found_id = _text(raw, "caseID") or case_id
    if not found_id:
        raise ShapeProblem("caseID")
    return {"case_id": found_id.lower(), "case_number": case_number,
            "court": _text(raw, "court") or court_of_case_number(case_number),
            "court_level": _text(raw, "courtLevel"), "title": one_line(raw.get("shortTitle")),
            "case_type": _text(raw, "caseType"), "classification": _text(raw, "caseClassification"),
            "status": _text(raw, "caseStatus"), "status_date": court_date(raw.get("caseStatusDate"), "caseStatusDate"),
            "filed_date": court_date(raw.get("filedDate")), "closed": _flag_value(raw, "closed"),
            "category": _text(raw, "caseCategory"),
            "related_case_numbers": None}


def normalize_case_search_row(item: Any) -> dict:
    """A case-search resultItem -> a partial `cases` row (its id is the case's: rowMap.caseID, or id)."""
    item = _mapping(item, "resultItems[]")
    row_map = _mapping(item.get("rowMap"), "rowMap")
    return normalize_case_header(row_map, case_id=_text(item, "id"))


def normalize_docket_entry(raw: Any, case_id: str) -> dict:
    """An element of `/cases/{id}/docketentries` (or an opinion-search rowMap) -> a `docket_entries` row."""
    raw = _mapping(raw, "docketentries[]")
    description = _text(raw, "docketEntryDescription")
    has_documents = _flag_value(raw, "hasDocuments")
    return {"docket_entry_id": _text(raw, "docketEntryID", required=True).lower(), "case_id": case_id,
            "entry_type": _text(raw, "docketEntryType"), "subtype": _text(raw, "docketEntrySubtype"),
            "description": description, "filed_date": court_date(raw.get("filedDate")),
            "has_documents": 1 if has_documents is None else has_documents,
            "related_case_numbers": related_case_numbers(description)}


def normalize_entry_file(raw: Any, entry: Mapping[str, Any], case: Mapping[str, Any] | None) -> dict:
    """A file of a docket entry -> a `documents` row (with the detail columns and `court_pages`).

    The id is the file's `documentID` (required); case fields come from its nested caseHeader,
    else from the case row the walk holds."""
    raw = _mapping(raw, "publicaccessdocuments[]")
    document_id = _text(raw, "documentID", required=True).lower()
    header = raw.get("caseHeader")
    case_fields = normalize_case_header(header) if isinstance(header, Mapping) else dict(case or {})
    available = _flag_value(raw, "documentAvailable")
    pages = raw.get("documentText")
    if pages is not None and not (isinstance(pages, list) and all(isinstance(p, str) for p in pages)):
        raise ShapeProblem("documentText", "not a list of page strings")
    case_number = case_fields.get("case_number")
    return {"document_id": document_id, "case_number": case_number,
            "court": case_fields.get("court") or court_of_case_number(case_number),
            "case_title": case_fields.get("title"),
            "docket_entry_id": (_text(raw, "parentID") or entry["docket_entry_id"]).lower(),
            "description": entry.get("description"),
            "filed_date": court_date(raw.get("parentDate"), "parentDate") or entry.get("filed_date"),
            "case_id": case_fields.get("case_id"), "document_name": _text(raw, "documentName"),
            "entry_type": _text(raw, "parentType") or entry.get("entry_type"),
            "entry_subtype": _text(raw, "parentSubtype") or entry.get("subtype"),
            "dms_document_id": _text(raw, "dmsDocumentID"), "mime_type": _text(raw, "mimeType"),
            "document_description": _text(raw, "documentDescription"),
            "document_available": 1 if available is None else available,
            "related_case_numbers": entry.get("related_case_numbers"),
            "court_pages": pages}


def _address(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    locality = ", ".join(str(raw[key]) for key in ("city", "state") if raw.get(key))
    if raw.get("postalCode"):
        locality = f"{locality} {raw['postalCode']}".strip()
    parts = [str(raw[key]).strip() for key in ("line1", "line2", "line3", "line4") if raw.get(key)]
    return ", ".join(part for part in [*parts, locality] if part) or None


def normalize_party(raw: Any, case_id: str, position: int) -> dict:
    """An element of `/cases/{id}/parties` -> a `parties` row (attorneys as a JSON list)."""
    raw = _mapping(raw, "parties[]")
    name = raw.get("partyName") if isinstance(raw.get("partyName"), Mapping) else {}
    attorneys = []
    for attorney in raw.get("attorneys") or []:
        if not isinstance(attorney, Mapping):
            raise ShapeProblem("attorneys[]", "not an object")
        attorney_name = attorney.get("attorneyName") if isinstance(attorney.get("attorneyName"), Mapping) else {}
        attorneys.append({"name": attorney_name.get("displayName"), "role": attorney_name.get("role"),
                          "address": _address(attorney.get("address")), "bar_number": attorney.get("barNumber")})
    return {"case_id": case_id, "position": position, "name": name.get("displayName"),
            "role": name.get("role"), "status": _text(raw, "partyStatus"),
            "pro_se": _flag_value(raw, "proSe"), "address": _address(raw.get("address")),
            "attorneys": attorneys}


def normalize_lower_court(raw: Any, case_id: str, position: int) -> dict:
    raw = _mapping(raw, "lowercourts[]")
    return {"case_id": case_id, "position": position, "name": _text(raw, "lowerCourtName"),
            "case_number": _text(raw, "lowerCourtCaseNumber"), "case_title": one_line(raw.get("lowerCourtCaseTitle"))}


def _client_int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return None if value is None else int(str(value).strip())
    except ValueError:
        return None


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
                 *, rng: random.Random | None = None):
        self.cfg = cfg
        self.clock = clock
        self.base = cfg.API_BASE.rstrip("/")
        self.session = session if session is not None else requests.Session()
        self.session.headers.update(MANDATORY_HEADERS)
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
        split = urllib.parse.urlsplit(self.base)
        self.site_root = f"{split.scheme}://{split.netloc}"
        self.results_limit: int | None = None   # as the court last announced it
        self.requests_sent = 0
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
        root = self.site_root if endpoint in SITE_ROOT_ENDPOINTS else self.base
        return root + ENDPOINTS[endpoint].format(**values)

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
        self.requests_sent += 1
        started = time.monotonic()
        response = self.session.get(url, headers={**MANDATORY_HEADERS, **headers},
                                    timeout=(self.cfg.HTTP_TIMEOUT, self.cfg.HTTP_TIMEOUT), **kwargs)
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
        return self._search(url, f"opinions {court[9:]} {first_day}-{last_day}", start_index, max_results)

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
            body, headers = self._json_answer(url, {"x-ctrack-paging-startindex": str(start),
                                                    "x-ctrack-paging-maxresults": str(LIST_MAX_RESULTS),
                                                    "x-ctrack-paging-calculatetotalcount": "true"}, label)
            if not isinstance(body, list):
                if start == 1:
                    return body
                return self._list_warning(rows, f"{label}: a later page is not a list")
            rows += body
            if str(headers.get(PAGING_MORE, "")).strip().lower() != "true":
                break
            if not body:
                return self._list_warning(rows, f"{label}: moreresults with no rows")
            start += len(body)
            limit = _client_int_header(headers, PAGING_LIMIT) or self.results_limit or LIST_RESULTS_LIMIT
            if start > limit:
                return self._list_warning(rows, f"{label}: moreresults still true past the results limit {limit}")
        if len(rows) == SUSPICIOUS_LIST_SIZE and _client_int_header(headers, PAGING_TOTAL) is None:
            self._list_warning(rows, f"{label}: exactly {SUSPICIOUS_LIST_SIZE} rows and nothing says the list is whole")
        return rows

    def _list_warning(self, rows: list, what: str) -> list:
        kind = what.split(": ", 1)[1]
        self.list_warnings[kind] += 1
        log_client.debug("%s", what)
        return rows

    def _json_answer(self, url: str, headers: Mapping[str, str], label: str) -> tuple[Any, Mapping[str, str]]:
        """(body, response headers) of one JSON GET, with get_json's retries."""
        failures = 0
        while True:
            self._pace(self.cfg.PACING_SEARCH)
            try:
                response = self._get(url, headers)
                code = response.status_code
                if code == 200:
                    try:
                        body = response.json()
                    except ValueError as exc:
                        outcome = TransientFetchError(f"{label}: 200 whose body is not JSON "
                                                      f"({response.headers.get('Content-Type')}): {exc}",
                                                      http_status=200)
                    else:
                        self.health.usable()
                        return body, response.headers
                elif classify_http_status(code) == "permanent":
                    self.health.usable()   # the court answered: it is there, this resource is not
                    raise PermanentFetchError(f"{label}: HTTP {code}", http_status=code)
                else:
                    outcome = TransientFetchError(f"HTTP {code}", http_status=code,
                                                  retry_after=retry_after_seconds(response))
            except _TRANSIENT_EXCEPTIONS as exc:
                outcome = TransientFetchError(f"{label}: {describe_failure(exc)}")
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
            headers = {"x-ctrack-paging-startindex": str(start_index),
                       "x-ctrack-paging-maxresults": str(size),
                       "x-ctrack-paging-calculatetotalcount": "true"}
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
        limit = _client_int_header(response.headers, PAGING_LIMIT)
        if limit is not None and limit > 0:
            self.results_limit = limit
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
        total = _client_int_header(response.headers, PAGING_TOTAL)
        if total is None:
            raise CourtTrapError(
                f"{prefix}: court answered without paging headers ({PAGING_TOTAL} missing): "
                "the x-ctrack-excludeselflinks trap? Refusing to conclude the shard is empty")
        result_count = _client_int_header(response.headers, PAGING_RESULTS)
        result_count = len(items) if result_count is None else result_count
        if start_index == 1 and total > 0 and not items:
            raise CourtTrapError(f"{prefix}: court announced {total} results but returned no rows: "
                                 "the x-ctrack-excludeselflinks trap?")
        more_header = response.headers.get(PAGING_MORE)
        more = (str(more_header).strip().lower() == "true" if more_header is not None
                else start_index - 1 + result_count < total)
        facets = body.get("facets") if isinstance(body.get("facets"), list) else []
        return SearchPage(raw_items=items, total_count=total, result_count=result_count, more=more,
                          results_limit=self.results_limit, start_index=start_index, facets=facets)

    # ------------------------------------------------------------ download

    def pace_download(self) -> None:
        """The pause before a download (PACING_DL); raises StopRequested, before anything is sent, on a stop."""
        self._pace(self.cfg.PACING_DL)

    def download_response(self, document_id: str, *, pace: bool = True, path: str = "api") -> requests.Response:
        """One streamed GET of a document's PDF by one of DOWNLOAD_PATHS; no retries (the download
        stage owns attempts).

        Paced unless `pace=False` (a caller that records the attempt calls `pace_download()` first,
        so a stop during the pause records nothing). Connection errors and timeouts raise
        TransientFetchError; any status is returned as is (use classify_http_status). The caller
        closes the response.
        """
        if pace:
            self.pace_download()
        try:
            return self._get(self.url(DOWNLOAD_PATHS[path], document_id=document_id), {}, stream=True)
        except _TRANSIENT_EXCEPTIONS as exc:
            raise TransientFetchError(f"{document_id}: {describe_failure(exc)}") from exc

