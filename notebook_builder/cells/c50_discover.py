"""Discover: enumerate every document the court serves, shard by shard, sweep after sweep.

Guarantees:
- Shards are `YYYY-CA` and `YYYY-SC` for FIRST_YEAR..last_year (`plan_shards`).
  A shard whose `x-ctrack-paging-totalcount` exceeds the results limit the
  court announces (read from its header, never assumed) is split by the next
  digit of the zero-padded sequence (`split_shard`: 2019-CA → 2019-CA-0 …
  2019-CA-9 → 2019-CA-00 …), recursively, never truncated. A 400, or the
  total crossing the limit while paging, splits the same way.
- Paging trusts `resultcount` and `moreresults` (1-based startindex), never
  the page size asked for. The court's relevance order is unstable, so one
  pass can miss rows at page boundaries: when a pass ends with fewer
  distinct document ids than the shard's totalcount, the shard is paged
  again (at most DISCOVER_MAX_REPAGES extra passes, stopping as soon as the
  distinct count reaches the total), so each sweep is near-complete.
- Rows are upserted as `discovered` (metadata refreshed, a status never
  moved backwards); rows whose metadata fingerprint is unchanged are not
  written at all. A shard's rows and progress are held in memory
  (`DiscoveryWriter`, at most DISCOVER_FLUSH_ROWS rows per batch) and
  committed in few large transactions (DISCOVER_COMMIT_ROWS rows, or
  DISCOVER_COMMIT_SECONDS) by one background writer thread on its own
  connection, so the SQL overlaps with the waits for the court; no
  transaction ever waits on a request. A shard's `done` is in the
  transaction that holds its last rows, so it is never marked done before
  its rows are committed.
- Sweeps repeat until one, complete and without errors, adds fewer than
  CONVERGENCE_DELTA documents; then kv `discovery_converged_at` is set (what
  status.json's `done` reads). At most MAX_SWEEPS sweeps a run. Every sweep
  has its `discovery_runs` row; `discovery_shards` holds each shard's state,
  and kv `discovery_sweep` the current sweep, so a killed or stopped sweep
  resumes at its first pending shard and never re-does a finished one (the
  rows of a shard in flight at a kill may be fetched again).
- A stop (signal or budget, `clock.should_stop()`) is honoured between
  pages: the shard in flight stays pending, and what was fetched is
  committed before `discover()` returns, on a stop and on an exception
  alike. A shard whose page fails SEARCH_ATTEMPTS times is
  recorded as `error` and counted; a sweep with an error never counts as
  converged.
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
import operator
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from .c00_config import ResultsLimitExceeded, StopRequested, TransientFetchError, utc_now
from .c10_database import DOCUMENT_METADATA_COLUMNS, Database
from .c30_client import (DOCUMENT_ROW_FIELDS, CourtClient, CourtTrapError, SearchPage, document_id_of,
                         normalize_document_row)
from .c35_context import Context, progress

log_discover = logging.getLogger("kycourt.discover")

DISCOVER_COURT_CODES = ("CA", "SC")
DISCOVER_CASE_NUMBER_LENGTH = len("2019-CA-0000")   # a full, zero-padded case number cannot split further
DISCOVER_MAX_REPAGES = 3        # extra passes over a shard whose distinct rows fall short of its total
DISCOVER_FLUSH_ROWS = 5000      # changed rows of one shard handed to the writer at a time (bounds memory)
# Discovery commits the batches it holds once they reach this many rows or the first has waited
# this long: few large transactions, because random document ids touch most index pages and each
# commit writes every page it touched into the WAL again (MEASURED: per shard 1.8 s, per 20,000
# rows 1.1 s for the first sweep's 98,724 rows).
DISCOVER_COMMIT_ROWS = 20000
DISCOVER_COMMIT_SECONDS = 2.0


@dataclass
class DiscoverResult:
    sweeps: int = 0          # sweeps worked on in this run (a resumed one included)
    pages: int = 0
    rows_seen: int = 0
    rows_new: int = 0
    errors: int = 0          # shards recorded as 'error'
    repages: int = 0         # extra passes over shards whose distinct rows fell short of the total
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


def needs_repage(distinct_seen: int, total_count: int, repages: int, max_repages: int) -> bool:
    """After a whole pass over a shard: page it again while its distinct ids fall short of its total."""
    return distinct_seen < total_count and repages < max_repages


def top_level_shard(shard: str) -> str:
    return shard[:len("2019-CA")]


_discover_metadata_of = operator.itemgetter(*DOCUMENT_METADATA_COLUMNS)


def metadata_fingerprint(row) -> int:
    """What discovery knows of a document (a row with every metadata column), hashed: an unchanged
    row needs no write. The same as hashing the table's columns in DOCUMENT_METADATA_COLUMNS order."""
    return hash(_discover_metadata_of(row))


