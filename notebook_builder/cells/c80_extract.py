"""Extract: the text of every downloaded PDF, in worker processes, one PDF's fault never stopping the rest.

Guarantees:
- Work comes from the extract queue of CONTRACT.md (`Database.extract_queue`,
  EXTRACT_BATCH rows at a time, keyset by rowid), so one pass attempts each
  queued document at most once and a failure counts exactly one attempt.
  The next batch is read as the workers make room: no pause at a batch
  boundary. A failed document is retried in a further pass of the same run,
  one pass per attempt, so a run ends with the queue empty.
- Each distinct sha256 is extracted once, by one of WORKERS worker
  processes, and its outcome applied to every document holding it (a
  document whose sha256 is on its way joins it). A document whose sha256
  another `extracted` document already holds reuses that text (its file was
  written before that commit) instead of extracting.
- An engine chain (EXTRACT_ENGINES, default pypdfium2 then pypdf): each PDF
  goes to the first engine; the next one is tried when it fails, times out,
  crashes, or gives text whose `text_quality` (share of word-like tokens, less
  replacement and control characters; a short text judged on its tokens if it
  has 3) is under MIN_TEXT_QUALITY, or doubtful (under SURE_TEXT_QUALITY). Good
  text is kept at once; with no engine left the best text read is kept, an
  acceptable earlier one unless a later one is better by BETTER_TEXT_BY. Every
  engine's attempt is a row of `extraction_log` (engine, verdict, seconds,
  quality; verdicts: ok, low quality, pages kept, encrypted, empty, too large,
  unparseable, timeout, crash, error), all under the document's one attempt.
- Then page by page: a page whose every reading so far is poor (`page_defect`:
  letters scattered across scripts no language mixes, lines mostly single
  letters, a font without a usable map, a low score) or doubtful (a run of
  single-letter lines) is read by the next engine too, that page alone. Where
  readings of a page differ, `choose_page_reading` keeps a good one over a poor
  one and, among good ones, the one whose words are whole (fewer fragments and
  words run together); the text file holds each page's kept reading (the
  document's engine is then e.g. `pypdfium2+pypdf`, and the attempts that gave
  pages are `pages kept`). `pages.engine` names each page's engine and
  `pages.engine_reason` why. A page poor in every engine keeps its best
  reading and needs OCR; while OCR gives it no text it counts in
  `ExtractResult.unreadable_pages` (`Database.unreadable_text_pages`).
- Verdicts no engine can change (`encrypted`: a user password is needed,
  `empty`, `too large`, `unparseable`; `extraction_step` decides) fail the
  document once, permanently: its attempts are all spent (it leaves the queue
  of CONTRACT.md) and `documents.extract_failure` names the reason (a worker
  that died on bytes another engine gave such a verdict died of them). Only
  transient failures (a lone crash, a timeout, an OS error) keep attempts for
  a later pass. An empty user (and, through pypdf, owner) password is tried.
- Every engine's text has Latin ligature code points written as their letters
  ('ﬃ' as 'ffi'). The pdfium engine reads text with line breaks kept (get_text_range), drops
  characters drawn wholly outside the page's visible box (as readers do) and
  reads a character drawn twice over itself (fake bold) once,
  flattens visible annotations (filled-in form fields, stamps) into a page's
  text first, and caps the quality of a text whose text objects mostly gave
  no characters (a font it cannot decode) at the share that did.
- A worker gets EXTRACT_TIMEOUT seconds per engine per PDF; a hung worker is
  killed and replaced (verdict `timeout`), a worker that dies (segfault in
  native code, os._exit, OOM kill) is replaced (verdict `crash`); either way
  the next engine is tried and the batch goes on. Each worker's address space
  is capped (RLIMIT_AS) at what it was forked with plus EXTRACT_MEMORY_MB: an
  inflate bomb raises MemoryError (`too large`) or kills only that worker.
- A worker only reads and parses: it sends the UTF-8 text, its quality and
  one (non-blank chars, has images, image cover) per page back over its pipe. The stage
  writes the texts of _EXTRACT_COMMIT_EVERY
  PDFs to `text/<sha256>.txt` atomically (temp name, rename) and mirrors
  them to the store as one group (`StoreMirror.put_many`: a LocalStore makes
  the group durable with one flush), while the workers go on with the tasks
  queued to them; then it commits them `extracted`. So the database never says
  `extracted` before the store holds the text (if the store lags, the local
  files are synced instead: they are the only copy until it catches up), no
  worker waits on the disk, and the store costs one flush per group, not
  one per PDF (an fsync each cost 0.3-1.2 ms of CPU here, a share of what
  the workers need). Pages are separated by a form feed; a PDF with no text
  layer is `extracted` with an empty file and 0 chars. A committed text is
  never rewritten: for a document extracted before (an adopted v1.2 row
  whose pages are measured), the `text/<sha256>.txt` the workspace or else
  the store holds is kept, and the document's chars and quality are that
  text's; its pages' facts are this reading's, and a page whose text the
  kept one lacks (`pages_a_kept_text_lacks`) needs OCR. A file an attempt
  cut short left for a document never extracted is written again.
- Per page, the `pages` table holds the kept reading's facts (chars, has
  images, image_cover: the share of the page its images cover, as pdfium
  measures it; needs_ocr; engine, engine_reason). A page needs OCR when it
  shows an image (covering at least SCAN_IMAGE_COVER of it, where measured)
  and has fewer than SCANNED_CHARS_PER_PAGE non-blank characters (a scan: no
  text layer), when an image covers all of it (SCAN_FULL_COVER) and its text
  is no more than a stamp (under SCAN_STAMP_CHARS: a court's filing stamp or
  docketing header over a scan), or when its text is poor in every engine;
  a born-digital page with little text and no image, or only a logo, does
  not.
  `documents.pages_needing_ocr` counts them and `likely_scanned` is "some page
  is a scan"; the `ocr` stage (c85_ocr) acts on them. `text_quality` of the
  kept text is recorded; where the court's own text of a document is known
  (`court_text`, kept by discovery), the agreement of ours with it is
  recorded in `documents.court_text_agreement` after each run of the stage;
  `text_agreement(a, b)` (word Jaccard) compares two
  texts of a document, e.g. ours with the court's documentText.
  After MAX_EXTRACT_ATTEMPTS failures a document leaves the queue; verify
  lists it from `Database.extraction_failures`.
- A PDF missing from the workspace is fetched from the store first. A full
  disk raises DiskFullError. The stage stops handing out PDFs once
  `ctx.clock.should_stop()`; the PDFs in flight are finished.

Workers are forked (`multiprocessing.get_context("fork")`): in a notebook the
functions live in `__main__`, which spawn and forkserver cannot import.
`EXTRACT_ENGINE_FUNCTIONS` maps an engine name to `f(pdf_path) -> one (text,
has_images[, text objects, chars, image cover]) or text per page`; a forked worker sees whatever the parent put
there (tests add faults). The pool is the design bench/extract.py measured:
long-lived forked workers, one pipe and one time limit each; a chain's next
engine is one more task for it.

Knobs read: WORKERS, EXTRACT_BATCH, EXTRACT_ENGINES, EXTRACT_TIMEOUT,
EXTRACT_MEMORY_MB, MIN_TEXT_QUALITY, MAX_EXTRACT_ATTEMPTS, SCANNED_CHARS_PER_PAGE.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import faulthandler
import functools
import logging
import multiprocessing
import multiprocessing.connection
import os
import re
import selectors
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, NamedTuple

from .c00_config import ConfigError
from .c05_durable import atomic_write, raise_if_disk_full, sync_files
from .c06_layout import pdf_store_name, text_store_name
from .c12_queues import WorkQueues
from .c13_records import TextRecords
from .c14_derived import DerivedRecords
from .c34_mirror import progress
from .c35_context import Context

log_extract = logging.getLogger("kycourt.extract")


# ---------------------------------------------------------------- engines

# An engine is f(pdf_path) -> one entry per page: (text, has_images[, text objects, characters they
# gave, share of the page its images cover]), or the text alone (no images known). It raises ExtractionFailure with a named verdict when it knows why it cannot read the PDF;
# any other exception is classified by `classify_extract_error`.


class ExtractionFailure(Exception):
    """An engine's named verdict on a PDF it cannot read: encrypted, empty, unparseable, too large."""

    def __init__(self, verdict: str, message: str):
        super().__init__(message)
        self.verdict = verdict


def _pypdf_has_images(resources, depth: int = 0) -> bool:
    """The page's resources name an image XObject (looked for in form XObjects too, 3 deep)."""
    try:
        xobjects = resources.get("/XObject") if resources is not None else None
        if xobjects is None:
            return False
        xobjects = xobjects.get_object()
        for name in xobjects:
            xobject = xobjects[name].get_object()
            subtype = xobject.get("/Subtype")
            if subtype == "/Image":
                return True
            if subtype == "/Form" and depth < 3 and _pypdf_has_images(xobject.get("/Resources"), depth + 1):
                return True
    except Exception:   # a broken resource dictionary: no image known, the text still counts
        return False
    return False


def _extract_pages_pypdf(pdf_path: str, pages: Iterable[int] | None = None) -> list[tuple[str, bool]]:
    import pypdf
    reader = pypdf.PdfReader(pdf_path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise ExtractionFailure("encrypted", "a user password is needed (the empty one does not open it)")
    read = []
    for page in (reader.pages if pages is None else (reader.pages[index] for index in pages)):
        resources = page.get("/Resources")
        read.append((page.extract_text() or "", _pypdf_has_images(resources.get_object() if resources else None)))
    return read


def _pdfium_page_objects(page_handle) -> tuple[float, int, bool]:
    """(the area its images cover, how many objects are text, some object is an image) of a page,
    form XObjects on it included (3 deep; an image in a form counts with the form's bounds). Raw C
    calls with their names bound once: pypdfium2's get_objects wraps every object in Python."""
    import ctypes

    import pypdfium2.raw as pdfium_c
    get_type, text_kind, image_kind, form_kind = (pdfium_c.FPDFPageObj_GetType, pdfium_c.FPDF_PAGEOBJ_TEXT,
                                                  pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_FORM)
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))

    def area(handle) -> float:
        if not pdfium_c.FPDFPageObj_GetBounds(handle, left, bottom, right, top):
            return 0.0
        return max(0.0, right.value - left.value) * max(0.0, top.value - bottom.value)

    covered, texts, has_images = 0.0, 0, False
    # (count, get, container, depth, the top-level form it is in) of each object list to look through
    pending = [(pdfium_c.FPDFPage_CountObjects, pdfium_c.FPDFPage_GetObject, page_handle, 0, None)]
    counted_forms = set()
    while pending:
        count, get, container, depth, outer = pending.pop()
        for index in range(count(container)):
            handle = get(container, index)
            kind = get_type(handle)
            if kind == text_kind:
                texts += 1
            elif kind == image_kind:
                has_images = True
                if outer is None:
                    covered += area(handle)
                elif id(outer) not in counted_forms:
                    counted_forms.add(id(outer))
                    covered += area(outer)
            elif kind == form_kind and depth < 3:
                pending.append((pdfium_c.FPDFFormObj_CountObjects, pdfium_c.FPDFFormObj_GetObject, handle,
                                depth + 1, handle if outer is None else outer))
    return covered, texts, has_images


