"""OCR: pages that show an image and have no text layer are recognised and merged into the document's text."""
from __future__ import annotations

import hashlib
import io

import pypdf
import pytest

from notebook_builder.cells.c80_extract import EXTRACT_ENGINE_FUNCTIONS, extract, text_agreement
from notebook_builder.cells.c85_ocr import merge_ocr_text, ocr, ocr_engine_available, render_page
from notebook_builder.simcourt import pdfs

from support import put_bytes

CREATED = "20240101000000Z"


def opinion(number: int) -> bytes:
    return pdfs.opinion_pdf(seed=number, case_number=f"2021-SC-{number:06d}", court="Supreme Court",
                            title=f"Appellant {number} v. Commonwealth", description="Opinion",
                            filed="2021-05-01", creation_date=CREATED)


def scanned(data: bytes, tmp_path, dpi: int = 150) -> tuple[bytes, list[str]]:
    """`data` printed and scanned: each page an image only (Pillow's PDF writer), and the true texts."""
    source = tmp_path / "source.pdf"
    source.write_bytes(data)
    truths = [entry[0] for entry in EXTRACT_ENGINE_FUNCTIONS["pypdfium2"](str(source))]
    images = [render_page(str(source), index, dpi).convert("L") for index in range(len(truths))]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out.getvalue(), truths


def concatenated(*parts: bytes) -> bytes:
    writer = pypdf.PdfWriter()
    for part in parts:
        writer.append(pypdf.PdfReader(io.BytesIO(part)))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture
def ctx(make_context):
    return make_context(name="ws", replace={"WORKERS": 2, "OCR_DPI": 200})


def add_document(ctx, document_id: str, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    name = f"pdf_by_hash/{sha}.pdf"
    (ctx.workspace / name).write_bytes(data)
    ctx.db.upsert_discovered([{"document_id": document_id}])
    ctx.db.mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    return sha


def needs_engine(cfg):
    missing = ocr_engine_available(cfg.OCR_ENGINE)
    if missing:
        pytest.skip(f"OCR engine not installed here: {missing} (.ci/run installs it)")


def test_merge_replaces_only_the_recognised_pages():
    assert merge_ocr_text("one\f\ftwo", 3, {2: " scanned \n"}) == "one\fscanned\ftwo"
    assert merge_ocr_text("", 2, {1: "a", 2: "b"}) == "a\fb"       # no text layer at all
    assert merge_ocr_text("one", 2, {2: "b"}) == "one\fb"


def test_the_stage_is_skipped_saying_why_when_its_engine_is_missing(ctx, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    result = ocr(ctx)
    assert result.skipped and "tesseract" in result.skipped and result.pages == 0


def test_an_image_only_pdf_is_recognised_and_its_text_merged(ctx, tmp_path):
    needs_engine(ctx.cfg)
    scan, truths = scanned(opinion(10), tmp_path)     # one page
    text_page = opinion(13)
    # A filing whose last pages are scans: the document-wide average would hide them.
    mixed = concatenated(text_page, scan)
    sha_scan = add_document(ctx, "scan", scan)
    sha_mixed = add_document(ctx, "mixed", mixed)
    add_document(ctx, "twin", scan)

    extract(ctx)
    pages_of_text = len(pypdf.PdfReader(io.BytesIO(text_page)).pages)
    for document_id, needing in (("scan", len(truths)), ("mixed", len(truths)), ("twin", len(truths))):
        document = ctx.db.get_document(document_id)
        assert (document["likely_scanned"], document["pages_needing_ocr"]) == (1, needing), document_id
    flags = [r[0] for r in ctx.db.conn.execute("SELECT needs_ocr FROM pages WHERE sha256 = ? ORDER BY page",
                                               (sha_mixed,))]
    assert flags == [0] * pages_of_text + [1] * len(truths)

    result = ocr(ctx)

    assert (result.pdfs, result.documents, result.failed) == (2, 3, 0)
    for document_id, sha in (("scan", sha_scan), ("mixed", sha_mixed), ("twin", sha_scan)):
        document = ctx.db.get_document(document_id)
        assert (document["extracted_by_ocr"], document["ocr_pages"]) == (1, len(truths))
        merged = (ctx.workspace / "text" / f"{sha}.ocr.txt").read_text()
        assert ctx.store.read_file(f"text/{sha}.ocr.txt") == merged.encode()
        assert (ctx.workspace / "text" / f"{sha}.txt").read_bytes() == ctx.store.read_file(f"text/{sha}.txt")
        recognised = merged.split("\f")[-len(truths):]
        for truth, page in zip(truths, recognised):
            assert text_agreement(truth, page) >= 0.8, (truth[:80], page[:80])
    layer = (ctx.workspace / "text" / f"{sha_mixed}.txt").read_text().split("\f")
    assert (ctx.workspace / "text" / f"{sha_mixed}.ocr.txt").read_text().split("\f")[:pages_of_text] == \
        layer[:pages_of_text]
    assert ocr(ctx).pages == 0     # done once


def test_verify_requires_the_ocr_text_in_the_store(ctx, tmp_path):
    needs_engine(ctx.cfg)
    from notebook_builder.cells.c90_verify import verify
    scan, _ = scanned(opinion(10), tmp_path)
    sha = add_document(ctx, "scan", scan)
    put_bytes(ctx.store, f"pdf_by_hash/{sha}.pdf", scan)     # downloaded: the store holds the PDF
    extract(ctx)
    ocr(ctx)
    assert verify(ctx).passed, verify(ctx).reasons
    (ctx.store.root / "text" / f"{sha}.ocr.txt").unlink()     # the store lost it
    result = verify(ctx)
    assert not result.passed and f"text/{sha}.ocr.txt" in result.missing_in_store


def test_an_ocr_worker_that_dies_fails_only_its_pdf(ctx, tmp_path, monkeypatch):
    import os
    import signal
    from notebook_builder.cells import c85_ocr
    first, _ = scanned(opinion(10), tmp_path)
    second = concatenated(first, first)     # other bytes, the same scan twice
    add_document(ctx, "first", first)
    sha_second = add_document(ctx, "second", second)
    extract(ctx)

    def engine(image, timeout):             # dies on the one-page PDF's page, reads the others
        if image.info.get("pdf") == hashlib.sha256(first).hexdigest():
            os.kill(os.getpid(), signal.SIGSEGV)
        return "recognised words"
    monkeypatch.setattr(c85_ocr, "ocr_engine_available", lambda engine: None)
    monkeypatch.setitem(c85_ocr.OCR_ENGINES, "tesseract", engine)
    original_render = c85_ocr.render_page

    def render(pdf_path, index, dpi):
        image = original_render(pdf_path, index, 30)
        image.info["pdf"] = os.path.basename(pdf_path)[:-4]
        return image
    monkeypatch.setattr(c85_ocr, "render_page", render)

    result = ocr(ctx)

    assert (result.failed, result.pdfs, result.pages) == (1, 1, 2)
    assert ctx.db.get_document("first")["extracted_by_ocr"] == 0          # tried, failed, left the queue
    assert (ctx.db.get_document("second")["extracted_by_ocr"], ctx.db.get_document("second")["ocr_pages"]) == (1, 2)
    assert (ctx.workspace / "text" / f"{sha_second}.ocr.txt").read_text() == "recognised words\frecognised words"
    assert ocr(ctx).pages == 0
