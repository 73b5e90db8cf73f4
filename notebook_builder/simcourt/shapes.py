"""The court's answers, field for field: the JSON the simulated court serves for its planned corpus.

Guarantees:
- `Corpus` is `PlannedCorpus` (corpus.py) with the court's rows and resources built on demand: the
  inferred shapes (`document_row`, `case_row`, `entry_document`) and the captured ones
  (ctrack-api.md, "What real captured responses show"): `case_header`, `captured_case_row`,
  `docket_entry` and `bare_entries` (`hasDocuments: false`), `entry_file` (nested caseHeader,
  per-page `documentText` that is the text of the PDF served), `unavailable_file`, `opinion_row`,
  `captured_document_row`, `parties`, `lower_courts`, with the captured value forms (`+0000`
  instants, `\r\n` between a title's parties, date-only values as Kentucky's midnight in UTC with
  `midnight_instants`). Court names are the corpus's `court_names`.
- A withdrawn document's file is listed with `documentAvailable: false` and no text; retitlings and
  changed descriptions show in every answer; the PDFs (and their texts) stay the planned ones.
"""
from __future__ import annotations

import datetime as _dt

from . import pdfs
from .corpus import (_SURNAMES, BARE_ENTRY_DESCRIPTIONS, CAPTURED_CASE_TYPES, CAPTURED_OPEN_STATUSES, COURT_LEVELS,
                     DESCRIPTIONS, LOWER_COUNTIES, PERMANENT_STATUS, PlannedCorpus, hex_id, is_admin_number)


