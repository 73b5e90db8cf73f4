"""OCR: pages that show an image and have no text layer are turned upright, recognised and merged into
the document's text, which search, derive, show and export then read."""
from __future__ import annotations

import hashlib
import io
import os
import signal
import time

import pypdf
import pytest
from legacy_fixture import write_legacy_database
from support import put_bytes

from notebook_builder.cells import c85_ocr
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c38_legacy import adopt, describe_adoption
from notebook_builder.cells.c60_backfill import backfill
from notebook_builder.cells.c78_page_text import text_agreement
from notebook_builder.cells.c79_extract_engines import EXTRACT_ENGINE_FUNCTIONS
from notebook_builder.cells.c80_extract import extract
from notebook_builder.cells.c85_ocr import (hocr_confidence, hocr_orientation, merge_ocr_text, ocr,
                                            ocr_engine_available, render_page)
from notebook_builder.cells.c86_derive import derive
from notebook_builder.cells.c87_index import index, search_archive
from notebook_builder.query import export_records, show_document
from notebook_builder.simcourt import pdfs

CREATED = "20240101000000Z"


def opinion(number: int) -> bytes:
    return pdfs.opinion_pdf(seed=number, case_number=f"2021-SC-{number:06d}", court="Supreme Court",
                            title=f"Appellant {number} v. Commonwealth", description="Opinion",
                            filed="2021-05-01", creation_date=CREATED)


def scanned(data: bytes, tmp_path, dpi: int = 150, upside_down: tuple[int, ...] = ()) -> tuple[bytes, list[str]]:
    """`data` printed and scanned: each page an image only (Pillow's PDF writer), the pages numbered
    in `upside_down` (1-based) turned over, and the true texts."""
    source = tmp_path / "source.pdf"
    source.write_bytes(data)
    truths = [entry[0] for entry in EXTRACT_ENGINE_FUNCTIONS["pypdfium2"](str(source))]
    images = [render_page(str(source), index, dpi).convert("L") for index in range(len(truths))]
    images = [image.rotate(180) if number in upside_down else image for number, image in enumerate(images, 1)]
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
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": document_id}])
    DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    return sha


def needs_engine(cfg):
    missing = ocr_engine_available(cfg.OCR_ENGINE)
    if missing:
        pytest.skip(f"OCR engine not installed here: {missing} (.ci/run installs it)")


def test_the_rotation_is_the_textangle_most_lines_carry():
    line = "<span class='ocr_line' id='line_1_{n}' title=\"bbox 1 2 3 4; baseline 0 0;{angle} x_size 30\">"
    upside_down = "".join(line.format(n=n, angle=" textangle 180;") for n in range(5))
    assert hocr_orientation(upside_down + line.format(n=9, angle="")) == (180, 6)
    assert hocr_orientation("".join(line.format(n=n, angle="") for n in range(3))) == (0, 3)   # upright
    assert hocr_orientation("<div class='ocr_page' title='bbox 0 0 10 10'></div>") == (None, 0)  # nothing read


def test_the_confidence_is_the_mean_of_the_words_tesseract_read():
    word = "<span class='ocrx_word' id='word_1_{n}' title='bbox 1 2 3 4; x_wconf {conf}'>w</span>"
    assert hocr_confidence("".join(word.format(n=n, conf=conf) for n, conf in enumerate((96, 90, 0)))) == 62.0
    assert hocr_confidence("<div class='ocr_page' title='bbox 0 0 10 10'></div>") == 0.0


def test_merge_replaces_only_the_recognised_pages():
    assert merge_ocr_text("one\f\ftwo", 3, {2: " scanned \n"}) == "one\fscanned\ftwo"
    assert merge_ocr_text("", 2, {1: "a", 2: "b"}) == "a\fb"       # no text layer at all
    assert merge_ocr_text("one", 2, {2: "b"}) == "one\fb"


