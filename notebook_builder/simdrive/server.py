"""The simulated Google Drive: the Drive API v2 subset DriveStore speaks, over loopback.

Guarantees:
- `SimDrive(...).start()` serves `http://127.0.0.1:<port>/` (`api_root`): Drive v2's
  `drive/v2/files`, `upload/drive/v2/files`, `drive/v2/about` and an OAuth `token` endpoint, on a
  keep-alive server with TCP_NODELAY (MEASURED.md: ~28 ms lost per request otherwise).
- files.list: `q` is an `and` of `title = '..'` (case-insensitive, as Drive's), `'<id>' in
  parents`, `trashed = true|false`, `mimeType =|!= '..'` (else 400 invalidQuery); pages of
  `maxResults` (100 by default, at most 1000) in creation order, the query run once per listing.
  files.get (`alt=media`, a `revisionId`'s too), files.insert and files.update (metadata, multipart,
  or resumable: a session, then chunks answered 308; `addParents`/`removeParents` move a file;
  `newRevision`, `pinned`), files.patch, trash, untrash, delete (for good), emptyTrash,
  generateIds, revisions.list/get/delete/patch/update, about.get (`quotaBytesUsed`: every revision
  of every file, trashed ones too; `quotaBytesUsedInTrash`); `'root'` is My Drive. As Drive: a title
  may be held twice in a folder, `trashed = false` hides trashed files, `version` grows with every change.
- What is kept and for how long is storage.py's: revisions on the simulated Drive's `clock` (a
  callable of epoch seconds, `time.time` unless given; `advance(days=..)`, `POST /__sim__/advance`);
  `metadata_only` name prefixes keep only size and md5 of an upload (reading it back: 400);
  `keep_earlier_bytes=False` keeps only those of a revision once it is superseded.
- Ids chosen by the client: an insert whose body carries an id generateIds handed out creates the
  file under it; `409 duplicate` when a file has it (a repeated insert Drive committed), `400
  fileIdNotUsable` for an id never handed out.
- Weather (attributes, changeable while serving): `latency` before every answer; `write_rate`
  writes a second with a burst of `write_burst` (past it 403 userRateLimitExceeded, every third
  429); `quota_bytes` (403 storageQuotaExceeded); `error_rate` (503) and `drop_rate` (closed
  unanswered), seeded by `seed`; `token_seconds`, a token's life (401 until refreshed at
  `token`); `list_delay` before an API-made file is listed; `phantom_rate`, writes committed then
  answered 500 or not at all; `twin_rate`, inserts followed by another runtime's copy of the title;
  `page_limit`, the most a list page holds.
- `fail_next(kind, count, methods)` scripts the next faults: 'error', 'drop', 'lost' (acted, then
  closed), 'phantom' (acted, then 500), 'truncate' (half a media body), 'quota', 'rate'. Counters:
  `requests` by kind (its route's name), `answers` by kind and status, `rejected` by reason,
  `writes_accepted`, `received_bytes` by kind, `uploaded` (contents committed, by name); `held()`
  (what Drive holds now, file by file), `stats()` (all as JSON, also `GET /__sim__/stats`).
- Test hooks act as another client: `add_file` (`data=None`: metadata only), `add_folder`, `trash`,
  `delete`, `empty_trash`, `set_content` (a file torn on Drive, or another client's revision),
  `file_by_name`, `folder_id`, `files_in`, `folders_in`, `content`, `revisions`, `path_of`.
"""
from __future__ import annotations

import base64
import email.parser
import hashlib
import io
import itertools
import math
import json
import random
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from notebook_builder.loopback import LoopbackServer, LoopbackService

from .storage import (DriveClock, DriveHolding, HeldFile, MetadataOnly, RevisionStore, StorageRefusal, UploadTally,
                      metadata_only_match)

FOLDER_MIME = "application/vnd.google-apps.folder"
DEFAULT_PAGE = 100
MAX_PAGE = 1000
MAX_GENERATED_IDS = 1000
WRITE_KINDS = ("insert", "update", "trash", "untrash", "delete", "empty_trash", "revision_delete", "revision_update")
MAX_REVISION_PAGE = 1000
STATS_PATH = "/__sim__/stats"       # GET: SimDrive.stats() as JSON (no real Drive has it)
ADVANCE_PATH = "/__sim__/advance"   # POST ?days=&hours=&seconds=: the simulated Drive's clock moved on
INITIAL_TOKEN = "simdrive-token"

_CLAUSE_TITLE = re.compile(r"^title\s*=\s*'((?:[^'\\]|\\.)*)'$")
_CLAUSE_PARENT = re.compile(r"^'((?:[^'\\]|\\.)*)'\s+in\s+parents$")
_CLAUSE_TRASHED = re.compile(r"^trashed\s*=\s*(true|false)$")
_CLAUSE_MIME = re.compile(r"^mimeType\s*(=|!=)\s*'((?:[^'\\]|\\.)*)'$")


class QueryError(ValueError):
    pass


def _unescape(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal)


def parse_query(q: str):
    """A predicate over file records for Drive query `q` (the subset in the docstring)."""
    return _parse_query(q)[0]


