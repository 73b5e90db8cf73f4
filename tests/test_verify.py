"""Sync/verify: integrity, inventories, store completeness and hashes, lag, checkpoint, archive."""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

from support import mark_extracted, open_test_context

from notebook_builder.cells.c00_config import StoreQuotaExceeded, load_config
from notebook_builder.cells.c06_layout import DB_FILENAME, DOCUMENT_INVENTORY, FAILED_INVENTORY
from notebook_builder.cells.c10_database import connect
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c06_layout import is_resume_archive_name
from notebook_builder.cells.c90_verify import VerifyResult, failure_reason, format_verify_report, verify


def make_context(tmp_path: Path, store=None, **env: str):
    return open_test_context(tmp_path, name="ws", store=store, env=env, database=False)


def add_pdf(ctx, document_id: str, *, extracted: bool) -> str:
    """A real PDF file in the workspace and the store, and the row that claims it."""
    data = f"%PDF-1.4 document {document_id}\n".encode()
    sha = hashlib.sha256(data).hexdigest()
    name = f"pdf_by_hash/{sha}.pdf"
    ctx.path(name).write_bytes(data)
    ctx.mirror.put(name, ctx.path(name))
    DownloadRecords(ctx.db).record_download_attempt(document_id)
    DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    if extracted:
        text = f"text/{sha}.txt"
        ctx.path(text).write_text(f"text of {document_id}")
        ctx.mirror.put(text, ctx.path(text))
        mark_extracted(ctx.db, document_id, pages=1, extracted_chars=12, likely_scanned=False)
    return sha


def populate(ctx) -> dict[str, str]:
    """Six documents, one in every state verify distinguishes; returns id -> sha256 of the PDFs."""
    db = ctx.open_database()
    ids = ["D001", "D002", "D003", "D004", "D005", "D006"]
    DiscoveryState(db).upsert_discovered({"document_id": i, "case_number": "2020-SC-0001", "court": "SC",
                          "description": f"entry {i}, with a comma"} for i in reversed(ids))
    shas = {"D001": add_pdf(ctx, "D001", extracted=True),
            "D002": add_pdf(ctx, "D002", extracted=True),
            "D003": add_pdf(ctx, "D003", extracted=False)}
    for _ in range(ctx.cfg.MAX_EXTRACT_ATTEMPTS):
        TextRecords(db).mark_extract_failed("D003", "pypdf: broken xref")
    DownloadRecords(db).record_download_attempt("D004")
    DownloadRecords(db).mark_download_failed("D004", http_status=404, error="not found")
    for _ in range(ctx.cfg.MAX_ATTEMPTS):
        DownloadRecords(db).record_download_attempt("D005")
        DownloadRecords(db).mark_download_failed("D005", http_status=503, error="unavailable")
    # D006 stays discovered: the download queue is not empty, the run is not done.
    return shas


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


# ----------------------------------------------------------------- PASS


def test_consistent_workspace_passes_and_leaves_checkpoint_status_and_archive(tmp_path):
    ctx = make_context(tmp_path, KY_VERIFY_HASHES="1")
    populate(ctx)
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.reasons == [] and result.integrity == []
    assert result.counts == {"discovered": 1, "downloaded": 1, "extracted": 2, "failed": 2}
    assert result.queues == {"download": 1, "extract": 0}
    assert result.done is False          # PASS does not need done
    assert result.referenced == 5 and result.fixity.read == 5 and result.missing_in_store == []
    store = tmp_path / "store"
    status = json.loads((store / "status.json").read_text())
    assert status["verify"] == "PASS" and status["done"] is False
    assert status["checkpoint_seq"] == result.checkpoint["checkpoint_seq"]
    assert result.checkpoint["pushed"].packs and all((store / pack).is_file() for pack in result.checkpoint["pushed"].packs)
    assert not (store / DB_FILENAME).exists()          # the store keeps the database as page packs
    assert is_resume_archive_name(result.archive) and (store / result.archive).is_file()
    assert result.archive.endswith(f"-{result.checkpoint['checkpoint_seq']}.tar.gz")
    report = format_verify_report(result)
    assert report.splitlines()[0] == "verify PASS (not done: 1 to download, 0 to extract, discovery not converged)"
    assert result.archive in report
    ctx.close()


