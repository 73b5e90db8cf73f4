"""The extraction engines and the worker processes that run them.

Guarantees:
- `EXTRACT_ENGINE_FUNCTIONS` maps an engine name to `f(pdf_path) -> per page text, or (text,
  has_images[, text objects, chars, image cover, silent text objects])`; pypdf and pypdfium2 are built in. An empty
  user password is tried; Latin ligatures are written as their letters. The pdfium engine keeps
  line breaks, drops characters drawn outside the page's visible box, reads fake bold once and
  flattens visible annotations (filled-in forms, stamps) into the page's text.
- `ExtractWorkerPool` keeps WORKERS long-lived forked workers, one pipe and one time limit each. A
  worker only reads and parses and sends back the text, its quality and each page's facts. A hung
  worker is killed and replaced (verdict `timeout`), one that dies (segfault, os._exit, OOM) is
  replaced (`crash`); the pool keeps its size and the tasks queued behind a dead worker run elsewhere.
- Each worker's address space is capped at what it was forked with plus EXTRACT_MEMORY_MB: an
  inflate bomb raises MemoryError (`too large`) or kills only that worker.
- Workers are forked, not spawned: in a notebook the engine functions live in `__main__`, which
  spawn and forkserver cannot import; a forked worker sees whatever the parent put in the map.

Knobs read (passed by the stage): WORKERS, EXTRACT_TIMEOUT, EXTRACT_MEMORY_MB.
"""
from __future__ import annotations

import collections
import contextlib
import faulthandler
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
from .c78_page_text import (QUALITY_MIN_TOKENS, ExtractionFailure, classify_extract_error, join_page_texts,
                            measure_pages, page_text_chars)

log_engines = logging.getLogger("kycourt.extract")




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


def _pdfium_page_objects(page_handle, text_page_handle=None) -> tuple[float, int, bool, int]:
    """(the area its images cover, how many objects are text, some object is an image, how many text
    objects draw something but give no text, counted until it is known whether they are more than
    half) of a page, form XObjects on it included (3 deep; an image
    in a form counts with the form's bounds). A text object gave no text when its font could not be
    decoded; an empty or blank string draws nothing (no extent: a vertical run has height). Raw C
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

    covered, texts, has_images, drawn = 0.0, 0, False, []
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
                if (text_page_handle is not None
                        and pdfium_c.FPDFPageObj_GetBounds(handle, left, bottom, right, top)
                        and max(right.value - left.value, top.value - bottom.value) > 0.5):
                    drawn.append(handle)
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
    # FPDFTextObj_GetText scans the page's characters for each object: ask only until the count is
    # decided either way (more than half the objects silent, or too few left to make them so).
    silent = 0
    for position, handle in enumerate(drawn):
        if silent > texts / 2 or silent + len(drawn) - position <= texts / 2:
            break
        if pdfium_c.FPDFTextObj_GetText(handle, text_page_handle, None, 0) <= 2:
            silent += 1
    return covered, texts, has_images, silent


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
                covered, text_objects, has_images, silent = _pdfium_page_objects(page.raw, text_page.raw)
                width, height = page.get_size()
                cover = round(min(1.0, covered / (width * height)), 4) if width * height > 0 else None
                # Text objects that gave no characters: pdfium could not decode their font (a CID
                # font that is not embedded, with a predefined CMap); the share decoded caps quality.
                read.append((text, has_images, text_objects, text_page.count_chars(), cover, silent))
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
        log_engines.debug("extract worker: no memory cap (%s)", exc)


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
        counted = [tuple(entry[2:4]) + tuple(entry[5:6]) if not isinstance(entry, str) and len(entry) >= 4 else None
                   for entry in entries]
        # A short text is judged on the tokens it has (at least 3): a one-line label decoded to the
        # wrong glyphs is as bad as a page of them.
        quality, measures = measure_pages(page_texts, counted)
        objects = sum(count[0] for count in counted if count)
        if objects >= QUALITY_MIN_TOKENS:
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
                    log_engines.warning("extract worker %d exited while idle (code %s); replaced",
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