def _pdfium_has_visible_annotations(page_handle) -> bool:
    """The page has an annotation other than links and popups (a form field, a stamp, a comment):
    flattening a page of many links costs 5x its text and adds nothing."""
    import pypdfium2.raw as pdfium_c
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page_handle)):
        annotation = pdfium_c.FPDFPage_GetAnnot(page_handle, index)
        try:
            if pdfium_c.FPDFAnnot_GetSubtype(annotation) not in (pdfium_c.FPDF_ANNOT_LINK, pdfium_c.FPDF_ANNOT_POPUP):
                return True
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annotation)
    return False


# A token made of three or more doubled characters ("MMuunniicciippaalliittéé"): text drawn twice
# a fraction of a point apart (fake bold), which pdfium reads twice; poppler and pdfplumber drop
# such duplicates. Only a page showing one is checked character by character.
_DOUBLED_TOKEN = re.compile(r"(?<!\S)(?=\S*?[^\W\d_])(?:(\S)\1){3,}(?!\S)")   # with a letter: not "......"


def _pdfium_text_on_page(page, text_page, text: str) -> str:
    """The page's text as a reader sees it: without the characters drawn wholly outside its
    visible box (crop box: a reader shows, prints and, poppler's pdftotext, extracts only what is
    on the page), and each character drawn twice over itself (fake bold or a shadow: the same
    character again within 0.2 of the line's glyph height) once. The off-page check is two counts in pdfium (the characters
    inside the page's box, and all of them) and the double check a regular expression over the
    text, so a page with neither costs next to nothing; only a page showing one is filtered
    character by character."""
    import ctypes

    import pypdfium2.raw as pdfium_c
    left, bottom, right, top = page.get_bbox()
    tolerance = 1.0
    bounded = pdfium_c.FPDFText_GetBoundedText
    off_page_text = bounded(text_page.raw, left - tolerance, top + tolerance, right + tolerance,
                            bottom - tolerance, None, 0) != bounded(text_page.raw, -1e9, 1e9, 1e9, -1e9, None, 0)
    doubled = _DOUBLED_TOKEN.search(text) is not None
    if not off_page_text and not doubled:
        return text
    x0, x1, y0, y1 = (ctypes.c_double() for _ in range(4))
    raw, chars = text_page.raw, text_page.count_chars()
    keep, recent = [True] * chars, []      # recent: (unicode, box) of the last two drawn characters kept
    heights = collections.deque(maxlen=8)  # of the last drawn characters
    for index in range(chars):
        if pdfium_c.FPDFText_IsGenerated(raw, index) or not pdfium_c.FPDFText_GetCharBox(raw, index, x0, x1, y0, y1):
            continue   # a space or line break pdfium inferred, or no box known: kept
        box = (x0.value, x1.value, y0.value, y1.value)
        if off_page_text and (box[1] < left - tolerance or box[0] > right + tolerance
                              or box[3] < bottom - tolerance or box[2] > top + tolerance):
            keep[index] = False
            continue
        if doubled:
            code = pdfium_c.FPDFText_GetUnicode(raw, index)
            heights.append(box[3] - box[2])
            # Within 0.2 of the line's tallest glyph (the last 8) both ways: a shadow or fake-bold
            # copy (offsets of 0.13 of it seen), never the next letter of a real double ("ll",
            # "II": 0.25 and more even in a condensed face).
            reach = max(0.3, 0.2 * max(heights))
            if any(code == other and abs(box[0] - seen[0]) <= reach and abs(box[2] - seen[2]) <= reach
                   for other, seen in recent):
                keep[index] = False
                continue
            recent = (recent + [(code, box)])[-2:]
    if all(keep):
        return text
    parts, start = [], None
    for index, kept in enumerate(keep + [False]):
        if kept and start is None:
            start = index
        elif not kept and start is not None:
            parts.append(text_page.get_text_range(start, index - start))
            start = None
    return "".join(parts).replace("\r\n", "\n").replace("\r", "\n")


def _extract_pages_pypdfium2(pdf_path: str, pages: Iterable[int] | None = None) -> list[tuple[str, bool]]:
    import pypdfium2
    import pypdfium2.raw as pdfium_c
    try:
        document = pypdfium2.PdfDocument(pdf_path)   # tries the empty user password itself
    except pypdfium2.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ExtractionFailure("encrypted", f"a user password is needed ({exc})") from None
        raise
    try:
        read = []
        for index in (range(len(document)) if pages is None else pages):
            page = document[index]
            if _pdfium_has_visible_annotations(page.raw):
                # Filled-in form fields and other visible annotations are text of the page (poppler
                # reads them too): flatten them into its content (in memory only) and read it again.
                if pdfium_c.FPDFPage_Flatten(page.raw, pdfium_c.FLAT_NORMALDISPLAY) == pdfium_c.FLATTEN_SUCCESS:
                    page.close()
                    page = document[index]
            text_page = page.get_textpage()
            try:
                # get_text_range keeps pdfium's line breaks; get_text_bounded drops some, running the
                # last word of a line into the first of the next (measured on bench/realpdfs.py).
                text = _pdfium_text_on_page(page, text_page, text_page.get_text_range()
                                            .replace("\r\n", "\n").replace("\r", "\n"))
                covered, text_objects, has_images = _pdfium_page_objects(page.raw)
                width, height = page.get_size()
                cover = round(min(1.0, covered / (width * height)), 4) if width * height > 0 else None
                # Text objects that gave no characters: pdfium could not decode their font (a CID
                # font that is not embedded, with a predefined CMap); the share decoded caps quality.
                read.append((text, has_images, text_objects, text_page.count_chars(), cover))
            finally:
                text_page.close()
                page.close()
        return read
    finally:
        document.close()


EXTRACT_ENGINE_FUNCTIONS: dict[str, Callable[..., list]] = {
    "pypdf": _extract_pages_pypdf,
    "pypdfium2": _extract_pages_pypdfium2,
}
# The package each built-in engine needs: checked before any attempt is spent, so
# a missing install is one ConfigError, not every document's attempts used up.
_EXTRACT_ENGINE_PACKAGES = {"pypdf": "pypdf", "pypdfium2": "pypdfium2"}


# Modules the built-in engines load on first use, imported in the supervisor before it forks: each
# worker (and each replacement) then has them for free instead of spending 0.1-0.3 s of CPU on
# imports (pypdf's crypto provider is loaded by the first encrypted PDF).
_EXTRACT_PRELOAD = {"pypdf": ("pypdf", "pypdf._crypt_providers"), "pypdfium2": ("pypdfium2", "pypdfium2.raw")}


def _extract_preload(engines: Iterable[str]) -> None:
    import importlib
    for engine in engines:
        for module in _EXTRACT_PRELOAD.get(engine, ()):
            with contextlib.suppress(ImportError):
                importlib.import_module(module)


def _extract_check_engine(engine: str) -> None:
    import importlib.util
    if engine not in EXTRACT_ENGINE_FUNCTIONS:
        raise ConfigError("KY_EXTRACT_ENGINES", engine, " or ".join(EXTRACT_ENGINE_FUNCTIONS))
    package = _EXTRACT_ENGINE_PACKAGES.get(engine)
    if package and importlib.util.find_spec(package) is None:
        raise ConfigError("KY_EXTRACT_ENGINES", engine, f"an installed engine (pip install {package})")


# -------------------------------------------------------------- decisions

# Verdicts no engine can change for these bytes: classified once, the document leaves the queue.
PERMANENT_VERDICTS = ("encrypted", "empty", "too large", "unparseable")   # in the order a reason is named
# Verdicts that may change: a worker that died (OOM, a signal), a timeout, an OS error reading the file.
TRANSIENT_VERDICTS = ("timeout", "crash", "error")


def classify_extract_error(exc: BaseException) -> str:
    """The verdict of an engine's exception: permanent (encrypted, empty, too large, unparseable)
    or `error` (an OS error: the file could not be read this time)."""
    if isinstance(exc, ExtractionFailure):
        return exc.verdict
    if isinstance(exc, MemoryError):
        return "too large"
    name, message = type(exc).__name__, str(exc).lower()
    if "file access error" in message or isinstance(exc, OSError):
        return "error"   # the file could not be read this time: no verdict on its bytes
    if name in ("FileNotDecryptedError", "WrongPasswordError") or "password" in message or "decrypt" in message:
        return "encrypted"
    if name == "EmptyFileError" or "empty file" in message or "cannot read an empty" in message:
        return "empty"
    if name == "LimitReachedError" or "limit reached" in message:
        return "too large"
    return "unparseable"   # the parser gave up on these bytes: it will again


def join_page_texts(page_texts: list[str]) -> str:
    """The text file's content: pages joined by form feeds; '' when no page holds any text."""
    if not any(text.strip() for text in page_texts):
        return ""
    return "\f".join(page_texts)


def page_text_chars(text: str) -> int:
    """Characters of a page's text layer that are not blank."""
    return len("".join(text.split()))   # str.split() splits at exactly the chars isspace() is true of


# A scan's image covers most of its page (strips of one add up); a logo or a seal does not.
SCAN_IMAGE_COVER = 0.25
# A scanned page under a filing stamp or a docketing header ("Case 2:85-cv-04544 Document 569-10
# Filed ... Page 242", "USCA4 Appeal: ... Filed: ..."): an image over the whole page and a text
# layer of a few dozen characters, where a page of text holds a thousand or more. Of 598 pages of
# ../shared/realpdfs, 8 are so (20-199 characters under an image covering all the page): two court
# scans under such stamps and six scans under junk text layers.
SCAN_FULL_COVER = 0.9
SCAN_STAMP_CHARS = 200


def page_needs_ocr(chars: int, has_images: bool, chars_per_page: int, image_cover: float | None = None) -> bool:
    """A page that shows an image and has (next to) no text layer: a scan; and a page an image
    covers (SCAN_FULL_COVER, when the engine measured it) whose text layer is no more than a stamp
    (under SCAN_STAMP_CHARS). A born-digital page with little text and no image, or only a small
    one (images covering under SCAN_IMAGE_COVER of the page, when measured), is not one."""
    if not has_images:
        return False
    if chars < max(1, chars_per_page) and (image_cover is None or image_cover >= SCAN_IMAGE_COVER):
        return True
    return image_cover is not None and image_cover >= SCAN_FULL_COVER and chars < SCAN_STAMP_CHARS


