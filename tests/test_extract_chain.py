"""The engine chain: the next engine on a failure, a timeout, a crash or bad text; permanent verdicts named once."""
from __future__ import annotations

import hashlib
import io
import os
import signal
import time
import zlib

import pypdf
import pytest

from notebook_builder.cells import c78_page_text, c79_extract_engines, c80_extract
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c78_page_text import classify_extract_error, extraction_step, text_agreement, text_quality
from notebook_builder.cells.c80_extract import extract
from notebook_builder.simcourt import pdfs
from notebook_builder.simcourt.pdfs import _document

CREATED = "20240101000000Z"


def opinion(number: int) -> bytes:
    return pdfs.opinion_pdf(seed=number, case_number=f"2021-SC-{number:06d}", court="Supreme Court",
                            title=f"Appellant {number} v. Commonwealth", description="Opinion",
                            filed="2021-05-01", creation_date=CREATED)


def encrypted(data: bytes, user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def deflate_bomb(inflated_mib: int) -> bytes:
    """A zlib stream of `inflated_mib` MiB of spaces, about 1/1000 of that compressed, made without
    compressing it all: after a full flush every 1 MiB block compresses to the same bytes."""
    chunk = b" " * (1 << 20)
    compressor = zlib.compressobj(9)
    first = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush()[:-4]
    adler = 1
    for _ in range(inflated_mib):
        adler = zlib.adler32(chunk, adler)
    return first + again * (inflated_mib - 1) + tail + adler.to_bytes(4, "big")


def bomb_pdf(inflated_mib: int) -> bytes:
    """One page whose content stream inflates to `inflated_mib` MiB."""
    packed = deflate_bomb(inflated_mib)
    data = _document([b"BT ET"], CREATED)
    # Swap the page's small content stream for the bomb (object offsets are rebuilt by every reader).
    start = data.rindex(b"<< /Length")
    end = data.index(b"endstream", start) + len(b"endstream")
    return data[:start] + b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + \
        b"\nendstream" + data[end:]


@pytest.fixture
def make_ctx(make_context):
    def make(**knobs):
        return make_context(replace={"WORKERS": 2, "EXTRACT_TIMEOUT": 20.0, **knobs})
    return make


def add_document(ctx, document_id: str, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    name = f"pdf_by_hash/{sha}.pdf"
    (ctx.workspace / name).write_bytes(data)
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": document_id, "case_number": "2021-SC-000001"}])
    DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    return sha


def attempts(ctx, document_id):
    return [(r["attempt"], r["engine"], r["outcome"]) for r in ctx.db.conn.execute(
        "SELECT * FROM extraction_log WHERE document_id = ? ORDER BY log_id", (document_id,))]


def row(ctx, document_id):
    return ctx.db.get_document(document_id)


# ---------------------------------------------------------------- decisions


def test_good_text_is_kept_and_anything_else_tries_the_next_engine():
    engines = ("pypdfium2", "pypdf")
    assert extraction_step([("pypdfium2", "ok", 0.9)], engines, 0.5).action == "keep"
    assert extraction_step([("pypdfium2", "ok", None)], engines, 0.5).action == "keep"   # too short to judge
    for verdict in ("ok", "timeout", "crash", "unparseable", "encrypted", "error"):
        step = extraction_step([("pypdfium2", verdict, 0.1)], engines, 0.5)
        assert (step.action, step.engine) == ("next", "pypdf"), verdict


def test_with_no_engine_left_the_best_text_is_kept_else_the_failure_is_named():
    engines = ("pypdfium2", "pypdf")
    step = extraction_step([("pypdfium2", "ok", 0.3), ("pypdf", "ok", 0.1)], engines, 0.5)
    assert (step.action, step.index) == ("keep", 0)
    step = extraction_step([("pypdfium2", "unparseable", None), ("pypdf", "encrypted", None)], engines, 0.5)
    assert (step.action, step.reason, step.permanent) == ("fail", "encrypted", True)
    step = extraction_step([("pypdfium2", "empty", None), ("pypdf", "empty", None)], engines, 0.5)
    assert (step.reason, step.permanent) == ("empty", True)
    # A worker that died or a time limit may not happen again: transient, retried in a later pass.
    step = extraction_step([("pypdfium2", "timeout", None), ("pypdf", "unparseable", None)], engines, 0.5)
    assert (step.action, step.reason, step.permanent) == ("fail", "timeout", False)
    step = extraction_step([("pypdfium2", "crash", None), ("pypdf", "crash", None)], engines, 0.5)
    assert (step.reason, step.permanent) == ("crash", False)
    # ... but a worker that died on bytes another engine found hopeless died of them.
    step = extraction_step([("pypdfium2", "crash", None), ("pypdf", "too large", None)], engines, 0.5)
    assert (step.reason, step.permanent) == ("too large", True)


def test_engine_errors_are_classified_by_what_they_say():
    from pypdf.errors import EmptyFileError, FileNotDecryptedError, LimitReachedError, PdfReadError
    assert classify_extract_error(FileNotDecryptedError("File has not been decrypted")) == "encrypted"
    assert classify_extract_error(EmptyFileError("Cannot read an empty file")) == "empty"
    assert classify_extract_error(PdfReadError("startxref not found")) == "unparseable"
    assert classify_extract_error(LimitReachedError("Limit reached while decompressing")) == "too large"
    assert classify_extract_error(MemoryError()) == "too large"
    assert classify_extract_error(OSError("input/output error")) == "error"
    assert classify_extract_error(RuntimeError("Failed to load document (PDFium: File access error).")) == "error"
    assert classify_extract_error(KeyError("/Root")) == "unparseable"


def test_text_quality_is_high_for_prose_and_low_for_garbage_or_words_run_together():
    prose = ("The Court of Appeals affirmed the judgment of the Jefferson Circuit Court, holding that the "
             "trial court did not abuse its discretion under KRS 532.080 when it denied the motion. ") * 3
    assert text_quality(prose) > 0.9
    garbled = " ".join(["ÔÏÛ¤¦", "gHjKqW", "xQzTkLmN", "\ufffd\ufffd", "pQrS", "¤¤¤"] * 8)
    assert text_quality(garbled) < 0.3
    run_together = "TheCourtofAppealsaffirmedthejudgmentoftheJeffersonCircuitCourtholdingthatthetrial " * 25
    assert text_quality(run_together) == pytest.approx(0.0)
    assert text_quality("Filed 2021") is None         # a short page: nothing to judge
    with_controls = prose + "\x01\x02\x03" * 40
    assert text_quality(with_controls) < text_quality(prose)


def test_text_agreement_is_the_word_jaccard():
    assert text_agreement("The court AFFIRMS.", "the Court affirms") == 1.0
    assert text_agreement("ab cd ef gh", "ab cd xy zw") == pytest.approx(2 / 6, abs=1e-4)
    assert text_agreement("", "") == 1.0 and text_agreement("words", "") == 0.0


def test_text_agreement_counts_what_readers_differ_on_as_the_same_words():
    # A ligature code point (one reader keeps U+FB03, another decomposes it) is the same word.
    assert text_agreement("three police o\ufb03cers", "three police officers") == 1.0
    # Bidi embeddings around a right-to-left run separate words; they are not letters.
    arabic = "\u062d\u064e\u0628\u064a\u0628\u064a"        # habibi, with a vowel sign (a combining mark)
    assert text_agreement(f"\u202b {arabic}\u202c\u202a habibi\u202c", f"{arabic} habibi") == 1.0
    # Visual order (one reader) and logical order (another) of right-to-left or mirrored text.
    assert text_agreement(arabic[::-1] + " habibi", arabic + " habibi") == 1.0
    assert text_agreement("eht truoc smriffa", "the court affirms") == 1.0
    # A letter-spaced word, split at each wide gap by one reader; a capital after a small letter
    # starts the next word.
    assert text_agreement("O P I N I O N\nD o u b l e", "Opinion\nDouble") == 1.0
    assert text_agreement("H e l l o W o r l d", "Hello\nWorld") == 1.0
    # Still words: different ones disagree, and two single letters are two words.
    assert text_agreement("the court affirms", "the court reverses") == pytest.approx(2 / 4)
    assert text_agreement("a b", "ab") == 0.0


# ---------------------------------------------------------------- the chain


def test_bad_inputs_are_classified_once_and_readable_ones_extracted(make_ctx):
    ctx = make_ctx(EXTRACT_MEMORY_MB=256)
    good = opinion(1)
    add_document(ctx, "locked", encrypted(good, "secret"))
    add_document(ctx, "owner_only", encrypted(opinion(2), ""))
    add_document(ctx, "empty", b"")
    add_document(ctx, "unparseable", pdfs.unparseable_pdf(seed=3))
    add_document(ctx, "bomb", bomb_pdf(1024))
    add_document(ctx, "truncated", opinion(9)[:1500])
    add_document(ctx, "good", good)

    result = extract(ctx)

    assert row(ctx, "good")["status"] == row(ctx, "owner_only")["status"] == "extracted"
    text = (ctx.workspace / "text" / f"{row(ctx, 'owner_only')['sha256']}.txt").read_text()
    assert "2021-SC-000002" in text     # an empty user password is read
    expected = {"locked": [("pypdfium2", "encrypted"), ("pypdf", "encrypted")],
                "empty": [("pypdfium2", "unparseable"), ("pypdf", "empty")],
                "unparseable": [("pypdfium2", "unparseable"), ("pypdf", "unparseable")],
                "truncated": [("pypdfium2", "unparseable"), ("pypdf", "unparseable")]}
    for document_id, engines in expected.items():
        document = row(ctx, document_id)
        assert (document["status"], document["extract_failure"]) == ("downloaded", engines[-1][1]), document_id
        assert document["extract_attempts"] == ctx.cfg.MAX_EXTRACT_ATTEMPTS
        # Each engine tried once, in one attempt: never parsed again in this run.
        assert attempts(ctx, document_id) == [(1, engine, verdict) for engine, verdict in engines]
    # The bomb: pdfium dies at the worker's memory cap (or says so), pypdf refuses to inflate it:
    # `too large`, once, and the stage went on.
    bomb = row(ctx, "bomb")
    assert (bomb["status"], bomb["extract_failure"]) == ("downloaded", "too large")
    [(_, _, pdfium), (_, _, by_pypdf)] = attempts(ctx, "bomb")
    assert pdfium in ("crash", "too large") and by_pypdf == "too large"
    assert WorkQueues(ctx.db).extract_queue_size(ctx.cfg) == 0
    assert result.permanent == 5 and result.extracted == 2


def test_a_crashing_engine_hands_the_pdf_to_the_next_and_the_stage_goes_on(make_ctx, monkeypatch):
    def crashing(pdf_path):
        os.kill(os.getpid(), signal.SIGSEGV)     # native code dying, as a bad PDF can make pdfium
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "crashing", crashing)
    ctx = make_ctx(EXTRACT_ENGINES=("crashing", "pypdf"))
    shas = {f"doc{n}": add_document(ctx, f"doc{n}", opinion(n)) for n in range(1, 4)}

    result = extract(ctx)

    assert (result.extracted, result.failed_attempts, result.fallbacks) == (3, 0, 3)
    for document_id, sha in shas.items():
        assert attempts(ctx, document_id) == [(1, "crashing", "crash"), (1, "pypdf", "ok")]
        assert "2021-SC-" in (ctx.workspace / "text" / f"{sha}.txt").read_text()
    logged = ctx.db.conn.execute("SELECT error, seconds FROM extraction_log WHERE outcome = 'crash'").fetchall()
    assert all("SIGSEGV" in r["error"] and r["seconds"] >= 0 for r in logged)


def test_garbage_text_goes_to_the_next_engine_and_the_better_text_is_kept(make_ctx, monkeypatch):
    def garbling(pdf_path):
        return [("ÔÏÛ¤ gHjKqW xQzTkLmN pQrS " * 30, False)]
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "garbling", garbling)
    ctx = make_ctx(EXTRACT_ENGINES=("garbling", "pypdf"))
    sha = add_document(ctx, "doc", opinion(4))

    extract(ctx)

    assert attempts(ctx, "doc") == [(1, "garbling", "low quality"), (1, "pypdf", "ok")]
    document = row(ctx, "doc")
    assert document["text_quality"] > ctx.cfg.MIN_TEXT_QUALITY
    assert "2021-SC-000004" in (ctx.workspace / "text" / f"{sha}.txt").read_text()
    qualities = [r[0] for r in ctx.db.conn.execute("SELECT quality FROM extraction_log ORDER BY log_id")]
    assert qualities[0] < ctx.cfg.MIN_TEXT_QUALITY < qualities[1]


