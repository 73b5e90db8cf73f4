"""The whole pipeline against the simulated court with its full fault catalogue.

Every CONTRACT.md promise is checked at the end: ids, statuses, http_status,
hashes, store files, inventories, status.json, verify PASS; then a second run
is a no-op that still passes.
"""
import csv
import hashlib
import sqlite3
import tarfile
import io
import json

import pytest

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import FAULTS, NEVER, TRANSIENT_FAULTS, SimCourt
from support import E2E_CAP as CAP, REAL_COURT_BEHAVIOURS, pipeline_env, stored_database

pytestmark = pytest.mark.slow   # the whole pipeline


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("e2e")
    # 250 documents hold every fault at least twice; results_limit and max_page scale with them, so
    # shards are still split and re-paged (624 search pages, against 651 with 500 documents at 40/25).
    # A stalled body stalls 0.1 s: it fails once, however long (the client's timeout is 60 s).
    # Every behaviour of the real court the simulated one has is on (most show only in the case walk's
    # answers; here neighbouring numbers, the late opinion and the second download path do).
    court = SimCourt(250, seed=11, results_limit=20, max_page=12, late_docs=6, first_year=2020,
                     last_year=2026, search_fault_rate=0.03, oversize_bytes=CAP + 1024 * 1024,
                     stall_seconds=0.1, download_paths="both", **REAL_COURT_BEHAVIOURS)
    with court:
        cfg = load_config(pipeline_env(court, tmp_path))
        first = run_pipeline(cfg, handle_signals=False)
        requests_after_first = court.download_requests
        archives_after_first = {path.name: path.read_bytes()
                                for path in (tmp_path / "store").glob("ky_court-WIP-resume-*.tar.gz")}
        second = run_pipeline(cfg, handle_signals=False)
        yield {"court": court, "cfg": cfg, "first": first, "second": second, "tmp": tmp_path,
               "requests_after_first": requests_after_first,
               "requests_after_second": court.download_requests,
               "archives_after_first": archives_after_first}


def test_corpus_holds_every_fault(finished_run):
    faults = {doc.fault for doc in finished_run["court"].documents}
    assert faults == set(FAULTS)


def test_run_passes_and_exits_0(finished_run):
    first = finished_run["first"]
    assert first.exit_status == 0, first.summary()
    assert first.verify.passed


def test_every_document_the_court_served_is_in_the_table_once_with_the_right_verdict(finished_run):
    court, cfg = finished_run["court"], finished_run["cfg"]
    db = Database.open(f"{cfg.WORKSPACE}/ky_court.sqlite")
    rows = {row["document_id"]: row for row in db.iter_documents()}
    expected = {doc.document_id: doc for doc in court.documents}
    assert set(rows) == set(expected)
    wrong = [(doc_id, doc.fault, rows[doc_id]["status"], rows[doc_id]["http_status"])
             for doc_id, doc in expected.items()
             if (rows[doc_id]["status"], rows[doc_id]["http_status"])
             != (doc.expected_status, doc.expected_http_status)]
    assert wrong == []
    for doc_id, doc in expected.items():
        row = rows[doc_id]
        if doc.expected_status in ("downloaded", "extracted"):
            good = court.pdf_bytes(doc_id)
            assert row["sha256"] == hashlib.sha256(good).hexdigest()
            assert row["local_pdf"] == f"pdf_by_hash/{row['sha256']}.pdf"
            assert row["size_bytes"] == len(good)
        if doc.expected_status == "extracted":
            assert (row["extracted_chars"] == 0) == doc.expected_text_chars_zero
            # A scan (a page showing an image, no text layer) is likely_scanned; a blank PDF is not.
            assert row["likely_scanned"] == (doc.fault == "image_only"), doc.fault
        if doc.fault in ("http_401", "http_403", "http_404", "oversized", "lying_length"):
            # permanent: one attempt, ever (a 404 is asked of both download paths in it)
            assert court.requests_for(doc_id) == (2 if doc.fault == "http_404" else 1), doc.fault
            assert row["attempts"] == 1, doc.fault
    db.close()


def test_store_holds_each_pdf_and_text_once_under_its_hash(finished_run):
    court, tmp = finished_run["court"], finished_run["tmp"]
    store = tmp / "store"
    good_hashes = {hashlib.sha256(court.pdf_bytes(d.document_id)).hexdigest()
                   for d in court.documents if d.expected_status in ("downloaded", "extracted")}
    pdfs = {p.stem: p for p in (store / "pdf_by_hash").iterdir()}
    assert set(pdfs) == good_hashes
    for sha, path in pdfs.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    texts = {p.stem for p in (store / "text").iterdir() if not p.name.endswith(".ocr.txt")}
    scans = {hashlib.sha256(court.pdf_bytes(d.document_id)).hexdigest()
             for d in court.documents if d.fault == "image_only" and d.expected_status == "extracted"}
    # OCR's merged text, for the scans only (when the OCR engine is installed here)
    assert {p.name[:-len(".ocr.txt")] for p in (store / "text").glob("*.ocr.txt")} <= scans
    extracted = {hashlib.sha256(court.pdf_bytes(d.document_id)).hexdigest()
                 for d in court.documents if d.expected_status == "extracted"}
    assert texts == extracted
    some = next(d for d in court.documents if d.fault == "ok")
    sha = hashlib.sha256(court.pdf_bytes(some.document_id)).hexdigest()
    assert some.case_number in (store / "text" / f"{sha}.txt").read_text()
    assert not list((tmp / "workspace" / "tmp").glob("*.part"))


