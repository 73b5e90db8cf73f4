"""Run all over a store laid out as v1.2 left it ends where a clean crawl of the same court ends
(documents, statuses, hashes), plus the documents the court has withdrawn since; nothing the
legacy state holds is asked of the court again, and its original is kept."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c38_legacy import legacy_original_name
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import SimCourt
from legacy_fixture import (FOREIGN_WORKSPACE, discovered_row, downloaded_row, extracted_row, legacy_archive, sha256,
                            write_legacy_database)
from support import pipeline_env, put_bytes

pytestmark = pytest.mark.slow   # two whole crawls

DOCS, SEED = 120, 7
ARCHIVE = "ky_court-WIP-resume-20240309T101500Z.tar.gz"


def make_court() -> SimCourt:
    return SimCourt(DOCS, seed=SEED, first_year=2020, last_year=2026, stall_seconds=0.05)


def end_state(cfg) -> dict[str, tuple]:
    conn = sqlite3.connect(f"file:{cfg.WORKSPACE}/ky_court.sqlite?mode=ro", uri=True)
    try:
        return {row[0]: (row[1], row[2]) for row in conn.execute("SELECT document_id, status, sha256 FROM documents")}
    finally:
        conn.close()


def run_all(cfg, runs: int = 4) -> tuple[list, dict]:
    """Runs (Run all, again and again) until status.json says done: (the reports, the last status)."""
    reports = []
    for _ in range(runs):
        reports.append(run_pipeline(cfg, handle_signals=False))
        status = json.loads((Path(cfg.WORKSPACE) / "status.json").read_text())
        if reports[-1].exit_status == 0 and status["done"]:
            break
    return reports, status


def build_v12_store(court: SimCourt, root, withdrawn_pdfs: list[bytes]) -> dict:
    """The store a v1.2 user has: an older snapshot, a newer resume archive holding the workspace
    (database, pdf_backup/ with foreign absolute pointers, pdf_by_hash/), PDFs and texts."""
    ok = court.documents_with("ok")
    pdf = {d.document_id: court.pdf_bytes(d.document_id) for d in ok}
    roles = {"extracted": ok[0:8], "backup": ok[8:16], "unknown": ok[16:18], "nowhere": ok[18:19],
             "no_text": ok[19:20], "discovered": ok[20:30] + court.documents_with("http_500")[:2]
             + court.documents_with("http_404")[:1], "only_older": ok[30:31]}
    withdrawn = [f"{number:x}".rjust(64, "d") for number in range(len(withdrawn_pdfs))]
    new, old = "2024-03-09T10:00:00Z", "2024-01-02T10:00:00Z"
    rows, files = [], {}
    for document in roles["extracted"] + roles["no_text"]:
        rows.append(extracted_row(document, pdf[document.document_id], f"{FOREIGN_WORKSPACE}/pdf_by_hash/x.pdf",
                                  updated_at=new))
    for number, document in enumerate(roles["backup"]):
        name = f"pdf_backup/{document.case_number[:4]}/{number}-opinion.pdf"
        rows.append(downloaded_row(document, pdf[document.document_id], f"{FOREIGN_WORKSPACE}/{name}",
                                   updated_at=new))
        files[name] = pdf[document.document_id]
        files[f"pdf_backup/copies/{number}.pdf"] = pdf[document.document_id]      # v1.2 kept duplicates
    files["pdf_backup/copies/error.pdf"] = b"<html><body>503 Service Unavailable</body></html>"
    for document in roles["unknown"]:
        rows.append(downloaded_row(document, pdf[document.document_id], "/tmp/lost.pdf", status="done",
                                   updated_at=new))
        files[f"pdf_by_hash/{sha256(pdf[document.document_id])}.pdf"] = pdf[document.document_id]
    rows += [extracted_row(d, pdf[d.document_id], "/gone/n.pdf", updated_at=new) for d in roles["nowhere"]]
    rows += [discovered_row(d, updated_at=new) for d in roles["discovered"]]
    for document_id, data in zip(withdrawn, withdrawn_pdfs):
        rows.append(dict(extracted_row(ok[0], data, f"pdf_by_hash/{sha256(data)}.pdf", updated_at=new),
                         document_id=document_id, case_number="2021-CA-0999", docket_entry_id=None))
    newer = write_legacy_database(root / "v12" / "newer.sqlite", rows)
    older_rows = [dict(row, updated_at=old) for row in rows[:12]] + [discovered_row(d, updated_at=old)
                                                                      for d in roles["only_older"]]
    older = write_legacy_database(root / "v12" / "older.sqlite", older_rows)
    store = LocalStore(root / "store")
    put_bytes(store, "ky_court.sqlite", older.read_bytes())
    put_bytes(store, ARCHIVE, legacy_archive(root / "v12" / "a.tar.gz", newer, files=files).read_bytes())
    for document in roles["extracted"] + roles["no_text"]:
        put_bytes(store, f"pdf_by_hash/{sha256(pdf[document.document_id])}.pdf", pdf[document.document_id])
    for document in roles["extracted"]:
        put_bytes(store, f"text/{sha256(pdf[document.document_id])}.txt", b"the text v1.2 extracted\n")
    for data in withdrawn_pdfs:
        put_bytes(store, f"pdf_by_hash/{sha256(data)}.pdf", data)
        put_bytes(store, f"text/{sha256(data)}.txt", b"a withdrawn opinion's text\n")
    return {"roles": roles, "withdrawn": dict(zip(withdrawn, withdrawn_pdfs)), "older": older.read_bytes(),
            "archive": (root / "store" / ARCHIVE).read_bytes()}


@pytest.fixture(scope="module")
def crawls(tmp_path_factory):
    clean_root = tmp_path_factory.mktemp("clean")
    with make_court() as court:
        clean_cfg = load_config(pipeline_env(court, clean_root))
        run_all(clean_cfg)
        clean = end_state(clean_cfg)
    legacy_root = tmp_path_factory.mktemp("legacy")
    other = SimCourt(20, seed=99, faults=False, first_year=2020, last_year=2026)
    withdrawn_pdfs = [other.pdf_bytes(d.document_id) for d in other.documents[:3]]
    with make_court() as court:
        v12 = build_v12_store(court, legacy_root, withdrawn_pdfs)
        legacy_cfg = load_config(pipeline_env(court, legacy_root))
        reports, status = run_all(legacy_cfg)
        reports.append(run_pipeline(legacy_cfg, handle_signals=False))     # one more: nothing to adopt
        requests = {d.document_id: court.requests_for(d.document_id) for d in court.documents}
    return {"clean": clean, "reports": reports, "status": status, "legacy": end_state(legacy_cfg),
            "cfg": legacy_cfg, "v12": v12, "requests": requests, "root": legacy_root}


def test_run_all_over_a_v12_store_ends_as_a_clean_crawl_plus_the_withdrawn_documents(crawls):
    assert crawls["reports"][-1].exit_status == 0, crawls["reports"][-1].summary()
    assert crawls["status"]["done"]
    withdrawn = {document_id: ("extracted", sha256(data)) for document_id, data in crawls["v12"]["withdrawn"].items()}
    assert crawls["legacy"] == {**crawls["clean"], **withdrawn}


def test_nothing_the_legacy_state_holds_is_asked_of_the_court_again(crawls):
    roles = crawls["v12"]["roles"]
    held = roles["extracted"] + roles["backup"] + roles["unknown"] + roles["no_text"]
    assert {d.document_id: crawls["requests"][d.document_id] for d in held} == {d.document_id: 0 for d in held}
    assert all(crawls["requests"][d.document_id] >= 1 for d in roles["nowhere"])


def test_the_first_run_says_once_what_adoption_brought(crawls):
    first, *later = crawls["reports"]
    summary = first.summary()
    assert summary.count("v1.2 archive adopted") == 1, summary
    assert "rows only ky_court.sqlite held merged in" in summary
    assert "1 rows back to the download queue" in summary and "1 to extract again" in summary
    assert all("adopt" not in report.stages for report in later)
    adoption = crawls["status"]["legacy_adoption"]
    assert adoption["state"] == "done" and adoption["requeued"] == 1
    assert adoption["ids"].get("unlisted") == 3


def test_the_originals_are_kept_and_the_legacy_archive_untouched(crawls):
    store = crawls["root"] / "store"
    older = crawls["v12"]["older"]
    assert (store / legacy_original_name(sha256(older))).read_bytes() == older
    assert (store / ARCHIVE).read_bytes() == crawls["v12"]["archive"]