def test_merge_keeps_a_text_not_split_into_the_pdfs_pages_whole_before_the_recognised_pages():
    # An older version's text: which page a character came from is unknown, so none is dropped.
    assert merge_ocr_text("FILED stamp", 2, {2: "b", 1: "a"}) == "FILED stamp\fa\fb"
    assert merge_ocr_text("one\ftwo\fthree", 2, {1: "a"}) == "one\ftwo\fthree\fa"


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
    healed = verify(ctx)                                        # the workspace's copy is put back
    assert healed.passed and healed.fixity.healed == [f"text/{sha}.ocr.txt (from the workspace)"]
    (ctx.store.root / "text" / f"{sha}.ocr.txt").unlink()     # lost again, and the workspace's too
    (ctx.workspace / "text" / f"{sha}.ocr.txt").unlink()
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

    def engine(image, timeout, orientation):    # dies on the one-page PDF's page, reads the others
        if image.info.get("pdf") == hashlib.sha256(first).hexdigest():
            os.kill(os.getpid(), signal.SIGSEGV)
        return "recognised words", 0
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


# ------------------------------------------- a scanned opinion, found by search, derived, shown

# Words only the scans carry: the upright first page's, the upside-down second page's, the mixed
# document's scanned page's; and one word of the mixed document's text layer.
UPRIGHT_WORDS = ("marzipan", "quillwort", "halcyon", "oxbow", "zephyrine")
UPSIDE_DOWN_WORDS = ("porcelain", "lighthouse", "saxophone", "windmill", "buttercup")
MIXED_SCAN_WORDS = ("gondola", "pinwheel", "tamarind")
SCANNED_OPINION = [
    ["RENDERED: MARCH 8, 2024", "TO BE PUBLISHED", "Supreme Court of Kentucky", "2023-SC-0123-MR", "",
     "JANE ZEPHYRINE                                APPELLANT", "",
     "ON APPEAL FROM OXBOW CIRCUIT COURT", "V.            HONORABLE A. QUILLWORT, JUDGE", "NO. 21-CR-00077", "",
     "COMMONWEALTH OF KENTUCKY                      APPELLEE", "",
     "OPINION OF THE COURT BY JUSTICE MARZIPAN", "AFFIRMING", "",
     "The appellant argues that the halcyon days of the trial were unfair to her.",
     "We have read the record of the trial court and find no error in it."],
    ["The second page of the opinion was scanned upside down by the clerk.",
     "It speaks of a porcelain cup, a lighthouse keeper and a saxophone player,",
     "of a windmill on the hill and a buttercup in the field behind the courthouse.",
     "For these reasons the judgment of the trial court is affirmed."],
]


def scanned_opinion(tmp_path) -> bytes:
    data, _ = scanned(pdfs.text_pdf(SCANNED_OPINION, creation_date=CREATED), tmp_path, dpi=200, upside_down=(2,))
    return data


def mixed_filing(tmp_path) -> bytes:
    """A brief whose first page has a text layer and whose exhibit is a scan."""
    text_page = pdfs.text_pdf([["BRIEF FOR THE APPELLANT", "The tangerine orchard was sold in 2019."]],
                              creation_date=CREATED)
    exhibit, _ = scanned(pdfs.text_pdf([["EXHIBIT A", "A gondola, a pinwheel and a tamarind tree were",
                                         "listed in the inventory of the estate."]], creation_date=CREATED),
                         tmp_path, dpi=200)
    return concatenated(text_page, exhibit)


def found(ctx, word: str) -> list[str]:
    return [hit["document_id"] for hit in search_archive(ctx.workspace, word).hits]


