"""OCR: the pages of extracted PDFs that show an image and have no text layer, turned upright, recognised and merged in.

Guarantees:
- Work: each distinct sha256 of an `extracted` document with pages needing OCR (`pages.needs_ocr`,
  set by extract) that OCR has not handled yet (`TextRecords.ocr_queue`). No status changes here, so
  the queues of CONTRACT.md and `done` are the same with or without this stage.
- Each page is rendered with pdfium at OCR_DPI and recognised by OCR_ENGINE (Tesseract, or RapidOCR)
  in WORKERS processes. Tesseract detects the page's orientation first and reads it upright
  (`pages.rotation`); a page too sparse to tell is read upside down too and the surer reading kept.
- The document's text with each OCR'd page replaced by the recognised text is written to
  `text/<sha256>.ocr.txt` (temp name, rename), mirrored, and only then committed for every document
  holding the PDF (`extracted_by_ocr`, `ocr_pages`, `ocr_quality`, `pages.ocr_chars`); then the
  documents' best text is recorded (c33). `text/<sha256>.txt` is never rewritten.
- Bad pages are counted, never a crash: a page that cannot be read (timeout, failure, a worker dying
  on it) is one of `failed_pages` and keeps its text layer; a blank page is one of `blank_pages`; a
  PDF none of whose pages could be read gets `extracted_by_ocr = 0` and leaves the queue.
- The stage stops taking pages once `ctx.clock.should_stop()`: pages read so far wait in
  `tmp/ocr/<sha256>/` and a later run reads only the rest.
- Skipped (saying why) when OCR_ENGINE is not installed; DRY_RUN touches nothing.

Knobs read: OCR_ENGINE, OCR_DPI, WORKERS, EXTRACT_TIMEOUT, MIN_TEXT_QUALITY, DRY_RUN.
"""
from __future__ import annotations

import collections
import concurrent.futures
import importlib.util
import json
import logging
import multiprocessing
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .c05_durable import atomic_write
from .c06_layout import ocr_text_store_name, pdf_store_name, text_store_name
from .c13_records import TextRecords
from .c33_best_text import record_text_sources
from .c34_mirror import progress
from .c35_context import Context
from .c78_page_text import text_pages, text_quality, word_like_count

log_ocr = logging.getLogger("kycourt.ocr")


# ---------------------------------------------------------------- engines


def render_page(pdf_path: str, page_index: int, dpi: int):
    """Page `page_index` (0-based) of the PDF as a greyscale PIL image at `dpi`."""
    import pypdfium2
    document = pypdfium2.PdfDocument(pdf_path)
    try:
        page = document[page_index]
        try:
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            return bitmap.to_pil()
        finally:
            page.close()
    finally:
        document.close()


# Pages go to Tesseract as BMP: PNG's compression costs more than the file it saves.
_OCR_IMAGE_FORMAT = "BMP"
# hOCR's text lines (and the captions, headings and floating text Tesseract finds) with their title.
_HOCR_LINE = re.compile(r"""class=['"]ocr_(?:line|caption|header|textfloat)['"][^>]*?title=['"]([^'"]*)['"]""")
_HOCR_TEXTANGLE = re.compile(r"textangle (\d+)")
_HOCR_WORD_CONFIDENCE = re.compile(r"""class=['"]ocrx_word['"][^>]*?x_wconf (\d+)""")
# A page of fewer lines has too few characters for Tesseract's OSD (it wants 50) to tell its
# orientation: it is read upside down too, and the reading Tesseract is surer of is kept.
_OSD_MIN_LINES = 6


def hocr_orientation(hocr: str) -> tuple[int | None, int]:
    """(the rotation, in degrees clockwise, Tesseract applied to read the page: the textangle most
    of its hOCR lines carry, a line without one being upright, None when it found no line; how
    many lines it found)."""
    angles = collections.Counter()
    for title in _HOCR_LINE.findall(hocr):
        found = _HOCR_TEXTANGLE.search(title)
        angles[int(found.group(1)) % 360 if found else 0] += 1
    return (angles.most_common(1)[0][0] if angles else None), sum(angles.values())


