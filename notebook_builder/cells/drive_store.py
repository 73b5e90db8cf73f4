"""Google Drive as the Store, over pydrive2 (Drive API v2; the requests: c07_drive_api).

Guarantees, on top of the Store interface (c20_store):
- A store name `a/b/c.pdf` is the file titled `c.pdf` in folder `b` in folder `a` under the root
  folder (`folder_path`, a path under My Drive); folders are made on demand, their ids cached.
- One name, one file, whatever Drive answers: files are inserted under ids chosen first (a retried
  insert Drive had committed is not made twice), and a file an insert of the last two minutes made
  that a listing does not show yet is asked for by id before anything concludes it absent.
- Titles held twice are healed when a listing or a lookup shows them (`resolve_duplicates`):
  identical copies keep the oldest and the others go to Drive's trash; differing copies of a name
  the pipeline rewrites keep the newest that passes its check (a `.sqlite` must pass
  integrity_check) and the others are renamed `<title>.conflict-<fileId>`; differing copies of a
  content-addressed name are an integrity failure (the oldest is read, none is changed). Folders
  held twice are merged into the oldest. `sweep_duplicates()` reports what this session healed.
- A content-addressed name is never updated (the same bytes again are a no-op, other bytes raise
  `IntegrityError`) except by `replace_damaged`; mutable names are updated in place, their head
  revision replaced (Drive keeps no earlier one); `remove` deletes state the pipeline replaces for
  good (files.delete, never the trash). Writes of one store are serialized: it may be called from threads.
- Texts are packed: `upload_files` stores two or more `text/<sha256>.txt` as
  `text/pack-<sha256 of the zip>.zip` (up to TEXT_PACK_MEMBERS, deterministic), its description
  the index (`title:size:md5`), so a folder listing knows every packed name and every read answers
  for a packed text as for a loose one; a loose file of a name wins over a pack.
- Listing cache: `exists`, `size` and lookups answer from a folder's listing (1000 names a
  request), kept current by our own writes; `list_dir`, `list_files` and `refresh()` list again.
  A stale "absent" costs a lookup by title; a stale "present" (trashed by hand) is believed until
  then: the pipeline never deletes from the store, and verify's fixity lists afresh.
- `listing_md5`: a listing carries Drive's md5Checksum of each file, so fixity (c21) checks a
  proven file from the listing alone.

Knobs read (by `open_drive_store` only): DRIVE_FOLDER, DRIVE_API, DRIVE_WRITES_PER_SECOND,
BACKOFF_BASE, BACKOFF_CAP, HTTP_TIMEOUT, WORKSPACE (the insert journal and the write pacer's bucket
are in its checkpoint/).
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import threading
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from .c00_config import IntegrityError, StoreError
from .c05_durable import atomic_write
from .c06_layout import check_store_name, is_content_addressed
from .c10_database import is_sqlite_file
from .c17_snapshots import snapshot_problems
from .c07_drive_api import (DRIVE_FOLDER_MIME, DRIVE_MULTIPART_LIMIT, DRIVE_PAGE_SIZE, DriveRequests, RefreshingAuth,
                            connect_drive, drive_entry, drive_md5_of_file, drive_mime_type, drive_query_literal)
from .c20_store import Store, StoredFile, check_removable, file_digests

log_drive = logging.getLogger("kycourt.drive")

_DRIVE_SWEEP_FRESH_SECONDS = 600.0   # sweep_duplicates re-lists a folder listed longer ago than this
CONFLICT_MARK = ".conflict-"
_DRIVE_CHECKED_SUFFIX = ".sqlite"    # differing copies of these are opened and checked before one is kept
INSERT_JOURNAL = "checkpoint/drive-inserts.json"   # in the workspace (open_drive_store)
PACER_STATE = "checkpoint/drive-pacer.json"        # the workspace's write bucket (open_drive_store)

TEXT_PACK_PREFIX = "pack-"
TEXT_PACK_SUFFIX = ".zip"
TEXT_PACK_MEMBERS = 64               # texts a pack holds at most (its index fits in ~5.5 KB)
_TEXT_PACK_MARK = "kycourt text pack v1:"
_TEXT_PACK_FOLDER = "text"
_TEXT_PACK_CACHE = 4                 # packs kept in memory after a download (neighbours are read together)
_TEXT_PACK_DATE = (2020, 1, 1, 0, 0, 0)   # a fixed member date: the same texts make the same pack


# ------------------------------------------------------ pure decisions


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


def _drive_check_same(name: str, entry: dict, md5: str, size: int) -> None:
    if entry.get("md5Checksum") == md5 and int(entry.get("fileSize", -1)) == size:
        return
    raise IntegrityError(f"store refuses to overwrite {name} with different bytes "
                         f"(Drive has md5 {entry.get('md5Checksum')} size {entry.get('fileSize')}, "
                         f"local md5 {md5} size {size})")


# ------------------------------------------------------------ text packs


class TextPacks:
    """A Drive store's text packs: texts stored as packs, a packed text read out of its (cached)
    pack, a pack's members indexed into its folder's listing, a pack made again from its texts.
    Called under the store's lock."""

    def __init__(self, store: "DriveStore"):
        self.store = store
        self._cache: dict[str, bytes] = {}       # pack id -> zip bytes, oldest first

    @staticmethod
    def packable(name: str) -> bool:
        folder, title = PurePosixPath(name).parent.as_posix(), PurePosixPath(name).name
        return folder == _TEXT_PACK_FOLDER and title.endswith(".txt")

    def upload(self, texts: list[tuple[str, str | os.PathLike]]) -> None:
        """Two or more texts not held yet, as packs of up to TEXT_PACK_MEMBERS (held ones checked)."""
        missing: list[tuple[str, bytes]] = []
        for name, path in texts:
            data = Path(path).read_bytes()
            held = self.store._listed_entry(name)
            if held is not None:
                _drive_check_same(name, held, hashlib.md5(data).hexdigest(), len(data))
                continue
            missing.append((PurePosixPath(name).name, data))
        size = self.store.text_pack_members
        for start in range(0, len(missing), size):
            self._upload_pack(missing[start:start + size])

    def _upload_pack(self, texts: list[tuple[str, bytes]]) -> None:
        data, members = build_text_pack(texts)
        pack_name = f"{_TEXT_PACK_FOLDER}/{TEXT_PACK_PREFIX}{hashlib.sha256(data).hexdigest()}{TEXT_PACK_SUFFIX}"
        self.store._store(pack_name, lambda: io.BytesIO(data), hashlib.md5(data).hexdigest(), len(data),
                          description=text_pack_description(members))
        log_drive.debug("stored %d texts as %s", len(members), pack_name)

    def read(self, name: str, entry: dict) -> bytes:
        """The bytes of a packed text: its pack downloaded (or cached), the member checked."""
        pack = self._cache.pop(entry["pack"], None)
        if pack is None:
            with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
                target = Path(temp_dir) / "pack.zip"
                self.store.download_file(f"{_TEXT_PACK_FOLDER}/{entry['pack_title']}", target)
                pack = target.read_bytes()
        self._cache[entry["pack"]] = pack
        while len(self._cache) > _TEXT_PACK_CACHE:
            self._cache.pop(next(iter(self._cache)))
        title = PurePosixPath(name).name
        try:
            with zipfile.ZipFile(io.BytesIO(pack)) as archive:
                data = archive.read(title)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise IntegrityError(f"{name}: its pack {entry['pack_title']} is unreadable ({exc})") from None
        if hashlib.md5(data).hexdigest() != entry["md5Checksum"]:
            raise IntegrityError(f"{name} in pack {entry['pack_title']} does not match the pack's index")
        return data

    def index(self, listing: dict[str, dict], pack: dict) -> None:
        """Adds a text pack's members to its folder's listing (a loose file of a name wins)."""
        members = text_pack_members(pack["title"], pack.get("description"))
        if members is None and pack["title"].endswith(TEXT_PACK_SUFFIX):
            members = self._read_index(pack)
        for title, (size, md5) in (members or {}).items():
            if title not in listing:
                listing[title] = {"title": title, "fileSize": str(size), "md5Checksum": md5,
                                  "pack": pack["id"], "pack_title": pack["title"]}

    def _read_index(self, pack: dict) -> dict[str, tuple[int, str]] | None:
        """The index of a pack whose description is gone: read from the pack itself."""
        log_drive.warning("text pack %s has no index in its description; reading the pack", pack["title"])
        try:
            with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
                target = Path(temp_dir) / "pack.zip"
                self.store.requests.download(f"{_TEXT_PACK_FOLDER}/{pack['title']}", pack, target)
                with zipfile.ZipFile(target) as archive:
                    return {info.filename: (info.file_size, hashlib.md5(archive.read(info)).hexdigest())
                            for info in archive.infolist()}
        except (StoreError, zipfile.BadZipFile) as exc:
            log_drive.warning("text pack %s is unreadable: %s", pack["title"], exc)
            return None

    def assemble(self, name: str, workspace: str | os.PathLike) -> bytes | None:
        """A text pack made again (deterministically) from its members' workspace copies."""
        folder, title = self.store._split(name)
        if folder != _TEXT_PACK_FOLDER or not title.startswith(TEXT_PACK_PREFIX):
            return None
        entry = self.store._listed_entry(name)
        members = text_pack_members(title, (entry or {}).get("description"))
        if not members:
            return None
        paths = [(member, Path(workspace) / folder / member) for member in members]
        if not all(path.is_file() for _, path in paths):
            return None
        return build_text_pack([(member, path.read_bytes()) for member, path in paths])[0]