def test_a_scanned_opinion_is_searched_derived_shown_and_exported_from_its_ocr_text(ctx, tmp_path):
    needs_engine(ctx.cfg)
    sha = add_document(ctx, "opinion", scanned_opinion(tmp_path))
    ctx.db.conn.execute("UPDATE documents SET case_number = '2023-SC-0123', description = 'OPINION' "
                        "WHERE document_id = 'opinion'")
    add_document(ctx, "mixed", mixed_filing(tmp_path))
    extract(ctx)
    derive(ctx)
    index(ctx)
    # Before OCR: the text layer is empty; nothing the scans say is found, nothing derived from them.
    assert all(found(ctx, word) == [] for word in UPRIGHT_WORDS + MIXED_SCAN_WORDS)
    assert found(ctx, "tangerine") == ["mixed"]
    assert DerivedRecords(ctx.db).derived("opinion")["rendered_date"] is None

    result = ocr(ctx)

    assert (result.pdfs, result.pages, result.failed_pages, result.rotated_pages) == (2, 3, 0, 1)
    assert result.orientation == "detected"
    rotations = dict(ctx.db.conn.execute("SELECT page, rotation FROM pages WHERE sha256 = ?", (sha,)).fetchall())
    assert rotations == {1: 0, 2: 180}
    assert ctx.db.get_document("opinion")["text_source"] == "ocr"
    derived = derive(ctx)
    assert derived.derived == 2          # both read again: their best text changed
    row = DerivedRecords(ctx.db).derived("opinion")
    assert (row["rendered_date"], row["publication_status"], row["text_source"]) == ("2024-03-08", "published", "ocr")
    assert row["judge"] == "MARZIPAN"
    indexed = index(ctx)
    assert indexed.indexed == 2
    for word in UPRIGHT_WORDS + UPSIDE_DOWN_WORDS:
        assert found(ctx, word) == ["opinion"], word
    for word in MIXED_SCAN_WORDS + ("tangerine",):
        assert found(ctx, word) == ["mixed"], word
    assert "[lighthouse]" in search_archive(ctx.workspace, "lighthouse").hits[0]["snippet"]
    assert (index(ctx).indexed, derive(ctx).derived) == (0, 0)      # level

    shown = show_document(ctx.cfg, "opinion", store=ctx.store)["documents"][0]
    assert shown["text_source"] == "ocr" and shown["text_preview"].startswith("RENDERED: MARCH 8, 2024")
    assert shown["files"]["best text"]["name"] == f"text/{sha}.ocr.txt" and shown["index"]["current"]
    exported = {record["document_id"]: record for record in export_records(ctx.cfg, store=ctx.store)}
    assert exported["opinion"]["text_source"] == "ocr" and "saxophone" in exported["opinion"]["text"]
    assert "tangerine" in exported["mixed"]["text"] and "gondola" in exported["mixed"]["text"].lower()


# ------------------------------------------------------------------- bad pages, long scans


def fake_engine(read):
    """An OCR engine for the stage's forked workers: read(page number) -> text, or it raises/dies."""
    def engine(image, timeout, orientation):
        return read(image.info["page"]), 0
    return engine


@pytest.fixture
def quick_pages(monkeypatch):
    """The stage with an installed engine that `engine_reads` decides, over pages rendered tiny."""
    monkeypatch.setattr(c85_ocr, "ocr_engine_available", lambda engine: None)
    original = c85_ocr.render_page

    def render(pdf_path, index, dpi):
        image = original(pdf_path, index, 10)
        image.info["page"] = index + 1
        return image
    monkeypatch.setattr(c85_ocr, "render_page", render)

    def engine_reads(read):
        monkeypatch.setitem(c85_ocr.OCR_ENGINES, "tesseract", fake_engine(read))
    return engine_reads


def blank_scan(pages: int) -> bytes:
    """`pages` image-only pages (small grey scans, no text layer)."""
    return concatenated(*[pdfs.image_only_pdf(seed=number, creation_date=CREATED) for number in range(pages)])


