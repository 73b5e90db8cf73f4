"""Discover: enumerate every document the court serves, shard by shard, sweep after sweep.

Guarantees:
- Shards are `YYYY-CA` and `YYYY-SC` for FIRST_YEAR..last_year (`plan_shards`),
  and the ADMIN shards `YYYY CA ADMIN`, `YYYY SC ADMIN` (`plan_sweep`).
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
- Discovery is a sequence of units (`Discovery`): the strategy; the opinion
  pass (when the crawl asks for it); each sweep's shards (the document
  search: a shard; the case walk: a shard's case search, then its cases a
  batch at a time); the file lists asked again; the opinion update or the
  window's closing. Every unit commits what it found before it returns, so
  the crawl (c75) downloads it before the next unit, and a kill loses only
  the unit in flight. `discover()` runs the units in turn, then (once
  discovery has converged) the details pass.
- Rows are upserted as `discovered` (metadata refreshed, a status never
  moved backwards); rows whose metadata fingerprint is unchanged are not
  written at all. A shard's rows and progress are held in memory
  (`DiscoveryWriter`, at most DISCOVER_FLUSH_ROWS rows per batch) and
  committed in few large transactions (DISCOVER_COMMIT_ROWS rows, or
  DISCOVER_COMMIT_SECONDS, and at the shard's end); no transaction ever
  waits on a request. A shard's `done` is in the transaction that holds its
  last rows, so it is never marked done before its rows are committed.
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
- Strategies (DISCOVERY): `documents` pages the document search as above;
  `cases` walks the record (ctrack-api.md's confirmed endpoints): each
  shard's case search (same paging, splitting and re-paging), then per case
  its docket entries and the file list of each entry with `hasDocuments`
  (on a case's first walk, not those of entries whose documents the table
  holds: the opinion pass found them). Each walked case is committed in one
  transaction with its `walked_sweep` and its search row's fingerprint
  (`case_row_fingerprint`), so a sweep killed (even by SIGKILL) resumes at
  the case in flight, the only one asked again. A later sweep walks a case
  again only when its search row changed (it closed, was reopened,
  retitled), when it is open and its last walk is OPEN_CASE_REWALK_DAYS old
  (an update), or, open, with FULL_SWEEP (`needs_walk`). A case whose docket
  entries the court will not list, or whose answers had the wrong shape, is
  recorded, not walked (walked again).
- The opinion pass (`Discovery(opinion_pass=True)`, the crawl's): in the
  case walk's first crawl, before the walk, the opinion search newest week
  first back to FIRST_YEAR (7-day windows, both courts, `sweep_opinions`),
  one window a unit, its progress in kv `opinion_pass_top` and
  `opinion_pass_from`; a failed window is left to the walk, a court without
  an opinion search ends the pass.
- The details pass (`Discovery.details`, CASE_DETAILS): each walked case's
  parties and lower courts, DISCOVER_DETAILS_BATCH cases a unit in
  case-number order, each committed with `cases.details_sweep`, once
  discovery has converged; a case the court gave no answer for waits for
  the next run.
- `auto` decides on evidence (`choose_strategy`): the document search is
  probed shard by shard, newest first, until one answers rows (or every
  shard is empty); rows carrying `documentID` choose `documents`; otherwise
  the case search is probed likewise, and the strategy whose search answers
  is preferred (no rows is no evidence). The choice is logged and kept in
  kv `discovery_strategy`. When the strategy in use proves unusable (its
  search refused with 401/403/404, or most of a sweep's docket-entry and
  file-list answers 404 or of the wrong shape: `strategy_failing`, judged
  after STRATEGY_EVIDENCE answers and at the sweep's end), the sweep is
  abandoned as errors (never converged) and auto falls back to the other
  strategy (kept, `DiscoverResult.fallback` says why); when none is left (or
  DISCOVERY names the one that failed), `CourtUnreachable` says what the
  court answered, and the run stops as the breaker stops it (exit 3).
- Exact shards: "Starts With" also answers neighbouring case numbers; a row
  whose case number does not start with its shard's prefix is counted
  (`foreign_rows`) and dropped, and never moves the shard's totals (its
  recorded total leaves them out; the repage rule counts them apart).
- A document id comes only from a `documentID` field. A search row without
  one is resolved through its docket entry's file list (`docketEntryID`),
  never from `id`; a row that cannot be resolved, a file without
  `documentID` and any answer of the wrong shape are counted per field
  (`DiscoverResult.shape_problems`, `unresolved`) and logged, never stored
  under a guessed id; a sweep that met as many as CONVERGENCE_DELTA (or 1%
  of its rows) never counts as converged. A file naming another entry as
  its `parentID` is counted (`parentID`) and dropped.
- Files with `documentAvailable: false` are documents rows (counted in
  `unavailable`): `failed`, http_status 404, document_available 0,
  last_error WITHHELD_ERROR, never requested while withheld; a later answer
  that lists one available queues it again (c10 `upsert_discovered`).
  An entry saying `hasDocuments` whose list is `[]` is kept and counted
  (`empty_entries`); such entries and those with withheld files are asked
  again once in each later sweep (`ask_again`, docket_entries
  `files_missing`). A null `documentText` is no text, never an error.
- ADMIN numbers (`2024 CA ADMIN - NON-CONFIDENTIAL OPINION - 002`) are
  swept as shards of their own (`YYYY CA ADMIN`, `YYYY SC ADMIN`); the real
  case numbers their descriptions name go to `related_case_numbers`.
- Convergence closes the window: before a sweep is reported converged, the
  opinion search (`sweep_opinions`: 7-day windows, both courts, entries to
  their file lists to documents rows; the one function every opinion pass
  calls) covers the days since the crawl began (kv `crawl_started_on`,
  with a week's overlap), for opinions filed meanwhile in cases that were
  closed when walked; kv `complete_through` is then today's Kentucky date
  (the day the crawl began when the court has no opinion search), and a
  failed window means another sweep.
- Incremental updates: once discovery has converged (and unless
  FULL_SWEEP), a run sweeps only the current and previous year's shards,
  then the opinion search (7-day windows, both courts) for the days since
  kv `opinions_checked_through` (with a week's overlap); a complete update
  sets kv `archive_updated_at` and `complete_through`. Days are Kentucky's
  (c00 `kentucky_today`).
- COURT_TEXT: the court's per-page `documentText` of each file is kept as
  `court_text/<sha256>.txt` (pages joined by form feeds) in the workspace and
  the store, and `court_text` rows name it.

Knobs read: FIRST_YEAR, LAST_YEAR, PAGE_SIZE, CONVERGENCE_DELTA, MAX_SWEEPS,
DRY_RUN, DISCOVERY, CASE_DETAILS, COURT_TEXT, FULL_SWEEP (and the client's:
PACING*, BACKOFF_*, SEARCH_ATTEMPTS, HTTP_TIMEOUT).
"""
from __future__ import annotations

