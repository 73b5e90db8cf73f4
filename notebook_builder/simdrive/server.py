"""The simulated Google Drive: the Drive API v2 subset DriveStore speaks, over loopback.

Guarantees:
- `SimDrive(...).start()` serves `http://127.0.0.1:<port>/` (`api_root`): Drive v2's
  `drive/v2/files`, `upload/drive/v2/files`, `drive/v2/about` and an OAuth `token` endpoint, on a
  keep-alive server with TCP_NODELAY (MEASURED.md: ~28 ms lost per request otherwise).
- files.list: `q` is an `and` of `title = '..'` (case-insensitive, as Drive's), `'<id>' in
  parents`, `trashed = true|false`, `mimeType =|!= '..'` (else 400 invalidQuery); pages of
  `maxResults` (100 by default, at most 1000) in creation order, the query run once per listing.
  files.get (`alt=media` too), files.insert and files.update (metadata, multipart, or resumable: a
  session, then chunks answered 308 until complete; `addParents`/`removeParents` move a file),
  files.patch, files.trash, files.generateIds, about.get; `'root'` is My Drive. As Drive: a title
  may be held twice in a folder, `trashed = false` hides trashed files, md5Checksum and fileSize
  describe what is stored, `version` grows with every change.
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
  `requests` by kind (list, get, media, insert, update, trash, generate_ids, upload_chunk, about,
  token), `answers` by kind and status, `rejected` by reason, `writes_accepted`.
- Test hooks act as another client: `add_file` (with no bytes, a phantom, for scale),
  `add_folder`, `trash`, `set_content` (another client's change, or a file torn on Drive),
  `file_by_name`, `folder_id`, `files_in`, `folders_in`, `content`.
"""
from __future__ import annotations

import datetime as _dt
import email.parser
import email.policy
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
from urllib.parse import parse_qs, urlsplit

from notebook_builder.loopback import LoopbackServer, LoopbackService

FOLDER_MIME = "application/vnd.google-apps.folder"
DEFAULT_PAGE = 100
MAX_PAGE = 1000
MAX_GENERATED_IDS = 1000
WRITE_KINDS = ("insert", "update", "trash")
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
                 twin_rate: float = 0.0, page_limit: int = MAX_PAGE, seed: int = 1):
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
        self._content: dict[str, bytes | None] = {}
        self._sessions: dict[str, dict] = {}       # resumable upload id -> state
        self._children: dict[str, list[str]] = {}  # parent id -> child ids, in creation order
        self._cursors: dict[str, list[str]] = {}   # a listing's page cursor -> the ids it found
        self._listed_from: dict[str, float] = {}   # id -> when files.list starts to show it (list_delay)
        self._generated: set[str] = set()          # ids handed out by generateIds, not used yet
        self._ids = itertools.count(1)
        self._clock = itertools.count()
        self._tokens: dict[str, float] = {INITIAL_TOKEN: time.monotonic()}   # token -> issued at
        self._scripted: list[list] = []            # [kind, count, methods]
        self._rate_answers = 0
        self._phantoms = 0
        self.requests: Counter = Counter()
        self.answers: Counter = Counter()
        self.rejected: Counter = Counter()
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
        """A file made by another client; `data=None` holds no bytes (a phantom: `size`, `md5`)."""
        with self._lock:
            metadata = {"title": title, "parents": [{"id": parent_id}],
                        "mimeType": mime_type or "application/octet-stream"}
            if description is not None:
                metadata["description"] = description
            record = self._new_record(metadata)
            self._set_content(record, data, size=size, md5=md5)
            return dict(record)

    def add_folder(self, parent_id: str, title: str) -> dict:
        with self._lock:
            return dict(self._new_record({"title": title, "parents": [{"id": parent_id}], "mimeType": FOLDER_MIME}))

    def trash(self, file_id: str) -> None:
        with self._lock:
            self._files[file_id]["labels"]["trashed"] = True

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

    def set_content(self, file_id: str, data: bytes) -> None:
        """New bytes for a file, as another client's update would write them."""
        with self._lock:
            self._set_content(self._files[file_id], data)

    def content(self, file_id: str) -> bytes | None:
        with self._lock:
            return self._content.get(file_id)

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(int(f.get("fileSize", 0)) for f in self._files.values())

    # ---------------------------------------------------------- records

    def _stamp(self) -> str:
        # Distinct, increasing timestamps: the creation order is the order Drive would report.
        base = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
        moment = base + _dt.timedelta(milliseconds=next(self._clock))
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    def _new_record(self, metadata: dict, *, api: bool = False) -> dict:
        """A new file; `api`: made through the API (files.list shows it `list_delay` later)."""
        file_id = metadata.get("id") or f"F{next(self._ids):07d}"
        self._generated.discard(file_id)
        stamp = self._stamp()
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

    def _set_content(self, record: dict, data: bytes | None, *, size: int | None = None,
                     md5: str | None = None) -> None:
        if data is not None:
            size, md5 = len(data), hashlib.md5(data).hexdigest()
        record["fileSize"] = str(size or 0)
        record["md5Checksum"] = md5 or hashlib.md5(b"").hexdigest()
        self._touch(record)
        self._content[record["id"]] = data

    def _touch(self, record: dict) -> None:
        record["modifiedDate"] = self._stamp()
        record["version"] = str(int(record.get("version", "0")) + 1)

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
            self._set_content(twin, self._content.get(record["id"]))
        self.twins_made += 1

    def _maybe_twin(self, record: dict) -> None:
        if self.twin_rate and self._random.random() < self.twin_rate:
            self._twin(record)

    def _fits(self, extra: int, replacing: int = 0) -> bool:
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