# The rowMap keys of DOCUMENT_METADATA_COLUMNS but 'shard' (the last column; discovery adds it).
_DISCOVER_RAW_KEYS = tuple(DOCUMENT_ROW_FIELDS[column] for column in DOCUMENT_METADATA_COLUMNS if column != "shard")
_discover_raw_values = operator.itemgetter(*_DISCOVER_RAW_KEYS)


def raw_row_fingerprint(item, shard: str) -> int:
    """`metadata_fingerprint` of the row a court resultItem normalizes to, computed from the item
    itself (normalization copies these values as they are), so unchanged rows are never normalized."""
    row_map = item.get("rowMap") or {}
    try:
        values = _discover_raw_values(row_map)
    except KeyError:
        values = tuple(row_map.get(key) for key in _DISCOVER_RAW_KEYS)
    return hash((*values, shard))


def is_converged(*, complete: bool, errors: int, rows_new: int, delta: int) -> bool:
    return complete and errors == 0 and rows_new < delta


# ------------------------------------------------------------------ writer


@dataclass
class DiscoveryBatch:
    """What one shard hands the writer: rows to upsert, progress, and (last) the shard's outcome."""
    shard: str
    rows: list[dict] = field(default_factory=list)
    pages: int = 0
    rows_seen: int = 0
    state: str | None = None          # None: progress only, the shard stays pending
    total_count: int | None = None
    children: list[str] = field(default_factory=list)
    error: str | None = None

    def take_progress(self) -> "DiscoveryBatch":
        """The rows and counts so far as a progress-only batch; this one starts empty again."""
        taken = DiscoveryBatch(self.shard, self.rows, self.pages, self.rows_seen)
        self.rows, self.pages, self.rows_seen = [], 0, 0
        return taken


