"""Fixtures shared by the test modules; plain helpers and test doubles are in support.py.

- `make_context`: opens contexts over tmp_path (support.open_test_context) and closes them after the test.
- `planned_court`: SimCourt(docs=300, seed=1) not served: its documents and PDF bytes, offline.
- `served_court`: the same court served on 127.0.0.1, one per test module (its fault counters are
  shared by that module's tests; a test that needs them at zero starts its own court).
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


@pytest.fixture(scope="module")
def served_court():
    with SimCourt(docs=300, seed=1) as court:
        yield court
