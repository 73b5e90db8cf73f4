"""The JSON the simulated TR Portal answers, item by item, in the captured shapes (README §2.4).

Guarantees:
- Document search rows (#8) have the captured keys exactly: `documentLinkUUID`, `documentName`,
  `docketEntryHeader{filedDate, docketEntryType, docketEntryTypeID, docketEntrySubTypeID,
  docketEntryDescription, official, [outcomeStatus, outcomeStatusID], securedDocument}` and
  `caseHeader{caseInstanceUUID, caseNumber, caseTitle, caseCategory, courtID, courtAbbreviation}`;
  publication details (#13) those of the Alabama captures (an item without a document has no
  `documents`; `publicationNote` at the appeals courts). Case search rows (#2), case details (#3),
  parties (#4), docket entries (#5), access rows (#7), courts (#1) and publication list rows (#12)
  have the fields the README's sources read.
- Instants: an entry's `filedDate` `YYYY-MM-DDTHH:MM:SS.000+00:00`; a case's `filedDate` its local
  midnight written with its offset (`case_instants` "local"), or the same instant in UTC ("utc");
  a publication's `publicationDate` with milliseconds, as captured.
- Ids (`courtID`, `docketEntryTypeID`, ...) are strings as captured, or numbers (`numeric_ids`);
  UUIDs in the system's letter case (corpus.py).
- Nevada's published opinions are described and named as captured ("... 142 Nev. Adv. Opn. No. 45.",
  "142opn045", "Opinion/Dispositional - Authored Opinion").
"""
from __future__ import annotations

import datetime as _dt
import hashlib

from .systems import CATEGORY_NAMES, PUBLISHED_NEVADA, STATE_GUIDS, UNPUBLISHED_NEVADA

CASE_INSTANTS = ("local", "utc")
JUDGES = {
    "nev": ("Stiglich", "Cadish", "Lee", "Pickering", "Herndon", "Parraguirre", "Bell"),
    "nevapp": ("Bulla", "Gibbons", "Westbrook"),
    "ala": ("Wise", "Shaw", "Bryan", "Mendheim", "Stewart", "Cook", "Sellers", "Mitchell"),
    "alacivapp": ("Moore", "Edwards", "Hanson", "Fridy", "Bowden"),
    "alacrimapp": ("Windom", "Kellum", "McCool", "Cole", "Minor", "Anderson"),
}
OTHER_JUDGES = ("Walters", "Duncan", "Garrett", "Flynn", "Baldwin", "Ortega", "Kessler")
CLASSIFICATIONS = ("Appeal - Civil", "Appeal - Criminal", "Petition for Writ")


