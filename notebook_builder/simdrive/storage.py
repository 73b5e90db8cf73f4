"""What the simulated Drive stores, and for how long: revisions on a clock, and what it holds.

Guarantees (Google's "Manage file revisions" guide and Drive v2's reference):
- `RevisionStore`: every blob file holds revisions, the last its head (what files.get describes and
  alt=media reads). An upload makes a new head and keeps the old one as an earlier revision, unless
  `new_revision=False` (v2's `newRevision=false`): then the head's bytes are replaced, nothing kept.
- An earlier revision not pinned is purged `REVISION_DAYS` (30) days of the clock after newer
  content was uploaded, or at once when an upload leaves its file more than `MAX_UNPINNED` (100)
  unpinned revisions (the oldest first). The head is never purged; a pinned revision stays until it
  is unpinned or deleted; a file has at most `MAX_PINNED` (200) pinned (`TooManyPinned`).
- `delete` of a revision refuses a file's last one (`LastRevision`); deleting the head makes the
  revision before it the head. Only `drop` (the file deleted for good) frees a file's bytes: a
  trashed file's revisions count in `bytes_held` as any other's.
- A revision holds its bytes, or only their size and md5 (`data=None`: metadata only, a store at
  the real record's scale); reading those is `MetadataOnly`. `metadata_only_match` says which
  names the simulated Drive's `metadata_only` switch keeps so. `RevisionStore(keep_earlier_bytes=
  False)` keeps only the size and md5 of a revision once newer content supersedes it (a year of a
  large file's revisions need not sit in memory); it counts in `bytes_held` all the same.
- `DriveClock`: the simulated Drive's "now" (modifiedDate, expiry): a callable of epoch seconds
  (`time.time` unless given) plus what `advance` added; its stamps (RFC 3339, milliseconds)
  strictly increase, so creation order is the order of createdDate.
- `DriveHolding` (SimDrive.held()): per file its head bytes, earlier revisions and their bytes,
  whether it is in the trash; totals, groups and a one-line summary. `UploadTally`: uploads and
  their bytes by stored name.
"""
from __future__ import annotations

import datetime as _dt
import heapq
import itertools
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

REVISION_DAYS = 30
MAX_UNPINNED = 100
MAX_PINNED = 200
DAY_SECONDS = 86_400.0
MEGABYTE = 1_000_000


class StorageRefusal(Exception):
    """A request Drive refuses; `status` and `reason` are its answer."""

    status = 400
    reason = "badRequest"


class RevisionNotFound(StorageRefusal):
    status, reason = 404, "notFound"


class LastRevision(StorageRefusal):
    status, reason = 403, "cannotDeleteLastRevision"


class TooManyPinned(StorageRefusal):
    status, reason = 403, "tooManyPinnedRevisions"


class MetadataOnly(StorageRefusal):
    status, reason = 400, "simulatedMetadataOnly"


def metadata_only_match(path: str, prefixes: Iterable[str]) -> bool:
    """Whether `path` ('ky_court/pdf_by_hash/x.pdf') begins, at My Drive or at any folder on it, with
    one of `prefixes` ('pdf_by_hash/', 'ky_court/text/')."""
    padded = "/" + path
    return any("/" + prefix.lstrip("/") in padded for prefix in prefixes)


class DriveClock:
    """The simulated Drive's now: `source()` (epoch seconds) plus what `advance` added."""

    def __init__(self, source: Callable[[], float] | None = None):
        self.source = source or time.time
        self.offset = 0.0
        self._last_ms = -1

    def now(self) -> float:
        return self.source() + self.offset

    def advance(self, *, days: float = 0.0, hours: float = 0.0, seconds: float = 0.0) -> float:
        """Moves now on (never back); answers the new now."""
        step = days * DAY_SECONDS + hours * 3600.0 + seconds
        if step < 0:
            raise ValueError(f"the simulated Drive's clock only moves on, not back ({step:g} s)")
        self.offset += step
        return self.now()

    def stamp(self) -> tuple[float, str]:
        """(now, its RFC 3339 stamp), each later than the last one handed out."""
        milliseconds = max(int(self.now() * 1000), self._last_ms + 1)
        self._last_ms = milliseconds
        return milliseconds / 1000, rfc3339(milliseconds / 1000)


