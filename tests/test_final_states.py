"""Counts say what is true: documents in their state for good are named so (not extractable,
withheld, failed for good), status.json explains `failed` against `permanent_failures`, and the
OCR summary counts only documents whose OCR text holds words."""
from __future__ import annotations

import hashlib
import json
import os

from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c35_context import explain_counts, final_states_line, status_document, write_status
from notebook_builder.cells.c85_ocr import OcrResult, ocr
from notebook_builder.cells.c95_run import describe_stage
from notebook_builder.simcourt import pdfs


def archive_in_every_state(db: Database, max_attempts: int) -> None:
    """extracted 1, downloaded 2 (one unparseable for good, one waiting), failed 5 (404 for good,
    a 403 for good, withheld, out of attempts, retrying), discovered 1."""
    names = ["ok", "unparseable", "waiting", "gone", "restricted", "withheld", "spent", "retrying", "new"]
    DiscoveryState(db).upsert_discovered([{"document_id": name} for name in names])
    for index, name in enumerate(["ok", "unparseable", "waiting"]):
        sha = f"{index + 1:064x}"
        DownloadRecords(db).mark_downloaded(name, sha256=sha, size_bytes=10, local_pdf=f"pdf_by_hash/{sha}.pdf")
    TextRecords(db).record_extracted([{"document_id": "ok", "sha256": f"{1:064x}", "attempt": 1, "engine": "pypdf",
                          "pages": 1, "chars": 10, "seconds": 0.0, "likely_scanned": False}])
    TextRecords(db).mark_extract_failed("unparseable", "no parser opens it", reason="unparseable", spend_all=3)
    DownloadRecords(db).mark_download_failed("gone", http_status=404, error="not found")
    DownloadRecords(db).mark_download_failed("restricted", http_status=403, error="forbidden")
    DownloadRecords(db).mark_download_failed("withheld", http_status=404, error="no file")
    db.conn.execute("UPDATE documents SET document_available = 0 WHERE document_id = 'withheld'")
    DownloadRecords(db).mark_download_failed("spent", http_status=503, error="unavailable")
    db.conn.execute("UPDATE documents SET attempts = ? WHERE document_id = 'spent'", (max_attempts,))
    DownloadRecords(db).mark_download_failed("retrying", http_status=503, error="unavailable")


def test_final_states_partition_the_failed_and_name_the_unextractable(make_context):
    ctx = make_context(name="ws")
    db = ctx.open_database()
    archive_in_every_state(db, ctx.cfg.MAX_ATTEMPTS)

    final = WorkQueues(db).final_states(ctx.cfg)

    assert final == {"not_extractable": 1, "not_extractable_reasons": {"unparseable": 1}, "withheld": 1,
                     "failed_for_good": 2, "out_of_attempts": 1, "retrying": 1}
    counts = WorkQueues(db).status_counts()
    assert final["withheld"] + final["failed_for_good"] + final["out_of_attempts"] + final["retrying"] \
        == counts["failed"] == 5
    assert final_states_line(final) == ("1 PDF not extractable (unparseable 1), 2 failed for good, 1 withheld, "
                                        "1 out of attempts, 1 still retrying")


def test_status_json_explains_failed_against_permanent_failures(make_context):
    ctx = make_context(name="ws")
    archive_in_every_state(ctx.open_database(), ctx.cfg.MAX_ATTEMPTS)

    document = write_status(ctx)

    saved = json.loads((ctx.workspace / "status.json").read_text())
    assert saved["final_states"] == document["final_states"] and saved["permanent_failures"] == 3
    assert saved["counts_explained"] == explain_counts(saved["counts"], saved["final_states"])
    assert saved["counts_explained"].startswith(
        "downloaded 2 = 1 not extractable for good (unparseable 1) + 1 waiting for extraction; "
        "failed 5 = 2 failed for good")
    assert "permanent_failures counts them" in saved["counts_explained"]
    assert saved["store"] == ctx.cfg.STORE
    assert status_document(None, ctx.cfg, phase="none").get("final_states") is None   # no database: no claim


