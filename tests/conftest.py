"""Fixtures shared by the test modules; plain helpers and test doubles are in support.py.

- `make_context`: opens contexts over tmp_path (support.open_test_context) and closes them after the test.
- `planned_court`: SimCourt(docs=300, seed=1) not served: its documents and PDF bytes, offline.
- `served_court`: the same court served on 127.0.0.1, a fresh one per test (its per-document fault
  counters start at zero).
"""
from __future__ import annotations

import pytest

from notebook_builder.simcourt import SimCourt
from support import open_test_context


@pytest.fixture
def make_context(tmp_path):
    """make_context(court=None, *, name="workspace", store_name="store", env=None, clock=None,
    store=None, client=None, **knobs) -> an open context under tmp_path, closed after the test."""
    made = []

    def build(court=None, **options):
        ctx = open_test_context(tmp_path, court, **options)
        made.append(ctx)
        return ctx

    yield build
    for ctx in reversed(made):
        ctx.close()


@pytest.fixture(scope="module")
def planned_court():
    return SimCourt(docs=300, seed=1)


@pytest.fixture
def served_court():
    with SimCourt(docs=300, seed=1) as court:
        yield court
