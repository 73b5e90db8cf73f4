"""Google Drive as the Store, over pydrive2 (Drive API v2).

Guarantees, on top of the Store interface (c20_store):
- A store name `a/b/c.pdf` is the file titled `c.pdf` in folder `b` in folder
  `a` under the root folder (`folder_path`, itself a path under My Drive).
  Folders are created on demand; their ids are cached.
- One name, one file, whatever Drive answers. Every file and folder is
  created under an id the store chose before the request (files.generateIds,
  DRIVE_ID_BATCH at a time): a retried insert that Drive had committed (an
  answer lost, a 500 after the act) is answered 409 and the file is then
  checked by md5 and size, never created twice. Drive's listings show a new
  file seconds late, so the inserts of the last two minutes (name and id)
  are kept, and journaled before each insert is sent (`insert_journal`, so
  a run killed mid-insert is followed by one that knows them): a name they
  created that a listing or a lookup does not show is asked for by id
  before anything concludes it absent.
- Titles already held twice are healed when a listing or a lookup shows them
  (`resolve_duplicates` decides, with plain values): identical copies (same
  md5) keep the oldest and the others go to Drive's trash (never deleted);
  differing copies of a name the pipeline rewrites keep the newest
  (`modifiedDate`, then `version`) that passes its check (a `.sqlite` copy
  must open and pass `integrity_check`) and the others are renamed
  `<title>.conflict-<fileId>`; differing copies of a content-addressed name
  are an integrity failure: the oldest is read, none is changed. Folders
  held twice are merged into the oldest (the others' files moved into it,
  the emptied copies trashed). Every read (restore's included) gets the
  pick. `sweep_duplicates()` lists the store's folders that were not listed
  lately and reports what was found and healed this session; a folder
  inside the store named like the store's own folder is reported, never
  read or changed.
- A content-addressed name (`pdf_by_hash/`, `text/`) is never updated: the
  same bytes again (Drive's md5Checksum and fileSize) are a no-op, other
  bytes raise `IntegrityError`. Mutable names (`status.json`,
  `ky_court.sqlite`) are updated in place, as a new revision of the same file.
- One writer a name: a DriveStore may be called from several threads; its
  writes (and its caches) are serialized, so two writes of one name end as
  one file holding the later bytes, as on a local disk.
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
  backoff_cap; the court client's rule) before the next. A retry sends the
  same request again (an insert under the same id, an update of the same
  file): no lookup. 403 storageQuotaExceeded raises `StoreQuotaExceeded` at
  once (callers degrade to local state); any other failure raises
  `StoreError` naming the operation and Drive's reason.

Listing cache (the trade-off): `exists`, `size` and `list_dir` list a folder
once (1000 names per request) and answer from that listing afterwards, kept
up to date by our own writes. Changes made by someone else (another session,
the Drive web page) after the listing are not seen until `refresh()` or
`list_dir` of that folder. A stale "absent" costs nothing but a fresh lookup
(reads ask Drive by title before concluding a name is absent); a stale
"present" (a file trashed by hand) is believed, which is acceptable because
the pipeline never deletes from the store.

Sleeps (backoff, pacing) go through `sleep`, the run clock's interruptible
sleep in a run: a stop requested during a Drive outage ends the wait at once
and the write fails as a StoreError (the mirror queues it).

`connect_drive(api_root)` builds the same pydrive2 + googleapiclient stack
against any Drive-compatible endpoint (the simulated Drive of
notebook_builder.simdrive), offline: the discovery document is the one
googleapiclient ships, its root URL replaced; credentials are a dummy OAuth2
token refreshed at `<api_root>token`. For testing only.

CFG knobs read (by `open_drive_store` only): DRIVE_FOLDER, DRIVE_API,
DRIVE_WRITES_PER_SECOND, BACKOFF_BASE, BACKOFF_CAP, HTTP_TIMEOUT, WORKSPACE
(the insert journal lives in its checkpoint/ folder: it only has to outlive
a killed process, a lost runtime loses it with the workspace).
"""
from __future__ import annotations

