"""The document search: discovery's first strategy, a shard's documents paged and written in few transactions.

Guarantees:
- `discover_shard` pages one shard of the document search (c44 `ShardPaging`) to its end: 'done',
  'split' (its next-digit children pending), 'error' or 'stopped' (left pending). Only rows whose
  metadata fingerprint differs from the table's are normalized and written; a row of a
  neighbouring number ("Starts With") is counted and dropped; a row without documentID is resolved
  through its docket entry's file list (the case walk's `resolve_rows`), never keyed by its `id`.
- `DiscoveryWriter` holds a sweep's batches (at most DISCOVER_FLUSH_ROWS rows a shard at a time) and
  commits them in the order handed in, in few large transactions: once DISCOVER_COMMIT_ROWS rows or
  the oldest DISCOVER_COMMIT_SECONDS old, and at `close()`, on a stop and on an exception alike. A
  shard's `done` is in the transaction of its last rows; no transaction waits on the court; after a
  failed commit nothing more is committed. With an update's `changes` (c19), the writes are watched
  and their changes recorded in the same transactions; a shard paged whole (every row it counts
  seen) withdraws ('delisted') the documents of its prefix the archive holds and it no longer lists,
  and a retitled case's documents the rows do not carry take its new title.

Knobs read: PAGE_SIZE (through ShardPaging).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from .c00_config import ResultsLimitExceeded, StopRequested, TransientFetchError
from .c10_database import Database
from .c15_discovery_state import DiscoveryState
from .c19_changes import RunChanges, watching
from .c25_court import document_id_of, shard_holds
from .c30_client import CourtClient
from .c35_context import Context
from .c44_discovery_rules import DiscoverResult, ShardPaging
from .c45_case_walk import CaseWalk

log_documents = logging.getLogger("kycourt.discover")

DISCOVER_FLUSH_ROWS = 5000      # changed rows of one shard handed to the writer at a time (bounds memory)
# Discovery commits the batches it holds once they reach this many rows or the first has waited
# this long: few large transactions, because random document ids touch most index pages and each
# commit writes every page it touched into the WAL again.
DISCOVER_COMMIT_ROWS = 20000
DISCOVER_COMMIT_SECONDS = 2.0


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
    without_id: list = field(default_factory=list)     # rows without documentID (resolved after paging)
    listed: set[str] | None = None     # a complete pass's document ids: what the archive holds beyond is delisted

    def take_progress(self) -> "DiscoveryBatch":
        """The rows and counts so far as a progress-only batch; this one starts empty again."""
        taken = DiscoveryBatch(self.shard, self.rows, self.pages, self.rows_seen)
        self.rows, self.pages, self.rows_seen = [], 0, 0
        return taken


class DiscoveryWriter:
    """Holds a sweep's batches and commits them, in the order handed in, in few large transactions.

    A commit happens once the held batches reach DISCOVER_COMMIT_ROWS rows or the oldest has
    waited DISCOVER_COMMIT_SECONDS (checked as batches arrive), and at `close()`, which commits
    whatever is held, on a stop and on an exception alike. A transaction is only ever as long as
    its SQL; none waits on the court. After a failed commit nothing more is committed. Commits run
    in the stage's own thread (a writer thread is not worth its keep: bench/threads.py).
    """

    def __init__(self, db: Database, sweep: int, changes: RunChanges | None = None):
        self.db, self.changes = db, changes
        self.state = DiscoveryState(db)
        self.sweep = sweep
        self.rows_new = 0
        self._held: list[DiscoveryBatch] = []
        self._held_rows = 0
        self._held_since = 0.0
        self._failed = False

    def submit(self, batch: DiscoveryBatch) -> None:
        if not self._held:
            self._held_since = time.monotonic()
        self._held.append(batch)
        self._held_rows += len(batch.rows)
        if (self._held_rows >= DISCOVER_COMMIT_ROWS
                or time.monotonic() - self._held_since >= DISCOVER_COMMIT_SECONDS):
            self.commit()

    def commit(self) -> None:
        """Commits the held batches in one transaction; its error is raised here."""
        if not self._held or self._failed:
            return
        held, self._held, self._held_rows = self._held, [], 0
        try:
            self.rows_new += self._write(held)
        except BaseException:
            self._failed = True
            raise

    def _write(self, held: list[DiscoveryBatch]) -> int:
        """One transaction: each batch's rows, then its progress or outcome."""
        db, discovery, rows_new = self.db, self.state, 0
        with db.transaction(), watching(self.changes) as watch:
            for batch in held:
                new = discovery.upsert_discovered(batch.rows, watch=watch) if batch.rows else 0
                if watch is not None and batch.rows:
                    _follow_titles(discovery, batch.rows, watch)
                if batch.listed is not None and watch is not None:
                    discovery.withdraw_unlisted("upper(case_number) LIKE ? || '%'", (batch.shard.upper(),),
                                                batch.listed, watch)
                if batch.state is None:
                    discovery.add_shard_progress(self.sweep, batch.shard, pages=batch.pages,
                                                 rows_seen=batch.rows_seen, rows_new=new)
                else:
                    discovery.finish_shard(self.sweep, batch.shard, state=batch.state, total_count=batch.total_count,
                                           pages=batch.pages, rows_seen=batch.rows_seen, rows_new=new,
                                           error=batch.error, children=batch.children)
                rows_new += new
        return rows_new

    def close(self) -> None:
        """Commits what is held."""
        self.commit()

    def __enter__(self) -> "DiscoveryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def discover_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter, shard: str,
                   result: DiscoverResult, known: dict[str, int], walk: CaseWalk) -> str:
    """Pages one shard to its end: 'done', 'split', 'error' or 'stopped' (left pending).

    Whatever it fetched goes to the writer, whatever the outcome (an exception included): those
    rows are discoveries even when the shard must be paged again.
    """
    batch = DiscoveryBatch(shard)
    try:
        outcome = _page_shard(ctx, db, client, writer, batch, result, known)
        if batch.without_id and outcome in ("done", "error"):
            # Rows that are docket entries: their documents come from the entries' file lists.
            for row in walk.resolve_rows(batch.without_id, client.court.numbers.top_level_shard(shard)):
                if row["document_id"] not in known:
                    known[row["document_id"]] = 0
                    batch.rows.append(row)
    except StopRequested:
        outcome = "stopped"
    finally:
        writer.submit(batch)
    if outcome == "error":
        log_documents.warning("sweep %d shard %s: %s", writer.sweep, shard, batch.error)
        result.errors += 1
    return outcome


