"""Google Drive as the Store, over pydrive2 (Drive API v2).

Guarantees, on top of the Store interface (c20_store):
- A store name `a/b/c.pdf` is the file titled `c.pdf` in folder `b` in folder
  `a` under the root folder (`folder_path`, itself a path under My Drive).
  Folders are created on demand; their ids are cached.
- One name, one file. Drive allows several files (and folders) with the same
  title in one folder; we always pick the oldest (`createdDate`, then `id`),
  and before inserting a new file the folder is asked afresh by title, so a
  write never adds a second copy: it updates the one that is there.
- A content-addressed name (`pdf_by_hash/`, `text/`) is never updated: the
  same bytes again (Drive's md5Checksum and fileSize) are a no-op, other
  bytes raise `IntegrityError`. Mutable names (`status.json`,
  `ky_court.sqlite`) are updated in place, as a new revision of the same file.
- A file up to `multipart_limit` bytes (5 MiB, Google's advice) is stored in
  one request (`uploadType=multipart`: metadata and bytes together); a larger
  one with Drive's resumable protocol (a session, then 100 MiB chunks). The
  md5 Drive reports for the stored file is checked against the local bytes.
  Downloads go to a temporary file, are checked against Drive's md5 (a
  truncated or torn download is retried like a dropped connection), then
  `os.replace`d.
- Writes are paced (`DriveWritePacer`): at most `writes_per_second` files a
  second (Drive allows "about 2"), halved on every 403/429 rate-limit answer
  and raised again a little after each write that passes, up to that rate.
- Texts are packed: `upload_files` stores two or more `text/<sha256>.txt` as
  `text/pack-<sha256 of the zip>.zip` (up to TEXT_PACK_MEMBERS members named
  `<sha256>.txt`), its Drive description the index (`title:size:md5` each),
  so listing the text folder knows every packed name; `exists`, `size`,
  `read_file`, `download_file` and `list_dir` answer for a packed text as
  for a loose one (stores of loose texts, the older layout, read as before;
  a pack whose description was lost is read for its index). A pack is a
  content-addressed name like any other. `deferred_uploads`: the mirror
  sends PDFs and texts from its background uploader, behind the crawl.
- An access token that has expired is refreshed before the request
  (`RefreshingAuth`: pydrive2 would start an interactive login); a 401 on the
  way is refreshed and retried by oauth2client.
- Retries: 5xx, 408, 429, 403 rateLimitExceeded/userRateLimitExceeded and
  connection errors are retried up to `max_tries` times, sleeping
  `retry_delay` (backoff_base after the first failure, doubling up to
  backoff_cap; the court client's rule) before the next. A write is retried
  as a whole "look up, then insert or update", so a request that failed after
  Drive had acted cannot leave a duplicate. 403 storageQuotaExceeded raises
  `StoreQuotaExceeded` at once (callers degrade to local state); any other
  failure raises `StoreError` naming the operation and Drive's reason.

Listing cache (the trade-off): `exists`, `size` and `list_dir` list a folder
once (1000 names per request) and answer from that listing afterwards, kept
up to date by our own writes. Changes made by someone else (another session,
the Drive web page) after the listing are not seen until `refresh()` or
`list_dir` of that folder. A stale "absent" costs nothing but a fresh lookup
(reads and writes always ask Drive before concluding a name is absent, so no
duplicate is made); a stale "present" (a file trashed by hand) is believed,
which is acceptable because the pipeline never deletes from the store.
One DriveStore is meant for one thread at a time (StoreMirror's lock
serializes the uploader thread and the stages).

Sleeps (backoff, pacing) go through `sleep`, the run clock's interruptible
sleep in a run: a stop requested during a Drive outage ends the wait at once
and the write fails as a StoreError (the mirror queues it).

`connect_drive(api_root)` builds the same pydrive2 + googleapiclient stack
against any Drive-compatible endpoint (the simulated Drive of
notebook_builder.simdrive), offline: the discovery document is the one
googleapiclient ships, its root URL replaced; credentials are a dummy OAuth2
token refreshed at `<api_root>token`. For testing only.

CFG knobs read (by `open_drive_store` only): DRIVE_FOLDER, DRIVE_API,
DRIVE_WRITES_PER_SECOND, BACKOFF_BASE, BACKOFF_CAP, HTTP_TIMEOUT.
"""
from __future__ import annotations

