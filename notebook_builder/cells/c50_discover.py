"""Discover: enumerate every document the court serves, as units of work, sweep after sweep.

Guarantees:
- Discovery is a sequence of units (`Discovery.step`): the strategy; the opinion pass (when the
  crawl asks for it, c46); each sweep's shards (the document search: a shard, c47; the case walk:
  a shard's case search, then its cases a batch at a time, c45); the file lists asked again; the
  opinion update or the window's closing (c46). Every unit commits what it found before it
  returns, so the crawl (c75) downloads it before the next unit, and a kill loses only the unit
  in flight. `discover()` runs the units in turn, then (once nothing waits to be downloaded) the
  details pass (CASE_DETAILS: each walked case's parties and lower courts, DISCOVER_DETAILS_BATCH
  cases a unit, each committed with `cases.details_sweep`).
- Shards are the court's (c25): every year and court of FIRST_YEAR..last_year and their ADMIN
  shards; one over the court's results limit is split, never truncated. Rows are upserted as
  `discovered` (metadata refreshed, a status never moved back, c15).
- Sweeps repeat until one, complete, without errors and without as many answers of the wrong
  shape as CONVERGENCE_DELTA (or 1% of its rows), adds fewer than CONVERGENCE_DELTA documents;
  then the window closes (c46) and kv `discovery_converged_at` is set (status.json's `done`). At
  most MAX_SWEEPS sweeps a run. Every sweep has its `discovery_runs` row and its shards'
  states, and kv `discovery_sweep` names it, so a stopped or killed sweep resumes at its first
  pending shard. A stop is honoured between pages and cases; what was fetched is committed
  before `discover()` returns, on a stop and on an exception alike.
- The excludeselflinks trap fails loudly (CourtTrapError), also for a complete sweep that saw
  nothing at all.
- Strategies (DISCOVERY): `documents` or `cases`; `auto` probes the searches shard by shard,
  newest first (c25 `choose_strategy`) and keeps the choice in kv `discovery_strategy`. A strategy
  that proves unusable (its search refused, most per-item answers 404 or of the wrong shape)
  abandons its sweep as errors and auto falls back to the other (`DiscoverResult.fallback`);
  when none is left, `CourtUnreachable` says what the court answered (exit 3).
- Updates: once discovery has converged every run is an update (c48): its changes are recorded
  (c19); unless FULL_SWEEP it asks the opinion search first (c46), then sweeps every shard walking
  only new, changed and open cases (c44 `walk_kind`) and asks a rotating share of the waiting file
  lists again; only a complete update moves `complete_through`. An update's sweep starts from the
  shards the last complete sweep did not split (c44 `update_shards`): a split is never learnt
  again, a leaf grown over the limit still splits, a year or court new since is asked whole.
  Days are the court system's (`Config.today()`: TODAY, else today in its time zone).
- DRY_RUN: no network, returns at once.

Knobs read: FIRST_YEAR, LAST_YEAR, PAGE_SIZE, CONVERGENCE_DELTA, MAX_SWEEPS, DRY_RUN, DISCOVERY,
CASE_DETAILS, COURT_TEXT, FULL_SWEEP (and the client's: PACING*, BACKOFF_*, SEARCH_ATTEMPTS,
HTTP_TIMEOUT).
"""
from __future__ import annotations

import collections
import logging
import math
import time
from typing import Callable

from .c00_config import CourtUnreachable, ResultsLimitExceeded, StopRequested, TransientFetchError, utc_now
from .c10_database import (KV_ARCHIVE_UPDATED_AT, KV_COMPLETE_THROUGH, KV_DISCOVERY_CONVERGED_AT, KV_DISCOVERY_STRATEGY,
                           Database)
from .c12_queues import WorkQueues
from .c15_discovery_state import DiscoveryState
from .c25_court import STRATEGIES, choose_strategy, document_id_of
from .c27_court_systems import court_of_config
from .c30_client import CourtClient, CourtTrapError, SearchPage, SearchRefused
from .c31_court_client import court_client
from .c34_mirror import progress
from .c35_context import Context
from .c44_discovery_rules import (DISCOVER_ASK_AGAIN_BATCH, DISCOVER_ASK_AGAIN_UPDATE_SHARE, DISCOVER_DETAILS_BATCH,
                                  KV_CRAWL_STARTED_ON, KV_DISCOVERY_SWEEP, DiscoverResult, StrategyUnusable,
                                  discover_current_sweep, is_converged, metadata_fingerprint, opinion_pass_due,
                                  update_shards)
