"""v1.2's pdf_backup/: every distinct PDF folded once into pdf_by_hash/ (workspace and store) and
credited, pointers from another machine resolved by file name, bad files reported, nothing lost."""
from __future__ import annotations

import logging

import pytest
from legacy_fixture import sha256
from support import CountingStore, discovered_rows, open_test_context

from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c60_backfill import backfill

NO_COURT = {"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"}


def make_context(root):
    return open_test_context(root, store=CountingStore(root / "store"), env=NO_COURT)


def point(ctx, document_id, local_pdf, sha=None):
    ctx.db.conn.execute("UPDATE documents SET local_pdf = ?, sha256 = ? WHERE document_id = ?",
                        (local_pdf, sha, document_id))


def test_a_pointer_from_another_machine_is_resolved_by_its_file_name_unless_the_name_is_ambiguous(
        planned_court, tmp_path):
    ok = planned_court.documents_with("ok")[:3]
    ctx = make_context(tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(ok))
    backups = ctx.path("pdf_backup")
    (backups / "2019").mkdir(parents=True)
    (backups / "2020").mkdir()
    unique, ambiguous, by_hash = ok
    (backups / "2019" / "unique.pdf").write_bytes(planned_court.pdf_bytes(unique.document_id))
    (backups / "2019" / "same.pdf").write_bytes(planned_court.pdf_bytes(ambiguous.document_id))
    (backups / "2020" / "same.pdf").write_bytes(planned_court.pdf_bytes(by_hash.document_id))   # other bytes
    (backups / "whatever.pdf").write_bytes(planned_court.pdf_bytes(by_hash.document_id))
    point(ctx, unique.document_id, "D:\\court\\old pdfs\\unique.pdf")
    point(ctx, ambiguous.document_id, "/srv/elsewhere/same.pdf")
    point(ctx, by_hash.document_id, "/gone.pdf", sha256(planned_court.pdf_bytes(by_hash.document_id)))
    result = backfill(ctx)
    row = ctx.db.get_document(unique.document_id)
    data = planned_court.pdf_bytes(unique.document_id)
    assert (row["status"], row["sha256"], row["local_pdf"]) == ("downloaded", sha256(data),
                                                                 f"pdf_by_hash/{sha256(data)}.pdf")
    assert ctx.db.get_document(ambiguous.document_id)["status"] == "discovered" and result.conflicts == 1
    assert ctx.db.get_document(by_hash.document_id)["status"] == "downloaded"
    ctx.close()


def test_a_pointer_at_a_file_that_is_not_a_pdf_is_reported_and_the_file_kept(planned_court, tmp_path, caplog):
    document = planned_court.documents_with("ok")[0]
    ctx = make_context(tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows([document]))
    (ctx.path("pdf_backup") / "x.pdf").write_bytes(b"<html>Service Unavailable</html>")
    point(ctx, document.document_id, "/content/ky_court_workspace/pdf_backup/x.pdf")
    with caplog.at_level(logging.WARNING, logger="kycourt.backfill"):
        result = backfill(ctx)
    assert result.not_pdf == ["x.pdf"]
    assert result.pointing_at_non_pdf == [f"{document.document_id} -> pdf_backup/x.pdf"]
    assert ctx.db.get_document(document.document_id)["status"] == "discovered"
    assert (ctx.path("pdf_backup") / "x.pdf").read_bytes().startswith(b"<html>")
    assert any("not a PDF" in record.message and document.document_id in record.message for record in caplog.records)
    ctx.close()


@pytest.mark.slow   # 10,000 files written, hashed and folded: ~10 s of disk
def test_ten_thousand_backups_with_sixty_percent_duplicates_fold_into_their_distinct_pdfs_once(tmp_path, caplog):
    ctx = make_context(tmp_path)
    distinct = [f"%PDF-1.4 backup {number}\n%%EOF\n".encode() for number in range(4000)]
    backups = ctx.path("pdf_backup")
    for number in range(10_000):
        folder = backups / f"{number % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"{number}.pdf").write_bytes(distinct[number % 4000])
    rows = [{"document_id": f"{number:064x}", "case_number": "2019-CA-0001"} for number in range(4000)]
    DiscoveryState(ctx.db).upsert_discovered(rows)
    for number in range(4000):
        point(ctx, f"{number:064x}", f"/content/ky_court_workspace/pdf_backup/{number % 10}/{number}.pdf")
    with caplog.at_level(logging.INFO, logger="kycourt.backfill"):
        result = backfill(ctx)
    assert (result.files, result.pdfs, result.distinct, result.duplicates) == (10_000, 10_000, 4000, 6000)
    assert result.written == 4000 and result.credited == 4000 and result.unmatched == 0
    assert ctx.store.uploads and max(ctx.store.uploads.values()) == 1 and len(ctx.store.uploads) == 4000
    assert sum(1 for _ in ctx.path("pdf_by_hash").iterdir()) == 4000
    assert sum(1 for path in backups.rglob("*.pdf")) == 10_000          # the backups stay as they were
    lines = [record.message for record in caplog.records if record.name == "kycourt.backfill"]
    assert len(lines) == 1 and "10000 files, 10000 PDFs of 4000 distinct contents (6000 duplicates" in lines[0]
    assert WorkQueues(ctx.db).status_counts()["downloaded"] == 4000
    ctx.close()