def test_a_page_that_cannot_be_read_is_counted_and_the_rest_of_the_document_goes_on(ctx, quick_pages):
    def read(page):
        if page == 2:
            raise RuntimeError("Tesseract process timeout")    # what pytesseract raises past the limit
        if page == 4:
            os.kill(os.getpid(), signal.SIGSEGV)               # Tesseract's worker dies on this one
        return f"words of page {page}"
    quick_pages(read)
    sha = add_document(ctx, "long", blank_scan(5))
    extract(ctx)

    result = ocr(ctx)

    assert (result.pdfs, result.pages, result.failed_pages, result.failed) == (1, 3, 2, 0)
    assert any("page 2: over the OCR time limit" in error for error in result.errors)
    assert any("page 4: the OCR worker died" in error for error in result.errors)
    merged = (ctx.workspace / "text" / f"{sha}.ocr.txt").read_text().split("\f")
    assert merged == ["words of page 1", "", "words of page 3", "", "words of page 5"]
    chars = dict(ctx.db.conn.execute("SELECT page, ocr_chars FROM pages WHERE sha256 = ?", (sha,)).fetchall())
    assert chars == {1: 15, 2: None, 3: 15, 4: None, 5: 15}
    assert (ctx.db.get_document("long")["extracted_by_ocr"], ctx.db.get_document("long")["ocr_pages"]) == (1, 3)


def test_a_page_whose_worker_hangs_is_counted_and_the_rest_goes_on(ctx, quick_pages):
    def read(page):
        if page == 1:
            time.sleep(3600)       # a page pdfium or Tesseract never finishes
        return f"words of page {page}"
    quick_pages(read)
    ctx.cfg = ctx.cfg.replace(EXTRACT_TIMEOUT=0.5)
    sha = add_document(ctx, "stuck", blank_scan(2))
    extract(ctx)
    result = ocr(ctx)
    assert (result.pages, result.failed_pages) == (1, 1) and "no answer within" in result.errors[0]
    assert (ctx.workspace / "text" / f"{sha}.ocr.txt").read_text() == "\fwords of page 2"


def test_a_blank_scan_is_read_as_nothing_and_counted(ctx):
    needs_engine(ctx.cfg)
    data, _ = scanned(pdfs.blank_pdf(seed=1, creation_date=CREATED), ctx.workspace, dpi=100)
    pages = len(pypdf.PdfReader(io.BytesIO(data)).pages)
    sha = add_document(ctx, "blank", data)
    extract(ctx)
    assert ctx.db.get_document("blank")["pages_needing_ocr"] == pages
    result = ocr(ctx)
    assert (result.pages, result.blank_pages, result.failed_pages, result.failed) == (pages, pages, 0, 0)
    rotations = [row[0] for row in ctx.db.conn.execute("SELECT rotation FROM pages WHERE sha256 = ?", (sha,))]
    assert rotations == [None] * pages          # nothing to tell the orientation by
    assert ctx.db.get_document("blank")["text_source"] == "ocr"


def test_a_long_scan_stopped_by_the_budget_goes_on_from_its_last_page_next_run(ctx, quick_pages, monkeypatch):
    cache = None

    def read(page):
        if cache is not None and (cache / f"{page}.json").exists():
            return "READ TWICE"
        return f"page {page}"
    quick_pages(read)
    sha = add_document(ctx, "long", blank_scan(300))
    extract(ctx)
    cache = ctx.workspace / "tmp" / "ocr" / sha
    # The session's budget ends a third of the way through the scan.
    monkeypatch.setattr(ctx.clock, "should_stop", lambda: len(list(cache.glob("*.json"))) >= 100)

    stopped = ocr(ctx)

    assert stopped.stopped and stopped.pages == 0 and stopped.failed_pages == 0
    assert ctx.db.get_document("long")["extracted_by_ocr"] is None           # still queued
    read_before = len(list(cache.glob("*.json")))
    assert 100 <= read_before < 300
    monkeypatch.setattr(ctx.clock, "should_stop", lambda: False)
    finished = ocr(ctx)
    assert (finished.pdfs, finished.pages, finished.failed_pages) == (1, 300, 0)
    merged = (ctx.workspace / "text" / f"{sha}.ocr.txt").read_text().split("\f")
    assert merged == [f"page {number}" for number in range(1, 301)]        # none read twice
    assert not cache.exists() and ctx.db.get_document("long")["ocr_pages"] == 300