@pytest.mark.slow
def test_a_10000_page_pdf_over_the_time_limit_goes_to_the_next_engine(make_ctx, monkeypatch):
    def slow(pdf_path):   # an engine too slow for this file: 10 ms a page, 100 s in all
        reader = pypdf.PdfReader(pdf_path)
        texts = []
        for page in reader.pages:
            time.sleep(0.01)
            texts.append(page.extract_text())
        return texts
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "slow", slow)
    ctx = make_ctx(EXTRACT_ENGINES=("slow", "pypdfium2"), EXTRACT_TIMEOUT=4.0)
    many = _document([b"BT /F1 9 Tf 72 720 Td (page) Tj ET"] * 10_000, CREATED)
    add_document(ctx, "many", many)
    add_document(ctx, "small", opinion(5))

    result = extract(ctx)

    assert [a[1:] for a in attempts(ctx, "many")] == [("slow", "timeout"), ("pypdfium2", "ok")]
    assert row(ctx, "many")["pages"] == 10_000 and row(ctx, "small")["status"] == "extracted"
    timeout_seconds = ctx.db.conn.execute("SELECT seconds FROM extraction_log WHERE outcome = 'timeout'").fetchone()[0]
    assert timeout_seconds >= 4.0 and result.extracted == 2



def filled_form_pdf(value: str) -> bytes:
    """One page reading 'Name:' and a text field filled with `value` (its appearance stream only)."""
    from notebook_builder.simcourt.pdfs import _assemble
    content = b"BT /F1 12 Tf 72 720 Td (Name:) Tj ET"
    appearance = b"BT /F1 12 Tf 2 6 Td (" + value.encode("latin-1") + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [5 0 R] /DA (/F1 12 Tf 0 g) >> >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 7 0 R /Annots [5 0 R] >>",
        b"<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /V (" + value.encode("latin-1") + b") "
        b"/Rect [120 712 320 732] /P 4 0 R /F 4 /DA (/F1 12 Tf 0 g) /AP << /N 6 0 R >> >>",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 200 20] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Length %d >>\nstream\n" % len(appearance) + appearance + b"\nendstream",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    return _assemble(objects, CREATED)


