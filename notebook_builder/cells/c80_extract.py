"""Extract: the text of every downloaded PDF, in worker processes, one PDF's fault never stopping the rest.

Guarantees:
- Work comes from the extract queue of CONTRACT.md (`Database.extract_queue`,
  EXTRACT_BATCH rows at a time, keyset by rowid), so one run attempts each
  queued document at most once and a failure counts exactly one attempt.
- Each distinct sha256 of a batch is extracted once, by one of WORKERS
  worker processes, and its outcome applied to every document holding it.
  A document whose sha256 another `extracted` document already holds reuses
  that text (its file was written before that commit) instead of extracting.
- A worker gets EXTRACT_TIMEOUT seconds per PDF; a hung worker is killed and
  replaced (outcome `timeout`), a worker that dies (segfault, os._exit, OOM
  kill) is replaced (outcome `crash`); either is a failed attempt of that one
  PDF and the batch goes on.
- A worker only reads and parses: it sends the text back over its pipe.
  The stage's saver thread writes the texts of _EXTRACT_COMMIT_EVERY PDFs
  to `text/<sha256>.txt` atomically (temp name, rename) and mirrors them to
  the store as one group (`StoreMirror.put_many`: a LocalStore makes the
  group durable with one flush), while the workers go on; then the
  supervisor commits them `extracted`. So the database never says
  `extracted` before the store holds the text (if the store lags, the local
  files are synced instead: they are the only copy until it catches up), no
  worker waits on the disk, and the store costs one flush per group, not
  one per PDF (an fsync each cost 0.3-1.2 ms of CPU here, a share of what
  the workers need). Pages are separated by a form feed; a PDF with no text
  layer is `extracted` with an empty file and 0 chars.
- `likely_scanned` is `chars / pages < SCANNED_CHARS_PER_PAGE` (0 pages:
  scanned). Every attempt is a row of `extraction_log` (ok/error/timeout/crash).
  After MAX_EXTRACT_ATTEMPTS failures a document leaves the queue; verify
  lists it from `Database.extraction_failures`.
- A PDF missing from the workspace is fetched from the store first. A full
  disk raises DiskFullError. The stage stops dispatching new PDFs once
  `ctx.clock.should_stop()`; the PDFs in flight are finished.

Workers are forked (`multiprocessing.get_context("fork")`): in a notebook the
functions live in `__main__`, which spawn and forkserver cannot import.
`EXTRACT_ENGINE_FUNCTIONS` maps an engine name to `f(pdf_path) -> list of page
texts`; a forked worker sees whatever the parent put there (tests add faults).

Knobs read: WORKERS, EXTRACT_BATCH, EXTRACT_ENGINE, EXTRACT_TIMEOUT,
MAX_EXTRACT_ATTEMPTS, SCANNED_CHARS_PER_PAGE.
"""
from __future__ import annotations

import collections
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .c00_config import ConfigError
from .c20_store import pdf_store_name, sync_files, text_store_name
from .c35_context import Context, progress, raise_if_disk_full

log_extract = logging.getLogger("kycourt.extract")


# ---------------------------------------------------------------- engines


def _extract_pages_pypdf(pdf_path: str) -> list[str]:
    import pypdf
    reader = pypdf.PdfReader(pdf_path)
    return [page.extract_text() or "" for page in reader.pages]


def _extract_pages_pypdfium2(pdf_path: str) -> list[str]:
    import pypdfium2
    document = pypdfium2.PdfDocument(pdf_path)
    try:
        texts = []
        for index in range(len(document)):
            page = document[index]
            text_page = page.get_textpage()
            try:
                texts.append(text_page.get_text_bounded().replace("\r\n", "\n"))
            finally:
                text_page.close()
                page.close()
        return texts
    finally:
        document.close()


EXTRACT_ENGINE_FUNCTIONS: dict[str, Callable[[str], list[str]]] = {
    "pypdf": _extract_pages_pypdf,
    "pypdfium2": _extract_pages_pypdfium2,
}
# The package each built-in engine needs: checked before any attempt is spent, so
# a missing install is one ConfigError, not every document's attempts used up.
_EXTRACT_ENGINE_PACKAGES = {"pypdf": "pypdf", "pypdfium2": "pypdfium2"}


