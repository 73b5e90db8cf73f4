"""The court's client for the configured court system: the client of its API's family.

Guarantees:
- `court_client(cfg, clock)` is the one way a stage gets a client of the court COURT_SYSTEM names
  (c27): the client class of the court's family (CLIENTS), made for that court. The stages ask it
  and the court it holds (`client.court`); none names a family.

Knobs read: COURT_SYSTEM (and the client's).
"""
from __future__ import annotations

import random

import requests

from .c00_config import Config, RunClock
from .c27_court_systems import court_of_config
from .c30_client import CourtClient

# The court's API family (c25 CTrackCourt.family, c26 TRPortalCourt.family) -> its client class.
CLIENTS: dict[str, type] = {"ctrack": CourtClient}


def court_client(cfg: Config, clock: RunClock, session: requests.Session | None = None, *,
                 rng: random.Random | None = None) -> CourtClient:
    """A client of the configured court system's court (see the module docstring)."""
    court = court_of_config(cfg)
    return CLIENTS[court.family](cfg, clock, session, rng=rng, court=court)