def test_the_ocr_summary_counts_only_documents_whose_ocr_text_holds_words(make_context, monkeypatch):
    from notebook_builder.cells import c85_ocr
    from notebook_builder.cells.c80_extract import extract
    ctx = make_context(name="ws", replace={"WORKERS": 1, "OCR_DPI": 30})
    for number in range(2):
        data = pdfs.image_only_pdf(seed=number, creation_date="20240101000000Z")
        sha = hashlib.sha256(data).hexdigest()
        (ctx.workspace / f"pdf_by_hash/{sha}.pdf").write_bytes(data)
        DiscoveryState(ctx.db).upsert_discovered([{"document_id": f"scan{number}"}])
        DownloadRecords(ctx.db).mark_downloaded(f"scan{number}", sha256=sha, size_bytes=len(data), local_pdf=f"pdf_by_hash/{sha}.pdf")
    extract(ctx)
    monkeypatch.setattr(c85_ocr, "ocr_engine_available", lambda engine: None)
    monkeypatch.setitem(c85_ocr.OCR_ENGINES, "tesseract", lambda image, timeout, orientation=True: ("  \n", None))   # reads nothing

    result = ocr(ctx)

    assert (result.pdfs, result.documents, result.blank, result.failed) == (2, 0, 2, 0)
    words = describe_stage("ocr", result)
    assert "0 documents now carry OCR text" in words and "2 PDFs gave no text" in words
    assert "2 documents now carry" not in words
    read = describe_stage("ocr", OcrResult(pdfs=3, documents=3, pages=4, chars=900, engine="tesseract"))
    assert read == "4 scanned pages of 3 PDFs recognised (tesseract; 0 turned upright, 0 blank), 900 characters: " \
                   "3 documents now carry OCR text; 0 pages and 0 PDFs failed"
    assert os.path.getsize(ctx.workspace / f"text/{sha}.ocr.txt") == 0


def test_the_stores_status_json_is_put_at_most_every_thirty_seconds_but_at_once_when_asked(make_context, monkeypatch):
    """Each put of status.json is a Drive write: a run's heartbeats and phase changes put it at most
    every STATUS_MIRROR_SECONDS, while the workspace's copy is always the latest; verify's verdict
    (mirror_now) goes at once."""
    from notebook_builder.cells import c35_context
    ctx = make_context()
    ctx.open_database()
    now = [1000.0]
    monkeypatch.setattr(c35_context.time, "monotonic", lambda: now[0])
    put = []
    original = ctx.mirror.put
    monkeypatch.setattr(ctx.mirror, "put", lambda name, *args, **kwargs: put.append(name) or original(name, *args, **kwargs))
    stored = lambda: json.loads((ctx.workspace.parent / "store" / "status.json").read_text())   # noqa: E731

    write_status(ctx, phase_note="first")
    for second in range(1, 30):
        now[0] = 1000.0 + second
        write_status(ctx, phase_note=f"at {second}")
    assert put == ["status.json"] and stored()["phase_note"] == "first"
    assert json.loads(ctx.path("status.json").read_text())["phase_note"] == "at 29"
    now[0] = 1030.0
    write_status(ctx, phase_note="due")
    assert put == ["status.json"] * 2 and stored()["phase_note"] == "due"
    now[0] = 1031.0
    write_status(ctx, verify="PASS", mirror_now=True)
    assert put == ["status.json"] * 3 and stored()["verify"] == "PASS"


def test_a_run_puts_status_json_in_the_store_at_its_start_and_with_verifys_verdict_not_at_each_phase(
        tmp_path, monkeypatch):
    """A phase's start and the crawl's end no longer force a put: within STATUS_MIRROR_SECONDS a
    whole run puts status.json twice (its first write, verify's verdict), and the store's copy is
    then the workspace's (a run of a few minutes under Drive's faults put it 46 times in 7 runs)."""
    from support import pipeline_env

    from notebook_builder.cells import c35_context
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c34_mirror import StoreMirror
    from notebook_builder.cells.c95_run import run_pipeline
    from notebook_builder.simcourt import SimCourt
    monkeypatch.setattr(c35_context, "STATUS_MIRROR_SECONDS", 3600.0)
    put = []
    original = StoreMirror.put
    monkeypatch.setattr(StoreMirror, "put", lambda self, name, *args, **kwargs:
                        (put.append(name) if name == "status.json" else None) or original(self, name, *args, **kwargs))
    with SimCourt(12, seed=4, faults=False, first_year=2024, last_year=2026) as court:
        cfg = load_config(pipeline_env(court, tmp_path))
        report = run_pipeline(cfg, handle_signals=False)
    assert report.exit_status == 0 and len(report.stages) >= 4
    assert put == ["status.json"] * 2
    workspace = json.loads((tmp_path / "workspace" / "status.json").read_text())
    assert json.loads((tmp_path / "store" / "status.json").read_text()) == workspace
    assert workspace["verify"] == "PASS"