# ------------------------------------------------------------ duplicates


class DuplicateHealer:
    """Titles and folders a Drive folder holds twice, healed as `resolve_duplicates` decides; what this
    session found and healed (`report`). Called under the store's lock."""

    def __init__(self, requests: DriveRequests):
        self.requests = requests
        self.found: set[str] = set()
        self.trashed, self.merged = 0, 0
        self.renamed: list[str] = []
        self.conflicts: set[str] = set()
        self.notes: list[str] = []

    def report(self) -> dict:
        return {"found": sorted(self.found), "trashed": self.trashed, "renamed": list(self.renamed),
                "merged": self.merged, "conflicts": sorted(self.conflicts), "notes": list(self.notes)}

    def note(self, note: str, *, error: bool = False) -> None:
        """A finding said once (a log line, and the report's notes)."""
        if note not in self.notes:
            self.notes.append(note)
            (log_drive.error if error else log_drive.warning)("%s", note)

    def heal(self, name: str, copies: list[dict], listing: dict[str, dict] | None) -> dict:
        """The file behind `name` of several copies in one folder (`resolve_duplicates`): identical
        copies trashed, differing copies of a rewritten name renamed (into `listing` under their new
        titles), differing copies of a content-addressed name left as they are and reported."""
        title = PurePosixPath(name).name
        content_addressed = is_content_addressed(name)
        keep, trash = resolve_duplicates(copies, content_addressed=content_addressed)
        self.found.add(name)
        log_drive.warning("Drive holds %s %d times (%s); healing", name, len(copies),
                          ", ".join(copy["id"] for copy in copies))
        for copy in trash:
            self.requests.trash(copy["id"], f"an identical copy of {name}")
            self.trashed += 1
        if len(keep) == 1:
            return keep[0]
        if content_addressed:
            self.conflicts.add(name)
            log_drive.error("%s is held with different bytes (%s): an integrity failure; the oldest, %s, is "
                            "read and none is changed", name, ", ".join(copy["id"] for copy in keep), keep[0]["id"])
            return keep[0]
        pick = self._first_sound(name, keep) if title.endswith(_DRIVE_CHECKED_SUFFIX) else keep[0]
        if pick is None:
            note = (f"none of the {len(keep)} copies of {name} opens as a sound database "
                    f"({', '.join(copy['id'] for copy in keep)}); the newest is read, none is changed")
            self.note(note, error=True)
            return keep[0]
        for copy in keep:
            if copy is pick:
                continue
            new_title = conflict_title(title, copy["id"])
            renamed = drive_entry(self.requests.patch(copy["id"], f"rename a differing copy of {name} to "
                                                      f"{new_title}", body={"title": new_title}))
            self.renamed.append(new_title)
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
                    self.requests.download(name, copy, target)
                except IntegrityError as exc:
                    problems = [str(exc)]
                else:
                    problems = (snapshot_problems(target, thorough=True) if is_sqlite_file(target)
                                else ["not an SQLite database"])
            if not problems:
                return copy
            log_drive.warning("copy %s of %s is not kept: %s", copy["id"], name, "; ".join(problems[:3]))
        return None

    def merge_folders(self, name: str, folders: list[dict]) -> dict:
        """The oldest of several folders of one title; the others' contents are moved into it and the
        emptied copies trashed (a title then held twice in it is healed when it is listed)."""
        keep = _drive_pick(folders)
        self.found.add(name)
        log_drive.warning("Drive holds folder %s %d times; moving everything into the oldest, %s",
                          name, len(folders), keep["id"])
        for other in folders:
            if other is keep:
                continue
            query = f"{drive_query_literal(other['id'])} in parents and trashed = false"
            children = self.requests.retrying(f"list a copy of Drive folder {name}",
                                              lambda query=query: self.requests.drive.ListFile({"q": query}).GetList())
            for child in children:
                self.requests.patch(child["id"], f"move {child['title']} into the oldest Drive folder {name}",
                                    body={}, addParents=keep["id"], removeParents=other["id"])
            self.requests.trash(other["id"], f"an emptied copy of Drive folder {name}")
            self.merged += 1
        return keep