def _parse_query(q: str):
    """(predicate, the parent id the query requires or None): the parent narrows the search."""
    tests = []
    parent_required = None
    for clause in (part.strip() for part in re.split(r"\s+and\s+", q.strip()) if part.strip()):
        if match := _CLAUSE_TITLE.match(clause):
            title = _unescape(match.group(1)).casefold()
            tests.append(lambda f, title=title: f["title"].casefold() == title)
        elif match := _CLAUSE_PARENT.match(clause):
            parent = _unescape(match.group(1))
            parent_required = parent
            tests.append(lambda f, parent=parent: any(p["id"] == parent for p in f["parents"]))
        elif match := _CLAUSE_TRASHED.match(clause):
            trashed = match.group(1) == "true"
            tests.append(lambda f, trashed=trashed: f["labels"]["trashed"] == trashed)
        elif match := _CLAUSE_MIME.match(clause):
            equal, mime = match.group(1) == "=", _unescape(match.group(2))
            tests.append(lambda f, equal=equal, mime=mime: (f["mimeType"] == mime) == equal)
        else:
            raise QueryError(f"Invalid query clause {clause!r}")
    return (lambda record: all(test(record) for test in tests)), parent_required


def multipart_parts(content_type: str, body: bytes) -> list[bytes]:
    """The contents of a multipart body's parts. The line break before a boundary belongs to the
    boundary, and it is the one the body's first boundary line ends with (googleapiclient writes
    LF, others CRLF), so a part ending in CR or LF keeps it."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        raise ValueError(f"multipart upload without a boundary ({content_type!r})")
    delimiter = b"--" + match.group(1).encode("latin-1")
    start = body.find(delimiter)
    if start < 0:
        raise ValueError("multipart upload without its boundary")
    newline = b"\r\n" if body[start + len(delimiter):].startswith(b"\r\n") else b"\n"
    parts = []
    for section in (newline + body[start:]).split(newline + delimiter)[1:]:
        if section.startswith(b"--"):
            break                                              # the closing boundary
        rest = section[len(newline):]
        if rest.startswith(newline):
            head, content = b"", rest[len(newline):]          # a part without headers
        else:
            head, separator, content = rest.partition(newline + newline)
            if not separator:
                head, content = rest, b""                      # a part of headers alone
        headers = email.parser.BytesHeaderParser().parsebytes(head + newline + newline)
        if (headers.get("Content-Transfer-Encoding") or "").strip().lower() == "base64":
            content = base64.b64decode(content)
        parts.append(content)
    return parts


class _WriteBucket:
    """Drive's per-user write limit: `rate` a second, bursts of `burst`."""

    def __init__(self, rate: float | None, burst: float):
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = burst, time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        if not self.rate:
            return True
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False


