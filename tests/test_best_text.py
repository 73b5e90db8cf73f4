"""The best text of a document, said once: which of its texts (text layer, OCR merge, the court's own)
search, derive, show, export and the court-text agreement read, and `documents.text_source`."""
from __future__ import annotations

import hashlib

import pytest
from support import put_bytes

from notebook_builder.cells.c06_layout import text_name
from notebook_builder.cells.c11_reads import text_source_inputs
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c21_fixity import FixityRecords, audit_fixity
from notebook_builder.cells.c80_extract import court_text_agreements
from notebook_builder.cells.c33_best_text import choose_text_source, empty_text_reason, record_text_sources
from notebook_builder.cells.c86_derive import derive
from notebook_builder.cells.c90_verify import referenced_store_names

GOOD = dict(extracted=True, layer_chars=5000, layer_quality=0.95, ocr_merged=False, ocr_chars=None,
            ocr_quality=None, court_chars=4800, min_quality=0.5)
COURT_TEXT = ("RENDERED: JUNE 1, 2023\nNOT TO BE PUBLISHED\nCommonwealth of Kentucky\nCourt of Appeals\n"
              "NO. 2022-CA-0001-MR\nThe court's own text of the opinion, word for word.")


def choose(**changes):
    return choose_text_source(**{**GOOD, **changes})


# ------------------------------------------------------------- the decision


def test_a_good_text_layer_is_the_best_text():
    assert choose() == "text_layer"
    assert choose(layer_quality=None) == "text_layer"          # too short to judge is not poor


def test_the_ocr_merge_is_the_best_text_where_ocr_gave_one():
    assert choose(layer_chars=0, ocr_merged=True, ocr_chars=3000, ocr_quality=0.9) == "ocr"
    # A mixed document: its text-layer pages are in the merge too.
    assert choose(ocr_merged=True, ocr_chars=800, ocr_quality=0.9) == "ocr"


def test_the_courts_text_replaces_ours_only_where_ours_is_empty_or_very_poor():
    assert choose(layer_chars=0) == "court_text"                                           # a scan, no OCR
    assert choose(layer_quality=0.2) == "court_text"                                       # junk text layer
    assert choose(layer_chars=0, ocr_merged=True, ocr_chars=0, ocr_quality=None) == "court_text"  # blank OCR
    assert choose(layer_chars=0, ocr_merged=True, ocr_chars=900, ocr_quality=0.3) == "court_text"
    assert choose(layer_chars=0, court_chars=None) == "text_layer"        # nothing better: ours, empty
    assert choose(layer_chars=0, court_chars=0) == "text_layer"
    assert choose(layer_quality=0.49, min_quality=0.4) == "text_layer"


def test_only_an_extracted_document_has_a_best_text():
    assert choose(extracted=False) is None


def test_each_source_names_its_file():
    assert text_name("text_layer", "ab", "cd") == "text/ab.txt"
    assert text_name("ocr", "ab", "cd") == "text/ab.ocr.txt"
    assert text_name("court_text", "ab", "cd") == "court_text/cd.txt"
    assert text_name(None, "ab", "cd") is None and text_name("court_text", "ab", None) is None


# ------------------------------------------------------- recorded, and read


@pytest.fixture
def ctx(make_context):
    return make_context(name="ws")


def add_extracted(ctx, document_id: str, layer: str, *, quality: float | None = None,
                  court: str | None = None) -> str:
    """A downloaded and extracted document with this text layer (and court text); returns its sha256."""
    pdf = f"%PDF-1.4 {document_id}\n%%EOF\n".encode()
    sha = hashlib.sha256(pdf).hexdigest()
    (ctx.workspace / f"pdf_by_hash/{sha}.pdf").write_bytes(pdf)
    (ctx.workspace / f"text/{sha}.txt").write_text(layer, encoding="utf-8")
    put_bytes(ctx.store, f"pdf_by_hash/{sha}.pdf", pdf)
    put_bytes(ctx.store, f"text/{sha}.txt", layer.encode())
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": document_id, "case_number": "2022-CA-0001",
                               "description": "OPINION AFFIRMING"}])
    DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(pdf), local_pdf=f"pdf_by_hash/{sha}.pdf")
    TextRecords(ctx.db).record_extracted([{"document_id": document_id, "sha256": sha, "attempt": 1, "engine": "pypdfium2",
                              "pages": 1, "chars": len(layer), "seconds": 0.0, "likely_scanned": not layer,
                              "quality": quality, "pages_needing_ocr": 0 if layer else 1}],
                            pages=[(sha, 1, len(layer), int(not layer), 1.0 if not layer else None, int(not layer),
                                    "pypdfium2", "good text")])
    if court is not None:
        court_sha = hashlib.sha256(court.encode()).hexdigest()
        (ctx.workspace / "court_text").mkdir(exist_ok=True)
        (ctx.workspace / f"court_text/{court_sha}.txt").write_text(court, encoding="utf-8")
        DiscoveryState(ctx.db).record_case_walk(None, {"case_id": "case-1"}, [], [], court_texts=[
            {"document_id": document_id, "sha256": court_sha, "pages": 1, "chars": len(court),
             "replacement_chars": 0}])
    return sha


def add_ocr(ctx, sha: str, text: str, quality: float | None) -> None:
    (ctx.workspace / f"text/{sha}.ocr.txt").write_text(text, encoding="utf-8")
    put_bytes(ctx.store, f"text/{sha}.ocr.txt", text.encode())
    TextRecords(ctx.db).record_ocr(sha, {1: (len(text), 0)}, quality=quality)


def sources(ctx) -> dict[str, str | None]:
    return dict(ctx.db.conn.execute("SELECT document_id, text_source FROM documents").fetchall())