# ------------------------------------------------------------ the store


class DriveStore(Store):
    """A Drive folder as a store. See the module docstring for what it guarantees."""

    # ~2 writes a second: content-addressed uploads run behind the crawl (StoreMirror's uploader).
    deferred_uploads = True
    # A listing carries Drive's md5Checksum of each file: fixity checks a proven file from it, unread.
    listing_md5 = True
    text_pack_members = TEXT_PACK_MEMBERS   # upload_files packs texts (StoreMirror groups them)

    def __init__(self, drive, folder_path: str = "ky_court", *, backoff_base: float = 1.0,
                 backoff_cap: float = 32.0, max_tries: int = 6,
                 sleep: Callable[[float], Any] = time.sleep, writes_per_second: float | None = None,
                 multipart_limit: int = DRIVE_MULTIPART_LIMIT, deferred_uploads: bool = True,
                 insert_journal: str | os.PathLike | None = None, pacer_state: str | os.PathLike | None = None):
        folder_path = folder_path.strip("/")
        try:
            check_store_name(folder_path)
        except StoreError:
            raise StoreError(f"invalid Drive folder {folder_path!r}: expected a path like ky_court") from None
        self.requests = DriveRequests(drive, backoff_base=backoff_base, backoff_cap=backoff_cap, max_tries=max_tries,
                                      sleep=sleep, writes_per_second=writes_per_second,
                                      multipart_limit=multipart_limit, insert_journal=insert_journal,
                                      pacer_state=pacer_state)
        self.drive = drive
        self.folder_path = folder_path
        self.description = f"Google Drive folder {folder_path}"
        self.deferred_uploads = deferred_uploads
        self.healer = DuplicateHealer(self.requests)
        self.packs = TextPacks(self)
        self._lock = threading.RLock()                       # one writer a name; the caches below
        self._folder_ids: dict[str, str | None] = {}        # Drive path -> id, None = known absent
        self._folder_names: dict[str, str] = {}             # folder id -> store folder ('' the root)
        self._listings: dict[str, dict[str, dict]] = {}     # folder id -> title -> entry (complete listing)
        self._listed_at: dict[str, float] = {}              # folder id -> when its listing was fetched

    @property
    def pacer(self):
        """The write pacer (DriveWritePacer), or None when writes are not paced."""
        return self.requests.pacer

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
            packed = self.packs.read(name, entry) if "pack" in entry else None
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if packed is not None:
            atomic_write(target, packed, temp=target.with_name(target.name + ".download"))
            return
        self.requests.download(name, entry, target)

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        md5, size = drive_md5_of_file(local_path)
        self._store(name, lambda: open(local_path, "rb"), md5, size)

    def remove(self, name: str) -> None:
        """files.delete of the file behind `name` (state the pipeline replaces only)."""
        folder, title = self._split(check_removable(name))
        with self._lock:
            folder_id = self._folder_id(folder, create=False)
            if folder_id is None:
                return
            entry = self._listing(folder_id).get(title) or self.requests.sent_file(name, folder_id, folder=False)
            if entry is None or "pack" in entry:
                return
            self.requests.delete(entry["id"], name)
            self._remember(folder_id, title, None)

    def upload_files(self, items: list[tuple[str, str | os.PathLike]]) -> None:
        """As `upload_file` each, except that two or more texts (`text/<sha256>.txt`) go into packs
        of up to TEXT_PACK_MEMBERS: one Drive file `text/pack-<sha256 of the zip>.zip` each, whose
        description indexes its members (so a folder listing knows every packed name)."""
        if self.text_pack_members < 2:
            super().upload_files(items)
            return
        texts = [(name, path) for name, path in items if self.packs.packable(name)]
        for name, path in items:
            if not self.packs.packable(name) or len(texts) < 2:
                self.upload_file(name, path)
        if len(texts) >= 2:
            with self._lock:
                self.packs.upload(texts)

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
                data = self.packs.read(name, entry)
                return hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest(), len(data)
        with tempfile.TemporaryDirectory(prefix="kycourt-drive-") as temp_dir:
            target = Path(temp_dir) / "content"
            self.requests.download(name, entry, target)
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
            query = (f"title = {drive_query_literal(title)} and {drive_query_literal(folder_id)} in parents"
                     " and trashed = false")
            items = self.requests.retrying(f"look up the copies of {name}", lambda: self.drive.ListFile({"q": query}).GetList())
        for item in items:
            if item.get("title") != title or item.get("id") == held or item.get("mimeType") == DRIVE_FOLDER_MIME:
                continue
            target = Path(folder) / item["id"]
            try:
                self.requests.download(name, drive_entry(item), target)
            except IntegrityError:
                continue
            yield target

    def assemble(self, name: str, workspace: str | os.PathLike) -> bytes | None:
        """A text pack made again (deterministically) from its members' workspace copies."""
        with self._lock:
            return self.packs.assemble(name, workspace)

    def replace_damaged(self, name: str, local_path: str | os.PathLike) -> None:
        """The good bytes over the file behind `name` (files.update: the damaged head is replaced, not
        kept as a revision), or a file of its own for a packed text (a loose file wins over its
        pack) or a missing name."""
        md5, size = drive_md5_of_file(local_path)
        folder, title = self._split(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=True)
            entry = self._listing(folder_id).get(title)
            mime_type = (entry or {}).get("mimeType") or drive_mime_type(title)

            def open_source():
                return open(local_path, "rb")
            if entry is None or "pack" in entry:
                body = {"title": title, "parents": [{"id": folder_id}], "mimeType": mime_type}
                stored, _ = self.requests.insert(name, f"store {name} again", body, open_source, size)
            else:
                stored = self.requests.update(name, entry, mime_type, open_source, size)
            self._remember(folder_id, title, stored)
            if stored.get("md5Checksum") and stored["md5Checksum"] != md5:
                raise IntegrityError(f"Drive stored {name} with md5 {stored['md5Checksum']}, "
                                     f"the local bytes have {md5}")

    def quota(self) -> dict | None:
        """{'used', 'total'} bytes from Drive About; None when Drive reports no limit."""
        about = self.requests.retrying("read the Drive quota", self.drive.GetAbout)
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
            return self.healer.report()

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
        query = f"{drive_query_literal(folder_id)} in parents and trashed = false"
        file_list = self.drive.ListFile({"q": query, "maxResults": DRIVE_PAGE_SIZE})
        by_title: dict[str, list[dict]] = {}
        subfolders: dict[str, list[dict]] = {}
        # One retry loop per page: pydrive2 keeps the page token, so a retry asks for the same page.
        while (page := self.requests.retrying("list a Drive folder", lambda: next(file_list, None))) is not None:
            for item in page:
                into = subfolders if item.get("mimeType") == DRIVE_FOLDER_MIME else by_title
                into.setdefault(item["title"], []).append(drive_entry(item))
        for title, copies in subfolders.items():
            if len(copies) > 1 and folder_id in self._folder_names:
                folder = self._folder_names[folder_id]
                kept = self._merge_folders(folder_id, title, copies)
                self._folder_ids[self._drive_path(f"{folder}/{title}" if folder else title)] = kept["id"]
        listing: dict[str, dict] = {}
        for title, copies in by_title.items():
            listing[title] = copies[0] if len(copies) == 1 else self.healer.heal(
                self._store_name(folder_id, title), copies, listing)
        self._add_unlisted(folder_id, listing)
        for entry in [entry for entry in listing.values() if entry["title"].startswith(TEXT_PACK_PREFIX)]:
            self.packs.index(listing, entry)
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
        self.healer.note(note)

    def _find(self, parent_id: str, title: str, *, folder: bool) -> dict | None:
        """The file (or folder) titled `title` in `parent_id`: asked by title (a title held twice
        healed), else, when Drive's listing may not show it yet, one of ours asked for by id."""
        query = (f"title = {drive_query_literal(title)} and {drive_query_literal(parent_id)} in parents"
                 f" and trashed = false")
        what = f"find Drive folder {title}" if folder else f"look up {self._store_name(parent_id, title)}"
        items = self.requests.retrying(what, lambda: self.drive.ListFile({"q": query}).GetList())   # pages through all
        # Title queries ignore case; Drive keeps it, and so do we.
        matches = [drive_entry(item) for item in items
                   if item.get("title") == title and (item.get("mimeType") == DRIVE_FOLDER_MIME) == folder]
        if len(matches) > 1:
            return self._merge_folders(parent_id, title, matches) if folder else \
                self.healer.heal(self._store_name(parent_id, title), matches, self._listings.get(parent_id))
        if matches or folder:
            return matches[0] if matches else None
        return self.requests.sent_file(self._store_name(parent_id, title), parent_id, folder=False)

    def _merge_folders(self, parent_id: str, title: str, copies: list[dict]) -> dict:
        kept = self.healer.merge_folders(self._store_name(parent_id, title) + "/", copies)
        self._listings.pop(kept["id"], None)     # it holds more now
        return kept

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
        found = self._find(parent_id, title, folder=True) or self.requests.sent_file(drive_path + "/", parent_id, folder=True)
        if found is not None or not create:
            return found and found["id"]
        log_drive.info("creating Drive folder %s in %s", title, parent_id)
        created, _ = self.requests.insert(drive_path + "/", f"create Drive folder {drive_path}",
                                  {"title": title, "mimeType": DRIVE_FOLDER_MIME, "parents": [{"id": parent_id}]})
        self._listings[created["id"]] = {}   # a new folder is empty: its listing is known
        self._listed_at[created["id"]] = time.monotonic()
        return created["id"]

    # ------------------------------------------------- files Drive does not list yet

    def _add_unlisted(self, folder_id: str, listing: dict[str, dict]) -> None:
        """Files a fresh listing of `folder_id` lacks though an insert of ours sent them lately (Drive
        lists new files late), asked for by id."""
        folder = self._folder_names.get(folder_id)
        for key in sorted({key for _, key, _ in self.requests.recent_inserts() if not key.endswith("/")}):
            key_folder, title = self._split(key)
            if key_folder == folder and title not in listing:
                found = self.requests.sent_file(key, folder_id, folder=False)
                if found is not None:
                    listing[title] = found

    # -------------------------------------------------------------- writes

    def _store(self, name: str, open_source: Callable[[], Any], md5: str, size: int, *,
               description: str | None = None) -> None:
        folder, title = self._split(name)
        content_addressed = is_content_addressed(name)
        with self._lock:
            folder_id = self._folder_id(folder, create=True)     # no request once the folder is known
            # A complete listing, kept current by our own writes: no files.list per upload
            # (one per PDF and per text otherwise, ~200k requests at full scale).
            existing = self._listing(folder_id).get(title) or self.requests.sent_file(name, folder_id, folder=False)
            if existing is not None and content_addressed:
                _drive_check_same(name, existing, md5, size)
                return
            mime_type = (existing or {}).get("mimeType") or drive_mime_type(title)
            if existing is None:
                body = {"title": title, "parents": [{"id": folder_id}], "mimeType": mime_type}
                if description is not None:
                    body["description"] = description
                stored, earlier = self.requests.insert(name, f"upload {name}", body, open_source, size)
                if earlier and (stored.get("md5Checksum") != md5 or int(stored.get("fileSize", -1)) != size):
                    # Held under our id with other bytes: an earlier write of a rewritten name.
                    if content_addressed:
                        _drive_check_same(name, stored, md5, size)
                    stored = self.requests.update(name, stored, mime_type, open_source, size)
            else:
                stored = self.requests.update(name, existing, mime_type, open_source, size)
            self._remember(folder_id, title, stored)
            if description is not None and folder_id in self._listings:
                self.packs.index(self._listings[folder_id], stored)
            if stored.get("md5Checksum") and stored["md5Checksum"] != md5:
                raise IntegrityError(f"Drive stored {name} with md5 {stored['md5Checksum']}, "
                                     f"the local bytes have {md5}")


# ------------------------------------------------------------ Colab auth


def open_drive_store(cfg, *, sleep: Callable[[float], Any] = time.sleep) -> DriveStore:
    """The DriveStore for cfg.DRIVE_FOLDER, authenticated as the Colab user (or, with
    cfg.DRIVE_API set, at that test endpoint). `sleep`: the run clock's interruptible sleep.

    Raises StoreError outside Colab without DRIVE_API, or when the user does not authorise.
    """
    options = dict(backoff_base=cfg.BACKOFF_BASE, backoff_cap=cfg.BACKOFF_CAP, sleep=sleep,
                   writes_per_second=cfg.DRIVE_WRITES_PER_SECOND,
                   insert_journal=Path(cfg.WORKSPACE) / INSERT_JOURNAL, pacer_state=Path(cfg.WORKSPACE) / PACER_STATE)
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
