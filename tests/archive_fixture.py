"""A small extracted archive built straight into a workspace (no court, no PDFs parsed): the
query layer's fixture. Each document gets a PDF-like file and a text named by its sha256."""
from __future__ import annotations

import hashlib
from pathlib import Path

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c06_layout import (DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME, pdf_store_name,
                                               text_store_name)
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore

COURT_NAMES = {"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"}

# (case number, title, description, filed date, text)
DOCUMENTS = (
    ("2019-CA-0012", "SMITH VS. COMMONWEALTH", "OPINION AFFIRMING", "2019-05-02T00:00:00.000-04:00",
     "The suppression hearing found the search warrant valid.\nWe affirm the circuit court."),
    ("2019-CA-0012", "SMITH VS. COMMONWEALTH", "ORDER DENYING REHEARING", "2019-07-11T00:00:00.000-04:00",
     "The petition for rehearing is denied."),
    ("2020-SC-0101", "JONES VS. KENTUCKY BAR ASSOCIATION", "OPINION AND ORDER", "2020-03-09T00:00:00.000-04:00",
     "Attorney discipline: the respondent is suspended for thirty days.\n\"Quoted\", with commas; and lines."),
    ("2021-SC-0007", "BROWN VS. COMMONWEALTH", "OPINION REVERSING AND REMANDING", "2021-11-30T00:00:00.000-05:00",
     "Ineffective assistance of counsel at the suppression stage requires a new trial. Suppression suppression."),
    ("2021-CA-0450", "WARRANT HOLDINGS VS. CITY OF LOUISVILLE", "OPINION AFFIRMING", "2021-02-01T00:00:00.000-05:00",
     "A zoning dispute about a warrant of title; nothing about criminal law."),
)


def document_id(number: int) -> str:
    return hashlib.sha256(f"fixture-document-{number}".encode()).hexdigest()


def pdf_bytes(number: int, revision: int = 0) -> bytes:
    return f"%PDF-1.4 fixture document {number} revision {revision}\n%%EOF\n".encode()


def make_config(root: Path, **extra):
    env = {"KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"), "KY_PACING": "0",
           "KY_PROGRESS": "0"}
    env.update(extra)
    return load_config(env)


def build_archive(root: Path, documents=DOCUMENTS, *, upload: bool = True, extracted: int | None = None):
    """Writes the workspace database, PDFs and texts (and the store's copies); returns the config.
    The first `extracted` documents are extracted (all by default), the rest only downloaded."""
    cfg = make_config(root)
    workspace = Path(cfg.WORKSPACE)
    for folder in ("pdf_by_hash", "text", "tmp", "checkpoint"):
        (workspace / folder).mkdir(parents=True, exist_ok=True)
    store = LocalStore(cfg.STORE)
    db = Database.open(workspace / DB_FILENAME)
    try:
        rows = []
        for number, (case_number, title, description, filed, _) in enumerate(documents):
            rows.append({"document_id": document_id(number), "case_number": case_number,
                         "court": COURT_NAMES[case_number[5:7]], "case_title": title,
                         "docket_entry_id": hashlib.sha256(f"entry-{number}".encode()).hexdigest(),
                         "description": description, "filed_date": filed,
                         "case_id": hashlib.sha256(case_number.encode()).hexdigest(),
                         "document_name": f"{case_number} {number}.pdf", "shard": case_number[:7]})
        DiscoveryState(db).upsert_discovered(rows)
        for number, (_, _, _, _, text) in enumerate(documents):
            add_text(cfg, db, store if upload else None, number, text, extract=extracted is None or number < extracted)
    finally:
        db.close()
    return cfg


def add_text(cfg, db: Database, store, number: int, text: str, *, revision: int = 0, extract: bool = True) -> str:
    """Downloads (and extracts) document `number` with these PDF bytes and text; returns the sha256."""
    workspace = Path(cfg.WORKSPACE)
    data = pdf_bytes(number, revision)
    sha = hashlib.sha256(data).hexdigest()
    (workspace / pdf_store_name(sha)).write_bytes(data)
    (workspace / text_store_name(sha)).write_text(text, encoding="utf-8")
    if store is not None:
        store.upload_file(pdf_store_name(sha), workspace / pdf_store_name(sha))
        store.upload_file(text_store_name(sha), workspace / text_store_name(sha))
    doc = document_id(number)
    with db.transaction():
        db.conn.execute("UPDATE documents SET status = 'discovered' WHERE document_id = ?", (doc,))
    DownloadRecords(db).mark_downloaded(doc, sha256=sha, size_bytes=len(data), local_pdf=pdf_store_name(sha))
    if extract:
        TextRecords(db).record_extracted([{"document_id": doc, "sha256": sha, "attempt": 1, "engine": "pypdf", "pages": 1,
                              "chars": len(text), "seconds": 0.01, "likely_scanned": False}])
    return sha


def write_earlier_search_tar(folder: Path, target: Path) -> Path:
    """The one-file copy of `folder`'s search index that earlier versions kept in the store
    (`ky_search.tar`): a consistent copy of the catalog, the commit's files and meta.json."""
    import tarfile
    import tempfile

    from notebook_builder.cells.c18_search_index import copy_search_index
    with tempfile.TemporaryDirectory() as temp:
        copy_search_index(folder, temp)
        with tarfile.open(target, "w") as tar:
            tar.add(Path(temp) / SEARCH_DB_FILENAME, arcname=SEARCH_DB_FILENAME)
            for path in sorted((Path(temp) / SEARCH_INDEX_DIRNAME).iterdir()):
                tar.add(path, arcname=f"{SEARCH_INDEX_DIRNAME}/{path.name}")
    return target
