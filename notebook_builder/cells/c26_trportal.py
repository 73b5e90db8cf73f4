"""The TR Portal court: what is a court system's on Thomson Reuters' newer C-Track REST API.

A court system served by TR Portal ("C-Track Public Portal": Nevada, Alabama, Oregon, North
Dakota, Wyoming, Florida) is a `TRPortalCourt`: its courts (`TRCourt`: the code the archive
gives each, its name, the court GUID of paths and filters, the numeric id its rows carry, the
abbreviation the API writes, the form of its case numbers), its portal, how its opinions are
found (`opinions`: the document search by entry type, the publications, or the dispositional
docket entries) and the headers it wants. It answers the same questions as c25's CTrackCourt
(`system`, `family`, `courts`, `code_of`, `court_of`, `time_zone`, `api_ids`); the TR Portal
client (c31) and discovery's TR Portal room (c49) ask it the rest.

Guarantees:
- `courts` maps each court's code to its name, in the order the configuration lists them;
  `code_of(case_number)` is the code of the court whose form the number takes (a court system of
  one court: that court for any number), None for anything else; `court_of` its name.
- ACCESS_STATES names the four `userDocumentState` GUIDs; `access_state(guid)` reads one
  case-insensitively: None for VIEWABLE (public, as every Kentucky document is), else the state the
  archive keeps in `documents.access_state` (c12 ACCESS_STATE_REASONS says why it is not public).
- UUIDs are compared in lower case (`uuid_key`) and sent as the court wrote them.

Knobs read: none (the client gives API_BASE).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .c00_config import COURT_SYSTEMS

# userDocumentState GUIDs, the same at every TR Portal court (README 2.5) -> the state the archive
# keeps (None: VIEWABLE, public).
VIEWABLE = "b64d1d1e-f926-4c87-ab6b-df5c96d3b186"
ACCESS_STATES: dict[str, str | None] = {
    VIEWABLE: None,
    "dc195201-c792-4883-ab2a-5730dc357ca2": "purchasable",
    "e069220c-7377-4b6a-8664-15f29da6808a": "in_cart",
    "ea5979e2-9949-4819-819b-72f9ef7f7106": "unavailable",
}
# A document a docket entry marks securedDocument, and one whose download the court answered with a
# redirect to its wall: not public either.
SECURED_STATE = "secured"
WALL_STATE = "wall"
OPINION_MODES = ("document_search", "publications", "docket_entries")


def uuid_key(value: Any) -> str | None:
    """A UUID as the archive compares it: stripped, lower case; None for anything but text."""
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def access_state(guid: Any) -> str | None:
    """The archive's access state of a `userDocumentState` GUID (None: VIEWABLE); an unknown GUID,
    or none, is 'unavailable': a document is public only when the court says so."""
    key = uuid_key(guid)
    return ACCESS_STATES[key] if key in ACCESS_STATES else "unavailable"


@dataclass(frozen=True)
class TRCourt:
    """One court of a TR Portal court system."""
    code: str                 # the archive's code of the court (court_code)
    name: str                 # its name in the archive (documents.court)
    guid: str | None          # resourceID: the court in paths and filters (None: read from /courts)
    court_id: str | None      # externalIdentifier: caseHeader.courtID (None: read from /courts)
    abbreviation: str         # displayName / courtAbbreviation, as the API writes it
    number: str               # a regular expression its case numbers match whole (case-insensitive)
    example: str              # a case number of the court, as the court writes it


@dataclass(frozen=True)
class TRPortalCourt:
    """A court system of TR Portal (see the module docstring)."""
    name: str
    system: str
    api_base: str
    portal: str
    tr_courts: tuple[TRCourt, ...]
    opinions: str                                  # one of OPINION_MODES
    opinion_types: tuple[str, ...] = ()            # docketEntryTypeIDs of opinions (the document search)
    opinion_names: tuple[str, ...] = ("Opinion", "Decision")   # publications: an opinion item's first document
    dispositional: str = "dispositional"           # docket entries: an opinion entry's type contains this
    referer: str | None = None                     # a Referer the API wants (Nevada's)
    family: ClassVar[str] = "trportal"
    _patterns: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.opinions not in OPINION_MODES:
            raise ValueError(f"opinions is one of {', '.join(OPINION_MODES)}, not {self.opinions!r}")
        object.__setattr__(self, "_patterns", tuple(
            (court.code, re.compile(court.number, re.IGNORECASE)) for court in self.tr_courts))

    @property
    def courts(self) -> dict[str, str]:
        """code -> name of every court, in the configuration's order."""
        return {court.code: court.name for court in self.tr_courts}

    @property
    def time_zone(self) -> str:
        return COURT_SYSTEMS[self.system].time_zone

    def court(self, code: str) -> TRCourt:
        return next(court for court in self.tr_courts if court.code == code)

    def api_ids(self, code: str) -> dict[str, str | None]:
        """The ids the API knows a court by: its GUID, its numeric id, its abbreviation."""
        court = self.court(code)
        return {"guid": court.guid, "court_id": court.court_id, "abbreviation": court.abbreviation}

    def code_of(self, case_number: Any) -> str | None:
        """The code of the court whose case-number form `case_number` takes (see the docstring)."""
        if not isinstance(case_number, str) or not case_number.strip():
            return None
        number = case_number.strip()
        for code, pattern in self._patterns:
            if pattern.fullmatch(number):
                return code
        return self.tr_courts[0].code if len(self.tr_courts) == 1 else None

    def court_of(self, case_number: Any) -> str | None:
        code = self.code_of(case_number)
        return None if code is None else self.courts[code]

    def headers(self) -> Mapping[str, str]:
        """The headers every JSON request carries."""
        return {"Accept": "application/json", **({"Referer": self.referer} if self.referer else {})}