def text_pages(text: str, pages: int) -> list[str] | None:
    """A text's pages, split at its form feeds ('' stands for `pages` empty pages); None when its
    form feeds do not split it into `pages` pages (an older version's text)."""
    parts = text.split("\f") if text else [""] * pages
    return parts if len(parts) == pages else None


def pages_a_kept_text_lacks(text: str, page_chars: list[int]) -> list[bool]:
    """Per page, whether `text` (the archive's text of the PDF, kept instead of this reading) lacks
    what this reading found there (`page_chars`): every page with characters when its form feeds do
    not split it into the PDF's pages, else each page it holds empty where the reading is not."""
    parts = text_pages(text, len(page_chars))
    if parts is None:
        return [chars > 0 for chars in page_chars]
    return [chars > 0 and not part.strip() for part, chars in zip(parts, page_chars)]


def is_likely_scanned(pages_needing_ocr: int) -> bool:
    """Some page of the PDF has images and no text layer."""
    return pages_needing_ocr > 0


_QUALITY_MIN_TOKENS = 20
# Scripts written without spaces between words (CJK, kana, Thai, Hangul).
_UNSPACED = "\u0e00-\u0e7f\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")
# A run of such a script with the digits, Latin letters and punctuation set among it ("2019年05月").
_UNSPACED_MIXED = re.compile(f"(?=.*[{_UNSPACED}])[{_UNSPACED}\\w%.,:;()\u2010-\u2027-]+")
# A label of letters then digits ("Text1", "m2", "A10"), or digits then letters ("3com").
_ALNUM_LABEL = re.compile(r"[^\W\d_]{1,20}\d{1,6}|\d{1,6}[^\W\d_]{1,20}")
# Combining marks that belong to the letter before them (decomposed accents, Hebrew and Arabic
# vowel signs, Thai vowels): part of a word.
_MARKS = "\u0300-\u036f\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
_LETTER = f"[^\\W\\d_][{_MARKS}]*"
_WORD_TOKEN = re.compile(f"(?:{_LETTER}){{1,20}}(?:['\u2019-](?:{_LETTER}){{1,20}})*")
_NUMBER_TOKEN = re.compile(r"[$\u00a7#]?\d[\d,.:/-]*[a-z]{0,2}")
_TOKEN_EDGES = "\"'()[]{}<>,.;:!?*\u201c\u201d\u2018\u2019\u00ab\u00bb"
_PART_BREAKS = re.compile("['\u2019-]")
_MARK_CHARS = re.compile(f"[{_MARKS}]")
# Replacement and control characters (C0 but tab, line feed, form feed, carriage return; DEL; C1).
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufffd]")


def _case_shape_ok(part: str) -> bool:
    """lower, Capitalized, UPPER, or letters of a script without case (mixed case inside a word
    part is a glyph mess)."""
    return part.islower() or part.isupper() or (part[:1].isupper() and part[1:].islower()) or (
        part == part.lower() == part.upper())


def _one_script(core: str) -> bool:
    """Every letter of the token is of one script (by its Unicode name's first word: LATIN, GREEK,
    ARABIC...): a token mixing Greek and Latin letters is glyphs decoded to the wrong characters."""
    import unicodedata
    scripts = {unicodedata.name(char, "?").split(" ", 1)[0] for char in core if char.isalpha()}
    return len(scripts) <= 1


@functools.lru_cache(maxsize=1 << 16)
def _word_like(token: str) -> bool | None:
    """Whether a token looks like a word or a number (None: punctuation alone). Cached: the words
    of a document repeat (most tokens of a page were judged on an earlier one)."""
    core = token.strip(_TOKEN_EDGES)
    if not core:
        return None   # punctuation alone: neither word nor noise
    if _NUMBER_TOKEN.fullmatch(core):
        return True
    if _UNSPACED_RUN.fullmatch(core) or _UNSPACED_MIXED.fullmatch(core):
        return True   # a script written without spaces: a run of its characters is words
    if _ALNUM_LABEL.fullmatch(core):
        return core.isascii() or _one_script(core)
    if len(core) >= 4 and len(core) % 2 == 0 and core[::2] == core[1::2]:
        return False  # every letter twice: fake-bold text drawn twice, read twice
    if not _WORD_TOKEN.fullmatch(core):
        return False
    if not core.isascii() and not _one_script(core):
        return False
    # The case shapes of words, each part of a hyphenated or elided one alone ("Saint-Sauveur")
    letters = core if core.isascii() else _MARK_CHARS.sub("", core)
    if "-" not in letters and "'" not in letters and "\u2019" not in letters:
        return _case_shape_ok(letters)
    return all(_case_shape_ok(part) for part in _PART_BREAKS.split(letters) if part)


def _judged_tokens(text: str) -> list[bool]:
    """`_word_like` of each token that is not punctuation alone, where a run of three or more
    single letters (a word broken into letters) is not words."""
    judged, run = [], 0
    for token in text.split():
        verdict = _word_like(token)
        if verdict is None:
            continue
        single = verdict and len(token) == 1 and token.isalpha()
        run = run + 1 if single else 0
        if run == 3:
            judged[-2:] = [False, False]   # the run's first two letters were counted as words
        judged.append(False if run >= 3 else verdict)
    return judged


def word_like_count(text: str) -> int:
    """How many tokens of `text` look like words or numbers (`_judged_tokens`)."""
    return sum(_judged_tokens(text))


def text_quality(text: str, min_tokens: int = _QUALITY_MIN_TOKENS) -> float | None:
    """How much `text` looks like language, 0..1: the share of its tokens that look like words or
    numbers (lower, Capitalized or UPPER letters of at most 20 in a row, of one script, so words
    run together or wrongly decoded glyphs count against it; three or more single letters in a row
    are a word broken into letters and count against it too), less twice the share of replacement
    and control characters. None when it has fewer than `min_tokens` tokens to judge (a short page
    is not bad text)."""
    if len(text.split()) < min_tokens:
        return None
    return _quality(_judged_tokens(text), len(_BAD_CHARS.findall(text)), len(text), min_tokens)


def _quality(judged: list[bool], bad: int, length: int, min_tokens: int) -> float | None:
    if len(judged) < min_tokens:
        return None
    return round(max(0.0, sum(judged) / len(judged) - 2 * bad / max(1, length)), 4)


def text_quality_by_page(page_texts: list[str]) -> tuple[float | None, list[float | None]]:
    """`text_quality` of the pages joined (judged if it has 3 tokens) and of each page (judged if it
    has _QUALITY_MIN_TOKENS), each token judged once."""
    judged_pages = [_judged_tokens(text) for text in page_texts]
    bad_pages = [len(_BAD_CHARS.findall(text)) for text in page_texts]
    pages = [_quality(judged, bad, len(text), _QUALITY_MIN_TOKENS)
             for judged, bad, text in zip(judged_pages, bad_pages, page_texts)]
    length = sum(map(len, page_texts)) + max(0, len(page_texts) - 1)
    whole = _quality([verdict for judged in judged_pages for verdict in judged], sum(bad_pages), length, 3)
    return whole, pages


# In scripts without spaces each character is a token. A word keeps its combining marks (Arabic
# vowel signs, decomposed accents): they are part of it, not a break.
_WORDS = re.compile(f"[{_UNSPACED}]|(?:[^\\W{_UNSPACED}][\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670"
                    f"\u06d6-\u06ed\u0591-\u05c7\u0e31\u0e34-\u0e3a\u0e47-\u0e4e]*)+")
# Format characters: one reader writes them, another does not; they are not letters of a word.
# Zero-width ones and soft hyphens join (are dropped); bidi embeddings and isolates, which one
# reader puts around each run of another direction, separate.
_FORMAT_CHARS = re.compile("[\u00ad\u061c\u200b-\u200f\u2060-\u2064\ufeff]")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
# Three or more single letters in a row on one line: a letter-spaced word ("O P I N I O N"), which
# one reader splits at each wide gap and another does not. Joined, a capital after a small letter
# begins the next word ("H e l l o W o r l d").
_LETTER_SPACED = re.compile(r"(?<![^\W\d_])(?:[^\W\d_][ \t]+){2,}[^\W\d_](?![^\W\d_])")


def _join_letter_spaced(match: re.Match) -> str:
    letters = match.group().split()
    return "".join(f" {b}" if a.islower() and b.isupper() else b for a, b in zip([""] + letters, letters))


def text_words(text: str) -> set[str]:
    """The distinct words of `text` as readers of a PDF agree on them: NFKC-normalised (a ligature
    'ﬃ' is 'ffi', a full-width letter the letter), case-folded, format characters dropped, a
    letter-spaced word joined, a character each in scripts without spaces; a word and its reversal
    count as one (right-to-left and mirrored text come out in visual order from one reader and in
    logical order from another: the letters are the same, their direction is the reader's)."""
    return {min(word, word[::-1]) for word in _normalized_words(text)}


def _normalized_words(text: str) -> list[str]:
    """The words of `text` in order, as `text_words` has them but in the direction written."""
    import unicodedata
    text = _LETTER_SPACED.sub(_join_letter_spaced, _FORMAT_CHARS.sub("", _BIDI_CONTROLS.sub(" ", unicodedata.normalize("NFKC", text))))
    return _WORDS.findall(text.casefold())


def text_agreement(a: str, b: str) -> float:
    """Word Jaccard of two texts of one document (e.g. ours and the court's documentText, or
    pdftotext's): |shared words| / |words of either| (`text_words`); 1.0 when both have none."""
    words_a, words_b = text_words(a), text_words(b)
    if not words_a and not words_b:
        return 1.0
    return round(len(words_a & words_b) / len(words_a | words_b), 4)


# ----------------------------------------------------- page readings: garbage text and whole words

# Letters beyond Latin and its extensions: only they are looked up by script (a court filing has few).
_NON_LATIN_LETTER = re.compile(r"[^\x00-\u024f\W\d_]")
# Unicode names' first words that are one writing system (Japanese mixes kanji, kana and full-width
# forms; Korean hangul and hanja) or letter-like symbols any text may hold (mathematics): LATIN.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "BOPOMOFO": "CJK", "IDEOGRAPHIC": "CJK",
                  "FULLWIDTH": "CJK", "HALFWIDTH": "CJK", "KANGXI": "CJK", "MATHEMATICAL": "LATIN",
                  "BLACK-LETTER": "LATIN", "DOUBLE-STRUCK": "LATIN", "SCRIPT": "LATIN", "MODIFIER": "LATIN",
                  "PLANCK": "LATIN"}