import collections
import datetime as _dt
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
from .c06_layout import check_store_name, is_content_addressed
from .c10_database import is_sqlite_file
from .c17_snapshots import snapshot_problems
from .c20_store import Store, StoredFile, file_digests

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
DRIVE_ID_BATCH = 100             # ids one files.generateIds asks for (Drive allows 1000)
# How long a file an insert created is asked for by id when a listing does not show it (Drive's
# listings lag seconds behind inserts; after this long a missing file was trashed by someone).
_DRIVE_LIST_LAG_SECONDS = 120.0
_DRIVE_SWEEP_FRESH_SECONDS = 600.0   # sweep_duplicates re-lists a folder listed longer ago than this
CONFLICT_MARK = ".conflict-"
# An access token this close to its expiry is refreshed before a request (a request on the way then
# still carries a live token); oauth2client's token_expiry is naive UTC.
_DRIVE_TOKEN_MARGIN = _dt.timedelta(seconds=5)
_DRIVE_CHECKED_SUFFIX = ".sqlite"    # differing copies of these are opened and checked before one is kept
INSERT_JOURNAL = "checkpoint/drive-inserts.json"   # in the workspace (open_drive_store)

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
    `rate` writes a second, never more than `ceiling`. `limited()` halves the
    rate (not below `min_rate`), and a refusal near the ceiling (at more than
    0.9 of it) lowers the ceiling to 0.9 of the rate refused; `passed()` adds
    `max_rate / 20` back to the rate after a write that went through, and
    `max_rate / 1000` to the ceiling, up to `max_rate`: additive increase,
    multiplicative decrease, as TCP does, and a ceiling learnt below Drive's
    own limit, so the rate does not climb straight back into it (a refusal
    costs a request). A refusal far below the ceiling is a burst (httplib2
    sends a request whose connection dropped again at once), not a lower
    limit. Thread-safe. `now` and `sleep` are injectable for tests.
    """

    def __init__(self, max_rate: float, *, min_rate: float = 0.05, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep):
        if max_rate <= 0:
            raise ValueError(f"writes per second must be positive, not {max_rate}")
        self.max_rate, self.min_rate = max_rate, min(min_rate, max_rate)
        self.rate = self.ceiling = max_rate
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
            if self.rate > 0.9 * self.ceiling:
                self.ceiling = max(self.min_rate, 0.9 * min(self.ceiling, self.rate))
            self.rate = max(self.min_rate, self.rate / 2)
            self._next = max(self._next, self._now() + 1.0 / self.rate)
            self.limited_count += 1

    def passed(self) -> None:
        with self._lock:
            self.ceiling = min(self.max_rate, self.ceiling + self.max_rate / 1000)
            self.rate = min(self.ceiling, self.rate + self.max_rate / 20)


def _drive_query_literal(text: str) -> str:
    """A string literal of Drive's query language: backslash and quote escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _drive_pick(items: list[dict]) -> dict | None:
    """Of several files with one title, the oldest (`createdDate`, then `id`)."""
    if not items:
        return None
    return min(items, key=_drive_age)


def _drive_age(item: dict) -> tuple[str, str]:
    return item.get("createdDate") or "", item.get("id") or ""


def _drive_recency(item: dict) -> tuple[str, int, str]:
    """Newest first sorts by this, descending: `modifiedDate`, then `version`, then `id`."""
    version = str(item.get("version") or "0")
    return item.get("modifiedDate") or "", int(version) if version.isdigit() else 0, item.get("id") or ""


def resolve_duplicates(copies: list[dict], *, content_addressed: bool) -> tuple[list[dict], list[dict]]:
    """What to do with several files of one title in one folder: (keep, trash).

    `trash`: the copies identical (same md5) to an older one, which stays. `keep`: one copy of each
    distinct content, in order of preference: for a content-addressed name the oldest first (more
    than one is an integrity failure: none is changed); for a name the pipeline rewrites the newest
    first (`modifiedDate`, then `version`): the first that passes its check is the name's file and
    the others are renamed `conflict_title`. A copy without an md5 (a Google Doc) is its own content.
    """
    by_content: dict[str, list[dict]] = {}
    for copy in copies:
        by_content.setdefault(copy.get("md5Checksum") or f"no md5 {copy.get('id')}", []).append(copy)
    keep, trash = [], []
    for group in by_content.values():
        group = sorted(group, key=_drive_age)
        keep.append(group[0])
        trash.extend(group[1:])
    if content_addressed:
        keep.sort(key=_drive_age)
    else:
        keep.sort(key=_drive_recency, reverse=True)
    return keep, sorted(trash, key=_drive_age)


def conflict_title(title: str, file_id: str) -> str:
    """The title a differing copy of a rewritten name is renamed to: nothing is lost, the name is one file."""
    return f"{title}{CONFLICT_MARK}{file_id}"


