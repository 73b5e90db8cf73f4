"""The court systems: each name COURT_SYSTEM takes, mapped to its court, and described.

Guarantees:
- `court_system(name)` is the court of a court system (ConfigError for a name c00 COURT_SYSTEMS
  does not hold): a C-Track Public Access court (c25 `CTrackCourt`: Kentucky, Delaware County)
  or a TR Portal one (c26 `TRPortalCourt`). Every court answers `system`, `family`, `courts`
  (code -> name), `api_ids(code)`, `code_of`, `court_of`, `time_zone`; `court_of_config(cfg)` is
  the configured one. FAMILY_NAMES names each family in words.
- `describe(court)` is what `kycourt-pipeline courts --json` says of a court system, the same
  keys (DESCRIBE_KEYS) for each: its name, API family, API base, portal, courts (code, name, the
  API's ids), case-number forms, how its opinions are found, what is public there, what is not
  known there (`unknown`: what `probe` answers, where it can), and which facts were verified
  against captured responses (`verified`) rather than read from scrapers' code or notes
  (`inferred`). `describe_text` is its block in `courts`' words.
- `number_segments(court)` reads each court's case-number form from its configuration (a TR Portal
  court's `number`: letters, `-`, `\\d{n}`, `\\d+`, the year marked `(?P<year>\\d{4})` or
  `(?P<yy>\\d{2})`; a C-Track court's `CaseNumbers`); `number_form` says it in words (SC-YYYY-NNNN).
- The facts are those of /work/shared/courts/README.md's sources (juriscraper, FLP, ithildin);
  none was checked against a live court.

Knobs read: COURT_SYSTEM (court_of_config).
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any

from .c00_config import COURT_SYSTEMS, Config, ConfigError
from .c25_court import KENTUCKY, PROBE_UNKNOWNS, CaseNumbers, CTrackCourt
from .c26_trportal import TRCourt, TRPortalCourt

FAMILY_NAMES = {"ctrack": "C-Track Public Access (JSON)", "trportal": "TR Portal (C-Track Public Portal, REST)"}


def _trportal(system: str, name: str, portal: str, courts: list[tuple], opinions: str, **more: Any) -> TRPortalCourt:
    return TRPortalCourt(name=name, system=system, api_base=COURT_SYSTEMS[system].api_base, portal=portal,
                         tr_courts=tuple(TRCourt(*court) for court in courts), opinions=opinions, **more)


DELAWARE_COUNTY = CTrackCourt(
    name="Delaware County Court of Common Pleas", api_base=COURT_SYSTEMS["delaware-county-pa"].api_base,
    courts={"CV": "Delaware County Court of Common Pleas"},
    numbers=CaseNumbers(("CV",), form="{code}-{year}-{sequence}", digits=6, admin=None),
    opinion_search=False, download_paths={"api": "download"}, system="delaware-county-pa",
    portal="https://delcopublicaccess.co.delaware.pa.us", unknowns=PROBE_UNKNOWNS)

NEVADA = _trportal("nevada", "Nevada Supreme Court and Court of Appeals", "https://acis.nvcourts.gov", [
    ("SC", "Nevada Supreme Court", "dc01122c-a19d-4eb7-bfe9-5b96e93c26fd", "1", "Supreme Court", r"\d+", "90509"),
    ("COA", "Nevada Court of Appeals", "74764f58-a87f-4ec5-8233-7a1255e410b3", "2", "Court of Appeals",
     r"\d+-COA", "90082-COA")], "document_search", opinion_types=("1000014", "1000018"), referer="https://acis.nvcourts.gov/")

ALABAMA = _trportal("alabama", "Alabama appellate courts", "https://publicportal.alappeals.gov", [
    ("SC", "Alabama Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", "1", "Alabama Supreme Court",
     r"SC-(?P<year>\d{4})-\d{4}", "SC-2024-0492"),
    ("CL", "Alabama Court of Civil Appeals", "1da1a297-c391-4e4f-9480-1bc68b46f21a", "3",
     "Alabama Court of Civil Appeals", r"CL-(?P<year>\d{4})-\d{4}", "CL-2025-0191"),
    ("CR", "Alabama Court of Criminal Appeals", "b82b30d5-bd3c-46d7-9451-1cb05e470873", "2",
     "Alabama Court of Criminal Appeals", r"CR-(?P<year>\d{4})-\d{4}", "CR-2023-0911")], "publications")

OREGON = _trportal("oregon", "Oregon Supreme Court and Court of Appeals", "https://trportal.courts.oregon.gov", [
    ("SC", "Oregon Supreme Court", "f28c1f7b-0af7-4462-b253-bd5371f86443", "2", "Oregon Supreme Court", r"S\d{6}", "S072851"),
    ("CA", "Oregon Court of Appeals", "3d764b2a-2faa-4613-aac6-7da3b06325f4", "1", "Oregon Court of Appeals",
     r"A\d{6}", "A190411")], "docket_entries")

NORTH_DAKOTA = _trportal("north-dakota", "North Dakota Supreme Court", "https://portal.ctrack.ndcourts.gov", [
    ("SC", "North Dakota Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", "1", "North Dakota Supreme Court",
     r"(?P<year>\d{4})\d{4}", "20240123")], "docket_entries")

WYOMING = _trportal("wyoming", "Wyoming Supreme Court", "https://ctefiling.wyocourts.gov", [
    ("SC", "Wyoming Supreme Court", "cd2875bd-3280-4b05-ac69-030ce5faac20", "1", "Wyoming", r"S-(?P<yy>\d{2})-\d{4}", "S-24-0123")],
    "docket_entries")

_FLORIDA_DISTRICTS = ("First", "Second", "Third", "Fourth", "Fifth", "Sixth")
FLORIDA = _trportal("florida", "Florida Supreme Court and District Courts of Appeal", "https://acis.flcourts.gov/portal", [
    ("SC", "Florida Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", None, "Supreme Court", r"SC(?P<year>\d{4})-\d{4}", "SC2026-0899"),
    *((f"{n}D", f"Florida {word} District Court of Appeal", None, None, f"{n}DCA", rf"{n}D(?P<year>\d{{4}})-\d{{4}}", f"{n}D2024-1234")
      for n, word in enumerate(_FLORIDA_DISTRICTS, start=1))], "publications")

COURTS = {court.system: court for court in (KENTUCKY, DELAWARE_COUNTY, NEVADA, ALABAMA, OREGON, NORTH_DAKOTA,
                                            WYOMING, FLORIDA)}

# What is known of each system, and how sure: `verified` against captured responses, the rest read
# from scrapers' code and notes (README sections 1, 2.1-2.6).
_NOTES: dict[str, dict[str, Any]] = {
    "kentucky": {
        "opinions": "the opinion search (/opinions/search) by court, week by week; docket entries of the case walk",
        "public": "every listed file whose documentAvailable is not false; no registration",
        "unknown": ["whether the site-root download path still answers beside the API's (probe asks both)"],
        "verified": ["the opinion search's rows and file lists (captured ky, kyctapp responses)", "case numbers"],
        "inferred": ["the case search, docket entries, parties and lower courts' shapes (ctrack-api.md)"]},
    "delaware-county-pa": {
        "opinions": "no opinion search is known: the case walk's docket entries",
        "public": "unknown: no source downloads documents there (probe's download rows answer it)",
        "unknown": ["whether documents download anonymously (probe: the download rows)",
                    "whether the API needs the x-ctrack-excludeselflinks header (probe: the headers row)",
                    "the form of its case numbers (probe: the numbers its case search lists)"],
        "verified": [],
        "inferred": ["API base under /api/v1, the case search, parties as nested lists (av-tools code)",
                     "case numbers: a guess, none seen in any source"]},
    "nevada": {
        "opinions": "the document search by opinion type (1000014 published opinions, 1000018 unpublished orders), "
                    "per court, newest first, and oldest first where it holds more than the results window",
        "public": "opinions download anonymously; documents marked securedDocument are not public",
        "unknown": ["whether the API answers from every network (a scraper's note says it may need a VPN)",
                    "whether the document search honours date filters"],
        "verified": ["the document search's envelope and rows (captured nev, nevapp responses)",
                     "case numbers 90509 and 90082-COA", "court ids 1 and 2, abbreviations"],
        "inferred": ["court GUIDs, the case search, docket entries, document access list and download (juriscraper code)"]},
    "alabama": {
        "opinions": "the publications (release lists) of each court and their details; an item whose first document "
                    "is Opinion or Decision",
        "public": "opinions and orders in publications download anonymously; docket documents from about 2022 on "
                  "need registration (UNAVAILABLE)",
        "unknown": ["what the API answers past its 10,000-result window"],
        "verified": ["publication details with uppercase UUIDs (captured ala, alacivapp, alacrimapp responses)",
                     "case numbers SC-, CL-, CR-YYYY-NNNN"],
        "inferred": ["court GUIDs and ids, the case search, docket entries, document access list (juriscraper code)"]},
    "oregon": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "many documents need a purchase (PURCHASABLE)",
        "unknown": ["whether opinions are behind the purchase wall too"],
        "verified": [],
        "inferred": ["court GUIDs and ids, case numbers S and A (juriscraper code)", "every endpoint's shape"]},
    "north-dakota": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "some documents may need a purchase",
        "unknown": ["the form of its case numbers", "which documents need a purchase"],
        "verified": [],
        "inferred": ["court GUID and id (juriscraper code)", "case numbers: a guess (YYYYNNNN)"]},
    "wyoming": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "no paywall noted",
        "unknown": ["the form of its case numbers"],
        "verified": [],
        "inferred": ["court GUID and id (juriscraper code)", "case numbers: a guess (S-YY-NNNN)"]},
    "florida": {
        "opinions": "the publications of each court and their details",
        "public": "public documents download anonymously",
        "unknown": ["the District Courts' GUIDs and ids until /courts is read"],
        "verified": [],
        "inferred": ["the Supreme Court's GUID and case numbers (ithildin code)",
                     "the District Courts' GUIDs and ids: read from /courts at the first run"]},
}
# The keys of every `describe`, in this order (`courts --json`).
DESCRIBE_KEYS = ("name", "title", "default", "family", "family_name", "api_base", "portal", "time_zone", "courts",
                 "case_number_forms", "opinions", "public", "unknown", "verified", "inferred")


# ----------------------------------------------------------- number forms


@dataclass(frozen=True)
class Segment:
    """A piece of a case number's form: `literal` text, or digits (`digits` of them, None: any
    number of them; `year`: 4 or 2 digits of the year); `separated`: a hyphen comes before it."""
    literal: str = ""
    digits: int | None = 0
    year: bool = False
    separated: bool = False

    @property
    def is_literal(self) -> bool:
        return bool(self.literal)


_FORM_TOKEN = re.compile(r"\(\?P<(?P<group>year|yy)>\\d\{(?P<group_digits>\d+)\}\)|\\d\{(?P<digits>\d+)\}|(?P<any>\\d\+)"
                         r"|(?P<separator>-)|(?P<literal>[A-Za-z0-9]+)")


def form_segments(pattern: str) -> tuple[Segment, ...]:
    """The segments of a TR Portal court's number pattern (c27: letters, `-`, `\\d{n}`, `\\d+`, and the
    year as `(?P<year>\\d{4})` or `(?P<yy>\\d{2})`); ValueError for anything else."""
    segments: list[Segment] = []
    separated, at = False, 0
    while at < len(pattern):
        token = _FORM_TOKEN.match(pattern, at)
        if token is None:
            raise ValueError(f"a case number form of letters, '-', \\d{{n}}, \\d+ and the year, not {pattern!r}")
        at = token.end()
        if token["separator"]:
            separated = True
            continue
        if token["literal"]:
            segment = Segment(literal=token["literal"].upper(), separated=separated)
        elif token["group"]:
            segment = Segment(digits=int(token["group_digits"]), year=True, separated=separated)
        else:
            segment = Segment(digits=int(token["digits"]) if token["digits"] else None, separated=separated)
        segments.append(segment)
        separated = False
    return tuple(segments)


def numbers_segments(numbers: CaseNumbers, code: str) -> tuple[Segment, ...]:
    """The segments of a C-Track court's form (`{code}-{year}-{sequence}`) for one of its codes."""
    segments: list[Segment] = []
    for literal, name, _, _ in string.Formatter().parse(numbers.form):
        separated = False
        for piece in re.split(r"(-)", literal):
            if piece == "-":
                separated = True
            elif piece.strip():
                segments.append(Segment(literal=piece.strip().upper(), separated=separated))
                separated = False
        if name == "year":
            segments.append(Segment(digits=4, year=True, separated=separated))
        elif name == "code":
            segments.append(Segment(literal=code.upper(), separated=separated))
        elif name == "sequence":
            segments.append(Segment(digits=numbers.digits, separated=separated))
    return tuple(segments)


