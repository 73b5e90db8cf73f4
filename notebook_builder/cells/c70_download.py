"""Download: fetch every queued document once, keep each distinct PDF once, store nothing torn.

Guarantees:
- Work comes from the download queue (`WorkQueues.download_queue`, the SQL verify counts),
  DOWNLOAD_BATCH rows at a time, opinions first. The stage is a session of drains (`Downloads`):
  `download()` drains the queue; the crawl (c75) drains after each unit of discovery, every
  document a drain fetched committed before it returns. A document the court withholds is never
  in the queue.
- One streamed GET an attempt, one request in flight. The pacing pause comes first, then the
  attempt is committed before the request is sent (a kill never hides one; a stop during the
  pause costs nothing). Every response is a `download_events` row, committed before its body is
  read. The size cap (MAX_PDF_BYTES) is decided from Content-Length before reading and enforced
  while streaming.
- The body is hashed as it is read and checked against Content-Length (short: transient) and the
  `%PDF-` magic anywhere in its first PDF_MAGIC_WINDOW bytes (else transient "not a PDF"); the
  stored bytes are the bytes served. Fetched documents are finished in groups (_DOWNLOAD_GROUP, or
  the oldest _DOWNLOAD_GROUP_SECONDS old): written to `tmp/<document_id>.part`, made durable with one
  flush, promoted to `pdf_by_hash/<sha256>.pdf` (c05 `durable_rename`), mirrored to the store, and
  only then marked `downloaded` in one commit. A kill leaves parts or promoted files no row claims,
  never a row claiming a missing file.
- Permanent answers (400, 401, 403, 404; 413 over the cap) fail the document at once; the queue
  never hands it out again unless RETRY_HARD. Transient ones (5xx, 408, 429, resets, timeouts, a
  torn body, a 200 that is not a PDF) are retried inline after `retry_delay` (a longer Retry-After
  wins), each failure committed, until MAX_ATTEMPTS attempts are spent.
- The court's download paths (c25): the one kept in kv `download_path` is asked first; a 404 is
  asked of the other too, in the same attempt; the path that answers a PDF is kept; a 404 on both
  is the document's verdict, never the path's. The URL is the court's (`client.document_url`: a
  TR Portal document's path with its ids as the court wrote them).
- A court whose redirects lead to its wall (TR Portal, c26 `follows_redirects`): a download
  answered by a redirect is not followed; the document is recorded not public (`wall_state`,
  c13 `mark_not_public`), never a failure, and leaves the queue.
- A stop (budget, SIGINT/SIGTERM) is honoured between attempts, during pacing and backoff; the
  document in flight is finished or rolled back. DOWNLOAD_LIMIT > 0 ends the run's downloads
  (`stopped == "limit"`). A full disk removes the `.part` and raises DiskFullError.
- `recover()` heals what a kill left: stale parts removed; a row claiming a PDF neither the
  workspace nor the store holds goes back to `discovered`; one only in the store is left alone.
- Logging: one INFO line a batch and one for the stage. DRY_RUN: no network; the queue reported.

Knobs read: DOWNLOAD_BATCH, DOWNLOAD_LIMIT, MAX_ATTEMPTS, MAX_PDF_BYTES, BACKOFF_BASE, BACKOFF_CAP,
HEARTBEAT_EVERY, DRY_RUN, RETRY_HARD (and the client's: PACING, PACING_DL, HTTP_TIMEOUT).
"""
from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import requests
import urllib3

from .c00_config import (CourtUnreachable, PermanentFetchError, PipelineError, StopRequested, StoreError,
                         TransientFetchError, utc_now)
from .c05_durable import durable_rename, raise_if_disk_full, write_temp_file
from .c06_layout import pdf_store_name
from .c10_database import KV_DOWNLOAD_PATH
from .c12_queues import WorkQueues
from .c13_records import DownloadRecords
from .c25_court import DOWNLOAD_PATHS
from .c30_client import CourtClient, classify_http_status, is_redirect, retry_after_seconds
from .c31_court_client import court_client
from .c34_mirror import progress
from .c35_context import Context, write_status

