"""The right engine for each page: garbage text layers caught, rotated text kept, the choice said per page."""
from __future__ import annotations

from test_extract_chain import add_document, make_ctx  # noqa: F401  (make_ctx: a fixture)

from notebook_builder.cells import c78_page_text, c79_extract_engines, c85_ocr
from notebook_builder.cells.c13_records import TextRecords
from notebook_builder.cells.c78_page_text import (POOR_TEXT, PageMeasures, PageReading, choose_page_reading,
                                                  measure_pages, page_defect, page_is_doubtful, pages_to_reread,
                                                  scattered_letter_share, text_quality, word_wholeness)
from notebook_builder.cells.c80_extract import extract
from notebook_builder.simcourt.pdfs import _document, _stream

CREATED = "20240101000000Z"
BODY = b"BT /F1 11 Tf 14 TL 72 740 Td " + b" ".join(
    b"(The court affirms the judgment of the circuit court in this appeal, line %d.) Tj T*" % n
    for n in range(30)) + b" ET"
HELVETICA_WIDTHS = {"I": 278, "J": 500, "M": 833, "W": 944, " ": 278}


def rotated_stamp(words: list[str], size: int = 14) -> bytes:
    """Each word a column of text turned 90 degrees, drawn a glyph at a time (as stamping tools do)."""
    parts = [b"BT /F1 %d Tf" % size]
    for column, word in enumerate(words):
        x, y = 420.0 + 30 * column, 100.0
        for letter in word:
            parts.append(b"0 1 -1 0 %.2f %.2f Tm (%s) Tj" % (x, y, letter.encode()))
            y += HELVETICA_WIDTHS.get(letter, 667) * size / 1000
    parts.append(b"ET")
    return b" ".join(parts)


# A Type0 font of the Adobe-Japan1 collection, not embedded and without a ToUnicode map: pdfium
# maps its CIDs through the collection's table, pypdf reads each CID as a code point (letters of
# Cyrillic, Hebrew, Arabic, Devanagari... side by side), as in a Japanese vertical-writing filing.
_CID_FONT_OBJECTS = [
    b"<< /Type /Font /Subtype /Type0 /BaseFont /Ryumin-Light-Identity-H /Encoding /Identity-H "
    b"/DescendantFonts [5 0 R] >>",
    b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /Ryumin-Light /CIDSystemInfo << /Registry (Adobe) "
    b"/Ordering (Japan1) /Supplement 2 >> /FontDescriptor 6 0 R /DW 1000 >>",
    b"<< /Type /FontDescriptor /FontName /Ryumin-Light /Flags 4 /FontBBox [0 -200 1000 900] /ItalicAngle 0 "
    b"/Ascent 880 /Descent -120 /CapHeight 700 /StemV 80 >>",
]
KANJI_CIDS = list(range(1125, 3000, 37))


def kanji_lines(lines: int = 12) -> bytes:
    out = []
    for row in range(lines):
        chunk = KANJI_CIDS[row * 4 % len(KANJI_CIDS):][:12]
        out.append(b"BT /F2 12 Tf 72 %d Td <%s> Tj ET" % (740 - 20 * row, "".join(f"{c:04X}" for c in chunk).encode()))
    return b"\n".join(out)


def broken_map_font() -> bytes:
    """Helvetica whose ToUnicode map sends each letter to one of eight unrelated scripts: every
    reader (poppler too) gives letters that are not the page's."""
    bases = [0x0B15, 0x0C95, 0x03B1, 0x0B95, 0x0C15, 0x0D15, 0x10D0, 0x0561]
    entries = b"".join(b"<%02X> <%04X>\n" % (code, bases[code % len(bases)] + code % 20) for code in range(33, 127))
    return _stream(b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Broken def "
                   b"1 begincodespacerange <00> <FF> endcodespacerange 94 beginbfchar\n" + entries +
                   b"endbfchar endcmap CMapName currentdict /CMap defineresource pop end end")


def two_fonts_pdf(pages: list[bytes], second_font: list[bytes]) -> bytes:
    """Pages drawing with /F1 (Helvetica) and /F2 (object 4, then its own objects)."""
    return _document(pages, CREATED, resources=b"<< /Font << /F1 3 0 R /F2 4 0 R >> >>", extra_objects=second_font)


