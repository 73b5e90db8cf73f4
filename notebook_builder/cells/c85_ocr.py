"""OCR: the pages of extracted PDFs that show an image and have no text layer, recognised and merged in.

Guarantees:
- Work: each distinct sha256 of an `extracted` document whose PDF has pages
  needing OCR (`pages.needs_ocr`, set by extract: an image and fewer than
  SCANNED_CHARS_PER_PAGE non-blank characters) and that OCR has not yet
  handled (`documents.extracted_by_ocr IS NULL`; `Database.ocr_queue`).
  Nothing here changes a document's status, so the queues of CONTRACT.md and
  `done` are the same with or without this stage.
- Each such page is rendered with pdfium at OCR_DPI and recognised by
  OCR_ENGINE (Tesseract through pytesseract, or RapidOCR) in WORKERS worker
  processes (one OCR thread each: on 2 cores two processes beat one process
  with two threads). The document's text with each OCR'd page's text layer
  replaced by the recognised text (pages still separated by form feeds) is
  written to `text/<sha256>.ocr.txt` (temp name, rename), mirrored to the
  store, and only then committed: `extracted_by_ocr = 1`, `ocr_pages` = the
  pages recognised, `pages.ocr_chars` per page, for every document holding
  that sha256. `text/<sha256>.txt` (the text layer) is never rewritten: a
  store name keeps the bytes it was first given.
- A PDF whose pages cannot be rendered or recognised (a worker that dies, a
  page over EXTRACT_TIMEOUT) gets `extracted_by_ocr = 0` and leaves the OCR
  queue; the rest go on.
- The stage is skipped (result `skipped` says why) when OCR_ENGINE is not
  installed, so PHASES may name it everywhere; DRY_RUN touches nothing.
  It stops taking PDFs once `ctx.clock.should_stop()`.

The engine was chosen by `bench/ocr_engines.py` on this machine (see its
output in README.md): Tesseract is the default.

Knobs read: OCR_ENGINE, OCR_DPI, WORKERS, EXTRACT_TIMEOUT, DRY_RUN.
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import multiprocessing
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

from .c05_durable import atomic_write
from .c20_store import ocr_text_store_name, pdf_store_name, text_store_name
from .c34_mirror import progress
from .c35_context import Context

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


def _ocr_tesseract(image, timeout: float = 0) -> str:
    import pytesseract
    # pytesseract kills the tesseract process past `timeout` (RuntimeError): a page never hangs a worker.
    return pytesseract.image_to_string(image, lang="eng", timeout=timeout)


_RAPIDOCR = []


def _ocr_rapidocr(image, timeout: float = 0) -> str:
    import numpy
    if not _RAPIDOCR:
        from rapidocr_onnxruntime import RapidOCR
        _RAPIDOCR.append(RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1))
    found, _ = _RAPIDOCR[0](numpy.asarray(image.convert("RGB")))
    # Boxes in reading order: top to bottom, then left to right; one line each.
    lines = sorted(found or [], key=lambda item: (round(item[0][0][1] / 10), item[0][0][0]))
    return "\n".join(item[1] for item in lines)


# name -> f(PIL image, timeout seconds) -> text. Forked workers see what the parent put here.
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


def merge_ocr_text(text: str, pages: int, recognised: dict[int, str]) -> str:
    """The document's text with page n (1-based) replaced by `recognised[n]`; pages are separated
    by form feeds (a text with no text layer at all is '' and stands for `pages` empty pages)."""
    page_texts = text.split("\f") if text else [""] * pages
    page_texts += [""] * (pages - len(page_texts))
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


def _ocr_page(engine: str, pdf_path: str, page_number: int, dpi: int, timeout: float) -> tuple[int, str, float]:
    started = time.monotonic()
    text = OCR_ENGINES[engine](render_page(pdf_path, page_number - 1, dpi), timeout)
    return page_number, text, time.monotonic() - started


# ------------------------------------------------------------------ stage


@dataclass
class OcrResult:
    pdfs: int = 0             # distinct PDFs recognised
    documents: int = 0        # documents now extracted_by_ocr whose OCR text holds words
    blank: int = 0            # PDFs recognised whose pages gave no text at all (blank scans)
    pages: int = 0            # pages recognised
    failed: int = 0           # PDFs whose OCR failed (extracted_by_ocr = 0)
    chars: int = 0            # characters OCR gave
    seconds: float = 0.0
    engine: str = ""
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
    queued = db.ocr_queue()
    if not queued or cfg.DRY_RUN:
        return result
    (ctx.workspace / "text").mkdir(parents=True, exist_ok=True)
    bar = progress(cfg, sum(len(pages) for _, pages in queued), "ocr")
    executor = _ocr_executor(cfg.WORKERS)
    try:
        for sha, pages in queued:
            if ctx.clock.should_stop():
                result.stopped = True
                break
            try:
                recognised = _ocr_document(ctx, executor, sha, pages)
            except concurrent.futures.process.BrokenProcessPool:
                executor.shutdown(wait=False, cancel_futures=True)
                executor = _ocr_executor(cfg.WORKERS)
                recognised = "an OCR worker died"
            except _OcrFailure as exc:
                recognised = str(exc)
            if isinstance(recognised, str):
                log_ocr.warning("ocr %s: %s", sha[:12], recognised)
                result.failed += 1
                result.errors.append(f"{sha[:12]}: {recognised}")
                db.record_ocr(sha, {}, failed=True)
            else:
                committed = _ocr_commit(ctx, sha, recognised)
                if any(text.strip() for text in recognised.values()):
                    result.documents += committed
                else:
                    result.blank += 1
                result.pdfs += 1
                result.pages += len(recognised)
                result.chars += sum(len(text) for text in recognised.values())
            bar.update(len(pages))
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        bar.close()
        result.seconds = round(time.monotonic() - started, 3)
    log_ocr.info("ocr: %d pages of %d PDFs recognised (%s), %d failed, %.1f s", result.pages, result.pdfs,
                 cfg.OCR_ENGINE, result.failed, result.seconds)
    return result


class _OcrFailure(Exception):
    pass


def _ocr_executor(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    # Forked, as the extract workers: in a notebook the functions live in __main__.
    return concurrent.futures.ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context("fork"),
                                                  initializer=_ocr_worker_init)


def _ocr_document(ctx: Context, executor, sha: str, pages: list[int]) -> dict[int, str]:
    """page number -> recognised text, for each page of `pages`; raises _OcrFailure when one cannot be."""
    cfg = ctx.cfg
    pdf_path = os.path.join(ctx.workspace, pdf_store_name(sha))
    if not os.path.isfile(pdf_path) and not ctx.mirror.fetch(pdf_store_name(sha), pdf_path):
        raise _OcrFailure("PDF missing in the workspace and not in the store")
    futures = [executor.submit(_ocr_page, cfg.OCR_ENGINE, pdf_path, number, cfg.OCR_DPI, cfg.EXTRACT_TIMEOUT)
               for number in pages]
    recognised = {}
    deadline = time.monotonic() + cfg.EXTRACT_TIMEOUT * max(1, len(pages)) / max(1, cfg.WORKERS)
    try:
        for future in futures:
            number, text, _ = future.result(timeout=max(0.0, deadline - time.monotonic()))
            recognised[number] = text
    except concurrent.futures.TimeoutError:
        raise _OcrFailure(f"OCR over its time limit ({cfg.EXTRACT_TIMEOUT:g} s a page)") from None
    except concurrent.futures.process.BrokenProcessPool:
        raise
    except Exception as exc:   # a page that cannot be rendered or recognised
        raise _OcrFailure(f"{type(exc).__name__}: {exc}"[:300]) from None
    finally:
        for future in futures:
            future.cancel()
    return recognised


def _ocr_commit(ctx: Context, sha: str, recognised: dict[int, str]) -> int:
    """Merged text to `text/<sha>.ocr.txt`, locally then in the store; then the database. Returns
    the documents committed."""
    local_text = ctx.workspace / text_store_name(sha)
    if not local_text.is_file():
        ctx.mirror.fetch(text_store_name(sha), local_text)
    text = local_text.read_text(encoding="utf-8") if local_text.is_file() else ""
    merged = merge_ocr_text(text, ctx.db.page_count(sha), recognised)
    target = ctx.workspace / ocr_text_store_name(sha)
    atomic_write(target, merged.encode("utf-8", "replace"))     # the store's copy is the durable one
    ctx.mirror.put(ocr_text_store_name(sha), target)
    return ctx.db.record_ocr(sha, {number: len(text.strip()) for number, text in recognised.items()})
