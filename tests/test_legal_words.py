"""Derive in each court system's words: a Nevada opinion and order, an Alabama opinion (texts made here in
their courts' forms), each state's citation forms, and the derive stage over a Nevada archive."""
from __future__ import annotations

import pytest
from support import add_extracted_document, open_test_context

from notebook_builder.cells import c84_legal_text
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c28_court_words import system_words
from notebook_builder.cells.c83_legal_words import KENTUCKY_WORDS, LEGAL_WORDS, legal_words
from notebook_builder.cells.c84_legal_text import derive_fields, extract_citations
from notebook_builder.cells.c86_derive import derive

NEVADA_OPINION = """142 Nev., Advance Opinion 45
IN THE SUPREME COURT OF THE STATE OF NEVADA

JANE ZHANG,
Appellant,
vs.
JOHN ZHANG,
Respondent.

No. 90509

FILED
JUN 18 2026
ELIZABETH A. BROWN
CLERK OF SUPREME COURT

Appeal from a district court order denying a motion to modify child
custody. Eighth Judicial District Court, Clark County; Rhonda K.
Forsberg, Judge.
Vacated and remanded.

Smith & Jones and John Smith, Las Vegas,
for Appellant.

BEFORE THE SUPREME COURT, STIGLICH, C.J., and PICKERING and
PARRAGUIRRE, JJ.

OPINION

By the Court, PICKERING, J.:

NRS 125C.0045(2) allows a court to modify custody when the child's best
interest requires it. See Nev. Rev. Stat. § 125C.0035(4); NRAP 3A(b)(1).
In Ellis v. Carucci, 123 Nev. 145, 161 P.3d 239 (2007), we held that a
modification needs a substantial change in circumstances; see also Nev.
Const. art. 6, § 4. The same question was before us in Docket No. 85175
and in No. 90082-COA, and Adv. Op. No. 45 is this opinion.

We therefore vacate the district court's order and remand.
"""

NEVADA_ORDER = """IN THE COURT OF APPEALS OF THE STATE OF NEVADA

ROBERT LEE MARSH,
Appellant,
vs.
THE STATE OF NEVADA,
Respondent.

No. 90082-COA

FILED
MAR 3 2026

ORDER OF AFFIRMANCE

Robert Lee Marsh appeals from a judgment of conviction entered pursuant to a guilty plea
of burglary under NRS 205.060. Second Judicial District Court, Washoe County; Kathleen
A. Sigurdson, Judge.

Marsh argues the district court abused its discretion at sentencing. We disagree.
Accordingly, we
ORDER the judgment of the district court AFFIRMED.

Gibbons, C.J.
Bulla, J.
Westbrook, J.
"""

ALABAMA_OPINION = """Notice: This opinion is subject to formal revision before publication in the advance
sheets of Southern Reporter. Readers are requested to notify the Reporter of Decisions.

REL: January 23, 2026

SUPREME COURT OF ALABAMA

OCTOBER TERM, 2025-2026
_________________________

SC-2024-0492
_________________________

Jane Doe

v.

Acme Corporation

Appeal from Jefferson Circuit Court
(CV-23-903546)

MENDHEIM, Justice.

Jane Doe appeals from a summary judgment entered for Acme Corporation under
Rule 56(c), Ala. R. Civ. P. The claim is barred by § 6-5-410, Ala. Code 1975,
and Ala. Code 1975, § 12-22-130, governs the appeal. See Doe v. Roe, CL-2025-0191
(Ala. Civ. App. 2025); Ala. Const. 2022, § 6.01.

AFFIRMED.

Parker, C.J., and Shaw, Wise, Bryan, Sellers, Stewart, Cook, and McCool, JJ., concur.
"""


def read(system: str, text: str, **docket):
    words, numbers = legal_words(system), system_words(system).text_numbers
    fields = derive_fields(text, words=words, numbers=numbers, **docket)
    citations = extract_citations(text, own_case_numbers=fields.case_numbers or (), body_start=fields.caption_end,
                                  words=words, numbers=numbers, use_eyecite=False)
    return fields, {(citation.kind, citation.normalized) for citation in citations.citations}, citations