def number_form(segments: tuple[Segment, ...]) -> str:
    """A form in words: SC-YYYY-NNNN, NNNNN-COA (N... : any number of digits)."""
    pieces = []
    for segment in segments:
        text = segment.literal or ("YYYY" if segment.year and segment.digits == 4 else "YY" if segment.year
                                   else "N" * segment.digits if segment.digits else "N...")
        pieces.append(("-" if segment.separated else "") + text)
    return "".join(pieces)



def number_segments(court: CTrackCourt | TRPortalCourt) -> dict[str, tuple[Segment, ...]]:
    """code -> the segments of each court's number form, read from the court's configuration."""
    if isinstance(court, TRPortalCourt):
        return {tr_court.code: form_segments(tr_court.number) for tr_court in court.tr_courts}
    return {code: numbers_segments(court.numbers, code) for code in court.numbers.codes}


# ---------------------------------------------------------------- the registry


def court_system(name: str) -> CTrackCourt | TRPortalCourt:
    """The court of the court system `name` (a COURT_SYSTEMS name)."""
    court = COURTS.get(str(name).strip().lower())
    if court is None:
        raise ConfigError("KY_COURT_SYSTEM", name, "one of " + ", ".join(COURT_SYSTEMS))
    return court


def court_of_config(cfg: Config) -> CTrackCourt | TRPortalCourt:
    return court_system(cfg.COURT_SYSTEM)