import hashlib
import http.client
import io
import json
import logging
import mimetypes
import os
import socket
import ssl
import tempfile
import threading
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import httplib2
from googleapiclient.errors import HttpError
from googleapiclient.http import MediaIoBaseUpload
from oauth2client.client import AccessTokenRefreshError
from pydrive2.auth import GoogleAuth, RefreshError
from pydrive2.files import ApiRequestError

from .c00_config import IntegrityError, StoreError, StoreQuotaExceeded, retry_delay
from .c05_durable import atomic_write
from .c20_store import Store, check_store_name, is_content_addressed

log_drive = logging.getLogger("kycourt.drive")

_DRIVE_FOLDER_MIME = "application/vnd.google-apps.folder"
_DRIVE_RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
# No HTTP answer at all: worth retrying. (Not OSError: a missing local file is not transient.)
_DRIVE_TRANSPORT_ERRORS = (httplib2.HttpLib2Error, http.client.HTTPException, ConnectionError,
                           TimeoutError, socket.gaierror, ssl.SSLError)
_DRIVE_PAGE_SIZE = 1000          # the most Drive v2 files.list returns per page
_DRIVE_HASH_BLOCK = 1024 * 1024
_DRIVE_MULTIPART_LIMIT = 5 * 1024 * 1024   # Google: multipart for files of 5 MB or less
_DRIVE_RESUMABLE_CHUNK = 100 * 1024 * 1024

TEXT_PACK_PREFIX = "pack-"
TEXT_PACK_SUFFIX = ".zip"
TEXT_PACK_MEMBERS = 64               # texts a pack holds at most (its index fits in ~5.5 KB)
_TEXT_PACK_MARK = "kycourt text pack v1:"
_TEXT_PACK_FOLDER = "text"
_TEXT_PACK_CACHE = 4                 # packs kept in memory after a download (neighbours are read together)
_TEXT_PACK_DATE = (2020, 1, 1, 0, 0, 0)   # a fixed member date: the same texts make the same pack


class _DriveTornDownload(ConnectionError):
    """A download whose bytes do not match Drive's md5: retried like a dropped connection."""


# ------------------------------------------------------ pure decisions


def _drive_verdict(status: int | None, reason: str, message: str) -> str:
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
    `rate` writes a second, never more than `max_rate`. `limited()` halves the
    rate (not below `min_rate`); `passed()` adds `max_rate / 20` back after a
    write that went through: additive increase, multiplicative decrease, as
    TCP does. Thread-safe. `now` and `sleep` are injectable for tests.
    """

    def __init__(self, max_rate: float, *, min_rate: float = 0.05, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep):
        if max_rate <= 0:
            raise ValueError(f"writes per second must be positive, not {max_rate}")
        self.max_rate, self.min_rate = max_rate, min(min_rate, max_rate)
        self.rate = max_rate
        self._now, self._sleep = now, sleep
        self._next = now()
        self._lock = threading.Lock()
        self.limited_count = 0

    def wait(self) -> float:
        """Blocks until a write may start; returns the seconds waited. (An interrupted sleep
        lets the write go: a stopping run still mirrors its checkpoint.)"""
        with self._lock:
            start = max(self._now(), self._next)
            self._next = start + 1.0 / self.rate
            delay = start - self._now()
        if delay > 0:
            self._sleep(delay)
        return max(0.0, delay)

    def limited(self) -> None:
        with self._lock:
            self.rate = max(self.min_rate, self.rate / 2)
            self._next = max(self._next, self._now() + 1.0 / self.rate)
            self.limited_count += 1

    def passed(self) -> None:
        with self._lock:
            self.rate = min(self.max_rate, self.rate + self.max_rate / 20)


def _drive_query_literal(text: str) -> str:
    """A string literal of Drive's query language: backslash and quote escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _drive_pick(items: list[dict]) -> dict | None:
    """Of several files with one title, the one every session picks: oldest, then lowest id."""
    if not items:
        return None
    return min(items, key=lambda item: (item.get("createdDate") or "", item.get("id") or ""))


