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
- One rule for what is public (`document_state`): a document of a docket entry the court marks
  `securedDocument` is never public (SECURED_STATE), whatever its access list says (FLP's nev.py
  skips them); any other's state is its access list's userDocumentState, the court's word per
  document. The feed applies the mark (it has no access state); the walk and the probe both.
- UUIDs are compared in lower case (`uuid_key`) and sent as the court wrote them.
- The API (README 2.2): PATHS under the API root; `envelope(body)` reads a paged answer
  (`_embedded.results` and `page`, no `_embedded` on an empty page or one past the end; counts
  as strings or numbers); `instant_text` writes a filter's instant with its offset; RESULTS_WINDOW
  and MAX_PAGE_SIZE are the limits of a search.
- The court directory (`CourtDirectory`, from `/courts` and the configuration): each court's GUID
  and numeric id as the court serves them, found by either, or by its abbreviation.
- Rows (pure; a value of the wrong type or a missing id raises c25 ShapeProblem naming the
  field): `case_row` (a case search row or a case detail's caseHeader -> a `cases` row with its
  `court_path`), `docket_entry` (-> a `docket_entries` row, with `opinion` and `secured`),
  `access_document` (an access-list row -> a `documents` row with its access state, opinion mark
  and download path), `feed_document` (a document-search row), `publication_documents` (a
  publication's items), `party`, `lower_courts` (a case detail's originating courts). A
  document's id is its documentLinkUUID in lower case; case numbers are kept as written.

Knobs read: none (the client gives API_BASE).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .c00_config import COURT_SYSTEMS
from .c25_court import ShapeProblem, court_date, one_line

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
RESULTS_WINDOW = 10_000         # rows a search lets anyone page through (README 2.3)
MAX_PAGE_SIZE = 500             # the largest `size` a list answers
PATHS = {
    "courts": "/courts",
    "case_search": "/courts/cms/cases",
    "case": "/courts/{court}/cms/cases/{case}",
    "access": "/courts/cms/docketentrydocumentsaccess",
    "document_search": "/courts/cms/docketentrydocuments",
    "download": "/courts/{court}/cms/case/{case}/docketentrydocuments/{document}",
    "publications": "/courts/cms/publications",
    "publication": "/courts/{court}/cms/publication/{publication}",
}


def uuid_key(value: Any) -> str | None:
    """A UUID as the archive compares it: stripped, lower case; None for anything but text."""
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def instant_text(moment: _dt.datetime) -> str:
    """A filter's instant: `YYYY-MM-DDTHH:MM:SS.mmm+HH:MM` (milliseconds, the offset with its colon)."""
    text = moment.isoformat(timespec="milliseconds")
    return text if moment.tzinfo is not None else text + "+00:00"