log_download = logging.getLogger("kycourt.download")

PDF_MAGIC = b"%PDF-"
# Readers (poppler, pdfium, pypdf) accept the magic anywhere in the first 1024 bytes: a body
# that begins `\r\n%PDF`, `%%EOF\r\n%PDF` or other junk before the header is a PDF.
PDF_MAGIC_WINDOW = 1024


def is_pdf_head(head: bytes) -> bool:
    """A body whose first bytes are `head` is a PDF: `%PDF-` occurs in its first PDF_MAGIC_WINDOW bytes."""
    return PDF_MAGIC in head[:PDF_MAGIC_WINDOW]
_DOWNLOAD_CHUNK = 256 * 1024
# An error answer at most this long is read, so its keep-alive connection can be reused.
_DOWNLOAD_DRAIN_LIMIT = 64 * 1024
# Above this many rows missing locally, recover() lists the store's folder once instead of asking per name.
_DOWNLOAD_LIST_THRESHOLD = 50
# Fetched documents finished together (one flush, one mirror group, one commit), and how long the
# oldest of them may wait. A kill loses the group, and each of its documents has spent an attempt:
# a larger group (16 was tried) let repeated kills use up a retried document's last attempts, so an
# interrupted crawl ended otherwise than an uninterrupted one (scripts/torture.py). At most this
# many small bodies (<= _DOWNLOAD_IN_MEMORY) wait in memory; larger ones in their .part.
_DOWNLOAD_GROUP = 4
_DOWNLOAD_GROUP_SECONDS = 0.25
# Bodies up to this size are held in memory until their group is finished (the request path then
# creates no file); larger ones stream to their .part.
_DOWNLOAD_IN_MEMORY = 1024 * 1024
# What urllib3/requests raise while a body is being read: the connection failed, not our disk.
_DOWNLOAD_READ_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError)


@dataclass
class RecoverResult:
    parts_removed: int = 0
    checked: int = 0           # rows claiming a PDF
    reverted: int = 0          # back to discovered: the PDF is nowhere
    store_only: int = 0        # PDF only in the store; extract fetches it
    unverified: int = 0        # missing locally and the store could not be asked: left alone
    spent: int = 0             # attempts all spent by killed runs: now failed (RETRY_HARD forgives)

    @property
    def healed(self) -> int:
        return self.parts_removed + self.reverted + self.spent


@dataclass
class DownloadResult:
    queued: int = 0            # download queue when the stage began
    documents: int = 0         # documents taken from the queue
    requests: int = 0          # GETs sent (attempts, and the other path's GETs after a 404)
    other_path_requests: int = 0   # GETs by the other download path after a 404 (in the same attempt)
    downloaded: int = 0
    duplicates: int = 0        # content the workspace already held (one file, several documents)
    uploaded: int = 0          # PDFs the store did not have
    bytes: int = 0
    permanent_failures: int = 0
    exhausted: int = 0         # transient to the end: MAX_ATTEMPTS spent
    retries: int = 0           # transient failures followed by another attempt
    deferred: int = 0          # stopped with attempts left; still queued
    refunded: int = 0          # attempts given back when the court turned out unreachable
    not_public: int = 0        # downloads the court answered with its wall (not public: recorded so)
    court_unreachable: str | None = None   # the breaker's message, when it stopped the stage
    left: int = 0              # download queue when the stage ended
    stopped: str | None = None
    dry_run: bool = False
    seconds: float = 0.0
    recovered: RecoverResult = field(default_factory=RecoverResult)


class NotPublicAnswer(PipelineError):
    """The court answered a download with a redirect to its wall: the document is not public."""

    def __init__(self, message: str, state: str, http_status: int):
        super().__init__(message)
        self.state, self.http_status = state, http_status


