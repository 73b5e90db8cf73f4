"""The simulated TR Portal court: a system's API host and its portal host on loopback, each switch documented.

    with SimTRPortal("nevada", docs=200, seed=1, today=dt.date(2026, 10, 1)) as court:
        court.base_url       # http://127.0.0.1:<port> + api_path: the root that serves /courts
        court.portal_url     # http://127.0.0.1:<other port>: the walls a 302 leads to

Guarantees:
- Two loopback servers (loopback.py): the API host answers the endpoints of handler.py under
  `api_path` ("" by default); the portal host answers every GET with an HTML page (a sign-in page, a
  purchase page, a cart), 200. Nothing is logged per request.
- Switches (constructor arguments; defaults are the README's word or its best guess): `max_size`
  (500: a larger `size` is cut to it), `page_size` (None; a number: every page is that size whatever
  was asked, `page` counted in it), `window` (10,000 results reachable: a page across it is cut
  there) and `window_answer` for a page that begins past it ("400", "500", or "empty": a 200 without
  `_embedded`, the true `totalElements`), `date_filters` (False: the document search and the
  publications list ignore date filters, as FLP's nev.py says), `numeric_ids` (False: ids as
  strings), `case_instants` ("local"), `secured_state` ("unavailable"), `referer_required` (the
  system's: Nevada yes; 403 without a Referer), `accept_required` (True: 406 without Accept:
  application/json on JSON endpoints), `fault_rate` (0: the share of API requests that misbehave:
  5xx, 429 with Retry-After, a reset, a truncated body, on a download an HTML 200), `down` (None;
  "503": every API request answers 503; "403": every one is refused as a geo-block would; "reset":
  every connection is reset), `record_requests` (False: `request_log`, every request in order as
  (endpoint, item): the case of a case's resources and access list, the document of a download, -1
  otherwise).
- Sizes: `cases`, `docs`, `first_year`, `real_counts` and `today` plan the corpus (corpus.py).
- `GET /__sim__/stats` (outside the API root): requests (JSON and downloads, and per endpoint),
  faults, early requests, walls, the court's day and each counting period's requests; `progress()`
  and `resume()` carry the request count (which draws the faults) over to a new court. The court
  lives (living.py): `advance(days, seed, activity)` or `POST
  /__sim__/advance?days=30&seed=0[&<kind>=N]` answers the plan of what changed (`GET
  /__sim__/plans`: all of them) and begins a counting period, as `new_period()` / `POST
  /__sim__/period` do. An advance waits for the requests being answered and is refused
  (RuntimeError, 409) if they do not end within `advance_wait_s`.
- truth.py judges an archive: `truth()` (every document, its state, bytes and whether it is an
  opinion) and `floor()` (the fewest requests a full archive needs).
"""
from __future__ import annotations

import datetime as _dt
import threading
from collections import Counter, OrderedDict

from ...loopback import LoopbackServer, LoopbackService
from ..controls import ADVANCE_PATH, STATS_PATH, SimControls
from ..retry_after import RetryAfterClock
from ..server import RequestLog
from . import documents, living, truth
from .corpus import TRCorpus
from .handler import APIHandler, PortalHandler
from .shapes import Shapes
from .systems import VIEWABLE, CourtSystem, system_named

WINDOW_ANSWERS = ("400", "500", "empty")
DOWN_ANSWERS = (None, "503", "403", "reset")
PDF_CACHE_SIZE = 256


