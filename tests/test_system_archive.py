"""A Nevada archive read by the commands: its case numbers found first, its court codes as facets and
--court, its words in the pages and feeds, and every command saying which documents are not public and why."""
from __future__ import annotations

import json

import pytest
from support import add_extracted_document, open_test_context

from notebook_builder import cli
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c18_query_syntax import parse_query
from notebook_builder.cells.c18_search_index import SearchFilters
from notebook_builder.cells.c28_court_words import system_words
from notebook_builder.cells.c35_context import write_status
from notebook_builder.cells.c87_index import index, open_search_index, search_archive
from notebook_builder.cells.c89_feed import feed_answer

TEXTS = {
    "SUPREME": ("90509", "Nevada Supreme Court", "Zhang v. Zhang",
                "IN THE SUPREME COURT OF THE STATE OF NEVADA\nNo. 90509\nZHANG VS. ZHANG\n\nOPINION\n\n"
                "Custody is modified under NRS 125C.0045 only for the child's best interest. Docket No. 85175."),
    "NEIGHBOUR": ("85175", "Nevada Supreme Court", "Roe v. Roe",
                  "IN THE SUPREME COURT OF THE STATE OF NEVADA\nNo. 85175\nROE VS. ROE\n\nORDER OF AFFIRMANCE\n\n"
                  "We considered custody and No. 90509 argued beside it."),
    "APPEALS": ("90082-COA", "Nevada Court of Appeals", "Marsh v. State",
                "IN THE COURT OF APPEALS OF THE STATE OF NEVADA\nNo. 90082-COA\nMARSH VS. STATE\n\n"
                "ORDER OF AFFIRMANCE\n\nBurglary under NRS 205.060; custody is not at issue."),
}
NOT_PUBLIC = {"SEALED": ("90509", "unavailable", "Filed Motion for Extension of Time"),
              "PAID": ("90082-COA", "purchasable", "Filed Appellant's Opening Brief")}


@pytest.fixture(scope="module")
def nevada(tmp_path_factory):
    """A Nevada workspace: three documents extracted and indexed, two the court does not serve to the public."""
    root = tmp_path_factory.mktemp("nevada")
    ctx = open_test_context(root, COURT_SYSTEM="nevada")
    try:
        for document_id, (number, court, title, text) in TEXTS.items():
            add_extracted_document(ctx, document_id, f"%PDF-1.4 {document_id}".encode(), text, case_number=number)
            ctx.db.conn.execute("UPDATE documents SET court = ?, case_title = ?, filed_date = ? WHERE document_id = ?",
                                (court, title, "2026-06-18T15:30:25.000+00:00", document_id))
        DiscoveryState(ctx.db).upsert_discovered([
            {"document_id": document_id, "case_number": number, "description": description}
            for document_id, (number, _, description) in NOT_PUBLIC.items()])
        for document_id, (number, state, _) in NOT_PUBLIC.items():
            ctx.db.conn.execute("UPDATE documents SET document_available = 0, access_state = ?, court = ?, "
                                "filed_date = ? WHERE document_id = ?",
                                (state, TEXTS["APPEALS" if number.endswith("COA") else "SUPREME"][1],
                                 "2025-01-07T10:00:00.000+00:00", document_id))
        index(ctx)
        write_status(ctx)
    finally:
        ctx.close()
    return root


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_a_nevada_case_number_finds_its_case_first(nevada):
    workspace = str(nevada / "workspace")
    for typed, first in (("90509", "SUPREME"), ("90082-COA", "APPEALS"), ("90082 coa", "APPEALS"),
                         ("85175", "NEIGHBOUR")):
        hits = search_archive(workspace, typed).hits
        assert hits[0]["document_id"] == first, typed
    assert [hit["document_id"] for hit in search_archive(workspace, "90509").hits] == ["SUPREME", "NEIGHBOUR"]


