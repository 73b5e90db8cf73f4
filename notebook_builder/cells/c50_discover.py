"""Discover: enumerate every document the court serves, shard by shard, sweep after sweep.

Guarantees:
- Shards are `YYYY-CA` and `YYYY-SC` for FIRST_YEAR..last_year (`plan_shards`).
  A shard whose `x-ctrack-paging-totalcount` exceeds the results limit the
  court announces (read from its header, never assumed) is split by the next
  digit of the zero-padded sequence (`split_shard`: 2019-CA → 2019-CA-0 …
  2019-CA-9 → 2019-CA-00 …), recursively, never truncated. A 400, or the
  total crossing the limit while paging, splits the same way.
- Paging trusts `resultcount` and `moreresults` (1-based startindex), never
  the page size asked for. Each page's rows are upserted as `discovered`
  (metadata refreshed, a status never moved backwards) in the same
  transaction that adds the page to its shard's progress row.
- Sweeps repeat until one, complete and without errors, adds fewer than
  CONVERGENCE_DELTA documents; then kv `discovery_converged_at` is set (what
  status.json's `done` reads). At most MAX_SWEEPS sweeps a run. Every sweep
  has its `discovery_runs` row; `discovery_shards` holds each shard's state,
  and kv `discovery_sweep` the current sweep, so a killed or stopped sweep
  resumes at its first pending shard and never re-does a finished one.
- A stop (signal or budget, `clock.should_stop()`) is honoured between
  pages: the shard in flight stays pending. A shard whose page fails
  SEARCH_ATTEMPTS times is recorded as `error` and counted; a sweep with an
  error never counts as converged.
- The excludeselflinks trap fails loudly (`CourtTrapError`): besides the
  client's per-answer checks, a top-level shard that held documents before
  and now reports none, and a complete sweep that saw no document at all,
  raise instead of reading as an empty court.
- DRY_RUN: no network, returns at once.

Knobs read: FIRST_YEAR, LAST_YEAR, PAGE_SIZE, CONVERGENCE_DELTA, MAX_SWEEPS,
DRY_RUN (and the client's: PACING*, BACKOFF_*, SEARCH_ATTEMPTS, HTTP_TIMEOUT).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from .c00_config import ResultsLimitExceeded, StopRequested, TransientFetchError, utc_now
from .c10_database import DOCUMENT_METADATA_COLUMNS, Database
from .c30_client import CourtClient, CourtTrapError, SearchPage
from .c35_context import Context, progress

log_discover = logging.getLogger("kycourt.discover")

DISCOVER_COURT_CODES = ("CA", "SC")
DISCOVER_CASE_NUMBER_LENGTH = len("2019-CA-0000")   # a full, zero-padded case number cannot split further


@dataclass
class DiscoverResult:
    sweeps: int = 0          # sweeps worked on in this run (a resumed one included)
    pages: int = 0
    rows_seen: int = 0
    rows_new: int = 0
    errors: int = 0          # shards recorded as 'error'
    converged: bool = False
    seconds: float = 0.0
    documents: int = 0       # documents in the table afterwards
    stopped: bool = False


# ----------------------------------------------------------- pure decisions


def plan_shards(first: int, last: int) -> list[str]:
    """Top-level shards, in case-number order: 1990-CA, 1990-SC, 1991-CA, …"""
    return [f"{year}-{court}" for year in range(first, last + 1) for court in DISCOVER_COURT_CODES]


def split_shard(shard: str) -> list[str]:
    """The next-digit children of a shard; [] when it is already a whole case number."""
    if len(shard) >= DISCOVER_CASE_NUMBER_LENGTH:
        return []
    stem = shard + "-" if len(shard) == len("2019-CA") else shard
    return [stem + digit for digit in "0123456789"]


def needs_split(total_count: int, results_limit: int | None) -> bool:
    return results_limit is not None and total_count > results_limit


def top_level_shard(shard: str) -> str:
    return shard[:len("2019-CA")]


def metadata_fingerprint(row) -> int:
    """What discovery knows of a document, hashed: an unchanged row needs no write."""
    return hash(tuple(map(row.get, DOCUMENT_METADATA_COLUMNS)))


def is_converged(*, complete: bool, errors: int, rows_new: int, delta: int) -> bool:
    return complete and errors == 0 and rows_new < delta


# -------------------------------------------------------------------- stage


def discover(ctx: Context) -> DiscoverResult:
    """Runs sweeps until discovery converges, MAX_SWEEPS are done, or the run must stop."""
    cfg = ctx.cfg
    result = DiscoverResult()
    if cfg.DRY_RUN:
        log_discover.info("dry run: discovery makes no requests")
        return result
    db = ctx.open_database()
    client = ctx.client
    own_client = client is None
    if own_client:
        client = CourtClient(cfg, ctx.clock)
    started = time.monotonic()
    plan = plan_shards(cfg.FIRST_YEAR, cfg.last_year)
    # Rows the table already holds unchanged are not rewritten (most rows of every sweep after
    # the first): the upsert would be a no-op, and skipping it keeps Discover near the bare
    # paging loop's speed. ~25 MB for 100k documents.
    known = {values[0]: hash(tuple(values[1:])) for values in db.iter_document_metadata()}
    try:
        while result.sweeps < cfg.MAX_SWEEPS and not ctx.clock.should_stop():
            sweep = _discover_current_sweep(db)
            result.sweeps += 1
            summary, stopped = _discover_sweep(ctx, db, client, sweep, plan, result, known)
            if stopped:
                result.stopped = True
                break
            if is_converged(complete=True, errors=summary["errors"], rows_new=summary["rows_new"],
                            delta=cfg.CONVERGENCE_DELTA):
                db.kv_set("discovery_converged_at", utc_now())
                result.converged = True
                break
        result.stopped = result.stopped or ctx.clock.stop_event.is_set()
    finally:
        if own_client:
            client.close()
        result.seconds = round(time.monotonic() - started, 3)
        result.documents = db.document_count()
    return result


def _discover_current_sweep(db: Database) -> int:
    """The unfinished sweep kv 'discovery_sweep' names, or the next one."""
    current = int(db.kv_get("discovery_sweep", "0") or 0)
    runs = {row["sweep"]: row for row in db.discovery_runs()}
    if current in runs and not runs[current]["complete"]:
        return current
    return max([current, *runs]) + 1


def _discover_sweep(ctx: Context, db: Database, client: CourtClient, sweep: int, plan: list[str],
                    result: DiscoverResult, known: dict[str, int]):
    db.start_sweep(sweep, plan)
    db.kv_set("discovery_sweep", sweep)
    states = db.shard_states(sweep)
    started = time.monotonic()
    stopped = False
    with progress(sum(states.values()), f"discover sweep {sweep}", unit="shard") as bar:
        bar.update(sum(states.values()) - states.get("pending", 0))
        while True:
            pending = db.pending_shards(sweep)
            if not pending:
                break
            outcome = _discover_shard(ctx, db, client, sweep, pending[0], result, known)
            if outcome == "stopped":
                stopped = True
                break
            if outcome == "split":
                bar.total += len(split_shard(pending[0]))
                bar.refresh()
            bar.update(1)
    summary = db.finish_sweep(sweep, time.monotonic() - started, complete=not stopped)
    log_discover.info("sweep %d %s: %d shards, %d pages, %d rows seen, %d new, %d errors, %.1f s",
                      sweep, "stopped" if stopped else "complete", summary["shards"], summary["pages"],
                      summary["rows_seen"], summary["rows_new"], summary["errors"], summary["seconds"])
    if not stopped and summary["errors"] == 0 and summary["rows_seen"] == 0:
        raise CourtTrapError(f"sweep {sweep} saw no document in {summary['shards']} shards: the court "
                             "answered every search empty (the x-ctrack-excludeselflinks trap?)")
    return summary, stopped


def _discover_shard(ctx: Context, db: Database, client: CourtClient, sweep: int, shard: str,
                    result: DiscoverResult, known: dict[str, int]) -> str:
    """Pages one shard to its end: 'done', 'split', 'error' or 'stopped' (left pending)."""
    cfg = ctx.cfg
    start = 1
    page: SearchPage | None = None
    try:
        while True:
            if ctx.clock.should_stop():
                return "stopped"
            page = client.search_documents(shard, start, cfg.PAGE_SIZE)
            if needs_split(page.total_count, page.results_limit):
                raise ResultsLimitExceeded(f"{shard}: {page.total_count} results, limit {page.results_limit}")
            if (start == 1 and page.total_count == 0 and shard == top_level_shard(shard)
                    and db.shard_has_documents(shard)):
                raise CourtTrapError(f"{shard}: the court reports no documents in a shard that held some "
                                     "(the x-ctrack-excludeselflinks trap?)")
            rows = page.items
            changed = []
            for row in rows:
                row["shard"] = top_level_shard(shard)
                fingerprint = metadata_fingerprint(row)
                if known.get(row["document_id"]) != fingerprint:
                    changed.append((row, fingerprint))
            with db.transaction():
                new = db.upsert_discovered(row for row, _ in changed) if changed else 0
                db.add_shard_progress(sweep, shard, pages=1, rows_seen=len(rows), rows_new=new)
            known.update((row["document_id"], fingerprint) for row, fingerprint in changed)
            result.pages += 1
            result.rows_seen += len(rows)
            result.rows_new += new
            if not page.more:
                break
            if page.result_count <= 0:
                raise TransientFetchError(f"{shard}: the court announced more results at {start} but sent none")
            start += page.result_count
    except StopRequested:
        return "stopped"
    except ResultsLimitExceeded as exc:
        children = split_shard(shard)
        total = page.total_count if page is not None else None
        if not children:
            return _discover_shard_error(db, sweep, shard, result, f"cannot split further: {exc}", total)
        db.finish_shard(sweep, shard, state="split", total_count=total, children=children)
        return "split"
    except TransientFetchError as exc:
        return _discover_shard_error(db, sweep, shard, result, str(exc), page.total_count if page else None)
    db.finish_shard(sweep, shard, state="done", total_count=page.total_count)
    return "done"


def _discover_shard_error(db: Database, sweep: int, shard: str, result: DiscoverResult, error: str,
                          total: int | None) -> str:
    log_discover.warning("sweep %d shard %s: %s", sweep, shard, error)
    db.finish_shard(sweep, shard, state="error", total_count=total, error=error[:500])
    result.errors += 1
    return "error"