# A line holding one letter of an alphabet (not a character of a script written without spaces,
# where one character is a word).
_SINGLE_LETTER_LINE = re.compile(rf"^[ \t]*[^\W\d_{_UNSPACED}][{_MARKS}]*[ \t]*$", re.M)
_TEXT_LINE = re.compile(r"^[ \t]*\S", re.M)
# Characters that stand for no letter: private use (a font's own glyph codes), replacement and
# control characters (codes read as characters).
_UNMAPPED_CHARS = re.compile("[\ue000-\uf8ff\ufffd\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


@functools.lru_cache(maxsize=1 << 12)
def _script(char: str) -> str:
    import unicodedata
    first = unicodedata.name(char, "?").split(" ", 1)[0]
    return _SCRIPT_GROUPS.get(first, first)


def scattered_letter_share(text: str) -> float:
    """The share of the non-Latin letters of `text` (0 when it has under 10) that are of neither
    its main non-Latin script nor Latin: Latin goes with any script, two others together are
    letters decoded through a broken character map (a CID font read as Unicode gives Oriya,
    Kannada, Greek and Arabic side by side)."""
    letters = _NON_LATIN_LETTER.findall(text)
    if len(letters) < 10:
        return 0.0
    counts = collections.Counter(map(_script, letters))
    counts.pop("LATIN", None)
    return round((sum(counts.values()) - max(counts.values(), default=0)) / len(letters), 4)


class PageMeasures(NamedTuple):
    """What the worker measured of one engine's text of one page."""
    quality: float | None          # text_quality, None when too short to judge
    scattered: float = 0.0         # scattered_letter_share
    single_letter_lines: int = 0   # lines holding one letter of an alphabet
    lines: int = 0                 # lines holding anything
    decoded: float | None = None   # characters per text object, where the engine counts them
    unmapped: float = 0.0          # share of its non-blank characters that stand for no letter


def measure_pages(page_texts: list[str], objects: list[tuple[int, int] | None]) -> tuple[float | None, list[PageMeasures]]:
    """(quality of the whole text, PageMeasures of each page); `objects`: (text objects,
    characters they gave) per page where the engine counts them."""
    whole, qualities = text_quality_by_page(page_texts)
    measures = []
    for text, quality, counted in zip(page_texts, qualities, objects):
        decoded = round(counted[1] / counted[0], 4) if counted and counted[0] >= _QUALITY_MIN_TOKENS else None
        unmapped = len(_UNMAPPED_CHARS.findall(text))
        measures.append(PageMeasures(quality, scattered_letter_share(text), len(_SINGLE_LETTER_LINE.findall(text)),
                                     len(_TEXT_LINE.findall(text)), decoded,
                                     round(unmapped / max(1, page_text_chars(text)), 4) if unmapped else 0.0))
    return whole, measures


# A page is poor text when its letters scatter over scripts (SCATTERED_LETTERS of its non-Latin
# letters), when most of its lines (and at least SINGLE_LETTER_RUN of them) are single letters
# (rotated or vertical runs read a glyph at a time), when most of its text objects gave no
# character or UNMAPPED_CHARS of its characters stand for no letter (a font without a usable map),
# or when it scores under MIN_TEXT_QUALITY. A page with
# SINGLE_LETTER_RUN single-letter lines or more, a third of its lines, is doubtful: the next engine
# reads it too, and the readings are compared.
SCATTERED_LETTERS = 0.15
UNMAPPED_CHARS = 0.3
SINGLE_LETTER_RUN = 5
DOUBTFUL_SINGLE_LETTERS = 0.3


def page_defect(page: PageMeasures, min_quality: float) -> str | None:
    """Why one engine's text of a page is poor ('scattered scripts', 'single letters',
    'undecoded', 'low quality'), or None."""
    if page.scattered >= SCATTERED_LETTERS:
        return "scattered scripts"
    if page.single_letter_lines >= SINGLE_LETTER_RUN and page.single_letter_lines * 2 >= page.lines:
        return "single letters"
    if (page.decoded is not None and page.decoded < 0.5) or page.unmapped >= UNMAPPED_CHARS:
        return "undecoded"
    if page.quality is not None and page.quality < min_quality:
        return "low quality"
    return None


def page_is_doubtful(page: PageMeasures, min_quality: float) -> bool:
    """Poor (`page_defect`), or with enough single-letter lines that another engine should read it too."""
    return page_defect(page, min_quality) is not None or (
        page.single_letter_lines >= SINGLE_LETTER_RUN
        and page.single_letter_lines >= DOUBTFUL_SINGLE_LETTERS * page.lines)


def _segments_into(word: str, vocabulary: set[str], start: int = 0, parts: int = 0) -> bool:
    """`word[start:]` is two or more (with `parts` before it) words of `vocabulary`, each of two letters or more."""
    if start == len(word):
        return parts >= 2
    return any(word[start:cut] in vocabulary and _segments_into(word, vocabulary, cut, parts + 1)
               for cut in range(len(word), start + 1, -1) if cut - start < len(word))


def word_wholeness(words: set[str], others: set[str], vocabulary: set[str] = frozenset()) -> tuple[int, int, int]:
    """(whole, fragments, joined) among the words of one reading of a page (`words`) that the other
    readings (`others`) lack. A joined word is two or more of the others' words (of two letters or
    more) run together ('thecourt'); a fragment is part of a word only the others have that is not
    joined ('beijin' of 'beijing'), and not a word of `vocabulary` (the words the readings share
    over the document's compared pages); a whole word is any other. Only words of three letters or
    more count: shorter ones, and words with digits, are formulas' as often as words'."""
    own, theirs = words - others, others - words
    pieces, own_pieces = others | vocabulary, words | vocabulary
    theirs_whole = [word for word in theirs if not (4 <= len(word) <= 40 and _segments_into(word, own_pieces))]
    whole = fragments = joined = 0
    for word in own:
        if len(word) < 3 or not word.isalpha():
            continue
        if 4 <= len(word) <= 40 and _segments_into(word, pieces):
            joined += 1
        elif word not in vocabulary and any(word in other for other in theirs_whole):
            fragments += 1
        else:
            whole += 1
    return whole, fragments, joined


class PageReading(NamedTuple):
    """One engine's text of one page and what was measured of it."""
    engine: str
    text: str
    measures: PageMeasures


@dataclass(frozen=True)
class PageChoice:
    """The reading kept for a page: its index among the page's readings, why, and whether every
    reading was poor (the page goes to OCR)."""
    index: int
    reason: str
    poor: bool = False


# Defects a reading of a page cannot have for good text: text drawn from a broken map, or a glyph
# at a time. A low score alone may be a table or code that every engine reads alike.
STRONG_DEFECTS = ("scattered scripts", "single letters", "undecoded")
# The reason of a page whose every reading was poor: it needs OCR, and without OCR text it is unreadable.
POOR_TEXT = "poor in every engine"
# Whole words (less fragments and words run together) by which a reading must beat the kept
# engine's to replace it: one or two words are the readers' different ways with formulas.
WHOLE_WORDS_MARGIN = 2


def choose_page_reading(readings: list[PageReading], kept: int, min_quality: float,
                        vocabulary: set[str] | None = None) -> PageChoice:
    """Which of a page's readings (in the chain's order) to keep; `kept` is the reading of the
    engine the document-level decision kept; `vocabulary` the words the readings share over the
    document's compared pages.

    A reading with no defect (`page_defect`) beats one scored low, which beats one with a strong
    defect (STRONG_DEFECTS). Among the best, readings with the same words keep `kept` (else the
    first); readings that differ keep the one whose words are whole (`word_wholeness`: whole words
    less fragments and words run together), `kept` unless another is better by WHOLE_WORDS_MARGIN.
    When every reading has a strong defect, the best scored is kept and the page is poor: it goes
    to OCR."""
    defects = [page_defect(reading.measures, min_quality) for reading in readings]
    tiers = [0 if defect is None else 2 if defect in STRONG_DEFECTS else 1 for defect in defects]
    best_tier = min(tiers)
    best = [index for index, tier in enumerate(tiers) if tier == best_tier]
    poor_ones = "; ".join(f"{readings[i].engine}: {defect}" for i, defect in enumerate(defects) if defect)
    if best_tier == 2:
        def score(index: int) -> tuple:
            quality = readings[index].measures.quality
            return (quality if quality is not None else -1.0, index == kept)
        return PageChoice(max(best, key=score), f"{POOR_TEXT} ({poor_ones})", poor=True)
    if len(readings) == 1:
        return PageChoice(0, "good text" if best_tier == 0 else f"the only reading ({poor_ones})")
    if len(best) == 1:
        return PageChoice(best[0], f"the others poor ({poor_ones})")
    words = {index: set(_normalized_words(readings[index].text)) for index in best}
    default = kept if kept in best else best[0]
    if all(words[index] == words[default] for index in best):
        return PageChoice(default, "engines agree")
    scores = {}
    for index in best:
        others = set().union(*(words[other] for other in best if other != index))
        whole, fragments, joined = word_wholeness(words[index], others, vocabulary or set())
        scores[index] = (whole - fragments - joined, fragments, joined)
    challenger = max(best, key=lambda index: (scores[index][0], index == default, -index))
    chosen = challenger if scores[challenger][0] >= scores[default][0] + WHOLE_WORDS_MARGIN else default
    counts = ", ".join(f"{readings[i].engine} {scores[i][0]:+d} ({scores[i][1]} fragments, {scores[i][2]} run together)"
                       for i in best)
    return PageChoice(chosen, ("whole words: " if chosen != default else "engines differ, kept: ") + counts)


def pages_to_reread(page_measures: list[list[PageMeasures]], tried: Iterable[str], engines: tuple[str, ...],
                    min_quality: float) -> tuple[str, tuple[int, ...]] | None:
    """(the next engine, the pages (0-based) it should read) after a document was kept: the pages
    whose every reading so far (`page_measures[page]`) is doubtful (`page_is_doubtful`), for the first
    engine of the chain not `tried` yet; None when no page is doubtful or no engine is left."""
    doubtful = tuple(page for page, readings in enumerate(page_measures)
                     if readings and all(page_is_doubtful(measures, min_quality) for measures in readings))
    left = [engine for engine in engines if engine not in set(tried)]
    return (left[0], doubtful) if doubtful and left else None


@dataclass(frozen=True)
class ExtractStep:
    """What to do after an engine's attempt: `next` engine, `keep` attempt number `index`, or
    `fail` (`permanent` or not) with `reason`."""
    action: str
    engine: str | None = None
    index: int = -1
    reason: str = ""
    permanent: bool = False


# Text quality is an estimate: text under SURE_TEXT_QUALITY (but over MIN_TEXT_QUALITY) is
# doubtful, and the next engine is tried too; a later engine's text replaces an acceptable earlier
# one only when its quality is higher by BETTER_TEXT_BY (a clear difference, not the estimate's noise).
SURE_TEXT_QUALITY = 0.7
BETTER_TEXT_BY = 0.2
# ...and when it has at least this share of the earlier one's word-like tokens (where counted).
WORDS_KEPT_SHARE = 0.8


def extraction_step(attempts: list[tuple[str, str, float | None]], engines: tuple[str, ...],
                    min_quality: float) -> ExtractStep:
    """The chain's decision after `attempts` ((engine, verdict, quality[, word-like tokens]) so far,
    in order).

    Good text (verdict ok, quality unknown or >= max(min_quality, SURE_TEXT_QUALITY)) is kept at
    once, unless an earlier engine gave acceptable text (then the two are weighed). Otherwise the next untried engine is tried, whatever the failure (another parser may read
    what one cannot), or the text was low (< min_quality) or doubtful (< SURE_TEXT_QUALITY).
    With none left the best ok text is kept even if its quality is low (it is all there is); an
    earlier text of at least min_quality stays unless a later one is better by BETTER_TEXT_BY and
    has WORDS_KEPT_SHARE of its word-like tokens or more (where they were counted).
    Failing that, the PDF fails, permanently when every engine gave a permanent verdict or died
    (at least one verdict being permanent; the reason named in the order of PERMANENT_VERDICTS),
    else transiently (a timeout, a lone crash, an OS error: retried in a later pass).
    """
    engine, verdict, quality = attempts[-1][:3]
    # An acceptable (doubtful) earlier text: the last one is weighed against it below.
    acceptable_before = any(attempt[1] == "ok" and (attempt[2] is None or attempt[2] >= min_quality)
                            for attempt in attempts[:-1])
    if verdict == "ok" and (quality is None or quality >= max(min_quality, SURE_TEXT_QUALITY)) \
            and not acceptable_before:
        return ExtractStep("keep", engine, len(attempts) - 1)
    tried = {attempt[0] for attempt in attempts}
    left = [candidate for candidate in engines if candidate not in tried]
    if left:
        return ExtractStep("next", left[0])
    readable = [index for index, attempt in enumerate(attempts) if attempt[1] == "ok"]
    if readable:
        def score(index: int) -> float:
            return attempts[index][2] if attempts[index][2] is not None else 1.0
        def words(index: int) -> int | None:
            return attempts[index][3] if len(attempts[index]) > 3 else None
        best = readable[0]
        for index in readable[1:]:
            margin = BETTER_TEXT_BY if score(best) >= min_quality else 0.0
            # Cleaner but missing words (an engine that skips form fields) is not better.
            fewer = margin and words(index) is not None and words(best) is not None \
                and words(index) < WORDS_KEPT_SHARE * words(best)
            if score(index) > score(best) and score(index) >= score(best) + margin and not fewer:
                best = index
        return ExtractStep("keep", attempts[best][0], best)
    verdicts = [attempt[1] for attempt in attempts]
    # A worker that died on bytes another engine called hopeless died of them (a parser aborting
    # at the memory cap on an inflate bomb): that is no reason to parse them again.
    transient = [verdict for verdict in verdicts if verdict not in PERMANENT_VERDICTS
                 and not (verdict == "crash" and set(verdicts) & set(PERMANENT_VERDICTS))]
    if transient:
        return ExtractStep("fail", reason=transient[0], permanent=False)
    return ExtractStep("fail", reason=next(v for v in PERMANENT_VERDICTS if v in verdicts), permanent=True)


# ---------------------------------------------------------------- workers


def _extract_cap_memory(extra_mib: int | None) -> None:
    """RLIMIT_AS = the address space the worker was forked with + extra_mib: a PDF that inflates
    past it raises MemoryError (verdict `too large`) or kills only this worker."""
    if not extra_mib:
        return
    try:
        import resource
        with open("/proc/self/statm") as handle:
            mapped = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = mapped + extra_mib * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError, ImportError) as exc:   # not Linux: no cap, said once per worker
        log_extract.debug("extract worker: no memory cap (%s)", exc)


