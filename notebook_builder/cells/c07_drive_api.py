"""Drive API v2 requests as the Drive store sends them: paced, retried, named when they fail.

Guarantees:
- `DriveRequests.retrying(what, call)`: 5xx, 408, 429, 403 rateLimitExceeded/userRateLimitExceeded
  and connection errors are retried up to `max_tries` times, sleeping `retry_delay` (backoff_base
  after the first failure, doubling up to backoff_cap) between tries: the same request again (an
  insert under the same id, an update of the same file), no lookup. 403 storageQuotaExceeded raises
  `StoreQuotaExceeded` at once; any other failure a `StoreError` naming the act and Drive's reason.
  `sleep` is the run clock's: a stop during the wait ends it, and the act fails as a StoreError.
- Writes are paced (`DriveWritePacer`): at most `writes_per_second` a second, halved on every
  rate-limit answer and raised a little after each write that passes (AIMD, with a ceiling learnt
  below Drive's own limit). With `pacer_state` (the workspace's checkpoint/drive-pacer.json) the
  bucket is that file's: every store and process of the workspace writes through one pacer
  (`shared_pacer`), and a restarted run starts at the rate Drive last granted. httplib2's own
  resend of a dropped request is turned off: every try of a write is paced.
- Every file and folder is inserted under an id chosen before the request (files.generateIds,
  DRIVE_ID_BATCH at a time) and journaled first (`insert_journal`: a run killed mid-insert is
  followed by one that knows it): a retried insert Drive had committed is answered 409 and the
  file is taken as it is, never created twice. The inserts of the last DRIVE_LIST_LAG_SECONDS
  are asked for by id (`sent_file`) where a listing, which lags behind inserts, does not show them.
- A rewritten file's new bytes replace its head revision (`newRevision=false`): Drive keeps no
  earlier revision of it. `delete` removes a file for good (never through the trash).
- A file up to `multipart_limit` bytes (5 MiB) is sent in one request, a larger one with the
  resumable protocol (100 MiB chunks). A download goes to a temporary file, is checked against
  Drive's md5 (a torn one is retried like a dropped connection; torn every time: IntegrityError)
  and is renamed into place.
- An access token about to expire is refreshed before the request (`RefreshingAuth`: pydrive2
  would start an interactive login); a 401 on the way is refreshed and retried by oauth2client.
- `connect_drive(api_root)` builds the same pydrive2 + googleapiclient stack against any
  Drive-compatible endpoint (the simulated Drive), offline: the discovery document googleapiclient
  ships with its root URL replaced, and dummy OAuth2 credentials refreshed at `<api_root>token`.

Knobs read: none (drive_store's `open_drive_store` passes them).
"""
from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import fcntl
import hashlib
import http.client
import json
import logging
import mimetypes
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httplib2
from googleapiclient.errors import HttpError
from googleapiclient.http import MediaIoBaseUpload
from oauth2client.client import AccessTokenRefreshError
from pydrive2.auth import GoogleAuth, RefreshError
from pydrive2.files import ApiRequestError

from .c00_config import IntegrityError, StoreError, StoreQuotaExceeded, retry_delay
from .c05_durable import atomic_write

log_drive_api = logging.getLogger("kycourt.drive")

DRIVE_FOLDER_MIME = "application/vnd.google-apps.folder"
_DRIVE_RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
# No HTTP answer at all: worth retrying. (Not OSError: a missing local file is not transient.)
_DRIVE_TRANSPORT_ERRORS = (httplib2.HttpLib2Error, http.client.HTTPException, ConnectionError,
                           TimeoutError, socket.gaierror, ssl.SSLError)