# ------------------------------------------------------------------- a scan adopted from v1.2


def test_a_scan_v12_extracted_with_no_text_is_recognised_and_found_after_adoption(make_context, quick_pages):
    """v1.2 had no OCR: its scans are `extracted` rows with 0 characters. Adopted, they are read as
    any scan this pipeline downloads is: extracted again (pages measured), recognised, found."""
    quick_pages(lambda page: f"marzipan gondola page {page}")
    data = blank_scan(2)
    sha = hashlib.sha256(data).hexdigest()
    ctx = make_context(name="ws", database=False, env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})
    write_legacy_database(ctx.db_path, [{
        "document_id": "scan", "case_number": "2019-SC-000123", "court": "Supreme Court", "status": "extracted",
        "sha256": sha, "size_bytes": len(data), "local_pdf": f"/content/ky_court_workspace/pdf_by_hash/{sha}.pdf",
        "pages": 2, "extracted_chars": 0, "likely_scanned": 1, "extract_attempts": 1,
        "updated_at": "2024-03-01T00:00:00Z"}])
    store = LocalStore(ctx.cfg.STORE)
    put_bytes(store, f"pdf_by_hash/{sha}.pdf", data)
    put_bytes(store, f"text/{sha}.txt", b"")                   # what v1.2 extracted from the scan
    adopt(ctx, lambda ctx: backfill(ctx, force=True))
    extract(ctx)
    result = ocr(ctx)
    index(ctx)
    assert (result.pdfs, result.pages) == (1, 2)
    assert found(ctx, "marzipan") == ["scan"]
    assert ctx.db.get_document("scan")["text_source"] == "ocr"
    assert store.read_file(f"text/{sha}.txt") == b""         # the store's text is still v1.2's bytes
    assert (ctx.workspace / "text" / f"{sha}.txt").read_bytes() == b""


def test_a_scan_v12_read_a_stamp_from_has_its_scanned_pages_recognised_once_and_its_text_kept(
        make_context, quick_pages):
    """v1.2 recorded some scans `likely_scanned` with the few characters it read (a clerk's stamp, a
    junk text layer) and no page measures. Adopted, their pages are measured and the scanned ones
    recognised, once; v1.2's text stays byte for byte in the workspace and the store, and what it
    read is found as well as what OCR read."""
    quick_pages(lambda page: f"marzipan gondola page {page}")
    data = blank_scan(2)
    sha = hashlib.sha256(data).hexdigest()
    stamp = b"FILED MAR 01 2024 SUSAN QUILLWORT CLERK"      # v1.2's text: no page breaks of its own
    ctx = make_context(name="ws", database=False, env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})
    write_legacy_database(ctx.db_path, [{
        "document_id": "scan", "case_number": "2019-SC-000124", "court": "Supreme Court", "status": "extracted",
        "sha256": sha, "size_bytes": len(data), "local_pdf": f"/content/ky_court_workspace/pdf_by_hash/{sha}.pdf",
        "pages": 2, "extracted_chars": len(stamp), "likely_scanned": 1, "extract_attempts": 1,
        "updated_at": "2024-03-01T00:00:00Z"}])
    store = LocalStore(ctx.cfg.STORE)
    put_bytes(store, f"pdf_by_hash/{sha}.pdf", data)
    put_bytes(store, f"text/{sha}.txt", stamp)
    adopted = adopt(ctx, lambda ctx: backfill(ctx, force=True))
    extract(ctx)
    result = ocr(ctx)
    derive(ctx)
    index(ctx)
    assert (result.pdfs, result.pages) == (1, 2)
    assert found(ctx, "marzipan") == ["scan"] and found(ctx, "quillwort") == ["scan"]
    row = ctx.db.get_document("scan")
    assert (row["text_source"], row["pages_needing_ocr"], row["extracted_chars"]) == ("ocr", 2, len(stamp))
    assert store.read_file(f"text/{sha}.txt") == stamp and (ctx.workspace / "text" / f"{sha}.txt").read_bytes() == stamp
    assert adopted.rescanned == 1 and adopted.record["rescanned"] == 1
    assert "1 of them scans whose pages are measured again for OCR" in describe_adoption(adopted)
    assert (extract(ctx).extracted, ocr(ctx).pdfs) == (0, 0)        # once