def test_the_court_facet_and_court_are_nevadas_codes(nevada, capsys):
    workspace = str(nevada / "workspace")
    search = open_search_index(nevada / "workspace")
    try:
        facets = search.facets(parse_query(""), SearchFilters(), ("court_code",))["court_code"]
    finally:
        search.close()
    assert dict(facets) == {"SC": 2, "COA": 1}
    for court, expected in (("COA", ["APPEALS"]), ("coa", ["APPEALS"]), ("appeals", ["APPEALS"]),
                            ("supreme", ["NEIGHBOUR", "SUPREME"])):
        assert sorted(hit["document_id"] for hit in search_archive(workspace, "custody", court=court).hits) \
            == expected, court
    code, out = run(capsys, "search", "custody", "--workspace", workspace, "--court", "COA", "--json")
    assert code == 0 and [hit["court_code"] for hit in json.loads(out)["hits"]] == ["COA"]
    assert cli.main(["search", "custody", "--workspace", workspace, "--court", "CA"]) == 2      # Kentucky's code
    assert "court 'CA' matches no document in the archive (it holds COA 1, SC 2)" in capsys.readouterr().err


def test_search_says_which_documents_are_not_public_and_why(nevada, capsys):
    workspace = str(nevada / "workspace")
    code, out = run(capsys, "search", "90509", "--workspace", workspace, "--json")
    found = json.loads(out)["not_public"]
    assert (found["not_public"], found["not_public_reasons"]) == (2, {"purchase": 1, "registration": 1})
    assert [(row["document_id"], row["reason"]) for row in found["documents"]] == [("SEALED", "registration")]
    code, out = run(capsys, "search", "90509", "--workspace", workspace)
    assert "not public at the court: 2 not public at the court (purchase 1, registration 1); they have no text" in out
    assert "90509  SEALED  Filed Motion for Extension of Time  (not public: registration)" in out


def test_show_status_report_verify_and_export_say_which_documents_are_not_public(nevada, capsys, tmp_path):
    workspace = str(nevada / "workspace")
    code, out = run(capsys, "show", "PAID", "--workspace", workspace)
    assert code == 0 and "not public at the court: purchase (purchasable): kept as a record, never requested" in out
    status = json.loads(run(capsys, "status", "--workspace", workspace)[1])
    assert status["court_system"] == "nevada" and status["final_states"]["not_public"] == 2
    assert [(row["document_id"], row["reason"]) for row in status["not_public_documents"]] == [
        ("PAID", "purchase"), ("SEALED", "registration")]
    code, out = run(capsys, "report", "--workspace", workspace, "--output", str(tmp_path / "chart.png"))
    assert "not public at the court: 2 not public at the court (purchase 1, registration 1): kept as records" in out
    assert "  not public (registration): 90509  SEALED  Filed Motion for Extension of Time" in out
    assert any(line.startswith("COA ") for line in out.splitlines()) and "\nSC " in out
    code, out = run(capsys, "verify", "--workspace", workspace)
    assert "2 not public at the court (purchase 1, registration 1) (kept, never asked for)" in out
    code, _ = run(capsys, "export", "--workspace", workspace, "--format", "jsonl", "--out", str(tmp_path / "out"))
    records = {record["document_id"]: record for record in map(json.loads, (tmp_path / "out" / "documents.jsonl")
                                                                .read_text().splitlines())}
    assert (records["PAID"]["access_state"], records["PAID"]["not_public_reason"]) == ("purchasable", "purchase")
    assert (records["SUPREME"]["access_state"], records["SUPREME"]["not_public_reason"]) == (None, None)
    assert (records["APPEALS"]["court_code"], records["APPEALS"]["filed_date"]) == ("COA", "2026-06-18")
    names = list(records["PAID"])
    assert names[-4:] == ["text_note", "last_error", "text_source", "text"]
    assert names.index("document_available") + 1 == names.index("access_state")


def test_nevadas_words_head_its_feed_and_pages(nevada):
    from notebook_builder.cells.c96_web import ServedArchive, WebSearch, document_page, search_page
    workspace = nevada / "workspace"
    status, _, body = feed_answer(workspace)
    assert status == 200 and b"<title>Nevada appellate courts: what changed</title>" in body
    site = ServedArchive(workspace=workspace, folder=workspace, system="nevada")
    page = search_page(site, WebSearch.from_query_string("q=custody")).body.decode()
    assert '<a href="/">Nevada appellate courts</a>' in page and "Kentucky" not in page
    assert ">Nevada Court of Appeals</a> (1)" in page
    page = document_page(site, "SEALED").body.decode()
    assert "not public at the court: registration (unavailable)" in page
    assert "no PDF: not public at the court (registration)" in page
    assert system_words("nevada").title == "Nevada appellate courts"


