"""Small test doubles shared by several test modules."""
from __future__ import annotations

from notebook_builder.cells.c00_config import RunClock


class RecordingClock(RunClock):
    """A run clock whose sleeps are recorded, not slept: backoff is fast and visible."""

    def __init__(self, budget_seconds: float = 3600.0):
        super().__init__(budget_seconds, 0.0)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        return not self.stop_event.is_set()