def test_a_filled_in_form_field_is_text_of_its_page(tmp_path):
    path = tmp_path / "form.pdf"
    path.write_bytes(filled_form_pdf("Jane Q. Appellant"))
    [(text, *_)] = c79_extract_engines._extract_pages_pypdfium2(str(path))
    assert "Name:" in text and "Jane Q. Appellant" in text


def test_text_objects_that_do_not_decode_send_the_pdf_to_the_next_engine(monkeypatch, tmp_path):
    # 40 text objects on the page, 3 characters decoded: most of the text is missing, however clean.
    def undecoded(pdf_path):
        return [("The court affirms the judgment below in every respect today " * 3, False, 400, 30)]
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "undecoded", undecoded)
    verdict, facts, chars, data, quality, [page] = c79_extract_engines._extract_run_engine("undecoded", str(tmp_path / "x.pdf"))
    assert verdict == "ok" and quality == pytest.approx(30 / 400)
    assert text_quality(data.decode()) > 0.9       # the text alone looked fine
    assert c80_extract.page_defect(page, 0.5) == "undecoded"     # the page too is poor


def logo_page_pdf() -> bytes:
    """A born-digital one-page form: 'Filed' and a small seal image (an inch square) in a corner."""
    from notebook_builder.simcourt.pdfs import _stream
    seal = _stream(bytes(range(256)) * 16, b" /Type /XObject /Subtype /Image /Width 64 /Height 64"
                                           b" /ColorSpace /DeviceGray /BitsPerComponent 8")
    content = b"q 72 0 0 72 36 700 cm /Im1 Do Q BT /F1 12 Tf 120 720 Td (Filed) Tj ET"
    return _document([content], CREATED, resources=b"<< /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >>",
                     extra_objects=[seal])