def hocr_confidence(hocr: str) -> float:
    """Tesseract's mean confidence (0-100) in the words of its hOCR; 0 when it read none."""
    confidences = [int(value) for value in _HOCR_WORD_CONFIDENCE.findall(hocr)]
    return sum(confidences) / len(confidences) if confidences else 0.0


def _tesseract_read(image, timeout: float) -> tuple[str, str]:
    """(text, hOCR) of mode 1: OSD, then the page read in the orientation found."""
    from pytesseract.pytesseract import run_tesseract, save
    image.format = _OCR_IMAGE_FORMAT
    with save(image) as (output_base, input_name):
        run_tesseract(input_name, output_base, "txt hocr", "eng", config="--psm 1", timeout=timeout)
        return (Path(f"{output_base}.txt").read_bytes().decode("utf-8", "replace"),
                Path(f"{output_base}.hocr").read_bytes().decode("utf-8", "replace"))


def _ocr_tesseract(image, timeout: float = 0, orientation: bool = True) -> tuple[str, int | None]:
    import pytesseract

    # pytesseract kills the tesseract process past `timeout` (RuntimeError): a page never hangs a worker.
    if not orientation:
        image.format = _OCR_IMAGE_FORMAT
        return pytesseract.image_to_string(image, lang="eng", timeout=timeout), None
    text, hocr = _tesseract_read(image, timeout)
    rotation, lines = hocr_orientation(hocr)
    if 0 < lines < _OSD_MIN_LINES and not rotation:
        turned_text, turned_hocr = _tesseract_read(image.rotate(180), timeout)
        # Glyphs read upside down often still make word-like tokens ("*pajou diam"), as many as the
        # page's words: the reading Tesseract is surer of wins, the more word-like one on a tie.
        turned = (hocr_confidence(turned_hocr), word_like_count(turned_text))
        if turned > (hocr_confidence(hocr), word_like_count(text)):
            return turned_text, 180
    return text, rotation


_RAPIDOCR = []


def _ocr_rapidocr(image, timeout: float = 0, orientation: bool = True) -> tuple[str, int | None]:
    import numpy
    if not _RAPIDOCR:
        from rapidocr_onnxruntime import RapidOCR
        _RAPIDOCR.append(RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1))
    found, _ = _RAPIDOCR[0](numpy.asarray(image.convert("RGB")))
    # Boxes in reading order: top to bottom, then left to right; one line each.
    lines = sorted(found or [], key=lambda item: (round(item[0][0][1] / 10), item[0][0][0]))
    return "\n".join(item[1] for item in lines), None


# name -> f(PIL image, timeout seconds, detect orientation) -> (text, rotation applied or None).
# Forked workers see what the parent put here.
OCR_ENGINES: dict[str, Callable] = {"tesseract": _ocr_tesseract, "rapidocr": _ocr_rapidocr}


def ocr_engine_available(engine: str) -> str | None:
    """None when `engine` can run here, else what is missing."""
    if engine == "tesseract":
        if importlib.util.find_spec("pytesseract") is None:
            return "pytesseract is not installed (pip install pytesseract)"
        if shutil.which("tesseract") is None:
            return "the tesseract program is not installed (apt-get install tesseract-ocr)"
        return None
    if engine == "rapidocr":
        if importlib.util.find_spec("rapidocr_onnxruntime") is None:
            return "rapidocr-onnxruntime is not installed (pip install rapidocr-onnxruntime)"
        return None
    return f"unknown OCR engine {engine!r}"


def orientation_unavailable(engine: str) -> str | None:
    """None when `engine` detects each page's orientation here, else why it does not."""
    if engine != "tesseract":
        return f"{engine} does not detect page orientation"
    import pytesseract
    try:
        languages = pytesseract.get_languages(config="")
    except Exception as exc:   # a tesseract that cannot list its data reads without OSD too
        return f"tesseract --list-langs failed: {exc}"
    if "osd" not in languages:
        return "Tesseract's osd traineddata is not installed (apt-get install tesseract-ocr-osd)"
    return None