class SimTRPortal(RetryAfterClock, SimControls, LoopbackService):
    """A simulated TR Portal court system on two free loopback ports; see the module docstring."""

    server_attribute = "portal"
    thread_name = "simtrportal"

    def __init__(self, system: str | CourtSystem = "nevada", *, cases: int | None = None, docs: int = 120,
                 seed: int = 1, today: _dt.date | None = None, first_year: int | None = None,
                 real_counts: bool = False, api_path: str = "", max_size: int = 500, page_size: int | None = None,
                 window: int = 10_000, window_answer: str = "400", date_filters: bool = False,
                 numeric_ids: bool = False, case_instants: str = "local", secured_state: str = "unavailable",
                 referer_required: bool | None = None, accept_required: bool = True, fault_rate: float = 0.0,
                 down: str | None = None, record_requests: bool = False, enforce_retry_after: bool = True):
        self.system = system if isinstance(system, CourtSystem) else system_named(system)
        if max_size < 1 or window < 1 or (page_size is not None and page_size < 1) or not 0 <= fault_rate <= 1:
            raise ValueError("max_size, window and page_size must be >= 1, fault_rate in [0, 1]")
        if window_answer not in WINDOW_ANSWERS or down not in DOWN_ANSWERS:
            raise ValueError(f"window_answer must be one of {WINDOW_ANSWERS}, down one of {DOWN_ANSWERS}")
        self.corpus = TRCorpus(self.system, cases=cases, docs=docs, seed=seed, today=today, first_year=first_year,
                               real_counts=real_counts, secured_state=secured_state)
        self.shapes = Shapes(self.corpus, numeric_ids=numeric_ids, case_instants=case_instants, pdf_info=self.pdf_info)
        self.seed = seed
        self.api_path = "/" + api_path.strip("/") if api_path.strip("/") else ""
        self.max_size, self.page_size, self.window, self.window_answer = max_size, page_size, window, window_answer
        self.date_filters, self.accept_required = date_filters, accept_required
        self.referer_required = self.system.referer_required if referer_required is None else referer_required
        self.fault_rate, self.down = fault_rate, down
        self.enforce_retry_after = enforce_retry_after
        self.request_log: RequestLog | None = RequestLog() if record_requests else None
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)
        self.advance_wait_s = 5.0
        self.in_flight = 0
        self.requests = 0
        self.early_requests = 0
        self._retry_at: dict[object, float] = {}
        self._retry_after_forms = 0
        self.endpoint_requests: Counter = Counter()
        self.faults_served: Counter = Counter()
        self.walls_served: Counter = Counter()      # portal pages, by kind
        self.downloads: Counter = Counter()         # document -> PDFs served whole
        self._body_bytes: dict[int, int] = {}       # document -> body bytes sent (DownloadAnswers counts them)
        self._pdf_cache: OrderedDict = OrderedDict()
        self._pdf_facts: dict[int, tuple[int, int]] = {}
        self.plans: list[dict] = []
        self.periods: list[dict] = []
        self._open_period("start")
        self.base_url: str | None = None
        self.portal_url: str | None = None
        self._portal_server: LoopbackServer | None = None
        self._portal_thread: threading.Thread | None = None

    # -------------------------------------------------------------- serving

    def handler(self) -> type:
        return APIHandler

    def url_for(self, host: str, port: int) -> str:
        self.base_url = f"http://{host}:{port}{self.api_path}"
        return self.base_url

    def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Serves the API host (on `port`) and the portal host (on a free port); returns the API root."""
        url = super().start(port, host)
        if self._portal_server is None:
            self._portal_server = LoopbackServer((host, 0), PortalHandler)
            self._portal_server.portal = self
            self._portal_thread = threading.Thread(target=self._portal_server.serve_forever,
                                                   kwargs={"poll_interval": 0.05}, name="simtrportal-portal",
                                                   daemon=True)
            self._portal_thread.start()
            self.portal_url = f"http://{host}:{self._portal_server.server_address[1]}"
        return url

    def stop(self) -> None:
        super().stop()
        server, self._portal_server = self._portal_server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()
            self._portal_thread.join(timeout=5)

    @property
    def root_url(self) -> str:
        """scheme://host:port of the API host (where /__sim__/ is served)."""
        return self.base_url[:len(self.base_url) - len(self.api_path)] if self.api_path else self.base_url

    # ------------------------------------------------------------ documents

    def pdf(self, doc: int) -> bytes:
        """A document's bytes (whatever its access state: what the court would serve once it is public)."""
        with self._lock:
            cached = self._pdf_cache.get(doc)
            if cached is not None:
                self._pdf_cache.move_to_end(doc)
                return cached
        data = documents.document_pdf(self.corpus, self.shapes, doc)
        with self._lock:
            self._pdf_cache[doc] = data
            self._pdf_facts[doc] = documents.pdf_facts(data)
            while len(self._pdf_cache) > PDF_CACHE_SIZE:
                self._pdf_cache.popitem(last=False)
        return data

    def pdf_info(self, doc: int) -> tuple[int, int]:
        """(pages, bytes) of a document, kept once known (an access row's documentInfo)."""
        facts = self._pdf_facts.get(doc)
        if facts is None:
            self.pdf(doc)
            facts = self._pdf_facts[doc]
        return facts

    def document_index(self, document_id: str) -> int:
        doc = self.corpus.find("document", document_id)
        if doc is None:
            raise KeyError(document_id)
        return doc

    def viewable(self, doc: int) -> bool:
        return self.corpus.doc_state[doc] == VIEWABLE

    def truth(self, hashes: bool = True) -> list:
        """Every document as the court holds it now (truth.py)."""
        return truth.truth(self, hashes=hashes)

    def floor(self, page_size: int = 500) -> dict[str, int]:
        """The fewest requests a full archive of the court as it is now needs (truth.py)."""
        return truth.floor(self, page_size=page_size)

    # -------------------------------------------------------------- counters

    def stats(self) -> dict:
        with self._lock:
            periods = [self._period_figures(period) for period in self.periods]
            downloads = self.endpoint_requests["download"]
            return {"system": self.system.name, "requests": {"json": self.requests - downloads, "download": downloads},
                    "endpoints": dict(sorted(self.endpoint_requests.items())),
                    "faults_served": sum(self.faults_served.values()),
                    "faults_by_kind": dict(sorted(self.faults_served.items())),
                    "walls": dict(sorted(self.walls_served.items())), "early_requests": self.early_requests,
                    "in_flight": self.in_flight, "downloads": sum(self.downloads.values()),
                    "today": _dt.date.fromordinal(self.corpus.today).isoformat(), "advances": len(self.plans),
                    "period": periods[-1], "periods": periods}

    def count(self, endpoint: str, item: int | None) -> int:
        """Counts (and logs) one API request; returns its number."""
        with self._lock:
            self.requests += 1
            number = self.requests
            self.endpoint_requests[endpoint] += 1
            self.periods[-1]["endpoints"][endpoint] += 1
        if self.request_log is not None:
            self.request_log.add(self._lock, endpoint, item)
        return number

    def progress(self) -> dict:
        """What the court's next answers depend on (the requests answered: faults are drawn by request
        number); `resume(progress)` on a court of the same system, size and seed carries on from there."""
        with self._lock:
            return {"system": self.system.name, "requests": self.requests}

    def resume(self, progress: dict) -> None:
        with self._lock:
            self.requests = int(progress.get("requests", 0))

    def note_fault(self, kind: str) -> None:
        with self._lock:
            self.faults_served[kind] += 1

    def note_wall(self, kind: str) -> None:
        with self._lock:
            self.walls_served[kind] += 1

    # --------------------------------------------------------------- living

    def advance(self, days: int = 30, seed: int = 0, activity: dict[str, int] | None = None) -> dict:
        """Moves the court's day on by `days` with that span's activity (living.py), deterministically from
        `seed`; returns the plan of what changed. Waits for the requests being answered to end (RuntimeError
        if they have not within `advance_wait_s`): the court changes between requests, never under one."""
        return self._advance(days, seed, activity, requests_allowed=0)

    def _advance(self, days: int, seed: int, activity: dict[str, int] | None, requests_allowed: int) -> dict:
        with self._lock:
            if not self._quiet.wait_for(lambda: self.in_flight <= requests_allowed, self.advance_wait_s):
                raise RuntimeError(f"{self.in_flight - requests_allowed} requests in flight: advance between requests")
            plan = living.advance(self.corpus, self.shapes, days, seed, activity)
            self.plans.append(plan)
            self._open_period(f"advance {plan['advance']}")
        return plan

    def answering(self, delta: int) -> None:
        """A request begins (+1) or ends (-1)."""
        with self._lock:
            self.in_flight += delta
            if delta < 0:
                self._quiet.notify_all()


def serve(port: int = 8765, system: str = "nevada", docs: int = 120, seed: int = 1, **options) -> None:
    """Runs a simulated TR Portal court in the foreground until Ctrl-C (`kycourt-pipeline sim --court-system`)."""
    court = SimTRPortal(system, docs=docs, seed=seed, **options)
    court.serve_in_foreground(port, lambda base_url: [
        base_url, f"portal: {court.portal_url}", f"stats: {court.root_url}{STATS_PATH}",
        f"advance: POST {court.root_url}{ADVANCE_PATH}?days=30&seed=0"])