DRIVE_PAGE_SIZE = 1000           # the most Drive v2 files.list returns per page
_DRIVE_HASH_BLOCK = 1024 * 1024
DRIVE_MULTIPART_LIMIT = 5 * 1024 * 1024    # Google: multipart for files of 5 MB or less
_DRIVE_RESUMABLE_CHUNK = 100 * 1024 * 1024
DRIVE_ID_BATCH = 100             # ids one files.generateIds asks for (Drive allows 1000)
# How long a file an insert created is asked for by id when a listing does not show it (Drive's
# listings lag seconds behind inserts; after this long a missing file was trashed by someone).
DRIVE_LIST_LAG_SECONDS = 120.0
# An access token this close to its expiry is refreshed before a request (a request on the way then
# still carries a live token); oauth2client's token_expiry is naive UTC.
_DRIVE_TOKEN_MARGIN = _dt.timedelta(seconds=5)


class _DriveTornDownload(ConnectionError):
    """A download whose bytes do not match Drive's md5: retried like a dropped connection."""


# ------------------------------------------------------ pure decisions


def drive_verdict(status: int | None, reason: str, message: str) -> str:
    """'quota', 'retry' or 'fail' for one failed Drive request (status None: no HTTP answer)."""
    if status == 403 and (reason == "storageQuotaExceeded"
                          or (reason == "quotaExceeded" and "storage" in message.lower())):
        return "quota"
    if status is None or status >= 500 or status in (408, 429):
        return "retry"
    if status == 403 and reason in _DRIVE_RATE_LIMIT_REASONS:
        return "retry"
    return "fail"


def _drive_is_rate_limit(status: int | None, reason: str) -> bool:
    return status == 429 or (status == 403 and reason in _DRIVE_RATE_LIMIT_REASONS)


class DriveWritePacer:
    """A token bucket for Drive writes that slows down on rate limits and speeds up again.

    `wait()` blocks (through `sleep`) until the next write may start, at most
    `rate` writes a second, never more than `ceiling`. `limited()` halves the
    rate (not below `min_rate`), and a refusal near the ceiling (at more than
    0.9 of it) lowers the ceiling to 0.9 of the rate refused; `passed()` adds
    `max_rate / 20` back to the rate after a write that went through, and
    `max_rate / 1000` to the ceiling, up to `max_rate`: additive increase,
    multiplicative decrease, as TCP does, and a ceiling learnt below Drive's
    own limit, so the rate does not climb straight back into it (a refusal
    costs a request). A refusal far below the ceiling is a burst, not a lower
    limit. Thread-safe. `now` and `sleep` are injectable for tests.

    With `state`, a file (the workspace's checkpoint/drive-pacer.json), the
    bucket lives there, read and written under a POSIX lock at every write:
    every process of the workspace takes its turn from the same bucket, and a
    restarted run goes on at the rate and from the next turn Drive last
    granted (wall-clock time: `now` defaults to time.time then).
    """

    def __init__(self, max_rate: float, *, min_rate: float = 0.05, now: Callable[[], float] | None = None,
                 sleep: Callable[[float], Any] = time.sleep, state: str | os.PathLike | None = None):
        if max_rate <= 0:
            raise ValueError(f"writes per second must be positive, not {max_rate}")
        self.max_rate, self.min_rate = max_rate, min(min_rate, max_rate)
        self.state = Path(state) if state is not None else None
        self._now = now or (time.time if self.state is not None else time.monotonic)
        self._sleep = sleep
        self.rate = self.ceiling = max_rate
        self._next = self._now()
        self._lock = threading.Lock()
        self.limited_count = 0

    @contextlib.contextmanager
    def _bucket(self):
        """The bucket, current, for one change: this process's lock, and the state file's under a
        POSIX lock (read before, written after)."""
        with self._lock:
            if self.state is None:
                yield
                return
            self.state.parent.mkdir(parents=True, exist_ok=True)
            with open(self.state, "a+") as handle:
                fcntl.lockf(handle, fcntl.LOCK_EX)
                handle.seek(0)
                try:
                    saved = json.loads(handle.read() or "{}")
                    self.rate = min(self.max_rate, max(self.min_rate, float(saved.get("rate", self.rate))))
                    self.ceiling = min(self.max_rate, max(self.min_rate, float(saved.get("ceiling", self.ceiling))))
                    self._next = float(saved.get("next_at", self._next))
                except (ValueError, TypeError, AttributeError):
                    pass                  # an unreadable bucket: this process's own values stand
                yield
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps({"rate": self.rate, "ceiling": self.ceiling, "next_at": self._next}))
                handle.flush()

    def wait(self, sleep: Callable[[float], Any] | None = None) -> float:
        """Blocks until a write may start; returns the seconds waited. (An interrupted sleep
        lets the write go: a stopping run still mirrors its checkpoint.) `sleep`: the caller's
        (a run clock's interruptible one), else the pacer's."""
        with self._bucket():
            start = max(self._now(), self._next)
            self._next = start + 1.0 / self.rate
            delay = start - self._now()
        if delay > 0:
            (sleep or self._sleep)(delay)
        return max(0.0, delay)

    def limited(self) -> None:
        with self._bucket():
            if self.rate > 0.9 * self.ceiling:
                self.ceiling = max(self.min_rate, 0.9 * min(self.ceiling, self.rate))
            self.rate = max(self.min_rate, self.rate / 2)
            self._next = max(self._next, self._now() + 1.0 / self.rate)
            self.limited_count += 1

    def passed(self) -> None:
        with self._bucket():
            self.ceiling = min(self.max_rate, self.ceiling + self.max_rate / 1000)
            self.rate = min(self.ceiling, self.rate + self.max_rate / 20)