def test_a_nevada_opinion_is_read_in_nevadas_words():
    fields, cited, citations = read(
        "nevada", NEVADA_OPINION, entry_type="Opinion/Dispositional", case_number="90509", document_name="142pn045",
        description='Filed authored opinion. "Vacated and remanded." 142 Nev. Adv. Opn. No. 45.')
    assert (fields.kind, fields.publication_status, fields.rendered_date) == ("opinion", "published", "2026-06-18")
    assert (fields.judge_title, fields.judge, fields.disposition) == ("J.", "PICKERING", "VACATED AND REMANDED")
    assert (fields.lower_court, fields.lower_court_judge) == ("EIGHTH JUDICIAL DISTRICT COURT, CLARK COUNTY",
                                                              "RHONDA K. FORSBERG")
    assert (fields.case_numbers, fields.related_case_numbers, fields.warnings) == (["90509"], [], [])
    assert cited == {("statute", "NRS 125C.0045(2)"), ("statute", "NRS 125C.0035(4)"), ("rule", "NRAP 3A(b)(1)"),
                     ("constitution", "Nev. Const. art. 6, § 4"), ("case_number", "85175"),
                     ("case_number", "90082-COA")}       # its own number, and "No. 45", are no case cited
    assert citations.extractor == "nevada-rules-2"
    assert fields.caption_end == NEVADA_OPINION.index("\n\nBy the Court")     # the body begins after OPINION


def test_a_nevada_unpublished_order_has_its_disposition_from_its_last_words_and_no_author():
    fields, cited, _ = read("nevada", NEVADA_ORDER, entry_type="Order/Dispositional", case_number="90082-COA",
                            description="Filed Order of Affirmance.")
    assert (fields.kind, fields.publication_status, fields.rendered_date) == ("order", "unpublished", "2026-03-03")
    assert (fields.judge, fields.disposition) == (None, "AFFIRMED")
    assert (fields.lower_court, fields.lower_court_judge) == ("SECOND JUDICIAL DISTRICT COURT, WASHOE COUNTY",
                                                              "KATHLEEN A. SIGURDSON")
    assert fields.case_numbers == ["90082-COA"] and cited == {("statute", "NRS 205.060")}


def test_an_alabama_opinion_is_read_in_alabamas_words():
    fields, cited, _ = read("alabama", ALABAMA_OPINION, case_number="SC-2024-0492", document_name="Opinion")
    assert (fields.kind, fields.publication_status, fields.rendered_date) == ("opinion", "published", "2026-01-23")
    assert (fields.judge_title, fields.judge, fields.disposition) == ("JUSTICE", "MENDHEIM", "AFFIRMED")
    assert (fields.lower_court, fields.lower_court_numbers) == ("JEFFERSON CIRCUIT COURT", ["CV-23-903546"])
    assert fields.trial_court == "JEFFERSON CIRCUIT COURT" and fields.case_numbers == ["SC-2024-0492"]
    assert cited == {("rule", "Ala. R. Civ. P. 56(c)"), ("statute", "Ala. Code § 6-5-410"),
                     ("statute", "Ala. Code § 12-22-130"), ("case_number", "CL-2025-0191"),
                     ("constitution", "Ala. Const. § 6.01")}


def test_a_document_read_in_another_states_words_finds_nothing_of_kentuckys():
    fields = derive_fields(NEVADA_OPINION)                      # Kentucky's words
    assert fields.judge is None and fields.rendered_date is None and fields.case_numbers is None
    kentucky = extract_citations(NEVADA_OPINION, use_eyecite=False)
    assert {citation.kind for citation in kentucky.citations} <= {"case"} and kentucky.extractor == "ky-rules-2"
    assert c84_legal_text._COURT_HEADING is KENTUCKY_WORDS.headings


