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
  quality; verdicts: ok, low quality, encrypted, empty, too large,
  unparseable, timeout, crash, error), all under the document's one attempt.
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
  layer is `extracted` with an empty file and 0 chars.
- Per page, the `pages` table holds the kept engine's facts (chars, has
  images, image_cover: the share of the page its images cover, as pdfium
  measures it; needs_ocr). A page needs OCR when it shows an image (covering
  at least SCAN_IMAGE_COVER of it, where measured) and has fewer than
  SCANNED_CHARS_PER_PAGE non-blank characters (no text layer); a
  born-digital page with little text and no image, or only a logo, does not.
  `documents.pages_needing_ocr` counts them and `likely_scanned` is "some page
  needs OCR"; the `ocr` stage (c85_ocr) acts on them. `text_quality` of the
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
from typing import Callable, Iterable, Iterator

from .c00_config import ConfigError
from .c05_durable import atomic_write, raise_if_disk_full, sync_files
from .c20_store import pdf_store_name, text_store_name
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


def _extract_pages_pypdf(pdf_path: str) -> list[tuple[str, bool]]:
    import pypdf
    reader = pypdf.PdfReader(pdf_path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise ExtractionFailure("encrypted", "a user password is needed (the empty one does not open it)")
    pages = []
    for page in reader.pages:
        resources = page.get("/Resources")
        pages.append((page.extract_text() or "", _pypdf_has_images(resources.get_object() if resources else None)))
    return pages


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


def _extract_pages_pypdfium2(pdf_path: str) -> list[tuple[str, bool]]:
    import pypdfium2
    import pypdfium2.raw as pdfium_c
    try:
        document = pypdfium2.PdfDocument(pdf_path)   # tries the empty user password itself
    except pypdfium2.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ExtractionFailure("encrypted", f"a user password is needed ({exc})") from None
        raise
    try:
        pages = []
        for index in range(len(document)):
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
                pages.append((text, has_images, text_objects, text_page.count_chars(), cover))
            finally:
                text_page.close()
                page.close()
        return pages
    finally:
        document.close()


EXTRACT_ENGINE_FUNCTIONS: dict[str, Callable[[str], list]] = {
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


def page_needs_ocr(chars: int, has_images: bool, chars_per_page: int, image_cover: float | None = None) -> bool:
    """A page that shows an image and has (next to) no text layer: a scan. A born-digital page
    with little text and no image, or only a small one (images covering under SCAN_IMAGE_COVER
    of the page, when the engine measured it), is not one."""
    return (bool(has_images) and chars < max(1, chars_per_page)
            and (image_cover is None or image_cover >= SCAN_IMAGE_COVER))


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
    judged = _judged_tokens(text)
    if len(judged) < min_tokens:
        return None
    share = sum(judged) / len(judged)
    bad = len(_BAD_CHARS.findall(text))
    return round(max(0.0, share - 2 * bad / max(1, len(text))), 4)


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
    import unicodedata
    text = _LETTER_SPACED.sub(_join_letter_spaced, _FORMAT_CHARS.sub("", _BIDI_CONTROLS.sub(" ", unicodedata.normalize("NFKC", text))))
    return {min(word, word[::-1]) for word in _WORDS.findall(text.casefold())}


def text_agreement(a: str, b: str) -> float:
    """Word Jaccard of two texts of one document (e.g. ours and the court's documentText, or
    pdftotext's): |shared words| / |words of either| (`text_words`); 1.0 when both have none."""
    words_a, words_b = text_words(a), text_words(b)
    if not words_a and not words_b:
        return 1.0
    return round(len(words_a & words_b) / len(words_a | words_b), 4)


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


def _extract_run_engine(engine: str, pdf_path: str) -> tuple:
    """One engine on one PDF, in the worker: ('ok', page facts, chars, utf8 text, quality) or
    (verdict, message)."""
    try:
        entries = EXTRACT_ENGINE_FUNCTIONS[engine](pdf_path)
        page_texts = [_unligature(entry if isinstance(entry, str) else entry[0]) for entry in entries]
        facts = [(page_text_chars(text), False if isinstance(entry, str) else bool(entry[1]),
                  entry[4] if not isinstance(entry, str) and len(entry) >= 5 else None)
                 for text, entry in zip(page_texts, entries)]
        text = join_page_texts(page_texts)
        # A short text is judged on the tokens it has (at least 3): a one-line label decoded to the
        # wrong glyphs is as bad as a page of them.
        quality = text_quality(text, min_tokens=3)
        # An engine that counts text objects and the characters they gave (pdfium): when under
        # half of them decoded, most of the text is missing, however good the rest looks.
        counted = [entry[2:4] for entry in entries if not isinstance(entry, str) and len(entry) >= 4]
        objects = sum(count for count, _ in counted)
        if objects >= _QUALITY_MIN_TOKENS:
            decoded = sum(chars for _, chars in counted) / objects
            if decoded < 0.5:
                quality = round(min(decoded, quality if quality is not None else 1.0), 4)
        # A broken ToUnicode map can yield lone surrogates, which UTF-8 cannot hold: '?' each.
        return ("ok", facts, len(text), text.encode("utf-8", "replace"), quality)
    except MemoryError:
        return ("too large", "MemoryError: over the worker's memory cap")
    except Exception as exc:  # any parser fault is this engine's verdict on this PDF
        return (classify_extract_error(exc), f"{type(exc).__name__}: {exc}"[:500])


def _extract_worker_main(connection, memory_mib: int | None = None) -> None:
    """A worker's loop: (pdf_path, engine) in; the engine's reply plus finished_at out
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
        pdf_path, engine = task
        reply = _extract_run_engine(engine, pdf_path)
        connection.send(reply + (time.monotonic(),))


@dataclass
class _ExtractSlot:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    tasks: collections.deque = field(default_factory=collections.deque)  # (key, path, engine, sent at): unanswered
    started: float = 0.0   # when the worker could begin the head task


@dataclass(frozen=True)
class ExtractOutcome:
    """What became of one engine's attempt at one PDF: outcome `ok` (its UTF-8 text in `data`, one
    (chars, has_images, image cover or None) per page in `page_facts`, its `quality`), a permanent verdict (encrypted,
    empty, too large, unparseable), or error, timeout, crash."""
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
            unsent.extendleft(task[:3] for task in reversed(slot.tasks))
        self._retire(slot)
        fresh = self._slots[self._slots.index(slot)] = self._start_slot()
        self.replaced += 1
        return fresh

    def run(self, tasks: Iterable[tuple], should_stop: Callable[[], bool] = lambda: False,
            followups: collections.deque | None = None) -> Iterator[ExtractOutcome]:
        """Yields one outcome per task (key, pdf_path[, engine]) as they finish.

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
                    key, engine = slot.tasks[0][0], slot.tasks[0][2]
                    self._replace(slot, unsent)
                    yield ExtractOutcome(key, "timeout", seconds=elapsed, engine=engine,
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
        slot.tasks.append((key, path, engine, sent_at))
        try:
            slot.connection.send((path, engine))
        except OSError:
            pass  # the worker is gone: its exit sentinel wakes the supervisor, which reports the crash

    def _collect(self, slot: _ExtractSlot, readable: bool, unsent: collections.deque) -> ExtractOutcome:
        """The head task's outcome: the worker's answer, or its crash (its pipe ended, or it exited)."""
        key, engine = slot.tasks[0][0], slot.tasks[0][2]
        try:
            # Only the exit sentinel woke us: the worker may still have answered before it died.
            reply = slot.connection.recv() if readable or slot.connection.poll() else None
        except (EOFError, OSError):
            reply = None
        if reply is None:
            return self._crashed(slot, key, engine, round(time.monotonic() - slot.started, 4), unsent)
        slot.tasks.popleft()
        elapsed = round(max(0.0, reply[-1] - slot.started), 4)
        # The next task began when this answer left, or when it was sent, whichever came later.
        slot.started = max(reply[-1], slot.tasks[0][3]) if slot.tasks else reply[-1]
        if reply[0] == "ok":
            return ExtractOutcome(key, "ok", pages=len(reply[1]), chars=reply[2], data=reply[3], seconds=elapsed,
                                  engine=engine, page_facts=tuple(reply[1]), quality=reply[4])
        return ExtractOutcome(key, reply[0], error=reply[1], seconds=elapsed, engine=engine)

    def _crashed(self, slot: _ExtractSlot, key: str, engine: str, elapsed: float,
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
        return ExtractOutcome(key, "crash", error=f"extract worker {cause}", seconds=elapsed, engine=engine)

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
    kept_by: dict = field(default_factory=dict)     # engine -> PDFs whose text it gave
    pages_needing_ocr: int = 0
    court_text_checked: int = 0   # agreements with the court's own text recorded


def extract(ctx: Context) -> ExtractResult:
    """Runs the extract queue to its end (or until the clock says stop)."""
    cfg, db = ctx.cfg, ctx.open_database()
    started = time.monotonic()
    result = ExtractResult(engine=",".join(cfg.EXTRACT_ENGINES))
    queued = db.extract_queue_size(cfg)
    if queued == 0 or cfg.DRY_RUN:  # a dry run touches neither the PDFs nor the store
        if not cfg.DRY_RUN:
            result.court_text_checked = court_text_agreements(ctx)   # court texts found since
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
                    left = db.extract_queue_size(cfg)
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
    result.seconds = round(time.monotonic() - started, 3)
    return result


def court_text_agreements(ctx: Context, batch: int = 500) -> int:
    """Records, for each extracted document whose court text (`court_text/<sha256>.txt`, the
    court's own documentText) the workspace holds, the word agreement of our best text
    (c83_best_text, the court's left out of the choice) with it; returns how many were recorded.
    A document whose files are not local is left for a later run."""
    from .c20_store import court_text_store_name
    from .c83_best_text import best_text_name, read_text
    db, recorded, after = ctx.db, 0, 0
    while not ctx.clock.should_stop():
        rows = db.court_text_agreement_queue(batch, after)
        if not rows:
            break
        agreements = []
        for row in rows:
            ours = read_text(ctx.workspace, best_text_name(row, ctx.cfg.MIN_TEXT_QUALITY, with_court_text=False))
            theirs = read_text(ctx.workspace, court_text_store_name(row["court_sha256"]))
            if ours is not None and theirs is not None:
                agreements.append((text_agreement(ours.decode("utf-8", "replace"), theirs.decode("utf-8", "replace")),
                                   row["document_id"]))
        db.record_court_text_agreement(agreements)
        recorded += len(agreements)
        after = rows[-1]["rowid"]
    if recorded:
        log_extract.info("court text: agreement of %d extracted texts with the court's own recorded", recorded)
    return recorded


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
        self.finished: list = []               # (rows, outcome, attempts) extracted, text not yet saved
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
                # With two texts to weigh, how many words each has (counted only then: it is rare).
                step = extraction_step([(a.engine, a.outcome, a.quality) + (
                    (word_like_count(a.data.decode("utf-8", "replace")) if a.outcome == "ok" else None,)
                    if len(attempts) > 1 else ()) for a in attempts], cfg.EXTRACT_ENGINES,
                                       cfg.MIN_TEXT_QUALITY)
                if step.action == "next":
                    log_extract.info("extract %s: %s gave %s%s; trying %s", outcome.key[:12], outcome.engine,
                                     outcome.outcome, f" (quality {outcome.quality})" if outcome.outcome == "ok"
                                     else f" ({outcome.error})", step.engine)
                    result.fallbacks += 1
                    self.followups.append((outcome.key, path, step.engine))
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
                kept = attempts[step.index]
                self.finished.append((self.waiting[outcome.key], kept, attempts))
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
            rows = ctx.db.extract_queue(cfg, cfg.EXTRACT_BATCH, after_rowid)
            if not rows:
                self.handed_out = True
                return
            after_rowid = rows[-1]["rowid"]
            # One query for the batch; a twin committed since then was in `waiting` at that moment.
            twins = ctx.db.extracted_twins(row["sha256"] for row in rows if row["sha256"])
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
                twin = twins.get(sha) or (ctx.db.extracted_twin(sha) if sha in self.committed else None)
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
        self._save([outcome for _, outcome, _ in finished])
        _extract_commit_saved(self.ctx, finished, self.result, self.bar)
        for _, outcome, _ in finished:
            self.waiting.pop(outcome.key, None)
            self.committed.add(outcome.key)

    def _save(self, outcomes: list[ExtractOutcome]) -> None:
        """The texts to `text/<sha256>.txt`, then to the store as one group."""
        items = []
        for outcome in outcomes:
            text_path = os.path.join(self.text_folder, f"{outcome.key}.txt")
            # Atomic, no fsync: the store's copy is the durable one; when the store lags, the
            # local files are synced below.
            atomic_write(text_path, outcome.data)
            items.append((text_store_name(outcome.key), text_path))
        held = self.ctx.mirror.put_many(items)
        lagging = [path for name, path in items if not held.get(name)]
        try:
            sync_files(lagging)    # the store lags: until it catches up these files are the only copy
        except OSError as exc:
            raise_if_disk_full(exc, lagging[0])
            raise


def _extract_attempt_entries(rows: list, attempts: list[ExtractOutcome], kept: ExtractOutcome | None) -> list[dict]:
    """extraction_log rows of a chain's attempts other than the kept one, for each document of the PDF:
    a low-quality text that was not kept is `low quality`."""
    entries = []
    for attempt in attempts:
        if attempt is kept:
            continue
        outcome = "low quality" if attempt.outcome == "ok" else attempt.outcome
        error = f"text quality {attempt.quality}" if attempt.outcome == "ok" else attempt.error
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
    for sha_rows, outcome, attempts in finished:
        flags = [page_needs_ocr(chars, has_images, cfg.SCANNED_CHARS_PER_PAGE, cover)
                 for chars, has_images, cover in outcome.page_facts]
        needing = sum(flags)
        result.pages_needing_ocr += needing
        result.kept_by[outcome.engine] = result.kept_by.get(outcome.engine, 0) + 1
        pages.extend((outcome.key, number, chars, int(has_images), cover, int(needs), outcome.engine)
                     for number, ((chars, has_images, cover), needs)
                     in enumerate(zip(outcome.page_facts, flags), start=1))
        # Attempts before the kept one first, so the log reads in the order they ran.
        others.extend(_extract_attempt_entries(sha_rows, attempts, outcome))
        entries.extend(
            {"document_id": row["document_id"], "sha256": outcome.key, "attempt": row["extract_attempts"] + 1,
             "engine": outcome.engine, "pages": outcome.pages, "chars": outcome.chars,
             "seconds": outcome.seconds, "quality": outcome.quality,
             "pages_needing_ocr": needing, "likely_scanned": is_likely_scanned(needing)}
            for row in sha_rows)
    ctx.db.record_extracted(entries, attempts=others, pages=pages)
    documents = sum(len(sha_rows) for sha_rows, _, _ in finished)
    result.attempted += documents
    result.extracted += documents
    result.pages += sum(outcome.pages for _, outcome, _ in finished)
    result.chars += sum(outcome.chars for _, outcome, _ in finished)
    bar.update(documents)


def _extract_reuse_twin(ctx: Context, sha: str, row, twin, result: ExtractResult, bar) -> bool:
    """Applies an extracted twin's figures when its text file is at hand (locally or from the store)."""
    text_path = ctx.workspace / "text" / f"{sha}.txt"
    if not text_path.is_file() and not ctx.mirror.fetch(text_store_name(sha), text_path):
        return False  # nothing to trust: extract again
    ctx.mirror.put(text_store_name(sha), text_path)
    ctx.db.record_extracted([{"document_id": row["document_id"], "sha256": sha, "attempt": row["extract_attempts"] + 1,
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
        db.log_extraction_attempts(entries)
        for row in rows:
            db.mark_extract_failed(row["document_id"], f"extract {failure.reason}: {failure.error()}",
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
