"""The crawl: the order of the court's work when a session both discovers and downloads.

Guarantees:
- One scheduler over the one download queue (the documents table): it steps discovery's units
  (c50 `Discovery`: the opinion pass a window at a time, the walk a shard's search or
  CRAWL_WALK_CASES cases at a time, the file lists asked again, the window's closing) and, after
  each, drains the queue (c70 `Downloads`, opinions first) before the next unit begins, so a
  session stores PDFs from its first minutes and every opinion the court lists comes before the
  rest of the walk. The details pass (each walked case's parties and lower courts) runs only once
  discovery has no unit left this run and nothing this run can download waits (DOWNLOAD_LIMIT holds
  it back too): never before a PDF that is still missing. `next_work` decides, from plain values
  (`CrawlState`).
- Every unit commits what it did before it returns (a window, a case, a shard's rows, a group of
  downloads, a case's details), so a kill (SIGKILL included) loses at most the unit in flight, and
  the next run resumes from the database: the same units, in the same order.
- Where the court's opinions are found among everything else (a TR Portal court whose walk finds
  them, c49), discovery says so (`opinions_only()`): until every opinion is listed only opinions
  are downloaded, so every opinion comes before any other document.
- A stop (budget, signal) ends the crawl between units, and inside one as each stage honours it;
  DOWNLOAD_LIMIT ends the downloads while discovery goes on (the details pass waits); the
  breaker's CourtUnreachable ends the crawl and is reported (`Crawl.court_unreachable`).
- After each unit, kv `crawl_figures` adds what it cost and found to its kind (opinions, walk,
  downloads, details) with the latency observed and the work left (`add_figures`): the evidence
  the projection of status.json and the summary reads (c35 `crawl_projection`). The walk's figures
  are the current sweep's: a later sweep walks only new and changed cases, so until its first
  shard is done the documents and details left are "not known yet", never a first sweep's price. kv
  `opinions_archived_at` is set the first time every opinion the court lists is archived.
- status.json's `phase` follows the crawl (discover, download, details): the workspace's copy is
  written whenever the phase changes (what a watcher, the torture harness included, reads), the
  store's as c35 `write_status` mirrors it (every STATUS_MIRROR_SECONDS at most).

Knobs read: DOWNLOAD_BATCH, DRY_RUN (and, through discovery and download, theirs: CASE_DETAILS,
DOWNLOAD_LIMIT, MAX_SWEEPS, ...).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .c00_config import CourtUnreachable, utc_now
from .c10_database import KV_CRAWL_FIGURES, KV_DISCOVERY_CONVERGED_AT, KV_OPINIONS_ARCHIVED_AT
from .c12_queues import WorkQueues
from .c15_discovery_state import DiscoveryState
from .c31_court_client import court_client
from .c35_context import Context, write_status
from .c44_discovery_rules import DISCOVER_DETAILS_BATCH, DiscoverResult
from .c50_discover import Discovery, discover, discovery_for
from .c70_download import DownloadResult, Downloads, RecoverResult, download

log_schedule = logging.getLogger("kycourt.schedule")

CRAWL_WALK_CASES = 50          # cases the walk takes before their documents are downloaded


@dataclass(frozen=True)
class CrawlState:
    """What the scheduler decides on, as plain values."""
    stopping: bool                 # the clock says stop (budget, signal), or the court is unreachable
    discovery: str | None          # Discovery.unit(): 'opinions', 'walk', None when discovery is done
    queue: int                     # documents waiting in the download queue
    downloads_open: bool           # Downloads.open: no stop, no DOWNLOAD_LIMIT reached
    drained_nothing: bool = False  # the last drain took nothing although documents were waiting
    details_due: bool = False      # CASE_DETAILS, discovery has no unit left, and cases wait for details
    opinions_only: bool = False    # discovery may still find opinions: only opinions are downloaded (`queue` counts them)


def next_work(state: CrawlState) -> str | None:
    """What the crawl does next: 'download' (a drain), 'opinions' or 'walk' (discovery's next unit),
    'details', or None (nothing more this run). What discovery finds is downloaded before discovery
    goes on; the details wait until the queue is empty, or holds only what this run cannot take (a
    drain took nothing): never while DOWNLOAD_LIMIT holds PDFs back."""
    if state.stopping:
        return None
    downloading = state.downloads_open and not state.drained_nothing
    if state.queue and downloading:
        return "download"
    if state.discovery is not None:
        return state.discovery
    if state.details_due and (not state.queue or (state.downloads_open and state.drained_nothing)):
        return "details"
    return None


def add_figures(figures: Mapping[str, Any], kind: str, *, requests: int, units: int = 0, documents: int = 0,
                cases: int = 0, answers: int = 0, answer_seconds: float = 0.0) -> dict[str, Any]:
    """`figures` (kv crawl_figures) with one unit's cost added to its kind: requests, units (windows,
    shards or documents finished), documents found, cases walked; and the latency observed."""
    updated = {name: dict(value) for name, value in figures.items() if isinstance(value, Mapping)}
    entry = updated.setdefault(kind, {})
    for name, value in (("requests", requests), ("units", units), ("documents", documents), ("cases", cases)):
        entry[name] = entry.get(name, 0) + value
    latency = updated.setdefault("latency", {})
    latency["answers"] = latency.get("answers", 0) + answers
    latency["seconds"] = round(latency.get("seconds", 0.0) + answer_seconds, 3)
    return updated


@dataclass
class Crawl:
    """What one crawl did: the stages' results, the time each kind of work took, the breaker's word."""
    discover: DiscoverResult
    download: DownloadResult
    seconds: dict[str, float] = field(default_factory=lambda: {"discover": 0.0, "download": 0.0})
    units: dict[str, int] = field(default_factory=dict)
    court_unreachable: str | None = None


def crawl(ctx: Context, recovered: RecoverResult | None = None, *,
          discovered: Callable[[], None] | None = None) -> Crawl:
    """Discovery and downloads interleaved, then the details pass (see the module docstring).
    `discovered` runs once, when discovery has no unit left this run, before the queue is looked at
    again (c95: adopted ids discovery confirmed join the queue, so this crawl downloads them)."""
    if ctx.cfg.DRY_RUN:
        found = discover(ctx)
        if discovered is not None:
            discovered()
        return Crawl(found, download(ctx, recovered))
    db = ctx.open_database()
    if ctx.client is None:
        ctx.client = court_client(ctx.cfg, ctx.clock)     # one client: its counts are the crawl's figures
    discovery = discovery_for(ctx, opinion_pass=True)
    downloads = Downloads(ctx, recovered)
    result = Crawl(discovery.result, downloads.result)
    scheduler = _Scheduler(ctx, discovery, downloads, result, discovered)
    try:
        with downloads:
            scheduler.run()
    except CourtUnreachable as exc:
        result.court_unreachable = str(exc)
        downloads.result.stopped = downloads.result.stopped or "court unreachable"
    finally:
        discovery.finish()
    scheduler.status()
    log_schedule.info("crawl: %s units; %d documents discovered, %d downloaded, %d cases' details%s",
                      ", ".join(f"{count} {kind}" for kind, count in sorted(result.units.items())) or "no",
                      discovery.result.rows_new, downloads.result.downloaded, discovery.result.details_cases,
                      f"; court unreachable: {result.court_unreachable}" if result.court_unreachable else "")
    if db.kv_get(KV_DISCOVERY_CONVERGED_AT) is None and not discovery.result.stopped and not result.court_unreachable:
        log_schedule.info("crawl: discovery has not converged after %d sweeps; the next run goes on",
                          discovery.result.sweeps)
    return result


class _Scheduler:
    """The crawl's loop: state, `next_work`, the unit, its figures."""

    PHASES = {"download": "download", "opinions": "discover", "walk": "discover", "details": "details"}

    def __init__(self, ctx: Context, discovery: Discovery, downloads: Downloads, result: Crawl,
                 discovered: Callable[[], None] | None = None):
        self.ctx, self.db = ctx, ctx.db
        self.discovered = discovered
        self.discovery, self.downloads, self.result = discovery, downloads, result
        self.drained_nothing = False
        self.details_exhausted = False       # the details pass found nothing more to do this run
        try:
            self.figures = json.loads(self.db.kv_get(KV_CRAWL_FIGURES) or "{}")
        except ValueError:
            self.figures = {}

    def state(self) -> CrawlState:
        ctx, cfg, db = self.ctx, self.ctx.cfg, self.db
        unit = self.discovery.unit()
        # Asked only once discovery has no unit left this run (converged or not: a case the court
        # never answers must not hold every case's details back): the details cannot come before.
        details_due = (unit is None and not self.details_exhausted and cfg.CASE_DETAILS
                       and bool(DiscoveryState(db).cases_needing_details(1)))
        only = self.discovery.opinions_only()
        queue = WorkQueues(db).opinions_to_download(cfg) if only else WorkQueues(db).download_queue_size(cfg)
        return CrawlState(stopping=ctx.clock.should_stop() or bool(self.result.court_unreachable),
                          discovery=unit, queue=queue, downloads_open=self.downloads.open,
                          drained_nothing=self.drained_nothing, details_due=details_due, opinions_only=only)

    def run(self) -> None:
        while True:
            state = self.state()
            if state.discovery is None and self.discovered is not None:
                discovered, self.discovered = self.discovered, None
                discovered()
                state = self.state()
            work = next_work(state)
            if work is None:
                return
            self.unit(work, state.opinions_only)
            if self.downloads.result.court_unreachable:
                self.result.court_unreachable = self.downloads.result.court_unreachable
                return

    def unit(self, work: str, opinions_only: bool = False) -> None:
        ctx, discovery, result = self.ctx, self.discovery, self.discovery.result
        phase = self.PHASES[work]
        if ctx.phase != phase:
            ctx.phase = phase
            self.status()
        client = ctx.client
        sent, answers, answer_seconds = client.requests_sent, client.answers, client.answer_seconds
        found_before, walked_before, shards_before = result.rows_new, result.cases_walked, discovery.shards_done
        windows_before, details_before = result.opinion_windows, result.details_cases
        downloaded_before = self.downloads.result.documents
        started = time.monotonic()
        try:
            if work == "download":
                taken = self.downloads.drain(ctx.cfg.DOWNLOAD_BATCH, opinions_only=opinions_only)
                self.drained_nothing = taken == 0
            elif work == "details":
                done = discovery.details(DISCOVER_DETAILS_BATCH)
                self.details_exhausted = not done
            else:
                discovery.step(CRAWL_WALK_CASES)
                self.drained_nothing = False
        finally:
            self.result.seconds["download" if work == "download" else "discover"] += time.monotonic() - started
            self.result.units[work] = self.result.units.get(work, 0) + 1
            kind = "downloads" if work == "download" else work
            if kind == "walk" and discovery.in_sweep:    # not the unit before a (resumed) sweep begins
                self._walk_figures_of(discovery.sweep)
            units = {"downloads": self.downloads.result.documents - downloaded_before,
                     "opinions": result.opinion_windows - windows_before,
                     "walk": discovery.shards_done - shards_before,
                     "details": result.details_cases - details_before}[kind]
            self.figures = add_figures(
                self.figures, kind, requests=client.requests_sent - sent, units=units,
                documents=result.rows_new - found_before, cases=result.cases_walked - walked_before,
                answers=client.answers - answers, answer_seconds=client.answer_seconds - answer_seconds)
            if (kind == "walk" and discovery.sweep and not discovery.in_sweep
                    and self.db.kv_get(KV_DISCOVERY_CONVERGED_AT) is None):
                # The sweep ended without converging: the next walks only new and changed cases, so
                # its shards are priced at what they cost, once the first has (not the first sweep's).
                self.figures["walk"] = {"sweep": discovery.sweep + 1}
            self.figures["left"] = discovery.work_left()
            self.figures["opinion_pass_complete"] = result.opinion_pass_complete
            self.db.kv_set(KV_CRAWL_FIGURES, json.dumps(self.figures, sort_keys=True))
        self._note_opinions_archived()

    def _walk_figures_of(self, sweep: int) -> None:
        """kv crawl_figures' walk figures are one sweep's (`sweep` in them): a later sweep walks only
        new and changed cases, and the projection prices its shards at what its own shards cost."""
        walk = self.figures.get("walk")
        if not isinstance(walk, dict) or walk.get("sweep", sweep) != sweep:
            self.figures["walk"] = {"sweep": sweep}
        else:
            walk["sweep"] = sweep

    def _note_opinions_archived(self) -> None:
        db = self.db
        listed = self.figures.get("opinion_pass_complete") or db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
        if not listed or db.kv_get(KV_OPINIONS_ARCHIVED_AT) is not None:
            return
        if WorkQueues(db).opinions_to_download(self.ctx.cfg) == 0:     # listed, and none left: crawl_projection's rule
            db.kv_set(KV_OPINIONS_ARCHIVED_AT, utc_now())
            log_schedule.info("every opinion the court lists is archived")

    def status(self) -> None:
        write_status(self.ctx)