class SimDrive(LoopbackService):
    """An in-memory Drive for one user. See the module docstring."""

    server_attribute = "drive"
    thread_name = "simdrive"

    def __init__(self, *, latency: float = 0.0, write_rate: float | None = None, write_burst: float = 3.0,
                 quota_bytes: int | None = None, error_rate: float = 0.0, drop_rate: float = 0.0,
                 token_seconds: float | None = None, list_delay: float = 0.0, phantom_rate: float = 0.0,
                 twin_rate: float = 0.0, page_limit: int = MAX_PAGE, seed: int = 1,
                 clock: Callable[[], float] | None = None, metadata_only: tuple[str, ...] = (),
                 keep_earlier_bytes: bool = True):
        self.latency = latency
        self.quota_bytes = quota_bytes
        self.error_rate, self.drop_rate = error_rate, drop_rate
        self.token_seconds = token_seconds
        self.list_delay, self.phantom_rate, self.twin_rate = list_delay, phantom_rate, twin_rate
        self.page_limit = page_limit
        self._bucket = _WriteBucket(write_rate, write_burst)
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self._files: dict[str, dict] = {}          # id -> record (insertion order = creation order)
        self.clock = DriveClock(clock)
        self._revisions = RevisionStore(self.clock, keep_earlier_bytes=keep_earlier_bytes)
        self.metadata_only = tuple(metadata_only)
        self._sessions: dict[str, dict] = {}       # resumable upload id -> state
        self._children: dict[str, list[str]] = {}  # parent id -> child ids, in creation order
        self._cursors: dict[str, list[str]] = {}   # a listing's page cursor -> the ids it found
        self._listed_from: dict[str, float] = {}   # id -> when files.list starts to show it (list_delay)
        self._generated: set[str] = set()          # ids handed out by generateIds, not used yet
        self._ids = itertools.count(1)
        self._tokens: dict[str, float] = {INITIAL_TOKEN: time.monotonic()}   # token -> issued at
        self._scripted: list[list] = []            # [kind, count, methods]
        self._rate_answers = 0
        self._phantoms = 0
        self.requests: Counter = Counter()
        self.answers: Counter = Counter()
        self.rejected: Counter = Counter()
        self.received_bytes: Counter = Counter()   # request kind -> bytes of the bodies received
        self.uploaded = UploadTally()
        self.writes_accepted = 0
        self.twins_made = 0
        self.api_root: str | None = None

    @property
    def write_rate(self) -> float | None:
        return self._bucket.rate

    @write_rate.setter
    def write_rate(self, rate: float | None) -> None:
        self._bucket.rate = rate

    # --------------------------------------------------------- lifecycle

    def handler(self) -> type:
        return _Handler

    def url_for(self, host: str, port: int) -> str:
        self.api_root = f"http://{host}:{port}/"
        return self.api_root

    # ------------------------------------------------------- test hooks

    def fail_next(self, kind: str, count: int = 1, methods: tuple[str, ...] = ()) -> None:
        """The next `count` requests (of `methods`, e.g. ('insert', 'update'); all when empty) fail."""
        if kind not in ("error", "drop", "lost", "phantom", "truncate", "quota", "rate"):
            raise ValueError(kind)
        with self._lock:
            self._scripted.append([kind, count, tuple(methods)])

    def add_file(self, parent_id: str, title: str, data: bytes | None = b"", *, mime_type: str | None = None,
                 size: int | None = None, md5: str | None = None, description: str | None = None) -> dict:
        """A file made by another client; `data=None` keeps only `size` and `md5` (metadata only, as
        `metadata_only` keeps an upload: reading it back is refused)."""
        with self._lock:
            metadata = {"title": title, "parents": [{"id": parent_id}],
                        "mimeType": mime_type or "application/octet-stream"}
            if description is not None:
                metadata["description"] = description
            record = self._new_record(metadata)
            self._store_bytes(record, data, size=size, md5=md5)
            return dict(record)

    def add_folder(self, parent_id: str, title: str) -> dict:
        with self._lock:
            return dict(self._new_record({"title": title, "parents": [{"id": parent_id}], "mimeType": FOLDER_MIME}))

    def trash(self, file_id: str) -> None:
        with self._lock:
            self._files[file_id]["labels"]["trashed"] = True

    def delete(self, file_id: str) -> int:
        """files.delete: the file (a folder with all in it) gone for good; answers the bytes freed."""
        with self._lock:
            return self._forget(self._with_descendants([file_id]))

    def empty_trash(self) -> int:
        """files.emptyTrash: every trashed file (and all in a trashed folder) gone; the bytes freed."""
        with self._lock:
            trashed = [file_id for file_id, record in self._files.items() if record["labels"]["trashed"]]
            return self._forget(self._with_descendants(trashed))

    def file_by_name(self, path: str, *, include_trashed: bool = False) -> dict | None:
        """The oldest file at `path` ('ky_court/pdf_by_hash/x.pdf') under My Drive, or None."""
        with self._lock:
            parent = "root"
            parts = path.strip("/").split("/")
            for index, part in enumerate(parts):
                matches = [f for f in self._files.values()
                           if f["title"] == part and any(p["id"] == parent for p in f["parents"])
                           and (include_trashed or not f["labels"]["trashed"])
                           and ((f["mimeType"] == FOLDER_MIME) == (index < len(parts) - 1))]
                if not matches:
                    return None
                parent = matches[0]["id"]
            return dict(matches[0])

    def folder_id(self, folder_path: str) -> str | None:
        """The id of the (oldest untrashed) folder at `folder_path` under My Drive, or None."""
        with self._lock:
            parent = "root"
            for part in folder_path.strip("/").split("/"):
                found = [f for f in self._files.values() if f["title"] == part and f["mimeType"] == FOLDER_MIME
                         and any(p["id"] == parent for p in f["parents"]) and not f["labels"]["trashed"]]
                if not found:
                    return None
                parent = found[0]["id"]
            return parent

    def files_in(self, folder_path: str) -> list[dict]:
        """Every untrashed file directly in the folder at `folder_path`."""
        return self._children_of(folder_path, folders=False)

    def folders_in(self, folder_path: str) -> list[dict]:
        """Every untrashed folder directly in the folder at `folder_path` ('' is My Drive)."""
        return self._children_of(folder_path, folders=True)

    def _children_of(self, folder_path: str, *, folders: bool) -> list[dict]:
        with self._lock:
            parent = self.folder_id(folder_path) if folder_path else "root"
            if parent is None:
                return []
            return [dict(f) for f in self._files.values()
                    if any(p["id"] == parent for p in f["parents"]) and not f["labels"]["trashed"]
                    and (f["mimeType"] == FOLDER_MIME) == folders]

    def set_content(self, file_id: str, data: bytes, *, new_revision: bool = False) -> None:
        """Other bytes in a file's head (a file torn or rotted on Drive), or, `new_revision`, another
        client's upload of a new revision."""
        with self._lock:
            self._store_bytes(self._files[file_id], data, new_revision=new_revision)

    def content(self, file_id: str, revision_id: str | None = None) -> bytes | None:
        """The bytes of a file's head (or of one of its revisions); None when metadata only."""
        with self._lock:
            if revision_id is not None:
                return self._revisions.get(file_id, revision_id).data
            head = self._revisions.head(file_id)
            return head.data if head is not None else None

    def revisions(self, file_id: str) -> list[dict]:
        """The file's revisions as revisions.list answers them, oldest first, the head last."""
        with self._lock:
            self._revisions.expire()
            return [revision.resource(file_id, self.api_root) for revision in self._revisions.of(file_id)]

    def advance(self, *, days: float = 0.0, hours: float = 0.0, seconds: float = 0.0) -> float:
        """The simulated Drive's clock moved on (revisions expire by it); answers its new now."""
        with self._lock:
            now = self.clock.advance(days=days, hours=hours, seconds=seconds)
            self._revisions.expire()
            return now

    def rate_refusals(self) -> int:
        """Writes refused for rate so far (403 userRateLimitExceeded and 429 alike)."""
        return self.rejected["userRateLimitExceeded"] + self.rejected["429"]

    @property
    def used_bytes(self) -> int:
        """The quota used: every revision of every file, trashed ones too (about.get's quotaBytesUsed)."""
        with self._lock:
            self._revisions.expire()
            return self._revisions.bytes_held

    def held(self) -> DriveHolding:
        """What Drive holds right now, file by file (storage.DriveHolding)."""
        with self._lock:
            self._revisions.expire()
            trashed = self._with_descendants(
                [file_id for file_id, record in self._files.items() if record["labels"]["trashed"]])
            files = []
            for file_id, record in self._files.items():
                revisions = self._revisions.of(file_id)
                if record["mimeType"] == FOLDER_MIME or not revisions:
                    continue
                earlier = revisions[:-1]
                files.append(HeldFile(self.path_of(file_id), file_id, revisions[-1].size, len(earlier),
                                      sum(r.size for r in earlier), sum(r.pinned for r in revisions),
                                      file_id in trashed))
            return DriveHolding(tuple(files))

    def path_of(self, file_id: str) -> str:
        """'ky_court/pdf_by_hash/x.pdf': the titles from My Drive down to the file (first parents)."""
        titles = []
        while file_id in self._files and len(titles) < 64:
            record = self._files[file_id]
            titles.append(record["title"])
            file_id = record["parents"][0]["id"] if record["parents"] else "root"
        return "/".join(reversed(titles))

    def stats(self) -> dict:
        """The counters as JSON (`GET /__sim__/stats`): requests and answers by kind, rejections, bytes
        received by request kind, uploads by folder, what Drive holds and what it purged."""
        with self._lock:
            held = self.held()
            by_folder = self.uploaded.by(lambda path: path.rpartition("/")[0])
            return {"now": self.clock.now(), "requests": dict(self.requests), "answers": dict(self.answers),
                    "rejected": dict(self.rejected), "received_bytes": dict(self.received_bytes),
                    "uploaded_by_folder": {folder: {"uploads": count, "bytes": size}
                                           for folder, (count, size) in sorted(by_folder.items())},
                    "held": {"files": len(held.files), "total_bytes": held.total_bytes,
                             "head_bytes": held.head_bytes, "earlier_revisions": held.earlier_revisions,
                             "earlier_bytes": held.earlier_bytes, "trashed_bytes": held.trashed_bytes},
                    "purged": dict(self._revisions.purged), "purged_bytes": dict(self._revisions.purged_bytes)}

    # ---------------------------------------------------------- records

    def _new_record(self, metadata: dict, *, api: bool = False) -> dict:
        """A new file; `api`: made through the API (files.list shows it `list_delay` later)."""
        file_id = metadata.get("id") or f"F{next(self._ids):07d}"
        self._generated.discard(file_id)
        stamp = self.clock.stamp()[1]
        record = {"kind": "drive#file", "id": file_id, "title": metadata.get("title") or "Untitled",
                  "mimeType": metadata.get("mimeType") or "application/octet-stream",
                  "parents": [{"id": p["id"]} for p in metadata.get("parents") or [{"id": "root"}]],
                  "labels": {"trashed": False}, "createdDate": stamp, "modifiedDate": stamp, "version": "1"}
        if api and self.list_delay:
            self._listed_from[file_id] = time.monotonic() + self.list_delay
        if metadata.get("description") is not None:
            record["description"] = metadata["description"]
        self._files[file_id] = record
        for parent in record["parents"]:
            self._children.setdefault(parent["id"], []).append(file_id)
        return record

    def _store_bytes(self, record: dict, data: bytes | None, *, size: int | None = None, md5: str | None = None,
                     new_revision: bool = True, pinned: bool = False) -> None:
        """New content: a new head revision (or the head's bytes replaced); only its size and md5
        when `data` is None or the file's path is under `metadata_only`."""
        if data is not None:
            size, md5 = len(data), hashlib.md5(data).hexdigest()
            if self.metadata_only and metadata_only_match(self.path_of(record["id"]), self.metadata_only):
                data = None
        self._revisions.upload(record["id"], data, size=size or 0, md5=md5 or hashlib.md5(b"").hexdigest(),
                               mime_type=record["mimeType"], title=record["title"],
                               new_revision=new_revision, pinned=pinned)
        self._describe_head(record)

    def _describe_head(self, record: dict) -> None:
        """The file's fileSize, md5Checksum and headRevisionId: its head revision's."""
        head = self._revisions.head(record["id"])
        record.update(fileSize=str(head.size), md5Checksum=head.md5, headRevisionId=head.id,
                      modifiedDate=head.modified_date)
        record["version"] = str(int(record.get("version", "0")) + 1)

    def _touch(self, record: dict) -> None:
        record["modifiedDate"] = self.clock.stamp()[1]
        record["version"] = str(int(record.get("version", "0")) + 1)

    def _with_descendants(self, file_ids: list[str]) -> set[str]:
        """`file_ids` and every file in a folder among them, at any depth."""
        seen, queue = set(), list(file_ids)
        while queue:
            file_id = queue.pop()
            if file_id not in seen and file_id in self._files:
                seen.add(file_id)
                queue.extend(self._children.get(file_id, ()))
        return seen

    def _forget(self, doomed: set[str]) -> int:
        """Files deleted for good: records, revisions, places in their folders; the bytes freed."""
        freed = 0
        parents = set()
        for file_id in doomed:
            record = self._files.pop(file_id)
            parents.update(p["id"] for p in record["parents"])
            freed += self._revisions.drop(file_id)
            self._listed_from.pop(file_id, None)
            self._children.pop(file_id, None)
        for parent in parents & set(self._children):
            self._children[parent] = [child for child in self._children[parent] if child not in doomed]
        return freed

    def _listed(self, file_id: str, now: float) -> bool:
        return now >= self._listed_from.get(file_id, 0.0)

    def _move(self, record: dict, add: list[str], remove: list[str]) -> None:
        """addParents / removeParents of files.update and files.patch."""
        for parent in remove:
            if any(p["id"] == parent for p in record["parents"]):
                record["parents"] = [p for p in record["parents"] if p["id"] != parent]
                self._children[parent].remove(record["id"])
        for parent in add:
            if not any(p["id"] == parent for p in record["parents"]):
                record["parents"].append({"id": parent})
                self._children.setdefault(parent, []).append(record["id"])

    def _twin(self, record: dict) -> None:
        """Another runtime's copy of a file just inserted (twin_rate): same title, folder, bytes."""
        metadata = {key: record[key] for key in ("title", "mimeType", "parents", "description") if key in record}
        twin = self._new_record(metadata, api=True)
        if twin["mimeType"] != FOLDER_MIME:
            head = self._revisions.head(record["id"])
            self._store_bytes(twin, head.data, size=head.size, md5=head.md5)
        self.twins_made += 1

    def _maybe_twin(self, record: dict) -> None:
        if self.twin_rate and self._random.random() < self.twin_rate:
            self._twin(record)

    def _fits(self, extra: int, replacing: int = 0) -> bool:
        """Whether `extra` more bytes (`replacing` a head's bytes that go) stay within the quota."""
        return self.quota_bytes is None or self.used_bytes - replacing + extra <= self.quota_bytes

    def _scripted_fault(self, kind_of_request: str) -> str | None:
        with self._lock:
            for entry in self._scripted:
                kind, count, methods = entry
                if methods and kind_of_request not in methods:
                    continue
                if kind == "truncate" and kind_of_request != "media":
                    continue
                entry[1] -= 1
                if entry[1] <= 0:
                    self._scripted.remove(entry)
                return kind
        return None

    def _token_ok(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        token = header[len("Bearer "):].strip()
        with self._lock:
            if token not in self._tokens:
                return False
            return self.token_seconds is None or time.monotonic() - self._tokens[token] < self.token_seconds

    def _issue_token(self) -> dict:
        token = f"simdrive-{next(self._ids):07d}"
        with self._lock:
            self._tokens[token] = time.monotonic()
        return {"access_token": token, "token_type": "Bearer",
                "expires_in": max(1, math.ceil(self.token_seconds)) if self.token_seconds else 3600}


class _Server(LoopbackServer):
    """The simulated Drive's loopback server (keep-alive, TCP_NODELAY, connections closed on stop)."""

    drive: SimDrive


class _Dropped(Exception):
    """Close the connection without an answer."""


class _StorageEndpoints:
    """The handler's answers about what Drive keeps: media (a revision's too), trash, delete, the
    trash emptied, revisions; and the simulation's own `/__sim__/` paths."""

    server: _Server

    def _media(self, file_id: str, truncate: bool, revision_id: str | None = None) -> None:
        drive = self.server.drive
        with drive._lock:
            record = self._record(file_id)
            if record is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            revision = (drive._revisions.get(file_id, revision_id) if revision_id
                        else drive._revisions.head(file_id))
            if revision is None:                  # a folder: no content
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            data = revision.data
            if data is None:
                raise MetadataOnly(f"the simulated Drive kept only the size and checksum of "
                                   f"{drive.path_of(file_id)} (metadata only): its bytes cannot be read")
        self.send_response(200)
        self.send_header("Content-Type", record["mimeType"])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if truncate:
            drive.rejected["truncated"] += 1
            self.wfile.write(data[:len(data) // 2])
            raise _Dropped()
        self.wfile.write(data)

    def _trash(self, file_id: str, trashed: bool) -> None:
        """files.trash (`trashed`) or files.untrash."""
        drive = self.server.drive
        with drive._lock:
            record = self._record(file_id)
            if record is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            record["labels"]["trashed"] = trashed
            drive._touch(record)
            drive.writes_accepted += 1
            answer = dict(record)
        self._json(200, answer)

    def _delete(self, file_id: str) -> None:
        drive = self.server.drive
        with drive._lock:
            if self._record(file_id) is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            drive.delete(file_id)
            drive.writes_accepted += 1
        self._no_content()

    def _empty_trash(self, params, body, **_) -> None:
        drive = self.server.drive
        with drive._lock:
            drive.empty_trash()
            drive.writes_accepted += 1
        self._no_content()

    def _revision_route(self, method: str, file_id: str, revision_id: str | None):
        if revision_id is None:
            return ("revision_list", lambda p, b, **_: self._revision_list(file_id, p)) if method == "GET" \
                else ("unknown", None)
        if method == "GET":
            return "revision_get", lambda p, b, **_: self._revision_answer(file_id, revision_id)
        if method == "DELETE":
            return "revision_delete", lambda p, b, **_: self._revision_delete(file_id, revision_id)
        if method in ("PATCH", "PUT"):
            return "revision_update", lambda p, b, **_: self._revision_answer(file_id, revision_id, b or b"{}")
        return "unknown", None

    def _revision_list(self, file_id: str, params) -> None:
        drive = self.server.drive
        try:
            size = min(MAX_REVISION_PAGE, max(1, int(params.get("maxResults") or 200)))
            start = int(params.get("pageToken") or 0)
        except ValueError:
            return self._error(400, "invalid", "Invalid Value", domain="global")
        with drive._lock:
            if self._record(file_id) is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            revisions = drive.revisions(file_id)
        document = {"kind": "drive#revisionList", "items": revisions[start:start + size]}
        if start + size < len(revisions):
            document["nextPageToken"] = str(start + size)
        self._json(200, document)

    def _revision_answer(self, file_id: str, revision_id: str, patch: bytes | None = None) -> None:
        """revisions.get, or revisions.patch/update (`patch`: its body; only `pinned` is acted on)."""
        drive = self.server.drive
        with drive._lock:
            if self._record(file_id) is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            revision = drive._revisions.get(file_id, revision_id)
            if patch is not None:
                try:
                    pinned = json.loads(patch).get("pinned")
                except (ValueError, AttributeError):
                    return self._error(400, "parseError", "the revision's body is not a JSON object", domain="global")
                if pinned is not None:
                    revision = drive._revisions.set_pinned(file_id, revision_id, bool(pinned))
                drive.writes_accepted += 1
            answer = revision.resource(file_id, drive.api_root)
        self._json(200, answer)

    def _revision_delete(self, file_id: str, revision_id: str) -> None:
        drive = self.server.drive
        with drive._lock:
            record = self._record(file_id)
            if record is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            drive._revisions.delete(file_id, revision_id)
            drive._describe_head(record)
            drive.writes_accepted += 1
        self._no_content()

    def _no_content(self) -> None:
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _simulation(self, method: str, path: str, params) -> None:
        """`GET /__sim__/stats`; `POST /__sim__/advance?days=&hours=&seconds=`. Neither is counted."""
        drive = self.server.drive
        if path == STATS_PATH and method == "GET":
            return self._json(200, drive.stats())
        if path == ADVANCE_PATH and method == "POST":
            try:
                now = drive.advance(**{unit: float(params[unit]) for unit in ("days", "hours", "seconds")
                                       if unit in params})
            except ValueError as exc:
                return self._error(400, "invalid", str(exc), domain="global")
            return self._json(200, {"now": now})
        return self._error(405, "methodNotAllowed", f"{method} {path}", domain="global")


class _Handler(_StorageEndpoints, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    _kind = "unknown"
    _muted = False          # the answer of an act whose answer is lost (never sent, not counted)

    def send_response(self, code: int, message: str | None = None) -> None:
        if not self._muted:
            self._count(str(code))
        super().send_response(code, message)

    def _count(self, outcome: str) -> None:
        drive = self.server.drive
        with drive._lock:
            drive.answers[f"{self._kind} {outcome}"] += 1

    def _act_unanswered(self, handler, params, body) -> None:
        """Drive acts; its answer goes nowhere."""
        real, self.wfile, self._muted = self.wfile, io.BytesIO(), True
        try:
            handler(params, body)
        finally:
            self.wfile, self._muted = real, False

    # ------------------------------------------------------------ routing

    def _serve(self, method: str) -> None:
        drive = self.server.drive
        parts = urlsplit(self.path)
        params = {key: values[0] for key, values in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = parts.path.rstrip("/")
        if path in (STATS_PATH, ADVANCE_PATH):
            return self._simulation(method, path, params)
        kind, handler = self._route(method, path, params)
        self._kind = kind
        if drive.latency:
            time.sleep(drive.latency)
        with drive._lock:
            drive.requests[kind] += 1
            drive.received_bytes[kind] += len(body)
            drive._revisions.expire()
        try:
            if kind == "token":
                return self._json(200, drive._issue_token())
            if not drive._token_ok(self.headers.get("Authorization")):
                drive.rejected["authError"] += 1
                return self._error(401, "authError", "Invalid Credentials", domain="global")
            fault = drive._scripted_fault(kind)
            if fault is None and kind != "upload_chunk":
                with drive._lock:
                    roll = drive._random.random()
                if roll < drive.drop_rate:
                    fault = "drop"
                elif roll < drive.drop_rate + drive.error_rate:
                    fault = "error"
                elif kind in WRITE_KINDS and drive.phantom_rate:
                    with drive._lock:
                        if drive._random.random() < drive.phantom_rate:
                            drive._phantoms += 1
                            fault = "phantom" if drive._phantoms % 2 else "lost"
            if fault == "drop":
                drive.rejected["dropped"] += 1
                self._count("dropped")
                raise _Dropped()
            if fault == "error":
                drive.rejected["backendError"] += 1
                return self._error(503, "backendError", "Backend Error", domain="global")
            if fault == "quota":
                return self._quota()
            if fault == "rate" or (kind in WRITE_KINDS and not drive._bucket.take()):
                return self._rate_limited()
            if handler is None:
                return self._error(404, "notFound", f"no such endpoint {method} {path}")
            if fault == "lost":                  # Drive acts, then the answer never arrives
                drive.rejected["lost"] += 1
                self._act_unanswered(handler, params, body)
                self._count("lost")
                raise _Dropped()
            if fault == "phantom":               # Drive acts, then answers that it failed
                drive.rejected["phantom"] += 1
                self._act_unanswered(handler, params, body)
                return self._error(500, "backendError", "Backend Error", domain="global")
            handler(params, body, truncate=(fault == "truncate"))
        except StorageRefusal as refusal:
            drive.rejected[refusal.reason] += 1
            self._error(refusal.status, refusal.reason, str(refusal), domain="global")
        except _Dropped:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _route(self, method: str, path: str, params: dict):
        if path == "/token" and method == "POST":
            return "token", None
        if path == "/drive/v2/about" and method == "GET":
            return "about", self._about
        if path == "/drive/v2/files/generateIds" and method == "GET":
            return "generate_ids", self._generate_ids
        if (match := re.fullmatch(r"/drive/v2/files/([^/]+)/(un)?trash", path)) and method == "POST":
            file_id, trashed = match.group(1), match.group(2) is None
            return ("trash" if trashed else "untrash"), lambda p, b, **_: self._trash(file_id, trashed)
        if path == "/drive/v2/files/trash" and method == "DELETE":
            return "empty_trash", self._empty_trash
        if match := re.fullmatch(r"/drive/v2/files/([^/]+)/revisions(?:/([^/]+))?", path):
            return self._revision_route(method, match.group(1), match.group(2))
        if path == "/drive/v2/files":
            if method == "GET":
                return "list", self._list
            if method == "POST":
                return "insert", lambda p, b, **_: self._upload(None, p, b, "metadata")
        if match := re.fullmatch(r"/drive/v2/files/([^/]+)", path):
            file_id = match.group(1)
            if method == "GET":
                if params.get("alt") == "media":
                    return "media", lambda p, b, truncate=False: self._media(file_id, truncate, p.get("revisionId"))
                return "get", lambda p, b, **_: self._get(file_id)
            if method in ("PUT", "PATCH"):
                return "update", lambda p, b, **_: self._upload(file_id, p, b, "metadata")
            if method == "DELETE":
                return "delete", lambda p, b, **_: self._delete(file_id)
        if path == "/upload/drive/v2/files" and method in ("POST", "PUT"):
            if "upload_id" in params:
                return "upload_chunk", lambda p, b, **_: self._chunk(p["upload_id"], b)
            return "insert", lambda p, b, **_: self._upload(None, p, b, p.get("uploadType", "media"))
        if match := re.fullmatch(r"/upload/drive/v2/files/([^/]+)", path):
            if "upload_id" in params:
                return "upload_chunk", lambda p, b, **_: self._chunk(p["upload_id"], b)
            file_id = match.group(1)
            return "update", lambda p, b, **_: self._upload(file_id, p, b, p.get("uploadType", "media"))
        return "unknown", None

    # ---------------------------------------------------------- answers

    def _json(self, status: int, document: dict, headers: dict | None = None) -> None:
        payload = json.dumps(document).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, reason: str, message: str, domain: str = "usageLimits") -> None:
        self._json(status, {"error": {"code": status, "message": message,
                                      "errors": [{"domain": domain, "reason": reason, "message": message}]}})

    def _quota(self) -> None:
        self.server.drive.rejected["storageQuotaExceeded"] += 1
        self._error(403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded.")

    def _rate_limited(self) -> None:
        drive = self.server.drive
        with drive._lock:
            drive._rate_answers += 1
            as_429 = drive._rate_answers % 3 == 0
        if as_429:
            drive.rejected["429"] += 1
            return self._error(429, "rateLimitExceeded", "Rate Limit Exceeded")
        drive.rejected["userRateLimitExceeded"] += 1
        self._error(403, "userRateLimitExceeded", "User Rate Limit Exceeded")

    # -------------------------------------------------------- endpoints

    def _about(self, params, body, **_) -> None:
        drive = self.server.drive
        with drive._lock:
            used = drive.used_bytes
            in_trash = drive.held().trashed_bytes if any(f["labels"]["trashed"] for f in drive._files.values()) else 0
        about = {"kind": "drive#about", "quotaBytesUsed": str(used), "quotaBytesUsedAggregate": str(used),
                 "quotaBytesUsedInTrash": str(in_trash), "rootFolderId": "root"}
        if drive.quota_bytes is None:
            about.update(quotaType="UNLIMITED", quotaBytesTotal="0")
        else:
            about.update(quotaType="LIMITED", quotaBytesTotal=str(drive.quota_bytes))
        self._json(200, about)

    def _list(self, params, body, **_) -> None:
        drive = self.server.drive
        try:
            match, parent = _parse_query(params.get("q", ""))
        except QueryError as exc:
            return self._error(400, "invalidQuery", str(exc), domain="global")
        token = params.get("pageToken") or ""
        try:
            size = min(MAX_PAGE, drive.page_limit, max(1, int(params.get("maxResults") or DEFAULT_PAGE)))
            cursor, _, offset = token.rpartition(":")
            start = int(offset or 0)
        except ValueError:
            return self._error(400, "invalid", "Invalid Value", domain="global")
        with drive._lock:
            found = drive._cursors.get(cursor) if token else None
            if found is None:      # a first page (or a forgotten cursor): the query is run once
                candidates = (drive._children.get(parent, []) if parent is not None else list(drive._files))
                now = time.monotonic()
                found = [file_id for file_id in candidates
                         if drive._listed(file_id, now) and match(drive._files[file_id])]
                cursor = f"C{next(drive._ids):07d}"
                drive._cursors[cursor] = found
                while len(drive._cursors) > 64:
                    drive._cursors.pop(next(iter(drive._cursors)))
            page = [dict(drive._files[file_id]) for file_id in found[start:start + size] if file_id in drive._files]
        document = {"kind": "drive#fileList", "items": page}
        if start + size < len(found):
            document["nextPageToken"] = f"{cursor}:{start + size}"
        self._json(200, document)

    def _record(self, file_id: str) -> dict | None:
        return self.server.drive._files.get(file_id)

    def _get(self, file_id: str) -> None:
        with self.server.drive._lock:
            record = self._record(file_id)
            record = dict(record) if record else None
        if record is None:
            return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
        self._json(200, record)

    def _generate_ids(self, params, body, **_) -> None:
        drive = self.server.drive
        try:
            count = int(params.get("maxResults") or 10)
        except ValueError:
            return self._error(400, "invalid", "Invalid Value", domain="global")
        if not 1 <= count <= MAX_GENERATED_IDS:
            return self._error(400, "invalid", f"maxResults must be 1 to {MAX_GENERATED_IDS}", domain="global")
        with drive._lock:
            ids = [f"G{next(drive._ids):07d}" for _ in range(count)]
            drive._generated.update(ids)
        self._json(200, {"kind": "drive#generatedIds", "space": params.get("space", "drive"), "ids": ids})

    def _id_refused(self, metadata: dict) -> bool:
        """An insert's own `id`: 409 when a file has it (a repeated insert), 400 when never generated."""
        drive = self.server.drive
        file_id = metadata.get("id")
        if file_id is None:
            return False
        if file_id in drive._files:
            self._error(409, "duplicate", "A file already exists with the provided ID.", domain="global")
            return True
        if file_id not in drive._generated:
            self._error(400, "fileIdNotUsable", "The provided file ID is not usable.", domain="global")
            return True
        return False

    def _split_upload(self, body: bytes, upload_type: str) -> tuple[dict, bytes | None]:
        """(metadata, content or None) of an insert/update body."""
        if upload_type == "multipart":
            parts = multipart_parts(self.headers.get("Content-Type", ""), body)
            if len(parts) != 2:
                raise ValueError(f"multipart upload with {len(parts)} parts, expected 2")
            return json.loads(parts[0]), parts[1]
        if upload_type == "media":
            return {}, body
        return (json.loads(body) if body else {}), None

    def _upload(self, file_id: str | None, params, body, upload_type: str) -> None:
        """files.insert (`file_id` None) or files.update of `file_id`: metadata alone, bytes alone
        (media), both (multipart), or a resumable session whose last chunk `_chunk` commits."""
        drive = self.server.drive
        try:
            metadata, data = self._split_upload(body, upload_type)
        except (ValueError, json.JSONDecodeError) as exc:
            return self._error(400, "badContent", str(exc), domain="global")
        with drive._lock:
            if file_id is None and self._id_refused(metadata):
                return None
            if file_id is not None and self._record(file_id) is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            if upload_type == "resumable":
                return self._open_session(file_id, metadata, params)
            answer = self._commit(file_id, metadata, data, params)
        if answer is not None:
            self._json(200, answer)

    def _commit(self, file_id: str | None, metadata: dict, data: bytes | None, params) -> dict | None:
        """Under the lock: a new file (`file_id` None) or the file's new metadata and bytes, and the
        answer's file; None when refused (quota, a parent that does not exist: answered here)."""
        drive = self.server.drive
        record = drive._files.get(file_id) if file_id is not None else None
        new_revision = str(params.get("newRevision", "true")).lower() != "false"
        pinned = str(params.get("pinned", "false")).lower() == "true"
        replacing = int(record.get("fileSize", 0)) if record is not None and not new_revision else 0
        if data is not None and not drive._fits(len(data), replacing):
            self._quota()
            return None
        if record is None:
            for parent in metadata.get("parents") or []:
                if parent["id"] != "root" and parent["id"] not in drive._files:
                    self._error(404, "notFound", f"File not found: {parent['id']}", domain="global")
                    return None
            record = drive._new_record(metadata, api=True)
            if record["mimeType"] != FOLDER_MIME:
                drive._store_bytes(record, data if data is not None else b"", pinned=pinned)
        else:
            self._apply_metadata(record, metadata)
            drive._move(record, _id_list(params.get("addParents")), _id_list(params.get("removeParents")))
            if data is not None:
                drive._store_bytes(record, data, new_revision=new_revision, pinned=pinned)
            else:
                drive._touch(record)
        if data is not None:
            drive.uploaded.add(drive.path_of(record["id"]), len(data))
        drive.writes_accepted += 1
        answer = dict(record)
        if file_id is None:
            drive._maybe_twin(record)
        return answer

    @staticmethod
    def _apply_metadata(record: dict, metadata: dict) -> None:
        for key in ("title", "mimeType", "description"):
            if metadata.get(key) is not None:
                record[key] = metadata[key]

    def _open_session(self, file_id: str | None, metadata: dict, params: dict) -> None:
        drive = self.server.drive
        total = self.headers.get("X-Upload-Content-Length")
        upload_id = f"U{next(drive._ids):07d}"
        with drive._lock:
            drive._sessions[upload_id] = {"file_id": file_id, "metadata": metadata, "params": params,
                                          "data": bytearray(), "total": int(total) if total else None}
        path = "/upload/drive/v2/files" + (f"/{file_id}" if file_id else "")
        location = f"{drive.api_root.rstrip('/')}{path}?uploadType=resumable&upload_id={upload_id}"
        self.send_response(200)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _chunk(self, upload_id: str, body: bytes) -> None:
        drive = self.server.drive
        with drive._lock:
            session = drive._sessions.get(upload_id)
        if session is None:
            return self._error(404, "notFound", "upload session not found", domain="global")
        content_range = self.headers.get("Content-Range", "")
        match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
        if match:
            start = int(match.group(1))
            if start != len(session["data"]):
                return self._error(400, "badRange", f"chunk starts at {start}, have {len(session['data'])}")
            total = None if match.group(3) == "*" else int(match.group(3))
        else:                                             # "bytes */N": a status query, or no range
            empty = re.fullmatch(r"bytes \*/(\d+)", content_range.strip())
            total = int(empty.group(1)) if empty else len(body)
        session["data"].extend(body)
        if total is not None:
            session["total"] = total
        if session["total"] is None or len(session["data"]) < session["total"]:
            self.send_response(308)
            if session["data"]:
                self.send_header("Range", f"bytes=0-{len(session['data']) - 1}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = bytes(session["data"])
        with drive._lock:
            drive._sessions.pop(upload_id, None)
            if session["file_id"] is None and self._id_refused(session["metadata"]):
                return None
            answer = self._commit(session["file_id"], session["metadata"], data, session["params"])
        if answer is not None:
            self._json(200, answer)


def _id_list(value: str | None) -> list[str]:
    """The ids of an `addParents` / `removeParents` parameter (comma-separated)."""
    return [part for part in (value or "").split(",") if part]


def serve(port: int = 8766, **options) -> None:
    """Serves a SimDrive in the foreground until interrupted."""
    drive = SimDrive(**options)
    root = drive.start(port=port)
    print(f"simulated Drive at {root} (KY_DRIVE_API={root}); Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        drive.stop()