def test_inventories_status_and_archive_are_in_the_store(finished_run):
    court, tmp = finished_run["court"], finished_run["tmp"]
    store = tmp / "store"
    inventory = list(csv.DictReader(io.StringIO((store / "document_inventory.csv").read_text())))
    assert len(inventory) == len(court.documents)
    failed = list(csv.DictReader(io.StringIO((store / "failed_inventory.csv").read_text())))
    expected_failed = {d.document_id for d in court.documents if d.expected_status != "extracted"}
    assert {row["document_id"] for row in failed} == expected_failed
    status = json.loads((store / "status.json").read_text())
    assert status["done"] is True and status["verify"] == "PASS"
    assert status["queues"] == {"download": 0, "extract": 0}
    assert sum(status["counts"].values()) == len(court.documents)
    assert stored_database(store) is not None and not (store / "ky_court.sqlite").exists()
    assert list(store.glob("ky_court-WIP-resume-*.tar.gz"))


def test_second_run_is_a_no_op_that_still_passes(finished_run):
    second = finished_run["second"]
    assert second.exit_status == 0, second.summary()
    assert finished_run["requests_after_second"] == finished_run["requests_after_first"]


def test_every_attempt_is_counted_and_logged_and_retry_after_was_waited_for(finished_run):
    court, cfg = finished_run["court"], finished_run["cfg"]
    db = Database.open(f"{cfg.WORKSPACE}/ky_court.sqlite")
    rows = {row["document_id"]: row for row in db.iter_documents()}
    logs: dict[str, list] = {}
    for log in db.conn.execute("SELECT * FROM extraction_log ORDER BY log_id"):
        logs.setdefault(log["document_id"], []).append(log)
    wrong = []
    for doc in court.documents:
        row, logged = rows[doc.document_id], logs.get(doc.document_id, [])
        if doc.fault in TRANSIENT_FAULTS and not doc.late and doc.transient_failures != NEVER:
            if row["attempts"] != doc.transient_failures + 1:
                wrong.append((doc.fault, "download attempts", row["attempts"], doc.transient_failures + 1))
        if doc.expected_status == "extracted":
            if ([(log["outcome"], log["attempt"]) for log in logged] != [("ok", 1)]
                    or row["extract_attempts"] != 1 or logged[0]["chars"] != row["extracted_chars"]):
                wrong.append((doc.fault, "extraction log", [tuple(log) for log in logged]))
        elif doc.fault == "unparseable":
            # Every engine's verdict once, in one attempt; then all attempts are spent, the reason named.
            if ([(log["engine"], log["outcome"], log["attempt"]) for log in logged]
                    != [(engine, "unparseable", 1) for engine in cfg.EXTRACT_ENGINES]
                    or row["extract_attempts"] != cfg.MAX_EXTRACT_ATTEMPTS or row["extract_failure"] != "unparseable"):
                wrong.append((doc.fault, "extraction log", [tuple(log) for log in logged]))
        elif logged:
            wrong.append((doc.fault, "never downloaded, yet logged", len(logged)))
    db.close()
    assert wrong == []
    assert court.early_requests == 0      # every 429's Retry-After (seconds or a date) was waited out


def test_inventories_say_why_each_document_failed_and_match_the_table(finished_run):
    court, cfg, store = finished_run["court"], finished_run["cfg"], finished_run["tmp"] / "store"
    failed = {row["document_id"]: row["reason"] for row in
              csv.DictReader(io.StringIO((store / "failed_inventory.csv").read_text()))}
    expected_reason = {"http_401": "permanent http", "http_403": "permanent http", "http_404": "permanent http",
                       "oversized": "permanent http", "lying_length": "permanent http",
                       "always_503": "exhausted attempts", "unparseable": "extraction failed"}
    assert {doc_id: reason for doc_id, reason in failed.items()} == {
        doc.document_id: expected_reason[doc.fault] for doc in court.documents if doc.expected_status != "extracted"}
    db = Database.open(f"{cfg.WORKSPACE}/ky_court.sqlite")
    table = {row["document_id"]: row for row in db.iter_documents()}
    db.close()
    inventory = list(csv.DictReader(io.StringIO((store / "document_inventory.csv").read_text())))
    for row in inventory:
        in_table = table[row["document_id"]]
        assert (row["status"], row["sha256"] or None) == (in_table["status"], in_table["sha256"])


def test_the_store_snapshot_is_the_workspaces_state_and_no_archive_was_lost(finished_run):
    tmp = finished_run["tmp"]
    def kv(path):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return dict(conn.execute("SELECT key, value FROM kv WHERE key LIKE 'checkpoint_%'"))
    snapshot = kv(stored_database(tmp / "store"))
    assert snapshot["checkpoint_seq"] == kv(tmp / "workspace" / "ky_court.sqlite")["checkpoint_seq"]
    archives = {path.name: path for path in (tmp / "store").glob("ky_court-WIP-resume-*.tar.gz")}
    earlier = finished_run["archives_after_first"]
    assert earlier and set(earlier) < set(archives)          # the second run added one and kept the rest
    assert all(archives[name].read_bytes() == data for name, data in earlier.items())
    newest = max(archives.values(), key=lambda path: int(path.name.rsplit("-", 1)[1].split(".")[0]))
    with tarfile.open(newest) as archive:
        assert sorted(archive.getnames()) == ["resume.json", "status.json"]
