"""The simulated C-Track court: the API of ctrack-api.md over loopback, misbehaviours included.

Guarantees:
- `SimCourt(...).start()` serves the endpoints under `http://127.0.0.1:<port>` + `api_path`
  (`/api/api/v1`, Kentucky's) with HTTP/1.1 keep-alive and TCP_NODELAY (MEASURED.md), nothing
  logged per request; court names are `court_names` (Kentucky's by default).
- Searches match a prefix of the zero-padded case number (case-insensitive). Without
  `x-ctrack-excludeselflinks: true` a search answers an empty 200 (the trap). Paging: 1-based
  startindex, at most `max_page` rows a page, a window past `results_limit` is 400, the total only
  when asked for. `unstable`: a seeded relevance order perturbed every EPOCH_REQUESTS searches.
  Late documents stay hidden (search, lists, download) until their number of searches was answered.
- `shape` "inferred" or "captured" (shapes.py); `document_search` "present", "absent" (404) or
  "entries" (docket entries, the mis-keying trap); `case_walk` "present", "absent" or
  "search-only"; `renamed_fields` renames keys in every JSON answer (shape drift). The JSON
  endpoints answer 406 without Accept: application/json and, at `search_fault_rate`, 503, 429, a
  reset or a torn body. Downloads misbehave as downloads.py says.
- The real court's behaviours, each behind its switch: `unavailable_files` (an entry in ~20 lists a
  withheld file) and `release_withheld`; `paged_lists`; `empty_file_lists`; `null_texts`;
  `late_opinions`; `neighbours` ("Starts With" answers neighbouring numbers); `download_paths`
  ("api", "site", "both"); `midnight_instants`. `prose` "plain" or "record" (pdfs.py: the PDFs'
  and the court's texts as long as the record's).
- `GET /__sim__/stats` (outside the API root): requests per endpoint, faults served, early
  requests, the court's day and each counting period's requests; `sim` prints the totals on exit.
- The court lives (living.py): `advance(days, seed, activity)` or `POST
  /__sim__/advance?days=30&seed=0[&<activity kind>=N]` moves its day on and answers the plan of
  what changed (`GET /__sim__/plans`: every plan); an advance begins a new counting period, as
  `new_period()` / `POST /__sim__/period` do. An advance is refused (RuntimeError, 409) while
  another request is answered and holds the court's lock, so no request sees half of it; then the
  court serves what the plan says (new cases and entries, retitlings, withdrawn documents listed
  unavailable or gone, their download 404, restored ones served again).
"""
from __future__ import annotations

import bisect
import collections
from array import array
import datetime as _dt
import json
import math
import random
import threading
import time
from collections import Counter, OrderedDict
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from ..loopback import LoopbackServer, LoopbackService
from . import living, pdfs
from .corpus import FAULTS, NEVER, PERMANENT_STATUS, DocumentList, SimDocument, hex_id
from .downloads import DEFAULT_OVERSIZE, DownloadAnswers
from .controls import ADVANCE_PATH, PERIOD_PATH, PLANS_PATH, STATS_PATH, SimControls  # noqa: F401 (importable from here too)
from .retry_after import RetryAfterClock
from .shapes import Corpus

API_PATH = "/api/api/v1"
EPOCH_REQUESTS = 2          # search requests per perturbation epoch
PDF_CACHE_SIZE = 256
OPINION_MAX_PAGE = 25       # rows a page of the opinion search (captures: about 25)
SHAPES = ("inferred", "captured")
DOCUMENT_SEARCH_MODES = ("present", "absent", "entries")
# absent: every /cases/... path answers 404; search-only: the case search answers, a case's resources 404
CASE_WALK_MODES = ("present", "absent", "search-only")
DOWNLOAD_PATH_MODES = ("api", "both", "site")    # which download paths serve PDFs (the other: 404)
LIST_DEFAULT_PAGE = 20      # rows of a paged list (or a search) asked without paging headers