import collections
import datetime as _dt
import hashlib
import json
import logging
import operator
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from .c00_config import (CourtUnreachable, IntegrityError, PermanentFetchError, PipelineError, ResultsLimitExceeded,
                         StopRequested, TransientFetchError, kentucky_today, utc_now)
from .c05_durable import atomic_write
from .c10_database import (KV_ARCHIVE_UPDATED_AT, KV_COMPLETE_THROUGH, KV_DISCOVERY_CONVERGED_AT, KV_DISCOVERY_STRATEGY,
                           Database)
from .c12_queues import WorkQueues
from .c15_discovery_state import DOCUMENT_METADATA_COLUMNS, DiscoveryState
from .c30_client import (COURT_NAMES, DOCUMENT_ROW_FIELDS, CourtClient, CourtTrapError, SearchPage, SearchRefused,
                         ShapeProblem, availability_of, court_of_case_number, document_id_of, normalize_case_header,
                         normalize_case_search_row, normalize_docket_entry, normalize_document_row,
                         normalize_entry_file, normalize_lower_court, normalize_party, related_case_numbers)
from .c34_mirror import progress
from .c35_context import Context

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
DISCOVER_PROBE_ROWS = 5         # rows each of the auto strategy's probes asks for
# The case walk's per-case answers (docket entries, file lists) are judged after this many: when
# most are unusable (404, not a list), its endpoints are not this court's (`strategy_failing`).
STRATEGY_EVIDENCE = 10
STRATEGIES = ("documents", "cases")
OPINION_WINDOW_DAYS = 7         # crawlers ask the opinion search for 7-day windows (longer ones went stale)
OPINION_OVERLAP_DAYS = 7        # an update re-reads this many days before the last one's end
COURT_TEXT_FOLDER = "court_text"
KV_CRAWL_STARTED_ON = "crawl_started_on"    # the Kentucky day the first sweep began
# The opinion pass: its windows end on the day it began (KV_OPINION_PASS_TOP) and go back a week at
# a time; KV_OPINION_PASS_FROM is the first day of the earliest window swept.
KV_OPINION_PASS_TOP = "opinion_pass_top"
KV_OPINION_PASS_FROM = "opinion_pass_from"
KV_OPINION_PASS_REFUSED = "opinion_pass_refused"     # the court has no usable opinion search: the walk finds them
# Windows of the opinion pass whose pages failed (JSON [[first, last], ...]): each is asked once more a
# run, after the pass's last window; the pass is complete only once none is left.
KV_OPINION_PASS_FAILED = "opinion_pass_failed"
# An open case whose search row is unchanged is walked again once its last walk is this old: the
# sweeps of one crawl (hours apart) skip it, a later update refreshes it.
OPEN_CASE_REWALK_DAYS = 28
DISCOVER_ASK_AGAIN_BATCH = 50   # file lists asked again in one unit of work
DISCOVER_DETAILS_BATCH = 25     # cases whose parties and lower courts one unit of the details pass fetches


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
    strategy: str = ""       # 'documents' or 'cases'
    incremental: bool = False
    cases_walked: int = 0
    entries_resolved: int = 0     # docket entries whose file list was asked for
    unresolved: int = 0           # search rows with neither documentID nor docketEntryID
    unavailable: int = 0          # files listed with documentAvailable: false (kept as withheld rows)
    empty_entries: int = 0        # entries saying hasDocuments whose file list was [] (asked again later)
    entries_asked_again: int = 0  # file lists asked again (empty or withheld before)
    foreign_rows: int = 0         # search rows outside their shard's prefix (neighbouring numbers), dropped
    opinion_rows: int = 0
    fallback: str | None = None   # why the strategy chosen first was given up in this run
    complete_through: str | None = None   # the Kentucky day up to which the archive is complete
    list_warnings: dict = field(default_factory=dict)     # doubtful lists (client.list_warnings), this run
    requests: int = 0             # requests this stage sent
    shape_problems: dict = field(default_factory=dict)   # field -> count of answers lacking it
    opinion_windows: int = 0      # windows of the opinion pass swept this run
    opinion_pass_complete: bool = False   # the crawl's opinion pass has swept every window
    entries_known: int = 0        # file lists the walk did not ask: their entry's documents are held
    cases_unchanged: int = 0      # walked before, search row unchanged: not walked again
    details_cases: int = 0        # cases whose parties and lower courts were fetched
    details_errors: int = 0       # cases whose details the court did not give (tried again next run)


# ----------------------------------------------------------- pure decisions


def plan_shards(first: int, last: int) -> list[str]:
    """Top-level shards, in case-number order: 1990-CA, 1990-SC, 1991-CA, …"""
    return [f"{year}-{court}" for year in range(first, last + 1) for court in DISCOVER_COURT_CODES]


def plan_admin_shards(first: int, last: int) -> list[str]:
    """The ADMIN-number shards (`2024 CA ADMIN`), which no `YYYY-CA` prefix matches."""
    return [f"{year} {court} ADMIN" for year in range(first, last + 1) for court in DISCOVER_COURT_CODES]


def plan_sweep(first: int, last: int, *, incremental: bool) -> list[str]:
    """Every shard of a sweep, sorted as the table sorts them; an update: the last two years only."""
    if incremental:
        first = max(first, last - 1)
    return sorted(plan_shards(first, last) + plan_admin_shards(first, last))


def needs_walk(previous: Mapping[str, Any] | None, case: Mapping[str, Any], sweep: int, *,
               days_since_walk: float = 0.0, rewalk_open: bool = False) -> bool:
    """Whether the case walk must fetch a case's record in this sweep.

    New cases and cases never walked, yes; a case walked in this very sweep (a resumed one), no.
    Afterwards: one whose search row (`search_row`, `case_row_fingerprint`) changed since its last
    walk (it closed, was reopened, retitled); an open one whose last walk is OPEN_CASE_REWALK_DAYS
    old (an unchanged row says nothing of the filings since), or with `rewalk_open` (FULL_SWEEP).
    A case walked before rows were fingerprinted: when open, or reopened."""
    if previous is None or previous["walked_sweep"] is None:
        return True
    if previous["walked_sweep"] >= sweep:
        return False
    if case.get("closed") != 1 and (rewalk_open or days_since_walk >= OPEN_CASE_REWALK_DAYS):
        return True
    if previous["search_row"] is None:
        return previous["closed"] != 1 or case.get("closed") == 0
    return previous["search_row"] != case.get("search_row")