def _drive_entry(item: Any) -> dict:
    """The few metadata fields we keep of a Drive file resource."""
    keys = ("id", "title", "mimeType", "md5Checksum", "fileSize", "createdDate", "description")
    return {key: item.get(key) for key in keys if item.get(key) is not None}


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


def text_pack_description(members: dict[str, tuple[int, str]]) -> str:
    """The Drive description that indexes a text pack: `title:size:md5` of each member."""
    return _TEXT_PACK_MARK + "".join(f" {title}:{size}:{md5}" for title, (size, md5) in sorted(members.items()))


def text_pack_members(title: str, description: str | None) -> dict[str, tuple[int, str]] | None:
    """member title -> (size, md5) from a pack's description; None when `title` is no pack or the
    description is not a pack index (edited by hand: the pack is then read for its index)."""
    if not (title.startswith(TEXT_PACK_PREFIX) and title.endswith(TEXT_PACK_SUFFIX)):
        return None
    if not description or not description.startswith(_TEXT_PACK_MARK):
        return None
    members = {}
    for field in description[len(_TEXT_PACK_MARK):].split():
        parts = field.split(":")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        members[parts[0]] = (int(parts[1]), parts[2])
    return members


def build_text_pack(texts: list[tuple[str, bytes]]) -> tuple[bytes, dict[str, tuple[int, str]]]:
    """(zip bytes, index) of a pack of texts (member title, bytes): deflated, deterministic."""
    buffer = io.BytesIO()
    members = {}
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as pack:
        for title, data in sorted(texts):
            info = zipfile.ZipInfo(title, date_time=_TEXT_PACK_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            pack.writestr(info, data)
            members[title] = (len(data), hashlib.md5(data).hexdigest())
    return buffer.getvalue(), members


def _drive_md5_of_file(path: str | os.PathLike) -> tuple[str, int]:
    digest, size = hashlib.md5(), 0
    with open(path, "rb") as handle:
        while block := handle.read(_DRIVE_HASH_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _drive_mime_type(title: str) -> str:
    return mimetypes.guess_type(title)[0] or "application/octet-stream"


# ------------------------------------------------------------ the store


class DriveStore(Store):
    """A Drive folder as a store. See the module docstring for what it guarantees."""

    # ~2 writes a second: content-addressed uploads run behind the crawl (StoreMirror's uploader).
    deferred_uploads = True

    def __init__(self, drive, folder_path: str = "ky_court", *, backoff_base: float = 1.0,
                 backoff_cap: float = 32.0, max_tries: int = 6,
                 sleep: Callable[[float], Any] = time.sleep, writes_per_second: float | None = None,
                 multipart_limit: int = _DRIVE_MULTIPART_LIMIT, deferred_uploads: bool = True):
        folder_path = folder_path.strip("/")
        try:
            check_store_name(folder_path)
        except StoreError:
            raise StoreError(f"invalid Drive folder {folder_path!r}: expected a path like ky_court") from None
        if max_tries < 1:
            raise StoreError(f"max_tries must be at least 1, not {max_tries}")
        self.drive = drive
        self.folder_path = folder_path
        self.description = f"Google Drive folder {folder_path}"
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.max_tries, self.sleep = max_tries, sleep
        self.multipart_limit = multipart_limit
        self.deferred_uploads = deferred_uploads
        self.pacer = DriveWritePacer(writes_per_second, sleep=sleep) if writes_per_second else None
        self._folder_ids: dict[str, str | None] = {}        # Drive path -> id, None = known absent
        self._listings: dict[str, dict[str, dict]] = {}     # folder id -> title -> entry (complete listing)
        self._pack_cache: dict[str, bytes] = {}               # pack id -> zip bytes, oldest first

    # ---------------------------------------------------------- Store API

    def exists(self, name: str) -> bool:
        return self._listed_entry(name) is not None

    def size(self, name: str) -> int | None:
        entry = self._listed_entry(name)
        return None if entry is None else int(entry.get("fileSize", 0))

    def md5(self, name: str) -> str | None:
        entry = self._fresh_entry(name)
        return None if entry is None else entry.get("md5Checksum")

    def web_link(self, name: str) -> str | None:
        """The Drive viewer's page of the file (from the folder's cached listing)."""
        entry = self._listed_entry(name)
        return None if not entry or not entry.get("id") else f"https://drive.google.com/file/d/{entry['id']}/view"

    def read_file(self, name: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
            target = Path(temp_dir) / "content"
            self.download_file(name, target)
            return target.read_bytes()

    def download_file(self, name: str, local_path: str | os.PathLike) -> None:
        entry = self._fresh_entry(name)
        if entry is None:
            raise StoreError(f"{name} is not in the store ({self.description})")
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(target.name + ".download")
        if "pack" in entry:
            atomic_write(target, self._packed_text(name, entry), temp=temp)
            return

        def attempt() -> None:
            self.drive.CreateFile({"id": entry["id"]}).GetContentFile(str(temp))
            if entry.get("md5Checksum"):
                md5, size = _drive_md5_of_file(temp)
                if md5 != entry["md5Checksum"]:
                    raise _DriveTornDownload(f"{name} downloaded from Drive has md5 {md5} ({size} bytes), "
                                             f"Drive says {entry['md5Checksum']} ({entry.get('fileSize')} bytes)")
        try:
            try:
                self._retrying(f"download {name}", attempt)
            except StoreError as exc:
                if "md5" in str(exc):     # torn every time: the bytes are not what Drive says
                    raise IntegrityError(str(exc)) from None
                raise
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)

    def write_bytes(self, name: str, data: bytes) -> None:
        self._store(name, lambda: io.BytesIO(data), hashlib.md5(data).hexdigest(), len(data))

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        md5, size = _drive_md5_of_file(local_path)
        self._store(name, lambda: open(local_path, "rb"), md5, size)

    text_pack_members = TEXT_PACK_MEMBERS   # upload_files packs texts (StoreMirror groups them)

    def upload_files(self, items: list[tuple[str, str | os.PathLike]]) -> None:
        """As `upload_file` each, except that two or more texts (`text/<sha256>.txt`) go into packs
        of up to TEXT_PACK_MEMBERS: one Drive file `text/pack-<sha256 of the zip>.zip` each, whose
        description indexes its members (so a folder listing knows every packed name)."""
        if self.text_pack_members < 2:
            super().upload_files(items)
            return
        texts = [(name, path) for name, path in items if self._packable(name)]
        for name, path in items:
            if not self._packable(name) or len(texts) < 2:
                self.upload_file(name, path)
        if len(texts) < 2:
            return
        missing: list[tuple[str, bytes]] = []
        for name, path in texts:
            data = Path(path).read_bytes()
            folder, title = self._split(name)
            held = self._listed_entry(name)
            if held is not None:
                self._check_same(name, held, hashlib.md5(data).hexdigest(), len(data))
                continue
            missing.append((title, data))
        for start in range(0, len(missing), self.text_pack_members):
            self._upload_pack(missing[start:start + self.text_pack_members])

    def _packable(self, name: str) -> bool:
        folder, title = PurePosixPath(name).parent.as_posix(), PurePosixPath(name).name
        return folder == _TEXT_PACK_FOLDER and title.endswith(".txt")

    def _upload_pack(self, texts: list[tuple[str, bytes]]) -> None:
        data, members = build_text_pack(texts)
        pack_name = f"{_TEXT_PACK_FOLDER}/{TEXT_PACK_PREFIX}{hashlib.sha256(data).hexdigest()}{TEXT_PACK_SUFFIX}"
        self._store(pack_name, lambda: io.BytesIO(data), hashlib.md5(data).hexdigest(), len(data),
                    description=text_pack_description(members))
        log_drive.debug("stored %d texts as %s", len(members), pack_name)

    def _packed_text(self, name: str, entry: dict) -> bytes:
        """The bytes of a packed text: its pack downloaded (or cached), the member checked."""
        pack = self._pack_cache.pop(entry["pack"], None)
        if pack is None:
            with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
                target = Path(temp_dir) / "pack.zip"
                self.download_file(f"{_TEXT_PACK_FOLDER}/{entry['pack_title']}", target)
                pack = target.read_bytes()
        self._pack_cache[entry["pack"]] = pack
        while len(self._pack_cache) > _TEXT_PACK_CACHE:
            self._pack_cache.pop(next(iter(self._pack_cache)))
        title = PurePosixPath(name).name
        try:
            with zipfile.ZipFile(io.BytesIO(pack)) as archive:
                data = archive.read(title)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise IntegrityError(f"{name}: its pack {entry['pack_title']} is unreadable ({exc})") from None
        if hashlib.md5(data).hexdigest() != entry["md5Checksum"]:
            raise IntegrityError(f"{name} in pack {entry['pack_title']} does not match the pack's index")
        return data

    def list_dir(self, prefix: str = "") -> list[str]:
        """Files directly in folder `prefix`, sorted; always asks Drive and refreshes the listing."""
        if prefix:
            check_store_name(prefix)
        folder_id = self._folder_id(prefix, create=False)
        if folder_id is None:
            return []
        self._listings.pop(folder_id, None)
        base = PurePosixPath(prefix) if prefix else PurePosixPath()
        return sorted(str(base / title) for title in self._listing(folder_id))

    def quota(self) -> dict | None:
        """{'used', 'total'} bytes from Drive About; None when Drive reports no limit."""
        about = self._retrying("read the Drive quota", self.drive.GetAbout)
        total = int(about.get("quotaBytesTotal") or 0)
        if about.get("quotaType") == "UNLIMITED" or total <= 0:
            return None
        # Drive, Gmail and Photos share the quota that storageQuotaExceeded refers to.
        used = about.get("quotaBytesUsedAggregate", about.get("quotaBytesUsed", 0))
        return {"used": int(used or 0), "total": total}

    def refresh(self) -> None:
        """Forget every cached folder id and listing (to see changes made by others)."""
        self._folder_ids.clear()
        self._listings.clear()

    # ------------------------------------------------------------ lookups

    def _split(self, name: str) -> tuple[str, str]:
        path = PurePosixPath(check_store_name(name))
        parent = str(path.parent)
        return ("" if parent == "." else parent), path.name

    def _listed_entry(self, name: str) -> dict | None:
        """The file behind `name` according to its folder's (cached) listing."""
        folder, title = self._split(name)
        folder_id = self._folder_id(folder, create=False)
        return None if folder_id is None else self._listing(folder_id).get(title)

    def _fresh_entry(self, name: str) -> dict | None:
        """The file behind `name`: a cached hit, else Drive is asked by title."""
        folder, title = self._split(name)
        folder_id = self._folder_id(folder, create=False)
        if folder_id is None:
            return None
        cached = self._listings.get(folder_id, {}).get(title)
        if cached is not None:
            return cached
        found = self._retrying(f"look up {name}", lambda: self._find_and_remember(folder_id, title))
        if found is None and folder == _TEXT_PACK_FOLDER and not title.startswith(TEXT_PACK_PREFIX):
            # A packed text has no file of its own: its pack's index in the folder listing names it.
            self._listings.pop(folder_id, None)
            found = self._listing(folder_id).get(title)
        return found

    def _listing(self, folder_id: str) -> dict[str, dict]:
        """Every file in the folder, title -> entry; one files.list per 1000 names, cached."""
        if folder_id in self._listings:
            return self._listings[folder_id]
        query = f"{_drive_query_literal(folder_id)} in parents and trashed = false"
        file_list = self.drive.ListFile({"q": query, "maxResults": _DRIVE_PAGE_SIZE})
        by_title: dict[str, list[dict]] = {}
        # One retry loop per page: pydrive2 keeps the page token, so a retry asks for the same page.
        while (page := self._retrying("list a Drive folder", lambda: next(file_list, None))) is not None:
            for item in page:
                if item.get("mimeType") != _DRIVE_FOLDER_MIME:
                    by_title.setdefault(item["title"], []).append(_drive_entry(item))
        listing = {title: _drive_pick(items) for title, items in by_title.items()}
        for entry in [entry for entry in listing.values() if entry["title"].startswith(TEXT_PACK_PREFIX)]:
            self._index_pack(listing, entry)
        self._listings[folder_id] = listing
        log_drive.debug("listed Drive folder %s: %d files", folder_id, len(listing))
        return listing

    def _index_pack(self, listing: dict[str, dict], pack: dict) -> None:
        """Adds a text pack's members to its folder's listing (a loose file of a name wins)."""
        members = text_pack_members(pack["title"], pack.get("description"))
        if members is None and pack["title"].endswith(TEXT_PACK_SUFFIX):
            members = self._read_pack_index(pack)
        for title, (size, md5) in (members or {}).items():
            if title not in listing:
                listing[title] = {"title": title, "fileSize": str(size), "md5Checksum": md5,
                                  "pack": pack["id"], "pack_title": pack["title"]}

    def _read_pack_index(self, pack: dict) -> dict[str, tuple[int, str]] | None:
        """The index of a pack whose description is gone: read from the pack itself."""
        log_drive.warning("text pack %s has no index in its description; reading the pack", pack["title"])
        try:
            with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
                target = Path(temp_dir) / "pack.zip"
                self.download_file(f"{_TEXT_PACK_FOLDER}/{pack['title']}", target)
                with zipfile.ZipFile(target) as archive:
                    return {info.filename: (info.file_size, hashlib.md5(archive.read(info)).hexdigest())
                            for info in archive.infolist()}
        except (StoreError, zipfile.BadZipFile) as exc:
            log_drive.warning("text pack %s is unreadable: %s", pack["title"], exc)
            return None

    def _find(self, parent_id: str, title: str, *, folder: bool) -> dict | None:
        """One unretried files.list by title; the deterministic pick among duplicates."""
        query = (f"title = {_drive_query_literal(title)} and {_drive_query_literal(parent_id)} in parents"
                 f" and trashed = false")
        items = self.drive.ListFile({"q": query}).GetList()   # GetList pages through all results
        # Title queries ignore case; Drive keeps it, and so do we.
        matches = [_drive_entry(item) for item in items
                   if item.get("title") == title and (item.get("mimeType") == _DRIVE_FOLDER_MIME) == folder]
        if len(matches) > 1:
            log_drive.warning("Drive folder %s holds %d %s titled %r; using the oldest, %s",
                              parent_id, len(matches), "folders" if folder else "files", title,
                              _drive_pick(matches)["id"])
        return _drive_pick(matches)

    def _find_and_remember(self, folder_id: str, title: str) -> dict | None:
        entry = self._find(folder_id, title, folder=False)
        self._remember(folder_id, title, entry)
        return entry

    def _remember(self, folder_id: str, title: str, entry: dict | None) -> None:
        listing = self._listings.get(folder_id)
        if listing is None:
            return
        if entry is None:
            if "pack" not in listing.get(title, {}):    # a packed name has no file of its own
                listing.pop(title, None)
        else:
            listing[title] = entry

    def _drive_path(self, folder: str) -> str:
        """The Drive path (under My Drive) of store folder `folder` ('' is the root folder)."""
        return f"{self.folder_path}/{folder}" if folder else self.folder_path

    def _folder_id(self, folder: str, *, create: bool) -> str | None:
        """Id of store folder `folder`; None if it is absent and not `create`."""
        parent_id, walked = "root", ""
        for part in self._drive_path(folder).split("/"):
            walked = f"{walked}/{part}" if walked else part
            known = self._folder_ids.get(walked)
            if known is None:
                if walked in self._folder_ids and not create:
                    return None          # known absent, and reading only
                known = self._retrying(f"find Drive folder {walked}",
                                       lambda: self._find_or_create_folder(parent_id, part, create))
                self._folder_ids[walked] = known
                if known is None:
                    return None
            parent_id = known
        return parent_id

    def _find_or_create_folder(self, parent_id: str, title: str, create: bool) -> str | None:
        found = self._find(parent_id, title, folder=True)
        if found is not None or not create:
            return found and found["id"]
        log_drive.info("creating Drive folder %s in %s", title, parent_id)
        self._pace()
        created = self.drive.CreateFile({"title": title, "mimeType": _DRIVE_FOLDER_MIME,
                                         "parents": [{"id": parent_id}]})
        created.Upload()
        self._listings[created["id"]] = {}   # a new folder is empty: its listing is known
        return created["id"]

    # -------------------------------------------------------------- writes

    def _store(self, name: str, open_source: Callable[[], Any], md5: str, size: int, *,
               description: str | None = None) -> None:
        folder, title = self._split(name)
        content_addressed = is_content_addressed(name)
        if content_addressed:
            cached = self._listed_if_cached(folder, title)
            if cached is not None:
                self._check_same(name, cached, md5, size)
                return
        folder_id = self._folder_id(folder, create=True)
        tries = 0

        def attempt() -> None:
            nonlocal tries
            tries += 1
            listing = self._listings.get(folder_id)
            if tries == 1 and listing is not None:
                # A complete listing, kept current by our own writes: no files.list per upload
                # (one per PDF and per text otherwise, ~200k requests at full scale).
                existing = listing.get(title)
            else:
                # Asked afresh on a retry: the try before may have stored the file and then failed.
                existing = self._find_and_remember(folder_id, title)
            if existing is not None and content_addressed:
                self._check_same(name, existing, md5, size)
                return
            mime_type = (existing or {}).get("mimeType") or _drive_mime_type(title)
            self._pace()
            with open_source() as stream:
                media = MediaIoBaseUpload(stream, mime_type, resumable=size > self.multipart_limit,
                                          chunksize=_DRIVE_RESUMABLE_CHUNK)
                files = self._service().files()
                if existing is None:
                    body = {"title": title, "parents": [{"id": folder_id}], "mimeType": mime_type}
                    if description is not None:
                        body["description"] = description
                    request = files.insert(body=body, media_body=media)
                else:
                    request = files.update(fileId=existing["id"], body={"mimeType": mime_type},
                                           media_body=media)
                stored = _drive_entry(request.execute(http=self._http()))
            if self.pacer is not None:
                self.pacer.passed()
            self._remember(folder_id, title, stored)
            if description is not None and folder_id in self._listings:
                self._index_pack(self._listings[folder_id], stored)
            if stored.get("md5Checksum") and stored["md5Checksum"] != md5:
                raise IntegrityError(f"Drive stored {name} with md5 {stored['md5Checksum']}, "
                                     f"the local bytes have {md5}")
        self._retrying(f"upload {name}", attempt)

    def _listed_if_cached(self, folder: str, title: str) -> dict | None:
        folder_id = self._folder_ids.get(self._drive_path(folder))
        return None if folder_id is None else self._listings.get(folder_id, {}).get(title)

    @staticmethod
    def _check_same(name: str, entry: dict, md5: str, size: int) -> None:
        if entry.get("md5Checksum") == md5 and int(entry.get("fileSize", -1)) == size:
            return
        raise IntegrityError(f"store refuses to overwrite {name} with different bytes "
                             f"(Drive has md5 {entry.get('md5Checksum')} size {entry.get('fileSize')}, "
                             f"local md5 {md5} size {size})")

    # ------------------------------------------------------------- retries

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, retried on transient Drive failures; named errors for the rest."""
        for attempt in range(self.max_tries):
            try:
                return call()
            except Exception as exc:   # noqa: BLE001 - _drive_failure decides what is ours
                failure = _drive_failure(exc)
                if failure is None:
                    raise
                status, reason, message = failure
                verdict = _drive_verdict(status, reason, message)
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
                log_drive.warning("Drive could not %s (%s); retry %d in %.1fs",
                                  what, detail, attempt + 1, delay)
                if self.sleep(delay) is False:
                    raise StoreError(f"stopped while waiting to retry: Google Drive could not {what}: "
                                     f"{detail}") from None
        raise AssertionError("unreachable")

    def _pace(self) -> None:
        if self.pacer is not None:
            self.pacer.wait()

    # ------------------------------------------------------ HTTP plumbing

    def _service(self):
        """The googleapiclient Drive v2 service pydrive2 built (built now if it has not yet)."""
        auth = self.drive.auth
        if auth.service is None:
            auth.Authorize()
        return auth.service

    def _http(self):
        """This thread's authorized http object, the one pydrive2's own calls use."""
        auth = self.drive.auth
        if not getattr(auth.thread_local, "http", None):
            auth.thread_local.http = auth.Get_Http_Object()
        return auth.thread_local.http




# ------------------------------------------------------------ connecting


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
        if credentials.access_token_expired:
            log_drive.info("Drive access token expired; refreshing it")
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


# ------------------------------------------------------------ Colab auth


def open_drive_store(cfg, *, sleep: Callable[[float], Any] = time.sleep) -> DriveStore:
    """The DriveStore for cfg.DRIVE_FOLDER, authenticated as the Colab user (or, with
    cfg.DRIVE_API set, at that test endpoint). `sleep`: the run clock's interruptible sleep.

    Raises StoreError outside Colab without DRIVE_API, or when the user does not authorise.
    """
    options = dict(backoff_base=cfg.BACKOFF_BASE, backoff_cap=cfg.BACKOFF_CAP, sleep=sleep,
                   writes_per_second=cfg.DRIVE_WRITES_PER_SECOND)
    api_root = cfg.DRIVE_API
    if api_root:
        return DriveStore(connect_drive(api_root, http_timeout=cfg.HTTP_TIMEOUT), cfg.DRIVE_FOLDER, **options)
    try:
        from google.colab import auth as colab_auth   # exists only inside Colab
    except ImportError:
        raise StoreError("KY_STORE=drive works only inside Google Colab (google.colab.auth is "
                         "missing); elsewhere set KY_STORE to a directory") from None
    from oauth2client.client import GoogleCredentials
    from pydrive2.drive import GoogleDrive
    try:
        # Colab's pop-up; it leaves the user's credentials where the
        # application-default lookup of oauth2client (what pydrive2 speaks) finds them.
        colab_auth.authenticate_user()
        # settings_file=None: a stray settings.yaml in the working directory must not steer auth.
        gauth = RefreshingAuth(settings_file=None, http_timeout=cfg.HTTP_TIMEOUT)
        gauth.credentials = GoogleCredentials.get_application_default()
    except Exception as exc:   # noqa: BLE001 - any auth failure is one clear message
        raise StoreError(f"Google Drive authentication failed: {exc}") from None
    return DriveStore(GoogleDrive(gauth), cfg.DRIVE_FOLDER, **options)