from .c45_case_walk import CaseWalk, ShardInFlight
from .c46_opinions import OpinionSearch
from .c47_document_search import DiscoveryWriter, discover_shard
from .c48_update import Update
from .c49_trportal_walk import TRPortalDiscovery

log_discover = logging.getLogger("kycourt.discover")

DISCOVER_PROBE_ROWS = 5         # rows each of the auto strategy's probes asks for


def discover(ctx: Context) -> DiscoverResult:
    """Runs sweeps until discovery converges, MAX_SWEEPS are done, or the run must stop; then, when
    nothing waits to be downloaded, the details pass. Once discovery has converged (and unless FULL_SWEEP), one
    incremental update instead. The same units of work as the crawl (c75), without its downloads."""
    if ctx.cfg.DRY_RUN:
        log_discover.info("dry run: discovery makes no requests")
        return DiscoverResult()
    discovery = discovery_for(ctx)
    try:
        while discovery.step():
            pass
        if discovery.details_due():
            while discovery.details(DISCOVER_DETAILS_BATCH):
                pass
    finally:
        discovery.finish()
    return discovery.result


class Discovery:
    """Discovery's work as units, in its order: the strategy, the opinion pass (when asked for and
    due), then each sweep's shards (the document search: a shard; the case walk: a shard's case
    search and its cases, a batch at a time), the file lists asked again, the opinion update or the
    window's closing. `step()` runs the next unit and says whether one is left this run; `unit()`
    names it; `details(limit)` is the details pass; `finish()` ends the run's bookkeeping on every
    exit path. Every unit commits what it learnt before it returns (a case, a window, a shard's
    rows), so the crawl may download it at once and a kill loses only the unit in flight."""

    def __init__(self, ctx: Context, *, opinion_pass: bool = False):
        self.ctx, self.cfg = ctx, ctx.cfg
        self.db = ctx.open_database()
        self.state = DiscoveryState(self.db)
        self.result = DiscoverResult()
        self.own_client = ctx.client is None
        self.client = court_client(ctx.cfg, ctx.clock) if self.own_client else ctx.client
        self.started = time.monotonic()
        self.requests_before = self.client.requests_sent
        self.downloads_before = self.client.downloads_sent
        self.warnings_before = collections.Counter(self.client.list_warnings)
        self.court = self.client.court
        self.walk = CaseWalk(ctx, self.db, self.client, self.result)
        self.opinions = OpinionSearch(ctx, self.db, self.walk, self.result)
        self.opinion_pass = opinion_pass
        self.update: Update | None = None      # a run after the first complete crawl (c48)
        self.update_complete = False
        self.stage = "begin"          # begin, opinions, sweep, update, ask_again, close, done
        self.plan: list[str] = []
        self.unusable: dict[str, str] = {}     # strategy -> what the court answered, this run
        self.known: dict[str, int] | None = None   # the document search's unchanged rows
        self.in_sweep = False
        self.sweep = 0
        self.pending: list[str] = []
        self.flight: ShardInFlight | None = None
        self.bar = None
        self.sweep_started = 0.0
        self.sweep_figures = (0, 0)   # the result's repages and cases walked when the sweep began
        self.problems_before = 0
        self.summary = None
        self.asked = self.asked_new = 0
        self.ask_after = ""
        self.details_after = ""
        self.shards_done = 0          # shards finished (done, split, error) this run

    # ------------------------------------------------------------ units

    def unit(self) -> str | None:
        """What `step()` does next: 'opinions' (the opinion pass), 'walk' (the rest), None: done this run."""
        return None if self.stage == "done" else "opinions" if self.stage == "opinions" else "walk"

    def opinions_only(self) -> bool:
        """Whether only opinions may be downloaded now: never here (the opinion pass lists them first)."""
        return False

    def work_left(self) -> dict[str, int]:
        """What is left of discovery: the opinion pass's windows, and the shards of the sweep in hand
        (between sweeps of a crawl that has not converged: a whole sweep's)."""
        converged = self.db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
        if self.in_sweep:
            shards = len(self.pending) + (self.flight is not None)
        elif converged:
            shards = 0
        else:
            shards = len(self.plan or self.court.sweep_shards(self.cfg.FIRST_YEAR, self.cfg.last_year))
        windows = 0
        if self.stage == "opinions" or (self.stage == "begin" and self.opinion_pass and not converged):
            windows = self.opinions.windows_left()
        return {"windows": windows, "shards": shards}

    def step(self, cases: int | None = None) -> bool:
        """Runs the next unit (of the case walk, at most `cases` cases; None: a shard's rest); False
        once discovery has nothing left to do in this run."""
        if self.stage != "done" and self.ctx.clock.should_stop():
            self._stop()
        elif self.stage == "begin":
            self._begin()
        elif self.stage == "opinions":
            self._opinion_pass_window()
        elif self.stage == "sweep":
            self._sweep_unit(cases)
        elif self.stage == "update":
            if self.opinions.update():
                self.stage = "sweep"
            else:
                self._stop()
        elif self.stage == "ask_again":
            self._ask_again()
        elif self.stage == "close":
            self._close_window()
        return self.stage != "done"

    def _begin(self) -> None:
        cfg, db, result = self.cfg, self.db, self.result
        result.strategy = _discover_strategy(self.ctx, db, self.client)
        converged = bool(db.kv_get(KV_DISCOVERY_CONVERGED_AT))
        result.incremental = converged and not cfg.FULL_SWEEP
        self.plan = self.court.sweep_shards(cfg.FIRST_YEAR, cfg.last_year)
        if converged:
            # After the first complete crawl every run is an update: its changes are recorded.
            self.update = Update(self.ctx, db, self.court)
            self.walk.changes = self.update.changes
            self.walk.update = result.incremental
        if db.kv_get(KV_CRAWL_STARTED_ON) is None:
            db.kv_set(KV_CRAWL_STARTED_ON, cfg.today().isoformat())
        window = self.opinions.next_window()
        due = opinion_pass_due(result.strategy, converged, window, len(self.opinions.failed_windows()))
        self.stage = "opinions" if self.opinion_pass and due else "sweep"
        self.result.opinion_pass_complete = self.opinion_pass and self.opinions.pass_complete(result.strategy)

    def _opinion_pass_window(self) -> None:
        """One window of the opinion pass (c46); the sweeps begin once it has none left this run."""
        finished = self.opinions.pass_window()
        if finished is None:
            self._stop()
        elif finished:
            self.result.opinion_pass_complete = self.opinion_pass and self.opinions.pass_complete(self.result.strategy)
            if self.result.opinion_pass_complete:
                log_discover.info("opinion pass complete: every opinion the court lists since %d is discovered",
                                  self.cfg.FIRST_YEAR)
            self.stage = "sweep"

    def _sweep_unit(self, cases: int | None) -> None:
        if not self.in_sweep:
            if self.result.sweeps >= self.cfg.MAX_SWEEPS:
                self.stage = "done"
                return
            self._start_sweep()
            if self.result.incremental:
                self.stage = "update"      # the opinions of an update first
                return
        shard = None
        try:
            if self.flight is not None:
                shard, outcome = self.flight.shard, self.walk.walk_cases(self.flight, cases, self.cfg.FULL_SWEEP)
            elif self.pending:
                shard = self.pending.pop(0)
                outcome = self._open_shard(shard, cases)
            else:
                self._end_sweep()
                return
        except (StrategyUnusable, SearchRefused) as exc:
            self._abandon(exc)
            return
        if outcome == "stopped":
            self._stop()
        elif outcome == "split":
            children = self.court.numbers.split_shard(shard)
            self.pending = sorted(self.pending + children)
            self.bar.total += len(children)
            self.bar.refresh()
            self.bar.update(1)
            self.shards_done += 1
        elif outcome != "more":
            self.flight = None
            self.bar.update(1)
            self.shards_done += 1

    def _open_shard(self, shard: str, cases: int | None) -> str:
        """The shard's search; the document search's rows committed, or the case walk's first batch."""
        ctx, db, result = self.ctx, self.db, self.result
        if result.strategy == "documents":
            if self.known is None:
                # Rows the table already holds unchanged are not rewritten (most rows of every sweep after
                # the first): the upsert would be a no-op, and skipping it keeps Discover near the bare
                # paging loop's speed. ~25 MB for 100k documents.
                self.known = {values[0]: metadata_fingerprint(values) for values in DiscoveryState(db).iter_document_metadata()}
            writer = DiscoveryWriter(db, self.sweep, self.walk.changes)
            try:
                with writer:
                    return discover_shard(ctx, db, self.client, writer, shard, result, self.known, self.walk)
            finally:
                result.rows_new += writer.rows_new
        opened = self.walk.open_shard(self.sweep, shard)
        if isinstance(opened, str):
            return opened
        self.flight = opened
        return self.walk.walk_cases(opened, cases, self.cfg.FULL_SWEEP)

    def _start_sweep(self) -> None:
        db, result = self.db, self.result
        self.sweep = sweep = discover_current_sweep(db)
        result.sweeps += 1
        self.walk.begin_sweep(sweep)
        self.problems_before = sum(self.walk.problems.values()) + result.unresolved
        self.sweep_started = time.monotonic()
        self.sweep_figures = (result.repages, result.cases_walked)
        plan = self.plan
        if self.update is not None:       # the crawl's splits stand: start from its leaves
            plan = update_shards(self.plan, self.state.last_sweep_leaves(sweep), self.court.numbers.top_level_shard)
        DiscoveryState(db).start_sweep(sweep, plan)
        db.kv_set(KV_DISCOVERY_SWEEP, sweep)
        states = DiscoveryState(db).shard_states(sweep)
        # The pending list lives here, not in a query per unit: split children join it in their sorted
        # place (right after their parent), so a resumed sweep starts where this one would have gone next.
        self.pending = DiscoveryState(db).pending_shards(sweep)
        what = "case walk" if result.strategy == "cases" else "discover"
        self.bar = progress(self.cfg, sum(states.values()), f"{what} sweep {sweep}", unit="shard")
        self.bar.update(sum(states.values()) - states.get("pending", 0))
        self.in_sweep, self.summary = True, None
        self.asked = self.asked_new = 0
        self.ask_after = ""

    def _end_sweep(self) -> None:
        db, result = self.db, self.result
        summary = DiscoveryState(db).finish_sweep(self.sweep, time.monotonic() - self.sweep_started, complete=True)
        self._close_bar()
        repages_before, walked_before = self.sweep_figures
        log_discover.info("sweep %d (%s) complete: %d shards, %d search pages (%d shard re-pages), %d rows seen, "
                          "%d cases walked, %d new documents, %d errors, %.1f s", self.sweep, result.strategy,
                          summary["shards"], summary["pages"], result.repages - repages_before, summary["rows_seen"],
                          result.cases_walked - walked_before, summary["rows_new"], summary["errors"],
                          summary["seconds"])
        if summary["errors"] == 0 and summary["rows_seen"] == 0:
            noun = "case" if result.strategy == "cases" else "document"
            raise CourtTrapError(f"sweep {self.sweep} saw no {noun} in {summary['shards']} shards: the court "
                                 "answered every search empty (the x-ctrack-excludeselflinks trap?)")
        self.walk.check_evidence(complete=True)
        self.summary = summary
        self.stage = "ask_again"

    def _abandon(self, exc: Exception) -> None:
        """The strategy proved unusable: the sweep ends as errors (never converged), auto falls back."""
        result = self.result
        why = str(exc) if isinstance(exc, StrategyUnusable) else f"its search was refused: {exc}"
        self.state.abandon_sweep(self.sweep, f"{result.strategy} unusable: {why}", time.monotonic() - self.sweep_started)
        self._close_bar()
        self.in_sweep, self.flight, self.pending = False, None, []
        result.errors += 1
        self.unusable[result.strategy] = why
        result.strategy = _discover_fall_back(self.ctx, self.db, result, self.unusable)

    def _ask_again(self) -> None:
        """Entries whose file list was empty or held withheld files: asked again, once a sweep, a batch a
        unit; in an update, DISCOVER_ASK_AGAIN_UPDATE_SHARE of them, those asked longest ago, one unit."""
        if self.result.incremental:
            budget = math.ceil(sum(self.state.entries_missing_files().values()) * DISCOVER_ASK_AGAIN_UPDATE_SHARE)
            asked = self.walk.ask_again(self.sweep, budget, "", oldest_first=True) if budget else (0, 0, "")
            if asked is None:
                self._stop()
            else:
                self.asked, self.asked_new = asked[0], asked[1]
                self._end_update()
            return
        asked = self.walk.ask_again(self.sweep, DISCOVER_ASK_AGAIN_BATCH, self.ask_after)
        if asked is None:
            self._stop()
            return
        rows, new, last = asked
        self.asked += rows
        self.asked_new += new
        if rows:
            self.ask_after = last
            return
        if self.asked:
            log_discover.info("sweep %d: %d file lists asked again (empty or withheld before), %d new documents",
                              self.sweep, self.asked, self.asked_new)
        self._converge()

    def _end_update(self) -> None:
        """The update's sweep is over: complete when no shard, case or opinion window failed (c48
        moves complete_through when discovery finishes)."""
        self.update_complete = self.summary["errors"] == 0 and self.result.errors == 0
        self.result.converged = True
        self.stage = "done"

    def _converge(self) -> None:
        """A sweep ended: converged (then the window closes), or another sweep."""
        cfg, result, summary = self.cfg, self.result, self.summary
        # Answers of the wrong shape in this sweep: what they held is unknown. A few are reported; as many
        # as would stop convergence by new documents (or 1% of the rows), and the sweep cannot converge.
        shape_problems = sum(self.walk.problems.values()) + result.unresolved - self.problems_before
        blocking = shape_problems >= max(cfg.CONVERGENCE_DELTA, summary["rows_seen"] // 100)
        if shape_problems:
            log_discover.warning("sweep %d: %d answers of the wrong shape%s", self.sweep, shape_problems,
                                 "; not converged" if blocking else "")
        self.in_sweep = False
        self.stage = "sweep"
        if is_converged(complete=True, errors=summary["errors"] + int(blocking),
                        rows_new=summary["rows_new"] + self.asked_new, delta=cfg.CONVERGENCE_DELTA):
            self.stage = "close"

    def _close_window(self) -> None:
        closed = self.opinions.close_window()
        if closed is None:
            self._stop()
        elif not closed:
            self.stage = "sweep"       # the opinion search failed: the window stays open, sweep again
        else:
            now = utc_now()
            self.db.kv_set(KV_DISCOVERY_CONVERGED_AT, now)
            self.db.kv_set(KV_ARCHIVE_UPDATED_AT, now)
            self.result.converged = True
            self.stage = "done"

    def _stop(self) -> None:
        """A stop: what the shard in flight walked is recorded (the shard stays pending)."""
        if self.flight is not None:
            flight, self.flight = self.flight, None
            self.state.add_shard_progress(flight.sweep, flight.shard, pages=flight.pages, rows_seen=0,
                                       rows_new=flight.rows_new)
        self.result.stopped = True
        self.stage = "done"

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    # ------------------------------------------------------- details

    def details_due(self) -> bool:
        """The details pass may run (after discovery's units of this run): CASE_DETAILS, nothing waits to
        be downloaded (never before a PDF that is still missing: `discover` alone leaves them for a
        later run), and no stop."""
        return (self.cfg.CASE_DETAILS and WorkQueues(self.db).download_queue_size(self.cfg) == 0
                and not self.ctx.clock.should_stop())

    def details(self, limit: int) -> int | None:
        """The parties and lower courts of the next `limit` walked cases whose details are due, each
        case committed with them (one request each, the court's lists followed). Returns the cases
        done (0: none due), None on a stop. A case the court gave no answer for is tried next run."""
        rows = self.state.cases_needing_details(limit, self.details_after)
        for row in rows:
            if self.ctx.clock.should_stop():
                self.result.stopped = True
                return None
            self.details_after = row["case_number"]
            try:
                parties = self.walk.details_list("parties", "parties", row["case_id"], self.court.party)
                lower_courts = self.walk.details_list("lower_courts", "lowercourts", row["case_id"],
                                                      self.court.lower_court)
            except StopRequested:
                self.result.stopped = True
                return None
            except TransientFetchError as exc:
                self.result.details_errors += 1
                log_discover.debug("details of %s: %s", row["case_number"], exc)
                continue
            self.state.record_case_details(row["case_id"], row["walked_sweep"], parties, lower_courts)
            self.result.details_cases += 1
        return len(rows)

    # -------------------------------------------------------- the end

    def finish(self) -> DiscoverResult:
        """The run's figures and log lines, whatever ended it."""
        result, client, walk = self.result, self.client, self.walk
        self._close_bar()
        if self.own_client:
            client.close()
        result.stopped = result.stopped or self.ctx.clock.stop_event.is_set()
        result.requests = client.requests_sent - self.requests_before
        result.shape_problems = dict(walk.problems)
        result.list_warnings = dict(collections.Counter(client.list_warnings) - self.warnings_before)
        result.seconds = round(time.monotonic() - self.started, 3)
        result.documents = WorkQueues(self.db).document_count()
        if self.update is not None:
            downloads = client.downloads_sent - self.downloads_before
            figures = self.update.finish(complete=self.update_complete and not result.stopped,
                                         json_requests=result.requests - downloads, downloads=downloads,
                                         latency_seconds=client.observed_latency())
            result.run, result.update = self.update.run, figures["words"]
        result.complete_through = self.db.kv_get(KV_COMPLETE_THROUGH)
        if walk.problems or result.unresolved:
            log_discover.warning("discovery: %d search rows unresolvable (no documentID, no docketEntryID); "
                                 "answers lacking a field: %s", result.unresolved,
                                 ", ".join(f"{name} x{count}" for name, count in walk.problems.most_common()) or "none")
        if result.list_warnings:
            log_discover.warning("discovery: lists the court may have cut short: %s", ", ".join(
                f"{kind} x{count}" for kind, count in sorted(result.list_warnings.items())))
        if result.foreign_rows:
            log_discover.info("discovery: %d search rows outside their shard's prefix dropped", result.foreign_rows)
        return result


# The court's API family -> its discovery (the same units, `step`, `unit`, `details`, `finish`).
DISCOVERIES: dict[str, type] = {"ctrack": Discovery, "trportal": TRPortalDiscovery}


def discovery_for(ctx: Context, *, opinion_pass: bool = False):
    """The discovery of the court the run's client holds (the configured court system's): its family's."""
    family = ctx.client.court.family if ctx.client is not None else court_of_config(ctx.cfg).family
    return DISCOVERIES[family](ctx, opinion_pass=opinion_pass)


def _discover_fall_back(ctx: Context, db: Database, result: DiscoverResult, unusable: dict[str, str]) -> str:
    """The other strategy after one proved unusable (auto only), kept; CourtUnreachable when none is left."""
    failed = result.strategy
    other = next(name for name in STRATEGIES if name != failed)
    if ctx.cfg.DISCOVERY != "auto" or other in unusable:
        said = "; ".join(f"{name}: {why}" for name, why in unusable.items())
        raise CourtUnreachable(f"no discovery strategy works against {ctx.cfg.API_BASE} ({said})")
    why = f"{failed} was unusable: {unusable[failed]}"[:300]
    log_discover.warning("discovery strategy: falling back to %s (%s)", other, why)
    db.kv_set(KV_DISCOVERY_STRATEGY, other)
    db.kv_set("discovery_strategy_reason", why)
    result.fallback = why
    return other


def _discover_strategy(ctx: Context, db: Database, client: CourtClient) -> str:
    """DISCOVERY, or for auto the kept choice, or probes of the searches (kept): the document search,
    newest shard first, until one answers rows (or every shard is empty); then, unless its rows
    carry documentID, the case search likewise. CourtUnreachable when neither search is there."""
    configured = ctx.cfg.DISCOVERY
    if configured != "auto":
        strategy, why = choose_strategy(configured, None)
    else:
        kept = db.kv_get(KV_DISCOVERY_STRATEGY)
        if kept in STRATEGIES:
            return kept
        # Newest first: where rows are likeliest.
        shards = list(reversed(client.court.numbers.shards(ctx.cfg.FIRST_YEAR, ctx.cfg.last_year)))
        try:
            document_rows = _probe_search(client.search_documents, shards)
            case_search = "unknown"
            if not (document_rows and all(document_id_of(item) for item in document_rows)):
                rows = _probe_search(client.search_cases, shards)
                case_search = "absent" if rows is None else "rows" if rows else "empty"
        except TransientFetchError as exc:
            # Undecided: the confirmed case walk for this run, and the probe again next run.
            log_discover.warning("discovery strategy: the probe failed (%s); the case walk this run", exc)
            return "cases"
        strategy, why = choose_strategy(configured, document_rows, case_search)
        if not strategy:
            raise CourtUnreachable(f"no discovery strategy works against {ctx.cfg.API_BASE}: {why}")
    log_discover.info("discovery strategy: %s (%s)", strategy, why)
    db.kv_set(KV_DISCOVERY_STRATEGY, strategy)
    db.kv_set("discovery_strategy_reason", why)
    return strategy


def _probe_search(search: Callable[[str, int, int], SearchPage], shards: list[str]) -> list | None:
    """The first rows a search answers, shard by shard ([]: none in any shard; None: refused)."""
    for shard in shards:
        try:
            page = search(shard, 1, DISCOVER_PROBE_ROWS)
        except SearchRefused:
            return None
        except ResultsLimitExceeded:
            continue
        if page.raw_items:
            return page.raw_items
    return []

