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
- A worker gets EXTRACT_TIMEOUT seconds per PDF; a hung worker is killed and
  replaced (outcome `timeout`), a worker that dies (segfault, os._exit, OOM
  kill) is replaced (outcome `crash`); either is a failed attempt of that one
  PDF and the batch goes on.
- A worker only reads and parses: it sends the UTF-8 text back over its
  pipe. The stage's saver thread writes the texts of _EXTRACT_COMMIT_EVERY
  PDFs to `text/<sha256>.txt` atomically (temp name, rename) and mirrors
  them to the store as one group (`StoreMirror.put_many`: a LocalStore makes
  the group durable with one flush), while the workers go on; then the
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
  disk raises DiskFullError. The stage stops handing out PDFs once
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
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import selectors
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

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


def _extract_write_text(path: str, data: bytes) -> None:
    """Temp name then rename; no fsync (the store's copy is the durable one; when the store
    lags, `_ExtractPass._save` syncs the local files)."""
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise_if_disk_full(exc, path)
        raise


def _extract_worker_main(connection, engine: str) -> None:
    """A worker's loop: pdf_path in; ('ok', pages, chars, utf8_text, finished_at) or
    ('error', message, finished_at) out (finished_at: time.monotonic(), one clock for all processes)."""
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
            text = join_page_texts(page_texts)
            # A broken ToUnicode map can yield lone surrogates, which UTF-8 cannot hold: '?' each.
            reply = ("ok", len(page_texts), len(text), text.encode("utf-8", "replace"), time.monotonic())
        except Exception as exc:  # any parser fault is this PDF's failed attempt
            reply = ("error", f"{type(exc).__name__}: {exc}"[:500], time.monotonic())
        connection.send(reply)


@dataclass
class _ExtractSlot:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    tasks: collections.deque = field(default_factory=collections.deque)  # (key, path, sent at): unanswered
    started: float = 0.0   # when the worker could begin the head task