# Latin ligature code points (U+FB00-FB06) as their letters: pypdf and poppler keep 'ﬁ' where the
# font maps a glyph to it, pdfium writes 'fi'; a search for "officers" must find both.
_LIGATURES = {0xfb00: "ff", 0xfb01: "fi", 0xfb02: "fl", 0xfb03: "ffi", 0xfb04: "ffl", 0xfb05: "st", 0xfb06: "st"}
_LIGATURE_CHARS = re.compile("[\ufb00-\ufb06]")


def _unligature(text: str) -> str:
    return text.translate(_LIGATURES) if _LIGATURE_CHARS.search(text) else text


def _engine_reads_pages(function: Callable) -> bool:
    """The engine takes `pages` (the page indices to read); one that does not reads them all."""
    import inspect
    try:
        return "pages" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _extract_run_engine(engine: str, pdf_path: str, pages: tuple[int, ...] | None = None) -> tuple:
    """One engine on one PDF (on `pages`, 0-based, when given), in the worker: ('ok', page facts,
    chars, utf8 text, quality, page measures) or (verdict, message)."""
    try:
        function = EXTRACT_ENGINE_FUNCTIONS[engine]
        if pages is None:
            entries = function(pdf_path)
        elif _engine_reads_pages(function):
            entries = function(pdf_path, pages=pages)
        else:
            every = function(pdf_path)
            entries = [every[index] for index in pages if index < len(every)]
        # A form feed separates pages in the text file: one inside a page's text would split it.
        page_texts = [_unligature(entry if isinstance(entry, str) else entry[0]).replace("\f", "\n")
                      for entry in entries]
        facts = [(page_text_chars(text), False if isinstance(entry, str) else bool(entry[1]),
                  entry[4] if not isinstance(entry, str) and len(entry) >= 5 else None)
                 for text, entry in zip(page_texts, entries)]
        text = join_page_texts(page_texts)
        # An engine that counts text objects and the characters they gave (pdfium): per page, and for
        # the whole text, when under half of them decoded most of the text is missing, however good
        # the rest looks.
        counted = [tuple(entry[2:4]) if not isinstance(entry, str) and len(entry) >= 4 else None for entry in entries]
        # A short text is judged on the tokens it has (at least 3): a one-line label decoded to the
        # wrong glyphs is as bad as a page of them.
        quality, measures = measure_pages(page_texts, counted)
        objects = sum(count[0] for count in counted if count)
        if objects >= _QUALITY_MIN_TOKENS:
            decoded = sum(count[1] for count in counted if count) / objects
            if decoded < 0.5:
                quality = round(min(decoded, quality if quality is not None else 1.0), 4)
        # A broken ToUnicode map can yield lone surrogates, which UTF-8 cannot hold: '?' each.
        return ("ok", facts, len(text), text.encode("utf-8", "replace"), quality, measures)
    except MemoryError:
        return ("too large", "MemoryError: over the worker's memory cap")
    except Exception as exc:  # any parser fault is this engine's verdict on this PDF
        return (classify_extract_error(exc), f"{type(exc).__name__}: {exc}"[:500])


def _extract_worker_main(connection, memory_mib: int | None = None) -> None:
    """A worker's loop: (pdf_path, engine, pages or None) in; the engine's reply plus finished_at out
    (finished_at: time.monotonic(), one clock for all processes)."""
    # Ctrl-C in a terminal reaches the whole process group; the supervisor decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A PDF that aborts an engine's native code kills this worker on purpose (the supervisor tries
    # the next engine); a faulthandler inherited from the parent (pytest, python -X faulthandler)
    # would print a page of traceback for each such expected death.
    faulthandler.disable()
    _extract_cap_memory(memory_mib)
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        pdf_path, engine, pages = task
        reply = _extract_run_engine(engine, pdf_path, pages)
        connection.send(reply + (time.monotonic(),))


@dataclass
class _ExtractSlot:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    tasks: collections.deque = field(default_factory=collections.deque)  # (key, path, engine, pages, sent at): unanswered
    started: float = 0.0   # when the worker could begin the head task


@dataclass(frozen=True)
class ExtractOutcome:
    """What became of one engine's attempt at one PDF (or at `page_numbers` of it): outcome `ok` (its
    UTF-8 text in `data`, one (chars, has_images, image cover or None) per page in `page_facts`, its
    `quality`, PageMeasures per page), a permanent verdict (encrypted, empty, too large, unparseable),
    or error, timeout, crash."""
    key: str
    outcome: str
    pages: int | None = None
    chars: int | None = None
    data: bytes | None = None
    error: str | None = None
    seconds: float = 0.0
    engine: str = ""
    page_facts: tuple = ()
    quality: float | None = None
    page_measures: tuple = ()                  # PageMeasures of each page read
    page_numbers: tuple[int, ...] | None = None   # the pages read (0-based), when not all of them
    kept_text: bool = False                    # `data` is the text the archive held, not this reading's


