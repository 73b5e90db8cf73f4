"""Court answers written field for field from the shapes of real captures (ctrack-api.md, "What real
captured responses show"; the public captures are juriscraper's ky_example.json and
kyctapp_example.json, and its fork's notes on the case walk). Values are the captures' forms:
64-hex ids, `+0000` dates, `\r\n` in titles and texts, U+FFFD in the court's text."""
from __future__ import annotations

ENTRY_SC = "af9a2e8572d5fd3b112911ab324ce2cb2ece2c5941c686bfee7a97d6e7b1bce0"
CASE_SC = "cb4f7915904a56bbc8c79881536c971dc05312d46215a2aa5005e48d5a4b7836"
DOCUMENT_SC = "6ed9fa4a87d5db9e1b9ab1ac34d4407824476e7d976db6bc786036f7f98aedc8"
ENTRY_CA = "41bd4954307d98e050086c4e90154ba42986ef6e0718a629f123f38e8a3c82a4"
CASE_CA = "a4073b0e6cda107bf4967d4dd54dc34e93fd6c6f4c230ca928513cc31337315e"
DOCUMENT_CA = "7c6d4661ec7cd6274e37e8a85c574121abef15bb667f84b1b4f314616aea29d3"
ENTRY_BARE = "9bfc9227d63e046f40dae69117c331634b3b8f1a72af340ba9190721749013dc"

OPINION_ROW_KEYS = {"caseHeader.caseNumber", "docketEntrySubtype", "docketEntryDescription", "docketEntryType",
                    "docketEntryID", "caseHeader.caseID", "filedDate", "hasDocuments"}
FILE_KEYS = {"components", "tags", "customFields", "dmsDocumentID", "documentID", "documentName",
             "documentDescription", "documentText", "mimeType", "parentSourceID", "parentID", "parentCategory",
             "parentType", "parentSubtype", "parentName", "parentDate", "documentAvailable", "caseHeader"}
CASE_HEADER_KEYS = {"components", "tags", "customFields", "caseID", "caseNumber", "caseStatus", "caseStatusDate",
                    "closed", "shortTitle", "fullTitle", "caseType", "caseClassification", "department", "location",
                    "assignments", "submittedDate", "filedDate", "court", "courtLevel", "caseCategory",
                    "associatedCases", "caseLocation"}


def opinion_row(entry_id=ENTRY_SC, case_id=CASE_SC, number="2022-SC-0293", has_documents=True,
                description="OPINION OF THE COURT BY JUSTICE LAMBERT REVERSING, REINSTATING, AND REMANDING"):
    """A resultItem of /opinions/search: a docket entry; `id` is the entry's id; no documentID."""
    return {"id": entry_id, "indexID": "150003", "score": 3.0, "rowMap": {
        "caseHeader.caseNumber": number,
        "docketEntrySubtype": "REVERSING AND REINSTATING",
        "docketEntryDescription": description,
        "docketEntryType": "DISPOSITION - OPINION OF THE COURT BY A JUSTICE",
        "docketEntryID": entry_id, "caseHeader.caseID": case_id,
        "filedDate": "2024-04-18T09:03:02.000+0000", "hasDocuments": has_documents}}


def case_header(case_id=CASE_SC, number="2022-SC-0293",
                title="COMMONWEALTH OF KENTUCKY\r\nV.\r\nRICKY D. ULLMAN, JR.", court="Kentucky Supreme Court"):
    return {"components": None, "tags": None, "customFields": {}, "caseID": case_id, "caseNumber": number,
            "caseStatus": "PETITION FOR REHEARING", "caseStatusDate": "2024-05-08T18:40:45.000+0000",
            "closed": False, "shortTitle": title, "fullTitle": None, "caseType": "CRIMINAL",
            "caseClassification": "DISCRETIONARY REVIEW - CRIMINAL - REGULAR CRIMINAL (GRANTED)",
            "department": None, "location": None, "assignments": None, "submittedDate": None,
            "filedDate": "2022-07-18T04:00:00.000+0000", "court": court,
            "courtLevel": "Supreme Court" if "Supreme" in court else "Court of Appeals",
            "caseCategory": "Appellate", "associatedCases": None, "caseLocation": None}