_PACERS: dict[tuple[str, float], DriveWritePacer] = {}
_PACERS_LOCK = threading.Lock()


def shared_pacer(max_rate: float, state: str | os.PathLike) -> DriveWritePacer:
    """The one pacer of this process for a workspace's bucket (its state file): every Drive store
    the process opens for that workspace writes through it."""
    key = (str(Path(state).absolute()), float(max_rate))
    with _PACERS_LOCK:
        if key not in _PACERS:
            _PACERS[key] = DriveWritePacer(max_rate, state=state)
        return _PACERS[key]


def drive_query_literal(text: str) -> str:
    """A string literal of Drive's query language: backslash and quote escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def drive_entry(item: Any) -> dict:
    """The few metadata fields we keep of a Drive file resource (`trashed` only when it is)."""
    keys = ("id", "title", "mimeType", "md5Checksum", "fileSize", "createdDate", "modifiedDate", "version",
            "description")
    entry = {key: item.get(key) for key in keys if item.get(key) is not None}
    if (item.get("labels") or {}).get("trashed"):
        entry["trashed"] = True
    return entry


def _drive_status(exc: BaseException) -> int | None:
    failure = _drive_failure(exc)
    return failure[0] if failure else None


def _drive_failure(exc: BaseException) -> tuple[int | None, str, str] | None:
    """(status, reason, message) when `exc` is a failed Drive request; None for anything else.

    pydrive2 wraps HttpError in ApiRequestError, except in GetAbout (raw
    HttpError), and when the error body is not JSON (a proxy's HTML page),
    where ApiRequestError's own json.loads raises JSONDecodeError with the
    HttpError only in the exception context.
    """
    if isinstance(exc, ApiRequestError):
        error = exc.error or {}
        http_error = exc.args[0] if exc.args and isinstance(exc.args[0], HttpError) else None
        status = error.get("code") or (http_error.resp.status if http_error is not None else None)
        return int(status) if status else None, exc.GetField("reason") or "", error.get("message", "")
    if isinstance(exc, HttpError):
        reason, message = "", ""
        try:
            error = json.loads(exc.content.decode("utf-8")).get("error", {})
            reason = (error.get("errors") or [{}])[0].get("reason", "")
            message = error.get("message", "")
        except (ValueError, AttributeError):
            message = (exc.content or b"")[:200].decode("utf-8", "replace")
        return exc.resp.status, reason, message
    if isinstance(exc, json.JSONDecodeError):
        context = exc.__context__
        while context is not None and not isinstance(context, HttpError):
            context = context.__context__
        return _drive_failure(context) if context is not None else None
    if isinstance(exc, (RefreshError, AccessTokenRefreshError)):
        return 401, "authError", f"the Drive token could not be refreshed: {exc}"
    if isinstance(exc, _DRIVE_TRANSPORT_ERRORS):
        return None, type(exc).__name__, str(exc)
    return None


def drive_md5_of_file(path: str | os.PathLike) -> tuple[str, int]:
    digest, size = hashlib.md5(), 0
    with open(path, "rb") as handle:
        while block := handle.read(_DRIVE_HASH_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def drive_mime_type(title: str) -> str:
    return mimetypes.guess_type(title)[0] or "application/octet-stream"


# ------------------------------------------------------------ requests


class DriveRequests:
    """The Drive v2 requests of one store: paced writes, retries, inserts under ids chosen first and
    journaled, and the files those inserts made, asked for by id. Not thread-safe on its own: the
    store calls it under its lock."""

    def __init__(self, drive, *, backoff_base: float = 1.0, backoff_cap: float = 32.0, max_tries: int = 6,
                 sleep: Callable[[float], Any] = time.sleep, writes_per_second: float | None = None,
                 multipart_limit: int = DRIVE_MULTIPART_LIMIT, insert_journal: str | os.PathLike | None = None,
                 pacer_state: str | os.PathLike | None = None):
        if max_tries < 1:
            raise StoreError(f"max_tries must be at least 1, not {max_tries}")
        self.drive = drive
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.max_tries, self.sleep = max_tries, sleep
        self.multipart_limit = multipart_limit
        self.pacer = None
        if writes_per_second:
            self.pacer = (shared_pacer(writes_per_second, pacer_state) if pacer_state is not None
                          else DriveWritePacer(writes_per_second, sleep=sleep))
        # httplib2 sends a request again at once when its connection drops (RETRIES 2): a write no
        # pacer saw. One try each: every try of a write is ours, paced and counted.
        httplib2.RETRIES = 1
        self._id_pool: list[str] = []                        # ids from files.generateIds, not used yet
        self._journal = Path(insert_journal) if insert_journal else None
        # The inserts sent in the last DRIVE_LIST_LAG_SECONDS, by this store or (read from the insert
        # journal) a killed run before it: (time.time(), key, file id), oldest first. The key is the
        # store name; a folder's is its Drive path and "/".
        self._sent: collections.deque = collections.deque(self._load_journal())

    def execute(self, request) -> Any:
        """A googleapiclient request sent with this thread's http, the access token refreshed first
        when it is about to expire (pydrive2's own calls do that; a 401 would cost a request)."""
        self.drive.auth.access_token_expired         # noqa: B018 - RefreshingAuth refreshes on reading it
        return request.execute(http=self.http())

    def service(self):
        """The googleapiclient Drive v2 service pydrive2 built (built now if it has not yet)."""
        auth = self.drive.auth
        if auth.service is None:
            auth.Authorize()
        return auth.service

    def http(self):
        """This thread's authorized http object, the one pydrive2's own calls use."""
        auth = self.drive.auth
        if not getattr(auth.thread_local, "http", None):
            auth.thread_local.http = auth.Get_Http_Object()
        return auth.thread_local.http

    def retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, retried on transient Drive failures; named errors for the rest."""
        for attempt in range(self.max_tries):
            try:
                return call()
            except Exception as exc:   # noqa: BLE001 - _drive_failure decides what is ours
                failure = _drive_failure(exc)
                if failure is None:
                    raise
                status, reason, message = failure
                verdict = drive_verdict(status, reason, message)
                detail = f"{status or 'no answer'} {reason}: {message}".strip()
                if verdict == "quota":
                    raise StoreQuotaExceeded(f"Google Drive is full, cannot {what}: {detail}") from None
                if verdict == "fail":
                    raise StoreError(f"Google Drive refused to {what}: {detail}") from None
                if attempt + 1 == self.max_tries:
                    raise StoreError(f"Google Drive failed to {what} after {self.max_tries} tries: "
                                     f"{detail}") from None
                delay = retry_delay(attempt + 1, base=self.backoff_base, cap=self.backoff_cap)
                if _drive_is_rate_limit(status, reason) and self.pacer is not None:
                    # The pacer slows every later write too; the retry waits its turn there.
                    self.pacer.limited()
                    delay = min(delay, 1.0 / self.pacer.rate)
                log_drive_api.warning("Drive could not %s (%s); retry %d in %.1fs", what, detail, attempt + 1, delay)
                if self.sleep(delay) is False:
                    raise StoreError(f"stopped while waiting to retry: Google Drive could not {what}: "
                                     f"{detail}") from None
        raise AssertionError("unreachable")

    def write(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, a write request, paced and retried."""
        def attempt() -> Any:
            self.pace()
            result = call()
            if self.pacer is not None:
                self.pacer.passed()
            return result
        return self.retrying(what, attempt)

    def pace(self) -> None:
        if self.pacer is not None:
            self.pacer.wait(self.sleep)

    def get(self, file_id: str) -> dict | None:
        """The Drive file resource of `file_id` (retried); None when Drive has no such file."""
        def attempt() -> dict | None:
            try:
                return self.execute(self.service().files().get(fileId=file_id))
            except Exception as exc:   # noqa: BLE001 - a 404 is an answer; the rest is retrying's
                if _drive_status(exc) == 404:
                    return None
                raise
        return self.retrying(f"look up Drive file {file_id}", attempt)

    def trash(self, file_id: str, what: str) -> None:
        """files.trash: Drive keeps the file in its trash (the user may restore it); never a delete."""
        self.write(f"move {what} to Drive's trash",
                   lambda: self.execute(self.service().files().trash(fileId=file_id)))

    def patch(self, file_id: str, what: str, **fields: Any) -> dict:
        """files.patch (metadata only: a title, the parents)."""
        return self.write(what, lambda: self.execute(self.service().files().patch(fileId=file_id, **fields)))

    def insert(self, key: str, what: str, body: dict, open_source: Callable[[], Any] | None = None,
               size: int = 0) -> tuple[dict, bool]:
        """files.insert under an id chosen first and journaled as `key`; a retry sends the same insert,
        and Drive's 409 (an earlier try was committed) is answered with the file itself.
        Returns (the file, whether an earlier try made it)."""
        file_id = self.reserve(key)
        earlier = False

        def attempt() -> dict:
            nonlocal earlier
            try:
                if open_source is None:
                    return self.execute(self.service().files().insert(body={**body, "id": file_id}))
                with open_source() as stream:
                    media = MediaIoBaseUpload(stream, body["mimeType"], resumable=size > self.multipart_limit,
                                              chunksize=_DRIVE_RESUMABLE_CHUNK)
                    return self.execute(self.service().files().insert(body={**body, "id": file_id},
                                                                      media_body=media))
            except Exception as exc:   # noqa: BLE001 - a 409 is an answer; the rest is retrying's
                if _drive_status(exc) != 409:
                    raise
            log_drive_api.info("Drive already holds %s as %s (an earlier try was committed)", key, file_id)
            held = self.get(file_id)
            if held is None:
                raise StoreError(f"Drive answered that {file_id} exists, then that it does not")
            earlier = True
            return held
        stored = drive_entry(self.write(what, attempt))
        if stored.get("trashed"):    # ours, trashed by someone since: a new file under a new id
            return self.insert(key, what, body, open_source, size)
        return stored, earlier

    def update(self, name: str, existing: dict, mime_type: str, open_source: Callable[[], Any], size: int) -> dict:
        """files.update of `existing` with new bytes replacing its head revision (newRevision=false):
        Drive keeps no earlier revision to count against the quota."""
        def attempt():
            with open_source() as stream:
                media = MediaIoBaseUpload(stream, mime_type, resumable=size > self.multipart_limit,
                                          chunksize=_DRIVE_RESUMABLE_CHUNK)
                return self.execute(self.service().files().update(
                    fileId=existing["id"], body={"mimeType": mime_type}, media_body=media, newRevision=False))
        return drive_entry(self.write(f"upload {name}", attempt))

    def delete(self, file_id: str, what: str) -> None:
        """files.delete: the file is gone for good (not to the trash, which counts in the quota);
        one already gone is no error."""
        def attempt() -> None:
            try:
                self.execute(self.service().files().delete(fileId=file_id))
            except Exception as exc:   # noqa: BLE001 - a 404 is an answer; the rest is retrying's
                if _drive_status(exc) != 404:
                    raise
        self.write(f"remove {what}", attempt)
        # Gone: no listing that does not show it is a reason to ask Drive for it by id.
        if any(sent_id == file_id for _, _, sent_id in self._sent):
            self._sent = collections.deque(sent for sent in self._sent if sent[2] != file_id)
            self._write_journal()

    def download(self, name: str, entry: dict, target: Path) -> None:
        """The bytes of one Drive file to `target`, checked against Drive's md5 (torn: retried)."""
        temp = target.with_name(target.name + ".download")

        def attempt() -> None:
            self.drive.CreateFile({"id": entry["id"]}).GetContentFile(str(temp))
            if entry.get("md5Checksum"):
                md5, size = drive_md5_of_file(temp)
                if md5 != entry["md5Checksum"]:
                    raise _DriveTornDownload(f"{name} downloaded from Drive has md5 {md5} ({size} bytes), "
                                             f"Drive says {entry['md5Checksum']} ({entry.get('fileSize')} bytes)")
        try:
            try:
                self.retrying(f"download {name}", attempt)
            except StoreError as exc:
                if "md5" in str(exc):     # torn every time: the bytes are not what Drive says
                    raise IntegrityError(str(exc)) from None
                raise
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)

    def reserve(self, key: str) -> str:
        """A new id for an insert of `key`, journaled before the insert is sent (so a run killed while
        it was in flight is followed by one that asks for it by id)."""
        if not self._id_pool:
            answer = self.retrying("reserve Drive file ids", lambda: self.execute(
                self.service().files().generateIds(maxResults=DRIVE_ID_BATCH, space="drive")))
            self._id_pool = list(answer.get("ids") or [])
            if not self._id_pool:
                raise StoreError("Google Drive generated no file ids")
        file_id = self._id_pool.pop(0)
        self._sent.append((time.time(), key, file_id))
        self._write_journal()
        return file_id

    def _load_journal(self) -> list[tuple[float, str, str]]:
        """The inserts of the last DRIVE_LIST_LAG_SECONDS the journal records (unreadable lines skipped)."""
        if self._journal is None or not self._journal.is_file():
            return []
        horizon = time.time() - DRIVE_LIST_LAG_SECONDS
        sent = []
        for line in self._journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                at, key, file_id = json.loads(line)
                if float(at) >= horizon and isinstance(key, str) and isinstance(file_id, str):
                    sent.append((float(at), key, file_id))
            except (ValueError, TypeError):
                log_drive_api.warning("Drive insert journal %s: unreadable line skipped", self._journal)
        return sent

    def _write_journal(self) -> None:
        """The inserts of the last DRIVE_LIST_LAG_SECONDS, one JSON line each, replacing the journal
        (atomic: it only has to outlive a killed process; a lost runtime loses it with the workspace)."""
        if self._journal is None:
            return
        self._journal.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(list(sent)) + "\n" for sent in self.recent_inserts())
        atomic_write(self._journal, lines.encode("utf-8"))

    def recent_inserts(self) -> list[tuple[float, str, str]]:
        horizon = time.time() - DRIVE_LIST_LAG_SECONDS
        while self._sent and self._sent[0][0] < horizon:
            self._sent.popleft()
        return list(self._sent)

    def held(self, file_id: str, folder_id: str, *, folder: bool) -> dict | None:
        """files.get of `file_id`: its entry when it is an untrashed file (folder) in `folder_id`."""
        item = self.get(file_id)
        if item is None or (item.get("labels") or {}).get("trashed"):
            return None
        if (item.get("mimeType") == DRIVE_FOLDER_MIME) != folder:
            return None
        if not any(parent.get("id") == folder_id for parent in item.get("parents") or []):
            return None
        return drive_entry(item)

    def sent_file(self, key: str, folder_id: str, *, folder: bool) -> dict | None:
        """The file (folder) an insert of `key` sent lately created, asked for by id; None when no
        such insert was sent, or Drive committed none of them."""
        for _, sent_key, file_id in reversed(self.recent_inserts()):
            if sent_key == key:
                found = self.held(file_id, folder_id, folder=folder)
                if found is not None:
                    log_drive_api.info("Drive holds %s as %s, which its listing does not show yet", key, file_id)
                    return found
        return None