class ExtractWorkerPool:
    """WORKERS long-lived forked processes, each with its own pipe and its own time limit.

    Unlike ProcessPoolExecutor (which cannot cancel a running task and breaks
    entirely when one worker dies) each task here belongs to one process, so a
    hang or a crash costs that process alone: it is killed or reaped, a fresh
    one forked in its place, and the tasks queued behind it are handed out
    again. Each worker holds `depth` tasks, so it never waits for the
    supervisor between two PDFs; the time limit of a task runs from the moment
    its worker could begin it (the worker's previous answer, by the worker's
    own clock, or the send).

    The supervisor sleeps in one selector over every worker's pipe and exit
    sentinel, registered once per worker (not a selector built per check, as
    `Connection.poll` and `multiprocessing.connection.wait` do: that was most
    of the supervisor's CPU, taken from the workers' cores).
    """

    def __init__(self, workers: int, engines: str | tuple[str, ...], timeout: float, depth: int = 2,
                 memory_mib: int | None = None):
        self.engines = (engines,) if isinstance(engines, str) else tuple(engines)
        for engine in self.engines:
            _extract_check_engine(engine)
        _extract_preload(self.engines)
        self.engine = self.engines[0]      # of a task that names none
        self.memory_mib = memory_mib
        self.timeout = timeout
        self.depth = max(1, depth)
        self.replaced = 0
        self._mp = multiprocessing.get_context("fork")
        self._selector = selectors.DefaultSelector()
        self._slots = [self._start_slot() for _ in range(max(1, workers))]

    def _start_slot(self) -> _ExtractSlot:
        parent_end, child_end = self._mp.Pipe(duplex=True)
        process = self._mp.Process(target=_extract_worker_main, args=(child_end, self.memory_mib),
                                   name="kycourt-extract-worker", daemon=True)
        process.start()
        child_end.close()
        slot = _ExtractSlot(process, parent_end)
        self._selector.register(parent_end, selectors.EVENT_READ, slot)
        self._selector.register(process.sentinel, selectors.EVENT_READ, slot)
        return slot

    def _retire(self, slot: _ExtractSlot) -> None:
        """Stops watching the slot's worker and kills (or reaps) it."""
        for watched in (slot.connection, slot.process.sentinel):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(watched)
        slot.connection.close()
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join(5)

    def _replace(self, slot: _ExtractSlot, unsent: collections.deque) -> _ExtractSlot:
        """Kills or reaps the slot's worker and forks a fresh one in its place (returned); the tasks
        it never began (all but the head, which is the one that failed) go back to `unsent`."""
        if slot.tasks:
            slot.tasks.popleft()
            unsent.extendleft(task[:4] for task in reversed(slot.tasks))
        self._retire(slot)
        fresh = self._slots[self._slots.index(slot)] = self._start_slot()
        self.replaced += 1
        return fresh

    def run(self, tasks: Iterable[tuple], should_stop: Callable[[], bool] = lambda: False,
            followups: collections.deque | None = None) -> Iterator[ExtractOutcome]:
        """Yields one outcome per task (key, pdf_path[, engine[, pages]]) as they finish.

        `tasks` is read lazily, as workers have room, so the caller may produce
        them while earlier ones run. `followups` (a deque the caller may append
        to while it handles an outcome: the next engine of a chain) is served
        before `tasks`. Once `should_stop()` is true no new task is taken or sent
        (one taken as the stop came is dropped unsent); those already sent finish.
        """
        source = iter(tasks)
        unsent: collections.deque = collections.deque()   # tasks a replaced worker never began
        followups = collections.deque() if followups is None else followups
        exhausted = stopping = False
        while True:
            for index in range(len(self._slots)):
                while len(self._slots[index].tasks) < self.depth and not stopping:
                    stopping = should_stop()            # before making a task: a stop costs no more work
                    if stopping:
                        break
                    if followups:
                        unsent.appendleft(followups.popleft())
                    if not unsent:
                        if exhausted:
                            break
                        task = next(source, None)
                        if task is None:
                            exhausted = True
                            break
                        unsent.append(task)
                        stopping = should_stop()        # it came while the task was being made
                        if stopping:
                            break
                    self._send(self._slots[index], unsent.popleft(), unsent)
            busy = [slot for slot in self._slots if slot.tasks]
            if not busy:
                return
            wait_for = max(0.0, min(slot.started + self.timeout for slot in busy) - time.monotonic())
            ready: dict[int, bool] = {}     # id(slot) -> its pipe is readable (else only its exit sentinel)
            for key, _ in self._selector.select(wait_for):
                ready[id(key.data)] = ready.get(id(key.data), False) or key.fileobj is key.data.connection
            # Judged as of the wake-up: the consumer may take a while over each outcome yielded below.
            now = time.monotonic()
            for slot in list(self._slots):
                if id(slot) in ready and not slot.tasks:
                    # An idle worker ended (the OOM killer, a stray kill): nothing of ours was in it.
                    log_extract.warning("extract worker %d exited while idle (code %s); replaced",
                                        slot.process.pid, slot.process.exitcode)
                    self._replace(slot, unsent)
            for slot in busy:
                if id(slot) in ready:
                    yield self._collect(slot, ready[id(slot)], unsent)
                elif now - slot.started >= self.timeout:
                    if slot.connection.poll():           # it answered just after the wake-up
                        yield self._collect(slot, True, unsent)
                        continue
                    elapsed = round(now - slot.started, 4)
                    key, engine, pages = slot.tasks[0][0], slot.tasks[0][2], slot.tasks[0][3]
                    self._replace(slot, unsent)
                    yield ExtractOutcome(key, "timeout", seconds=elapsed, engine=engine, page_numbers=pages,
                                         error=f"no result within {self.timeout:g} s; worker killed")

    def _send(self, slot: _ExtractSlot, task: tuple, unsent: collections.deque) -> None:
        sent_at = time.monotonic()
        if not slot.tasks:
            if not slot.process.is_alive():
                # It ended while idle, before the selector said so: never blame this task for that.
                slot = self._replace(slot, unsent)
            slot.started = sent_at
        key, path = task[0], task[1]
        engine = task[2] if len(task) > 2 else self.engine
        pages = task[3] if len(task) > 3 else None
        slot.tasks.append((key, path, engine, pages, sent_at))
        try:
            slot.connection.send((path, engine, pages))
        except OSError:
            pass  # the worker is gone: its exit sentinel wakes the supervisor, which reports the crash

    def _collect(self, slot: _ExtractSlot, readable: bool, unsent: collections.deque) -> ExtractOutcome:
        """The head task's outcome: the worker's answer, or its crash (its pipe ended, or it exited)."""
        key, engine, pages = slot.tasks[0][0], slot.tasks[0][2], slot.tasks[0][3]
        try:
            # Only the exit sentinel woke us: the worker may still have answered before it died.
            reply = slot.connection.recv() if readable or slot.connection.poll() else None
        except (EOFError, OSError):
            reply = None
        if reply is None:
            return self._crashed(slot, key, engine, pages, round(time.monotonic() - slot.started, 4), unsent)
        slot.tasks.popleft()
        elapsed = round(max(0.0, reply[-1] - slot.started), 4)
        # The next task began when this answer left, or when it was sent, whichever came later.
        slot.started = max(reply[-1], slot.tasks[0][4]) if slot.tasks else reply[-1]
        if reply[0] == "ok":
            return ExtractOutcome(key, "ok", pages=len(reply[1]), chars=reply[2], data=reply[3], seconds=elapsed,
                                  engine=engine, page_facts=tuple(reply[1]), quality=reply[4],
                                  page_measures=tuple(reply[5]), page_numbers=pages)
        return ExtractOutcome(key, reply[0], error=reply[1], seconds=elapsed, engine=engine, page_numbers=pages)

    def _crashed(self, slot: _ExtractSlot, key: str, engine: str, pages: tuple | None, elapsed: float,
                 unsent: collections.deque) -> ExtractOutcome:
        slot.process.join(5)
        code = slot.process.exitcode
        if code is not None and code < 0:
            try:
                cause = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                cause = f"killed by signal {-code}"
        else:
            cause = f"exited with status {code}"
        self._replace(slot, unsent)
        return ExtractOutcome(key, "crash", error=f"extract worker {cause}", seconds=elapsed, engine=engine,
                              page_numbers=pages)

    def close(self) -> None:
        for slot in self._slots:
            if slot.tasks:   # abandoned mid-task (an exception upstream): no need to wait
                slot.process.kill()
            else:
                try:
                    slot.connection.send(None)
                except OSError:
                    pass
        deadline = time.monotonic() + 5
        for slot in self._slots:
            slot.process.join(max(0.0, deadline - time.monotonic()))
            self._retire(slot)
        self._selector.close()

    def __enter__(self) -> "ExtractWorkerPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# ------------------------------------------------------------------ stage


@dataclass
class ExtractResult:
    attempted: int = 0        # documents attempted (reuses included)
    extracted: int = 0        # documents now `extracted`
    failed_attempts: int = 0  # documents whose attempt failed
    exhausted: int = 0        # of those, documents that have now used up their attempts
    pages: int = 0            # pages of the PDFs extracted (each sha256 once)
    chars: int = 0
    seconds: float = 0.0
    engine: str = ""          # the chain, comma-separated
    pdfs: int = 0             # distinct PDFs handed to the workers
    reused: int = 0           # documents that reused an extracted twin's text
    stopped: bool = False     # the clock asked to stop before the queue was done
    permanent: int = 0        # documents failed with a verdict no engine changes (left the queue)
    fallbacks: int = 0        # engine attempts after the first of a PDF (failure, timeout, crash, low quality)
    pages_reread: int = 0     # pages a further engine read because every reading so far was doubtful
    pages_other_engine: int = 0   # pages whose kept text is not the engine's the document kept
    pages_poor_text: int = 0  # pages poor in every engine: they need OCR
    unreadable_pages: int = 0     # in the archive: pages poor in every engine that OCR gave no text (yet)
    kept_by: dict = field(default_factory=dict)     # engine -> PDFs whose text it gave
    pages_needing_ocr: int = 0
    court_text_checked: int = 0   # agreements with the court's own text recorded


def extract(ctx: Context) -> ExtractResult:
    """Runs the extract queue to its end (or until the clock says stop)."""
    cfg, db = ctx.cfg, ctx.open_database()
    started = time.monotonic()
    result = ExtractResult(engine=",".join(cfg.EXTRACT_ENGINES))
    queued = WorkQueues(db).extract_queue_size(cfg)
    if queued == 0 or cfg.DRY_RUN:  # a dry run touches neither the PDFs nor the store
        if not cfg.DRY_RUN:
            result.court_text_checked = court_text_agreements(ctx)   # court texts found since
            result.unreadable_pages = TextRecords(db).unreadable_text_pages(POOR_TEXT)
        return result
    (ctx.workspace / "text").mkdir(parents=True, exist_ok=True)
    bar = progress(cfg, queued, "extract")
    try:
        with ExtractWorkerPool(cfg.WORKERS, cfg.EXTRACT_ENGINES, cfg.EXTRACT_TIMEOUT,
                               memory_mib=cfg.EXTRACT_MEMORY_MB) as pool:
            for number in range(1, cfg.MAX_EXTRACT_ATTEMPTS + 1):
                if number > 1:
                    # A failed document stays queued until its attempts are spent:
                    # retry it in this run, one pass per attempt, so a run ends done.
                    left = WorkQueues(db).extract_queue_size(cfg)
                    if left == 0:
                        break
                    bar.total = (bar.total or 0) + left
                _ExtractPass(ctx, result, bar).run(pool)
                if result.stopped:
                    break
    finally:
        bar.close()
    if not result.stopped:
        result.court_text_checked = court_text_agreements(ctx)
    result.unreadable_pages = TextRecords(db).unreadable_text_pages(POOR_TEXT)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def court_text_agreements(ctx: Context, batch: int = 500) -> int:
    """Records, for each extracted document whose court text (`court_text/<sha256>.txt`, the
    court's own documentText) the workspace holds, the word agreement of our best text
    (c83_best_text, the court's left out of the choice) with it; returns how many were recorded.
    A document whose files are not local is left for a later run."""
    from .c06_layout import court_text_store_name
    from .c83_best_text import best_text_name, read_text
    db, recorded, after = ctx.db, 0, 0
    while not ctx.clock.should_stop():
        rows = DerivedRecords(db).court_text_agreement_queue(batch, after)
        if not rows:
            break
        agreements = []
        for row in rows:
            ours = read_text(ctx.workspace, best_text_name(row, ctx.cfg.MIN_TEXT_QUALITY, with_court_text=False))
            theirs = read_text(ctx.workspace, court_text_store_name(row["court_sha256"]))
            if ours is not None and theirs is not None:
                agreements.append((text_agreement(ours.decode("utf-8", "replace"), theirs.decode("utf-8", "replace")),
                                   row["document_id"]))
        DerivedRecords(db).record_court_text_agreement(agreements)
        recorded += len(agreements)
        after = rows[-1]["rowid"]
    if recorded:
        log_extract.info("court text: agreement of %d extracted texts with the court's own recorded", recorded)
    return recorded