def merge_ocr_text(text: str, pages: int, recognised: dict[int, str]) -> str:
    """The document's text with page n (1-based) replaced by `recognised[n]`; pages are separated
    by form feeds (a text with no text layer at all is '' and stands for `pages` empty pages). A
    text whose form feeds do not split it into `pages` pages (an older version's) is kept whole,
    the recognised pages after it in order: which of its characters came from which page is not
    known, and none is dropped."""
    page_texts = text_pages(text, pages)
    if page_texts is None:
        return "\f".join([text] + [recognised[number].strip() for number in sorted(recognised)])
    for number, page_text in recognised.items():
        if 1 <= number <= len(page_texts):
            page_texts[number - 1] = page_text.strip()
    return "\f".join(page_texts)


def _ocr_worker_init() -> None:
    import faulthandler
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the supervisor decides
    faulthandler.disable()   # a worker that dies on a page is expected and handled; no traceback dump
    os.environ["OMP_THREAD_LIMIT"] = "1"           # Tesseract: one thread; the pool gives the parallelism


def _ocr_page(engine: str, pdf_path: str, page_number: int, dpi: int, timeout: float,
              orientation: bool) -> tuple[int, str, int | None]:
    text, rotation = OCR_ENGINES[engine](render_page(pdf_path, page_number - 1, dpi), timeout, orientation)
    return page_number, text, rotation


# ------------------------------------------------------------------ stage


@dataclass
class OcrResult:
    pdfs: int = 0             # distinct PDFs recognised (all or some of their pages)
    documents: int = 0        # documents now extracted_by_ocr whose OCR text holds words
    blank: int = 0            # PDFs recognised whose pages gave no text at all (blank scans)
    pages: int = 0            # pages recognised
    blank_pages: int = 0      # of those, pages that gave no text (a blank scan)
    rotated_pages: int = 0    # of those, pages read turned (rotation other than 0)
    failed_pages: int = 0     # pages that could not be read (over the time limit, a failure, a dead worker)
    failed: int = 0           # PDFs none of whose pages could be read (extracted_by_ocr = 0)
    chars: int = 0            # characters OCR gave
    seconds: float = 0.0
    engine: str = ""
    orientation: str = ""     # "detected", or why each page is read as it lies
    skipped: str | None = None
    stopped: bool = False
    errors: list = field(default_factory=list)


def ocr(ctx: Context) -> OcrResult:
    """Recognises the pages that need it, PDF by PDF, until the queue is empty or the clock says stop."""
    cfg, db = ctx.cfg, ctx.open_database()
    started = time.monotonic()
    result = OcrResult(engine=cfg.OCR_ENGINE)
    missing = ocr_engine_available(cfg.OCR_ENGINE)
    if missing:
        result.skipped = missing
        log_ocr.info("ocr skipped: %s", missing)
        return result
    queued = TextRecords(db).ocr_queue()
    if not queued or cfg.DRY_RUN:
        return result
    no_orientation = orientation_unavailable(cfg.OCR_ENGINE)
    result.orientation = no_orientation or "detected"
    if no_orientation:
        log_ocr.warning("ocr: pages are read as they lie, upside-down ones badly: %s", no_orientation)
    (ctx.workspace / "text").mkdir(parents=True, exist_ok=True)
    bar = progress(cfg, sum(len(pages) for _, pages in queued), "ocr")
    pool = _OcrPool(cfg, orientation=no_orientation is None)
    try:
        for sha, pages in queued:
            if ctx.clock.should_stop():
                result.stopped = True
                break
            read = _ocr_read(ctx, pool, sha, pages, bar)
            if read.left:
                result.stopped = True
                break
            _ocr_finish(ctx, sha, read, result)
    finally:
        pool.close()
        bar.close()
        result.seconds = round(time.monotonic() - started, 3)
    log_ocr.info("ocr: %d pages of %d PDFs recognised (%s; orientation %s), %d blank, %d turned, %d pages failed, "
                 "%d PDFs failed, %.1f s", result.pages, result.pdfs, cfg.OCR_ENGINE, result.orientation,
                 result.blank_pages, result.rotated_pages, result.failed_pages, result.failed, result.seconds)
    return result


