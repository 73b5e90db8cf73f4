"""The opinion search: the crawl's opinion pass, an update's opinions, and the window's closing.

Guarantees:
- `sweep(first, last)` is the one way opinions are swept: 7-day windows (c25 `opinion_windows`),
  each court the court's opinion search names, 25 rows a page; its rows are docket entries,
  resolved through their file lists (the walk's `resolve_rows`: entries whose documents the table
  holds are not asked again) into documents rows, committed a page at a time (watched in an update). A window whose
  pages failed is counted (`OpinionSweep.errors`); a search the court refuses or answers in the
  wrong shape ends the sweep (`refused`).
- The opinion pass (`pass_window`, the crawl's first, case walk only): windows newest first from
  the day it began (kv `opinion_pass_top`) back to FIRST_YEAR, one a unit, its progress in kv
  `opinion_pass_from`; a failed window is kept (kv `opinion_pass_failed`) and asked once more a
  run after the pass's last window; a court without an opinion search ends the pass (kv
  `opinion_pass_refused`) and the walk finds its opinions with everything else.
- `close_window` (before convergence is reported): the days since the crawl began (kv
  `crawl_started_on`), with OPINION_OVERLAP_DAYS of overlap, for opinions filed meanwhile in cases
  closed when walked; then kv `opinions_checked_through` and `complete_through` are today's
  Kentucky date (the day the crawl began when the court has no opinion search).
- `update` (an update's first unit): the days since kv `opinions_checked_through`, with the same
  overlap, through today; the day is kept only when no window failed.

Knobs read: FIRST_YEAR, LAST_YEAR, and the clock's stop.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
from dataclasses import dataclass

from .c00_config import IntegrityError, ResultsLimitExceeded, StopRequested, TransientFetchError
from .c10_database import KV_COMPLETE_THROUGH, Database
from .c25_court import document_id_of, opinion_windows
from .c35_context import Context
from .c44_discovery_rules import (KV_CRAWL_STARTED_ON, KV_OPINION_PASS_FAILED, KV_OPINION_PASS_FROM,
                                  KV_OPINION_PASS_REFUSED, KV_OPINION_PASS_TOP, OPINION_OVERLAP_DAYS,
                                  DiscoverResult, kv_date, next_opinion_window, opinion_windows_left)
from .c45_case_walk import CaseWalk

log_opinions = logging.getLogger("kycourt.discover")

OPINION_PAGE_ROWS = 25          # rows a page of the opinion search (the captures: about 25)
KV_OPINIONS_CHECKED_THROUGH = "opinions_checked_through"


@dataclass
class OpinionSweep:
    """What one pass of the opinion search found (`OpinionSearch.sweep`)."""
    rows: int = 0             # opinion-search rows (docket entries) read
    rows_new: int = 0         # documents new to the table
    errors: int = 0           # windows whose pages failed
    refused: bool = False     # the court has no usable opinion search
    stopped: bool = False


class OpinionSearch:
    """The opinion search's work for discovery (see the module docstring)."""

    def __init__(self, ctx: Context, db: Database, walk: CaseWalk, result: DiscoverResult):
        self.ctx, self.cfg, self.db, self.walk, self.result = ctx, ctx.cfg, db, walk, result
        self.client = walk.client
        self.retrying: list | None = None     # the pass's failed windows left to ask again this run

    # ------------------------------------------------------------ sweeps

    def sweep(self, first_day: _dt.date, last_day: _dt.date) -> OpinionSweep:
        """The opinion search over [first_day, last_day], every court, resolved into documents rows."""
        ctx, client, result = self.ctx, self.client, self.result
        swept = OpinionSweep()
        if not client.court.opinion_courts():
            swept.refused = True
            return swept
        for court in client.court.opinion_courts():
            for window_first, window_last in opinion_windows(first_day, last_day):
                start = 1
                while True:
                    if ctx.clock.should_stop():
                        swept.stopped = True
                        return swept
                    try:
                        page = client.search_opinions(court, window_first, window_last, start, OPINION_PAGE_ROWS)
                    except StopRequested:
                        swept.stopped = True
                        return swept
                    except (TransientFetchError, ResultsLimitExceeded) as exc:
                        log_opinions.warning("opinion search %s %s-%s: %s", court, window_first, window_last, exc)
                        swept.errors += 1
                        break
                    except IntegrityError as exc:
                        log_opinions.warning("the opinion search is not usable here: %s", exc)
                        swept.refused = True
                        return swept
                    swept.rows += page.raw_count
                    result.opinion_rows += page.raw_count
                    rows = [item for item in page.raw_items if not document_id_of(item)]
                    documents = self.walk.resolve_rows(rows, "")
                    if documents:
                        swept.rows_new += self.walk.write_documents(documents)
                    if not page.more or page.result_count <= 0:
                        break
                    start += page.result_count
        result.rows_new += swept.rows_new
        return swept

    def update(self) -> bool:
        """The opinion search for the days since the last update (every court); False on a stop."""
        today = self.cfg.today()
        since = (kv_date(self.db, KV_OPINIONS_CHECKED_THROUGH) or today) - _dt.timedelta(days=OPINION_OVERLAP_DAYS)
        swept = self.sweep(since, today)
        if swept.stopped:
            return False
        self.result.errors += swept.errors + int(swept.refused)
        if not swept.errors and not swept.refused:
            self.db.kv_set(KV_OPINIONS_CHECKED_THROUGH, today.isoformat())
        return True

    def close_window(self) -> bool | None:
        """The opinion search over the days since the crawl began: True when the window is closed
        (complete through today), False when the search failed (sweep again), None on a stop."""
        today = self.cfg.today()
        began = kv_date(self.db, KV_CRAWL_STARTED_ON) or today
        swept = self.sweep(min(began, today) - _dt.timedelta(days=OPINION_OVERLAP_DAYS), today)
        if swept.stopped:
            return None
        if swept.errors:
            self.result.errors += swept.errors
            return False
        if swept.rows_new:
            log_opinions.info("closing the window: %d documents filed since the crawl began in cases walked "
                              "before", swept.rows_new)
        through = began if swept.refused else today
        self.db.kv_set(KV_OPINIONS_CHECKED_THROUGH, through.isoformat())
        self.db.kv_set(KV_COMPLETE_THROUGH, through.isoformat())
        return True

    # -------------------------------------------------------------- pass

    def pass_top(self) -> _dt.date:
        """The last day of the opinion pass's first window: the day it began, or the end of LAST_YEAR
        when that is earlier (a year-limited archive asks for no later opinion)."""
        return kv_date(self.db, KV_OPINION_PASS_TOP) or min(self.cfg.today(), _dt.date(self.cfg.last_year, 12, 31))

    def next_window(self) -> tuple[_dt.date, _dt.date] | None:
        return next_opinion_window(self.pass_top(), kv_date(self.db, KV_OPINION_PASS_FROM),
                                   _dt.date(self.cfg.FIRST_YEAR, 1, 1))

    def failed_windows(self) -> list[tuple[_dt.date, _dt.date]]:
        try:
            return [(_dt.date.fromisoformat(first), _dt.date.fromisoformat(last))
                    for first, last in json.loads(self.db.kv_get(KV_OPINION_PASS_FAILED) or "[]")]
        except (TypeError, ValueError):
            return []

    def _set_failed_windows(self, windows: list[tuple[_dt.date, _dt.date]]) -> None:
        self.db.kv_set(KV_OPINION_PASS_FAILED, json.dumps(sorted({(a.isoformat(), b.isoformat()) for a, b in windows},
                                                                  reverse=True)))

    def windows_left(self) -> int:
        """The pass's windows left, the failed ones to ask again included."""
        left = opinion_windows_left(self.pass_top(), kv_date(self.db, KV_OPINION_PASS_FROM),
                                    _dt.date(self.cfg.FIRST_YEAR, 1, 1))
        return left + len(self.failed_windows() if self.retrying is None else self.retrying)

    def pass_complete(self, strategy: str) -> bool:
        """The crawl's opinion pass has swept every window (every opinion the court lists is in the
        table); never for a court whose opinion search it could not use."""
        return (strategy == "cases" and self.next_window() is None and not self.failed_windows()
                and self.db.kv_get(KV_OPINION_PASS_REFUSED) is None)

    def pass_window(self) -> bool | None:
        """One window of the pass, every court: its opinions' documents committed, then the window.
        Returns True once the pass has no window left this run, False while it has, None on a stop."""
        db = self.db
        if db.kv_get(KV_OPINION_PASS_TOP) is None:
            db.kv_set(KV_OPINION_PASS_TOP, self.pass_top().isoformat())
        window, retry = self.next_window(), False
        if window is None:
            if self.retrying is None:
                self.retrying = self.failed_windows()
            if self.retrying:
                window, retry = self.retrying.pop(0), True
        if window is not None:
            swept = self.sweep(*window)
            if swept.stopped:
                return None
            failed = [w for w in self.failed_windows() if w != window]
            if swept.errors and not swept.refused:
                log_opinions.warning("opinion pass %s..%s: %d pages failed; asked again after the pass's last "
                                     "window (the case walk finds those opinions too)", window[0], window[1],
                                     swept.errors)
                failed.append(window)
            self._set_failed_windows(failed)
            if swept.refused:       # no opinion search here: the walk finds the opinions with everything else
                db.kv_set(KV_OPINION_PASS_REFUSED, self.cfg.today().isoformat())
                self._set_failed_windows([])
                self.retrying = []
            if not retry:
                done = _dt.date(self.cfg.FIRST_YEAR, 1, 1) if swept.refused else window[0]
                db.kv_set(KV_OPINION_PASS_FROM, done.isoformat())
            self.result.opinion_windows += 1
        return (self.next_window() is None and not (self.retrying is None and self.failed_windows())
                and not self.retrying)