def test_verify_runs_in_dry_run_too(tmp_path):
    ctx = make_context(tmp_path, KY_DRY="1")
    populate(ctx)
    assert verify(ctx).passed
    ctx.close()


def test_verify_sweeps_the_temps_a_killed_write_left_in_the_store_and_still_passes(tmp_path):
    import os
    ctx = make_context(tmp_path)
    populate(ctx)
    leftover = tmp_path / "store" / "text" / ".tmp-killed"
    leftover.write_bytes(b"half a text")
    os.utime(leftover, (1_000_000_000, 1_000_000_000))
    result = verify(ctx)
    assert result.passed and result.stale_temps_removed == 1 and not leftover.exists()
    ctx.close()


# ----------------------------------------------------------------- FAIL


def test_a_referenced_pdf_missing_from_the_store_and_the_workspace_fails_naming_it(tmp_path):
    ctx = make_context(tmp_path)
    shas = populate(ctx)
    name = f"pdf_by_hash/{shas['D002']}.pdf"
    (tmp_path / "store" / name).unlink()
    ctx.path(name).unlink()
    result = verify(ctx)
    assert not result.passed
    assert result.missing_in_store == [name]
    assert any(reason.startswith("1 stored file is damaged and no good copy was found") and
               f"{name}: missing from the store; no good copy" in reason for reason in result.reasons)
    assert json.loads(ctx.path("status.json").read_text())["verify"] == "FAIL"
    report = format_verify_report(result).splitlines()
    assert report[0] == "verify FAIL (not done: 1 to download, 0 to extract, discovery not converged)"
    assert report[1].startswith("  - 1 stored file is damaged")
    ctx.close()


def test_a_missing_text_of_an_extracted_document_with_no_copy_fails(tmp_path):
    ctx = make_context(tmp_path)
    shas = populate(ctx)
    (tmp_path / "store" / "text" / f"{shas['D001']}.txt").unlink()
    ctx.path(f"text/{shas['D001']}.txt").unlink()
    result = verify(ctx)
    assert not result.passed and result.missing_in_store == [f"text/{shas['D001']}.txt"]
    ctx.close()


def test_a_store_file_with_other_bytes_is_found_and_healed_from_the_workspace(tmp_path):
    ctx = make_context(tmp_path, KY_VERIFY_HASHES="1")
    shas = populate(ctx)
    stored = tmp_path / "store" / "pdf_by_hash" / f"{shas['D001']}.pdf"
    good = stored.read_bytes()
    stored.write_bytes(bytes(reversed(good)))         # other bytes, the same length
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.found[0].startswith(f"store pdf_by_hash/{shas['D001']}.pdf: hashes to ")
    assert result.fixity.healed == [f"pdf_by_hash/{shas['D001']}.pdf (from the workspace)"]
    assert stored.read_bytes() == good
    ctx.close()


def test_a_row_claiming_a_pdf_under_another_name_fails(tmp_path):
    ctx = make_context(tmp_path)
    populate(ctx)
    with ctx.db.transaction() as conn:
        conn.execute("UPDATE documents SET local_pdf = 'pdfs/D001.pdf' WHERE document_id = 'D001'")
    result = verify(ctx)
    assert not result.passed
    assert result.row_problems and "D001" in result.row_problems[0]
    ctx.close()


