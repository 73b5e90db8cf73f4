"""The simulated TR Portal court (Thomson Reuters' newer C-Track REST API): Nevada, Alabama, Oregon, North
Dakota, Wyoming and Florida, for tests, benchmarks, `demo` and `kycourt-pipeline sim --court-system`.

    from notebook_builder.simcourt import SimTRPortal
    with SimTRPortal("nevada", docs=200, seed=1, today=dt.date(2026, 10, 1)) as court:
        court.base_url                    # the API root: GET {base_url}/courts
        plan = court.advance(days=30, seed=7)
        court.truth(), court.floor()      # the court's own truth, to judge an archive

systems.py: the court systems' presets; planning.py and corpus.py: the planned corpus; shapes.py: the
JSON of each item; documents.py: the PDFs; handler.py: the HTTP answers; server.py: the service and its
switches; living.py: advancing it; truth.py: its truth and floor.
"""
from .living import ACTIVITY_KINDS, month_activity
from .server import SimTRPortal, serve
from .systems import STATE_GUIDS, STATE_NAMES, SYSTEMS, CourtSystem, TRCourt, system_named
from .truth import TruthDocument

__all__ = ["ACTIVITY_KINDS", "STATE_GUIDS", "STATE_NAMES", "SYSTEMS", "CourtSystem", "SimTRPortal", "TRCourt",
           "TruthDocument", "month_activity", "serve", "system_named"]