@pytest.mark.parametrize("system, numbers", [
    ("alabama", ("SC-2024-0492", "CL-2025-0191")), ("oregon", ("S072851", "A190411")),
    ("florida", ("1D2024-1234", "SC2026-0899"))])
def test_a_tr_portal_courts_case_number_finds_its_case_first(tmp_path, system, numbers):
    ctx = open_test_context(tmp_path, COURT_SYSTEM=system)
    try:
        first, other = numbers
        add_extracted_document(ctx, "OWN", b"%PDF-1.4 own", f"No. {first}\nAppeal decided on the record.",
                               case_number=first)
        add_extracted_document(ctx, "CITING", b"%PDF-1.4 citing",
                               f"No. {other}\nThe record of {first} and {first} again, decided on the record.",
                               case_number=other)
        index(ctx)
    finally:
        ctx.close()
    hits = search_archive(str(tmp_path / "workspace"), first).hits
    assert [hit["document_id"] for hit in hits] == ["OWN", "CITING"]      # its own case first, then the one citing it
    assert {hit["court_code"] for hit in hits} == {system_words(system).code_of(number, None) for number in numbers}



def test_the_coverage_chart_is_titled_with_the_systems_archive_and_courts(nevada):
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c97_report import coverage_figure, coverage_rows
    cfg = load_config({"KY_WORKSPACE": str(nevada / "workspace"), "KY_COURT_SYSTEM": "nevada"})
    db = Database.open_readonly(nevada / "workspace" / "ky_court.sqlite")
    try:
        rows = coverage_rows(db, cfg)
    finally:
        db.close()
    # No year in 90509 or 90082-COA: the filed day's.
    assert {(row["year"], row["court"], row["discovered"]) for row in rows} == {
        ("2025", "SC", 1), ("2025", "COA", 1), ("2026", "SC", 2), ("2026", "COA", 1)}
    figure = coverage_figure(rows, system_words("nevada"))
    assert figure._suptitle.get_text().startswith("Nevada appellate court documents: 5 discovered")
    assert [axes.get_title(loc="left") for axes in figure.axes] == [
        "Nevada Supreme Court (SC): 3 documents", "Nevada Court of Appeals (COA): 2 documents"]


def test_serve_counts_the_documents_not_public_once_and_from_its_own_copy(nevada, tmp_path, monkeypatch):
    import shutil

    from notebook_builder.cells.c12_queues import WorkQueues
    from notebook_builder.cells.c96_web import ServedArchive, WebSearch
    live, served = tmp_path / "live", tmp_path / "served"
    shutil.copytree(nevada / "workspace", live)
    shutil.copytree(nevada / "workspace", served)
    db = Database.open(live / "ky_court.sqlite")
    try:
        DiscoveryState(db).upsert_discovered([{"document_id": "LATER", "case_number": "90509",
                                               "description": "Filed after serve began"}])
        db.conn.execute("UPDATE documents SET document_available = 0, access_state = 'unavailable' "
                        "WHERE document_id = 'LATER'")
    finally:
        db.close()
    counted = []
    original = WorkQueues.not_public_counts
    monkeypatch.setattr(WorkQueues, "not_public_counts", lambda self: counted.append(1) or original(self))
    site = ServedArchive(workspace=live, folder=served, system="nevada")
    results = [WebSearch.from_query_string(query).run(site) for query in ("q=custody", "q=90509", "q=burglary")]
    assert [result.not_public["not_public"] for result in results] == [2, 2, 2]      # the copy serve reads
    assert [row["document_id"] for row in results[1].not_public["documents"]] == ["SEALED"]
    assert len(counted) == 1                                                       # once, not a search each