@dataclass
class _DownloadedPart:
    """A body that passed the inline checks (length, magic), waiting for its group to be finished."""
    document_id: str
    part: Path                 # tmp/<document_id>.part: the body is there unless it is held in `body`
    sha256: str
    size_bytes: int
    body: bytes | None = None  # a small body, not written yet (finishing writes the part)
    url: str = ""              # where it was answered


# ------------------------------------------------------------------ recover


class DownloadPaths:
    """Which of the court's download paths to ask first, kept like the discovery strategy (kv
    `download_path`)."""

    def __init__(self, db, paths=DOWNLOAD_PATHS):
        self.db, self.paths = db, paths
        kept = db.kv_get(KV_DOWNLOAD_PATH)
        self.kept = kept if kept in paths else None

    def order(self) -> tuple[str, ...]:
        return download_path_order(self.kept, self.paths)

    def answered_pdf(self, path: str, url: str) -> None:
        """The path that just answered a PDF (at `url`): kept from now on."""
        if path != self.kept:
            log_download.info("download path: %s (%s answered a PDF)", path, urllib.parse.urlsplit(url).path)
            self.db.kv_set(KV_DOWNLOAD_PATH, path)
            self.kept = path


def download_path_order(kept: str | None, paths=DOWNLOAD_PATHS) -> tuple[str, ...]:
    """The paths to ask, in order: the kept one (or the first), then the others (only after a 404)."""
    first = kept if kept in paths else next(iter(paths))
    return (first, *(path for path in paths if path != first))


def recover(ctx: Context) -> RecoverResult:
    """Removes stale parts and reverts rows whose PDF is gone from workspace and store."""
    db = ctx.open_database()
    result = RecoverResult()
    tmp = ctx.path("tmp")
    if tmp.is_dir():
        for part in tmp.glob("*.part"):
            part.unlink(missing_ok=True)
            result.parts_removed += 1
    missing: list[tuple[str, str]] = []   # (document_id, store name)
    for row in DownloadRecords(db).documents_claiming_files():
        result.checked += 1
        name = pdf_store_name(row["sha256"]) if row["sha256"] else None
        local = row["local_pdf"] or name
        if local and ctx.path(local).is_file():
            continue
        if name and local != name and ctx.path(name).is_file():
            continue
        missing.append((row["document_id"], name))
    if missing:
        in_store = _download_store_holds(ctx, [name for _, name in missing if name])
        revert = []
        for document_id, name in missing:
            held = in_store(name) if name else False
            if held is None:
                result.unverified += 1
            elif held:
                result.store_only += 1
            else:
                revert.append(document_id)
        if revert:
            result.reverted = DownloadRecords(db).revert_to_discovered(revert, "recover: PDF missing from workspace and store")
    result.spent = WorkQueues(db).fail_spent_attempts(ctx.cfg)
    if result.healed or result.unverified:
        log_download.info("recover: %d stale parts removed, %d rows back to discovered, %d PDFs only in "
                          "the store, %d unverified (store unreachable)", result.parts_removed,
                          result.reverted, result.store_only, result.unverified)
    return result


def _download_store_holds(ctx: Context, names: list[str]):
    """A lookup name -> True/False, or None when the store cannot answer (never guess "absent")."""
    if len(names) > _DOWNLOAD_LIST_THRESHOLD:
        try:
            listed = set(ctx.store.list_dir("pdf_by_hash"))
        except StoreError as exc:
            log_download.warning("recover: cannot list the store's pdf_by_hash (%s); rows left as they are", exc)
            return lambda name: None
        return lambda name: name in listed

    def ask(name: str) -> bool | None:
        try:
            return ctx.store.exists(name)
        except StoreError as exc:
            log_download.warning("recover: cannot ask the store about %s (%s)", name, exc)
            return None
    return ask


# ----------------------------------------------------------------- download


