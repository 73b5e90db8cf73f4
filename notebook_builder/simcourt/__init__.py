"""The simulated C-Track court (tests, benchmarks, `kycourt-pipeline sim`).

    from notebook_builder.simcourt import SimCourt, serve
    with SimCourt(docs=300, seed=1) as court:
        base = court.base_url          # http://127.0.0.1:<port>/api/api/v1
        plan = court.advance(days=30, seed=7)     # a month of the court's activity, and what changed

See server.py for the served behaviour, corpus.py for the planned corpus and living.py for advancing it.
trportal/ is the simulated TR Portal court (`SimTRPortal`: Nevada, Alabama, Oregon, North Dakota,
Wyoming, Florida).
"""
from .corpus import FAULTS, NEVER, TRANSIENT_FAULTS, SimDocument, corpus_counts, expected_outcome
from .living import month_activity, update_floor
from .server import DEFAULT_OVERSIZE, SimCourt, serve
from .trportal import SimTRPortal

__all__ = ["FAULTS", "NEVER", "TRANSIENT_FAULTS", "SimCourt", "SimDocument", "corpus_counts", "expected_outcome",
           "serve", "DEFAULT_OVERSIZE", "month_activity", "update_floor", "SimTRPortal"]