def case_number_forms(court: CTrackCourt | TRPortalCourt) -> list[str]:
    """Each court's case-number form in words (`number_form`), with an example where the court gives
    one; a C-Track court's ADMIN numbers too."""
    examples = {tr_court.code: tr_court.example for tr_court in getattr(court, "tr_courts", ())}
    forms = [f"{code}: {number_form(segments)}" + (f" (like {examples[code]})" if code in examples else "")
             for code, segments in number_segments(court).items()]
    admin = court.numbers.admin if isinstance(court, CTrackCourt) else None
    if admin:
        forms.append("ADMIN: " + admin.replace("{year}", "YYYY").replace("{code}", "|".join(court.courts)) + " - ...")
    return forms


def describe(court: CTrackCourt | TRPortalCourt) -> dict[str, Any]:
    """What `courts --json` says of a court system (see the module docstring): DESCRIBE_KEYS."""
    notes = _NOTES[court.system]
    described = {"name": court.system, "title": court.name, "default": court.system == next(iter(COURT_SYSTEMS)),
                 "family": court.family, "family_name": FAMILY_NAMES[court.family], "api_base": court.api_base,
                 "portal": court.portal, "time_zone": court.time_zone,
                 "courts": [{"code": code, "name": name, "ids": court.api_ids(code)}
                            for code, name in court.courts.items()],
                 "case_number_forms": case_number_forms(court), "opinions": notes["opinions"],
                 "public": notes["public"], "unknown": list(notes["unknown"]), "verified": list(notes["verified"]),
                 "inferred": list(notes["inferred"])}
    return {key: described[key] for key in DESCRIBE_KEYS}