def _outcome_page_texts(outcome: ExtractOutcome) -> list[str]:
    text = outcome.data.decode("utf-8", "replace") if outcome.data else ""
    return text.split("\f") if text else [""] * (outcome.pages or 0)


def _attempt_page_measures(attempts: list[ExtractOutcome], pages: int) -> list[list[PageMeasures]]:
    """Per page of the document, the PageMeasures of each ok attempt's reading of it, in the chain's order."""
    measures: list[list[PageMeasures]] = [[] for _ in range(pages)]
    for attempt in attempts:
        if attempt.outcome == "ok":
            read = range(pages) if attempt.page_numbers is None else attempt.page_numbers
            for page, page_measures in zip(read, attempt.page_measures):
                if page < pages:
                    measures[page].append(page_measures)
    return measures


def assemble_kept_text(attempts: list[ExtractOutcome], kept_index: int,
                       min_quality: float) -> tuple[ExtractOutcome, list[tuple[str, str, bool]]]:
    """The document's text, page by page from the reading `choose_page_reading` keeps, and per page
    (engine, why, poor). `attempts[kept_index]` (a reading of every page) is the document-level
    choice; when every page keeps it, it is returned as it is. Otherwise the text's engine names
    the engines that gave pages ('pypdfium2+pypdf'), each page's facts are its kept reading's (its
    images seen by any reading, its image cover as the first that measured it), and its quality is
    the joined text's."""
    kept = attempts[kept_index]
    readers = [attempt for attempt in attempts if attempt.outcome == "ok"]
    if len(readers) == 1:   # one reading of each page: its measures decide, its text is not needed
        choices = []
        for measures in kept.page_measures:
            if page_defect(measures, min_quality) is None:
                choices.append((kept.engine, "good text", False))
            else:
                choice = choose_page_reading([PageReading(kept.engine, "", measures)], 0, min_quality)
                choices.append((kept.engine, choice.reason, choice.poor))
        return kept, choices
    texts = {id(attempt): _outcome_page_texts(attempt) for attempt in readers}
    per_page: list[list[tuple[ExtractOutcome, int]]] = [[] for _ in range(kept.pages or 0)]
    for attempt in readers:
        read = range(attempt.pages or 0) if attempt.page_numbers is None else attempt.page_numbers
        for position, page in enumerate(read):
            if page < len(per_page) and position < len(texts[id(attempt)]):
                per_page[page].append((attempt, position))
    readings = [[PageReading(attempt.engine, texts[id(attempt)][position], attempt.page_measures[position])
                 for attempt, position in page] for page in per_page]
    # The dictionary whole words are judged by: the words every reading of a compared page has.
    vocabulary: set[str] = set()
    for page in readings:
        if len(page) > 1:
            vocabulary |= set.intersection(*(set(_normalized_words(reading.text)) for reading in page))
    page_texts, facts, measures, choices = [], [], [], []
    for page, page_readings in zip(per_page, readings):
        kept_position = next(index for index, (attempt, _) in enumerate(page) if attempt is kept)
        choice = choose_page_reading(page_readings, kept_position, min_quality, vocabulary)
        attempt, position = page[choice.index]
        chars, _, _ = attempt.page_facts[position]
        page_facts = [reader.page_facts[at] for reader, at in page]
        covers = [fact[2] for fact in page_facts if fact[2] is not None]
        page_texts.append(page_readings[choice.index].text)
        facts.append((chars, any(fact[1] for fact in page_facts), covers[0] if covers else None))
        measures.append(attempt.page_measures[position])
        choices.append((attempt.engine, choice.reason, choice.poor))
    engines = [engine for engine in dict.fromkeys(attempt.engine for attempt in readers)
               if any(chosen == engine for chosen, _, _ in choices)]
    if engines == [kept.engine]:
        return kept, choices
    text = join_page_texts(page_texts)
    return dataclasses.replace(kept, engine="+".join(engines), data=text.encode("utf-8", "replace"),
                               chars=len(text), page_facts=tuple(facts), page_measures=tuple(measures),
                               quality=text_quality(text, min_tokens=3)), choices


# Outcomes committed per transaction: one commit per PDF costs the supervisor
# CPU the workers need on a 2-core machine; a kill loses at most these
# commits, and their PDFs are extracted again.
_EXTRACT_COMMIT_EVERY = 32


class _ExtractPass:
    """One pass over the extract queue: each queued document attempted at most once.

    The queue is read EXTRACT_BATCH rows at a time (keyset by rowid) as the
    workers make room, so they never wait for a batch boundary. Each distinct
    sha256 goes to the workers once a pass; a document whose sha256 is already
    on its way (sent, or saved and not yet committed) joins that PDF's outcome,
    one whose PDF failed in this pass is given the same failure (its one
    attempt of the pass), and one whose sha256 an `extracted` document holds
    reuses its text.
    """

    def __init__(self, ctx: Context, result: ExtractResult, bar):
        self.ctx, self.result, self.bar = ctx, result, bar
        self.waiting: dict[str, list] = {}     # sha256 -> rows its outcome applies to, until committed
        self.finished: list = []               # (rows, outcome, attempts, page choices) extracted, text not yet saved
        self.handed_out = False                # every queued PDF is with the workers: the pass's tail
        self.committed: set[str] = set()       # sha256 committed `extracted` in this pass
        self.failed: dict[str, _ExtractFailure] = {}   # sha256 whose PDF failed in this pass
        self.text_folder = os.path.join(ctx.workspace, "text")
        self.chains: dict[str, tuple[str, list[ExtractOutcome]]] = {}   # sha256 -> (path, attempts so far)
        self.followups: collections.deque = collections.deque()        # (sha256, path, next engine)

    def run(self, pool: ExtractWorkerPool) -> None:
        ctx, cfg, result = self.ctx, self.ctx.cfg, self.result
        try:
            for outcome in pool.run(self.tasks(), should_stop=ctx.clock.should_stop, followups=self.followups):
                path, attempts = self.chains[outcome.key]
                attempts.append(outcome)
                # The document-level decision weighs the readings of every page; a reading of some
                # pages only (a page reread) is weighed page by page below.
                whole = [a for a in attempts if a.page_numbers is None]
                # With two texts to weigh, how many words each has (counted only then: it is rare).
                step = extraction_step([(a.engine, a.outcome, a.quality) + (
                    (word_like_count(a.data.decode("utf-8", "replace")) if a.outcome == "ok" else None,)
                    if len(whole) > 1 else ()) for a in whole], cfg.EXTRACT_ENGINES,
                                       cfg.MIN_TEXT_QUALITY)
                if step.action == "next":
                    log_extract.info("extract %s: %s gave %s%s; trying %s", outcome.key[:12], outcome.engine,
                                     outcome.outcome, f" (quality {outcome.quality})" if outcome.outcome == "ok"
                                     else f" ({outcome.error})", step.engine)
                    result.fallbacks += 1
                    self.followups.append((outcome.key, path, step.engine))
                    continue
                if step.action == "keep":
                    kept = whole[step.index]
                    reread = pages_to_reread(_attempt_page_measures(attempts, kept.pages or 0),
                                             {a.engine for a in attempts}, cfg.EXTRACT_ENGINES, cfg.MIN_TEXT_QUALITY)
                    if reread is not None:
                        engine, pages = reread
                        log_extract.info("extract %s: %s read pages %s doubtfully; %s reads them too",
                                         outcome.key[:12], kept.engine, ", ".join(str(p + 1) for p in pages), engine)
                        result.pages_reread += len(pages)
                        self.followups.append((outcome.key, path, engine, pages))
                        continue
                del self.chains[outcome.key]
                if step.action == "fail":
                    sha_rows = self.waiting.pop(outcome.key)
                    failure = self.failed[outcome.key] = _ExtractFailure(step.reason, step.permanent, attempts)
                    log_extract.warning("extract %s (%s): %s%s after %s", outcome.key[:12], sha_rows[0]["document_id"],
                                        step.reason, " (permanent)" if step.permanent else "",
                                        "; ".join(f"{a.engine} {a.outcome}: {a.error}" for a in attempts))
                    _extract_record_failure(ctx, sha_rows, failure, result, self.bar)
                    continue
                kept, choices = assemble_kept_text(attempts, attempts.index(whole[step.index]), cfg.MIN_TEXT_QUALITY)
                result.pages_other_engine += sum(engine != whole[step.index].engine for engine, _, _ in choices)
                self.finished.append((self.waiting[outcome.key], kept, attempts, choices))
                # In the tail, each as it comes: the last group's save and commit would otherwise
                # run alone after the last PDF, on idle cores.
                if len(self.finished) >= _EXTRACT_COMMIT_EVERY or self.handed_out:
                    self.save()
        finally:
            self.save()
        if ctx.clock.should_stop():
            result.stopped = True

    def tasks(self) -> Iterator[tuple[str, str]]:
        """(sha256, pdf path) for each PDF the workers must read, batch after batch."""
        ctx, cfg, result, bar = self.ctx, self.ctx.cfg, self.result, self.bar
        after_rowid = 0
        while not ctx.clock.should_stop():
            rows = WorkQueues(ctx.db).extract_queue(cfg, cfg.EXTRACT_BATCH, after_rowid)
            if not rows:
                self.handed_out = True
                return
            after_rowid = rows[-1]["rowid"]
            # One query for the batch; a twin committed since then was in `waiting` at that moment.
            twins = TextRecords(ctx.db).extracted_twins(row["sha256"] for row in rows if row["sha256"])
            for row in rows:
                sha = row["sha256"]
                if not sha:
                    _extract_record_failure(ctx, [row], _ExtractFailure.of(
                        "error", "no sha256 recorded for a downloaded document"), result, bar)
                    continue
                if sha in self.waiting:
                    self.waiting[sha].append(row)
                    continue
                if sha in self.failed:        # the same PDF, one attempt per pass: its outcome again
                    _extract_record_failure(ctx, [row], self.failed[sha], result, bar, again=True)
                    continue
                twin = twins.get(sha) or (TextRecords(ctx.db).extracted_twin(sha) if sha in self.committed else None)
                if twin is not None and _extract_reuse_twin(ctx, sha, row, twin, result, bar):
                    continue
                pdf_path, problem = _extract_local_pdf(ctx, sha, row)
                if problem is not None:
                    _extract_record_failure(ctx, [row], _ExtractFailure.of("error", problem), result, bar)
                    continue
                self.waiting[sha] = [row]
                self.chains[sha] = (pdf_path, [])
                result.pdfs += 1
                yield sha, pdf_path, cfg.EXTRACT_ENGINES[0]
            log_extract.info("extract: a batch of %d documents handed out; so far %d extracted, %d failed "
                             "attempts, %d pages (%s, %d workers)", len(rows), result.extracted,
                             result.failed_attempts, result.pages, ",".join(cfg.EXTRACT_ENGINES), cfg.WORKERS)

    def save(self) -> None:
        """Saves the finished texts and commits them; a save's error (a full disk) is raised, and
        those documents keep their attempt.

        In the stage's own thread: a saver thread used to overlap this with the dispatch of PDFs,
        but each worker holds queued tasks (`depth`), so the workers never wait for it, and on 2
        cores its CPU is the workers' anyway (bench/threads.py: 1.4 ms a document)."""
        finished, self.finished = self.finished, []
        if not finished:
            return
        finished = [(rows, _extract_held_text(self.ctx, rows, outcome), attempts, choices)
                    for rows, outcome, attempts, choices in finished]
        self._save([outcome for _, outcome, _, _ in finished])
        _extract_commit_saved(self.ctx, finished, self.result, self.bar)
        for _, outcome, _, _ in finished:
            self.waiting.pop(outcome.key, None)
            self.committed.add(outcome.key)

    def _save(self, outcomes: list[ExtractOutcome]) -> None:
        """The texts to `text/<sha256>.txt` (a kept one is there already: `_extract_held_text`), then
        to the store as one group."""
        items = []
        for outcome in outcomes:
            text_path = os.path.join(self.text_folder, f"{outcome.key}.txt")
            # Atomic, no fsync: the store's copy is the durable one; when the store lags, the
            # local files are synced below.
            if not outcome.kept_text:
                atomic_write(text_path, outcome.data)
            items.append((text_store_name(outcome.key), text_path))
        held = self.ctx.mirror.put_many(items)
        lagging = [path for name, path in items if not held.get(name)]
        try:
            sync_files(lagging)    # the store lags: until it catches up these files are the only copy
        except OSError as exc:
            raise_if_disk_full(exc, lagging[0])
            raise


