"""Discovery's rules: what a sweep counts, its pure decisions, and the paging of one shard's search.

Guarantees:
- The decisions are pure (plain values in, a verdict out): whether and how a case is walked
  (`walk_kind`), whether a shard splits or is paged again (`needs_split`, `needs_repage`), which
  shards an update sweeps (`update_shards`: the leaves of the last complete sweep), whether
  a sweep converged
  (`is_converged`), whether a strategy's endpoints are not this court's (`strategy_failing`), the
  opinion pass's next window (`next_opinion_window`, `opinion_windows_left`, `opinion_pass_due`),
  why an entry's file list is asked again (`files_missing`), and the fingerprints that say a row
  or a case is unchanged (`metadata_fingerprint`, `case_row_fingerprint`).
- `ShardPaging` pages one shard's search pass after pass, trusting `resultcount` and
  `moreresults` (1-based), never the page size asked for: over the court's results limit raises
  ResultsLimitExceeded (the shard splits), a top-level shard that held documents and now answers
  none raises CourtTrapError, "more" with nothing sent is transient, a stop raises StopRequested;
  a pass that ends with fewer distinct ids than the court's total is paged again, at most
  DISCOVER_MAX_REPAGES extra passes.
- `DiscoverResult` is what a run of discovery did, in counts.

Knobs read: PAGE_SIZE (ShardPaging), the clock's stop.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from .c00_config import PipelineError, ResultsLimitExceeded, StopRequested, TransientFetchError
from .c10_database import Database
from .c15_discovery_state import DOCUMENT_METADATA_COLUMNS, DiscoveryState
from .c25_court import OPINION_WINDOW_DAYS
from .c30_client import CourtTrapError, SearchPage
from .c35_context import Context

log_rules = logging.getLogger("kycourt.discover")

DISCOVER_MAX_REPAGES = 3        # extra passes over a shard whose distinct rows fall short of its total
# The case walk's per-case answers (docket entries, file lists) are judged after this many: when
# most are unusable (404, not a list), its endpoints are not this court's (`strategy_failing`).
STRATEGY_EVIDENCE = 10
OPINION_OVERLAP_DAYS = 7        # an update re-reads this many days before the last one's end
KV_CRAWL_STARTED_ON = "crawl_started_on"    # the court system's day the first sweep began
KV_DISCOVERY_SWEEP = "discovery_sweep"      # the number of the sweep under way or last ended
# The opinion pass: its windows end on the day it began (KV_OPINION_PASS_TOP) and go back a week at
# a time; KV_OPINION_PASS_FROM is the first day of the earliest window swept.
KV_OPINION_PASS_TOP = "opinion_pass_top"
KV_OPINION_PASS_FROM = "opinion_pass_from"
KV_OPINION_PASS_REFUSED = "opinion_pass_refused"     # the court has no usable opinion search: the walk finds them
# Windows of the opinion pass whose pages failed (JSON [[first, last], ...]): each is asked once more a
# run, after the pass's last window; the pass is complete only once none is left.
KV_OPINION_PASS_FAILED = "opinion_pass_failed"
# In a crawl's later sweeps, an open case whose search row is unchanged is walked again once its last
# walk is this old (the sweeps of one crawl, hours apart, skip it; an update walks every open case).
OPEN_CASE_REWALK_DAYS = 28
DISCOVER_ASK_AGAIN_BATCH = 50   # file lists asked again in one unit of work
# An update asks again this share of the file lists waiting (empty or withheld before; those asked
# longest ago first, at least one): a rotating budget, for what changes without the case's row.
DISCOVER_ASK_AGAIN_UPDATE_SHARE = 0.02
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
    not_public: int = 0           # documents held that the court does not serve to the public (kept, never asked for)
    empty_entries: int = 0        # entries saying hasDocuments whose file list was [] (asked again later)
    entries_asked_again: int = 0  # file lists asked again (empty or withheld before)
    foreign_rows: int = 0         # search rows outside their shard's prefix (neighbouring numbers), dropped
    opinion_rows: int = 0
    fallback: str | None = None   # why the strategy chosen first was given up in this run
    complete_through: str | None = None   # the court system's day up to which the archive is complete
    list_warnings: dict = field(default_factory=dict)     # doubtful lists (client.list_warnings), this run
    requests: int = 0             # requests this stage sent
    shape_problems: dict = field(default_factory=dict)   # field -> count of answers lacking it
    opinion_windows: int = 0      # windows of the opinion pass swept this run (its units: `opinion_unit`)
    opinion_unit: str = "week"    # what a unit of the opinion pass is (a week; a TR Portal feed's page)
    opinion_pass_complete: bool = False   # the crawl's opinion pass has swept every window
    entries_known: int = 0        # file lists the walk did not ask: their entry's documents are held
    cases_unchanged: int = 0      # walked before, search row unchanged: not walked again
    details_cases: int = 0        # cases whose parties and lower courts were fetched
    details_errors: int = 0       # cases whose details the court did not give (tried again next run)
    run: str | None = None        # the update's run (its changes, c19), once the first crawl was complete
    update: str | None = None     # what the update found, in words (c48 update_words)


# ----------------------------------------------------------- pure decisions


def walk_kind(previous: Mapping[str, Any] | None, case: Mapping[str, Any], sweep: int, *, update: bool = False,
              days_since_walk: float = 0.0, rewalk_open: bool = False) -> str | None:
    """How the case walk takes a case in this sweep (None: not at all).

    'new': never walked (its entries' files but those whose documents the table holds); a case
    walked in this very sweep (a resumed one): None. 'changed': its search row (`search_row`,
    `case_row_fingerprint`) changed since its last walk (it closed, was reopened, retitled, a
    document of it was withdrawn): every entry's files, how a withdrawal shows. An update
    (`update`) takes an open case whose row is unchanged as 'open' (only the files of entries new to
    the table) and leaves a closed one alone. A crawl's later sweep walks an open case 'again'
    (every entry's files) once its last walk is OPEN_CASE_REWALK_DAYS old or with `rewalk_open`
    (FULL_SWEEP), and a case walked before rows were fingerprinted when open, or reopened."""
    if previous is None or previous["walked_sweep"] is None:
        return "new"
    if previous["walked_sweep"] >= sweep:
        return None
    if previous["search_row"] is not None and previous["search_row"] != case.get("search_row"):
        return "changed"
    is_open = case.get("closed") != 1
    if update:
        return "open" if is_open else None
    if is_open and (rewalk_open or days_since_walk >= OPEN_CASE_REWALK_DAYS):
        return "again"
    if previous["search_row"] is None and (previous["closed"] != 1 or case.get("closed") == 0):
        return "again"
    return None


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

def strategy_failing(usable: int, unusable: int, *, complete: bool = False) -> bool:
    """Whether a strategy's per-item endpoints are not this court's: most answers unusable (404, the
    wrong shape), once STRATEGY_EVIDENCE of them are in, or at the end of a sweep (`complete`) from
    two on (one removed case is no verdict on the endpoint)."""
    return unusable > usable and (unusable >= STRATEGY_EVIDENCE or (complete and unusable >= 2))


def files_missing(has_documents: Any, files: list, withheld: int) -> str | None:
    """Why an entry's file list must be asked again: 'withheld' (a file the court does not serve
    yet), 'empty' (it says it has documents and listed none), None (complete)."""
    if withheld:
        return "withheld"
    if not files and has_documents:
        return "empty"
    return None


def court_text_of(pages: list[str]) -> tuple[str, dict]:
    """The court's pages as one text (form feeds between pages) and its `court_text` figures."""
    text = "\f".join(pages)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text, {"sha256": digest, "pages": len(pages), "chars": len(text),
                  "replacement_chars": text.count("\ufffd")}


def needs_split(total_count: int, results_limit: int | None) -> bool:
    return results_limit is not None and total_count > results_limit


def update_shards(top_level: Sequence[str], leaves: Sequence[str], top_level_of: Callable[[str], str]) -> list[str]:
    """The shards an update sweeps, in shard order: under each top-level shard, the `leaves` the last
    complete sweep paged there (a shard it split is not asked again, its children are: the split is
    learnt once, by the crawl), or the top-level shard itself where it has none (a year or court new
    since). A leaf grown over the results limit is split as in any sweep; leaves of a shard no longer
    swept are left out."""
    under: dict[str, list[str]] = {}
    for leaf in leaves:
        under.setdefault(top_level_of(leaf), []).append(leaf)
    return sorted(shard for top in top_level for shard in under.get(top, [top]))


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
                 noun: str, distinct: Callable[[], int], result: "DiscoverResult", *, top_level: bool):
        self.ctx, self.db, self.search, self.shard, self.noun = ctx, db, search, shard, noun
        self.top_level = top_level
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
            if (start == 1 and page.total_count == 0 and self.top_level
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
            log_rules.debug("shard %s: %d distinct of %d after pass %d; paging it again",
                               shard, self.distinct(), page.total_count, self.repages)
            start = 1


_discover_metadata_of = operator.itemgetter(*DOCUMENT_METADATA_COLUMNS)


def metadata_fingerprint(row) -> int:
    """What discovery knows of a document (a row with every metadata column and document_available),
    hashed: an unchanged row needs no write. The same as hashing the table's columns in
    DOCUMENT_METADATA_COLUMNS order, then its availability."""
    return hash((*_discover_metadata_of(row), row["document_available"]))


def is_converged(*, complete: bool, errors: int, rows_new: int, delta: int) -> bool:
    return complete and errors == 0 and rows_new < delta


class StrategyUnusable(PipelineError):
    """The court's answers show the discovery strategy in use is not this court's (404s, the wrong
    shape): the sweep is abandoned, and auto falls back to the other strategy."""


def days_since(stamp: str | None) -> float:
    """Days since a `utc_now()` stamp (0 for none or an unreadable one)."""
    try:
        then = _dt.datetime.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return 0.0
    return (_dt.datetime.now(_dt.timezone.utc) - then).total_seconds() / 86400


def kv_date(db: Database, key: str) -> _dt.date | None:
    try:
        return _dt.date.fromisoformat(db.kv_get(key) or "")
    except ValueError:
        return None


def discover_current_sweep(db: Database) -> int:
    """The unfinished sweep kv 'discovery_sweep' names, or the next one."""
    current = int(db.kv_get(KV_DISCOVERY_SWEEP, "0") or 0)
    runs = {row["sweep"]: row for row in DiscoveryState(db).discovery_runs()}
    if current in runs and not runs[current]["complete"]:
        return current
    return max([current, *runs]) + 1


