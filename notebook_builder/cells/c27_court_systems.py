"""The court systems: each name COURT_SYSTEM takes, mapped to its court, and described.

Guarantees:
- `court_system(name)` is the court of a court system (ConfigError for a name c00 COURT_SYSTEMS
  does not hold): a C-Track Public Access court (c25 `CTrackCourt`: Kentucky, Delaware County)
  or a TR Portal one (c26 `TRPortalCourt`). Every court answers `system`, `family`, `courts`
  (code -> name), `api_ids(code)`, `code_of`, `court_of`, `time_zone`; `court_of_config(cfg)` is
  the configured one. FAMILY_NAMES names each family in words.
- `describe(court)` is what `kycourt-pipeline courts --json` says of a court system: its name,
  API family, API base, portal, courts (code, name, the API's ids), case-number forms, how its
  opinions are found, what is public there, and which facts were verified against captured
  responses (`verified`) rather than read from scrapers' code or notes (`inferred`).
- The facts are those of /work/shared/courts/README.md's sources (juriscraper, FLP, ithildin);
  none was checked against a live court.

Knobs read: COURT_SYSTEM (court_of_config).
"""
from __future__ import annotations

from typing import Any

from .c00_config import COURT_SYSTEMS, Config, ConfigError
from .c25_court import KENTUCKY, CaseNumbers, CTrackCourt
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
    portal="https://delcopublicaccess.co.delaware.pa.us")

NEVADA = _trportal("nevada", "Nevada Supreme Court and Court of Appeals", "https://acis.nvcourts.gov", [
    ("SC", "Nevada Supreme Court", "dc01122c-a19d-4eb7-bfe9-5b96e93c26fd", "1", "Supreme Court", r"\d+", "90509"),
    ("COA", "Nevada Court of Appeals", "74764f58-a87f-4ec5-8233-7a1255e410b3", "2", "Court of Appeals",
     r"\d+-COA", "90082-COA")], "document_search", opinion_types=("1000014", "1000018"), referer="https://acis.nvcourts.gov/")

ALABAMA = _trportal("alabama", "Alabama appellate courts", "https://publicportal.alappeals.gov", [
    ("SC", "Alabama Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", "1", "Alabama Supreme Court",
     r"SC-\d{4}-\d{4}", "SC-2024-0492"),
    ("CL", "Alabama Court of Civil Appeals", "1da1a297-c391-4e4f-9480-1bc68b46f21a", "3",
     "Alabama Court of Civil Appeals", r"CL-\d{4}-\d{4}", "CL-2025-0191"),
    ("CR", "Alabama Court of Criminal Appeals", "b82b30d5-bd3c-46d7-9451-1cb05e470873", "2",
     "Alabama Court of Criminal Appeals", r"CR-\d{4}-\d{4}", "CR-2023-0911")], "publications")

OREGON = _trportal("oregon", "Oregon Supreme Court and Court of Appeals", "https://trportal.courts.oregon.gov", [
    ("SC", "Oregon Supreme Court", "f28c1f7b-0af7-4462-b253-bd5371f86443", "2", "Oregon Supreme Court", r"S\d{6}", "S072851"),
    ("CA", "Oregon Court of Appeals", "3d764b2a-2faa-4613-aac6-7da3b06325f4", "1", "Oregon Court of Appeals",
     r"A\d{6}", "A190411")], "docket_entries")

NORTH_DAKOTA = _trportal("north-dakota", "North Dakota Supreme Court", "https://portal.ctrack.ndcourts.gov", [
    ("SC", "North Dakota Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", "1", "North Dakota Supreme Court",
     r"\d{8}", "20240123")], "docket_entries")

WYOMING = _trportal("wyoming", "Wyoming Supreme Court", "https://ctefiling.wyocourts.gov", [
    ("SC", "Wyoming Supreme Court", "cd2875bd-3280-4b05-ac69-030ce5faac20", "1", "Wyoming", r"S-\d{2}-\d{4}", "S-24-0123")],
    "docket_entries")

_FLORIDA_DISTRICTS = ("First", "Second", "Third", "Fourth", "Fifth", "Sixth")
FLORIDA = _trportal("florida", "Florida Supreme Court and District Courts of Appeal", "https://acis.flcourts.gov/portal", [
    ("SC", "Florida Supreme Court", "68f021c4-6a44-4735-9a76-5360b2e8af13", None, "Supreme Court", r"SC\d{4}-\d{4}", "SC2026-0899"),
    *((f"{n}D", f"Florida {word} District Court of Appeal", None, None, f"{n}DCA", rf"{n}D\d{{4}}-\d{{4}}", f"{n}D2024-1234")
      for n, word in enumerate(_FLORIDA_DISTRICTS, start=1))], "publications")

COURTS = {court.system: court for court in (KENTUCKY, DELAWARE_COUNTY, NEVADA, ALABAMA, OREGON, NORTH_DAKOTA,
                                            WYOMING, FLORIDA)}

