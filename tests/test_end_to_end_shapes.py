"""The whole pipeline with each discovery strategy against each court shape (small corpora, pacing off),
every behaviour of the real court the simulated one has switched on (withheld files, some released;
paged lists; entries listing no file; null texts; a late opinion in a closed case; neighbouring case
numbers; a second download path; instants near midnight UTC): every document the court serves ends in
the table under its documentID with the right verdict, withheld ones as records never requested,
verify passes, the coverage audit finds no gap, dates are Kentucky's, and status.json says when the
archive was brought up to date and up to which day it is complete."""
from __future__ import annotations

import datetime as dt
import json
import sqlite3

import pytest
from support import REAL_COURT_BEHAVIOURS

from notebook_builder.cells.c00_config import kentucky_date, kentucky_today, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c15_discovery_state import DiscoveryState, coverage_gaps
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import SimCourt

pytestmark = pytest.mark.slow   # the whole pipeline

CAP = 2 * 1024 * 1024

SHAPES = [
    # (court shape, its document search, KY_DISCOVERY, the strategy the run must use)
    ("inferred", "present", "auto", "documents"),
    ("captured", "absent", "auto", "cases"),
    ("captured", "present", "auto", "documents"),           # real value forms in document-search rows
    ("captured", "entries", "documents", "documents"),      # rows that are docket entries, resolved
]


@pytest.mark.parametrize("shape, document_search, discovery, strategy", SHAPES)
def test_the_pipeline_archives_every_document_whatever_the_court_shape(tmp_path, shape, document_search,
                                                                       discovery, strategy):
    court = SimCourt(45, seed=21, shape=shape, document_search=document_search, results_limit=15, max_page=10,
                     late_docs=2, first_year=2023, last_year=2026, oversize_bytes=CAP + 1024 * 1024,
                     # JSON faults (503, 429 with a real Retry-After, resets, torn bodies) in one shape: they cost seconds
                     search_fault_rate=0.02 if (shape, document_search) == ("captured", "absent") else 0.0,
                     admin_share=0.15 if shape == "captured" else 0.0, stall_seconds=0.2,
                     **REAL_COURT_BEHAVIOURS,
                     # the site-root path alone answers PDFs in one shape; both paths in the others
                     download_paths="site" if (shape, document_search) == ("captured", "absent") else "both")
    with court:
        cfg = load_config({
            "KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01", "KY_BACKOFF_CAP": "0.05",
            "KY_MAX_PDF_BYTES": str(CAP), "KY_FIRST_YEAR": "2023", "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "10",
            "KY_CONVERGENCE_DELTA": "1", "KY_CHECKPOINT_SECONDS": "2", "KY_EXTRACT_TIMEOUT": "30",
            "KY_WORKERS": "2", "KY_PROGRESS": "0", "KY_DISCOVERY": discovery, "KY_PROBE_FIRST": "1"})
        report = run_pipeline(cfg, handle_signals=False)
    assert report.exit_status == 0, report.summary()
    assert report.stages["probe"].ok and report.stages["discover"].strategy == strategy
    db = Database.open(f"{cfg.WORKSPACE}/ky_court.sqlite")
    try:
        rows = {row["document_id"]: row for row in db.iter_documents()}
        expected = {doc.document_id: doc for doc in court.documents}
        # Withheld files are listed only in the entries' file lists (the case walk, resolved entries).
        withheld = court.withheld_files() if (shape, document_search) != ("inferred", "present") \
            and (shape, document_search) != ("captured", "present") else {}
        assert set(rows) == set(expected) | set(withheld)
        wrong = [(doc_id, doc.fault, rows[doc_id]["status"], rows[doc_id]["http_status"])
                 for doc_id, doc in expected.items()
                 if (rows[doc_id]["status"], rows[doc_id]["http_status"]) != (doc.expected_status,
                                                                              doc.expected_http_status)]
        assert wrong == []
        assert {(rows[doc_id]["status"], rows[doc_id]["http_status"], rows[doc_id]["document_available"])
                for doc_id, released in withheld.items()} <= {("extracted", 200, 1), ("failed", 404, 0)}
        assert all((rows[doc_id]["status"] == "extracted") == released for doc_id, released in withheld.items())
        still = {doc_id for doc_id, released in withheld.items() if not released}
        assert not still & {row[0] for row in db.conn.execute("SELECT document_id FROM download_events")}
        (late,) = court.corpus.late_opinions
        assert court.documents[late].document_id in rows
        # Dates a user sees are Kentucky's: an evening filing (near midnight UTC) keeps its day.
        corpus = court.corpus
        for doc_id, doc in expected.items():
            day = corpus.doc_filed[corpus.doc_entry[doc.index]] if shape == "captured" else corpus.doc_filed[doc.index]
            assert kentucky_date(rows[doc_id]["filed_date"]) == dt.date.fromordinal(day).isoformat(), doc_id
        with sqlite3.connect(f"{cfg.WORKSPACE}/ky_search.sqlite") as index:
            indexed = dict(index.execute("SELECT document_id, filed_date FROM docs"))
        assert indexed and all(indexed[doc_id] == kentucky_date(rows[doc_id]["filed_date"]) for doc_id in indexed)
        assert all(row["court"] in ("Kentucky Court of Appeals", "Kentucky Supreme Court") for row in rows.values())
        assert all(row["filed_date"] and "+0000" not in row["filed_date"] for row in rows.values())
        entry_ids = {row["docket_entry_id"] for row in rows.values()}
        assert not set(rows) & entry_ids
        assert coverage_gaps(DiscoveryState(db).coverage_audit()) == []
        if shape == "captured":
            admin = [row for row in rows.values() if " ADMIN - " in (row["case_number"] or "")]
            assert admin and all(row["related_case_numbers"] for row in admin)
        if strategy == "cases":
            assert db.conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0] == len({d.case_id for d in court.documents})
            with_text = [doc_id for doc_id in expected if not court.null_text(doc_id)]     # a null text is no text
            assert 0 < len(with_text) < len(expected)
            assert db.conn.execute("SELECT COUNT(*) FROM court_text").fetchone()[0] == len(with_text)
            # Every extracted document with a court text has its agreement with it recorded; the
            # court's text is its PDF's, so ours agrees.
            compared = [row[0] for row in db.conn.execute(
                "SELECT d.court_text_agreement FROM documents d JOIN court_text ct USING (document_id) "
                "WHERE d.status = 'extracted' AND ct.chars > 0")]
            assert compared and all(agreement is not None and agreement >= 0.9 for agreement in compared)
    finally:
        db.close()
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    assert status["done"] and status["verify"] == "PASS" and status["archive_updated_at"]
    assert status["discovery_strategy"] == strategy
    assert status["complete_through"] == kentucky_today().isoformat()
    assert status["court"]["requests"] > 0 and status["court"]["downloads_left"] == 0
    assert "requests this run, observed latency" in report.summary()