@pytest.mark.parametrize("system, text, normalized", [
    ("oregon", "under ORS 137.700(2)(a) and ORCP 21 A, see Article I, section 9, of the Oregon Constitution",
     {"ORS 137.700(2)(a)", "ORCP 21 A", "Or. Const. art. I, § 9"}),
    ("oregon", "State v. Doe, 372 Or 123 (2024); State v. Roe, 331 Or App 456", {"372 Or 123", "331 Or App 456"}),
    ("north-dakota", "N.D.C.C. § 12.1-32-01 and N.D.R.App.P. 4; see 2023 ND 17 and N.D. Const. art. I, § 8",
     {"N.D.C.C. § 12.1-32-01", "N.D.R.App.P. 4", "2023 ND 17", "N.D. Const. art. I, § 8"}),
    ("wyoming", "Wyo. Stat. Ann. § 6-2-101; W.R.A.P. 2.01; Smith v. State, 2023 WY 45; Wyo. Const. art. 1, § 4",
     {"Wyo. Stat. Ann. § 6-2-101", "W.R.A.P. 2.01", "2023 WY 45", "Wyo. Const. art. 1, § 4"}),
    ("florida", "§ 775.082(3), Fla. Stat. (2023), and Fla. Stat. § 924.051; Fla. R. App. P. 9.030(a); "
                "art. V, § 3(b)(3), Fla. Const.",
     {"Fla. Stat. § 775.082(3)", "Fla. Stat. § 924.051", "Fla. R. App. P. 9.030(a)", "Fla. Const. art. V, § 3(b)(3)"}),
    ("delaware-county-pa", "42 Pa.C.S. § 5524(2); Pa.R.C.P. No. 1035.2; Pa. Const. art. I, § 8",
     {"42 Pa.C.S. § 5524(2)", "Pa.R.C.P. 1035.2", "Pa. Const. art. I, § 8"}),
])
def test_each_states_citation_forms_are_normalized(system, text, normalized):
    citations = extract_citations(text, words=legal_words(system), numbers=system_words(system).text_numbers,
                                  use_eyecite=False)
    assert {citation.normalized for citation in citations.citations} == normalized


def test_every_court_system_has_its_words_and_its_headings_are_its_courts():
    assert set(LEGAL_WORDS) == {"kentucky", "delaware-county-pa", "nevada", "alabama", "oregon", "north-dakota",
                                "wyoming", "florida"}
    assert legal_words("alabama").headings.match("ALABAMA COURT OF CRIMINAL APPEALS")
    assert legal_words("nevada").headings.match("IN THE COURT OF APPEALS OF THE STATE OF NEVADA")
    assert legal_words("florida").headings.match("DISTRICT COURT OF APPEAL OF FLORIDA, FOURTH DISTRICT")
    assert not legal_words("nevada").headings.match("SUPREME COURT OF KENTUCKY")


def test_the_derive_stage_reads_a_nevada_archive_in_its_words_and_resolves_its_citations(tmp_path):
    ctx = open_test_context(tmp_path, COURT_SYSTEM="nevada")
    try:
        add_extracted_document(ctx, "OPINION", b"%PDF-1.4 opinion", NEVADA_OPINION, case_number="90509")
        add_extracted_document(ctx, "CITED", b"%PDF-1.4 cited", NEVADA_ORDER.replace("90082-COA", "85175")
                               .replace("COURT OF APPEALS", "SUPREME COURT"), case_number="85175")
        DiscoveryState(ctx.db).upsert_discovered([
            {"document_id": "OPINION", "case_number": "90509",
             "description": 'Filed authored opinion. "Vacated and remanded."'},
            {"document_id": "CITED", "case_number": "85175", "description": "Filed Order of Affirmance."}])
        result = derive(ctx)
        assert (result.derived, result.with_text) == (2, 2)
        row = DerivedRecords(ctx.db).derived("OPINION")
        assert (row["method"], row["judge"], row["disposition"]) == ("nevada-rules", "PICKERING", "VACATED AND REMANDED")
        cited = DerivedRecords(ctx.db).cited_by("CITED")
        assert [(other["document_id"], other["cited_case_number"]) for other in cited] == [("OPINION", "85175")]
        assert derive(ctx).queued == 0        # derived in these words: nothing stale
    finally:
        ctx.close()