class DiscoveryWriter:
    """Holds a sweep's batches and commits them, in the order handed in, in few large transactions.

    A commit happens once the held batches reach DISCOVER_COMMIT_ROWS rows or the oldest has
    waited DISCOVER_COMMIT_SECONDS (checked as batches arrive), and at `close()`, which commits
    whatever is held and waits for it, on a stop and on an exception alike.

    Commits run in one background thread on a connection of its own, so the SQL (~2 s for the
    first sweep's 98,724 rows, most of it with the GIL released) overlaps with the waits for the
    court's next page instead of adding to them. At most one commit is in flight: handing over
    the next waits for it, which bounds memory to two commits' rows. A transaction is only ever
    as long as its SQL; none waits on the court. An error in the writer is raised from the first
    `submit()` after it (before another page is asked for) or from `close()`, and nothing after
    it is committed.
    """

    def __init__(self, db: Database, sweep: int):
        self.db = db
        self.sweep = sweep
        self.rows_new = 0
        self._held: list[DiscoveryBatch] = []
        self._held_rows = 0
        self._held_since = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight: Future | None = None
        self._conn: Database | None = None     # the writer thread's own connection
        self._failed = False

    def submit(self, batch: DiscoveryBatch) -> None:
        if self._in_flight is not None and self._in_flight.done():
            self._wait()             # a failed commit raises here, not a commit later
        if not self._held:
            self._held_since = time.monotonic()
        self._held.append(batch)
        self._held_rows += len(batch.rows)
        if (self._held_rows >= DISCOVER_COMMIT_ROWS
                or time.monotonic() - self._held_since >= DISCOVER_COMMIT_SECONDS):
            self.commit()

    def commit(self) -> None:
        """Hands the held batches to the writer thread (after the commit in flight has finished)."""
        self._wait()
        if not self._held or self._failed:
            return
        held, self._held, self._held_rows = self._held, [], 0
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="discover-writer")
        self._in_flight = self._pool.submit(self._write, held)

    def _wait(self) -> None:
        """Waits for the commit in flight; its error, if any, is raised here."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            try:
                self.rows_new += in_flight.result()
            except BaseException:
                self._failed = True
                raise

    def _write(self, held: list[DiscoveryBatch]) -> int:
        """One transaction: each batch's rows, then its progress or outcome (in the writer thread)."""
        if self._conn is None:
            self._conn = Database.open(self.db.path)
        db = self._conn
        rows_new = 0
        with db.transaction():
            for batch in held:
                new = db.upsert_discovered(batch.rows) if batch.rows else 0
                if batch.state is None:
                    db.add_shard_progress(self.sweep, batch.shard, pages=batch.pages,
                                          rows_seen=batch.rows_seen, rows_new=new)
                else:
                    db.finish_shard(self.sweep, batch.shard, state=batch.state, total_count=batch.total_count,
                                    pages=batch.pages, rows_seen=batch.rows_seen, rows_new=new,
                                    error=batch.error, children=batch.children)
                rows_new += new
        return rows_new

    def close(self) -> None:
        """Commits what is held and waits for it; the writer thread and its connection end."""
        try:
            self.commit()
            self._wait()
        finally:
            if self._pool is not None:
                # Queued behind any commit still running (one thread, in order), so the
                # connection it opens is closed after it, on its own thread.
                self._pool.submit(self._close_connection)
                self._pool.shutdown(wait=True)
                self._pool = None

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "DiscoveryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
    known = {values[0]: metadata_fingerprint(values) for values in db.iter_document_metadata()}
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
    # The pending list lives here, not in a query per shard: a shard handed to the writer may
    # not be committed as done yet. Kept in the table's order (split children sort right
    # after their parent), so a resumed sweep starts where this one would have gone next.
    pending = db.pending_shards(sweep)
    repages_before = result.repages
    started = time.monotonic()
    stopped = False
    writer = DiscoveryWriter(db, sweep)
    try:
        with writer, progress(ctx.cfg, sum(states.values()), f"discover sweep {sweep}", unit="shard") as bar:
            bar.update(sum(states.values()) - states.get("pending", 0))
            while pending:
                shard = pending.pop(0)
                outcome = _discover_shard(ctx, db, client, writer, shard, result, known)
                if outcome == "stopped":
                    stopped = True
                    break
                if outcome == "split":
                    children = split_shard(shard)
                    pending = sorted(pending + children)
                    bar.total += len(children)
                    bar.refresh()
                bar.update(1)
    finally:
        result.rows_new += writer.rows_new
    summary = db.finish_sweep(sweep, time.monotonic() - started, complete=not stopped)
    log_discover.info("sweep %d %s: %d shards, %d pages (%d shard re-pages), %d rows seen, %d new, "
                      "%d errors, %.1f s", sweep, "stopped" if stopped else "complete", summary["shards"],
                      summary["pages"], result.repages - repages_before, summary["rows_seen"],
                      summary["rows_new"], summary["errors"], summary["seconds"])
    if not stopped and summary["errors"] == 0 and summary["rows_seen"] == 0:
        raise CourtTrapError(f"sweep {sweep} saw no document in {summary['shards']} shards: the court "
                             "answered every search empty (the x-ctrack-excludeselflinks trap?)")
    return summary, stopped


