"""The simulated courts' own controls (no real court has them): counting periods and the POST controls.

Guarantees:
- `control_answer(path, query)` answers a POST to `/__sim__/advance?days=30&seed=0[&<activity
  kind>=N]` (the court's `_advance`: 200 and the plan; 400 for a value that is not a whole number or
  an unknown activity; 409 while requests are in flight) or `/__sim__/period` (`new_period()`), as
  (status, JSON); None for any other path.
- `new_period()` starts a new period and returns the figures of the one that ended; `_open_period(why)`
  starts one (under the court's lock, or before it serves; an advance starts one too);
  `_period_figures(period)` is a period as JSON: its number, why it began, the advances and the
  court's day then, where it begins in the request log, its requests by endpoint and in all.
- The class that mixes it in (SimCourt, SimTRPortal) has `_lock`, `periods` (a list), `plans` (its
  advances), `corpus.today` (a day ordinal), `request_log` (None, or a RequestLog) and
  `_advance(days, seed, activity, requests_allowed)`, and counts each request in
  `periods[-1]["endpoints"]`.
"""
from __future__ import annotations

import datetime as _dt
from collections import Counter

from .living import advance_query

STATS_PATH = "/__sim__/stats"   # GET: the court's own counters (JSON)
PLANS_PATH = "/__sim__/plans"   # GET: the plan of every advance so far (JSON list)
ADVANCE_PATH = "/__sim__/advance"   # POST ?days=30&seed=0[&<activity kind>=N]: advance, answer the plan
PERIOD_PATH = "/__sim__/period"     # POST: a new request-counting period; answers the one that ended


class SimControls:
    """The controls of a simulated court (see the module docstring)."""

    def control_answer(self, path: str, query: str) -> tuple[int, object] | None:
        if path == ADVANCE_PATH:
            try:
                # The POST being answered is in flight itself.
                return 200, self._advance(*advance_query(query), requests_allowed=1)
            except ValueError as exc:
                return 400, {"message": str(exc)}
            except RuntimeError as exc:
                return 409, {"message": str(exc)}
        if path == PERIOD_PATH:
            return 200, self.new_period()
        return None

    def new_period(self) -> dict:
        """Starts a new request-counting period (as an advance does); returns the figures of the one
        that ended (`POST /__sim__/period`)."""
        with self._lock:
            ended = self._period_figures(self.periods[-1])
            self._open_period("asked")
        return ended

    def _open_period(self, why: str) -> None:
        """A new period of request counts (under the lock, or before the court serves)."""
        self.periods.append({"number": len(self.periods) + 1, "began": why, "advances": len(self.plans),
                             "today": _dt.date.fromordinal(self.corpus.today).isoformat(),
                             "request_log_start": None if self.request_log is None else len(self.request_log),
                             "endpoints": Counter()})

    @staticmethod
    def _period_figures(period: dict) -> dict:
        return {**period, "requests": sum(period["endpoints"].values()),
                "endpoints": dict(sorted(period["endpoints"].items()))}