def test_a_page_with_a_small_image_and_little_text_is_not_a_scan(make_ctx):
    ctx = make_ctx()
    add_document(ctx, "form", logo_page_pdf())
    add_document(ctx, "scan", pdfs.image_only_pdf(seed=1, creation_date=CREATED))

    extract(ctx)

    facts = {r["sha256"]: (r["has_images"], r["needs_ocr"], r["image_cover"])
             for r in ctx.db.conn.execute("SELECT * FROM pages")}
    form, scan = facts[row(ctx, "form")["sha256"]], facts[row(ctx, "scan")["sha256"]]
    assert form[:2] == (1, 0) and form[2] == pytest.approx(72 * 72 / (612 * 792), abs=1e-3)
    assert scan[:2] == (1, 1) and scan[2] > 0.7
    assert (row(ctx, "form")["likely_scanned"], row(ctx, "scan")["likely_scanned"]) == (0, 1)


def test_text_drawn_outside_the_page_is_not_text_of_it(tmp_path):
    # A 'Background' label drawn above the page's top edge (a converter's leftover): no reader shows
    # it, pdftotext drops it; a page whose text is all on it keeps every character.
    content = (b"BT /F1 12 Tf 72 700 Td (The court affirms.) Tj ET "
               b"BT /F1 12 Tf 72 900 Td (Background) Tj ET BT /F1 12 Tf -400 300 Td (Leftover) Tj ET")
    path = tmp_path / "offpage.pdf"
    path.write_bytes(_document([content, b"BT /F1 12 Tf 72 700 Td (Background is on this page.) Tj ET"], CREATED))
    (first, *_), (second, *_) = c79_extract_engines._extract_pages_pypdfium2(str(path))
    assert "The court affirms." in first and "Background" not in first and "Leftover" not in first
    assert second.strip() == "Background is on this page."