def page_rows(ctx, sha):
    return ctx.db.conn.execute("SELECT * FROM pages WHERE sha256 = ? ORDER BY page", (sha,)).fetchall()


def log(ctx, document_id):
    return [(r["engine"], r["outcome"]) for r in ctx.db.conn.execute(
        "SELECT * FROM extraction_log WHERE document_id = ? ORDER BY log_id", (document_id,))]


def measures(text: str) -> PageMeasures:
    return measure_pages([text], [None])[1][0]


# ---------------------------------------------------------------- decisions


def test_letters_scattered_across_scripts_are_poor_text_and_latin_beside_one_other_script_is_not():
    garbage = "ɹɹং\nΘͨ͘͠ͱ͍;ݱ\u09c5၊ఆ͞Εͨ༗ަػྲྀి౯ͷͻͱͭͷ੨͍র໌Ͱ͢ớ͋ΒΏΔಁ໌ͳ༓ྶͷෳ߹ମỜ෩ܠΈΜͳͱ͍ỳ͠Ỷʹͤ"
    assert scattered_letter_share(garbage) > c78_page_text.SCATTERED_LETTERS and page_defect(measures(garbage), 0.5) == "scattered scripts"
    japanese = "風景やみんなといっしょに（あらゆる透明な幽霊の複合体）ＰＤＦ version 2 of the report"
    german_math = "Sei γ : I → X ein Weg, α und β Winkel, ϕ eine Abbildung mit ∑ δ ε ζ η θ; daher ℝ ist 𝔐 " * 2
    arabic = "\u062d\u064e\u0628\u064a\u0628\u064a \u0645\u062d\u0643\u0645\u0629 habibi " * 4
    for text in (japanese, german_math, arabic, "The court affirms. " * 5):
        assert scattered_letter_share(text) == 0.0, text
    # Greek letters beside Arabic ones: glyphs decoded through the wrong map.
    assert scattered_letter_share("\u062d\u064e\u0628\u064a\u0628\u064a\u02f4 \u03f2\u0392\u03f4\u0392 " * 3) > 0.15


def test_lines_mostly_single_letters_are_poor_and_a_run_of_them_makes_a_page_doubtful():
    prose = "The court affirms the judgment of the circuit court in this appeal.\n" * 30
    stamp = "\n".join("RECEIVEDUNITEDSTATES")                 # a rotated run read a glyph at a time
    assert page_defect(measures(stamp), 0.5) == "single letters"
    assert page_defect(measures(prose + stamp), 0.5) is None and page_is_doubtful(measures(prose + stamp), 0.5)
    # A figure's few labels, CJK characters one to a line (each is a word), letter-spaced headings: fine.
    for text in (prose + "x\ny\nz\n", "元\n円\n年\n月\n日\n株\n" + prose, prose + "O P I N I O N\n"):
        assert not page_is_doubtful(measures(text), 0.5), text


def test_characters_that_stand_for_no_letter_are_undecoded_text():
    private = " ".join(["\ue041\ue042\ue043", "\ue050\ue051"] * 30)    # a font's own glyph codes
    assert page_defect(measures(private), 0.5) == "undecoded"
    assert page_defect(PageMeasures(0.95, decoded=0.2), 0.5) == "undecoded"   # text objects gave no characters
    assert page_defect(PageMeasures(0.3), 0.5) == "low quality" and page_defect(PageMeasures(None), 0.5) is None


def test_whole_words_beat_fragments_and_words_run_together():
    shared = {"the", "court", "affirms", "judgment", "ist", "daher", "eine"}
    whole, fragments, joined = word_wholeness(shared | {"america", "andre", "beijin", "eiv"},
                                              shared | {"american", "andrew", "beijing", "received"}, shared)
    assert (whole, fragments, joined) == (0, 4, 0)
    assert word_wholeness(shared | {"american", "andrew", "beijing", "received"},
                          shared | {"america", "andre", "beijin", "eiv"}, shared) == (4, 0, 0)
    # 'daherist' is two of the other reading's words run together: 'daher' is not its fragment.
    assert word_wholeness(shared - {"daher"} | {"daherist"}, shared, set()) == (0, 0, 1)
    assert word_wholeness(shared, shared - {"daher"} | {"daherist"}, set()) == (1, 0, 0)
    assert word_wholeness({"r2", "xy", "ab"}, {"x", "y"}, set()) == (0, 0, 0)   # formulas count for neither