def _drive_entry(item: Any) -> dict:
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
    # A listing carries Drive's md5Checksum of each file: fixity checks a proven file from it, unread.
    listing_md5 = True

    def __init__(self, drive, folder_path: str = "ky_court", *, backoff_base: float = 1.0,
                 backoff_cap: float = 32.0, max_tries: int = 6,
                 sleep: Callable[[float], Any] = time.sleep, writes_per_second: float | None = None,
                 multipart_limit: int = _DRIVE_MULTIPART_LIMIT, deferred_uploads: bool = True,
                 insert_journal: str | os.PathLike | None = None):
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
        self._lock = threading.RLock()                       # one writer a name; the caches below
        self._folder_ids: dict[str, str | None] = {}        # Drive path -> id, None = known absent
        self._folder_names: dict[str, str] = {}             # folder id -> store folder ('' the root)
        self._listings: dict[str, dict[str, dict]] = {}     # folder id -> title -> entry (complete listing)
        self._listed_at: dict[str, float] = {}              # folder id -> when its listing was fetched
        self._pack_cache: dict[str, bytes] = {}               # pack id -> zip bytes, oldest first
        self._id_pool: list[str] = []                        # ids from files.generateIds, not used yet
        self._journal = Path(insert_journal) if insert_journal else None
        # The inserts sent in the last _DRIVE_LIST_LAG_SECONDS, by this store or (read from the insert
        # journal) a killed run before it: (time.time(), key, file id), oldest first. The key is the
        # store name; a folder's is its Drive path and "/".
        self._sent: collections.deque = collections.deque(self._load_journal())
        self._healing = {"found": set(), "trashed": 0, "renamed": [], "merged": 0, "conflicts": set(),
                         "notes": []}

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
        with self._lock:
            entry = self._fresh_entry(name)
            if entry is None:
                raise StoreError(f"{name} is not in the store ({self.description})")
            packed = self._packed_text(name, entry) if "pack" in entry else None
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if packed is not None:
            atomic_write(target, packed, temp=target.with_name(target.name + ".download"))
            return
        self._download_entry(name, entry, target)

    def _download_entry(self, name: str, entry: dict, target: Path) -> None:
        """The bytes of one Drive file to `target`, checked against Drive's md5 (torn: retried)."""
        temp = target.with_name(target.name + ".download")

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
        with self._lock:
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
        with self._lock:
            folder_id = self._folder_id(prefix, create=False)
            if folder_id is None:
                return []
            self._listings.pop(folder_id, None)
            base = PurePosixPath(prefix) if prefix else PurePosixPath()
            return sorted(str(base / title) for title in self._listing(folder_id))

    def list_files(self, prefix: str = "") -> dict[str, StoredFile]:
        """A fresh listing of folder `prefix`: each file's size and Drive's md5; a packed text's from
        its pack's index, with the pack named."""
        if prefix:
            check_store_name(prefix)
        base = f"{prefix}/" if prefix else ""
        with self._lock:
            folder_id = self._folder_id(prefix, create=False)
            if folder_id is None:
                return {}
            self._listings.pop(folder_id, None)
            return {base + title: StoredFile(int(entry.get("fileSize") or 0), entry.get("md5Checksum"),
                                             base + entry["pack_title"] if "pack" in entry else None)
                    for title, entry in self._listing(folder_id).items()}

    def digests(self, name: str) -> tuple[str, str, int]:
        """The bytes read now: a file downloaded (checked against Drive's md5 on the way), a packed
        text out of its pack (checked against the pack's index)."""
        with self._lock:
            entry = self._fresh_entry(name)
            if entry is None:
                raise StoreError(f"{name} is not in the store ({self.description})")
            if "pack" in entry:
                data = self._packed_text(name, entry)
                return hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest(), len(data)
        with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
            target = Path(temp_dir) / "content"
            self._download_entry(name, entry, target)
            return file_digests(target)

    def other_copies(self, name: str, folder: str | os.PathLike):
        """The other untrashed files titled like `name` in its folder (Drive lets a title be held
        twice), each downloaded into `folder` as it is asked for."""
        store_folder, title = self._split(name)
        with self._lock:
            folder_id = self._folder_id(store_folder, create=False)
            if folder_id is None:
                return
            held = (self._listings.get(folder_id, {}).get(title) or {}).get("id")
            query = (f"title = {_drive_query_literal(title)} and {_drive_query_literal(folder_id)} in parents"
                     " and trashed = false")
            items = self._retrying(f"look up the copies of {name}", lambda: self.drive.ListFile({"q": query}).GetList())
        for item in items:
            if item.get("title") != title or item.get("id") == held or item.get("mimeType") == _DRIVE_FOLDER_MIME:
                continue
            target = Path(folder) / item["id"]
            try:
                self._download_entry(name, _drive_entry(item), target)
            except IntegrityError:
                continue
            yield target

    def assemble(self, name: str, workspace: str | os.PathLike) -> bytes | None:
        """A text pack made again (deterministically) from its members' workspace copies."""
        folder, title = self._split(name)
        if folder != _TEXT_PACK_FOLDER or not title.startswith(TEXT_PACK_PREFIX):
            return None
        entry = self._listed_entry(name)
        members = text_pack_members(title, (entry or {}).get("description"))
        if not members:
            return None
        paths = [(member, Path(workspace) / folder / member) for member in members]
        if not all(path.is_file() for _, path in paths):
            return None
        return build_text_pack([(member, path.read_bytes()) for member, path in paths])[0]

    def replace_damaged(self, name: str, local_path: str | os.PathLike) -> None:
        """A new revision of the file behind `name` (files.update; Drive keeps the old one in the
        file's revisions), or a file of its own for a packed text (a loose file wins over its pack)
        or a missing name."""
        md5, size = _drive_md5_of_file(local_path)
        folder, title = self._split(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=True)
            entry = self._listing(folder_id).get(title)
            mime_type = (entry or {}).get("mimeType") or _drive_mime_type(title)

            def open_source():
                return open(local_path, "rb")
            if entry is None or "pack" in entry:
                body = {"title": title, "parents": [{"id": folder_id}], "mimeType": mime_type}
                stored, _ = self._insert(name, f"store {name} again", body, open_source, size)
            else:
                stored = self._update(name, entry, mime_type, open_source, size)
            self._remember(folder_id, title, stored)
            if stored.get("md5Checksum") and stored["md5Checksum"] != md5:
                raise IntegrityError(f"Drive stored {name} with md5 {stored['md5Checksum']}, "
                                     f"the local bytes have {md5}")

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
        with self._lock:
            self._folder_ids.clear()
            self._listings.clear()

    def sweep_duplicates(self, folders: list[str]) -> dict:
        """Lists each of the store `folders` ('' the top, first) not listed in the last
        _DRIVE_SWEEP_FRESH_SECONDS, healing titles (and folders) held twice on the way; returns what
        this session found and healed: `found` (names held twice), `trashed` (identical copies),
        `renamed` (`.conflict-` titles given), `merged` (folder copies emptied into the oldest),
        `conflicts` (content-addressed names held with different bytes) and `notes`."""
        with self._lock:
            for folder in folders:
                folder_id = self._folder_id(folder, create=False)
                if folder_id is not None:
                    if time.monotonic() - self._listed_at.get(folder_id, float("-inf")) > _DRIVE_SWEEP_FRESH_SECONDS:
                        self._listings.pop(folder_id, None)
                    self._listing(folder_id)
            healing = self._healing
            return {"found": sorted(healing["found"]), "trashed": healing["trashed"],
                    "renamed": list(healing["renamed"]), "merged": healing["merged"],
                    "conflicts": sorted(healing["conflicts"]), "notes": list(healing["notes"])}

    # ------------------------------------------------------------ lookups

    def _split(self, name: str) -> tuple[str, str]:
        path = PurePosixPath(check_store_name(name))
        parent = str(path.parent)
        return ("" if parent == "." else parent), path.name

    def _store_name(self, folder_id: str, title: str) -> str:
        """The store name of `title` in folder `folder_id` (the title alone outside the store)."""
        folder = self._folder_names.get(folder_id)
        return f"{folder}/{title}" if folder else title

    def _listed_entry(self, name: str) -> dict | None:
        """The file behind `name` according to its folder's (cached) listing."""
        folder, title = self._split(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=False)
            return None if folder_id is None else self._listing(folder_id).get(title)

    def _fresh_entry(self, name: str) -> dict | None:
        """The file behind `name`: a cached hit, else Drive is asked by title (then by id)."""
        folder, title = self._split(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=False)
            if folder_id is None:
                return None
            cached = self._listings.get(folder_id, {}).get(title)
            if cached is not None:
                return cached
            found = self._find(folder_id, title, folder=False)
            if found is None and folder == _TEXT_PACK_FOLDER and not title.startswith(TEXT_PACK_PREFIX):
                # A packed text has no file of its own: its pack's index in the folder listing names it.
                self._listings.pop(folder_id, None)
                return self._listing(folder_id).get(title)
            self._remember(folder_id, title, found)
            return found

    def _listing(self, folder_id: str) -> dict[str, dict]:
        """Every file in the folder, title -> entry; one files.list per 1000 names, cached. Titles
        held twice are healed; our own files the listing does not show yet are added."""
        if folder_id in self._listings:
            return self._listings[folder_id]
        query = f"{_drive_query_literal(folder_id)} in parents and trashed = false"
        file_list = self.drive.ListFile({"q": query, "maxResults": _DRIVE_PAGE_SIZE})
        by_title: dict[str, list[dict]] = {}
        subfolders: dict[str, list[dict]] = {}
        # One retry loop per page: pydrive2 keeps the page token, so a retry asks for the same page.
        while (page := self._retrying("list a Drive folder", lambda: next(file_list, None))) is not None:
            for item in page:
                into = subfolders if item.get("mimeType") == _DRIVE_FOLDER_MIME else by_title
                into.setdefault(item["title"], []).append(_drive_entry(item))
        for title, copies in subfolders.items():
            if len(copies) > 1 and folder_id in self._folder_names:
                folder = self._folder_names[folder_id]
                kept = self._merge_folders(folder_id, title, copies)
                self._folder_ids[self._drive_path(f"{folder}/{title}" if folder else title)] = kept["id"]
        listing: dict[str, dict] = {}
        for title, copies in by_title.items():
            listing[title] = copies[0] if len(copies) == 1 else self._heal(folder_id, title, copies, listing)
        self._add_unlisted(folder_id, listing)
        for entry in [entry for entry in listing.values() if entry["title"].startswith(TEXT_PACK_PREFIX)]:
            self._index_pack(listing, entry)
        self._listings[folder_id] = listing
        self._listed_at[folder_id] = time.monotonic()
        self._note_store_copy(folder_id, subfolders)
        log_drive.debug("listed Drive folder %s: %d files", folder_id, len(listing))
        return listing

    def _note_store_copy(self, folder_id: str, subfolders: dict[str, list[dict]]) -> None:
        """A folder inside the store named like the store's own: reported once, never read or changed."""
        own = PurePosixPath(self.folder_path).name
        if own not in subfolders or folder_id not in self._folder_names:
            return
        where = self._store_name(folder_id, own)
        note = (f"Drive folder {self.folder_path}/{where} is named like the store's own folder: it is not "
                f"part of the store and is neither read nor changed (move it out of {self.folder_path} "
                f"if it is a copy)")
        if note not in self._healing["notes"]:
            self._healing["notes"].append(note)
            log_drive.warning("%s", note)

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
                self._download_entry(f"{_TEXT_PACK_FOLDER}/{pack['title']}", pack, target)
                with zipfile.ZipFile(target) as archive:
                    return {info.filename: (info.file_size, hashlib.md5(archive.read(info)).hexdigest())
                            for info in archive.infolist()}
        except (StoreError, zipfile.BadZipFile) as exc:
            log_drive.warning("text pack %s is unreadable: %s", pack["title"], exc)
            return None

    def _find(self, parent_id: str, title: str, *, folder: bool) -> dict | None:
        """The file (or folder) titled `title` in `parent_id`: asked by title (a title held twice
        healed), else, when Drive's listing may not show it yet, one of ours asked for by id."""
        query = (f"title = {_drive_query_literal(title)} and {_drive_query_literal(parent_id)} in parents"
                 f" and trashed = false")
        what = f"find Drive folder {title}" if folder else f"look up {self._store_name(parent_id, title)}"
        items = self._retrying(what, lambda: self.drive.ListFile({"q": query}).GetList())   # pages through all
        # Title queries ignore case; Drive keeps it, and so do we.
        matches = [_drive_entry(item) for item in items
                   if item.get("title") == title and (item.get("mimeType") == _DRIVE_FOLDER_MIME) == folder]
        if len(matches) > 1:
            return self._merge_folders(parent_id, title, matches) if folder else \
                self._heal(parent_id, title, matches, self._listings.get(parent_id))
        if matches or folder:
            return matches[0] if matches else None
        return self._sent_file(self._store_name(parent_id, title), parent_id, folder=False)

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
                known = self._find_or_create_folder(parent_id, part, walked, create)
                self._folder_ids[walked] = known
                if known is None:
                    return None
            parent_id = known
        self._folder_names[parent_id] = folder
        return parent_id

    def _find_or_create_folder(self, parent_id: str, title: str, drive_path: str, create: bool) -> str | None:
        found = self._find(parent_id, title, folder=True) or self._sent_file(drive_path + "/", parent_id, folder=True)
        if found is not None or not create:
            return found and found["id"]
        log_drive.info("creating Drive folder %s in %s", title, parent_id)
        created, _ = self._insert(drive_path + "/", f"create Drive folder {drive_path}",
                                  {"title": title, "mimeType": _DRIVE_FOLDER_MIME, "parents": [{"id": parent_id}]})
        self._listings[created["id"]] = {}   # a new folder is empty: its listing is known
        self._listed_at[created["id"]] = time.monotonic()
        return created["id"]

    # ------------------------------------------------- files Drive does not list yet

    def _add_unlisted(self, folder_id: str, listing: dict[str, dict]) -> None:
        """Files a fresh listing of `folder_id` lacks though an insert of ours sent them lately (Drive
        lists new files late), asked for by id."""
        folder = self._folder_names.get(folder_id)
        for key in sorted({key for _, key, _ in self._recent_inserts() if not key.endswith("/")}):
            key_folder, title = self._split(key)
            if key_folder == folder and title not in listing:
                found = self._sent_file(key, folder_id, folder=False)
                if found is not None:
                    listing[title] = found

    def _sent_file(self, key: str, folder_id: str, *, folder: bool) -> dict | None:
        """The file (folder) an insert of `key` sent lately created, asked for by id; None when no
        such insert was sent, or Drive committed none of them."""
        for _, sent_key, file_id in reversed(self._recent_inserts()):
            if sent_key == key:
                found = self._held(file_id, folder_id, folder=folder)
                if found is not None:
                    log_drive.info("Drive holds %s as %s, which its listing does not show yet", key, file_id)
                    return found
        return None

    def _recent_inserts(self) -> list[tuple[float, str, str]]:
        horizon = time.time() - _DRIVE_LIST_LAG_SECONDS
        while self._sent and self._sent[0][0] < horizon:
            self._sent.popleft()
        return list(self._sent)

    def _held(self, file_id: str, folder_id: str, *, folder: bool) -> dict | None:
        """files.get of `file_id`: its entry when it is an untrashed file (folder) in `folder_id`."""
        item = self._get(file_id)
        if item is None or (item.get("labels") or {}).get("trashed"):
            return None
        if (item.get("mimeType") == _DRIVE_FOLDER_MIME) != folder:
            return None
        if not any(parent.get("id") == folder_id for parent in item.get("parents") or []):
            return None
        return _drive_entry(item)

    def _get(self, file_id: str) -> dict | None:
        """The Drive file resource of `file_id` (retried); None when Drive has no such file."""
        def attempt() -> dict | None:
            try:
                return self._execute(self._service().files().get(fileId=file_id))
            except Exception as exc:   # noqa: BLE001 - a 404 is an answer; the rest is _retrying's
                if _drive_status(exc) == 404:
                    return None
                raise
        return self._retrying(f"look up Drive file {file_id}", attempt)

    # ------------------------------------------------------------- healing

    def _heal(self, folder_id: str, title: str, copies: list[dict], listing: dict[str, dict] | None) -> dict:
        """The file behind `title` of several copies in one folder (`resolve_duplicates`): identical
        copies trashed, differing copies of a rewritten name renamed (into `listing` under their new
        titles), differing copies of a content-addressed name left as they are and reported."""
        name = self._store_name(folder_id, title)
        content_addressed = is_content_addressed(name)
        keep, trash = resolve_duplicates(copies, content_addressed=content_addressed)
        self._healing["found"].add(name)
        log_drive.warning("Drive holds %s %d times (%s); healing", name, len(copies),
                          ", ".join(copy["id"] for copy in copies))
        for copy in trash:
            self._trash(copy["id"], f"an identical copy of {name}")
            self._healing["trashed"] += 1
        if len(keep) == 1:
            return keep[0]
        if content_addressed:
            self._healing["conflicts"].add(name)
            log_drive.error("%s is held with different bytes (%s): an integrity failure; the oldest, %s, is "
                            "read and none is changed", name, ", ".join(copy["id"] for copy in keep), keep[0]["id"])
            return keep[0]
        pick = self._first_sound(name, keep) if title.endswith(_DRIVE_CHECKED_SUFFIX) else keep[0]
        if pick is None:
            note = (f"none of the {len(keep)} copies of {name} opens as a sound database "
                    f"({', '.join(copy['id'] for copy in keep)}); the newest is read, none is changed")
            if note not in self._healing["notes"]:
                self._healing["notes"].append(note)
                log_drive.error("%s", note)
            return keep[0]
        for copy in keep:
            if copy is pick:
                continue
            new_title = conflict_title(title, copy["id"])
            renamed = _drive_entry(self._patch(copy["id"], f"rename a differing copy of {name} to {new_title}",
                                               body={"title": new_title}))
            self._healing["renamed"].append(new_title)
            if listing is not None:
                listing[new_title] = renamed
        log_drive.warning("%s: kept %s (the newest sound copy); the others are renamed %s<id>",
                          name, pick["id"], title + CONFLICT_MARK)
        return pick

    def _first_sound(self, name: str, copies: list[dict]) -> dict | None:
        """The first copy (newest first) of a database name that opens and passes integrity_check."""
        for copy in copies:
            with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
                target = Path(temp_dir) / "copy.sqlite"
                try:
                    self._download_entry(name, copy, target)
                except IntegrityError as exc:
                    problems = [str(exc)]
                else:
                    problems = (snapshot_problems(target, thorough=True) if is_sqlite_file(target)
                                else ["not an SQLite database"])
            if not problems:
                return copy
            log_drive.warning("copy %s of %s is not kept: %s", copy["id"], name, "; ".join(problems[:3]))
        return None

    def _merge_folders(self, parent_id: str, title: str, folders: list[dict]) -> dict:
        """The oldest of several folders of one title; the others' contents are moved into it and the
        emptied copies trashed (a title then held twice in it is healed when it is listed)."""
        keep = _drive_pick(folders)
        name = self._store_name(parent_id, title) + "/"
        self._healing["found"].add(name)
        log_drive.warning("Drive holds folder %s %d times; moving everything into the oldest, %s",
                          name, len(folders), keep["id"])
        for other in folders:
            if other is keep:
                continue
            query = f"{_drive_query_literal(other['id'])} in parents and trashed = false"
            children = self._retrying(f"list a copy of Drive folder {name}",
                                      lambda query=query: self.drive.ListFile({"q": query}).GetList())
            for child in children:
                self._patch(child["id"], f"move {child['title']} into the oldest Drive folder {name}",
                            body={}, addParents=keep["id"], removeParents=other["id"])
            self._trash(other["id"], f"an emptied copy of Drive folder {name}")
            self._healing["merged"] += 1
        self._listings.pop(keep["id"], None)     # it holds more now
        return keep

    def _trash(self, file_id: str, what: str) -> None:
        """files.trash: Drive keeps the file in its trash (the user may restore it); never a delete."""
        self._write(f"move {what} to Drive's trash",
                    lambda: self._execute(self._service().files().trash(fileId=file_id)))

    def _patch(self, file_id: str, what: str, **fields: Any) -> dict:
        """files.patch (metadata only: a title, the parents)."""
        return self._write(what, lambda: self._execute(self._service().files().patch(fileId=file_id, **fields)))

    # -------------------------------------------------------------- writes

    def _store(self, name: str, open_source: Callable[[], Any], md5: str, size: int, *,
               description: str | None = None) -> None:
        folder, title = self._split(name)
        content_addressed = is_content_addressed(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=True)     # no request once the folder is known
            # A complete listing, kept current by our own writes: no files.list per upload
            # (one per PDF and per text otherwise, ~200k requests at full scale).
            existing = self._listing(folder_id).get(title) or self._sent_file(name, folder_id, folder=False)
            if existing is not None and content_addressed:
                self._check_same(name, existing, md5, size)
                return
            mime_type = (existing or {}).get("mimeType") or _drive_mime_type(title)
            if existing is None:
                body = {"title": title, "parents": [{"id": folder_id}], "mimeType": mime_type}
                if description is not None:
                    body["description"] = description
                stored, earlier = self._insert(name, f"upload {name}", body, open_source, size)
                if earlier and (stored.get("md5Checksum") != md5 or int(stored.get("fileSize", -1)) != size):
                    # Held under our id with other bytes: an earlier write of a rewritten name.
                    if content_addressed:
                        self._check_same(name, stored, md5, size)
                    stored = self._update(name, stored, mime_type, open_source, size)
            else:
                stored = self._update(name, existing, mime_type, open_source, size)
            self._remember(folder_id, title, stored)
            if description is not None and folder_id in self._listings:
                self._index_pack(self._listings[folder_id], stored)
            if stored.get("md5Checksum") and stored["md5Checksum"] != md5:
                raise IntegrityError(f"Drive stored {name} with md5 {stored['md5Checksum']}, "
                                     f"the local bytes have {md5}")

    def _insert(self, key: str, what: str, body: dict, open_source: Callable[[], Any] | None = None,
                size: int = 0) -> tuple[dict, bool]:
        """files.insert under an id chosen first and journaled as `key`; a retry sends the same insert,
        and Drive's 409 (an earlier try was committed) is answered with the file itself.
        Returns (the file, whether an earlier try made it)."""
        file_id = self._reserve(key)
        earlier = False

        def attempt() -> dict:
            nonlocal earlier
            try:
                if open_source is None:
                    return self._execute(self._service().files().insert(body={**body, "id": file_id}))
                with open_source() as stream:
                    media = MediaIoBaseUpload(stream, body["mimeType"], resumable=size > self.multipart_limit,
                                              chunksize=_DRIVE_RESUMABLE_CHUNK)
                    return self._execute(self._service().files().insert(body={**body, "id": file_id},
                                                                        media_body=media))
            except Exception as exc:   # noqa: BLE001 - a 409 is an answer; the rest is _retrying's
                if _drive_status(exc) != 409:
                    raise
            log_drive.info("Drive already holds %s as %s (an earlier try was committed)", key, file_id)
            held = self._get(file_id)
            if held is None:
                raise StoreError(f"Drive answered that {file_id} exists, then that it does not")
            earlier = True
            return held
        stored = _drive_entry(self._write(what, attempt))
        if stored.get("trashed"):    # ours, trashed by someone since: a new file under a new id
            return self._insert(key, what, body, open_source, size)
        return stored, earlier

    def _update(self, name: str, existing: dict, mime_type: str, open_source: Callable[[], Any], size: int) -> dict:
        def attempt():
            with open_source() as stream:
                media = MediaIoBaseUpload(stream, mime_type, resumable=size > self.multipart_limit,
                                          chunksize=_DRIVE_RESUMABLE_CHUNK)
                return self._execute(self._service().files().update(
                    fileId=existing["id"], body={"mimeType": mime_type}, media_body=media))
        return _drive_entry(self._write(f"upload {name}", attempt))

    def _write(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, a write request, paced and retried."""
        def attempt() -> Any:
            self._pace()
            result = call()
            if self.pacer is not None:
                self.pacer.passed()
            return result
        return self._retrying(what, attempt)

    def _execute(self, request) -> Any:
        """A googleapiclient request sent with this thread's http, the access token refreshed first
        when it is about to expire (pydrive2's own calls do that; a 401 would cost a request)."""
        self.drive.auth.access_token_expired         # noqa: B018 - RefreshingAuth refreshes on reading it
        return request.execute(http=self._http())

    def _reserve(self, key: str) -> str:
        """A new id for an insert of `key`, journaled before the insert is sent (so a run killed while
        it was in flight is followed by one that asks for it by id)."""
        if not self._id_pool:
            answer = self._retrying("reserve Drive file ids", lambda: self._execute(
                self._service().files().generateIds(maxResults=DRIVE_ID_BATCH, space="drive")))
            self._id_pool = list(answer.get("ids") or [])
            if not self._id_pool:
                raise StoreError("Google Drive generated no file ids")
        file_id = self._id_pool.pop(0)
        self._sent.append((time.time(), key, file_id))
        self._write_journal()
        return file_id

    def _load_journal(self) -> list[tuple[float, str, str]]:
        """The inserts of the last _DRIVE_LIST_LAG_SECONDS the journal records (unreadable lines skipped)."""
        if self._journal is None or not self._journal.is_file():
            return []
        horizon = time.time() - _DRIVE_LIST_LAG_SECONDS
        sent = []
        for line in self._journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                at, key, file_id = json.loads(line)
                if float(at) >= horizon and isinstance(key, str) and isinstance(file_id, str):
                    sent.append((float(at), key, file_id))
            except (ValueError, TypeError):
                log_drive.warning("Drive insert journal %s: unreadable line skipped", self._journal)
        return sent

    def _write_journal(self) -> None:
        """The inserts of the last _DRIVE_LIST_LAG_SECONDS, one JSON line each, replacing the journal
        (atomic: it only has to outlive a killed process; a lost runtime loses it with the workspace)."""
        if self._journal is None:
            return
        self._journal.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(list(sent)) + "\n" for sent in self._recent_inserts())
        atomic_write(self._journal, lines.encode("utf-8"))

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
        expiry = credentials.token_expiry
        if credentials.access_token_expired or (
                expiry is not None and expiry - _dt.datetime.utcnow() < _DRIVE_TOKEN_MARGIN):
            log_drive.info("Drive access token expires; refreshing it")
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
                   writes_per_second=cfg.DRIVE_WRITES_PER_SECOND,
                   insert_journal=Path(cfg.WORKSPACE) / INSERT_JOURNAL)
    api_root = cfg.DRIVE_API
    if api_root:
        return DriveStore(connect_drive(api_root, http_timeout=cfg.HTTP_TIMEOUT), cfg.DRIVE_FOLDER, **options)
    try:
        from google.colab import auth as colab_auth  # exists only inside Colab
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
