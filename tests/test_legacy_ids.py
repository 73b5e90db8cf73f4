"""Legacy ids are checked, not trusted: an adopted id discovery shows to be a docket entry's or a
case's is linked to that entry's documents and never downloaded; an id discovery confirms is
downloaded like any document; until discovery has spoken, an adopted row without a PDF waits."""
from __future__ import annotations

import json

import pytest
from legacy_fixture import discovered_row, downloaded_row, sha256, write_legacy_database
from support import FAST_ENV, RecordingClock, context_config

from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c38_legacy import adopt
from notebook_builder.cells.c60_backfill import backfill
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import SimCourt

ENV = {**FAST_ENV, "KY_FIRST_YEAR": "2020", "KY_LAST_YEAR": "2026", "KY_CONVERGENCE_DELTA": "1",
       "KY_MAX_SWEEPS": "3"}


@pytest.fixture
def court():
    """A small court over the years ENV sweeps (faults on: a wrong id must not hide among them)."""
    with SimCourt(docs=120, seed=5, first_year=2020, last_year=2026, stall_seconds=0.05,
                  enforce_retry_after=False) as served:
        yield served


def legacy_rows(court):
    """(rows, {role: document}) of a v1.2 database that keyed some rows by the wrong ids."""
    ok = court.documents_with("ok")
    entry_keyed, case_keyed, entry_with_pdf, plain = ok[0], ok[1], ok[2], ok[3:8]
    pdf = court.pdf_bytes(entry_with_pdf.document_id)
    rows = [discovered_row(entry_keyed, document_id=entry_keyed.docket_entry_id, docket_entry_id=None),
            discovered_row(case_keyed, document_id=case_keyed.case_id, docket_entry_id=None, status="failed",
                           http_status=404, attempts=1),
            # v1.2 fetched this entry's file but filed it under the entry's id.
            downloaded_row(entry_with_pdf, pdf, "/content/ky_court_workspace/pdf_backup/e.pdf",
                           document_id=entry_with_pdf.docket_entry_id)]
    rows += [discovered_row(document) for document in plain]
    return rows, {"entry": entry_keyed, "case": case_keyed, "entry_with_pdf": entry_with_pdf, "plain": plain}


@pytest.mark.parametrize("strategy", ["documents", "cases"])
def test_adopted_ids_that_are_entries_or_cases_are_linked_and_never_downloaded(court, tmp_path, strategy):
    rows, roles = legacy_rows(court)
    cfg = context_config(tmp_path, court, env={**ENV, "KY_DISCOVERY": strategy, "KY_CASE_DETAILS": "0",
                                               "KY_PHASES": "download"})
    write_legacy_database(tmp_path / "workspace" / "ky_court.sqlite", rows)
    (tmp_path / "workspace" / "pdf_backup").mkdir(parents=True)
    (tmp_path / "workspace" / "pdf_backup" / "e.pdf").write_bytes(court.pdf_bytes(roles["entry_with_pdf"].document_id))
    # Before discovery: nothing adopted is asked of the court (a wrong id's 404 would read as a withdrawal).
    report = run_pipeline(cfg, clock=RecordingClock(), handle_signals=False)
    assert report.stages["download"].requests == 0, report.summary()
    assert "rows wait for discovery to confirm their ids" in report.summary()
    report = run_pipeline(cfg.replace(PHASES=("discover", "download")), clock=RecordingClock(),
                          handle_signals=False)
    assert report.exit_status == 0, report.summary()
    summary = report.summary()
    assert "adopted ids checked: 5 confirmed as documents" in summary
    assert "were docket entries'" in summary
    from notebook_builder.cells.c10_database import Database
    db = Database.open(cfg.WORKSPACE + "/ky_court.sqlite")
    try:
        kinds = dict(db.conn.execute("SELECT document_id, id_kind FROM legacy_documents"))
        entry, case, with_pdf = roles["entry"], roles["case"], roles["entry_with_pdf"]
        assert kinds[entry.docket_entry_id] == "docket_entry" and kinds[case.case_id] == "case"
        assert kinds[with_pdf.docket_entry_id] == "docket_entry"
        assert all(kinds[document.document_id] == "document" for document in roles["plain"])
        for wrong in (entry.docket_entry_id, case.case_id, with_pdf.docket_entry_id):
            assert DownloadRecords(db).download_events(wrong) == []
            assert wrong not in {row["document_id"] for row in WorkQueues(db).download_queue(cfg, 1000)}
        linked = json.loads(db.conn.execute("SELECT linked_documents FROM legacy_documents WHERE document_id = ?",
                                            (entry.docket_entry_id,)).fetchone()[0])
        assert entry.document_id in linked
        assert set(json.loads(db.conn.execute("SELECT linked_documents FROM legacy_documents WHERE document_id = ?",
                                              (case.case_id,)).fetchone()[0])) \
            == {d.document_id for d in court.documents if d.case_id == case.case_id}
        real = db.get_document(with_pdf.document_id)
        assert real["status"] in ("downloaded", "extracted")
        assert real["sha256"] == sha256(court.pdf_bytes(with_pdf.document_id))
        assert db.conn.execute("SELECT matched_sha256 FROM legacy_documents WHERE document_id = ?",
                               (with_pdf.docket_entry_id,)).fetchone()[0] == 1
        assert db.get_document(with_pdf.docket_entry_id)["status"] == "downloaded"    # its PDF is kept
        for document in roles["plain"]:
            assert db.get_document(document.document_id)["status"] == "downloaded"
    finally:
        db.close()


def test_after_discovery_converged_an_id_the_court_lists_nowhere_is_asked_for_once(court, tmp_path):
    """A withdrawn document without a PDF: the court's 404 is then the truth, recorded as usual."""
    cfg = context_config(tmp_path, court, env={**ENV, "KY_DISCOVERY": "documents",
                                               "KY_PHASES": "discover,download"})
    gone = "e" * 64
    write_legacy_database(tmp_path / "workspace" / "ky_court.sqlite",
                          [discovered_row(court.documents[0], document_id=gone, docket_entry_id=None)])
    report = run_pipeline(cfg, clock=RecordingClock(), handle_signals=False)
    assert "1 listed nowhere by the court" in report.summary()
    from notebook_builder.cells.c10_database import Database
    db = Database.open(cfg.WORKSPACE + "/ky_court.sqlite")
    try:
        row = db.get_document(gone)
        assert (row["status"], row["http_status"], row["attempts"]) == ("failed", 404, 1)
    finally:
        db.close()


def test_adoption_holds_a_row_whose_id_is_its_own_docket_entrys_at_once(planned_court, tmp_path):
    from support import open_test_context
    document = planned_court.documents[0]
    ctx = open_test_context(tmp_path, database=False, env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})
    write_legacy_database(ctx.db_path, [discovered_row(document, document_id=document.docket_entry_id)])
    result = adopt(ctx, lambda ctx: backfill(ctx, force=True))
    assert result.record["misfiled_ids"] == 1 and WorkQueues(ctx.db).download_queue_size(ctx.cfg) == 0
    ctx.close()