def describe_all() -> list[dict[str, Any]]:
    return [describe(COURTS[name]) for name in COURT_SYSTEMS]


_LABEL_WIDTH = 14
_TEXT_WIDTH = 100


def _labelled(label: str, values: list[str]) -> list[str]:
    """`label` then each value wrapped under the values' column (a value a line)."""
    import textwrap
    lines = []
    for position, value in enumerate(values or ["none"]):
        head = (label if position == 0 else "").ljust(_LABEL_WIDTH)
        wrapped = textwrap.wrap(value, _TEXT_WIDTH - 2 - _LABEL_WIDTH, break_on_hyphens=False) or [""]
        lines += ["  " + (head if index == 0 else " " * _LABEL_WIDTH) + text for index, text in enumerate(wrapped)]
    return lines


def describe_text(described: dict[str, Any]) -> str:
    """One court system's block as `courts` prints it: a line naming it, then a labelled line for each fact."""
    lines = [f"{described['name']}: {described['title']}" + (" (the default)" if described["default"] else "")]
    lines += _labelled("API", [f"{described['family_name']}, {described['api_base']}"])
    lines += _labelled("portal", [described["portal"]])
    lines += _labelled("days in", [described["time_zone"]])
    for court in described["courts"]:
        ids = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in court["ids"].items()
                        if value and value != court["name"])
        lines += _labelled(f"court {court['code']}", [court["name"] + (f" ({ids})" if ids else "")])
    lines += _labelled("case numbers", described["case_number_forms"])
    lines += _labelled("opinions", [described["opinions"]])
    lines += _labelled("public", [described["public"]])
    lines += _labelled("unknown", described["unknown"])
    lines += _labelled("verified", described["verified"] or ["nothing against captured responses"])
    lines += _labelled("inferred", described["inferred"])
    return "\n".join(lines)