class SimCourt(RetryAfterClock, SimControls, LoopbackService):
    """A simulated court on a free loopback port; see the module docstring."""

    server_attribute = "court"
    thread_name = "simcourt"

    def __init__(self, docs: int = 300, seed: int = 1, *, results_limit: int = 10000,
                 max_page: int = 1000, faults: bool = True, late_docs: int = 0,
                 unstable: bool = True, first_year: int = 1990, last_year: int = 2026,
                 search_fault_rate: float = 0.0, oversize_bytes: int | None = None,
                 stall_seconds: float = 1.0, enforce_retry_after: bool = True,
                 shape: str = "inferred", document_search: str = "present",
                 admin_share: float | None = None, renamed_fields: dict[str, str] | None = None,
                 case_walk: str = "present", unavailable_files: bool = True, release_withheld: bool = False,
                 paged_lists: int = 0, empty_file_lists: bool = False, null_texts: bool = False,
                 late_opinions: int = 0, neighbours: bool = False, download_paths: str = "api",
                 midnight_instants: bool = False, real_counts: bool = False, record_requests: bool = False,
                 today: _dt.date | None = None, api_path: str = API_PATH, court_names: dict[str, str] | None = None,
                 prose: str = "plain"):
        if results_limit < 1 or max_page < 1 or not 0 <= search_fault_rate <= 1 or paged_lists < 0:
            raise ValueError("results_limit and max_page must be >= 1, search_fault_rate in [0, 1], "
                             "paged_lists >= 0")
        if shape not in SHAPES or document_search not in DOCUMENT_SEARCH_MODES:
            raise ValueError(f"shape must be one of {SHAPES}, document_search one of {DOCUMENT_SEARCH_MODES}")
        if case_walk not in CASE_WALK_MODES or download_paths not in DOWNLOAD_PATH_MODES:
            raise ValueError(f"case_walk must be one of {CASE_WALK_MODES}, download_paths one of {DOWNLOAD_PATH_MODES}")
        self.shape, self.document_search = shape, document_search
        self.case_walk, self.download_paths = case_walk, download_paths
        self.unavailable_files, self.release_withheld = unavailable_files, release_withheld
        self.paged_lists, self.empty_file_lists, self.null_texts = paged_lists, empty_file_lists, null_texts
        self.neighbours = neighbours
        self._entry_asks: Counter = Counter()     # docket entry id -> file lists served
        self._walked_cases: set[int] = set()      # cases whose docket entries were served
        self.renamed_fields = dict(renamed_fields or {})
        if admin_share is None:
            admin_share = 0.03 if shape == "captured" else 0.0
        self.endpoint_requests: Counter = Counter()
        self.seed = seed
        self.results_limit, self.max_page = results_limit, max_page
        self.unstable, self.search_fault_rate = unstable, search_fault_rate
        self.oversize_bytes = DEFAULT_OVERSIZE if oversize_bytes is None else oversize_bytes
        self.stall_seconds = stall_seconds
        self.enforce_retry_after = enforce_retry_after   # off for tests whose clock does not really sleep
        self.corpus = Corpus(docs, seed, faults=faults, late_docs=late_docs,
                             first_year=first_year, last_year=last_year, admin_share=admin_share,
                             late_opinions=late_opinions, midnight_instants=midnight_instants,
                             real_counts=real_counts, today=today, court_names=court_names)
        if prose not in pdfs.PROSE:
            raise ValueError(f"prose must be one of {pdfs.PROSE}")
        self.corpus.prose = prose
        self.api_path = "/" + api_path.strip("/")
        # record_requests: every request in order, as (endpoint, item): the bench's account of a crawl.
        self.request_log: RequestLog | None = RequestLog() if record_requests else None
        self.documents = DocumentList(self.corpus)
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)   # notified as each request's answer ends
        self.advance_wait_s = 5.0        # how long an advance waits for the requests being answered
        self._requests: dict[int, int] = {}
        self._body_bytes: dict[int, int] = {}
        self.download_requests = 0
        self.search_requests = 0
        self.entry_requests = 0          # a docket entry's document lists
        self.early_requests = 0          # requests that came back before their Retry-After
        self.faults_served = collections.Counter()   # misbehaviours answered, by kind
        self.in_flight = 0               # requests being answered right now
        self._retry_at: dict[object, float] = {}   # document index or "search" -> earliest retry
        self._retry_after_forms = 0
        self._orders: OrderedDict = OrderedDict()
        self._pdf_cache: OrderedDict = OrderedDict()
        self._reveal_at: dict[int, int] = {}
        self._plan_reveals()
        self.base_url: str | None = None
        self.plans: list[dict] = []      # what each advance changed (living.py), in order
        self.periods: list[dict] = []    # request counts per period (a run's, between advances)
        self._open_period("start")

    # --------------------------------------------------------- public API

    def handler(self) -> type:
        return _Handler

    def url_for(self, host: str, port: int) -> str:
        self.base_url = f"http://{host}:{port}{self.api_path}"
        return self.base_url

    def document(self, document_id: str) -> SimDocument:
        doc = self.corpus.find_document(document_id)
        if doc is None:
            raise KeyError(document_id)
        return self.corpus.document(doc)

    def stats(self) -> dict:
        """What the court has served (`/__sim__/stats`, and `sim`'s totals on exit): the totals, requests
        per endpoint, the court's day, and the requests of each period (`period`: the current one)."""
        with self._lock:
            periods = [self._period_figures(period) for period in self.periods]
            return {"requests": {"search": self.search_requests, "download": self.download_requests,
                                 "entry_documents": self.entry_requests},
                    "faults_served": sum(self.faults_served.values()),
                    "faults_by_kind": dict(sorted(self.faults_served.items())),
                    "early_requests": self.early_requests, "in_flight": self.in_flight,
                    "endpoints": dict(sorted(self.endpoint_requests.items())),
                    "today": _dt.date.fromordinal(self.corpus.today).isoformat(), "advances": len(self.plans),
                    "period": periods[-1], "periods": periods}

    def advance(self, days: int = 30, seed: int = 0, activity: dict[str, int] | None = None) -> dict:
        """Moves the court's day on by `days` with a span of the court's activity (living.py: new cases
        and filings, opinions, a reopened case, withdrawals, a restoration, retitled cases, changed
        descriptions), deterministically from `seed`; a new request-counting period begins. Returns the
        plan of what changed (`POST /__sim__/advance` answers it). Waits for the requests being answered
        to end, and is refused (RuntimeError) if they have not within `advance_wait_s`: the court changes between
        requests, never under one."""
        return self._advance(days, seed, activity, requests_allowed=0)

    def _advance(self, days: int, seed: int, activity: dict[str, int] | None, requests_allowed: int) -> dict:
        with self._lock:
            # A client reads its answer a moment before the answering thread counts it done.
            if not self._quiet.wait_for(lambda: self.in_flight <= requests_allowed, self.advance_wait_s):
                raise RuntimeError(f"{self.in_flight - requests_allowed} requests in flight: advance between requests")
            listed = {entry for entry in set(self.corpus.doc_entry)
                      if self.unavailable_files and self.corpus.has_withheld_file(entry)}
            plan = living.advance(self.corpus, days, seed, activity, listed_withheld=listed,
                                  restorable={entry for entry in listed if not self._released(entry)})
            self._orders.clear()
            self.plans.append(plan)
            self._open_period(f"advance {plan['advance']}")
        return plan

    def _count_endpoint(self, endpoint: str) -> None:
        with self._lock:
            self.endpoint_requests[endpoint] += 1
            self.periods[-1]["endpoints"][endpoint] += 1

    def _fault(self, kind: str) -> None:
        with self._lock:
            self.faults_served[kind] += 1

    def requests_for(self, document_id: str) -> int:
        return self._requests.get(self._index(document_id), 0)

    def body_bytes_sent(self, document_id: str) -> int:
        return self._body_bytes.get(self._index(document_id), 0)

    def pdf_bytes(self, document_id: str) -> bytes | None:
        return self._pdf(self._index(document_id))

    def reveal_after(self, document_id: str) -> int:
        """Search requests the court answers before a late document shows (0 if not late)."""
        return self._reveal_at.get(self._index(document_id), 0)

    def hold_late_documents(self, held: bool = True) -> None:
        """Late documents stay hidden whatever the court answers (held), or are filed at once (not held):
        a test's control over what the court files while a crawl runs."""
        for doc in self.corpus.late:
            self._reveal_at[doc] = NEVER if held else 0

    def documents_with(self, fault: str) -> list[SimDocument]:
        """Every document planned with `fault` (a name from FAULTS)."""
        code = FAULTS.index(fault)
        return [self.corpus.document(doc) for doc, planned in enumerate(self.corpus.doc_fault)
                if planned == code]

    def withheld_files(self) -> dict[str, bool]:
        """document id -> released, of the files listed with documentAvailable false (unavailable_files):
        a released one is served (available, its PDF downloadable) from its entry's second listing on
        (release_withheld)."""
        if not self.unavailable_files:
            return {}
        corpus = self.corpus
        return {hex_id(self.seed, "unavailable", entry): self._released(entry) or entry in corpus.restored_withheld
                for entry in sorted(set(corpus.doc_entry)) if corpus.has_withheld_file(entry)}

    def _released(self, entry: int) -> bool:
        return self.release_withheld and int(hex_id(self.seed, "entry", entry)[56:58], 16) % 2 == 0

    def null_text(self, document_id: str) -> bool:
        """A file whose documentText is null (null_texts): 1 in 4."""
        return self.null_texts and int(document_id[50:52], 16) % 4 == 0

    def empty_once(self, entry: int) -> bool:
        """A planned entry whose first file listing is `[]` although it has documents (empty_file_lists);
        never one an advance filed (its plan is what the court serves)."""
        return (self.empty_file_lists and entry < self.corpus.planned_size
                and int(hex_id(self.seed, "entry", entry)[58:60], 16) % 6 == 0)

    def phantom_entries(self, case: int) -> list[dict]:
        """Docket entries that say hasDocuments and always list no file (empty_file_lists): 1 planned case
        in 5 (none an advance opened)."""
        if (not self.empty_file_lists or case >= self.corpus.planned_cases
                or int(hex_id(self.seed, "case", case)[52:54], 16) % 5):
            return []
        entry = self.corpus.bare_entries(case)[:1] or [{
            "filedDate": self.corpus.utc_stamp(self.corpus.case_filed[case], case), "submittedBy": None,
            "customFields": {}, "opinion": False}]
        return [{**entry[0], "docketEntryID": hex_id(self.seed, "phantom-entry", case), "docketEntryType": "NOTICE",
                 "docketEntrySubtype": "EXHIBITS FILED", "docketEntryDescription": "EXHIBITS FILED",
                 "hasDocuments": True}]

    def estimated_sweep_requests(self) -> int:
        """Search requests one full discovery sweep makes, splitting over-limit shards."""
        total = 0
        for year in range(self.corpus.first_year, self.corpus.last_year + 1):
            for court in self.corpus.court_names:
                total += self._requests_for_prefix(f"{year}-{court}-")
                if self.corpus.admin_share:
                    total += self._requests_for_prefix(f"{year} {court} ADMIN")
        return total

    # ------------------------------------------------------------ resuming

    def progress(self) -> dict:
        """What this court's next answers depend on, as JSON: per document the downloads asked
        (a transient fault fails the first few), the searches, entry listings and case walks
        served (late documents show after so many). `resume(progress)` on a court of the same
        docs and seed carries on from there, so a demo interrupted and run again ends as one
        that was never interrupted."""
        with self._lock:
            return {"downloads": {str(doc): count for doc, count in self._requests.items()},
                    "search_requests": self.search_requests, "download_requests": self.download_requests,
                    "entry_requests": self.entry_requests, "entry_asks": dict(self._entry_asks),
                    "walked_cases": sorted(self._walked_cases)}

    def resume(self, progress: dict) -> None:
        """Carries on from `progress()` of an earlier court of the same docs and seed."""
        with self._lock:
            self._requests.update({int(doc): int(count) for doc, count in progress.get("downloads", {}).items()})
            for counter in ("search_requests", "download_requests", "entry_requests"):
                setattr(self, counter, int(progress.get(counter, 0)))
            self._entry_asks.update({str(entry): int(count) for entry, count in progress.get("entry_asks", {}).items()})
            self._walked_cases.update(int(case) for case in progress.get("walked_cases", ()))

    # ---------------------------------------------------------- internals

    def _index(self, document_id: str) -> int:
        doc = self.corpus.find_document(document_id)
        if doc is None:
            raise KeyError(document_id)
        return doc

    def _requests_for_prefix(self, prefix: str) -> int:
        count = len(self.corpus.prefix_docs(prefix))
        if count > self.results_limit and len(prefix) < 12:
            return 1 + sum(self._requests_for_prefix(prefix + digit) for digit in "0123456789")
        return max(1, math.ceil(min(count, self.results_limit) / self.max_page))

    def withheld_pdf(self, entry: int) -> bytes:
        """The PDF of a released withheld file: an opinion of its own (not its entry's document's)."""
        fields = self.corpus.opinion_fields(entry)
        return pdfs.opinion_pdf(**{**fields, "seed": f"{fields['seed']}:withheld",
                                   "description": fields["description"] + " (SEALED ATTACHMENT)"},
                                creation_date="D:20240101000000-05'00'")

    def _plan_reveals(self) -> None:
        late = sorted(self.corpus.late)
        if not late:
            return
        horizon = max(1, (2 * self.estimated_sweep_requests()) // 3)
        rng = random.Random(f"{self.seed}:reveal")
        rng.shuffle(late)
        for rank, doc in enumerate(late):
            self._reveal_at[doc] = 1 + (rank * horizon) // len(late)
        for doc in self.corpus.late_opinions:
            # After one full sweep of searches, or once the walk read the case (see _visible).
            self._reveal_at[doc] = self.estimated_sweep_requests() + 1

    def _visible(self, doc: int, search_count: int | None = None) -> bool:
        reveal = self._reveal_at.get(doc)
        if reveal is None:
            return True
        if doc in self.corpus.late_opinions and self.corpus.doc_case[doc] in self._walked_cases:
            return True
        return (self.search_requests if search_count is None else search_count) >= reveal

    def _revealed(self, search_count: int) -> int:
        return sum(1 for doc, reveal in self._reveal_at.items() if reveal <= search_count
                   or (doc in self.corpus.late_opinions and self.corpus.doc_case[doc] in self._walked_cases))

    def _pdf(self, doc: int) -> bytes | None:
        source = self.corpus.duplicate_of.get(doc, doc)
        fault = self.corpus.fault(source)
        if fault in PERMANENT_STATUS or fault in ("always_503", "oversized", "lying_length"):
            return None
        with self._lock:
            cached = self._pdf_cache.get(source)
            if cached is not None:
                self._pdf_cache.move_to_end(source)
                return cached
        corpus = self.corpus
        filed = corpus.doc_filed[source]
        stamp = corpus.iso_date(filed)
        creation = stamp[:10].replace("-", "") + "000000" + stamp[-6:-3] + "'" + stamp[-2:] + "'"
        if fault == "image_only":
            data = pdfs.image_only_pdf(seed=f"{self.seed}:{source}", creation_date=creation)
        elif fault == "no_text":
            data = pdfs.blank_pdf(seed=f"{self.seed}:{source}", creation_date=creation)
        elif fault == "unparseable":
            data = pdfs.unparseable_pdf(seed=f"{self.seed}:{source}")
        else:
            data = pdfs.opinion_pdf(**corpus.opinion_fields(source), creation_date=creation)
        with self._lock:
            self._pdf_cache[source] = data
            while len(self._pdf_cache) > PDF_CACHE_SIZE:
                self._pdf_cache.popitem(last=False)
        return data

    def _ordered(self, kind: str, prefix: str, search_count: int) -> list[int]:
        """Items (documents or cases) matching `prefix`, in this request's relevance order."""
        corpus = self.corpus
        if kind in ("documents", "entries"):
            lo, hi = corpus.planned_doc_span(prefix)        # names the order's perturbations (below)
            matching = corpus.prefix_docs(prefix)
        else:
            lo, hi = corpus.planned_case_span(prefix)
            matching = corpus.prefix_cases(prefix)
        revealed = self._revealed(search_count) if kind in ("documents", "entries") else 0
        cache_key = (kind, prefix.upper(), revealed)
        with self._lock:
            base = self._orders.get(cache_key)
            if base is not None:
                self._orders.move_to_end(cache_key)
        if base is None:
            if kind == "documents":
                items = [doc for doc in matching if self._visible(doc, search_count)
                         and corpus.withdrawn.get(doc) != "delisted"]
                relevance = corpus.doc_relevance
                base = sorted(items, key=relevance.__getitem__)
            elif kind == "entries":
                items = sorted({corpus.doc_entry[doc] for doc in matching if self._visible(doc, search_count)})
                relevance = corpus.doc_relevance
                base = sorted(items, key=relevance.__getitem__)
            else:
                firsts, relevance, last = corpus.case_first_doc, corpus.doc_relevance, max(0, corpus.size - 1)
                base = sorted(matching, key=lambda case: relevance[min(firsts[case], last)] ^ 0x5A5A5A5A)
            with self._lock:
                self._orders[cache_key] = base
                while len(self._orders) > 64:
                    self._orders.popitem(last=False)
        if self.neighbours and kind != "entries":
            # "Starts With" also answers the numbers just outside the prefix.
            base = base + [item for item in corpus.prefix_neighbours(prefix, kind) if item not in base
                           and (kind == "cases" or (self._visible(item, search_count)
                                                    and corpus.withdrawn.get(item) != "delisted"))]
        if not self.unstable or len(base) < 2:
            return base
        epoch = search_count // EPOCH_REQUESTS
        rng = random.Random(f"{self.seed}:{epoch}:{kind}:{lo}:{hi}")
        order = list(base)
        # One row jumps up over a long stretch: everything between shifts down one place.
        source = rng.randrange(1, len(order))
        order.insert(rng.randrange(0, source), order.pop(source))
        for _ in range(max(1, len(order) // 100)):
            i = rng.randrange(len(order) - 1)
            order[i], order[i + 1] = order[i + 1], order[i]
        return order


class RequestLog:
    """Every request a court answered, in order: its endpoint (`_endpoint_name`) and its item (a
    download's document, a file list's entry: the index of its first document; -1 otherwise), and
    in `times` when it came (time.monotonic(): the pace a client kept)."""

    def __init__(self):
        self.names: list[str] = []
        self.endpoints = array("B")
        self.items = array("i")
        self.times = array("d")

    def note(self, court: "SimCourt", endpoint: str, parts: list[str], query: dict) -> None:
        item = None
        if endpoint in ("download", "download_site"):
            item = court.corpus.find_document(parts[2])
        elif endpoint == "entry_documents":
            filters = dict(part.split("=", 1) for part in query.get("filter", [""])[0].split(",") if "=" in part)
            found = court.corpus.find_entry(filters.get("parentID", "").lower())
            item = found[0] if found else None
        self.add(court._lock, endpoint, item)

    def add(self, lock, endpoint: str, item: int | None) -> None:
        """Logs one request (under `lock`, the court's): its endpoint and its item (None: -1)."""
        with lock:
            if endpoint not in self.names:
                self.names.append(endpoint)
            self.endpoints.append(self.names.index(endpoint))
            self.items.append(-1 if item is None else item)
            self.times.append(time.monotonic())

    def __len__(self) -> int:
        return len(self.endpoints)

    def __iter__(self):
        return ((self.names[code], item) for code, item in zip(self.endpoints, self.items))


class _Server(LoopbackServer):
    court: SimCourt


OPINION_HEADERS = (("Type", "String", "docketEntryType", "docketEntryType.raw"),
                   ("Subtype", "String", "docketEntrySubtype", "docketEntrySubtype.raw"),
                   ("Description", "String", "docketEntryDescription", "docketEntryDescription.sort"),
                   ("Filed Date", "Date", "filedDate", "filedDate"))


def _endpoint_name(path: str, parts: list[str]) -> str:
    """The endpoint a request path names (the keys of `endpoint_requests`)."""
    if len(parts) == 4 and parts[3] == "download":
        return "download"
    if len(parts) in (3, 4) and parts[1] == "cases" and parts[2] != "search":
        return "case" if len(parts) == 3 else parts[3]
    return {"/publicaccessdocuments/search": "document_search", "/cases/search": "case_search",
            "/opinions/search": "opinion_search", "/publicaccessdocuments": "entry_documents"}.get(path, "other")


def _rename_keys(payload, renamed: dict[str, str]):
    if isinstance(payload, dict):
        return {renamed.get(key, key): _rename_keys(value, renamed) for key, value in payload.items()}
    if isinstance(payload, list):
        return [_rename_keys(item, renamed) for item in payload]
    return payload


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


class _Handler(DownloadAnswers, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Microsoft-IIS/10.0"
    timeout = 60          # idle keep-alive connections close after this
    server: _Server

    def log_message(self, format, *args) -> None:
        pass

    def version_string(self) -> str:
        return self.server_version

    # ----------------------------------------------------------- routing

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_POST(self) -> None:
        court = self.server.court
        with court._lock:
            court.in_flight += 1
        try:
            self._answer_post(court)
        finally:
            with court._lock:
                court.in_flight -= 1
                court._quiet.notify_all()

    def _answer_post(self, court: SimCourt) -> None:
        """The simulation's own controls (no real court has them); the API answers POST with 405."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        answer = court.control_answer(path, url.query)
        if answer is not None:
            return self._sim_json(*answer)
        if path.startswith(court.api_path):
            return self._json(405, {"message": "The requested resource does not support http method 'POST'."},
                              False)
        return self._json(404, {"message": "Not found"}, False)

    def _sim_json(self, status: int, payload, head: bool = False) -> None:
        """A JSON answer of the simulation's own (never renamed: renamed_fields is the court's drift)."""
        self._send(status, json.dumps(payload, separators=(",", ":")).encode(), "application/json; charset=utf-8",
                   head)

    def _route(self, head: bool) -> None:
        court = self.server.court
        with court._lock:
            court.in_flight += 1
        try:
            self._answer(court, head)
        finally:
            with court._lock:
                court.in_flight -= 1
                court._quiet.notify_all()

    def _answer(self, court: SimCourt, head: bool) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        if path == STATS_PATH:
            return self._json(200, court.stats(), head)
        if path == PLANS_PATH:
            return self._sim_json(200, court.plans, head)
        query = parse_qs(url.query, keep_blank_values=True)
        site = path.split("/")
        if len(site) == 4 and site[1] == "documents" and site[3] == "download":
            court._count_endpoint("download_site")
            if court.request_log is not None:
                court.request_log.note(court, "download_site", site, {})
            if court.download_paths == "api":
                return self._json(404, {"message": "Not found"}, head)
            return self._download(court, site[2], head)
        if not path.startswith(court.api_path):
            return self._json(404, {"message": "Not found"}, head)
        path = path[len(court.api_path):]
        parts = path.split("/")
        is_download = len(parts) == 4 and parts[1] in ("publicaccessdocuments", "documents") and parts[3] == "download"
        endpoint = _endpoint_name(path, parts)
        court._count_endpoint(endpoint)
        if court.request_log is not None:
            court.request_log.note(court, endpoint, parts, query)
        if not is_download:
            if "application/json" not in self.headers.get("Accept", "").lower():
                return self._send(406, b"<html><body><h1>406 Not Acceptable</h1></body></html>",
                                  "text/html", head)
        if path == "/publicaccessdocuments/search":
            if court.document_search == "absent":
                return self._json(404, {"message": "No HTTP resource was found that matches the request URI."},
                                  head)
            kind = "entries" if court.document_search == "entries" else "documents"
            return self._search(court, kind, "caseHeader.caseNumber", query, head)
        if parts[1:2] == ["cases"] and (court.case_walk == "absent"
                                        or (court.case_walk == "search-only" and path != "/cases/search")):
            return self._json(404, {"message": "No HTTP resource was found that matches the request URI."}, head)
        if path == "/cases/search":
            return self._search(court, "cases", "caseNumber", query, head)
        if path == "/opinions/search":
            return self._opinion_search(court, query, head)
        if path == "/publicaccessdocuments":
            return self._entry_documents(court, query, head)
        if len(parts) in (3, 4) and parts[1] == "cases":
            return self._case_resource(court, parts[2], parts[3] if len(parts) == 4 else "", head)
        if is_download:
            if court.download_paths == "site":
                return self._json(404, {"message": "Document not found"}, head)
            return self._download(court, parts[2], head)
        return self._json(404, {"message": "No HTTP resource was found that matches the request URI."},
                          head)

    # ---------------------------------------------------------- answers

    def _json(self, status: int, payload, head: bool, headers: dict | None = None) -> None:
        renamed = self.server.court.renamed_fields
        if renamed and status == 200:
            payload = _rename_keys(payload, renamed)
        body = json.dumps(payload, separators=(",", ":")).encode()
        self._send(status, body, "application/json; charset=utf-8", head, headers)

    def _search(self, court: SimCourt, kind: str, field: str, query: dict, head: bool) -> None:
        limit_header = {"x-ctrack-paging-resultslimit": str(court.results_limit)}
        count = self._count_request(court, "search_requests")
        if self._json_fault(court, f"search:{count}", head):
            return
        if not _flag(self.headers.get("x-ctrack-excludeselflinks")):
            return self._json(200, {"resultItems": [], "facets": []}, head, {
                **limit_header, "x-ctrack-paging-totalcount": "0",
                "x-ctrack-paging-resultcount": "0", "x-ctrack-paging-moreresults": "false"})
        values = {name: query.get(f"searchFields[0].{name}", [""])[0]
                  for name in ("searchType", "operation", "values[0]", "indexFieldName")}
        if values["indexFieldName"] != field or values["searchType"].lower() != "starts with":
            return self._json(400, {"message": f"Unsupported search on {values['indexFieldName']!r}"},
                              head, limit_header)
        try:
            start = int(self.headers.get("x-ctrack-paging-startindex", "1"))
            asked = int(self.headers.get("x-ctrack-paging-maxresults", "20"))
        except ValueError:
            return self._json(400, {"message": "Invalid paging headers"}, head, limit_header)
        if start < 1 or asked < 1:
            return self._json(400, {"message": "Invalid paging headers"}, head, limit_header)
        if start + asked - 1 > court.results_limit:
            return self._json(400, {"message": f"The requested window exceeds the results limit "
                                               f"of {court.results_limit}."}, head, limit_header)
        order = court._ordered(kind, values["values[0]"], count)
        page = order[start - 1:start - 1 + min(asked, court.max_page)]
        corpus = court.corpus
        captured = court.shape == "captured"
        if kind == "documents":
            rows = [(corpus.captured_document_row if captured else corpus.document_row)(i) for i in page]
        elif kind == "entries":
            rows = [corpus.opinion_row(i) for i in page]
        else:
            rows = [(corpus.captured_case_row if captured else corpus.case_row)(i) for i in page]
        headers = {**limit_header, "x-ctrack-paging-resultcount": str(len(rows)),
                   "x-ctrack-paging-moreresults":
                       "true" if start - 1 + len(rows) < len(order) else "false"}
        if _flag(self.headers.get("x-ctrack-paging-calculatetotalcount")):
            headers["x-ctrack-paging-totalcount"] = str(len(order))
        self._json(200, {"resultItems": rows, "facets": []}, head, headers)

    def _entry_documents(self, court: SimCourt, query: dict, head: bool) -> None:
        filters = dict(part.split("=", 1) for part in query.get("filter", [""])[0].split(",")
                       if "=" in part)
        if filters.get("parentCategory") != "docketentries" or "parentID" not in filters:
            return self._json(400, {"message": "filter must name parentCategory and parentID"}, head)
        count = self._count_request(court, "entry_requests")
        if self._json_fault(court, f"entry:{count}", head):
            return
        corpus = court.corpus
        entry_id = filters["parentID"].lower()
        with court._lock:
            court._entry_asks[entry_id] += 1
            asks = court._entry_asks[entry_id]
        listed = corpus.find_entry(entry_id)
        entry = listed[0] if listed else None
        shown = [doc for doc in listed if court._visible(doc)]
        if shown and asks == 1 and court.empty_once(entry):
            return self._list(court, [], head)
        # A document withdrawn "delisted" is gone from the list; "unavailable", listed as not available.
        files = [corpus.entry_file(doc) for doc in shown if corpus.withdrawn.get(doc) != "delisted"]
        for file in files:
            if court.null_text(file["documentID"]):
                file["documentText"] = None
        extra = corpus.unavailable_file(entry) if shown and court.unavailable_files else None
        if extra is not None:
            if asks >= 2 and court._released(entry):
                extra = {**extra, "documentAvailable": True, "documentText": None}
            files.append(extra)
        self._list(court, files, head)

    def _list(self, court: SimCourt, items: list, head: bool) -> None:
        """A JSON array; paged like a search when `paged_lists` is on (at most that many rows a page,
        LIST_DEFAULT_PAGE when no maxresults was sent), whole otherwise."""
        if not court.paged_lists:
            return self._json(200, items, head)
        try:
            start = int(self.headers.get("x-ctrack-paging-startindex", "1"))
            asked = int(self.headers.get("x-ctrack-paging-maxresults", str(LIST_DEFAULT_PAGE)))
        except ValueError:
            return self._json(400, {"message": "Invalid paging headers"}, head)
        page = items[max(0, start - 1):max(0, start - 1) + min(asked, court.paged_lists)]
        headers = {"x-ctrack-paging-resultslimit": str(court.results_limit),
                   "x-ctrack-paging-resultcount": str(len(page)),
                   "x-ctrack-paging-moreresults": "true" if start - 1 + len(page) < len(items) else "false"}
        if _flag(self.headers.get("x-ctrack-paging-calculatetotalcount")):
            headers["x-ctrack-paging-totalcount"] = str(len(items))
        self._json(200, page, head, headers)

    def _case_resource(self, court: SimCourt, case_id: str, resource: str, head: bool) -> None:
        """`/cases/{id}` and its docketentries, parties, lowercourts (JSON arrays)."""
        count = self._count_request(court, "entry_requests")
        if self._json_fault(court, f"case:{count}", head):
            return
        corpus = court.corpus
        case = corpus.find_case(case_id)
        if case is None or resource not in ("", "docketentries", "parties", "lowercourts"):
            return self._json(404, {"message": "No HTTP resource was found that matches the request URI."}, head)
        if resource == "":
            return self._json(200, corpus.case_header(case), head)
        if resource == "docketentries":
            entries = [corpus.docket_entry(entry) for entry in corpus.case_entries(case)
                       if any(court._visible(doc) for doc in corpus.entry_docs(entry))]
            with court._lock:
                court._walked_cases.add(case)
            entries += corpus.bare_entries(case) + court.phantom_entries(case)
            return self._list(court, sorted(entries, key=lambda e: (e["filedDate"], e["docketEntryID"])), head)
        if resource == "parties":
            return self._list(court, corpus.parties(case), head)
        return self._list(court, corpus.lower_courts(case), head)

    def _opinion_search(self, court: SimCourt, query: dict, head: bool) -> None:
        """Docket entries of opinions filed between two dates (MM/DD/YYYY, >= and <=) in one court."""
        count = self._count_request(court, "search_requests")
        if self._json_fault(court, f"search:{count}", head):
            return
        corpus = court.corpus
        bounds: dict[str, int] = {}
        for index in (0, 1):
            field = query.get(f"searchFields[{index}].indexFieldName", [""])[0]
            operation = query.get(f"searchFields[{index}].operation", [""])[0]
            value = query.get(f"searchFields[{index}].values[0]", [""])[0]
            try:
                day = _dt.datetime.strptime(value, "%m/%d/%Y").date().toordinal()
            except ValueError:
                return self._json(400, {"message": f"Invalid date {value!r}"}, head)
            if field != "filedDate" or operation not in (">=", "<="):
                return self._json(400, {"message": f"Unsupported search on {field!r}"}, head)
            bounds[operation] = day
        wanted = query.get("searchFilters[0].values[0]", [""])[0]
        low, high = bounds.get(">=", 0), bounds.get("<=", 10 ** 7)
        entries = corpus.opinion_entries()
        lo = bisect.bisect_left(entries, (low, -1))
        hi = bisect.bisect_right(entries, (high, 1 << 62))
        in_window = [entry for _, entry in entries[lo:hi]
                     if any(court._visible(doc) for doc in corpus.entry_docs(entry))]
        by_court = Counter(corpus.court_names[corpus.case_keys[corpus.doc_case[entry]][5:7]] for entry in in_window)
        chosen = [entry for entry in in_window
                  if not wanted or corpus.court_names[corpus.case_keys[corpus.doc_case[entry]][5:7]] == wanted]
        try:
            start = int(self.headers.get("x-ctrack-paging-startindex", "1"))
            asked = int(self.headers.get("x-ctrack-paging-maxresults", "25"))
        except ValueError:
            return self._json(400, {"message": "Invalid paging headers"}, head)
        limit_header = {"x-ctrack-paging-resultslimit": str(court.results_limit)}
        if start < 1 or asked < 1 or start + asked - 1 > court.results_limit:
            return self._json(400, {"message": "The requested window exceeds the results limit."}, head, limit_header)
        page = chosen[start - 1:start - 1 + min(asked, OPINION_MAX_PAGE)]
        closed = Counter(str(corpus.case_closed(corpus.doc_case[entry])).lower() for entry in chosen)
        body = {"resultItems": [corpus.opinion_row(entry) for entry in page],
                "headers": [{"label": label, "type": kind, "property": prop, "sortProperty": sort,
                             "useHighlighting": False} for label, kind, prop, sort in OPINION_HEADERS],
                "facets": [{"searchFacetName": "Court", "searchFacetField": "caseHeader.court",
                            "searchFacetOrderBy": 1, "searchFacetType": "String",
                            "searchFacetItems": [{"display": name, "value": name, "count": by_court[name],
                                                  "selected": name == wanted}
                                                 for name in sorted(by_court)]},
                           {"searchFacetName": "Case Final", "searchFacetField": "caseHeader.closed",
                            "searchFacetOrderBy": 7, "searchFacetType": "Boolean",
                            "searchFacetItems": [{"display": value, "value": value, "count": closed[value],
                                                  "selected": False} for value in sorted(closed)]}]}
        headers = {**limit_header, "x-ctrack-paging-resultcount": str(len(page)),
                   "x-ctrack-paging-moreresults": "true" if start - 1 + len(page) < len(chosen) else "false"}
        if _flag(self.headers.get("x-ctrack-paging-calculatetotalcount")):
            headers["x-ctrack-paging-totalcount"] = str(len(chosen))
        self._json(200, body, head, headers)

    @staticmethod
    def _count_request(court: SimCourt, counter: str) -> int:
        """Counts a request in `court.<counter>`; returns the count."""
        with court._lock:
            count = getattr(court, counter) + 1
            setattr(court, counter, count)
        return count

    def _json_fault(self, court: SimCourt, roll_key: str, head: bool) -> bool:
        """At `search_fault_rate`, one misbehaviour of a JSON endpoint; True when it answered."""
        if court._too_early("search"):
            court._fault("json 429 (early)")
            self._json(429, {"message": "Too many requests"}, head, court._retry_after("search"))
            return True
        if court.search_fault_rate <= 0:
            return False
        roll = random.Random(f"{court.seed}:{roll_key}")
        if roll.random() >= court.search_fault_rate:
            return False
        kind = roll.random()
        court._fault("json " + ("503" if kind < 0.5 else "429" if kind < 0.75 else
                                "reset" if kind < 0.875 or head else "torn body"))
        if kind < 0.5:
            self._json(503, {"message": "Service Unavailable"}, head)
        elif kind < 0.75:
            self._json(429, {"message": "Too many requests"}, head, court._retry_after("search"))
        elif kind < 0.875 or head:
            self._reset()
        else:
            body = json.dumps({"resultItems": [], "facets": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body) + 4096))
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])   # then a clean close: a torn JSON body
            self.close_connection = True
        return True


def serve(port: int = 8765, docs: int = 300, seed: int = 1, **options) -> None:
    """Run a simulated court in the foreground until Ctrl-C (`kycourt-pipeline sim`)."""
    court = SimCourt(docs, seed, **options)

    def lines(base_url: str) -> list[str]:
        root = base_url.rsplit(court.api_path, 1)[0]
        return [base_url, f"stats: {root}{STATS_PATH}", f"advance: POST {root}{ADVANCE_PATH}?days=30&seed=0"]

    court.serve_in_foreground(port, lines)