def download(ctx: Context, recovered: RecoverResult | None = None) -> DownloadResult:
    """Fetches the download queue; see the module docstring for what is guaranteed. `recovered`:
    the result of the `recover()` this session already ran (None: it runs here)."""
    downloads = Downloads(ctx, recovered)
    result = downloads.result
    if ctx.cfg.DRY_RUN:
        result.dry_run, result.left = True, result.queued
        log_download.info("dry run: %d documents in the download queue, nothing fetched", result.queued)
        return result
    if result.queued == 0:
        return result
    with downloads:
        # Passes over the queue; a document leaves it when it is done, so one pass normally empties
        # it. A new pass picks up rows a stop or a concurrent insert left behind.
        for _ in range(ctx.cfg.MAX_ATTEMPTS + 1):
            if not downloads.drain():
                break
    return result


class Downloads:
    """The download stage as a session of drains (its client, download path, group, progress bar and
    result held across them). `drain(limit)` takes up to `limit` documents from the queue (None: one
    pass to its end), opinions first, and finishes them before it returns, so every document it
    fetched is committed `downloaded`; `with Downloads(...)` ends the session (the last group
    finished on every exit path, status.json written, one log line). `download()` is one session of
    passes; the crawl (c75) drains after each unit of discovery."""

    def __init__(self, ctx: Context, recovered: RecoverResult | None = None):
        self.ctx, self.cfg = ctx, ctx.cfg
        self.db = ctx.open_database()
        self.started = time.monotonic()
        self.result = DownloadResult()
        self.result.recovered = recovered if recovered is not None else recover(ctx)
        self.result.queued = WorkQueues(self.db).download_queue_size(self.cfg)
        self.uploads_before = ctx.mirror.uploads
        self.client: CourtClient | None = None
        self.paths: DownloadPaths | None = None
        self.group: _DownloadGroup | None = None
        self.bar = None
        self.since_heartbeat = 0

    @property
    def open(self) -> bool:
        """Whether a drain may still take documents in this run (no stop, no DOWNLOAD_LIMIT reached,
        the court not unreachable, not a dry run)."""
        return self.result.stopped is None and not self.cfg.DRY_RUN

    def __enter__(self) -> "Downloads":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        result, db = self.result, self.db
        try:
            if self.group is not None:
                self.group.__exit__(exc_type, exc, tb)
            if self.bar is not None:
                self.bar.close()
        finally:
            result.uploaded = self.ctx.mirror.uploads - self.uploads_before
            result.left = WorkQueues(db).download_queue_size(self.cfg)
            result.seconds = round(time.monotonic() - self.started, 3)
        if exc_type is not None or self.group is None:
            return
        write_status(self.ctx, download=_download_counts(result))
        log_download.info("download: %d downloaded (%d duplicate content, %d uploaded), %d permanent, "
                          "%d exhausted, %d requests, %d left in the queue%s", result.downloaded,
                          result.duplicates, result.uploaded, result.permanent_failures, result.exhausted,
                          result.requests, result.left, f"; stopped: {result.stopped}" if result.stopped else "")

    def _start(self) -> None:
        ctx = self.ctx
        if self.client is None:
            self.client = ctx.client if ctx.client is not None else court_client(self.cfg, ctx.clock)
            ctx.client = self.client
            ctx.path("tmp").mkdir(parents=True, exist_ok=True)
            ctx.path("pdf_by_hash").mkdir(parents=True, exist_ok=True)
            self.paths = DownloadPaths(self.db, self.client.court.download_paths)
            self.group = _DownloadGroup(ctx, self.result)
            self.bar = progress(self.cfg, 0, "download")
        # The queue grows while discovery runs: the bar's total is what was taken plus what waits.
        self.bar.total = self.result.documents + WorkQueues(self.db).download_queue_size(self.cfg)
        self.bar.refresh()

    def drain(self, limit: int | None = None, *, opinions_only: bool = False) -> int:
        """Takes up to `limit` documents of the queue in its order (None: to its end; `opinions_only`:
        its opinions alone); returns how many were taken (fetched, failed, or out of attempts). A stop,
        DOWNLOAD_LIMIT or the breaker ends it (`result.stopped`); the group in hand is finished before
        it returns."""
        if not self.open:
            return 0
        self._start()
        ctx, cfg, db, result = self.ctx, self.cfg, self.db, self.result
        client, group, bar = self.client, self.group, self.bar
        after, taken = -1, 0
        try:
            while result.stopped is None and (limit is None or taken < limit):
                size = cfg.DOWNLOAD_BATCH if limit is None else min(cfg.DOWNLOAD_BATCH, limit - taken)
                batch = WorkQueues(db).download_queue(cfg, size, after, opinions_only=opinions_only)
                if not batch:
                    break
                batch_counts, outcomes = _download_counts(result), collections.Counter()
                for row in batch:
                    if cfg.DOWNLOAD_LIMIT and result.documents >= cfg.DOWNLOAD_LIMIT:
                        result.stopped = "limit"
                        break
                    if ctx.clock.should_stop():
                        result.stopped = ctx.clock.stop_reason or "stop"
                        break
                    attempts_before = result.requests
                    outcome = _download_document(ctx, client, group, row, result, self.paths)
                    outcomes[outcome] += 1
                    self.since_heartbeat += result.requests - attempts_before
                    after, taken = row["queue_key"], taken + 1
                    if outcome != "deferred":
                        result.documents += 1
                        bar.update(1)
                    if self.since_heartbeat >= cfg.HEARTBEAT_EVERY:
                        self.since_heartbeat = 0
                        write_status(ctx, download=_download_counts(result))
                    if outcome == "deferred":
                        result.stopped = ctx.clock.stop_reason or "stop"
                        break
                _download_log_batch(result, batch_counts, outcomes)
            group.finish()    # committed before the next drain, or unit of discovery, looks at the queue
        except CourtUnreachable as exc:
            group.finish_quietly()
            # The attempts spent since the court last answered say nothing about their documents.
            result.stopped, result.court_unreachable = "court unreachable", str(exc)
            result.refunded += DownloadRecords(db).refund_download_attempts(client.health.outage_attempts,
                                                           f"court unreachable; attempts given back: {exc}")
            log_download.warning("download stopped: %s; %d attempts given back", exc, result.refunded)
        return taken