def rfc3339(epoch_seconds: float) -> str:
    moment = _dt.datetime.fromtimestamp(epoch_seconds, _dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(eq=False)
class Revision:
    id: str
    size: int
    md5: str
    data: bytes | None               # None: metadata only
    uploaded: float                  # the clock's epoch seconds
    modified_date: str
    mime_type: str
    original_filename: str
    pinned: bool = False
    superseded: float | None = None  # when newer content was uploaded; None while the head

    def resource(self, file_id: str, api_root: str | None) -> dict:
        """The v2 `drive#revision` resource."""
        resource = {"kind": "drive#revision", "id": self.id, "mimeType": self.mime_type,
                    "modifiedDate": self.modified_date, "pinned": self.pinned, "published": False,
                    "fileSize": str(self.size), "md5Checksum": self.md5, "originalFilename": self.original_filename}
        if api_root:
            base = f"{api_root.rstrip('/')}/drive/v2/files/{file_id}"
            resource["selfLink"] = f"{base}/revisions/{self.id}"
            resource["downloadUrl"] = f"{base}?alt=media&revisionId={self.id}"
        return resource


class RevisionStore:
    """Every file's revisions, oldest first; the bytes they hold; their purge on the clock."""

    def __init__(self, clock: DriveClock, *, keep_earlier_bytes: bool = True):
        self.clock = clock
        self.keep_earlier_bytes = keep_earlier_bytes
        self._by_file: dict[str, list[Revision]] = {}
        self._due: list[tuple[float, int, str, str]] = []   # heap: (purged at, order, file id, revision id)
        self._order = itertools.count()
        self._ids = itertools.count(1)
        self.bytes_held = 0
        self.purged: Counter = Counter()          # revisions purged: "30 days", "100 revisions"
        self.purged_bytes: Counter = Counter()

    def of(self, file_id: str) -> list[Revision]:
        return list(self._by_file.get(file_id, ()))

    def head(self, file_id: str) -> Revision | None:
        revisions = self._by_file.get(file_id)
        return revisions[-1] if revisions else None

    def get(self, file_id: str, revision_id: str) -> Revision:
        for revision in self._by_file.get(file_id, ()):
            if revision.id == revision_id:
                return revision
        raise RevisionNotFound(f"Revision not found: {revision_id}")

    def upload(self, file_id: str, data: bytes | None, *, size: int, md5: str, mime_type: str, title: str,
               new_revision: bool = True, pinned: bool = False) -> Revision:
        """New content for `file_id`: a new head (the old one kept), or the head's bytes replaced."""
        revisions = self._by_file.setdefault(file_id, [])
        head = revisions[-1] if revisions else None
        if pinned and new_revision and sum(r.pinned for r in revisions) >= MAX_PINNED:
            raise TooManyPinned(f"A file can have at most {MAX_PINNED} pinned revisions.")
        uploaded, stamp = self.clock.stamp()
        if head is not None and not new_revision:
            self.bytes_held += size - head.size
            head.size, head.md5, head.data, head.uploaded, head.modified_date = size, md5, data, uploaded, stamp
            head.mime_type, head.original_filename, head.pinned = mime_type, title, head.pinned or pinned
            return head
        revision = Revision(f"R{next(self._ids):07d}", size, md5, data, uploaded, stamp, mime_type, title, pinned)
        revisions.append(revision)
        self.bytes_held += size
        if head is not None:
            self._supersede(file_id, head, uploaded)
            unpinned = [r for r in revisions[:-1] if not r.pinned]
            excess = len(unpinned) + (not revision.pinned) - MAX_UNPINNED
            for old in unpinned[:max(0, excess)]:
                self._purge(file_id, old, "100 revisions")
        return revision

    def delete(self, file_id: str, revision_id: str) -> Revision:
        """revisions.delete; answers the file's head after it."""
        revision = self.get(file_id, revision_id)
        revisions = self._by_file[file_id]
        if len(revisions) == 1:
            raise LastRevision("The last remaining revision of a file cannot be deleted.")
        self._remove(file_id, revision)
        revisions[-1].superseded = None
        return revisions[-1]

    def set_pinned(self, file_id: str, revision_id: str, pinned: bool) -> Revision:
        revision = self.get(file_id, revision_id)
        if pinned and not revision.pinned and sum(r.pinned for r in self._by_file[file_id]) >= MAX_PINNED:
            raise TooManyPinned(f"A file can have at most {MAX_PINNED} pinned revisions.")
        revision.pinned = pinned
        if not pinned and revision.superseded is not None:
            self._schedule(file_id, revision)
        return revision

    def drop(self, file_id: str) -> int:
        """Every revision of a file deleted for good; answers the bytes freed."""
        freed = sum(revision.size for revision in self._by_file.pop(file_id, ()))
        self.bytes_held -= freed
        return freed

    def expire(self) -> int:
        """Purges the earlier revisions whose 30 days have passed; answers how many."""
        now, purged = self.clock.now(), 0
        while self._due and self._due[0][0] <= now:
            due, _, file_id, revision_id = heapq.heappop(self._due)
            revision = next((r for r in self._by_file.get(file_id, ()) if r.id == revision_id), None)
            if (revision is None or revision.pinned or revision.superseded is None
                    or revision.superseded + REVISION_DAYS * DAY_SECONDS != due):
                continue                          # deleted, pinned, the head again, or superseded anew
            self._purge(file_id, revision, "30 days")
            purged += 1
        return purged

    def _supersede(self, file_id: str, revision: Revision, when: float) -> None:
        revision.superseded = when
        if not self.keep_earlier_bytes:
            revision.data = None
        if not revision.pinned:
            self._schedule(file_id, revision)

    def _schedule(self, file_id: str, revision: Revision) -> None:
        due = revision.superseded + REVISION_DAYS * DAY_SECONDS
        heapq.heappush(self._due, (due, next(self._order), file_id, revision.id))

    def _purge(self, file_id: str, revision: Revision, why: str) -> None:
        self._remove(file_id, revision)
        self.purged[why] += 1
        self.purged_bytes[why] += revision.size

    def _remove(self, file_id: str, revision: Revision) -> None:
        self._by_file[file_id].remove(revision)
        self.bytes_held -= revision.size


@dataclass(frozen=True)
class HeldFile:
    path: str                       # from My Drive: 'ky_court/pdf_by_hash/<sha256>.pdf'
    file_id: str
    head_bytes: int
    earlier_revisions: int
    earlier_bytes: int
    pinned_revisions: int
    trashed: bool                   # in the trash, or in a folder that is

    @property
    def total_bytes(self) -> int:
        return self.head_bytes + self.earlier_bytes


@dataclass(frozen=True)
class DriveHolding:
    """What the simulated Drive holds of every file (folders hold no bytes): all of it counts in
    the quota, trashed files and earlier revisions too."""

    files: tuple[HeldFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(held.total_bytes for held in self.files)

    @property
    def head_bytes(self) -> int:
        return sum(held.head_bytes for held in self.files)

    @property
    def earlier_bytes(self) -> int:
        return sum(held.earlier_bytes for held in self.files)

    @property
    def earlier_revisions(self) -> int:
        return sum(held.earlier_revisions for held in self.files)

    @property
    def trashed_bytes(self) -> int:
        return sum(held.total_bytes for held in self.files if held.trashed)

    def by(self, group: Callable[[str], str | None]) -> dict[str, DriveHolding]:
        """The holding split by `group(path)` (files it answers None for are left out)."""
        groups: dict[str, list[HeldFile]] = {}
        for held in self.files:
            key = group(held.path)
            if key is not None:
                groups.setdefault(key, []).append(held)
        return {key: DriveHolding(tuple(files)) for key, files in groups.items()}

    def summary(self) -> str:
        """'Drive holds 12.3 MB in 40 files, of it 4.1 MB in 37 earlier revisions; 0.0 MB in the trash'."""
        return (f"Drive holds {self.total_bytes / MEGABYTE:.1f} MB in {len(self.files)} files, of it "
                f"{self.earlier_bytes / MEGABYTE:.1f} MB in {self.earlier_revisions} earlier revisions; "
                f"{self.trashed_bytes / MEGABYTE:.1f} MB in the trash")


class UploadTally:
    """Contents committed by uploads (inserts and updates with bytes), by stored name at the time."""

    def __init__(self):
        self.count: Counter = Counter()
        self.bytes: Counter = Counter()

    def add(self, path: str, size: int) -> None:
        self.count[path] += 1
        self.bytes[path] += size

    def by(self, group: Callable[[str], str | None]) -> dict[str, tuple[int, int]]:
        """(uploads, bytes) by `group(path)` (names it answers None for are left out)."""
        totals: dict[str, tuple[int, int]] = {}
        for path, count in self.count.items():
            key = group(path)
            if key is not None:
                uploads, size = totals.get(key, (0, 0))
                totals[key] = (uploads + count, size + self.bytes[path])
        return totals