def _page_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter,
                batch: DiscoveryBatch, result: DiscoverResult, known: dict[str, int]) -> str:
    """The paging of `discover_shard`; fills `batch`, its outcome included."""
    shard, court = batch.shard, client.court
    warned = False             # said once a shard: rows without documentID
    top = court.numbers.top_level_shard(shard)
    seen: set[str] = set()     # distinct document ids over every pass of this shard
    foreign: set[str] = set()  # rows of neighbouring numbers ("Starts With" answers them too): not this shard's
    paging = ShardPaging(ctx, db, client.search_documents, shard, "documents", lambda: len(seen) + len(foreign),
                         result, top_level=shard == top)
    try:
        for page in paging.pages():
            rows_seen = 0
            for item in page.raw_items:
                number, _, entry_id = court.search_row_fields(item)
                if not shard_holds(shard, number):
                    key = document_id_of(item) or str(entry_id)
                    if key not in foreign:
                        foreign.add(key)
                        result.foreign_rows += 1
                    continue
                document_id = document_id_of(item)
                if document_id is None:
                    # Counted and resolved after paging (a docket entry's files); never keyed by its id.
                    rows_seen += 1
                    seen.add(f"entry:{entry_id}" if entry_id is not None else f"row:{len(seen)}")
                    batch.without_id.append(item)
                    continue
                rows_seen += 1
                seen.add(document_id)
                fingerprint = court.document_row_key(item, top)
                if known.get(document_id) != fingerprint:
                    known[document_id] = fingerprint
                    row = court.document_row(item)
                    row["shard"] = top
                    row["related_case_numbers"] = court.numbers.related(row["description"])
                    batch.rows.append(row)
            if batch.without_id and not warned:
                warned = True
                log_documents.warning("shard %s: rows without documentID; resolved through their docket "
                                      "entries' file lists", shard)
            batch.pages += 1
            batch.rows_seen += rows_seen
            result.pages += 1
            result.rows_seen += rows_seen
            if len(batch.rows) >= DISCOVER_FLUSH_ROWS:
                writer.submit(batch.take_progress())
    except StopRequested:
        return "stopped"
    except ResultsLimitExceeded as exc:
        children = court.numbers.split_shard(shard)
        batch.total_count = paging.page.total_count if paging.page is not None else None
        if not children:
            batch.state, batch.error = "error", f"cannot split further: {exc}"[:500]
            return "error"
        batch.state, batch.children = "split", children
        return "split"
    except TransientFetchError as exc:
        batch.state, batch.error = "error", str(exc)[:500]
        batch.total_count = paging.page.total_count if paging.page is not None else None
        return "error"
    page = paging.page
    total = page.total_count - len(foreign)
    if len(seen) < total:
        log_documents.info("shard %s: %d distinct documents of %d after %d passes", shard, len(seen),
                           total, paging.repages + 1)
    batch.state, batch.total_count = "done", total
    if writer.changes is not None and not batch.without_id and len(seen) >= total:
        batch.listed = seen          # the shard's every document: one the archive holds beyond it was withdrawn
    return "done"


def _follow_titles(state: DiscoveryState, rows: list[dict], watch) -> None:
    """A retitled case's documents these rows do not carry (withdrawn, say) take its new title too."""
    listed = {row["document_id"] for row in rows}
    retitled = {row["case_id"]: row["case_title"] for row in rows
                if row.get("case_id") and "case_title" in watch.changed.get(row["document_id"], ())}
    for case_id, title in retitled.items():
        state.follow(watch, "case_title", "case_id", case_id, title, listed)