def reading(engine: str, text: str) -> PageReading:
    return PageReading(engine, text, measures(text))


def test_engines_that_disagree_on_a_page_keep_the_one_whose_words_are_whole():
    prose = "The court affirms the judgment of the circuit court in this appeal.\n" * 20
    letters = prose + "\n".join("RECEIVED") + "\nUNIT\nED\nSTATES\nAMERIC\nA\nANDRE\nW\nBEIJIN\nG"
    words = prose + "RECEIVED UNITED STATES AMERICA ANDREW BEIJING"
    choice = choose_page_reading([reading("pypdfium2", letters), reading("pypdf", words)], 0, 0.5)
    assert (choice.index, choice.poor) == (1, False) and choice.reason.startswith("whole words")
    # Not the first that passes a threshold: in either order the whole words win.
    assert choose_page_reading([reading("pypdf", words), reading("pypdfium2", letters)], 1, 0.5).index == 0
    # Words run together lose to the same words apart; words missing lose to words present.
    apart = prose + "the appellant filed thecourt record below " + "a motion to dismiss " * 3
    run_together = prose + "theappellant filed thecourt record below " + "a motiontodismiss " * 3
    assert choose_page_reading([reading("a", run_together), reading("b", apart)], 0, 0.5).index == 1
    filled = prose + "Name: Jane Appellant Address: Frankfort Kentucky"
    assert choose_page_reading([reading("a", prose), reading("b", filled)], 0, 0.5).index == 1
    # The same words: the document's engine stays.
    assert choose_page_reading([reading("a", prose), reading("b", prose.replace("\n", " "))], 1, 0.5) \
        == c78_page_text.PageChoice(1, "engines agree")


def test_a_poor_reading_gives_way_and_a_page_poor_in_every_engine_goes_to_ocr():
    prose = "The court affirms the judgment of the circuit court in this appeal.\n" * 5
    garbage = "ɹɹং Θͨ͘͠ͱ͍;ݱ\u09c5 ၊ఆ͞Εͨ༗ަػ ྲྀి౯ͷͻͱͭͷ੨͍র໌ ͢ớ͋ΒΏΔಁ໌ͳ༓ྶ ͷෳ߹ମỜ෩ܠΈΜͳͱ͍ỳ͠Ỷ"
    choice = choose_page_reading([reading("pypdf", garbage), reading("pypdfium2", prose)], 0, 0.5)
    assert (choice.index, choice.poor) == (1, False) and "pypdf: scattered scripts" in choice.reason
    letters = "\n".join("RECEIVEDSTATES")
    choice = choose_page_reading([reading("pypdf", garbage), reading("pypdfium2", letters)], 0, 0.5)
    assert choice.poor and choice.reason.startswith(POOR_TEXT)
    assert choose_page_reading([reading("pypdf", garbage)], 0, 0.5).poor
    # A table or code every engine scores low, and reads alike, is kept: no OCR.
    table = "T0-C0 T0-C1 T0-C2\nT0-00 T0-01 T0-02\n#include <asm/io.h>\n" * 8
    assert page_defect(measures(table), 0.5) == "low quality"
    choice = choose_page_reading([reading("pypdfium2", table), reading("pypdf", table)], 0, 0.5)
    assert (choice.index, choice.poor) == (0, False)


JAPANESE = ("本件上告を棄却する。上告費用は上告人の負担とする。理由。上告代理人の上告理由について。"
            "原審の適法に確定した事実関係の下においては、所論の点に関する原審の判断は正当として是認することができる。")


def shift_jis_read_as_code_points(text: str) -> str:
    """What a reader without the font's map gives: each two-byte Shift-JIS code taken for a code point."""
    data = text.encode("shift_jis")
    return "".join(chr(data[at] << 8 | data[at + 1]) for at in range(0, len(data) - 1, 2))