def corrupt_index_entry(db_path: Path) -> None:
    """Changes one key inside the documents_status index page: the table and the index disagree."""
    conn = connect(db_path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'documents_status'").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db_path.read_bytes())
    start = (root - 1) * page_size
    page = data[start:start + page_size]
    offset = page.find(b"extracted")
    assert offset > 0, "index page holds no 'extracted' key"
    page[offset:offset + 9] = b"extractex"
    data[start:start + page_size] = page
    db_path.write_bytes(bytes(data))


def test_a_corrupt_database_fails_and_does_not_replace_the_stores_snapshot(tmp_path):
    ctx = make_context(tmp_path)
    populate(ctx)
    assert verify(ctx).passed
    packs = tmp_path / "store" / "db" / "ky_court"
    good_state = {path.name: path.read_bytes() for path in packs.iterdir()}
    ctx.close()
    corrupt_index_entry(ctx.db_path)

    ctx = make_context(tmp_path)
    result = verify(ctx)
    assert not result.passed and result.integrity
    assert result.reasons[0].startswith("database integrity_check failed")
    assert result.archive is None and result.checkpoint is None
    assert {path.name: path.read_bytes() for path in packs.iterdir()} == good_state
    ctx.close()


class QuotaStore(LocalStore):
    """A store whose every upload is refused for lack of quota (until it is swapped back)."""

    def upload_file(self, name, local_path):
        raise StoreQuotaExceeded(f"storageQuotaExceeded writing {name}")


def test_a_lagging_store_fails_verify_and_a_later_run_catches_up(tmp_path):
    ctx = make_context(tmp_path, store=QuotaStore(tmp_path / "store"))
    populate(ctx)
    result = verify(ctx)
    assert not result.passed
    assert result.store_pending == 5   # three PDFs and two texts (no resume point names a state the store lacks)
    lag = [reason for reason in result.reasons if reason.startswith("store lags:")]
    assert len(lag) == 1 and "names pending (quota exceeded" in lag[0] and "nothing is lost" in lag[0]
    assert json.loads(ctx.path("status.json").read_text())["verify"] == "FAIL"
    ctx.close()

    ctx = make_context(tmp_path)   # the quota is back
    ctx.open_database()
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.backlog_uploaded == 5 and result.store_pending == 0
    archives = [name for name in LocalStore(tmp_path / "store").list_dir("") if is_resume_archive_name(name)]
    assert archives == [result.archive]
    ctx.close()


# ------------------------------------------------------------ inventories


def test_inventories_hold_every_column_and_the_right_failures(tmp_path):
    ctx = make_context(tmp_path)
    populate(ctx)
    result = verify(ctx)
    assert result.exported == [DOCUMENT_INVENTORY, FAILED_INVENTORY]
    columns = ctx.db.document_columns()
    documents = read_csv(ctx.path(DOCUMENT_INVENTORY))
    assert documents[0] == columns and len(columns) >= 20
    assert [row[0] for row in documents[1:]] == ["D001", "D002", "D003", "D004", "D005", "D006"]
    d001 = dict(zip(columns, documents[1]))
    assert d001["status"] == "extracted" and d001["description"] == "entry D001, with a comma"
    assert d001["sha256"] == ctx.db.get_document("D001")["sha256"]

    failed = read_csv(ctx.path(FAILED_INVENTORY))
    assert failed[0] == ["reason"] + columns
    assert [(row[0], row[1]) for row in failed[1:]] == [
        ("extraction failed", "D003"), ("permanent http", "D004"), ("exhausted attempts", "D005")]
    for name in (DOCUMENT_INVENTORY, FAILED_INVENTORY):
        assert (tmp_path / "store" / name).read_bytes() == ctx.path(name).read_bytes()
    ctx.close()


def test_failure_reason_names_each_kind_of_failure():
    cfg = load_config(env={})
    row = {"status": "failed", "http_status": 503, "attempts": 1}
    assert failure_reason(row, cfg) == "retrying"
    assert failure_reason({**row, "attempts": cfg.MAX_ATTEMPTS}, cfg) == "exhausted attempts"
    assert failure_reason({**row, "http_status": 413}, cfg) == "permanent http"
    assert failure_reason({"status": "downloaded", "http_status": 200, "attempts": 1}, cfg) == "extraction failed"


def test_report_lists_each_reason_on_its_own_line():
    result = VerifyResult(passed=False, reasons=["first problem", "second problem"],
                          counts={"discovered": 2}, queues={"download": 2, "extract": 0})
    lines = format_verify_report(result).splitlines()
    assert lines[:3] == ["verify FAIL", "  - first problem", "  - second problem"]
    assert "documents: 2 (discovered 2)" in lines[3]


def test_a_name_missing_from_the_store_but_held_locally_is_put_back_by_the_same_verify(tmp_path):
    ctx = make_context(tmp_path)
    shas = populate(ctx)
    name = f"pdf_by_hash/{shas['D002']}.pdf"
    assert ctx.path(name).is_file()
    (tmp_path / "store" / name).unlink()            # e.g. a backlog an older version dropped
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.missing_in_store == [] and result.fixity.healed == [f"{name} (from the workspace)"]
    assert (tmp_path / "store" / name).read_bytes() == ctx.path(name).read_bytes()
    ctx.close()
