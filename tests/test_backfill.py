"""Backfill: legacy backups become content-addressed PDFs credited to their documents, once."""
from __future__ import annotations

import hashlib

import pytest
from support import CountingStore, discovered_rows, open_test_context

from notebook_builder.cells.c00_config import RunClock
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c60_backfill import BACKFILL_GUARD_KEY, backfill


def make_context(root, clock=None):
    # No court: planned_court (never served) only plans documents and makes their PDFs.
    return open_test_context(root, clock=clock, store=CountingStore(root / "store"),
                             env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def documents_table(ctx) -> list[tuple]:
    return [tuple(row) for row in ctx.db.conn.execute("SELECT * FROM documents ORDER BY document_id")]


@pytest.fixture
def legacy(planned_court, tmp_path):
    """A workspace with backups named by document id, backups pointed at by local_pdf, copies,
    a non-PDF, an orphan, and an extracted row."""
    ok = planned_court.documents_with("ok")[:8]
    ctx = make_context(tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(ok))
    backup = ctx.path("pdf_backup")
    (backup / "old").mkdir(parents=True)
    by_name, by_path, extracted, copied = ok[0:3], ok[3:5], ok[5], ok[6]
    for document in by_name + [extracted]:
        (backup / f"{document.document_id}.pdf").write_bytes(planned_court.pdf_bytes(document.document_id))
    for number, document in enumerate(by_path):
        name = f"old/opinion-{number}.pdf"
        (backup / name).write_bytes(planned_court.pdf_bytes(document.document_id))
        ctx.db.conn.execute("UPDATE documents SET local_pdf = ? WHERE document_id = ?",
                            (f"/content/drive/MyDrive/ky/pdf_backup/{name}", document.document_id))
    # The same PDF three times: under the id, and twice more under other names.
    data = planned_court.pdf_bytes(copied.document_id)
    (backup / f"{copied.document_id}.pdf").write_bytes(data)
    (backup / "copy-a.pdf").write_bytes(data)
    (backup / "old" / "copy-b.pdf").write_bytes(data)
    (backup / "error-page.pdf").write_bytes(b"<html><body>Service Unavailable</body></html>")
    (backup / "orphan.pdf").write_bytes(planned_court.pdf_bytes(ok[7].document_id)[:-1] + b"\n")
    sha = sha256(planned_court.pdf_bytes(extracted.document_id))
    ctx.db.conn.execute("UPDATE documents SET status = 'extracted', sha256 = ?, size_bytes = ?, "
                        "pages = 1, extracted_chars = 99 WHERE document_id = ?",
                        (sha, len(planned_court.pdf_bytes(extracted.document_id)), extracted.document_id))
    yield ctx, {"by_name": by_name, "by_path": by_path, "extracted": extracted, "copied": copied,
                "untouched": ok[7]}
    ctx.close()


def test_backups_are_credited_to_their_documents_by_name_and_by_local_pdf(planned_court, legacy):
    ctx, groups = legacy
    result = backfill(ctx)
    for document in groups["by_name"] + groups["by_path"] + [groups["copied"]]:
        row = ctx.db.get_document(document.document_id)
        data = planned_court.pdf_bytes(document.document_id)
        assert (row["status"], row["sha256"], row["size_bytes"]) == ("downloaded", sha256(data), len(data))
        assert row["local_pdf"] == f"pdf_by_hash/{sha256(data)}.pdf"
        assert ctx.path(row["local_pdf"]).read_bytes() == data
    assert ctx.db.get_document(groups["untouched"].document_id)["status"] == "discovered"
    # The two copies hold a credited document's content; only the orphan's PDF matches no document.
    assert result.credited == 7 and result.unmatched == 1 and result.duplicates == 2


def test_an_extracted_row_stays_extracted(planned_court, legacy):
    ctx, groups = legacy
    backfill(ctx)
    row = ctx.db.get_document(groups["extracted"].document_id)
    assert (row["status"], row["extracted_chars"]) == ("extracted", 99)
    assert row["local_pdf"] == f"pdf_by_hash/{row['sha256']}.pdf"


def test_each_distinct_content_is_written_and_uploaded_once(planned_court, legacy):
    ctx, groups = legacy
    result = backfill(ctx)
    assert (result.files, result.pdfs, result.distinct) == (11, 10, 8)
    assert result.written == result.uploaded == 8
    names = ctx.store.list_dir("pdf_by_hash")
    assert len(names) == 8 and all(ctx.store.uploads[name] == 1 for name in names)
    for name in names:
        assert name == f"pdf_by_hash/{sha256(ctx.store.read_file(name))}.pdf"
    assert sorted(p.name for p in ctx.path("pdf_by_hash").iterdir()) == sorted(n.split("/")[1] for n in names)
    assert list(ctx.path("tmp").iterdir()) == []


def test_a_file_that_is_not_a_pdf_is_reported_and_skipped(legacy):
    ctx, _ = legacy
    result = backfill(ctx)
    assert result.not_pdf == ["error-page.pdf"]
    assert not any(b"<html>" in ctx.path(f"pdf_by_hash/{p.name}").read_bytes()
                   for p in ctx.path("pdf_by_hash").iterdir())


def test_backfill_twice_gives_the_same_state_as_once(legacy):
    ctx, _ = legacy
    backfill(ctx)
    table, files = documents_table(ctx), sorted(ctx.path("pdf_by_hash").iterdir())
    uploads = sum(ctx.store.uploads.values())
    assert backfill(ctx).skipped.startswith(BACKFILL_GUARD_KEY)
    forced = backfill(ctx, force=True)   # without the guard too: nothing changes
    assert (forced.written, forced.uploaded, forced.credited) == (0, 0, 0)
    assert documents_table(ctx) == table and sorted(ctx.path("pdf_by_hash").iterdir()) == files
    assert sum(ctx.store.uploads.values()) == uploads


def test_a_stopped_backfill_leaves_the_guard_unset_and_resumes(tmp_path, planned_court):
    ctx = make_context(tmp_path, clock=RunClock(3600))
    documents = planned_court.documents_with("ok")[:3]
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(documents))
    for document in documents:
        ctx.path("pdf_backup").joinpath(f"{document.document_id}.pdf").write_bytes(
            planned_court.pdf_bytes(document.document_id))
    ctx.clock.request_stop("SIGTERM")
    assert backfill(ctx).stopped == "SIGTERM" and ctx.db.kv_get(BACKFILL_GUARD_KEY) is None
    ctx.close()
    ctx = make_context(tmp_path)
    assert backfill(ctx).credited == 3 and ctx.db.kv_get(BACKFILL_GUARD_KEY) is not None
    ctx.close()


def test_an_empty_backup_folder_sets_no_guard(tmp_path):
    ctx = make_context(tmp_path)
    assert backfill(ctx).skipped == "no files in pdf_backup/"
    assert ctx.db.kv_get(BACKFILL_GUARD_KEY) is None
    ctx.close()


def test_a_dry_run_backfills_nothing(tmp_path):
    ctx = make_context(tmp_path)
    ctx.cfg = ctx.cfg.replace(DRY_RUN=True)
    (ctx.path("pdf_backup") / "x.pdf").write_bytes(b"%PDF-1.4 backup")
    result = backfill(ctx)
    assert result.skipped == "dry run" and result.written == 0
    assert list(ctx.path("pdf_by_hash").iterdir()) == []
    ctx.close()