def test_cjk_codes_read_through_the_wrong_map_are_rare_characters_and_real_text_is_not():
    mojibake = shift_jis_read_as_code_points(JAPANESE)
    assert c78_page_text.common_cjk_share(JAPANESE) == 1.0
    assert c78_page_text.common_cjk_share(mojibake) < c78_page_text.RARE_CJK
    assert page_defect(measures(mojibake), 0.5) == "rare characters"
    assert page_defect(measures(JAPANESE), 0.5) is None
    assert c78_page_text.common_cjk_share("判決") is None     # too few to judge


def test_vertical_japanese_read_a_character_a_line_is_text_not_letters_broken_apart():
    vertical = "\n".join(JAPANESE)
    assert text_quality(vertical) >= 0.7
    assert page_defect(measures(vertical), 0.5) is None
    # The same layout in Latin letters is still a word broken into letters.
    assert page_defect(measures("\n".join("RECEIVEDSTATESOFAMERICA")), 0.5) == "single letters"


def test_vertical_japanese_beats_the_same_page_read_through_the_wrong_map():
    pdfium, pypdf = reading("pypdfium2", "\n".join(JAPANESE)), reading("pypdf", shift_jis_read_as_code_points(JAPANESE))
    choice = choose_page_reading([pdfium, pypdf], 1, 0.5)
    assert (choice.index, choice.poor) == (0, False) and "pypdf: rare characters" in choice.reason


def test_a_page_whose_drawn_text_objects_mostly_give_no_text_is_undecoded():
    # 9 text objects, 8 of them drawn but silent (a font pdfium cannot map): most of the page is missing.
    page = measure_pages([JAPANESE[:12]], [(9, 12, 8)])[1][0]
    assert page_defect(page, 0.5) == "undecoded"
    # A page whose objects all gave text, or with too few objects to tell, is judged on its text.
    assert page_defect(measure_pages([JAPANESE], [(9, 90, 0)])[1][0], 0.5) is None
    assert page_defect(measure_pages([JAPANESE], [(2, 90, 1)])[1][0], 0.5) is None


def test_pdfium_counts_no_silent_text_object_on_a_page_it_reads_whole(tmp_path):
    path = tmp_path / "body.pdf"
    path.write_bytes(_document([BODY], CREATED))
    [(text, has_images, text_objects, chars, cover, silent)] = c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS["pypdfium2"](
        str(path))
    assert "circuit court" in text and text_objects >= 1 and chars > 0
    assert silent == 0


def test_the_stage_keeps_the_engine_that_reads_vertical_japanese(make_ctx, monkeypatch):
    pages = ["\n".join(JAPANESE), shift_jis_read_as_code_points(JAPANESE)]

    def vertical_reader(pdf_path):   # one character a line, right
        return [(pages[0], False)]

    def wrong_map_reader(pdf_path):  # every character, wrong
        return [(pages[1], False)]
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "vertical", vertical_reader)
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "wrong_map", wrong_map_reader)
    ctx = make_ctx(EXTRACT_ENGINES=("vertical", "wrong_map"), WORKERS=1)
    sha = add_document(ctx, "gazette", _document([BODY], CREATED))

    extract(ctx)

    kept = (ctx.workspace / "text" / f"{sha}.txt").read_text("utf-8")
    assert kept == pages[0]
    assert [p["engine"] for p in page_rows(ctx, sha)] == ["vertical"]


def test_the_doubtful_pages_alone_go_to_the_next_engine():
    good, doubtful = measures("The court affirms the judgment today. " * 5), measures("\n".join("RECEIVEDSTAMP"))
    engines = ("pypdfium2", "pypdf")
    assert pages_to_reread([[good], [doubtful], [good], [doubtful]], {"pypdfium2"}, engines, 0.5) == ("pypdf", (1, 3))
    assert pages_to_reread([[good], [good]], {"pypdfium2"}, engines, 0.5) is None
    assert pages_to_reread([[good], [doubtful]], {"pypdfium2", "pypdf"}, engines, 0.5) is None   # none left
    assert pages_to_reread([[good], [doubtful, good]], {"pypdfium2"}, ("pypdfium2", "pypdf", "x"), 0.5) is None


# ---------------------------------------------------------------- the stage, on PDFs with these defects