def _discover_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter, shard: str,
                    result: DiscoverResult, known: dict[str, int]) -> str:
    """Pages one shard to its end: 'done', 'split', 'error' or 'stopped' (left pending).

    Whatever it fetched goes to the writer, whatever the outcome (an exception included): those
    rows are discoveries even when the shard must be paged again.
    """
    batch = DiscoveryBatch(shard)
    try:
        outcome = _discover_page_shard(ctx, db, client, writer, batch, result, known)
    finally:
        writer.submit(batch)
    if outcome == "error":
        log_discover.warning("sweep %d shard %s: %s", writer.sweep, shard, batch.error)
        result.errors += 1
    return outcome


def _discover_page_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter,
                         batch: DiscoveryBatch, result: DiscoverResult, known: dict[str, int]) -> str:
    """The paging of `_discover_shard`; fills `batch`, its outcome included."""
    cfg = ctx.cfg
    shard = batch.shard
    top = top_level_shard(shard)
    seen: set[str] = set()     # distinct document ids over every pass of this shard
    repages = 0
    start = 1
    page: SearchPage | None = None
    try:
        while True:
            if ctx.clock.should_stop():
                return "stopped"
            page = client.search_documents(shard, start, cfg.PAGE_SIZE)
            if needs_split(page.total_count, page.results_limit):
                raise ResultsLimitExceeded(f"{shard}: {page.total_count} results, limit {page.results_limit}")
            if (start == 1 and page.total_count == 0 and shard == top
                    and db.shard_has_documents(shard)):
                raise CourtTrapError(f"{shard}: the court reports no documents in a shard that held some "
                                     "(the x-ctrack-excludeselflinks trap?)")
            rows_seen = 0
            for item in page.raw_items:
                document_id = document_id_of(item)
                if document_id is None:
                    continue
                rows_seen += 1
                seen.add(document_id)
                fingerprint = raw_row_fingerprint(item, top)
                if known.get(document_id) != fingerprint:
                    known[document_id] = fingerprint
                    row = normalize_document_row(item)
                    row["shard"] = top
                    batch.rows.append(row)
            if rows_seen < page.raw_count:
                log_discover.warning("shard %s (start %d): %d rows without a document id skipped", shard,
                                     start, page.raw_count - rows_seen)
            batch.pages += 1
            batch.rows_seen += rows_seen
            result.pages += 1
            result.rows_seen += rows_seen
            if len(batch.rows) >= DISCOVER_FLUSH_ROWS:
                writer.submit(batch.take_progress())
            if page.more and not (repages and len(seen) >= page.total_count):
                if page.result_count <= 0:
                    raise TransientFetchError(f"{shard}: the court announced more results at {start} "
                                              "but sent none")
                start += page.result_count
                continue
            if not needs_repage(len(seen), page.total_count, repages, DISCOVER_MAX_REPAGES):
                break
            repages += 1
            result.repages += 1
            log_discover.debug("shard %s: %d distinct of %d after pass %d; paging it again",
                               shard, len(seen), page.total_count, repages)
            start = 1
    except StopRequested:
        return "stopped"
    except ResultsLimitExceeded as exc:
        children = split_shard(shard)
        batch.total_count = page.total_count if page is not None else None
        if not children:
            batch.state, batch.error = "error", f"cannot split further: {exc}"[:500]
            return "error"
        batch.state, batch.children = "split", children
        return "split"
    except TransientFetchError as exc:
        batch.state, batch.error = "error", str(exc)[:500]
        batch.total_count = page.total_count if page is not None else None
        return "error"
    if len(seen) < page.total_count:
        log_discover.info("shard %s: %d distinct documents of %d after %d passes", shard, len(seen),
                          page.total_count, repages + 1)
    batch.state, batch.total_count = "done", page.total_count
    return "done"
