"""The shared test helpers stand for what they claim to."""
from __future__ import annotations

from support import quick_court, torture, torture_court


def test_torture_court_is_the_torture_scripts_court_unless_overridden():
    ours, theirs = torture_court(90, 6), torture.make_court(90, 6)
    assert list(ours.documents) == list(theirs.documents)
    settings = ("results_limit", "max_page", "search_fault_rate", "oversize_bytes", "stall_seconds",
                "enforce_retry_after")
    assert [getattr(ours, name) for name in settings] == [getattr(theirs, name) for name in settings]
    assert sum(d.late for d in ours.documents) == sum(d.late for d in theirs.documents) > 0
    quick = quick_court(90, 6)
    assert list(quick.documents) == list(theirs.documents)
    assert (quick.stall_seconds, quick.enforce_retry_after) == (0.05, False)