def _extract_attempt_entries(rows: list, attempts: list[ExtractOutcome], kept: ExtractOutcome | None,
                             page_engines: Iterable[str] = ()) -> list[dict]:
    """extraction_log rows of a chain's attempts other than the kept one, for each document of the PDF:
    a text that was not kept is `low quality`, one that gave some pages of a text read by several
    engines (`page_engines`: the engine of each kept page) is `pages kept`."""
    entries, page_engines = [], list(page_engines)
    for attempt in attempts:
        if attempt is kept:
            continue
        outcome, error = attempt.outcome, attempt.error
        if attempt.outcome == "ok":
            kept_pages = [number for number, engine in enumerate(page_engines, start=1) if engine == attempt.engine]
            outcome = "pages kept" if kept_pages else "low quality"
            error = f"text quality {attempt.quality}" + (
                f"; read pages {', '.join(str(page + 1) for page in attempt.page_numbers)}"
                if attempt.page_numbers is not None else "") + (
                f"; kept pages {', '.join(map(str, kept_pages))}" if kept_pages else "")
        entries.extend({"document_id": row["document_id"], "sha256": attempt.key,
                        "attempt": row["extract_attempts"] + 1, "engine": attempt.engine, "outcome": outcome,
                        "pages": attempt.pages, "chars": attempt.chars, "seconds": attempt.seconds,
                        "error": error, "quality": attempt.quality} for row in rows)
    return entries


def _extract_commit_saved(ctx: Context, finished: list, result: ExtractResult, bar) -> None:
    if not finished:
        return
    cfg = ctx.cfg
    entries, others, pages = [], [], []
    for sha_rows, outcome, attempts, choices in finished:
        scans = [page_needs_ocr(chars, has_images, cfg.SCANNED_CHARS_PER_PAGE, cover)
                 for chars, has_images, cover in outcome.page_facts]
        # A page poor in every engine needs OCR as a scan does, and so does one whose text a kept
        # text lacks (OCR is then the only way it is found); only scans make a PDF likely scanned.
        lacking = (pages_a_kept_text_lacks(outcome.data.decode("utf-8", "replace"),
                                           [chars for chars, _, _ in outcome.page_facts])
                   if outcome.kept_text else [False] * len(scans))
        flags = [scan or poor or lacks for scan, (_, _, poor), lacks in zip(scans, choices, lacking)]
        needing = sum(flags)
        result.pages_needing_ocr += needing
        result.pages_poor_text += sum(poor for _, _, poor in choices)
        result.kept_by[outcome.engine] = result.kept_by.get(outcome.engine, 0) + 1
        pages.extend((outcome.key, number, chars, int(has_images), cover, int(needs), engine, reason)
                     for number, ((chars, has_images, cover), needs, (engine, reason, _))
                     in enumerate(zip(outcome.page_facts, flags, choices), start=1))
        # Attempts before the kept one first, so the log reads in the order they ran.
        others.extend(_extract_attempt_entries(sha_rows, attempts, outcome,
                                               [engine for engine, _, _ in choices] if "+" in outcome.engine else ()))
        entries.extend(
            {"document_id": row["document_id"], "sha256": outcome.key, "attempt": row["extract_attempts"] + 1,
             "engine": outcome.engine, "pages": outcome.pages, "chars": outcome.chars,
             "seconds": outcome.seconds, "quality": outcome.quality,
             "pages_needing_ocr": needing, "likely_scanned": is_likely_scanned(sum(scans))}
            for row in sha_rows)
    TextRecords(ctx.db).record_extracted(entries, attempts=others, pages=pages)
    documents = sum(len(sha_rows) for sha_rows, _, _, _ in finished)
    result.attempted += documents
    result.extracted += documents
    result.pages += sum(outcome.pages for _, outcome, _, _ in finished)
    result.chars += sum(outcome.chars for _, outcome, _, _ in finished)
    bar.update(documents)


def _extract_held_text(ctx: Context, rows: list, outcome: ExtractOutcome) -> ExtractOutcome:
    """`outcome` with the text the archive already holds under its PDF's name, for a document
    extracted before (an adopted row sent back to have its pages measured: a committed text is
    never rewritten), the workspace's or else the store's. The pages' facts stay this reading's;
    the characters and quality become the kept text's. A document never extracted keeps this
    reading: a file under its name is what an attempt cut short wrote, and is written again."""
    from .c83_best_text import fetch_into_workspace, read_text
    if all(row["extracted_chars"] is None for row in rows):
        return outcome
    held = read_text(ctx.workspace, text_store_name(outcome.key), fetch_into_workspace(ctx))
    if held is None or held == outcome.data:
        return outcome
    text = held.decode("utf-8", "replace")
    log_extract.info("extract %s: the archive holds its text already (%d characters): kept, pages measured",
                     outcome.key[:12], len(text))
    return dataclasses.replace(outcome, data=held, chars=len(text), quality=text_quality(text, min_tokens=3),
                               kept_text=True)


def _extract_reuse_twin(ctx: Context, sha: str, row, twin, result: ExtractResult, bar) -> bool:
    """Applies an extracted twin's figures when its text file is at hand (locally or from the store)."""
    text_path = ctx.workspace / "text" / f"{sha}.txt"
    if not text_path.is_file() and not ctx.mirror.fetch(text_store_name(sha), text_path):
        return False  # nothing to trust: extract again
    ctx.mirror.put(text_store_name(sha), text_path)
    TextRecords(ctx.db).record_extracted([{"document_id": row["document_id"], "sha256": sha, "attempt": row["extract_attempts"] + 1,
                              "engine": f"reused:{twin['document_id']}", "pages": twin["pages"],
                              "chars": twin["extracted_chars"], "seconds": 0.0, "quality": twin["text_quality"],
                              "pages_needing_ocr": twin["pages_needing_ocr"],
                              "extracted_by_ocr": twin["extracted_by_ocr"], "ocr_pages": twin["ocr_pages"],
                              "likely_scanned": bool(twin["likely_scanned"])}])
    result.attempted += 1
    result.extracted += 1
    result.reused += 1
    bar.update(1)
    return True


def _extract_local_pdf(ctx: Context, sha: str, row) -> tuple[str | None, str | None]:
    """The PDF's path in the workspace, fetched from the store if it is missing; or why there is none."""
    relative = row["local_pdf"] or pdf_store_name(sha)
    path = os.path.join(ctx.workspace, relative)
    if os.path.isfile(path):
        return path, None
    # Through the mirror: its lock keeps Drive calls off the checkpointer's thread.
    if not ctx.mirror.fetch(pdf_store_name(sha), path):
        return None, f"PDF missing in the workspace ({relative}) and not in the store"
    log_extract.debug("extract: fetched %s from the store", relative)
    return path, None


@dataclass(frozen=True)
class _ExtractFailure:
    """A PDF's failed chain: its reason (a verdict), whether it is permanent, and the attempts."""
    reason: str
    permanent: bool
    attempts: tuple | list = ()
    message: str = ""

    @classmethod
    def of(cls, reason: str, message: str) -> "_ExtractFailure":
        return cls(reason, False, (), message)

    def error(self) -> str:
        if self.message:
            return self.message
        return "; ".join(f"{attempt.engine} {attempt.outcome}: {attempt.error}" for attempt in self.attempts)


def _extract_record_failure(ctx: Context, rows: list, failure: _ExtractFailure, result: ExtractResult, bar,
                            again: bool = False) -> None:
    """Each engine's attempt to extraction_log, then the documents' failed attempt: a permanent
    verdict spends every attempt (the document leaves the queue with its reason), a transient one
    spends one. `again`: a twin of a PDF that failed earlier in this pass (not parsed again)."""
    db, cfg = ctx.db, ctx.cfg
    if failure.attempts and not again:
        entries = _extract_attempt_entries(rows, list(failure.attempts), None)
    else:
        entries = [{"document_id": row["document_id"], "sha256": row["sha256"], "attempt": row["extract_attempts"] + 1,
                    "engine": ",".join(cfg.EXTRACT_ENGINES), "outcome": failure.reason, "pages": None, "chars": None,
                    "seconds": 0.0, "error": failure.error(), "quality": None} for row in rows]
    with db.transaction():
        TextRecords(db).log_extraction_attempts(entries)
        for row in rows:
            TextRecords(db).mark_extract_failed(row["document_id"], f"extract {failure.reason}: {failure.error()}",
                                   reason=failure.reason if failure.permanent else None,
                                   spend_all=cfg.MAX_EXTRACT_ATTEMPTS if failure.permanent else None)
    result.attempted += len(rows)
    result.failed_attempts += len(rows)
    if failure.permanent:
        result.permanent += len(rows)
        result.exhausted += len(rows)
    else:
        result.exhausted += sum(row["extract_attempts"] + 1 >= cfg.MAX_EXTRACT_ATTEMPTS for row in rows)
    bar.update(len(rows))
