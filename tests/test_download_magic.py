"""Download accepts what PDF readers accept: `%PDF-` anywhere in the first 1024 bytes; other bodies stay transient."""
from __future__ import annotations

import hashlib

import responses
from support import RecordingClock

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c30_client import CourtClient
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c70_download import PDF_MAGIC_WINDOW, download, is_pdf_head
from notebook_builder.simcourt.pdfs import opinion_pdf

BASE = "https://court.test/api/api/v1"

PDF = opinion_pdf(seed=7, case_number="2021-SC-000007", court="Supreme Court", title="A v. B",
                  description="Opinion", filed="2021-05-01", creation_date="20240101000000Z")
BODIES = {
    "crlf": b"\r\n" + PDF,                                   # a stray line break before the header
    "eof": b"%%EOF\r\n" + PDF,                               # the tail of an earlier file glued in front
    "junk": bytes(range(256)) * 3 + PDF,                     # 768 bytes of anything, then the header
    "plain": PDF,
    "html": b"<!DOCTYPE html><html><body>Maintenance</body></html>",
    "json": b'{"error": "document unavailable", "pad": "' + b"x" * 2000 + b'"}',
    "late": b" " * PDF_MAGIC_WINDOW + PDF,                   # the magic only after the window: not a PDF
}


def test_the_magic_counts_anywhere_in_the_first_1024_bytes():
    assert is_pdf_head(b"%PDF-1.7") and is_pdf_head(b"\r\n%PDF-1.4") and is_pdf_head(b"%%EOF\r\n%PDF-1.4")
    assert is_pdf_head(b"x" * (PDF_MAGIC_WINDOW - 5) + b"%PDF-")
    assert not is_pdf_head(b"x" * (PDF_MAGIC_WINDOW - 4) + b"%PDF-")
    assert not is_pdf_head(b"<html>") and not is_pdf_head(b"%PDF") and not is_pdf_head(b"")


@responses.activate
def test_readable_pdfs_with_bytes_before_the_header_are_stored_as_served(tmp_path):
    for document_id, body in BODIES.items():
        responses.add(responses.GET, f"{BASE}/publicaccessdocuments/{document_id}/download", body=body,
                      content_type="application/pdf", status=200)
    cfg = load_config(env={"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(tmp_path / "store"),
                           "KY_API_BASE": BASE, "KY_PACING": "0", "KY_BACKOFF_BASE": "0",
                           "KY_BACKOFF_CAP": "0", "KY_MAX_ATTEMPTS": "2", "KY_PROGRESS": "0"})
    ctx = open_context(cfg, clock=RecordingClock(), store=LocalStore(tmp_path / "store"))
    try:
        ctx.open_database()
        DiscoveryState(ctx.db).upsert_discovered([{"document_id": name, "case_number": "2021-SC-000007"} for name in BODIES])
        ctx.client = CourtClient(cfg, ctx.clock)
        download(ctx)
        for name in ("crlf", "eof", "junk", "plain"):
            row = ctx.db.get_document(name)
            sha = hashlib.sha256(BODIES[name]).hexdigest()
            assert (row["status"], row["attempts"], row["sha256"]) == ("downloaded", 1, sha), name
            assert ctx.store.read_file(f"pdf_by_hash/{sha}.pdf") == BODIES[name]
        for name in ("html", "json", "late"):
            row = ctx.db.get_document(name)
            # Transient: retried up to MAX_ATTEMPTS, never stored, the reason named.
            assert (row["status"], row["attempts"], row["http_status"]) == ("failed", 2, 200), name
            assert "not a PDF" in row["last_error"] and "first 1024 bytes" in row["last_error"]
        assert len(ctx.store.list_dir("pdf_by_hash")) == 4
    finally:
        ctx.close()