def test_the_choice_is_recorded_where_it_changed_and_bumps_the_rows_update(ctx):
    add_extracted(ctx, "born-digital", "The opinion of the court, affirming the judgment. " * 20, quality=0.95)
    scan = add_extracted(ctx, "scan", "", court=COURT_TEXT)
    add_extracted(ctx, "junk", "x7 Qq#z ww1 " * 40, quality=0.1, court=COURT_TEXT)
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": "not-yet"}])
    assert record_text_sources(ctx.db, 0.5) == 3
    assert sources(ctx) == {"born-digital": "text_layer", "scan": "court_text", "junk": "court_text",
                            "not-yet": None}
    before = ctx.db.get_document("scan")["updated_at"]
    assert record_text_sources(ctx.db, 0.5) == 0                    # level: nothing written
    add_ocr(ctx, scan, "RENDERED: JUNE 1, 2023\nThe opinion as OCR read it from the scan. " * 5, quality=0.9)
    assert record_text_sources(ctx.db, 0.5, sha256=scan) == 1
    assert sources(ctx)["scan"] == "ocr" and ctx.db.get_document("scan")["updated_at"] >= before
    rows = {row["document_id"]: row for row in text_source_inputs(ctx.db.conn)}
    assert rows["scan"]["ocr_chars"] > 0 and rows["scan"]["ocr_quality"] == 0.9 and rows["scan"]["court_sha256"]


def test_derive_reads_the_courts_text_of_a_scan_and_again_the_ocr_text_once_there(ctx):
    scan = add_extracted(ctx, "scan", "", court=COURT_TEXT)
    derive(ctx)
    row = DerivedRecords(ctx.db).derived("scan")
    assert (row["text_source"], row["rendered_date"], row["publication_status"]) == (
        "court_text", "2023-06-01", "unpublished")
    assert row["text_sha256"] == hashlib.sha256(COURT_TEXT.encode()).hexdigest()
    ocr_text = ("RENDERED: JUNE 2, 2023\nTO BE PUBLISHED\nCommonwealth of Kentucky\nCourt of Appeals\n"
                "The opinion as OCR read it, with words enough to be judged a text of good quality. " * 3)
    add_ocr(ctx, scan, ocr_text, quality=0.95)
    assert derive(ctx).derived == 1
    row = DerivedRecords(ctx.db).derived("scan")
    assert (row["text_source"], row["rendered_date"], row["publication_status"]) == ("ocr", "2023-06-02", "published")
    assert derive(ctx).derived == 0


def test_the_court_text_agreement_compares_our_best_text_and_is_measured_again_after_ocr(ctx):
    scan = add_extracted(ctx, "scan", "", court=COURT_TEXT)
    assert court_text_agreements(ctx) == 1
    assert ctx.db.get_document("scan")["court_text_agreement"] == 0.0        # our empty layer, not theirs
    add_ocr(ctx, scan, COURT_TEXT, quality=0.9)                                 # OCR read it word for word
    assert ctx.db.get_document("scan")["court_text_agreement"] is None
    assert court_text_agreements(ctx) == 1
    assert ctx.db.get_document("scan")["court_text_agreement"] == 1.0


def test_the_audit_rehashes_the_ocr_text_derive_read(ctx):
    scan = add_extracted(ctx, "scan", "")
    add_ocr(ctx, scan, "The opinion as OCR read it from the scanned pages of the filing. " * 4, quality=0.9)
    derive(ctx)
    assert DerivedRecords(ctx.db).derived("scan")["text_source"] == "ocr"
    names = referenced_store_names(DownloadRecords(ctx.db).documents_claiming_files())[0]
    assert f"text/{scan}.ocr.txt" in names
    assert audit_fixity(ctx.db, ctx.store, ctx.workspace, names, read_all=True).found == []
    (ctx.store.root / f"text/{scan}.ocr.txt").write_bytes(b"other bytes")      # the store's copy rotted
    ctx.path(f"text/{scan}.ocr.txt").unlink()
    result = audit_fixity(ctx.db, ctx.store, ctx.workspace, names, read_all=True)
    [unhealed] = result.unhealed
    assert unhealed.startswith(f"text/{scan}.ocr.txt: 11 bytes where its ") and unhealed.endswith("no good copy "
                                                                                                    "in the workspace or the store")
    assert FixityRecords(ctx.db).load()[f"text/{scan}.ocr.txt"]["sha256"] == \
        DerivedRecords(ctx.db).derived("scan")["text_sha256"]
    manifest = dict((name, digest) for digest, name in DerivedRecords(ctx.db).manifest_rows())
    assert manifest[f"text/{scan}.ocr.txt"] == DerivedRecords(ctx.db).derived("scan")["text_sha256"]


def test_an_empty_text_says_why_in_words():
    def row(**values):
        base = {"status": "extracted", "pages": 3, "pages_needing_ocr": 0, "extracted_by_ocr": None, "ocr_pages": None}
        return {**base, **values}
    assert empty_text_reason(row(), "words") is None
    assert empty_text_reason(row(status="downloaded"), None) is None
    assert empty_text_reason(row(), None) == "its text file is in neither the workspace nor the store"
    assert empty_text_reason(row(), "\f\f") == "no text layer on its 3 pages, and no page is a scan"
    assert empty_text_reason(row(pages_needing_ocr=2, extracted_by_ocr=1, ocr_pages=2), " ") == (
        "blank scan: OCR found no text on its 2 scanned pages")
    assert empty_text_reason(row(pages_needing_ocr=1, extracted_by_ocr=0), "") == (
        "scanned, and OCR could read none of its 1 scanned page")
    assert empty_text_reason(row(pages_needing_ocr=2), "") == "2 scanned pages not recognised yet (the ocr phase reads them)"
