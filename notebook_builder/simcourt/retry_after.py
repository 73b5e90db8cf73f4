"""Retry-After as the simulated services answer it: the bookkeeping a court mixes in (SimCourt, SimTRPortal).

Guarantees:
- `_retry_after(key)` gives a Retry-After of up to a second, alternately delta-seconds ("1") and an
  HTTP-date (the next whole second), and remembers when `key` (a document, "search", "json") may ask
  again; `_too_early(key)` is True, and counted in `early_requests`, when it asks before then and
  `enforce_retry_after` is on.
- The class that mixes it in sets `_lock`, `enforce_retry_after`, `early_requests = 0`,
  `_retry_at = {}` and `_retry_after_forms = 0`.
"""
from __future__ import annotations

import email.utils
import math
import time


class RetryAfterClock:
    """When each key may ask again after a 429 (see the module docstring)."""

    def _too_early(self, key: object) -> bool:
        """True (and counted) when `key` asked again before its Retry-After time."""
        with self._lock:
            if self.enforce_retry_after and time.time() < self._retry_at.get(key, 0.0):
                self.early_requests += 1
                return True
            return False

    def _retry_after(self, key: object) -> dict[str, str]:
        """A Retry-After of up to a second, alternately delta-seconds ("1") and an HTTP-date (the
        next whole second)."""
        with self._lock:
            self._retry_after_forms += 1
            dated = self._retry_after_forms % 2 == 0
            now = time.time()
            retry_at = math.floor(now) + 1 if dated else now + 1
            self._retry_at[key] = retry_at - 0.05
        if dated:
            return {"Retry-After": email.utils.formatdate(retry_at, usegmt=True)}
        return {"Retry-After": "1"}