def entry_file(document_id=DOCUMENT_SC, entry_id=ENTRY_SC, header=None, available=True):
    """An element of /publicaccessdocuments?filter=parentCategory=docketentries,parentID=..."""
    return {"components": None, "tags": None, "customFields": {}, "dmsDocumentID": "119508",
            "documentID": document_id,
            "documentName": "OPINION OF THE COURT BY JUSTICE REVERSING AND REINSTATING",
            "documentDescription": None,
            "documentText": ["RENDERED:  APRIL 18, 2024 \r\nTO BE PUBLISHED \r\n \r\nSupreme Court of Kentucky \r\n",
                             "the circuit court\ufffds revocation order \r\n"],
            "mimeType": "application/pdf", "parentSourceID": "2896518", "parentID": entry_id,
            "parentCategory": "docketentries", "parentType": "DISPOSITION - OPINION OF THE COURT BY A JUSTICE",
            "parentSubtype": "REVERSING AND REINSTATING", "parentName": None,
            "parentDate": "2024-04-18T09:03:02.000+0000", "documentAvailable": available,
            "caseHeader": header or case_header()}


def docket_entry(entry_id=ENTRY_SC, has_documents=True):
    """An element of /cases/{caseID}/docketentries (the fields a production crawler reads)."""
    return {"docketEntryID": entry_id, "filedDate": "2024-04-18T09:03:02.000+0000",
            "docketEntryType": "DISPOSITION - OPINION OF THE COURT BY A JUSTICE",
            "docketEntrySubtype": "REVERSING AND REINSTATING",
            "docketEntryDescription": "OPINION OF THE COURT BY JUSTICE LAMBERT REVERSING, REINSTATING, AND REMANDING",
            "submittedBy": None, "customFields": {}, "opinion": True, "hasDocuments": has_documents}


def party():
    return {"partyName": {"displayName": "RICKY D. ULLMAN, JR.", "role": "APPELLEE"}, "partyStatus": "ACTIVE",
            "proSe": False, "address": {"line1": "1 MAIN ST", "city": "LA GRANGE", "state": "KY", "postalCode": "40031"},
            "attorneys": [{"attorneyName": {"displayName": "JANE DOE", "role": "COUNSEL"},
                           "address": {"line1": "2 COURT PL", "city": "FRANKFORT", "state": "KY"},
                           "barNumber": "12345"}]}


def lower_court():
    return {"lowerCourtName": "OLDHAM CIRCUIT COURT", "lowerCourtCaseNumber": "13-CR-00124",
            "lowerCourtCaseTitle": "COMMONWEALTH\r\nV.\r\nULLMAN"}


OPINION_HEADERS = [{"label": "Type", "type": "String", "property": "docketEntryType",
                    "sortProperty": "docketEntryType.raw", "useHighlighting": False},
                   {"label": "Filed Date", "type": "Date", "property": "filedDate", "sortProperty": "filedDate",
                    "useHighlighting": False}]
OPINION_FACETS = [{"searchFacetName": "Court", "searchFacetField": "caseHeader.court", "searchFacetOrderBy": 1,
                   "searchFacetType": "String", "searchFacetItems": [
                       {"display": "Kentucky Court of Appeals", "value": "Kentucky Court of Appeals", "count": 69,
                        "selected": False},
                       {"display": "Kentucky Supreme Court", "value": "Kentucky Supreme Court", "count": 22,
                        "selected": True}]},
                  {"searchFacetName": "Case Final", "searchFacetField": "caseHeader.closed", "searchFacetOrderBy": 7,
                   "searchFacetType": "Boolean", "searchFacetItems": [
                       {"display": "false", "value": "false", "count": 22, "selected": False}]}]