@dataclass
class _PagesRead:
    recognised: dict[int, tuple[str, int | None]] = field(default_factory=dict)   # page -> (text, rotation)
    failed: dict[int, str] = field(default_factory=dict)                          # page -> why
    left: int = 0             # pages not read because the clock said stop


class _PageCache:
    """The pages of one PDF read so far (`tmp/ocr/<sha256>/<page>.json`): a stop inside a long
    document loses none of them. Throwaway, like the workspace (written without fsync)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def load(self) -> dict[int, tuple[str, int | None]]:
        pages = {}
        for path in self.folder.glob("*.json") if self.folder.is_dir() else ():
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
                pages[int(path.stem)] = (entry["text"], entry["rotation"])
            except (OSError, ValueError, KeyError):   # a torn file: that page is read again
                continue
        return pages

    def save(self, page: int, text: str, rotation: int | None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.folder / f"{page}.json", json.dumps({"text": text, "rotation": rotation}).encode("utf-8"))

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _ocr_read(ctx: Context, pool: "_OcrPool", sha: str, pages: list[int], bar) -> _PagesRead:
    """The pages of one PDF: recognised (earlier runs' too), failed, or left for a later run."""
    cache = _PageCache(ctx.path("tmp") / "ocr" / sha)
    earlier = cache.load()
    read = _PagesRead(recognised={page: earlier[page] for page in pages if page in earlier})
    todo = collections.deque(page for page in pages if page not in read.recognised)
    bar.update(len(pages) - len(todo))
    if not todo:
        return read
    pdf_path = os.path.join(ctx.workspace, pdf_store_name(sha))
    if not os.path.isfile(pdf_path) and not ctx.mirror.fetch(pdf_store_name(sha), pdf_path):
        read.failed = {page: "PDF missing in the workspace and not in the store" for page in todo}
        return read
    for page, text, rotation, error in pool.read(pdf_path, todo, ctx.clock.should_stop):
        if error is None:
            read.recognised[page] = (text, rotation)
            cache.save(page, text, rotation)
        else:
            read.failed[page] = error
        bar.update(1)
    read.left = len(todo)
    return read


def _ocr_finish(ctx: Context, sha: str, read: _PagesRead, result: OcrResult) -> None:
    """Commits one PDF's pages (or its failure), counts them, and records its best text."""
    result.failed_pages += len(read.failed)
    result.errors += [f"{sha[:12]} page {page}: {why}" for page, why in sorted(read.failed.items())]
    for page, why in sorted(read.failed.items()):
        log_ocr.warning("ocr %s page %d: %s", sha[:12], page, why)
    if read.recognised:
        committed = _ocr_commit(ctx, sha, read.recognised)
        if any(text.strip() for text, _ in read.recognised.values()):
            result.documents += committed
        else:
            result.blank += 1
        result.pdfs += 1
        result.pages += len(read.recognised)
        result.chars += sum(len(text) for text, _ in read.recognised.values())
        result.blank_pages += sum(1 for text, _ in read.recognised.values() if not text.strip())
        result.rotated_pages += sum(1 for _, rotation in read.recognised.values() if rotation)
    else:
        result.failed += 1
        TextRecords(ctx.db).record_ocr(sha, {}, failed=True)
    record_text_sources(ctx.db, ctx.cfg.MIN_TEXT_QUALITY, sha256=sha)
    _PageCache(ctx.path("tmp") / "ocr" / sha).clear()


def _ocr_page_error(exc: BaseException) -> str:
    if isinstance(exc, RuntimeError) and "timeout" in str(exc).lower():   # pytesseract killed Tesseract
        return "over the OCR time limit"
    return f"{type(exc).__name__}: {exc}"[:300]


class _OcrPool:
    """WORKERS forked processes reading pages (forked, as the extract workers: in a notebook the
    functions live in __main__); a pool a worker died in, or that hangs, is replaced."""

    def __init__(self, cfg, *, orientation: bool):
        self.cfg, self.orientation = cfg, orientation
        self.executor = self._start()

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(max(1, self.cfg.WORKERS),
                                                      mp_context=multiprocessing.get_context("fork"),
                                                      initializer=_ocr_worker_init)

    def _replace(self) -> None:
        # The executor has no public handle on its processes; a hung one must not outlive it.
        for process in list((getattr(self.executor, "_processes", None) or {}).values()):
            process.kill()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self._start()

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    def read(self, pdf_path: str, pages: collections.deque, should_stop: Callable[[], bool]):
        """Yields (page, text, rotation, None) or (page, None, None, why) for the pages of `pages`
        (taken from its left) until it is empty or `should_stop()`; what is left stays in it."""
        cfg = self.cfg
        # Each Tesseract run is killed at EXTRACT_TIMEOUT (a short page has two); a page still out
        # long after that hangs its worker.
        hung_after = 3 * cfg.EXTRACT_TIMEOUT + 5
        suspects: collections.deque = collections.deque()   # out when a worker died: read again alone
        in_flight: dict = {}                                  # future -> (page, read alone)
        while True:
            source, depth = (suspects, 1) if suspects else (pages, 2 * max(1, cfg.WORKERS))
            while source and len(in_flight) < depth and not should_stop():
                page = source.popleft()
                future = self.executor.submit(_ocr_page, cfg.OCR_ENGINE, pdf_path, page, cfg.OCR_DPI,
                                              cfg.EXTRACT_TIMEOUT, self.orientation)
                in_flight[future] = (page, source is suspects)
            if not in_flight:
                pages.extendleft(reversed(suspects))     # stopped: unread suspects are left too
                return
            finished, _ = concurrent.futures.wait(in_flight, timeout=hung_after,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
            if not finished:
                for page, _ in in_flight.values():
                    yield page, None, None, f"no answer within {hung_after:g} s"
                in_flight.clear()
                self._replace()
                continue
            died = False
            for future in finished:
                page, alone = in_flight.pop(future)
                try:
                    _, text, rotation = future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    died = True
                    if alone:
                        yield page, None, None, "the OCR worker died reading it"
                    else:
                        suspects.append(page)
                except Exception as exc:   # a page that cannot be rendered or recognised
                    yield page, None, None, _ocr_page_error(exc)
                else:
                    yield page, text, rotation, None
            if died:   # every page out with the dead worker's pool is read again, alone
                suspects.extend(page for page, _ in in_flight.values())
                in_flight.clear()
                self._replace()


def _ocr_commit(ctx: Context, sha: str, recognised: dict[int, tuple[str, int | None]]) -> int:
    """Merged text to `text/<sha>.ocr.txt`, locally then in the store; then the database. Returns
    the documents committed."""
    local_text = ctx.workspace / text_store_name(sha)
    if not local_text.is_file():
        ctx.mirror.fetch(text_store_name(sha), local_text)
    text = local_text.read_text(encoding="utf-8") if local_text.is_file() else ""
    merged = merge_ocr_text(text, TextRecords(ctx.db).page_count(sha), {page: text for page, (text, _) in recognised.items()})
    target = ctx.workspace / ocr_text_store_name(sha)
    atomic_write(target, merged.encode("utf-8", "replace"))     # the store's copy is the durable one
    ctx.mirror.put(ocr_text_store_name(sha), target)
    pages = {page: (len(text.strip()), rotation) for page, (text, rotation) in recognised.items()}
    return TextRecords(ctx.db).record_ocr(sha, pages, quality=text_quality(merged))