def _hash(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big")


class Shapes:
    """What the portal answers of each item of a corpus (see the module docstring)."""

    def __init__(self, corpus, *, numeric_ids: bool = False, case_instants: str = "local", pdf_info=None):
        if case_instants not in CASE_INSTANTS:
            raise ValueError(f"case_instants must be one of {CASE_INSTANTS}")
        self.corpus, self.system = corpus, corpus.system
        self.numeric_ids, self.case_instants = numeric_ids, case_instants
        self.pdf_info = pdf_info or (lambda doc: (1, 0))   # doc -> (pages, bytes)

    def ident(self, value) -> str | int:
        return int(value) if self.numeric_ids else str(value)

    # --------------------------------------------------------------- courts

    def court_row(self, court: int) -> dict:
        spec = self.system.courts[court]
        return {"resourceID": self.corpus.court_guid(court), "externalIdentifier": self.ident(spec.external_identifier),
                "displayName": spec.display_name, "courtAbbreviation": spec.display_name,
                "locations": [{"locationID": self.ident(100 + court), "locationName": spec.display_name}]}

    # ---------------------------------------------------------------- cases

    def case_filed(self, case: int) -> str:
        day = self.corpus.case_filed[case]
        if self.case_instants == "local":
            return self.system.local_midnight(day)
        return self.system.utc_instant(day, 0)

    def case_brief(self, case: int) -> dict:
        """The caseHeader of a document search row (#8), as captured."""
        corpus = self.corpus
        court = corpus.court_of_case(case)
        return {"caseInstanceUUID": corpus.uuid("case", case), "caseNumber": corpus.case_numbers[case],
                "caseTitle": corpus.case_title(case), "caseCategory": CATEGORY_NAMES[corpus.case_category[case]],
                "courtID": self.ident(court.external_identifier), "courtAbbreviation": court.display_name}

    def case_search_row(self, case: int) -> dict:
        corpus = self.corpus
        return {"caseHeader": {**self.case_brief(case),
                               "caseClassification": CLASSIFICATIONS[corpus.case_category[case]],
                               "filedDate": self.case_filed(case), "closedFlag": corpus.case_closed(case)}}

    def case_detail(self, case: int) -> dict:
        corpus = self.corpus
        court = corpus.court_of_case(case)
        category = corpus.case_category[case]
        lower_name, lower_number = corpus.lower_court(case)
        header = {**self.case_brief(case), "caseCaption": corpus.case_title(case).upper(),
                  "closedFlag": corpus.case_closed(case),
                  "caseClassification": CLASSIFICATIONS[category],
                  "caseClassificationID": self.ident(1000300 + category),
                  "caseClassGroupType": "Appellate", "caseClassGroupTypeID": self.ident(1000310),
                  "location": court.display_name, "locationID": self.ident(100 + corpus.case_court[case]),
                  "caseGroupFlag": False, "panelFlag": False, "filedDate": self.case_filed(case),
                  "originatingCourtCases": [] if category == 2 else [
                      {"originatingCourtName": lower_name, "originatingCaseNumber": lower_number}],
                  "nonPublicFlag": False}
        if court.detail_court_id:
            header["courtID"] = self.ident(court.detail_court_id)
        return {"caseHeader": header}

    def party_names(self, case: int) -> tuple[str, str]:
        title = self.corpus.case_title(case).split(" C/W ")[0]
        for separator in (" VS. ", " VS ", " v. "):
            if separator in title:
                first, second = title.split(separator, 1)
                return first.strip(), second.replace(" (CIVIL)", "").replace(" (CRIMINAL)", "").strip()
        return title.replace("Ex parte ", ""), self.system.state_party

    def parties(self, case: int) -> list[dict]:
        rows = []
        for number, (name, role) in enumerate(zip(self.party_names(case), ("Appellant", "Respondent")), start=1):
            h = _hash(self.corpus.seed, "attorney", case, number)
            attorney = f"{OTHER_JUDGES[h % len(OTHER_JUDGES)]}, {('A.', 'M.', 'R.', 'T.')[(h >> 8) % 4]}"
            represented = (h >> 16) % 5 != 0
            rows.append({
                "partyHeader": {"casePartyUUID": self.corpus.uuid("party", case * 2 + number - 1), "partyType": "Party",
                                "partyTypeID": self.ident(1000400), "partySubType": role,
                                "partySubTypeID": self.ident(1000400 + number), "partyStatus": "Active",
                                "partyStatusID": self.ident(1000410),
                                "partyActorInstance": {"displayName": name, "sortName": name.upper()}},
                "legalRepresentations": [] if not represented else [{"attorneyPartyHeader": {"partyActorInstance": {
                    "displayName": attorney, "sortName": attorney.upper()}}, "primaryFlag": True}],
                "proSeFlag": not represented, "orderBy": number, "partyNumber": number,
                "involvementTypeID": self.ident(1000420 + number), "nonPublicFlag": False})
        return rows

    # -------------------------------------------------------------- entries

    def judges(self, case: int) -> tuple[str, ...]:
        return JUDGES.get(self.corpus.court_of_case(case).code, OTHER_JUDGES)

    def description(self, entry: int) -> str:
        corpus = self.corpus
        kind, case = corpus.kind(entry), corpus.entry_case[entry]
        if kind.type_id in (PUBLISHED_NEVADA, UNPUBLISHED_NEVADA):
            judges = self.judges(case)
            h = _hash(corpus.seed, "panel", entry)
            panel = [judges[(h + step) % len(judges)] for step in range(3)]
            initials = "/".join(name[0] + name[-1].upper() for name in panel)
            court = "COA" if corpus.court_of_case(case).code == "nevapp" else "SC"
            year = _dt.date.fromordinal(corpus.entry_day[entry]).year
            if kind.type_id == UNPUBLISHED_NEVADA:
                decided = kind.decision.rstrip(".").upper()
                return (f'Filed {kind.subtype}. "ORDER the judgment of the district court {decided}." '
                        f'{"NNP" if court == "SC" else "COA"}{year % 100:02d}-{initials}')
            authored = kind.subtype_id == 1000230
            return (f'Filed {"authored" if authored else "per curiam"} opinion. "{kind.decision}" '
                    f'Before {"/".join(panel)}. ' + (f'Author: {panel[0]}, J. ' if authored else '')
                    + f'Majority: {"/".join(panel)}. {year - 1884} Nev. Adv. Opn. No. {corpus.citation_number(entry)}. '
                    f'{initials} ({court})')
        if kind.dispositional:
            written = kind.decision.startswith(("Decision", "Application", "Certiorari"))
            return kind.decision if written else f"{kind.subtype}. {kind.decision}"
        return f"{kind.subtype}." if not kind.document_name else f"{kind.subtype} filed."

    def document_name(self, doc: int) -> str:
        corpus = self.corpus
        entry = corpus.doc_entry[doc]
        kind = corpus.kind(entry)
        if corpus.doc_appendix[doc]:
            return "Appendix"
        if kind.type_id == PUBLISHED_NEVADA:     # named three ways, as captured
            form = _hash(corpus.seed, "name", entry) % 5
            if form == 0:
                year = _dt.date.fromordinal(corpus.entry_day[entry]).year
                return f"{year - 1884}opn{corpus.citation_number(entry):03d}"
            if form == 1:
                return f"{corpus.case_numbers[corpus.entry_case[entry]]} Opinion"
            return f"{kind.type} - {kind.subtype}"
        if kind.type_id == UNPUBLISHED_NEVADA:
            return f"{kind.type} - {kind.subtype}"
        return kind.document_name

    def entry_filed(self, entry: int) -> str:
        return self.system.utc_instant(self.corpus.entry_day[entry], self.corpus.entry_second[entry])

    def entry_header_brief(self, entry: int) -> dict:
        """The docketEntryHeader of a document search row (#8), as captured."""
        corpus = self.corpus
        kind = corpus.kind(entry)
        header = {"filedDate": self.entry_filed(entry), "docketEntryType": kind.type,
                  "docketEntryTypeID": self.ident(kind.type_id), "docketEntrySubTypeID": self.ident(kind.subtype_id),
                  "docketEntryDescription": self.description(entry), "official": True}
        if _hash(corpus.seed, "outcome", entry) % 6 == 0:      # sometimes there, sometimes not
            header.update({"outcomeStatus": "Mailed", "outcomeStatusID": self.ident(1000006)})
        header["securedDocument"] = bool(corpus.entry_secured[entry])
        return header

    def docket_entry(self, entry: int) -> dict:
        corpus = self.corpus
        kind, case = corpus.kind(entry), corpus.entry_case[entry]
        header = {"docketEntryUUID": corpus.uuid("entry", entry), **self.entry_header_brief(entry),
                  "submittedDate": self.entry_filed(entry), "docketEntrySubType": kind.subtype,
                  "docketEntryName": kind.subtype, "docketEntryStatus": "Filed",
                  "docketEntryStatusID": self.ident(1000500), "documentCount": len(corpus.entry_docs(entry)),
                  "compositeSecurity": "Secured" if corpus.entry_secured[entry] else "Public"}
        header.setdefault("outcomeStatus", None)
        header.setdefault("outcomeStatusID", None)
        submitted = []
        if kind.type in ("Filing", "Brief", "Motion", "Notice") and kind.document_name:
            name = self.party_names(case)[0 if kind.subtype != "Answering Brief" else 1]
            submitted = [{"partyActorInstance": {"displayName": name, "sortName": name.upper()}}]
        return {"docketEntryHeader": header, "submittedBy": submitted}

    # ------------------------------------------------------------ documents

    def access_row(self, doc: int) -> dict:
        corpus = self.corpus
        pages, size = self.pdf_info(doc)
        kind = corpus.kind(corpus.doc_entry[doc])
        return {"documentLinkUUID": corpus.uuid("document", doc), "documentName": self.document_name(doc),
                "docketEntryUUID": corpus.uuid("entry", corpus.doc_entry[doc]),
                "userDocumentState": STATE_GUIDS[corpus.doc_state[doc]],
                "documentInfo": {"documentType": kind.type, "contentType": "application/pdf", "fileExtension": "pdf",
                                 "pageCount": pages, "fileSize": size}}

    def document_search_row(self, doc: int) -> dict:
        corpus = self.corpus
        entry = corpus.doc_entry[doc]
        return {"documentLinkUUID": corpus.uuid("document", doc), "documentName": self.document_name(doc),
                "docketEntryHeader": self.entry_header_brief(entry),
                "caseHeader": self.case_brief(corpus.entry_case[entry])}

    # --------------------------------------------------------- publications

    def publication_head(self, court: int, day: int, entries: list[int]) -> dict:
        corpus = self.corpus
        spec = self.system.courts[court]
        date = _dt.date.fromordinal(day)
        second = max(corpus.entry_second[entry] for entry in entries) + 60
        stamp = self.system.utc_instant(day, second)[:-10] + f".{_hash(corpus.seed, 'ms', court, day) % 1000:03d}+00:00"
        head = {"courtAbbreviation": spec.display_name,
                "publicationNumber": f"{spec.prefix}-RELEASE-{date.isoformat()}",
                "publicationName": f"{spec.release_name} Release List - {date:%B} {date.day}, {date.year}"}
        if spec.prefix != "SC":
            head["publicationNote"] = f"Decisions Announced on {date:%A}, {date:%B} {date.day}, {date.year}"
        head["publicationDate"] = stamp
        return head

    def publication_row(self, court: int, day: int, entries: list[int]) -> dict:
        return {"publicationUUID": self.corpus.publication_uuid(court, day),
                **self.publication_head(court, day, entries)}

    def publication_detail(self, court: int, day: int, entries: list[int]) -> dict:
        corpus = self.corpus
        groups: dict[str, list[int]] = {}
        for entry in entries:
            groups.setdefault(self._group(entry), []).append(entry)
        items = []
        for group_order, (group, members) in enumerate(sorted(groups.items()), start=1):
            for order, entry in enumerate(members, start=1):
                case = corpus.entry_case[entry]
                kind = corpus.kind(entry)
                lower_name, lower_number = corpus.lower_court(case)
                item = {"publicationItemUUID": corpus.uuid("item", entry),
                        "caseInstanceUUID": corpus.uuid("case", case), "caseNumber": corpus.case_numbers[case],
                        "groupName": group, "groupOrderBy": group_order,
                        "title": f"{corpus.case_title(case)} (Appeal from {lower_name}: {lower_number}).",
                        "decision": kind.decision, "orderBy": order}
                docs = corpus.entry_docs(entry)
                if len(docs):
                    item["documents"] = [{"documentLinkUUID": corpus.uuid("document", doc),
                                          "documentName": self.document_name(doc)} for doc in docs]
                items.append(item)
        return {**self.publication_head(court, day, entries), "publicationItems": items}

    def _group(self, entry: int) -> str:
        corpus = self.corpus
        kind = corpus.kind(entry)
        if "Rehearing" in kind.subtype or "Rehearing" in kind.decision:
            return "On Rehearing"
        h = _hash(corpus.seed, "group", entry)
        if h % 4 == 0:
            return "Per Curiam"
        judge = self.judges(corpus.entry_case[entry])[(h >> 8) % len(self.judges(corpus.entry_case[entry]))]
        code = corpus.court_of_case(corpus.entry_case[entry]).code
        return f"Judge {judge}" if code == "alacrimapp" else f"{judge}, J."