@dataclass(frozen=True)
class ExtractOutcome:
    """What became of one PDF: outcome is ok (with its UTF-8 text in `data`), error, timeout or crash."""
    key: str
    outcome: str
    pages: int | None = None
    chars: int | None = None
    data: bytes | None = None
    error: str | None = None
    seconds: float = 0.0


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

    def __init__(self, workers: int, engine: str, timeout: float, depth: int = 2):
        _extract_check_engine(engine)
        self.engine = engine
        self.timeout = timeout
        self.depth = max(1, depth)
        self.replaced = 0
        self._mp = multiprocessing.get_context("fork")
        self._selector = selectors.DefaultSelector()
        self._slots = [self._start_slot() for _ in range(max(1, workers))]

    def _start_slot(self) -> _ExtractSlot:
        parent_end, child_end = self._mp.Pipe(duplex=True)
        process = self._mp.Process(target=_extract_worker_main, args=(child_end, self.engine),
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
            unsent.extendleft((key, path) for key, path, _ in reversed(slot.tasks))
        self._retire(slot)
        fresh = self._slots[self._slots.index(slot)] = self._start_slot()
        self.replaced += 1
        return fresh

    def run(self, tasks: Iterable[tuple[str, str]],
            should_stop: Callable[[], bool] = lambda: False) -> Iterator[ExtractOutcome]:
        """Yields one outcome per task (key, pdf_path) as they finish.

        `tasks` is read lazily, as workers have room, so the caller may produce
        them while earlier ones run. Once `should_stop()` is true no new task is
        taken or sent (one taken as the stop came is dropped unsent); those
        already sent finish.
        """
        source = iter(tasks)
        unsent: collections.deque = collections.deque()   # tasks a replaced worker never began
        exhausted = stopping = False
        while True:
            for index in range(len(self._slots)):
                while len(self._slots[index].tasks) < self.depth and not stopping:
                    stopping = should_stop()            # before making a task: a stop costs no more work
                    if stopping:
                        break
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
                    key = slot.tasks[0][0]
                    self._replace(slot, unsent)
                    yield ExtractOutcome(key, "timeout", seconds=elapsed,
                                         error=f"no result within {self.timeout:g} s; worker killed")

    def _send(self, slot: _ExtractSlot, task: tuple[str, str], unsent: collections.deque) -> None:
        sent_at = time.monotonic()
        if not slot.tasks:
            if not slot.process.is_alive():
                # It ended while idle, before the selector said so: never blame this task for that.
                slot = self._replace(slot, unsent)
            slot.started = sent_at
        slot.tasks.append((task[0], task[1], sent_at))
        try:
            slot.connection.send(task[1])
        except OSError:
            pass  # the worker is gone: its exit sentinel wakes the supervisor, which reports the crash

    def _collect(self, slot: _ExtractSlot, readable: bool, unsent: collections.deque) -> ExtractOutcome:
        """The head task's outcome: the worker's answer, or its crash (its pipe ended, or it exited)."""
        key = slot.tasks[0][0]
        try:
            # Only the exit sentinel woke us: the worker may still have answered before it died.
            reply = slot.connection.recv() if readable or slot.connection.poll() else None
        except (EOFError, OSError):
            reply = None
        if reply is None:
            return self._crashed(slot, key, round(time.monotonic() - slot.started, 4), unsent)
        slot.tasks.popleft()
        elapsed = round(max(0.0, reply[-1] - slot.started), 4)
        # The next task began when this answer left, or when it was sent, whichever came later.
        slot.started = max(reply[-1], slot.tasks[0][2]) if slot.tasks else reply[-1]
        if reply[0] == "ok":
            return ExtractOutcome(key, "ok", pages=reply[1], chars=reply[2], data=reply[3], seconds=elapsed)
        return ExtractOutcome(key, reply[0], error=reply[1], seconds=elapsed)

    def _crashed(self, slot: _ExtractSlot, key: str, elapsed: float,
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
    try:
        with ExtractWorkerPool(cfg.WORKERS, cfg.EXTRACT_ENGINE, cfg.EXTRACT_TIMEOUT) as pool, \
                ThreadPoolExecutor(1, thread_name_prefix="extract-saver") as saver:
            for number in range(1, cfg.MAX_EXTRACT_ATTEMPTS + 1):
                if number > 1:
                    # A failed document stays queued until its attempts are spent:
                    # retry it in this run, one pass per attempt, so a run ends done.
                    left = db.extract_queue_size(cfg)
                    if left == 0:
                        break
                    bar.total = (bar.total or 0) + left
                _ExtractPass(ctx, saver, result, bar).run(pool)
                if result.stopped:
                    break
    finally:
        bar.close()
        result.seconds = round(time.monotonic() - started, 3)
    return result


# Outcomes committed per transaction: one commit per PDF costs the supervisor
# CPU the workers need on a 2-core machine; a kill loses at most these
# commits, and their PDFs are extracted again.
_EXTRACT_COMMIT_EVERY = 32


@dataclass
class _ExtractSaving:
    finished: list          # (rows, outcome) whose texts the saver thread is writing
    future: Future
    settled: bool = False   # committed (or its save failed): never committed again


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

    def __init__(self, ctx: Context, saver: ThreadPoolExecutor, result: ExtractResult, bar):
        self.ctx, self.saver, self.result, self.bar = ctx, saver, result, bar
        self.waiting: dict[str, list] = {}     # sha256 -> rows its outcome applies to, until committed
        self.finished: list = []               # (rows, outcome) extracted, text not yet saved
        self.saving: _ExtractSaving | None = None   # a group the saver thread has, not yet committed
        self.handed_out = False                # every queued PDF is with the workers: the pass's tail
        self.committed: set[str] = set()       # sha256 committed `extracted` in this pass
        self.failed: dict[str, ExtractOutcome] = {}   # sha256 whose PDF failed in this pass
        self.text_folder = os.path.join(ctx.workspace, "text")

    def run(self, pool: ExtractWorkerPool) -> None:
        ctx, result = self.ctx, self.result
        try:
            for outcome in pool.run(self.tasks(), should_stop=ctx.clock.should_stop):
                if outcome.outcome != "ok":
                    sha_rows = self.waiting.pop(outcome.key)
                    self.failed[outcome.key] = outcome
                    log_extract.warning("extract %s (%s): %s %s", outcome.key[:12], sha_rows[0]["document_id"],
                                        outcome.outcome, outcome.error)
                    _extract_record_failure(ctx, sha_rows, outcome.outcome, outcome.error, outcome.seconds,
                                            result, self.bar)
                    continue
                self.finished.append((self.waiting[outcome.key], outcome))
                # In the tail, a smaller group whenever the saver is free: the last group's save and
                # commit would otherwise run alone after the last PDF, on idle cores.
                if len(self.finished) >= _EXTRACT_COMMIT_EVERY or (
                        self.handed_out and (self.saving is None or self.saving.future.done())):
                    self.hand_over()
        finally:
            self.hand_over()
            self.settle()
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
                    _extract_record_failure(ctx, [row], "error", "no sha256 recorded for a downloaded document",
                                            0.0, result, bar)
                    continue
                if sha in self.waiting:
                    self.waiting[sha].append(row)
                    continue
                if sha in self.failed:        # the same PDF, one attempt per pass: its outcome again
                    failure = self.failed[sha]
                    _extract_record_failure(ctx, [row], failure.outcome, failure.error, 0.0, result, bar)
                    continue
                twin = twins.get(sha) or (ctx.db.extracted_twin(sha) if sha in self.committed else None)
                if twin is not None and _extract_reuse_twin(ctx, sha, row, twin, result, bar):
                    continue
                pdf_path, problem = _extract_local_pdf(ctx, sha, row)
                if problem is not None:
                    _extract_record_failure(ctx, [row], "error", problem, 0.0, result, bar)
                    continue
                self.waiting[sha] = [row]
                result.pdfs += 1
                yield sha, pdf_path
            log_extract.info("extract: a batch of %d documents handed out; so far %d extracted, %d failed "
                             "attempts, %d pages (%s, %d workers)", len(rows), result.extracted,
                             result.failed_attempts, result.pages, cfg.EXTRACT_ENGINE, cfg.WORKERS)

    def hand_over(self) -> None:
        """Commits the group being saved (once saved), then hands the finished ones to the saver thread."""
        self.settle()
        if self.finished:
            outcomes = [outcome for _, outcome in self.finished]
            self.saving = _ExtractSaving(self.finished, self.saver.submit(self._save, outcomes))
            self.finished = []

    def settle(self) -> None:
        """Waits for a group's texts to be saved and commits it; a save's error (a full disk) is
        raised instead, and those documents keep their attempt."""
        saving = self.saving
        if saving is None or saving.settled:
            return
        saving.settled = True    # before anything can raise: a second settle (the `finally`) is a no-op
        saving.future.result()
        _extract_commit_saved(self.ctx, saving.finished, self.result, self.bar)
        for _, outcome in saving.finished:
            self.waiting.pop(outcome.key, None)
            self.committed.add(outcome.key)

    def _save(self, outcomes: list[ExtractOutcome]) -> None:
        """The texts to `text/<sha256>.txt`, then to the store as one group (in the saver thread)."""
        items = []
        for outcome in outcomes:
            text_path = os.path.join(self.text_folder, f"{outcome.key}.txt")
            _extract_write_text(text_path, outcome.data)
            items.append((text_store_name(outcome.key), text_path))
        held = self.ctx.mirror.put_many(items)
        lagging = [path for name, path in items if not held.get(name)]
        try:
            sync_files(lagging)    # the store lags: until it catches up these files are the only copy
        except OSError as exc:
            raise_if_disk_full(exc, lagging[0])
            raise


def _extract_commit_saved(ctx: Context, finished: list, result: ExtractResult, bar) -> None:
    if not finished:
        return
    cfg = ctx.cfg
    ctx.db.record_extracted([
        {"document_id": row["document_id"], "sha256": outcome.key, "attempt": row["extract_attempts"] + 1,
         "engine": cfg.EXTRACT_ENGINE, "pages": outcome.pages, "chars": outcome.chars,
         "seconds": outcome.seconds,
         "likely_scanned": is_likely_scanned(outcome.pages, outcome.chars, cfg.SCANNED_CHARS_PER_PAGE)}
        for sha_rows, outcome in finished for row in sha_rows])
    documents = sum(len(sha_rows) for sha_rows, _ in finished)
    result.attempted += documents
    result.extracted += documents
    result.pages += sum(outcome.pages for _, outcome in finished)
    result.chars += sum(outcome.chars for _, outcome in finished)
    bar.update(documents)


def _extract_reuse_twin(ctx: Context, sha: str, row, twin, result: ExtractResult, bar) -> bool:
    """Applies an extracted twin's figures when its text file is at hand (locally or from the store)."""
    text_path = ctx.workspace / "text" / f"{sha}.txt"
    if not text_path.is_file() and not ctx.mirror.fetch(text_store_name(sha), text_path):
        return False  # nothing to trust: extract again
    ctx.mirror.put(text_store_name(sha), text_path)
    ctx.db.record_extracted([{"document_id": row["document_id"], "sha256": sha, "attempt": row["extract_attempts"] + 1,
                              "engine": f"reused:{twin['document_id']}", "pages": twin["pages"],
                              "chars": twin["extracted_chars"], "seconds": 0.0,
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