def test_a_rotated_stamp_read_a_letter_at_a_time_gives_way_to_the_engine_with_whole_words(make_ctx):
    ctx = make_ctx()
    stamp = ["RECEIVED", "UNITED STATES OF AMERICA", "ANDREW", "BEIJING"]
    sha = add_document(ctx, "stamped", _document([BODY, BODY + b"\n" + rotated_stamp(stamp)], CREATED))

    result = extract(ctx)

    pages = page_rows(ctx, sha)
    assert [p["engine"] for p in pages] == ["pypdfium2", "pypdf"]
    assert pages[0]["engine_reason"] == "good text" and pages[1]["engine_reason"].startswith("whole words")
    page_two = (ctx.workspace / "text" / f"{sha}.txt").read_text("utf-8").split("\f")[1]
    for word in ("RECEIVED", "AMERICA", "ANDREW", "BEIJING"):
        assert word in page_two
    assert "the judgment of the circuit court" in page_two
    assert (result.pages_reread, result.pages_other_engine, result.kept_by) == (1, 1, {"pypdfium2+pypdf": 1})
    assert log(ctx, "stamped") == [("pypdfium2", "pages kept"), ("pypdf", "pages kept"), ("pypdfium2+pypdf", "ok")]
    assert [p["needs_ocr"] for p in pages] == [0, 0]


def test_a_page_one_engine_reads_as_scattered_scripts_is_read_by_the_next_one(make_ctx):
    # pypdf first: its text of the CID font's page is poor, and pdfium reads that page alone.
    ctx = make_ctx(EXTRACT_ENGINES=("pypdf", "pypdfium2"))
    sha = add_document(ctx, "cid", two_fonts_pdf([BODY, kanji_lines()], _CID_FONT_OBJECTS))

    result = extract(ctx)

    pages = page_rows(ctx, sha)
    assert [p["engine"] for p in pages] == ["pypdf", "pypdfium2"]
    assert "pypdf: scattered scripts" in pages[1]["engine_reason"] and not pages[1]["needs_ocr"]
    text = (ctx.workspace / "text" / f"{sha}.txt").read_text("utf-8")
    assert "亜案磯渦益奥加画" in text and "the circuit court" in text
    assert result.pages_reread == 1 and result.pages_poor_text == 0


def test_a_page_every_engine_reads_as_garbage_goes_to_ocr_and_an_empty_ocr_leaves_it_unreadable(
        make_ctx, monkeypatch):
    ctx = make_ctx()
    garbled_page = b"BT /F2 11 Tf 14 TL 72 740 Td " + b" ".join(
        b"(The court affirms the judgment, line %d.) Tj T*" % n for n in range(30)) + b" ET"
    ordinary = _document([BODY], CREATED)
    sha = add_document(ctx, "garbled", two_fonts_pdf([BODY, garbled_page], [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /ToUnicode 5 0 R >>",
        broken_map_font()]))
    add_document(ctx, "ordinary", ordinary)

    result = extract(ctx)

    garbled = ctx.db.get_document("garbled")
    assert garbled["status"] == "extracted" and garbled["pages_needing_ocr"] == 1
    assert garbled["likely_scanned"] == 0                      # born digital: no scan
    pages = page_rows(ctx, sha)
    assert [p["needs_ocr"] for p in pages] == [0, 1]
    assert pages[1]["engine_reason"].startswith(POOR_TEXT) and "scattered scripts" in pages[1]["engine_reason"]
    assert result.pages_poor_text == 1 and result.unreadable_pages == 1
    assert ctx.db.get_document("ordinary")["pages_needing_ocr"] == 0

    # OCR that finds nothing on it: no crash, the document and its text kept, the page unreadable.
    monkeypatch.setattr(c85_ocr, "ocr_engine_available", lambda engine: None)
    monkeypatch.setitem(c85_ocr.OCR_ENGINES, ctx.cfg.OCR_ENGINE, lambda image, timeout=0, orientation=True: ("", None))
    ocr_result = c85_ocr.ocr(ctx)
    assert (ocr_result.pdfs, ocr_result.failed) == (1, 0)
    assert ctx.db.get_document("garbled")["status"] == "extracted"
    assert TextRecords(ctx.db).unreadable_text_pages(POOR_TEXT) == 1
    assert "the circuit court" in (ctx.workspace / "text" / f"{sha}.txt").read_text("utf-8")
    assert extract(ctx).unreadable_pages == 1