def _download_counts(result: DownloadResult) -> dict[str, int]:
    return {"documents": result.documents, "requests": result.requests, "downloaded": result.downloaded,
            "permanent_failures": result.permanent_failures, "exhausted": result.exhausted,
            "retries": result.retries}


def _download_log_batch(result: DownloadResult, before: dict[str, int], outcomes: collections.Counter) -> None:
    """The one INFO line per batch (per-document detail is DEBUG)."""
    log_download.info("batch of %d: %d fetched, %d permanent, %d exhausted, %d deferred, %d retries, "
                      "%d requests", sum(outcomes.values()), outcomes["fetched"], outcomes["permanent"],
                      outcomes["exhausted"], outcomes["deferred"], result.retries - before["retries"],
                      result.requests - before["requests"])


def _download_document(ctx: Context, client: CourtClient, group: "_DownloadGroup", row,
                       result: DownloadResult, paths: DownloadPaths) -> str:
    """Attempts one document until it is fetched (added to the group), failed for good, or a stop."""
    cfg, db, clock = ctx.cfg, ctx.db, ctx.clock
    document_id = row["document_id"]
    while True:
        if clock.should_stop():
            return "deferred"
        try:
            # Paced before the attempt is recorded: a stop during the pause costs the row nothing.
            client.pace_download()
        except StopRequested:
            return "deferred"
        if clock.should_stop():
            return "deferred"
        attempts = DownloadRecords(db).record_download_attempt(document_id)
        result.requests += 1
        try:
            fetched = _download_fetch(ctx, client, row, paths, result)
        except NotPublicAnswer as exc:
            client.health.usable()   # the court answered: this document is behind its wall
            DownloadRecords(db).mark_not_public(document_id, state=exc.state, http_status=exc.http_status,
                                                error=f"not public at the court: {exc}; not followed")
            result.not_public += 1
            log_download.debug("%s: not public: %s", document_id, exc)
            return "not public"
        except PermanentFetchError as exc:
            client.health.usable()   # the court answered: it is there, this document is not
            DownloadRecords(db).mark_download_failed(document_id, http_status=exc.http_status, error=f"permanent: {exc}")
            result.permanent_failures += 1
            log_download.debug("%s: permanent failure: %s", document_id, exc)
            return "permanent"
        except TransientFetchError as exc:
            client.health.failure(exc, document_id)
            if attempts >= cfg.MAX_ATTEMPTS:
                DownloadRecords(db).mark_download_failed(document_id, http_status=exc.http_status,
                                        error=f"transient, {attempts} attempts: {exc}")
                result.exhausted += 1
                log_download.debug("%s: gave up after %d attempts: %s", document_id, attempts, exc)
                return "exhausted"
            DownloadRecords(db).mark_download_failed(document_id, http_status=exc.http_status,
                                    error=f"transient, attempt {attempts} of {cfg.MAX_ATTEMPTS}: {exc}")
            result.retries += 1
            log_download.debug("%s: %s; attempt %d of %d", document_id, exc, attempts, cfg.MAX_ATTEMPTS)
            try:
                client.backoff(attempts, exc.retry_after,
                               f"download {document_id[:12]}… attempt {attempts + 1} of {cfg.MAX_ATTEMPTS} ({exc})")
            except StopRequested:
                return "deferred"
            continue
        client.health.usable()
        group.add(fetched)
        return "fetched"