def _extract_check_engine(engine: str) -> None:
    import importlib.util
    if engine not in EXTRACT_ENGINE_FUNCTIONS:
        raise ConfigError("KY_EXTRACT_ENGINE", engine, " or ".join(EXTRACT_ENGINE_FUNCTIONS))
    package = _EXTRACT_ENGINE_PACKAGES.get(engine)
    if package and importlib.util.find_spec(package) is None:
        raise ConfigError("KY_EXTRACT_ENGINE", engine, f"an installed engine (pip install {package})")


# -------------------------------------------------------------- decisions


def join_page_texts(page_texts: list[str]) -> str:
    """The text file's content: pages joined by form feeds; '' when no page holds any text."""
    if not any(text.strip() for text in page_texts):
        return ""
    return "\f".join(page_texts)


def is_likely_scanned(pages: int, chars: int, chars_per_page: int) -> bool:
    """Too little text per page for a born-digital PDF (no pages at all counts as scanned)."""
    return pages <= 0 or chars / pages < chars_per_page


# ---------------------------------------------------------------- workers


def _extract_write_text(path: Path, text: str) -> None:
    """Temp name then rename; no fsync (the store's copy is the durable one; when the store
    lags, `_extract_save_texts` syncs the local files)."""
    temp = path.with_name(f".{path.name}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise_if_disk_full(exc, path)
        raise


def _extract_worker_main(connection, engine: str) -> None:
    """A worker's loop: pdf_path in, ('ok', pages, text) or ('error', message) out."""
    # Ctrl-C in a terminal reaches the whole process group; the supervisor decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    extract_pages = EXTRACT_ENGINE_FUNCTIONS[engine]
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            page_texts = extract_pages(task)
            reply = ("ok", len(page_texts), join_page_texts(page_texts))
        except Exception as exc:  # any parser fault is this PDF's failed attempt
            reply = ("error", f"{type(exc).__name__}: {exc}"[:500])
        connection.send(reply)


@dataclass
class _ExtractSlot:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    tasks: collections.deque = field(default_factory=collections.deque)  # sent, unanswered, in order
    started: float = 0.0   # when the worker began the head task


@dataclass(frozen=True)
class ExtractOutcome:
    """What became of one PDF: outcome is ok (with its text), error, timeout or crash."""
    key: str
    outcome: str
    pages: int | None = None
    text: str | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def chars(self) -> int | None:
        return None if self.text is None else len(self.text)


class ExtractWorkerPool:
    """WORKERS long-lived forked processes, each with its own pipe and its own time limit.

    Unlike ProcessPoolExecutor (which cannot cancel a running task and breaks
    entirely when one worker dies) each task here belongs to one process, so a
    hang or a crash costs that process alone: it is killed or reaped, a fresh
    one forked in its place, and the tasks queued behind it are handed out
    again. Each worker holds `depth` tasks, so it never waits for the
    supervisor's commits between two PDFs; the time limit runs from the
    moment the worker could begin a task (its previous answer).
    """

    def __init__(self, workers: int, engine: str, timeout: float, depth: int = 2):
        _extract_check_engine(engine)
        self.engine = engine
        self.timeout = timeout
        self.depth = max(1, depth)
        self.replaced = 0
        self._mp = multiprocessing.get_context("fork")
        self._slots = [self._start_slot() for _ in range(max(1, workers))]

    def _start_slot(self) -> _ExtractSlot:
        parent_end, child_end = self._mp.Pipe(duplex=True)
        process = self._mp.Process(target=_extract_worker_main, args=(child_end, self.engine),
                                   name="kycourt-extract-worker", daemon=True)
        process.start()
        child_end.close()
        return _ExtractSlot(process, parent_end)

    def _replace(self, slot: _ExtractSlot, pending: collections.deque) -> None:
        """Kills or reaps the slot's worker, forks a fresh one; its unstarted tasks go back to `pending`."""
        slot.tasks.popleft()
        pending.extendleft(reversed(slot.tasks))
        slot.connection.close()
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join(5)
        fresh = self._start_slot()
        slot.process, slot.connection, slot.tasks = fresh.process, fresh.connection, collections.deque()
        self.replaced += 1

    def run(self, tasks: list[tuple[str, str]],
            should_stop: Callable[[], bool] = lambda: False) -> Iterator[ExtractOutcome]:
        """Yields one outcome per task (key, pdf_path) as they finish.

        Once `should_stop()` is true no new task is sent; those already sent finish.
        """
        pending = collections.deque(tasks)
        while True:
            stopping = should_stop()
            for slot in self._slots:
                while len(slot.tasks) < self.depth and pending and not stopping:
                    task = pending.popleft()
                    if not slot.tasks:
                        slot.started = time.monotonic()
                    slot.tasks.append(task)
                    try:
                        slot.connection.send(task[1])
                    except OSError:
                        break  # the worker is gone; _collect reports the crash
            busy = [slot for slot in self._slots if slot.tasks]
            if not busy:
                return
            wait_for = max(0.0, min(slot.started + self.timeout for slot in busy) - time.monotonic())
            waitables = [slot.connection for slot in busy] + [slot.process.sentinel for slot in busy]
            multiprocessing.connection.wait(waitables, timeout=wait_for)
            for slot in busy:
                yield from self._collect(slot, pending)

    def _collect(self, slot: _ExtractSlot, pending: collections.deque) -> Iterator[ExtractOutcome]:
        while slot.tasks:
            now = time.monotonic()
            elapsed = round(now - slot.started, 4)
            key = slot.tasks[0][0]
            if not slot.connection.poll():
                if not slot.process.is_alive():
                    yield self._crashed(slot, key, elapsed, pending)
                elif elapsed >= self.timeout:
                    self._replace(slot, pending)
                    yield ExtractOutcome(key, "timeout", seconds=elapsed,
                                         error=f"no result within {self.timeout:g} s; worker killed")
                return
            try:
                reply = slot.connection.recv()
            except (EOFError, OSError):
                yield self._crashed(slot, key, elapsed, pending)
                return
            slot.tasks.popleft()
            slot.started = now
            if reply[0] == "ok":
                yield ExtractOutcome(key, "ok", pages=reply[1], text=reply[2], seconds=elapsed)
            else:
                yield ExtractOutcome(key, reply[0], error=reply[1], seconds=elapsed)

    def _crashed(self, slot: _ExtractSlot, key: str, elapsed: float,
                 pending: collections.deque) -> ExtractOutcome:
        slot.process.join(5)
        code = slot.process.exitcode
        if code is not None and code < 0:
            try:
                cause = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                cause = f"killed by signal {-code}"
        else:
            cause = f"exited with status {code}"
        self._replace(slot, pending)
        return ExtractOutcome(key, "crash", error=f"extract worker {cause}", seconds=elapsed)

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
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(5)
            slot.connection.close()

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
    engine: str = ""
    pdfs: int = 0             # distinct PDFs handed to the workers
    reused: int = 0           # documents that reused an extracted twin's text
    stopped: bool = False     # the clock asked to stop before the queue was done


def extract(ctx: Context) -> ExtractResult:
    """Runs the extract queue to its end (or until the clock says stop)."""
    cfg, db = ctx.cfg, ctx.open_database()
    started = time.monotonic()
    result = ExtractResult(engine=cfg.EXTRACT_ENGINE)
    queued = db.extract_queue_size(cfg)
    if queued == 0 or cfg.DRY_RUN:  # a dry run touches neither the PDFs nor the store
        return result
    (ctx.workspace / "text").mkdir(parents=True, exist_ok=True)
    bar = progress(cfg, queued, "extract")
    after_rowid, passes = 0, 1
    try:
        with ExtractWorkerPool(cfg.WORKERS, cfg.EXTRACT_ENGINE, cfg.EXTRACT_TIMEOUT) as pool, \
                ThreadPoolExecutor(1, thread_name_prefix="extract-saver") as saver:
            while True:
                if ctx.clock.should_stop():
                    result.stopped = True
                    break
                rows = db.extract_queue(cfg, cfg.EXTRACT_BATCH, after_rowid)
                if not rows:
                    # A failed document stays queued until its attempts are spent:
                    # retry it in this run, one pass per attempt, so a run ends done.
                    left = db.extract_queue_size(cfg)
                    if left == 0 or passes >= cfg.MAX_EXTRACT_ATTEMPTS:
                        break
                    passes += 1
                    after_rowid = 0
                    bar.total = (bar.total or 0) + left
                    continue
                after_rowid = rows[-1]["rowid"]
                batch_started = time.monotonic()
                before = (result.extracted, result.failed_attempts, result.pages)
                _extract_batch(ctx, pool, saver, rows, result, bar)
                if ctx.clock.should_stop():
                    result.stopped = True
                log_extract.info(
                    "extract batch of %d documents: %d extracted, %d failed attempts, %d pages "
                    "in %.1f s (%s, %d workers)", len(rows), result.extracted - before[0],
                    result.failed_attempts - before[1], result.pages - before[2],
                    time.monotonic() - batch_started, cfg.EXTRACT_ENGINE, cfg.WORKERS)
                if result.stopped:
                    break
    finally:
        bar.close()
        result.seconds = round(time.monotonic() - started, 3)
    return result


def _extract_batch(ctx: Context, pool: ExtractWorkerPool, saver: ThreadPoolExecutor, rows: list,
                   result: ExtractResult, bar) -> None:
    rows_by_sha: dict[str, list] = {}
    for row in rows:
        if not row["sha256"]:
            _extract_record_failure(ctx, [row], "error", "no sha256 recorded for a downloaded document",
                                    0.0, result, bar)
            continue
        rows_by_sha.setdefault(row["sha256"], []).append(row)

    tasks = []
    for sha, sha_rows in rows_by_sha.items():
        text_path = ctx.workspace / "text" / f"{sha}.txt"
        if _extract_reuse_twin(ctx, sha, sha_rows, text_path, result, bar):
            continue
        pdf_path, problem = _extract_local_pdf(ctx, sha, sha_rows[0])
        if problem is not None:
            _extract_record_failure(ctx, sha_rows, "error", problem, 0.0, result, bar)
            continue
        tasks.append((sha, str(pdf_path)))

    result.pdfs += len(tasks)
    finished: list[tuple[list, ExtractOutcome]] = []   # extracted, text not yet saved
    saving: _ExtractSaving | None = None               # a group the saver thread has, not yet committed
    try:
        for outcome in pool.run(tasks, should_stop=ctx.clock.should_stop):
            sha_rows = rows_by_sha[outcome.key]
            if outcome.outcome != "ok":
                log_extract.warning("extract %s (%s): %s %s", outcome.key[:12], sha_rows[0]["document_id"],
                                    outcome.outcome, outcome.error)
                _extract_record_failure(ctx, sha_rows, outcome.outcome, outcome.error, outcome.seconds,
                                        result, bar)
                continue
            finished.append((sha_rows, outcome))
            if len(finished) >= _EXTRACT_COMMIT_EVERY:
                saving = _extract_hand_over(ctx, saver, saving, finished, result, bar)
                finished = []
    finally:
        saving = _extract_hand_over(ctx, saver, saving, finished, result, bar)
        _extract_settle(ctx, saving, result, bar)


# Outcomes committed per transaction: one commit per PDF costs the supervisor
# CPU the workers need on a 2-core machine; a kill loses at most these
# commits, and their PDFs are extracted again.
_EXTRACT_COMMIT_EVERY = 32


@dataclass
class _ExtractSaving:
    finished: list          # (rows, outcome) whose texts the saver thread is writing
    future: Future
    settled: bool = False   # committed (or its save failed): never committed again


def _extract_hand_over(ctx: Context, saver: ThreadPoolExecutor, saving: _ExtractSaving | None,
                       finished: list, result: ExtractResult, bar) -> _ExtractSaving | None:
    """Commits the group being saved (once saved), then hands `finished` to the saver thread."""
    _extract_settle(ctx, saving, result, bar)
    if not finished:
        return None
    return _ExtractSaving(finished, saver.submit(_extract_save_texts, ctx, [o for _, o in finished]))


def _extract_settle(ctx: Context, saving: _ExtractSaving | None, result: ExtractResult, bar) -> None:
    """Waits for a group's texts to be saved and commits it; a save's error (a full disk) is
    raised instead, and those documents keep their attempt."""
    if saving is None or saving.settled:
        return
    saving.settled = True    # before anything can raise: a second settle (the `finally`) is a no-op
    saving.future.result()
    _extract_commit_saved(ctx, saving.finished, result, bar)


def _extract_save_texts(ctx: Context, outcomes: list[ExtractOutcome]) -> None:
    """The texts to `text/<sha256>.txt`, then to the store as one group (in the saver thread)."""
    items = []
    for outcome in outcomes:
        text_path = ctx.workspace / "text" / f"{outcome.key}.txt"
        _extract_write_text(text_path, outcome.text)
        items.append((text_store_name(outcome.key), text_path))
    held = ctx.mirror.put_many(items)
    lagging = [path for name, path in items if not held.get(name)]
    try:
        sync_files(lagging)    # the store lags: until it catches up these files are the only copy
    except OSError as exc:
        raise_if_disk_full(exc, lagging[0])
        raise


def _extract_commit_saved(ctx: Context, finished: list, result: ExtractResult, bar) -> None:
    if not finished:
        return
    cfg, db = ctx.cfg, ctx.db
    with db.transaction():
        for sha_rows, outcome in finished:
            scanned = is_likely_scanned(outcome.pages, outcome.chars, cfg.SCANNED_CHARS_PER_PAGE)
            for row in sha_rows:
                db.log_extraction(row["document_id"], sha256=outcome.key, attempt=row["extract_attempts"] + 1,
                                  engine=cfg.EXTRACT_ENGINE, outcome="ok", pages=outcome.pages,
                                  chars=outcome.chars, seconds=outcome.seconds, error=None)
                db.mark_extracted(row["document_id"], pages=outcome.pages, extracted_chars=outcome.chars,
                                  likely_scanned=scanned)
    documents = sum(len(sha_rows) for sha_rows, _ in finished)
    result.attempted += documents
    result.extracted += documents
    result.pages += sum(outcome.pages for _, outcome in finished)
    result.chars += sum(outcome.chars for _, outcome in finished)
    bar.update(documents)


def _extract_reuse_twin(ctx: Context, sha: str, sha_rows: list, text_path: Path,
                        result: ExtractResult, bar) -> bool:
    """Applies an extracted twin's figures when its text file is at hand (locally or from the store)."""
    twin = ctx.db.extracted_twin(sha)
    if twin is None:
        return False
    if not text_path.is_file() and not ctx.mirror.fetch(text_store_name(sha), text_path):
        return False  # nothing to trust: extract again
    ctx.mirror.put(text_store_name(sha), text_path)
    with ctx.db.transaction():
        for row in sha_rows:
            ctx.db.log_extraction(row["document_id"], sha256=sha, attempt=row["extract_attempts"] + 1,
                                  engine=f"reused:{twin['document_id']}", outcome="ok", pages=twin["pages"],
                                  chars=twin["extracted_chars"], seconds=0.0, error=None)
            ctx.db.mark_extracted(row["document_id"], pages=twin["pages"], extracted_chars=twin["extracted_chars"],
                                  likely_scanned=bool(twin["likely_scanned"]))
    result.attempted += len(sha_rows)
    result.extracted += len(sha_rows)
    result.reused += len(sha_rows)
    bar.update(len(sha_rows))
    return True


def _extract_local_pdf(ctx: Context, sha: str, row) -> tuple[Path | None, str | None]:
    """The PDF in the workspace, fetched from the store if it is missing; or why there is none."""
    relative = row["local_pdf"] or pdf_store_name(sha)
    path = ctx.workspace / relative
    if path.is_file():
        return path, None
    # Through the mirror: its lock keeps Drive calls off the checkpointer's thread.
    if not ctx.mirror.fetch(pdf_store_name(sha), path):
        return None, f"PDF missing in the workspace ({relative}) and not in the store"
    log_extract.debug("extract: fetched %s from the store", relative)
    return path, None


def _extract_record_failure(ctx: Context, rows: list, outcome: str, error: str, seconds: float,
                            result: ExtractResult, bar) -> None:
    db = ctx.db
    with db.transaction():
        for row in rows:
            db.log_extraction(row["document_id"], sha256=row["sha256"], attempt=row["extract_attempts"] + 1,
                              engine=ctx.cfg.EXTRACT_ENGINE, outcome=outcome, pages=None, chars=None,
                              seconds=seconds, error=error)
            db.mark_extract_failed(row["document_id"], f"extract {outcome}: {error}")
    result.attempted += len(rows)
    result.failed_attempts += len(rows)
    result.exhausted += sum(row["extract_attempts"] + 1 >= ctx.cfg.MAX_EXTRACT_ATTEMPTS for row in rows)
    bar.update(len(rows))