def test_text_quality_judges_scripts_hyphens_and_broken_words():
    words = "Saint-Sauveur and Morin-Heights O'Brien filed the appeal of KRS 532.080 in Text1 " * 3
    assert text_quality(words) == 1.0                            # each part of a hyphenated name alone
    arabic = "\u062d\u064e\u0628\u064a\u0628\u064a"                # with a vowel sign (a combining mark)
    assert text_quality(" ".join([arabic, "\u0645\u062d\u0643\u0645\u0629"] * 12)) == 1.0   # no case: words
    mixed = " ".join(["\u03f2\u0392\u03f4\u0392habibi", arabic + "\u02f4", arabic] * 8)     # glyphs decoded wrong
    assert text_quality(mixed) < 0.4
    broken = "C a r t e Z o n e s the map of the town " * 4      # words broken into letters
    assert text_quality(broken) < 0.5
    assert text_quality("subsections (a), (b) and (c) of the statute apply here " * 3) == 1.0
    assert text_quality("only three words", min_tokens=3) == 1.0 and text_quality("two words", min_tokens=3) is None


def test_doubtful_text_is_compared_with_the_next_engine_and_kept_unless_clearly_worse():
    engines = ("pypdfium2", "pypdf")
    assert extraction_step([("pypdfium2", "ok", 0.6)], engines, 0.5) == c78_page_text.ExtractStep("next", "pypdf")
    assert extraction_step([("pypdfium2", "ok", 0.75)], engines, 0.5).action == "keep"
    # The later text replaces an acceptable earlier one only when clearly better...
    step = extraction_step([("pypdfium2", "ok", 0.6), ("pypdf", "ok", 0.95)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdf")
    step = extraction_step([("pypdfium2", "ok", 0.6), ("pypdf", "ok", 0.7)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdfium2")
    step = extraction_step([("pypdfium2", "ok", 0.6), ("pypdf", "unparseable", None)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdfium2")
    # ...while a low-quality one gives way to any better one.
    step = extraction_step([("pypdfium2", "ok", 0.3), ("pypdf", "ok", 0.4)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdf")


def test_a_short_text_of_wrongly_decoded_glyphs_goes_to_the_next_engine(make_ctx, monkeypatch):
    arabic = "\u062d\u064e\u0628\u064a\u0628\u064a"
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "wrong",
                        lambda path: [(f"{arabic[::-1]}\u02f4 \u03f2\u0392\u03f4\u0392habibi {arabic[::-1]}", False)])
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "right", lambda path: [(f"{arabic} habibi {arabic}", False)])
    ctx = make_ctx(EXTRACT_ENGINES=("wrong", "right"))
    sha = add_document(ctx, "label", opinion(7))
    result = extract(ctx)
    assert row(ctx, "label")["status"] == "extracted" and result.kept_by == {"right": 1}
    assert attempts(ctx, "label") == [(1, "wrong", "low quality"), (1, "right", "ok")]
    assert (ctx.workspace / "text" / f"{sha}.txt").read_text("utf-8") == f"{arabic} habibi {arabic}"


def test_ligature_code_points_are_written_as_their_letters(monkeypatch, tmp_path):
    # pypdf (and poppler) keep U+FB03 where a font maps its glyph there; search needs "officers".
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "ligatures",
                        lambda path: [("three police o\ufb03cers, \ufb01led and \ufb02ed", False), "e\ufb00ect"])
    verdict, facts, chars, data, quality, _ = c79_extract_engines._extract_run_engine("ligatures", str(tmp_path / "x.pdf"))
    assert verdict == "ok" and data.decode() == "three police officers, filed and fled\feffect"
    assert [page_chars for page_chars, _, _ in facts] == [32, 6]


def test_a_heading_drawn_twice_over_itself_is_read_once(tmp_path):
    # A drop shadow: each letter drawn again 0.8 pt right and down in a second font (at size 1,
    # scaled by the text matrix), which pdfium reads as "OOPPIINNIIOONN"; the real double letters of
    # the line below stay ("Bill", "II", "will").
    widths = {"O": 778, "P": 667, "I": 278, "N": 722}
    parts, x = [], 72.0
    for letter in "OPINION":
        for font, dx, dy in ((b"/F1", 0.0, 0.0), (b"/F2", 0.8, -0.8)):
            parts.append(b"BT %s 1 Tf 14 0 0 14 %.2f %.2f Tm (%s) Tj ET" % (font, x + dx, 700 + dy, letter.encode()))
        x += widths[letter] * 14 / 1000
    parts.append(b"BT /F1 14 Tf 72 670 Td (Part II of the Bill: we will see all of it.) Tj ET")
    second_font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    path = tmp_path / "shadow.pdf"
    path.write_bytes(_document([b"\n".join(parts)], CREATED, resources=b"<< /Font << /F1 3 0 R /F2 4 0 R >> >>",
                               extra_objects=[second_font]))
    [(text, *_)] = c79_extract_engines._extract_pages_pypdfium2(str(path))
    assert "OPINION" in text and "OOPP" not in text
    assert "Part II of the Bill: we will see all of it." in text
    # Only a page showing a doubled word is checked character by character: not dot leaders or
    # signature lines (every table of contents and form has them).
    assert not c79_extract_engines._DOUBLED_TOKEN.search("ARGUMENT ........ 12\nSigned ________ bookkeeper")


def test_a_cleaner_text_missing_words_does_not_replace_a_doubtful_one():
    engines = ("pypdfium2", "pypdf")
    # pypdf skipped the form's filled-in values: fewer words, each clean.
    step = extraction_step([("pypdfium2", "ok", 0.75, 14), ("pypdf", "ok", 1.0, 9)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdfium2")
    step = extraction_step([("pypdfium2", "ok", 0.65, 46), ("pypdf", "ok", 0.94, 45)], engines, 0.5)
    assert (step.action, step.engine) == ("keep", "pypdf")