def _download_fetch(ctx: Context, client: CourtClient, row, paths: DownloadPaths,
                    result: DownloadResult) -> _DownloadedPart:
    """One GET (and, after a 404, one by the other path) → a checked body (in memory, or a
    `tmp/<document_id>.part` not yet fsynced), or a Permanent/TransientFetchError."""
    first, *others = paths.order()
    try:
        fetched = _download_fetch_by(ctx, client, row, first)
        path = first
    except PermanentFetchError as exc:
        if exc.http_status != 404 or not others:
            raise
        other = others[0]
        result.requests += 1
        result.other_path_requests += 1
        try:
            fetched = _download_fetch_by(ctx, client, row, other)   # a 404 here too: the document's
        except TransientFetchError:
            if paths.kept is None:
                raise            # no path has answered a PDF yet: retried, both paths again
            raise exc from None  # the kept path's 404 stands: the other path only wins with a PDF
        path = other
    paths.answered_pdf(path, fetched.url)
    return fetched


def _download_fetch_by(ctx: Context, client: CourtClient, row, path: str) -> _DownloadedPart:
    """One GET by one download path; see _download_fetch."""
    cap = ctx.cfg.MAX_PDF_BYTES
    document_id = row["document_id"]
    requested_at = utc_now()
    # A document the court gave a path of its own (TR Portal's ids as written) is fetched there.
    at = {"url": client.document_url(row, path)} if row["court_path"] else {}
    response = client.download_response(document_id, pace=False, path=path, **at)
    try:
        code = response.status_code
        DownloadRecords(ctx.db).record_download_event(document_id, requested_at=requested_at, http_status=code,
                                     headers=response.headers)
        if is_redirect(code, client.court):
            _download_drain(response)
            raise NotPublicAnswer(f"HTTP {code} to {response.headers.get('Location', 'the court’s wall')}",
                                  client.court.wall_state(response), code)
        verdict = classify_http_status(code)
        if verdict != "ok":
            _download_drain(response)
            if verdict == "permanent":
                raise PermanentFetchError(f"HTTP {code}", http_status=code)
            raise TransientFetchError(f"HTTP {code}", http_status=code,
                                      retry_after=retry_after_seconds(response))
        declared = _download_declared_length(response)
        if declared is not None and declared > cap:
            # Decided before reading: closing the response drops the connection with the body unread.
            raise PermanentFetchError(f"Content-Length {declared} is over MAX_PDF_BYTES ({cap})", http_status=413)
        part = ctx.path("tmp") / f"{document_id}.part"
        try:
            sha256, size, body = _download_stream(response, part, cap)
            if declared is not None and size != declared:
                raise TransientFetchError(f"truncated: {size} of {declared} bytes", http_status=code)
        except BaseException:
            part.unlink(missing_ok=True)   # a part that failed its checks is rolled back here
            raise
        return _DownloadedPart(document_id=document_id, part=part, sha256=sha256, size_bytes=size, body=body,
                               url=str(getattr(response, "url", "") or ""))
    finally:
        response.close()