class _Handler(BaseHTTPRequestHandler):
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
        kind, handler = self._route(method, path, params)
        self._kind = kind
        if drive.latency:
            time.sleep(drive.latency)
        with drive._lock:
            drive.requests[kind] += 1
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
        if (match := re.fullmatch(r"/drive/v2/files/([^/]+)/trash", path)) and method == "POST":
            file_id = match.group(1)
            return "trash", lambda p, b, **_: self._trash(file_id)
        if path == "/drive/v2/files":
            if method == "GET":
                return "list", self._list
            if method == "POST":
                return "insert", lambda p, b, **_: self._upload(None, p, b, "metadata")
        if match := re.fullmatch(r"/drive/v2/files/([^/]+)", path):
            file_id = match.group(1)
            if method == "GET":
                if params.get("alt") == "media":
                    return "media", lambda p, b, truncate=False: self._media(file_id, truncate)
                return "get", lambda p, b, **_: self._get(file_id)
            if method in ("PUT", "PATCH"):
                return "update", lambda p, b, **_: self._upload(file_id, p, b, "metadata")
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
        used = drive.used_bytes
        about = {"kind": "drive#about", "quotaBytesUsed": str(used), "quotaBytesUsedAggregate": str(used),
                 "rootFolderId": "root"}
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
            page = [dict(drive._files[file_id]) for file_id in found[start:start + size]]
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

    def _trash(self, file_id: str) -> None:
        drive = self.server.drive
        with drive._lock:
            record = self._record(file_id)
            if record is None:
                return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
            record["labels"]["trashed"] = True
            drive._touch(record)
            drive.writes_accepted += 1
            answer = dict(record)
        self._json(200, answer)

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

    def _media(self, file_id: str, truncate: bool) -> None:
        drive = self.server.drive
        with drive._lock:
            record = self._record(file_id)
            data = drive._content.get(file_id) if record else None
        if record is None or data is None:
            return self._error(404, "notFound", f"File not found: {file_id}", domain="global")
        self.send_response(200)
        self.send_header("Content-Type", record["mimeType"])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if truncate:
            drive.rejected["truncated"] += 1
            self.wfile.write(data[:len(data) // 2])
            raise _Dropped()
        self.wfile.write(data)

    def _split_upload(self, body: bytes, upload_type: str) -> tuple[dict, bytes | None]:
        """(metadata, content or None) of an insert/update body."""
        if upload_type == "multipart":
            content_type = self.headers.get("Content-Type", "")
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
            parts = list(message.iter_parts())
            if len(parts) != 2:
                raise ValueError(f"multipart upload with {len(parts)} parts, expected 2")
            return json.loads(parts[0].get_content()), parts[1].get_payload(decode=True)
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
                return self._open_session(file_id, metadata)
            answer = self._commit(file_id, metadata, data, params)
        if answer is not None:
            self._json(200, answer)

    def _commit(self, file_id: str | None, metadata: dict, data: bytes | None, params) -> dict | None:
        """Under the lock: a new file (`file_id` None) or the file's new metadata and bytes, and the
        answer's file; None when refused (quota, a parent that does not exist: answered here)."""
        drive = self.server.drive
        record = drive._files.get(file_id) if file_id is not None else None
        if data is not None and not drive._fits(len(data), int(record.get("fileSize", 0)) if record else 0):
            self._quota()
            return None
        if record is None:
            for parent in metadata.get("parents") or []:
                if parent["id"] != "root" and parent["id"] not in drive._files:
                    self._error(404, "notFound", f"File not found: {parent['id']}", domain="global")
                    return None
            record = drive._new_record(metadata, api=True)
            if record["mimeType"] != FOLDER_MIME:
                drive._set_content(record, data if data is not None else b"")
        else:
            self._apply_metadata(record, metadata)
            drive._move(record, _id_list(params.get("addParents")), _id_list(params.get("removeParents")))
            if data is not None:
                drive._set_content(record, data)
            else:
                drive._touch(record)
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

    def _open_session(self, file_id: str | None, metadata: dict) -> None:
        drive = self.server.drive
        total = self.headers.get("X-Upload-Content-Length")
        upload_id = f"U{next(drive._ids):07d}"
        with drive._lock:
            drive._sessions[upload_id] = {"file_id": file_id, "metadata": metadata, "data": bytearray(),
                                          "total": int(total) if total else None}
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
            answer = self._commit(session["file_id"], session["metadata"], data, {})
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