# What is known of each system, and how sure: `verified` against captured responses, the rest read
# from scrapers' code and notes (README sections 1, 2.1-2.6).
_NOTES: dict[str, dict[str, Any]] = {
    "kentucky": {
        "opinions": "the opinion search (/opinions/search) by court, week by week; docket entries of the case walk",
        "public": "every listed file whose documentAvailable is not false; no registration",
        "verified": ["the opinion search's rows and file lists (captured ky, kyctapp responses)", "case numbers"],
        "inferred": ["the case search, docket entries, parties and lower courts' shapes (ctrack-api.md)"]},
    "delaware-county-pa": {
        "opinions": "no opinion search is known: the case walk's docket entries",
        "public": "unknown: no source downloads documents there",
        "verified": [],
        "inferred": ["API base and case search (av-tools)", "case numbers: a guess, none seen in any source"]},
    "nevada": {
        "opinions": "the document search by opinion type (1000014 published opinions, 1000018 unpublished orders), "
                    "per court, newest first, and oldest first where it holds more than the results window",
        "public": "opinions download anonymously; documents marked securedDocument are not public",
        "verified": ["the document search's envelope and rows (captured nev, nevapp responses)",
                     "case numbers 90509 and 90082-COA", "court ids 1 and 2, abbreviations"],
        "inferred": ["court GUIDs, the case search, docket entries, document access list and download (juriscraper code)"]},
    "alabama": {
        "opinions": "the publications (release lists) of each court and their details; an item whose first document "
                    "is Opinion or Decision",
        "public": "opinions and orders in publications download anonymously; docket documents from about 2022 on "
                  "need registration (UNAVAILABLE)",
        "verified": ["publication details with uppercase UUIDs (captured ala, alacivapp, alacrimapp responses)",
                     "case numbers SC-, CL-, CR-YYYY-NNNN"],
        "inferred": ["court GUIDs and ids, the case search, docket entries, document access list (juriscraper code)"]},
    "oregon": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "many documents need a purchase (PURCHASABLE)",
        "verified": [],
        "inferred": ["court GUIDs and ids, case numbers S and A (juriscraper code)", "every endpoint's shape"]},
    "north-dakota": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "some documents may need a purchase",
        "verified": [],
        "inferred": ["court GUID and id (juriscraper code)", "case numbers: a guess (YYYYNNNN)"]},
    "wyoming": {
        "opinions": "dispositional docket entries of the case walk",
        "public": "no paywall noted",
        "verified": [],
        "inferred": ["court GUID and id (juriscraper code)", "case numbers: a guess (S-YY-NNNN)"]},
    "florida": {
        "opinions": "the publications of each court and their details",
        "public": "public documents download anonymously",
        "verified": [],
        "inferred": ["the Supreme Court's GUID and case numbers (ithildin code)",
                     "the District Courts' GUIDs and ids: read from /courts at the first run"]},
}


def court_system(name: str) -> CTrackCourt | TRPortalCourt:
    """The court of the court system `name` (a COURT_SYSTEMS name)."""
    court = COURTS.get(str(name).strip().lower())
    if court is None:
        raise ConfigError("KY_COURT_SYSTEM", name, "one of " + ", ".join(COURT_SYSTEMS))
    return court


def court_of_config(cfg: Config) -> CTrackCourt | TRPortalCourt:
    return court_system(cfg.COURT_SYSTEM)


def case_number_forms(court: CTrackCourt | TRPortalCourt) -> list[str]:
    """Each court's case-number form, in words or as the pattern its numbers match."""
    if isinstance(court, CTrackCourt):
        forms = [court.numbers.form.replace("{sequence}", "N" * court.numbers.digits)]
        if court.numbers.admin:
            forms.append(court.numbers.admin + " - ...")
        return [form.replace("{year}", "YYYY").replace("{code}", "|".join(court.courts)) for form in forms]
    return [f"{tr_court.code}: like {tr_court.example} ({tr_court.number})" for tr_court in court.tr_courts]


def describe(court: CTrackCourt | TRPortalCourt) -> dict[str, Any]:
    """What `courts --json` says of a court system (see the module docstring)."""
    notes = _NOTES[court.system]
    return {"name": court.system, "title": court.name, "family": court.family,
            "family_name": FAMILY_NAMES[court.family], "api_base": court.api_base, "portal": court.portal,
            "time_zone": court.time_zone, "default": court.system == next(iter(COURT_SYSTEMS)),
            "courts": [{"code": code, "name": name, "ids": court.api_ids(code)} for code, name in court.courts.items()],
            "case_number_forms": case_number_forms(court), "opinions": notes["opinions"], "public": notes["public"],
            "verified": list(notes["verified"]), "inferred": list(notes["inferred"])}


def describe_all() -> list[dict[str, Any]]:
    return [describe(COURTS[name]) for name in COURT_SYSTEMS]