def _download_declared_length(response: requests.Response) -> int | None:
    """Content-Length of the body as it will be read, or None (absent, unreadable, or content-encoded)."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return None
    try:
        value = int(response.headers.get("Content-Length", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _download_drain(response: requests.Response) -> None:
    """Reads a small error body so the keep-alive connection can be reused; a large one is dropped."""
    declared = _download_declared_length(response)
    if declared is None or declared > _DOWNLOAD_DRAIN_LIMIT:
        return
    try:
        response.content
    except _DOWNLOAD_READ_ERRORS:
        pass


def _download_stream(response: requests.Response, part: Path, cap: int) -> tuple[str, int, bytes | None]:
    """Reads the body, hashing as it goes. Returns (sha256, size, body): the body itself when it
    is at most _DOWNLOAD_IN_MEMORY bytes, else None and the body is in `part`.

    Stops reading at once when the body passes `cap` (permanent 413) or its first
    PDF_MAGIC_WINDOW bytes hold no PDF magic (transient: an HTML page behind a 200). The fsync is
    its group's (`_DownloadGroup`), one for several documents.
    """
    digest = hashlib.sha256()
    size = 0
    head = b""
    held: list[bytes] = []
    handle = None
    chunks = response.iter_content(_DOWNLOAD_CHUNK)
    try:
        while True:
            try:
                chunk = next(chunks, None)
            except _DOWNLOAD_READ_ERRORS as exc:
                raise TransientFetchError(f"body read failed after {size} bytes: {type(exc).__name__}: "
                                          f"{exc}", http_status=response.status_code) from exc
            if chunk is None:
                break
            size += len(chunk)
            if size > cap:
                raise PermanentFetchError(f"body over MAX_PDF_BYTES ({cap}) although Content-Length "
                                          "did not say so", http_status=413)
            if len(head) < PDF_MAGIC_WINDOW and not is_pdf_head(head):
                head = (head + chunk)[:PDF_MAGIC_WINDOW]
                if len(head) >= PDF_MAGIC_WINDOW and not is_pdf_head(head):
                    raise _download_not_a_pdf(response, head)
            digest.update(chunk)
            if handle is None and size > _DOWNLOAD_IN_MEMORY:
                handle = open(part, "wb")
                handle.writelines(held)
                held = []
            if handle is None:
                held.append(chunk)
            else:
                handle.write(chunk)
        if not is_pdf_head(head):
            raise _download_not_a_pdf(response, head)
        if handle is not None:
            handle.close()
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise_if_disk_full(exc, part)
        raise
    finally:
        if handle is not None:
            handle.close()
    return digest.hexdigest(), size, None if handle is not None else b"".join(held)


def _download_not_a_pdf(response: requests.Response, head: bytes) -> TransientFetchError:
    kind = response.headers.get("Content-Type", "no Content-Type")
    return TransientFetchError(f"not a PDF: {kind}, no %PDF- in its first {PDF_MAGIC_WINDOW} bytes; "
                              f"body begins {head[:32]!r}", http_status=response.status_code)


# ----------------------------------------------------------------- finishing


class _DownloadGroup:
    """Fetched documents finished together, in the stage's own thread.

    Finishing: a body whose hash is held already is dropped; the others are written (if held in
    memory), made durable together and promoted (`durable_rename`: one flush for the group; os.replace
    to pdf_by_hash/<sha>.pdf), and the group mirrored to the store (`StoreMirror.put_many`);
    then the rows are committed as `downloaded` in one transaction. A group is finished once it
    holds _DOWNLOAD_GROUP documents or its oldest is _DOWNLOAD_GROUP_SECONDS old, before the next
    pass, and on leaving the `with` block, on every exit path. A kill leaves each unfinished
    document in memory (gone), as a `.part` (recover() removes it) or as a promoted file no row
    claims yet (the next run fetches the document again and finds its hash held), never a row
    claiming a missing file. A failure (a full disk) removes the group's parts and is raised.
    """

    def __init__(self, ctx: Context, result: DownloadResult):
        self.ctx = ctx
        self.result = result
        self._parts: list[_DownloadedPart] = []
        self._since = 0.0

    def __enter__(self) -> "_DownloadGroup":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.finish_quietly()

    def finish_quietly(self) -> None:
        """`finish()` while the stage is stopping on an exception of its own: that one is raised, this
        one's error only logged."""
        try:
            self.finish()
        except Exception as error:   # noqa: BLE001 - the stage's own exception is the one raised
            log_download.error("download could not finish its last group while the stage was stopping: %s", error)

    def add(self, fetched: _DownloadedPart) -> None:
        if not self._parts:
            self._since = time.monotonic()
        self._parts.append(fetched)
        if len(self._parts) >= _DOWNLOAD_GROUP or time.monotonic() - self._since >= _DOWNLOAD_GROUP_SECONDS:
            self.finish()

    def finish(self) -> None:
        """Finishes every document added and not yet finished."""
        parts, self._parts = self._parts, []
        if not parts:
            return
        try:
            self._finish(parts)
        finally:
            for fetched in parts:
                with contextlib.suppress(OSError):
                    fetched.part.unlink(missing_ok=True)   # promoted parts are gone already

    def _finish(self, parts: list[_DownloadedPart]) -> None:
        ctx, result = self.ctx, self.result
        promote: list[_DownloadedPart] = []
        names: set[str] = set()
        for fetched in parts:
            name = pdf_store_name(fetched.sha256)
            target = ctx.path(name)
            # A name is its hash: a held file of the right size is these bytes; otherwise the bytes
            # just verified may replace a damaged local copy.
            if name not in names and not (target.is_file() and target.stat().st_size == fetched.size_bytes):
                promote.append(fetched)
            names.add(name)
        # The group is made durable together: its parts written, then one flush for all of them,
        # then promoted, then each folder synced once (`durable_rename`); then mirrored as one
        # group (a LocalStore's one flush). An fsync each cost 0.3-1.2 ms of CPU here; the
        # group's flush a fraction of that per file.
        try:
            for fetched in promote:
                if fetched.body is not None:
                    write_temp_file(fetched.part, fetched.body, sync=False)
            durable_rename([(fetched.part, ctx.path(pdf_store_name(fetched.sha256))) for fetched in promote])
        except OSError as exc:
            raise_if_disk_full(exc, ctx.path("pdf_by_hash"))
            raise
        ctx.mirror.put_many([(name, ctx.path(name)) for name in sorted(names)])
        db = ctx.db
        with db.transaction():
            for fetched in parts:
                DownloadRecords(db).mark_downloaded(fetched.document_id, sha256=fetched.sha256, size_bytes=fetched.size_bytes,
                                   local_pdf=pdf_store_name(fetched.sha256), http_status=200)
        for fetched in parts:
            result.downloaded += 1
            result.bytes += fetched.size_bytes
        result.duplicates += len(parts) - len(promote)