class RefreshingAuth(GoogleAuth):
    """pydrive2's GoogleAuth, except that an expired access token is refreshed, never answered
    with an interactive login (pydrive2 calls LocalWebserverAuth before any request once the
    token's expiry has passed: an hour into a Colab run). A token that still does not work is
    refreshed again by oauth2client on the 401; one that cannot be refreshed is a StoreError."""

    @property
    def access_token_expired(self) -> bool:
        credentials = self.credentials
        if credentials is None:
            return True
        expiry = credentials.token_expiry
        if credentials.access_token_expired or (
                expiry is not None and expiry - _dt.datetime.utcnow() < _DRIVE_TOKEN_MARGIN):
            log_drive_api.info("Drive access token expires; refreshing it")
            credentials.refresh(self._build_http())
        return False


def connect_drive(api_root: str, *, access_token: str = "simdrive-token", http_timeout: float = 60.0):
    """A real pydrive2 GoogleDrive speaking to the Drive-compatible endpoint at `api_root`.

    For testing (the simulated Drive, or an independent check's own server):
    the Drive v2 discovery document googleapiclient ships (never fetched) with
    its root URL replaced, and dummy OAuth2 credentials whose refresh asks
    `<api_root>token`, so an expiring token is exercised as in Colab.
    """
    import importlib.resources

    from googleapiclient.discovery import build_from_document
    from oauth2client.client import OAuth2Credentials
    from pydrive2.drive import GoogleDrive

    root = api_root.rstrip("/") + "/"
    if not root.startswith(("http://", "https://")):
        raise StoreError(f"invalid Drive API root {api_root!r}: expected an http(s) URL")
    documents = importlib.resources.files("googleapiclient") / "discovery_cache" / "documents"
    discovery = json.loads((documents / "drive.v2.json").read_text(encoding="utf-8"))
    discovery["rootUrl"] = root
    discovery["mtlsRootUrl"] = root
    discovery["baseUrl"] = root + discovery["servicePath"]
    gauth = RefreshingAuth(settings_file=None, http_timeout=http_timeout)
    gauth.credentials = OAuth2Credentials(access_token, "kycourt-test-client", "kycourt-test-secret",
                                          "kycourt-test-refresh", None, root + "token", "kycourt-pipeline")
    gauth.http = gauth.credentials.authorize(gauth._build_http())
    gauth.service = build_from_document(discovery, http=gauth.http)
    return GoogleDrive(gauth)