def case_row_fingerprint(item: Mapping[str, Any]) -> str:
    """What a case search row says, hashed (stable across runs): a changed row means a changed case."""
    text = json.dumps(item.get("rowMap"), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def next_opinion_window(top: _dt.date, swept_from: _dt.date | None, first_day: _dt.date
                        ) -> tuple[_dt.date, _dt.date] | None:
    """The opinion pass's next window, newest first: the OPINION_WINDOW_DAYS days before the earliest
    one swept (`swept_from`; None: the window ending on `top`), never before `first_day`; None once
    the pass has reached `first_day`."""
    last = top if swept_from is None else swept_from - _dt.timedelta(days=1)
    if last < first_day:
        return None
    return max(first_day, last - _dt.timedelta(days=OPINION_WINDOW_DAYS - 1)), last


def opinion_windows_left(top: _dt.date, swept_from: _dt.date | None, first_day: _dt.date) -> int:
    """How many windows the opinion pass has left (`next_opinion_window`'s arguments)."""
    window = next_opinion_window(top, swept_from, first_day)
    return 0 if window is None else -(-((window[1] - first_day).days + 1) // OPINION_WINDOW_DAYS)


def opinion_pass_due(strategy: str, converged: bool, next_window: tuple | None, failed: int = 0) -> bool:
    """The opinion pass runs in the case walk's first crawl until its last window, and until its
    `failed` windows answered (each asked once more a run): the walk reaches an opinion only among
    every other filing, the opinion search lists them all in a few thousand requests. The document
    search lists opinions with their ids; an update has its own opinion sweep."""
    return strategy == "cases" and not converged and (next_window is not None or failed > 0)


def choose_strategy(configured: str, document_rows: list | None,
                    case_search: str = "unknown") -> tuple[str, str]:
    """(strategy, why) from the knob and, for auto, the evidence of the probes: `document_rows` the
    first rows the document search answered in any shard ([] none anywhere, None: refused, 404);
    `case_search` what the case search answered ("rows", "empty", "absent", or "unknown": not
    asked). No rows is no evidence; the strategy whose endpoints answer is preferred. ("", why)
    when neither search is there."""
    if configured != "auto":
        return configured, f"DISCOVERY={configured}"
    if document_rows and all(document_id_of(item) for item in document_rows):
        return "documents", "the document search answers rows with documentID"
    if case_search == "absent":
        if document_rows is None:
            return "", "the document search and the case search both answer 404"
        if document_rows:
            return "documents", ("the case search answers 404; the document search's rows are docket "
                                 "entries, resolved through their file lists")
        return "documents", "the case search answers 404; the document search answers, with no rows yet"
    if document_rows is None:
        return "cases", "the document search is absent (404)"
    if document_rows:
        return "cases", "the document search answers rows without documentID (docket entries)"
    if case_search == "rows":
        return "cases", "the document search answered no rows in any shard; the case search did"
    return "cases", "no search answered rows: the confirmed case walk"


def strategy_failing(usable: int, unusable: int, *, complete: bool = False) -> bool:
    """Whether a strategy's per-item endpoints are not this court's: most answers unusable (404, the
    wrong shape), once STRATEGY_EVIDENCE of them are in, or at the end of a sweep (`complete`) from
    two on (one removed case is no verdict on the endpoint)."""
    return unusable > usable and (unusable >= STRATEGY_EVIDENCE or (complete and unusable >= 2))


def probe_shards(first: int, last: int) -> list[str]:
    """The top-level shards the auto strategy probes, newest first (where rows are likeliest)."""
    return list(reversed(plan_shards(first, last)))


def shard_holds(shard: str, case_number: Any) -> bool:
    """Whether a search row belongs to its shard: its case number starts with the shard's prefix
    ("Starts With" also answers neighbouring numbers). A row that names no case number is kept."""
    if not isinstance(case_number, str) or not case_number.strip():
        return True
    return case_number.strip().upper().startswith(shard.upper())


def files_missing(has_documents: Any, files: list, withheld: int) -> str | None:
    """Why an entry's file list must be asked again: 'withheld' (a file the court does not serve
    yet), 'empty' (it says it has documents and listed none), None (complete)."""
    if withheld:
        return "withheld"
    if not files and has_documents:
        return "empty"
    return None


def opinion_windows(first_day: _dt.date, last_day: _dt.date, days: int = OPINION_WINDOW_DAYS) -> list[tuple[str, str]]:
    """[first, last] in windows of `days` days, as the opinion search takes them (MM/DD/YYYY)."""
    windows = []
    start = first_day
    while start <= last_day:
        end = min(last_day, start + _dt.timedelta(days=days - 1))
        windows.append((start.strftime("%m/%d/%Y"), end.strftime("%m/%d/%Y")))
        start = end + _dt.timedelta(days=1)
    return windows


def court_text_of(pages: list[str]) -> tuple[str, dict]:
    """The court's pages as one text (form feeds between pages) and its `court_text` figures."""
    text = "\f".join(pages)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text, {"sha256": digest, "pages": len(pages), "chars": len(text),
                  "replacement_chars": text.count("\ufffd")}


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


class ShardPaging:
    """The pages of one shard's search, pass after pass (the case walk's and the document search's).

    `pages()` yields each page the court sends, after checking it: over the court's results
    limit raises ResultsLimitExceeded (the shard is split), an empty first page of a top-level
    shard that held documents raises CourtTrapError, "more" with nothing sent raises
    TransientFetchError, a stop raises StopRequested. When a pass ends with fewer distinct ids
    (`distinct()`, counted by the caller as it reads the items) than the court's total, the shard
    is paged again, at most DISCOVER_MAX_REPAGES extra passes. `page` is the last page fetched.
    """

    def __init__(self, ctx: Context, db: Database, search: Callable[[str, int, int], SearchPage], shard: str,
                 noun: str, distinct: Callable[[], int], result: "DiscoverResult"):
        self.ctx, self.db, self.search, self.shard, self.noun = ctx, db, search, shard, noun
        self.distinct, self.result = distinct, result
        self.page: SearchPage | None = None
        self.repages = 0

    def pages(self) -> Iterator[SearchPage]:
        shard, noun = self.shard, self.noun
        start = 1
        while True:
            if self.ctx.clock.should_stop():
                raise StopRequested(self.ctx.clock.stop_reason or "stop requested")
            page = self.page = self.search(shard, start, self.ctx.cfg.PAGE_SIZE)
            if needs_split(page.total_count, page.results_limit):
                raise ResultsLimitExceeded(f"{shard}: {page.total_count} {noun}, limit {page.results_limit}")
            if (start == 1 and page.total_count == 0 and shard == top_level_shard(shard)
                    and DiscoveryState(self.db).shard_has_documents(shard)):
                raise CourtTrapError(f"{shard}: the court reports no {noun} in a shard that held documents before "
                                     "(the x-ctrack-excludeselflinks trap?)")
            yield page
            if page.more and not (self.repages and self.distinct() >= page.total_count):
                if page.result_count <= 0:
                    raise TransientFetchError(f"{shard}: the court announced more {noun} at {start} but sent none")
                start += page.result_count
                continue
            if not needs_repage(self.distinct(), page.total_count, self.repages, DISCOVER_MAX_REPAGES):
                return
            self.repages += 1
            self.result.repages += 1
            log_discover.debug("shard %s: %d distinct of %d after pass %d; paging it again",
                               shard, self.distinct(), page.total_count, self.repages)
            start = 1


def top_level_shard(shard: str) -> str:
    if shard[4:5] == " ":
        return shard[:len("2024 CA ADMIN")]
    return shard[:len("2019-CA")]


_discover_metadata_of = operator.itemgetter(*DOCUMENT_METADATA_COLUMNS)


def metadata_fingerprint(row) -> int:
    """What discovery knows of a document (a row with every metadata column and document_available),
    hashed: an unchanged row needs no write. The same as hashing the table's columns in
    DOCUMENT_METADATA_COLUMNS order, then its availability."""
    return hash((*_discover_metadata_of(row), row["document_available"]))


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
    return hash((*values, shard, availability_of(row_map.get("documentAvailable"))))


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
    without_id: list = field(default_factory=list)     # rows without documentID (resolved after paging)

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
    its SQL; none waits on the court. After a failed commit nothing more is committed.

    Commits run in the stage's own thread. A background writer thread used to overlap them with
    the waits for the court: measured (bench/threads.py), its work is 0.07 ms a document against
    the 1 ms of search pause a row costs at the default pacing, 0.002 h over the whole corpus:
    not worth a thread.
    """

    def __init__(self, db: Database, sweep: int):
        self.db = db
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
        db, rows_new = self.db, 0
        with db.transaction():
            for batch in held:
                new = DiscoveryState(db).upsert_discovered(batch.rows) if batch.rows else 0
                if batch.state is None:
                    DiscoveryState(db).add_shard_progress(self.sweep, batch.shard, pages=batch.pages,
                                          rows_seen=batch.rows_seen, rows_new=new)
                else:
                    DiscoveryState(db).finish_shard(self.sweep, batch.shard, state=batch.state, total_count=batch.total_count,
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


# -------------------------------------------------------------------- stage


class StrategyUnusable(PipelineError):
    """The court's answers show the discovery strategy in use is not this court's (404s, the wrong
    shape): the sweep is abandoned, and auto falls back to the other strategy."""


def discover(ctx: Context) -> DiscoverResult:
    """Runs sweeps until discovery converges, MAX_SWEEPS are done, or the run must stop; then, when
    nothing waits to be downloaded, the details pass. Once discovery has converged (and unless FULL_SWEEP), one
    incremental update instead. The same units of work as the crawl (c75), without its downloads."""
    if ctx.cfg.DRY_RUN:
        log_discover.info("dry run: discovery makes no requests")
        return DiscoverResult()
    discovery = Discovery(ctx)
    try:
        while discovery.step():
            pass
        if discovery.details_due():
            while discovery.details(DISCOVER_DETAILS_BATCH):
                pass
    finally:
        discovery.finish()
    return discovery.result


@dataclass
class ShardInFlight:
    """A case-walk shard whose case search is paged, its cases walked a batch at a time."""
    sweep: int
    shard: str
    cases: list[dict]                      # in case-number order
    previous: dict                         # case_id -> what the table held before (cases_to_walk)
    total: int                             # the court's count, neighbouring numbers left out
    pages: int
    position: int = 0                      # cases[:position] are walked (or needed no walk)
    rows_new: int = 0
    errors: int = 0
    last_error: str | None = None


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
        self.client = CourtClient(ctx.cfg, ctx.clock) if self.own_client else ctx.client
        self.started = time.monotonic()
        self.requests_before = self.client.requests_sent
        self.warnings_before = collections.Counter(self.client.list_warnings)
        self.walk = _CaseWalk(ctx, self.db, self.client, self.result)
        self.opinion_pass = opinion_pass
        self.retrying: list | None = None     # the pass's failed windows left to ask again this run
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

    def work_left(self) -> dict[str, int]:
        """What is left of discovery: the opinion pass's windows, and the shards of the sweep in hand
        (between sweeps of a crawl that has not converged: a whole sweep's)."""
        converged = self.db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
        if self.in_sweep:
            shards = len(self.pending) + (self.flight is not None)
        elif converged:
            shards = 0
        else:
            shards = len(self.plan or plan_sweep(self.cfg.FIRST_YEAR, self.cfg.last_year, incremental=False))
        windows = 0
        if self.stage == "opinions" or (self.stage == "begin" and self.opinion_pass and not converged):
            windows = opinion_windows_left(self._pass_top(), _kv_date(self.db, KV_OPINION_PASS_FROM),
                                           _dt.date(self.cfg.FIRST_YEAR, 1, 1))
            windows += len(self._failed_windows() if self.retrying is None else self.retrying)
        return {"windows": windows, "shards": shards}

    def step(self, cases: int | None = None) -> bool:
        """Runs the next unit (of the case walk, at most `cases` cases; None: a shard's rest); False
        once discovery has nothing left to do in this run."""
        if self.stage != "done" and self.ctx.clock.should_stop():
            self._stop()
        elif self.stage == "begin":
            self._begin()
        elif self.stage == "opinions":
            self._opinion_window()
        elif self.stage == "sweep":
            self._sweep_unit(cases)
        elif self.stage == "update":
            if self.walk.opinion_update():
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
        result.incremental = bool(db.kv_get(KV_DISCOVERY_CONVERGED_AT)) and not cfg.FULL_SWEEP
        self.plan = plan_sweep(cfg.FIRST_YEAR, cfg.last_year, incremental=result.incremental)
        if db.kv_get(KV_CRAWL_STARTED_ON) is None:
            db.kv_set(KV_CRAWL_STARTED_ON, kentucky_today().isoformat())
        converged, window = bool(db.kv_get(KV_DISCOVERY_CONVERGED_AT)), self._next_window()
        due = opinion_pass_due(result.strategy, converged, window, len(self._failed_windows()))
        self.stage = "opinions" if self.opinion_pass and due else "sweep"
        self._note_pass_complete()

    def _note_pass_complete(self) -> None:
        """`opinion_pass_complete`: the crawl's opinion pass has swept every window (so every opinion the
        court lists is in the table); never for a court whose opinion search it could not use."""
        self.result.opinion_pass_complete = (self.opinion_pass and self.result.strategy == "cases"
                                             and self._next_window() is None and not self._failed_windows()
                                             and self.db.kv_get(KV_OPINION_PASS_REFUSED) is None)

    def _pass_top(self) -> _dt.date:
        """The last day of the opinion pass's first window: the day it began, or the end of LAST_YEAR
        when that is earlier (a year-limited archive asks for no later opinion)."""
        return _kv_date(self.db, KV_OPINION_PASS_TOP) or min(kentucky_today(), _dt.date(self.cfg.last_year, 12, 31))

    def _next_window(self) -> tuple[_dt.date, _dt.date] | None:
        return next_opinion_window(self._pass_top(), _kv_date(self.db, KV_OPINION_PASS_FROM),
                                   _dt.date(self.cfg.FIRST_YEAR, 1, 1))

    def _failed_windows(self) -> list[tuple[_dt.date, _dt.date]]:
        try:
            return [(_dt.date.fromisoformat(first), _dt.date.fromisoformat(last))
                    for first, last in json.loads(self.db.kv_get(KV_OPINION_PASS_FAILED) or "[]")]
        except (TypeError, ValueError):
            return []

    def _set_failed_windows(self, windows: list[tuple[_dt.date, _dt.date]]) -> None:
        self.db.kv_set(KV_OPINION_PASS_FAILED, json.dumps(sorted({(a.isoformat(), b.isoformat()) for a, b in windows},
                                                                  reverse=True)))

    def _opinion_window(self) -> None:
        """One window of the opinion pass, both courts: its opinions' documents committed, then the window.
        A window whose pages failed is kept (KV_OPINION_PASS_FAILED) and, after the pass's last window,
        asked once more a run; it leaves the list when it answers."""
        db = self.db
        if db.kv_get(KV_OPINION_PASS_TOP) is None:
            db.kv_set(KV_OPINION_PASS_TOP, self._pass_top().isoformat())
        window, retry = self._next_window(), False
        if window is None:
            if self.retrying is None:
                self.retrying = self._failed_windows()
            if self.retrying:
                window, retry = self.retrying.pop(0), True
        if window is not None:
            swept = self.walk.sweep_opinions(*window)
            if swept.stopped:
                self._stop()
                return
            failed = [w for w in self._failed_windows() if w != window]
            if swept.errors and not swept.refused:
                log_discover.warning("opinion pass %s..%s: %d pages failed; asked again after the pass's last "
                                     "window (the case walk finds those opinions too)", window[0], window[1], swept.errors)
                failed.append(window)
            self._set_failed_windows(failed)
            if swept.refused:       # no opinion search here: the walk finds the opinions with everything else
                db.kv_set(KV_OPINION_PASS_REFUSED, kentucky_today().isoformat())
                self._set_failed_windows([])
                self.retrying = []
            if not retry:
                done = _dt.date(self.cfg.FIRST_YEAR, 1, 1) if swept.refused else window[0]
                db.kv_set(KV_OPINION_PASS_FROM, done.isoformat())
            self.result.opinion_windows += 1
        if self._next_window() is None and not (self.retrying is None and self._failed_windows()) \
                and not self.retrying:
            self._note_pass_complete()
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
            children = split_shard(shard)
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
            writer = DiscoveryWriter(db, self.sweep)
            try:
                with writer:
                    return _discover_shard(ctx, db, self.client, writer, shard, result, self.known, self.walk)
            finally:
                result.rows_new += writer.rows_new
        opened = self.walk.open_shard(self.sweep, shard)
        if isinstance(opened, str):
            return opened
        self.flight = opened
        return self.walk.walk_cases(opened, cases, self.cfg.FULL_SWEEP)

    def _start_sweep(self) -> None:
        db, result = self.db, self.result
        self.sweep = sweep = _discover_current_sweep(db)
        result.sweeps += 1
        self.walk.begin_sweep(sweep)
        self.problems_before = sum(self.walk.problems.values()) + result.unresolved
        self.sweep_started = time.monotonic()
        self.sweep_figures = (result.repages, result.cases_walked)
        DiscoveryState(db).start_sweep(sweep, self.plan)
        db.kv_set("discovery_sweep", sweep)
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
        """Entries whose file list was empty or held withheld files: asked again, once a sweep, a batch a unit."""
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
        if self.result.incremental:
            self._end_update()
        else:
            self._converge()

    def _end_update(self) -> None:
        db = self.db
        if self.summary["errors"] == 0 and self.result.errors == 0:
            db.kv_set(KV_ARCHIVE_UPDATED_AT, utc_now())
            db.kv_set(KV_COMPLETE_THROUGH, db.kv_get("opinions_checked_through"))
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
        closed = self.walk.close_window()
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
                parties = self.walk.details_list("parties", "parties", row["case_id"], normalize_party)
                lower_courts = self.walk.details_list("lower_courts", "lowercourts", row["case_id"],
                                                      normalize_lower_court)
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


def _days_since(stamp: str | None) -> float:
    """Days since a `utc_now()` stamp (0 for none or an unreadable one)."""
    try:
        then = _dt.datetime.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return 0.0
    return (_dt.datetime.now(_dt.timezone.utc) - then).total_seconds() / 86400


def _kv_date(db: Database, key: str) -> _dt.date | None:
    try:
        return _dt.date.fromisoformat(db.kv_get(key) or "")
    except ValueError:
        return None


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
        shards = probe_shards(ctx.cfg.FIRST_YEAR, ctx.cfg.last_year)
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


@dataclass
class OpinionSweep:
    """What one pass of the opinion search found (`_CaseWalk.sweep_opinions`)."""
    rows: int = 0             # opinion-search rows (docket entries) read
    rows_new: int = 0         # documents new to the table
    errors: int = 0           # windows whose pages failed
    refused: bool = False     # the court has no usable opinion search
    stopped: bool = False


class _CaseWalk:
    """The case walk, and the file lists both strategies resolve docket entries through."""

    def __init__(self, ctx: Context, db: Database, client: CourtClient, result: DiscoverResult):
        self.ctx, self.db, self.client, self.result = ctx, db, client, result
        self.state = DiscoveryState(db)
        self.problems: collections.Counter = collections.Counter()
        self.sweep_number: int | None = None
        self.usable = self.unusable = 0      # this sweep's per-item answers (docket entries, file lists)
        self.last_unusable: str | None = None

    def begin_sweep(self, sweep: int) -> None:
        self.sweep_number = sweep
        self.usable = self.unusable = 0
        self.last_unusable = None

    def check_evidence(self, *, complete: bool = False) -> None:
        """Raises StrategyUnusable when most of this sweep's per-item answers were unusable."""
        if strategy_failing(self.usable, self.unusable, complete=complete):
            raise StrategyUnusable(f"{self.unusable} of {self.usable + self.unusable} answers unusable "
                                   f"(last: {self.last_unusable})")

    # --------------------------------------------------------- answers

    def _json_list(self, endpoint: str, what: str, **values: str) -> list:
        """A list the court answers, its usability counted (a 404 or a non-list is unusable)."""
        try:
            answer = self.client.get_json(endpoint, **values)
        except PermanentFetchError as exc:
            self.unusable += 1
            self.last_unusable = f"{what} HTTP {exc.http_status}"
            raise
        if not isinstance(answer, list):
            self.problems[what] += 1
            self.unusable += 1
            self.last_unusable = f"{what}: not a list but {type(answer).__name__}"
            raise ShapeProblem(what, f"not a list but {type(answer).__name__}")
        self.usable += 1
        return answer

    def entry_files(self, entry: dict, case: Mapping[str, Any] | None, shard: str
                    ) -> tuple[list[dict], list[dict], dict | None]:
        """(documents, court texts, the case header the files carry) of one docket entry.

        Withheld files (documentAvailable false) are documents too (`upsert_discovered` keeps them
        as withheld failures); a file naming another entry as its parent is counted and dropped.
        `entry` gains `files_missing` (why its list must be asked again) and `files_asked_sweep`."""
        self.result.entries_resolved += 1
        try:
            files = self._json_list("entry_documents", "publicaccessdocuments", docket_entry_id=entry["docket_entry_id"])
        except ShapeProblem:
            return [], [], None
        documents, texts, header = [], [], None
        withheld = 0
        for raw in files:
            try:
                document = normalize_entry_file(raw, entry, case)
                if document["docket_entry_id"] != entry["docket_entry_id"]:
                    raise ShapeProblem("parentID", "another entry's")
                if header is None and isinstance(raw.get("caseHeader"), Mapping):
                    header = normalize_case_header(raw["caseHeader"])
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
                continue
            if document["document_available"] == 0:
                self.result.unavailable += 1
                withheld += 1
            pages = document.pop("court_pages")
            document["shard"] = shard or _shard_of_number(document["case_number"])
            documents.append(document)
            if pages is not None and self.ctx.cfg.COURT_TEXT:
                texts.append(self._keep_court_text(document["document_id"], pages))
        entry["files_missing"] = files_missing(entry.get("has_documents"), files, withheld)
        entry["files_asked_sweep"] = self.sweep_number
        if entry["files_missing"] == "empty":
            self.result.empty_entries += 1
        return documents, texts, header

    def _keep_court_text(self, document_id: str, pages: list[str]) -> dict:
        text, figures = court_text_of(pages)
        name = f"{COURT_TEXT_FOLDER}/{figures['sha256']}.txt"
        path = self.ctx.workspace / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text.encode("utf-8"))
        self.ctx.mirror.put(name, path)
        return {"document_id": document_id, **figures}

    # ------------------------------------------------------------ sweep

    def open_shard(self, sweep: int, shard: str) -> "ShardInFlight | str":
        """Pages a shard's case search: its cases to walk, or its outcome ('split', 'error' recorded;
        'stopped': left pending)."""
        ctx, db, client, result = self.ctx, self.db, self.client, self.result
        top = top_level_shard(shard)
        cases: dict[str, dict] = {}
        foreign: set[str] = set()      # neighbouring numbers "Starts With" answered: counted, not walked
        pages = 0
        paging = ShardPaging(ctx, db, client.search_cases, shard, "cases", lambda: len(cases) + len(foreign), result)
        try:
            for page in paging.pages():
                pages += 1
                result.pages += 1
                for item in page.raw_items:
                    try:
                        case = normalize_case_search_row(item)
                    except ShapeProblem as problem:
                        self.problems[problem.field] += 1
                        continue
                    if not shard_holds(shard, case["case_number"]):
                        if case["case_id"] not in foreign:
                            foreign.add(case["case_id"])
                            result.foreign_rows += 1
                        continue
                    case["shard"] = top
                    case["search_row"] = case_row_fingerprint(item)
                    cases[case["case_id"]] = case
                result.rows_seen += page.raw_count
        except StopRequested:
            return "stopped"
        except ResultsLimitExceeded as exc:
            children = split_shard(shard)
            total = paging.page.total_count if paging.page is not None else None
            if not children:
                DiscoveryState(db).finish_shard(sweep, shard, state="error", total_count=total, pages=pages,
                                error=f"cannot split further: {exc}"[:500])
                result.errors += 1
                return "error"
            DiscoveryState(db).finish_shard(sweep, shard, state="split", total_count=total, pages=pages, children=children)
            return "split"
        except TransientFetchError as exc:
            DiscoveryState(db).finish_shard(sweep, shard, state="error", total_count=paging.page.total_count if paging.page else None,
                            pages=pages, error=str(exc)[:500])
            result.errors += 1
            log_discover.warning("sweep %d shard %s: %s", sweep, shard, exc)
            return "error"
        ordered = sorted(cases.values(), key=operator.itemgetter("case_number"))
        return ShardInFlight(sweep, shard, ordered, DiscoveryState(db).cases_to_walk(sweep, list(cases)),
                             total=paging.page.total_count - len(foreign), pages=pages)

    def walk_cases(self, flight: "ShardInFlight", limit: int | None, rewalk_open: bool) -> str:
        """Walks the shard's next `limit` cases that need a walk (None: all that are left), each
        committed on its own: 'more' (cases left), 'done' or 'error' (the shard recorded), 'stopped'."""
        ctx, db, result = self.ctx, self.db, self.result
        walked = 0
        try:
            while flight.position < len(flight.cases):
                if limit is not None and walked >= limit:
                    return "more"
                if ctx.clock.should_stop():
                    return "stopped"
                case = flight.cases[flight.position]
                previous = flight.previous.get(case["case_id"])
                if not needs_walk(previous, case, flight.sweep, rewalk_open=rewalk_open,
                                  days_since_walk=_days_since(previous["walked_at"] if previous else None)):
                    flight.position += 1
                    result.cases_unchanged += previous["walked_sweep"] < flight.sweep
                    continue
                try:
                    flight.rows_new += self.walk_case(flight.sweep, case,
                                                      first=previous is None or previous["walked_sweep"] is None)
                except TransientFetchError as exc:
                    flight.errors += 1
                    flight.last_error = f"{case['case_number']}: {exc}"
                flight.position += 1
                walked += 1
                self.check_evidence()
        except StopRequested:
            return "stopped"
        state = "error" if flight.errors else "done"
        result.rows_new += flight.rows_new
        if flight.errors:
            result.errors += 1
            log_discover.warning("sweep %d shard %s: %d cases failed; last: %s", flight.sweep, flight.shard,
                                 flight.errors, flight.last_error)
        DiscoveryState(db).finish_shard(flight.sweep, flight.shard, state=state, total_count=flight.total, pages=flight.pages,
                        rows_seen=len(flight.cases), rows_new=flight.rows_new,
                        error=flight.last_error and flight.last_error[:500])
        return state

    def walk_case(self, sweep: int, case: dict, *, first: bool = True) -> int:
        """One case's record: docket entries and the files of each entry with documents, committed as
        one (parties and lower courts come later, in the details pass). On a case's `first` walk, an
        entry whose documents the table holds (the opinion pass found them) is not asked again; a
        later walk asks every entry (a file may have joined one). An entry left incomplete is asked
        again by `ask_again`. A case whose docket entries the court would not list, or whose answers
        had the wrong shape, is recorded, not walked (walked again next sweep)."""
        result = self.result
        case_id = case["case_id"]
        entries: list[dict] = []
        documents: list[dict] = []
        texts: list[dict] = []
        problems_before = sum(self.problems.values())
        try:
            raw_entries = self._json_list("docket_entries", "docketentries", case_id=case_id)
        except (PermanentFetchError, ShapeProblem) as exc:
            if isinstance(exc, PermanentFetchError):
                self.problems[f"docketentries HTTP {exc.http_status}"] += 1
            self.state.record_case_walk(None, case, [], [])
            return 0
        for raw in raw_entries:
            try:
                entries.append(normalize_docket_entry(raw, case_id))
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
        with_documents = [entry for entry in entries if entry["has_documents"]]
        known = self.state.known_docket_entries_with_documents(
            [entry["docket_entry_id"] for entry in with_documents]) if first else set()
        header = None
        for entry in with_documents:
            if entry["docket_entry_id"] in known:
                result.entries_known += 1
                continue
            try:
                found, found_texts, found_header = self.entry_files(entry, case, case["shard"])
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                continue
            documents += found
            texts += found_texts
            header = header or found_header
        if header is not None:
            case = {**case, **{key: value for key, value in header.items() if value is not None}}
        related = [entry["related_case_numbers"] for entry in entries if entry["related_case_numbers"]]
        case["related_case_numbers"] = ", ".join(dict.fromkeys(", ".join(related).split(", "))) if related else None
        result.cases_walked += 1
        # Answers of the wrong shape: what they held is unknown, so the case counts as seen, not walked.
        walked = sweep if sum(self.problems.values()) == problems_before else None
        return self.state.record_case_walk(walked, case, entries, documents, texts)

    def details_list(self, endpoint: str, what: str, case_id: str, normalize) -> list[dict] | None:
        """A case's parties or lower courts, normalized; None when the court gives no list (404, not a list)."""
        try:
            raw = self.client.get_json(endpoint, case_id=case_id)
        except PermanentFetchError:
            return None
        if not isinstance(raw, list):
            self.problems[what] += 1
            return None
        rows = []
        for position, item in enumerate(raw):
            try:
                rows.append(normalize(item, case_id, position))
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
        return rows

    # ------------------------------------------------------ resolution

    def resolve_rows(self, items: list, shard: str) -> list[dict]:
        """Search rows without documentID -> documents, through their docket entries' file lists.

        Entries whose documents the table already holds are not asked for again (an entry whose
        list was empty or withheld is asked again by `ask_again`)."""
        entries: dict[str, dict] = {}
        for item in items:
            row_map = item.get("rowMap") if isinstance(item, Mapping) else None
            if not isinstance(row_map, Mapping) or not isinstance(row_map.get("docketEntryID"), str):
                self.result.unresolved += 1
                continue
            case_id = row_map.get("caseHeader.caseID")
            try:
                entry = normalize_docket_entry(row_map, str(case_id).lower() if case_id else None)
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
                self.result.unresolved += 1
                continue
            entries.setdefault(entry["docket_entry_id"], {"entry": entry, "row_map": row_map})
        if not entries:
            return []
        known = self.state.known_docket_entries_with_documents(list(entries))
        documents: list[dict] = []
        for entry_id, found in entries.items():
            if entry_id in known:
                continue
            row_map = found["row_map"]
            number = row_map.get("caseHeader.caseNumber")
            case = {"case_id": found["entry"]["case_id"], "case_number": number,
                    "court": court_of_case_number(number), "title": None}
            try:
                found_documents, texts, header = self.entry_files(found["entry"], case, shard)
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                self.result.unresolved += 1
                continue
            case_row = {**case, **(header or {}),
                        "shard": top_level_shard(shard) if shard else _shard_of_number(number),
                        "related_case_numbers": found["entry"]["related_case_numbers"]}
            # The case and entry as far as this row shows them; not walked (its other entries are
            # unknown), and its documents are the caller's to write, so they count as new there.
            self.state.record_case_walk(None, case_row if case_row.get("case_id") else None, [found["entry"]], [], texts)
            documents += found_documents
        return documents

    def ask_again(self, sweep: int, limit: int, after: str) -> tuple[int, int, str] | None:
        """The file lists of the next `limit` entries (by id, after `after`) that came back empty or with
        withheld files before this sweep, asked once more: (entries asked, documents new to the table,
        the last entry's id), or None on a stop. A released withheld file is queued by the upsert."""
        rows = self.state.entries_to_ask_again(sweep, limit, after)
        new = 0
        for row in rows:
            if self.ctx.clock.should_stop():
                return None
            entry = {key: row[key] for key in ("docket_entry_id", "case_id", "entry_type", "subtype", "description",
                                               "filed_date", "has_documents", "related_case_numbers")}
            case = {"case_id": row["case_id"], "case_number": row["case_number"], "court": row["court"],
                    "title": row["title"]}
            try:
                documents, texts, _ = self.entry_files(entry, case, _shard_of_number(row["case_number"]) or "")
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                continue
            except (TransientFetchError, StopRequested):
                if self.ctx.clock.should_stop():
                    return None
                continue
            self.result.entries_asked_again += 1
            new += self.state.record_case_walk(None, None, [entry], documents, texts)
        self.result.rows_new += new
        return len(rows), new, rows[-1]["docket_entry_id"] if rows else after

    def sweep_opinions(self, first_day: _dt.date, last_day: _dt.date) -> OpinionSweep:
        """The opinion search over [first_day, last_day] (7-day windows, both courts): its rows are
        docket entries, resolved through their file lists into documents rows (entries already
        holding documents are not asked again). The one way opinions are swept: the incremental
        update and the convergence's closing pass both call it."""
        db, ctx, client, result = self.db, self.ctx, self.client, self.result
        swept = OpinionSweep()
        for court in COURT_NAMES.values():
            for window_first, window_last in opinion_windows(first_day, last_day):
                start = 1
                while True:
                    if ctx.clock.should_stop():
                        swept.stopped = True
                        return swept
                    try:
                        page = client.search_opinions(court, window_first, window_last, start, 25)
                    except StopRequested:
                        swept.stopped = True
                        return swept
                    except (TransientFetchError, ResultsLimitExceeded) as exc:
                        log_discover.warning("opinion search %s %s-%s: %s", court, window_first, window_last, exc)
                        swept.errors += 1
                        break
                    except IntegrityError as exc:
                        log_discover.warning("the opinion search is not usable here: %s", exc)
                        swept.refused = True
                        return swept
                    swept.rows += page.raw_count
                    result.opinion_rows += page.raw_count
                    rows = [item for item in page.raw_items if not document_id_of(item)]
                    documents = self.resolve_rows(rows, "")
                    if documents:
                        swept.rows_new += DiscoveryState(db).upsert_discovered(documents)
                    if not page.more or page.result_count <= 0:
                        break
                    start += page.result_count
        result.rows_new += swept.rows_new
        return swept

    def opinion_update(self) -> bool:
        """The opinion search for the days since the last update (both courts); False on a stop."""
        today = kentucky_today()
        since = (_kv_date(self.db, "opinions_checked_through") or today) - _dt.timedelta(days=OPINION_OVERLAP_DAYS)
        swept = self.sweep_opinions(since, today)
        if swept.stopped:
            return False
        self.result.errors += swept.errors + int(swept.refused)
        if not swept.errors and not swept.refused:
            self.db.kv_set("opinions_checked_through", today.isoformat())
        return True

    def close_window(self) -> bool | None:
        """Before convergence is reported: the opinion search over the days since the crawl began
        (with a week's overlap), for opinions filed meanwhile in cases closed when walked. True when
        the window is closed (complete through today), False when the opinion search failed (sweep
        again), None on a stop. A court with no opinion search converges complete through the day
        the crawl began."""
        today = kentucky_today()
        began = _kv_date(self.db, KV_CRAWL_STARTED_ON) or today
        swept = self.sweep_opinions(min(began, today) - _dt.timedelta(days=OPINION_OVERLAP_DAYS), today)
        if swept.stopped:
            return None
        if swept.errors:
            self.result.errors += swept.errors
            return False
        if swept.rows_new:
            log_discover.info("closing the window: %d documents filed since the crawl began in cases walked "
                              "before", swept.rows_new)
        through = began if swept.refused else today
        self.db.kv_set("opinions_checked_through", through.isoformat())
        self.db.kv_set(KV_COMPLETE_THROUGH, through.isoformat())
        return True


def _shard_of_number(case_number: Any) -> str | None:
    if not isinstance(case_number, str) or len(case_number) < 7:
        return None
    return top_level_shard(case_number)


def _discover_current_sweep(db: Database) -> int:
    """The unfinished sweep kv 'discovery_sweep' names, or the next one."""
    current = int(db.kv_get("discovery_sweep", "0") or 0)
    runs = {row["sweep"]: row for row in DiscoveryState(db).discovery_runs()}
    if current in runs and not runs[current]["complete"]:
        return current
    return max([current, *runs]) + 1


def _discover_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter, shard: str,
                    result: DiscoverResult, known: dict[str, int], walk: "_CaseWalk") -> str:
    """Pages one shard to its end: 'done', 'split', 'error' or 'stopped' (left pending).

    Whatever it fetched goes to the writer, whatever the outcome (an exception included): those
    rows are discoveries even when the shard must be paged again.
    """
    batch = DiscoveryBatch(shard)
    try:
        outcome = _discover_page_shard(ctx, db, client, writer, batch, result, known)
        if batch.without_id and outcome in ("done", "error"):
            # Rows that are docket entries: their documents come from the entries' file lists.
            for row in walk.resolve_rows(batch.without_id, top_level_shard(shard)):
                if row["document_id"] not in known:
                    known[row["document_id"]] = 0
                    batch.rows.append(row)
    except StopRequested:
        outcome = "stopped"
    finally:
        writer.submit(batch)
    if outcome == "error":
        log_discover.warning("sweep %d shard %s: %s", writer.sweep, shard, batch.error)
        result.errors += 1
    return outcome


def _discover_page_shard(ctx: Context, db: Database, client: CourtClient, writer: DiscoveryWriter,
                         batch: DiscoveryBatch, result: DiscoverResult, known: dict[str, int]) -> str:
    """The paging of `_discover_shard`; fills `batch`, its outcome included."""
    shard = batch.shard
    warned = False             # said once a shard: rows without documentID
    top = top_level_shard(shard)
    seen: set[str] = set()     # distinct document ids over every pass of this shard
    foreign: set[str] = set()  # rows of neighbouring numbers ("Starts With" answers them too): not this shard's
    paging = ShardPaging(ctx, db, client.search_documents, shard, "documents", lambda: len(seen) + len(foreign),
                         result)
    try:
        for page in paging.pages():
            rows_seen = 0
            for item in page.raw_items:
                row_map = item.get("rowMap") if isinstance(item, dict) else None
                number = row_map.get("caseHeader.caseNumber") if isinstance(row_map, dict) else None
                if not shard_holds(shard, number):
                    key = document_id_of(item) or str(row_map.get("docketEntryID"))
                    if key not in foreign:
                        foreign.add(key)
                        result.foreign_rows += 1
                    continue
                document_id = document_id_of(item)
                if document_id is None:
                    # Counted and resolved after paging (a docket entry's files); never keyed by its id.
                    rows_seen += 1
                    entry_id = row_map.get("docketEntryID") if isinstance(row_map, dict) else None
                    seen.add(f"entry:{entry_id}" if isinstance(entry_id, str) else f"row:{len(seen)}")
                    batch.without_id.append(item)
                    continue
                rows_seen += 1
                seen.add(document_id)
                fingerprint = raw_row_fingerprint(item, top)
                if known.get(document_id) != fingerprint:
                    known[document_id] = fingerprint
                    row = normalize_document_row(item)
                    row["shard"] = top
                    row["related_case_numbers"] = related_case_numbers(row["description"])
                    batch.rows.append(row)
            if batch.without_id and not warned:
                warned = True
                log_discover.warning("shard %s: rows without documentID; resolved through their docket "
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
        children = split_shard(shard)
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
        log_discover.info("shard %s: %d distinct documents of %d after %d passes", shard, len(seen),
                          total, paging.repages + 1)
    batch.state, batch.total_count = "done", total
    return "done"