def instant_of(value: Any) -> _dt.datetime | None:
    """A court instant (`...+00:00`, `+0000`, `Z`) as an aware datetime; None for none or no instant."""
    text = court_date(value) if isinstance(value, str) else None
    if not text:
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _tr_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or value is None:
        raise ShapeProblem(f"page.{name}", f"not a count: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ShapeProblem(f"page.{name}", f"not a count: {value!r}") from None


def envelope(body: Any) -> tuple[list, dict[str, int]]:
    """(results, page) of a paged answer: `_embedded.results` ([] when `_embedded` is absent, as on an
    empty page or one past the end) and `page`'s size, totalElements, totalPages, number as ints."""
    if not isinstance(body, Mapping) or not isinstance(body.get("page"), Mapping):
        raise ShapeProblem("page", "not a paged answer")
    embedded = body.get("_embedded")
    results = embedded.get("results") if isinstance(embedded, Mapping) else []
    if results is None:
        results = []
    if not isinstance(results, list):
        raise ShapeProblem("_embedded.results", "not a list")
    page = body["page"]
    return results, {name: _tr_count(page.get(name), name) for name in ("size", "totalElements", "totalPages", "number")}


def access_state(guid: Any) -> str | None:
    """The archive's access state of a `userDocumentState` GUID (None: VIEWABLE); an unknown GUID,
    or none, is 'unavailable': a document is public only when the court says so."""
    key = uuid_key(guid)
    return ACCESS_STATES[key] if key in ACCESS_STATES else "unavailable"


def document_state(user_document_state: Any, secured: Any) -> str | None:
    """The archive's access state of a document listed with `user_document_state` whose docket entry
    has the `secured` mark (see the module docstring): SECURED_STATE for a secured entry's, whatever
    the list says; else its userDocumentState's (None: public)."""
    return SECURED_STATE if secured else access_state(user_document_state)


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
    follows_redirects: ClassVar[bool] = False      # a download's redirect leads to the court's wall
    download_paths: ClassVar[Mapping[str, str]] = {"api": "download"}
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

    def download_headers(self) -> Mapping[str, str]:
        """The headers a download carries (a PDF is asked for, not JSON)."""
        return {"Accept": "application/pdf, */*;q=0.8", **({"Referer": self.referer} if self.referer else {})}

    @staticmethod
    def wall_state(response: Any) -> str:
        """The access state a download answered by a redirect shows: the court's wall."""
        return WALL_STATE


# ---------------------------------------------------------------- directory


@dataclass(frozen=True)
class DirectoryCourt:
    """A court as the court system's directory serves it."""
    code: str
    name: str
    guid: str                  # as served
    court_id: str | None


class CourtDirectory:
    """The courts of a TR Portal system as served (see the module docstring)."""

    def __init__(self, courts: list[DirectoryCourt]):
        self.courts = courts
        self._by_code = {court.code: court for court in courts}
        self._by_guid = {court.guid.lower(): court for court in courts}
        self._by_id = {court.court_id: court for court in courts if court.court_id is not None}

    @classmethod
    def from_rows(cls, court: "TRPortalCourt", rows: list) -> "CourtDirectory":
        """Each configured court matched to a `/courts` row by GUID, else abbreviation, else numeric id;
        one the rows lack keeps its configured ids when it has both."""
        found = []
        served = [row for row in rows if isinstance(row, Mapping) and isinstance(row.get("resourceID"), str)]
        for tr_court in court.tr_courts:
            match = next((row for row in served if tr_court.guid and row["resourceID"].lower() == tr_court.guid), None)
            match = match or next((row for row in served if row.get("displayName") == tr_court.abbreviation), None)
            match = match or next((row for row in served if tr_court.court_id is not None
                                   and str(row.get("externalIdentifier")) == tr_court.court_id), None)
            if match is not None:
                ident = match.get("externalIdentifier")
                found.append(DirectoryCourt(tr_court.code, tr_court.name, match["resourceID"],
                                            None if ident is None else str(ident)))
            elif tr_court.guid:
                found.append(DirectoryCourt(tr_court.code, tr_court.name, tr_court.guid, tr_court.court_id))
        return cls(found)

    @classmethod
    def configured(cls, court: "TRPortalCourt") -> "CourtDirectory":
        return cls.from_rows(court, [])

    def to_json(self) -> str:
        return json.dumps([[c.code, c.name, c.guid, c.court_id] for c in self.courts])

    @classmethod
    def from_json(cls, text: str) -> "CourtDirectory":
        return cls([DirectoryCourt(*values) for values in json.loads(text)])

    def by_code(self, code: str | None) -> DirectoryCourt | None:
        return self._by_code.get(code) if code else None

    def by_guid(self, guid: Any) -> DirectoryCourt | None:
        key = uuid_key(guid)
        return self._by_guid.get(key) if key else None

    def of_header(self, court: "TRPortalCourt", header: Mapping[str, Any]) -> DirectoryCourt | None:
        """The court of a caseHeader: its numeric courtID (a string or a number), else its case number."""
        ident = header.get("courtID")
        found = self._by_id.get(str(ident)) if ident is not None and not isinstance(ident, bool) else None
        return found or self.by_code(court.code_of(header.get("caseNumber")))


# --------------------------------------------------------------------- rows


def _tr_text(raw: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ShapeProblem(key)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ShapeProblem(key, f"not text: {type(value).__name__}")
    return str(value).strip()


def _tr_mapping(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ShapeProblem(what, f"not an object: {type(raw).__name__}")
    return raw


def _tr_flag(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return int(value.strip().lower() == "true")
    return int(bool(value))


def _tr_fingerprint(raw: Any) -> str:
    return hashlib.blake2b(json.dumps(raw, sort_keys=True, default=str).encode("utf-8"), digest_size=8).hexdigest()


def case_path(directory_court: DirectoryCourt, case_uuid: str) -> str:
    return PATHS["case"].format(court=directory_court.guid, case=case_uuid)


def case_row(court: "TRPortalCourt", directory: CourtDirectory, raw: Any) -> dict:
    """A case search row (`{caseHeader}`) or a case detail -> a `cases` row (see the module docstring);
    `search_row` fingerprints what the row says (a changed row: a changed case)."""
    header = _tr_mapping(_tr_mapping(raw, "results[]").get("caseHeader"), "caseHeader")
    case_uuid = _tr_text(header, "caseInstanceUUID", required=True)
    number = _tr_text(header, "caseNumber", required=True)
    found = directory.of_header(court, header)
    if found is None:
        raise ShapeProblem("caseHeader.courtID", f"no court of this system: {header.get('courtID')!r}")
    closed = _tr_flag(header, "closedFlag")
    return {"case_id": uuid_key(case_uuid), "case_number": number, "court": found.name, "court_level": None,
            "title": one_line(header.get("caseTitle")), "case_type": _tr_text(header, "caseClassification"),
            "classification": _tr_text(header, "caseClassification"), "status": None if closed is None else (
                "closed" if closed else "open"), "status_date": None,
            "filed_date": court_date(_tr_text(header, "filedDate")), "closed": closed,
            "category": _tr_text(header, "caseCategory"), "related_case_numbers": None,
            "court_path": case_path(found, case_uuid), "search_row": _tr_fingerprint(header),
            "case_uuid": case_uuid, "court_code": found.code}


def is_opinion_entry(court: "TRPortalCourt", type_id: Any, subtype: Any) -> bool:
    """Whether a docket entry is an opinion as the court shows it: its type among the court's opinion
    types (Nevada's), or its subtype an opinion's name (a decision's Opinion or Decision)."""
    if type_id is not None and str(type_id).strip() in court.opinion_types:
        return True
    names = {name.lower() for name in court.opinion_names}
    return isinstance(subtype, str) and subtype.strip().lower() in names


def docket_entry(court: "TRPortalCourt", raw: Any, case_id: str) -> dict:
    """A docket entry (`{docketEntryHeader}`) -> a `docket_entries` row, with `opinion`, `secured` and
    `documents` (the documentCount it announces) for the walk."""
    header = _tr_mapping(_tr_mapping(raw, "docketentries[]").get("docketEntryHeader"), "docketEntryHeader")
    subtype = _tr_text(header, "docketEntrySubType")
    count = header.get("documentCount")
    documents = count if isinstance(count, int) and not isinstance(count, bool) else (
        int(count) if isinstance(count, str) and count.strip().isdigit() else None)
    return {"docket_entry_id": uuid_key(_tr_text(header, "docketEntryUUID", required=True)), "case_id": case_id,
            "entry_type": _tr_text(header, "docketEntryType"), "subtype": subtype,
            "description": _tr_text(header, "docketEntryDescription") or _tr_text(header, "docketEntryName"),
            "filed_date": court_date(_tr_text(header, "filedDate")),
            "has_documents": 1 if documents is None else int(documents > 0), "related_case_numbers": None,
            "opinion": int(is_opinion_entry(court, header.get("docketEntryTypeID"), subtype)),
            "secured": _tr_flag(header, "securedDocument") or 0}


def download_path(directory_court: DirectoryCourt, case_uuid: str, document_uuid: str) -> str:
    return PATHS["download"].format(court=directory_court.guid, case=case_uuid, document=document_uuid)


def access_document(raw: Any, entry: Mapping[str, Any] | None, case: Mapping[str, Any],
                    directory_court: DirectoryCourt) -> dict:
    """An access-list row -> a `documents` row: its state (`document_state`: the entry's secured mark,
    else userDocumentState), the entry's metadata, the case's."""
    raw = _tr_mapping(raw, "docketentrydocumentsaccess[]")
    document_uuid = _tr_text(raw, "documentLinkUUID", required=True)
    info = raw.get("documentInfo") if isinstance(raw.get("documentInfo"), Mapping) else {}
    entry = entry or {}
    state = document_state(raw.get("userDocumentState"), entry.get("secured"))
    return {"document_id": uuid_key(document_uuid), "case_number": case["case_number"], "court": case["court"],
            "case_title": case.get("title"), "docket_entry_id": uuid_key(_tr_text(raw, "docketEntryUUID"))
            or entry.get("docket_entry_id"), "description": entry.get("description"),
            "filed_date": entry.get("filed_date"), "case_id": case["case_id"], "document_name": _tr_text(raw, "documentName"),
            "entry_type": entry.get("entry_type"), "entry_subtype": entry.get("subtype"),
            "mime_type": _tr_text(info, "contentType"), "access_state": state,
            "opinion": int(bool(entry.get("opinion"))),
            "court_path": download_path(directory_court, case["case_uuid"], document_uuid)}


def feed_document(court: "TRPortalCourt", directory: CourtDirectory, raw: Any) -> dict:
    """A document-search row (the opinion feed) -> a `documents` row (an opinion; a secured entry's is
    SECURED_STATE, another's None: the feed has no access state, c15 keeps the table's) with
    `case`: its case as the row shows it."""
    raw = _tr_mapping(raw, "docketentrydocuments[]")
    document_uuid = _tr_text(raw, "documentLinkUUID", required=True)
    header = _tr_mapping(raw.get("docketEntryHeader"), "docketEntryHeader")
    case = case_row(court, directory, {"caseHeader": raw.get("caseHeader")})
    return {"document_id": uuid_key(document_uuid), "case_number": case["case_number"], "court": case["court"],
            "case_title": case["title"], "docket_entry_id": uuid_key(_tr_text(header, "docketEntryUUID")),
            "description": _tr_text(header, "docketEntryDescription"), "filed_date": court_date(_tr_text(header, "filedDate")),
            "case_id": case["case_id"], "document_name": _tr_text(raw, "documentName"),
            "entry_type": _tr_text(header, "docketEntryType"), "entry_subtype": None, "mime_type": None,
            "access_state": SECURED_STATE if _tr_flag(header, "securedDocument") else None,
            "opinion": int(is_opinion_entry(court, header.get("docketEntryTypeID"), None)),
            "court_path": download_path(directory.by_code(court.code_of(case["case_number"])) or directory.of_header(
                court, raw["caseHeader"]), case["case_uuid"], document_uuid), "case": case}


def publication_documents(court: "TRPortalCourt", directory_court: DirectoryCourt, raw: Any) -> list[dict]:
    """A publication's detail -> a `documents` row for each document of its items: an opinion when its
    item's first document is named as an opinion is (README 2.4); released, so public."""
    raw = _tr_mapping(raw, "publication")
    items = raw.get("publicationItems") or []
    if not isinstance(items, list):
        raise ShapeProblem("publicationItems", "not a list")
    released = court_date(_tr_text(raw, "publicationDate"))
    names = {name.lower() for name in court.opinion_names}
    rows = []
    for item in items:
        item = _tr_mapping(item, "publicationItems[]")
        documents = item.get("documents") or []
        if not isinstance(documents, list):
            raise ShapeProblem("publicationItems[].documents", "not a list")
        case_uuid = _tr_text(item, "caseInstanceUUID", required=True)
        number = _tr_text(item, "caseNumber", required=True)
        first = documents[0].get("documentName") if documents and isinstance(documents[0], Mapping) else None
        opinion = int(isinstance(first, str) and first.strip().lower() in names)
        for document in documents:
            document = _tr_mapping(document, "documents[]")
            document_uuid = _tr_text(document, "documentLinkUUID", required=True)
            rows.append({"document_id": uuid_key(document_uuid), "case_number": number, "court": directory_court.name,
                         "case_title": one_line(item.get("title")), "docket_entry_id": None,
                         "description": _tr_text(item, "decision"), "filed_date": released,
                         "case_id": uuid_key(case_uuid), "document_name": _tr_text(document, "documentName"),
                         "entry_type": None, "entry_subtype": None, "mime_type": None, "access_state": None,
                         "opinion": opinion,
                         "court_path": download_path(directory_court, case_uuid, document_uuid),
                         "case_path": case_path(directory_court, case_uuid)})
    return rows


def party(raw: Any, case_id: str, position: int) -> dict:
    """A party (`{partyHeader, legalRepresentations}`) -> a `parties` row."""
    raw = _tr_mapping(raw, "parties[]")
    header = raw.get("partyHeader") if isinstance(raw.get("partyHeader"), Mapping) else {}
    actor = header.get("partyActorInstance") if isinstance(header.get("partyActorInstance"), Mapping) else {}
    attorneys = []
    for representation in raw.get("legalRepresentations") or []:
        if not isinstance(representation, Mapping):
            raise ShapeProblem("legalRepresentations[]", "not an object")
        attorney = representation.get("attorneyPartyHeader") or {}
        name = (attorney.get("partyActorInstance") or {}) if isinstance(attorney, Mapping) else {}
        attorneys.append({"name": name.get("displayName"), "role": None, "address": None, "bar_number": None})
    return {"case_id": case_id, "position": position, "name": actor.get("displayName"),
            "role": _tr_text(header, "partySubType"), "status": _tr_text(header, "partyStatus"),
            "pro_se": _tr_flag(raw, "proSeFlag"), "address": None, "attorneys": attorneys}


def lower_courts(raw: Any, case_id: str) -> list[dict]:
    """A case detail's originatingCourtCases -> `lower_courts` rows."""
    header = _tr_mapping(_tr_mapping(raw, "case").get("caseHeader"), "caseHeader")
    rows = []
    for position, origin in enumerate(header.get("originatingCourtCases") or []):
        origin = _tr_mapping(origin, "originatingCourtCases[]")
        rows.append({"case_id": case_id, "position": position, "name": _tr_text(origin, "originatingCourtName"),
                     "case_number": _tr_text(origin, "originatingCaseNumber"), "case_title": None})
    return rows