class Corpus(PlannedCorpus):
    """The planned corpus and the court's answers about it (see the module docstring)."""

    prose = "plain"          # the PDFs' body text: pdfs.PROSE

    def document_row(self, doc: int) -> dict:
        """A resultItem of the document search."""
        case = self.doc_case[doc]
        key = self.case_keys[case]
        document_id = hex_id(self.seed, "document", doc)
        return {"id": document_id, "rowMap": {
            "documentID": document_id, "documentName": self.document_name(doc),
            "mimeType": "application/pdf", "caseHeader.caseNumber": key,
            "caseHeader.caseID": hex_id(self.seed, "case", case),
            "caseHeader.shortTitle": self.case_title(case),
            "caseHeader.court": self.court_names[key[5:7]],
            "docketEntryID": hex_id(self.seed, "entry", self.doc_entry[doc]),
            "docketEntryDescription": self.description(doc),
            "filedDate": self.iso_date(self.doc_filed[doc]), "documentAvailable": doc not in self.withdrawn}}

    def case_row(self, case: int) -> dict:
        """A resultItem of the case search."""
        case_id = hex_id(self.seed, "case", case)
        closed = self.closed_override.get(case)
        if closed is None:
            closed = self._closed_by_hash(case)
        return {"id": case_id, "rowMap": {
            "caseNumber": self.case_keys[case], "caseID": case_id,
            "shortTitle": self.case_title(case), "caseType": self.case_type(case),
            "closed": closed, "filedDate": self.iso_date(self.case_filed[case])}}

    def entry_document(self, doc: int) -> dict:
        """An element of the docket-entry document list."""
        return {"documentID": hex_id(self.seed, "document", doc),
                "documentName": self.document_name(doc), "mimeType": "application/pdf",
                "parentID": hex_id(self.seed, "entry", self.doc_entry[doc]),
                "parentCategory": "docketentries",
                "parentDate": self.iso_date(self.doc_filed[doc]), "documentAvailable": True}

    def utc_stamp(self, ordinal: int, salt: int = 0) -> str:
        """A captured date: `2024-04-18T09:03:02.000+0000`. With `midnight_instants`, an evening in
        Kentucky of day `ordinal`: 00:00-03:59 UTC of the next day (cut at ten characters, the wrong day)."""
        if self.midnight_instants:
            ordinal += 1
            seconds = (salt * 7919) % (4 * 3600)
        else:
            seconds = (salt * 7919) % 86400
        day = _dt.date.fromordinal(ordinal)
        return f"{day.isoformat()}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000+0000"

    def local_midnight(self, ordinal: int) -> str:
        """A date-only value as the court writes it: Kentucky's midnight in UTC (`T04:00`/`T05:00`)."""
        day = _dt.date.fromordinal(ordinal)
        return f"{day.isoformat()}T{'04' if 4 <= day.month <= 10 else '05'}:00:00.000+0000"

    def captured_title(self, case: int) -> str:
        """The court's shortTitle: the parties on lines of their own (`A\r\nV.\r\nB`)."""
        if is_admin_number(self.case_keys[case]):
            return "PUBLIC OPINION IN A CONFIDENTIAL CASE"
        appellant, respondent = self.case_title(case).split(" VS. ")
        return f"{appellant}\r\nV.\r\n{respondent}"

    def case_header(self, case: int) -> dict:
        """`/cases/{caseID}`, and the `caseHeader` nested in a docket entry's files."""
        key = self.case_keys[case]
        court = key[5:7]
        case_id = hex_id(self.seed, "case", case)
        h = int(case_id[8:16], 16)
        kind = CAPTURED_CASE_TYPES[h % len(CAPTURED_CASE_TYPES)]
        closed = self.case_closed(case)
        return {"components": None, "tags": None, "customFields": {}, "caseID": case_id, "caseNumber": key,
                "caseStatus": "FINAL" if closed else CAPTURED_OPEN_STATUSES[h % len(CAPTURED_OPEN_STATUSES)],
                "caseStatusDate": self.utc_stamp(self.status_day.get(case, self.case_filed[case] + 30 + h % 300),
                                                 h),
                "closed": closed, "shortTitle": self.captured_title(case), "fullTitle": None,
                "caseType": kind,
                "caseClassification": f"{'MATTER OF RIGHT' if court == 'CA' else 'DISCRETIONARY REVIEW'} - {kind} - REGULAR {kind}",
                "department": None, "location": None, "assignments": None, "submittedDate": None,
                "filedDate": (self.local_midnight(self.case_filed[case]) if self.midnight_instants
                              else self.utc_stamp(self.case_filed[case], h >> 3)),
                "court": self.court_names[court], "courtLevel": COURT_LEVELS[court], "caseCategory": "Appellate",
                "associatedCases": None, "caseLocation": None}

    def captured_case_row(self, case: int) -> dict:
        """A resultItem of the case search, with the captured value forms."""
        case_id = hex_id(self.seed, "case", case)
        header = self.case_header(case)
        return {"id": case_id, "rowMap": {key: header[key] for key in
                                          ("caseNumber", "caseID", "shortTitle", "caseType", "closed", "filedDate")}}

    def entry_kind(self, doc: int) -> tuple[str, str]:
        """(docketEntryType, docketEntrySubtype) of the entry a document hangs off."""
        court = self.case_keys[self.doc_case[doc]][5:7]
        if doc in self.admin_description:
            return "CA - OPINION" if court == "CA" else "DISPOSITION - OPINION OF THE COURT", "NOT TO BE PUBLISHED - OPINION AFFIRMING"
        description, word = DESCRIPTIONS[self.doc_description[doc]]
        published = "TO BE PUBLISHED" if int(hex_id(self.seed, "entry", doc)[:2], 16) % 3 == 0 else "NOT TO BE PUBLISHED"
        if word in ("opinion", "memorandum"):
            kind = "CA - OPINION" if court == "CA" else "DISPOSITION - OPINION OF THE COURT BY A JUSTICE"
            return kind, f"{published} - {description}"
        return {"order": "ORDER", "notice": "NOTICE", "brief": "BRIEF"}[word], description

    def docket_entry(self, entry: int) -> dict:
        kind, subtype = self.entry_kind(entry)
        return {"docketEntryID": hex_id(self.seed, "entry", entry),
                "filedDate": self.utc_stamp(self.doc_filed[entry], entry),
                "docketEntryType": kind, "docketEntrySubtype": subtype,
                "docketEntryDescription": self.description(entry), "submittedBy": None,
                "customFields": {}, "opinion": self.is_opinion(entry), "hasDocuments": True}

    def bare_entries(self, case: int) -> list[dict]:
        """Docket entries without documents (`hasDocuments: false`): 0-2 a case."""
        case_id = hex_id(self.seed, "case", case)
        count = int(case_id[48:50], 16) % 3
        return [{"docketEntryID": hex_id(self.seed, "bare-entry", case * 3 + k),
                 "filedDate": self.utc_stamp(self.case_filed[case] + k, case + k),
                 "docketEntryType": "NOTICE", "docketEntrySubtype": BARE_ENTRY_DESCRIPTIONS[k],
                 "docketEntryDescription": BARE_ENTRY_DESCRIPTIONS[k], "submittedBy": None,
                 "customFields": {}, "opinion": False, "hasDocuments": False} for k in range(count)]

    def opinion_fields(self, source: int) -> dict:
        """The arguments of `pdfs.opinion_pdf` / `opinion_pages` for the PDF the court serves for
        document `source` (a duplicate's original): one place, so the court's text is its PDF's."""
        document = self.document(source)
        day = _dt.date.fromordinal(self.doc_filed[source])
        # As planned: a retitled case or a changed description leaves the PDF the court holds alone.
        return {"seed": f"{self.seed}:{source}", "case_number": document.case_number, "court": document.court,
                "title": self.planned_title(self.doc_case[source]), "description": self.planned_description(source),
                "filed": f"{day:%B} {day.day}, {day.year}".upper(), "prose": self.prose}

    def court_pages(self, doc: int) -> list[str]:
        """The court's own text of a document, one string a page, as the real court keeps it: the text
        of the PDF it serves, with `\r\n` line ends and a trailing space on each line."""
        source = self.duplicate_of.get(doc, doc)
        fault = self.fault(source)
        if fault in ("image_only", "no_text", "unparseable") or fault in PERMANENT_STATUS \
                or fault in ("always_503", "oversized", "lying_length"):
            return [""]
        return [" \r\n".join(lines) + " \r\n" for lines in pdfs.opinion_pages(**self.opinion_fields(source))]

    def entry_file(self, doc: int) -> dict:
        """An element of `/publicaccessdocuments?filter=...`, as captured."""
        entry = self.doc_entry[doc]
        kind, subtype = self.entry_kind(entry)
        file = {"components": None, "tags": None, "customFields": {}, "dmsDocumentID": str(100000 + doc),
                "documentID": hex_id(self.seed, "document", doc), "documentName": subtype,
                "documentDescription": None, "documentText": self.court_pages(doc),
                "mimeType": "application/pdf", "parentSourceID": str(2000000 + entry),
                "parentID": hex_id(self.seed, "entry", entry), "parentCategory": "docketentries",
                "parentType": kind, "parentSubtype": subtype, "parentName": None,
                "parentDate": self.utc_stamp(self.doc_filed[entry], entry), "documentAvailable": True,
                "caseHeader": self.case_header(self.doc_case[doc])}
        if doc in self.withdrawn:       # withheld now: listed, not served, no text
            file.update(documentAvailable=False, documentText=None)
        return file

    def unavailable_file(self, entry: int) -> dict | None:
        """The extra file (`documentAvailable: false`) of an entry that has one (`has_withheld_file`)."""
        if not self.has_withheld_file(entry):
            return None
        kind, subtype = self.entry_kind(entry)
        return {**self.entry_file(entry), "documentID": hex_id(self.seed, "unavailable", entry),
                "dmsDocumentID": None, "documentName": f"{subtype} (SEALED ATTACHMENT)", "documentText": None,
                "documentAvailable": entry in self.restored_withheld}

    def opinion_row(self, entry: int) -> dict:
        """A resultItem of the opinion search: a docket entry, not a document (no documentID)."""
        row = self.docket_entry(entry)
        case = self.doc_case[entry]
        return {"id": row["docketEntryID"], "indexID": "150003", "score": 3.0, "rowMap": {
            "caseHeader.caseNumber": self.case_keys[case], "docketEntrySubtype": row["docketEntrySubtype"],
            "docketEntryDescription": row["docketEntryDescription"], "docketEntryType": row["docketEntryType"],
            "docketEntryID": row["docketEntryID"], "caseHeader.caseID": hex_id(self.seed, "case", case),
            "filedDate": row["filedDate"], "hasDocuments": True}}

    def captured_document_row(self, doc: int) -> dict:
        """The inferred document search row with only what real rows are known to carry, captured forms."""
        case = self.doc_case[doc]
        document_id = hex_id(self.seed, "document", doc)
        return {"id": document_id, "rowMap": {
            "documentID": document_id, "caseHeader.caseNumber": self.case_keys[case],
            "caseHeader.caseID": hex_id(self.seed, "case", case),
            "docketEntryID": hex_id(self.seed, "entry", self.doc_entry[doc]),
            "docketEntryDescription": self.description(doc),
            "filedDate": self.utc_stamp(self.doc_filed[self.doc_entry[doc]], self.doc_entry[doc])}}

    def parties(self, case: int) -> list[dict]:
        title = self.case_title(case)
        names = title.split(" VS. ") if " VS. " in title else [title, "COMMONWEALTH"]
        parties = []
        for position, (name, role) in enumerate(zip(names, ("APPELLANT", "APPELLEE"))):
            bar = int(hex_id(self.seed, "case", case)[position * 4:position * 4 + 4], 16) % 90000 + 10000
            parties.append({"partyName": {"displayName": name, "role": role}, "partyStatus": "ACTIVE",
                            "proSe": position == 0 and bar % 7 == 0,
                            "address": {"line1": f"{bar % 900 + 100} MAIN STREET", "line2": None, "line3": None,
                                        "line4": None, "city": "FRANKFORT", "state": "KY", "postalCode": "40601"},
                            "attorneys": [] if position == 0 and bar % 7 == 0 else [
                                {"attorneyName": {"displayName": f"{_SURNAMES[bar % len(_SURNAMES)]}, ESQ.",
                                                  "role": "COUNSEL"},
                                 "address": {"line1": "1 COURT PLAZA", "city": "LEXINGTON", "state": "KY",
                                             "postalCode": "40507"},
                                 "barNumber": str(bar)}]})
        return parties

    def lower_courts(self, case: int) -> list[dict]:
        h = int(hex_id(self.seed, "case", case)[20:28], 16)
        county = LOWER_COUNTIES[h % len(LOWER_COUNTIES)]
        year = int(self.case_keys[case][2:4]) - 1
        return [{"lowerCourtName": f"{county} CIRCUIT COURT",
                 "lowerCourtCaseNumber": f"{year % 100:02d}-CI-{h % 9999:05d}",
                 "lowerCourtCaseTitle": self.case_title(case)}]