def test_extracting_a_v12_scan_again_keeps_the_text_v12_read_under_its_name(make_context, quick_pages):
    """v1.2 read no text from a scan whose first page carries a stamp this pipeline's engines read.
    Its pages are measured again, but text/<sha256>.txt keeps v1.2's bytes, in the workspace as in
    the store (one name, one text), the extraction's figures are that text's, and the page whose
    text it lacks is recognised with the scanned one."""
    quick_pages(lambda page: f"marzipan gondola page {page}")
    data = concatenated(pdfs.text_pdf([["FILED MARCH 1 2024 BY THE CLERK OF THE COURT"]], creation_date=CREATED),
                        pdfs.image_only_pdf(seed=7, creation_date=CREATED))
    sha = hashlib.sha256(data).hexdigest()
    ctx = make_context(name="ws", database=False, env={"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"})
    write_legacy_database(ctx.db_path, [{
        "document_id": "scan", "status": "extracted", "sha256": sha, "size_bytes": len(data),
        "local_pdf": f"/content/ky_court_workspace/pdf_by_hash/{sha}.pdf", "pages": 2, "extracted_chars": 0,
        "likely_scanned": 1, "extract_attempts": 1, "updated_at": "2024-03-01T00:00:00Z"}])
    store = LocalStore(ctx.cfg.STORE)
    put_bytes(store, f"pdf_by_hash/{sha}.pdf", data)
    put_bytes(store, f"text/{sha}.txt", b"")
    adopt(ctx, lambda ctx: backfill(ctx, force=True))
    assert extract(ctx).extracted == 1
    assert (ctx.workspace / "text" / f"{sha}.txt").read_bytes() == b"" == store.read_file(f"text/{sha}.txt")
    row = ctx.db.get_document("scan")
    # The stamp v1.2's text lacks is recognised with the scanned page: OCR finds what the kept text lacks.
    assert (row["status"], row["extracted_chars"], row["pages_needing_ocr"]) == ("extracted", 0, 2)
    assert ocr(ctx).pages == 2
    assert (ctx.workspace / "text" / f"{sha}.ocr.txt").read_text() == "marzipan gondola page 1\fmarzipan gondola page 2"


def test_a_one_line_page_scanned_upside_down_is_read_the_right_way_up(make_context, tmp_path):
    # Read upside down, a line of plain words can give as many word-like tokens as read upright
    # ("*pajou diam ejopuocb euvebue} ey"): Tesseract's own confidence tells the two readings apart.
    ctx = make_context(name="ws", replace={"WORKERS": 2, "OCR_DPI": 300})
    needs_engine(ctx.cfg)
    lines = {"stamp": "The tangerine gondola were noted.", "last": "The judgment is affirmed."}
    shas = {}
    for (document_id, line), dpi in zip(lines.items(), (200, 300)):
        data, _ = scanned(pdfs.text_pdf([[line]], creation_date=CREATED), tmp_path, dpi=dpi, upside_down=(1,))
        shas[document_id] = add_document(ctx, document_id, data)
    extract(ctx)
    ocr(ctx)
    index(ctx)
    assert (found(ctx, "tangerine"), found(ctx, "judgment")) == (["stamp"], ["last"])
    assert [ctx.db.conn.execute("SELECT rotation FROM pages WHERE sha256 = ?", (sha,)).fetchone()[0]
            for sha in shas.values()] == [180, 180]
