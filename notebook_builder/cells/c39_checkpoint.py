"""Checkpoints, the download journal and resume points: the state a new runtime resumes from.

Guarantees:
- `push_checkpoint(ctx)` writes a consistent database snapshot (c17 `checkpoint`) and sends the
  store the pages that changed since the state it holds (c22 page packs under `db/ky_court/`); once
  the store holds that state the database notes it (`record_store_checkpoint`, which never moves
  backwards), the download journals of earlier snapshots and an earlier version's whole
  `ky_court.sqlite` are removed, and the download journal follows it. `snapshot_lock` lets one thread
  of one process at a time do so in a workspace (a `verify` beside a run takes its turn). Before the
  first snapshot reaches the store, the legacy originals are in it (c38 `keep_legacy_originals`): a
  v1.2 database there is never removed before it is kept under legacy/.
- `push_journal(ctx)` uploads the download journal (`journal/downloads-after-<seq>.jsonl`: the
  documents committed downloaded since snapshot <seq>, the newest the store holds, was taken), so a
  fresh runtime that restores that snapshot does not ask the court again for those whose PDFs the
  store holds (restore replays it). "Since" is by checkpoint_seq, stamped on each row in its own
  commit, not by clock. The store's journal is rewritten in place (no revisions pile up).
- `Checkpointer` pushes a checkpoint every CHECKPOINT_SECONDS from a background thread while the
  stages commit, and the journal every JOURNAL_SECONDS in between; a failure is logged, never kills
  the run.
- Resume points: `write_resume_archive(ctx, pushed)` uploads
  `ky_court-WIP-resume-<UTC yyyymmddTHHMMSSZ>-<seq>.tar.gz` (status.json and resume.json: the
  checkpoint's sequence and time, verify's verdict and the page packs of its state), never
  overwriting one. The store then keeps the RESUME_KEEP_LAST newest, the newest of each of the
  RESUME_KEEP_MONTHS newest months and the newest that passed verify (`resume_points_to_keep`, as
  restic's forget); the others are removed, and the packs no kept point or the newest state names
  with them. An archive of an earlier version (its database whole inside) is a point like the
  others; a v1.2 archive (no sequence in its name) is never removed. Restore (c40) reads every form.

Knobs read: CHECKPOINT_SECONDS, JOURNAL_SECONDS.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import io
import json
import logging
import re
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .c00_config import IntegrityError, StoreError
from .c05_durable import durable_write
from .c06_layout import (DB_FILENAME, RESUME_ARCHIVE_PREFIX, RESUME_ARCHIVE_SUFFIX, STATUS_FILENAME,
                         journal_sequence, journal_store_name)
from .c10_database import KV_STORE_CHECKPOINT_SEQ
from .c17_snapshots import checkpoint, journal_rows, record_store_checkpoint, snapshot_sequence
from .c22_page_packs import PagePacks, PushResult, StaleState
from .c35_context import Context, write_status
from .c38_legacy import keep_legacy_originals

log_checkpoint = logging.getLogger("kycourt.checkpoint")

SNAPSHOT_LOCK = "checkpoint/snapshot.lock"
RESUME_POINTS = "checkpoint/resume_points.json"   # what each resume archive of the store names (a cache)
RESUME_MANIFEST = "resume.json"                   # the member of a resume archive that names its state
RESUME_FORMAT = "kycourt-resume/2"
RESUME_KEEP_LAST = 3
RESUME_KEEP_MONTHS = 3
QUOTA_MAX_AGE = 600.0            # seconds a checkpoint takes the store's quota as known (verify asks afresh)
_RESUME_NAME = re.compile(re.escape(RESUME_ARCHIVE_PREFIX) + r"(\d{8}T\d{6}Z)-(\d+)" + re.escape(RESUME_ARCHIVE_SUFFIX))


def resume_archive_name(taken_at: _dt.datetime, checkpoint_seq: int) -> str:
    stamp = taken_at.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{RESUME_ARCHIVE_PREFIX}{stamp}-{checkpoint_seq}{RESUME_ARCHIVE_SUFFIX}"


def database_packs(ctx: Context) -> PagePacks:
    """The store's page packs of the workspace's database (c22)."""
    return PagePacks(ctx.store, DB_FILENAME, ctx.path("checkpoint"))


@contextlib.contextmanager
def snapshot_lock(ctx: Context):
    """Held while the workspace's snapshot file is written and mirrored: by one thread of this
    process (the checkpointer's, verify's) and by no other process working in the workspace (a
    `verify` in a second terminal beside a run). A POSIX lock, which a forked worker does not
    inherit, so a pool forked while it is held never keeps it. The thread holding it may take it
    again (verify holds it from its push to its resume point's retention)."""
    with ctx.checkpoint_lock:
        if ctx.snapshot_locked:                    # this thread holds it already (verify's push and point)
            yield
            return
        path = ctx.path(SNAPSHOT_LOCK)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:            # once: closing any descriptor of it drops the lock
            fcntl.lockf(handle, fcntl.LOCK_EX)
            ctx.snapshot_locked = True
            try:
                yield
            finally:
                ctx.snapshot_locked = False


def push_checkpoint(ctx: Context) -> dict[str, Any] | None:
    """Snapshot the database and send the store the pages that changed (see the module docstring).
    The result says whether the store holds the snapshot (`uploaded`) and, when it does, the state's
    packs (`pushed`, a c22 PushResult)."""
    if ctx.db is None:
        return None
    snapshot = ctx.path("checkpoint") / DB_FILENAME
    with snapshot_lock(ctx):
        info = checkpoint(ctx.db_path, snapshot)
        pushed = None
        previous = int(ctx.db.kv_get(KV_STORE_CHECKPOINT_SEQ, "0") or 0)
        # An older version's database in the store is kept under legacy/ before anything replaces it.
        if keep_legacy_originals(ctx):
            try:
                # Pins unknown (the store's resume points cannot be read now): nothing is removed.
                pushed = ctx.mirror.push_pages(
                    database_packs(ctx), snapshot, sequence=info["checkpoint_seq"], check_held=not ctx.pages_checked,
                    pinned=resume_pins(ctx),
                    extra={"checkpoint_seq": info["checkpoint_seq"], "checkpoint_at": info["checkpoint_at"]})
            except StaleState as exc:
                info["stale"] = str(exc)
                log_checkpoint.error("checkpoint not sent: %s", exc)
            ctx.pages_checked = ctx.pages_checked or pushed is not None
        info["uploaded"] = pushed is not None
        info["pushed"] = pushed
        if pushed is not None:
            # The download journal follows the newest snapshot the store holds: after a failed
            # upload it keeps following the one before, so no download falls between the two.
            record_store_checkpoint(ctx.db_path, info["checkpoint_seq"])
            _remove_superseded(ctx, previous, info["checkpoint_seq"])
    ctx.refresh_quota(max_age=QUOTA_MAX_AGE)
    return info


def _remove_superseded(ctx: Context, previous: int, sequence: int) -> None:
    """The journal of the snapshot before (`previous`); once a context, every older journal the store
    lists and an earlier version's whole database: the store's state supersedes them."""
    names = [journal_store_name(previous)] if 0 < previous < sequence else []
    if not ctx.journals_swept:
        try:
            names += [name for name in ctx.store.list_dir("journal") if (journal_sequence(name) or sequence) < sequence]
            if ctx.store.exists(DB_FILENAME):
                names.append(DB_FILENAME)
            ctx.journals_swept = True
        except StoreError as exc:
            log_checkpoint.warning("cannot list the journals the store's state supersedes: %s", exc)
    for name in dict.fromkeys(names):
        ctx.mirror.remove(name)


def push_journal(ctx: Context) -> int:
    """Uploads the download journal of the current checkpoint when it changed; returns how
    many documents it lists (0: none since the snapshot, or no snapshot yet)."""
    if ctx.db is None:
        return 0
    with snapshot_lock(ctx):
        sequence, rows = journal_rows(ctx.db_path)
        if not rows:
            return 0
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        if ctx.journal_pushed == (sequence, hash(text)):
            return len(rows)
        path = ctx.path("checkpoint") / "journal.jsonl"
        durable_write(path, text.encode("utf-8"))
        if ctx.mirror.put(journal_store_name(sequence), path, mutable=True):
            ctx.journal_pushed = (sequence, hash(text))
    return len(rows)


class Checkpointer:
    """Background thread: a database checkpoint to the store every CHECKPOINT_SECONDS, and the
    download journal every JOURNAL_SECONDS in between."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.count = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="checkpointer", daemon=True)

    def __enter__(self) -> "Checkpointer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join()  # a checkpoint in flight finishes; push_checkpoint's lock orders the next

    def _loop(self) -> None:
        cfg = self.ctx.cfg
        next_checkpoint = time.monotonic() + cfg.CHECKPOINT_SECONDS
        while not self._stop.wait(max(0.0, min(cfg.JOURNAL_SECONDS, next_checkpoint - time.monotonic()))):
            try:
                if time.monotonic() >= next_checkpoint:
                    next_checkpoint = time.monotonic() + cfg.CHECKPOINT_SECONDS
                    push_checkpoint(self.ctx)
                    self.count += 1
                else:
                    push_journal(self.ctx)
            except Exception as exc:  # a failed checkpoint or journal must never kill the run
                self.errors.append(str(exc))
                log_checkpoint.warning("background checkpoint failed: %s", exc)


# ---------------------------------------------------------------- resume points


@dataclass
class ResumePoint:
    """A resume archive of the store: its name, when it was taken (the name's stamp), its state's
    sequence, whether verify passed, and the page packs it names ([] for a whole database inside)."""
    name: str
    taken: str
    seq: int
    good: bool = False
    packs: list[str] = field(default_factory=list)


def resume_point_of(name: str) -> tuple[str, int] | None:
    """(stamp, sequence) of a resume archive this pipeline wrote; None for any other name (a v1.2
    archive's has no sequence: it is never removed)."""
    found = _RESUME_NAME.fullmatch(name)
    return (found.group(1), int(found.group(2))) if found else None


def resume_points_to_keep(points: list[ResumePoint], *, last: int = RESUME_KEEP_LAST,
                          months: int = RESUME_KEEP_MONTHS) -> set[str]:
    """The resume points to keep (restic's forget): the `last` newest, the newest of each of the
    `months` newest months, and the newest that passed verify."""
    ordered = sorted(points, key=lambda point: (point.seq, point.taken), reverse=True)
    keep = {point.name for point in ordered[:last]}
    seen: list[str] = []
    for point in ordered:
        month = point.taken[:6]
        if month in seen:
            continue
        if len(seen) == months:
            break
        seen.append(month)
        keep.add(point.name)
    good = next((point for point in ordered if point.good), None)
    if good is not None:
        keep.add(good.name)
    return keep


def _load_points(ctx: Context) -> dict[str, dict] | None:
    """The cache of what the store's resume points name; None when there is none (or it is unreadable)."""
    try:
        cached = json.loads(ctx.path(RESUME_POINTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cached if isinstance(cached, dict) else None


def resume_points(ctx: Context) -> list[ResumePoint] | None:
    """The store's resume points (of this pipeline's writing), each read once for what it names
    (kept in checkpoint/resume_points.json); None when the store cannot be listed or an archive
    cannot be read (nothing may then be removed)."""
    loaded = _load_points(ctx)
    cached = loaded or {}
    try:
        names = [name for name in ctx.store.list_dir("") if resume_point_of(name) is not None]
    except StoreError as exc:
        log_checkpoint.warning("cannot list the store's resume archives: %s", exc)
        return None
    points = []
    changed = False
    for name in names:
        if name not in cached:
            try:
                cached[name] = _read_point(ctx, name)
            except IntegrityError as exc:      # a damaged archive resumes nothing: a point of no packs
                log_checkpoint.warning("resume archive %s is unreadable: %s", name, exc)
                cached[name] = {"packs": [], "good": False, "unreadable": str(exc)}
            except StoreError as exc:
                log_checkpoint.warning("cannot read resume archive %s: %s", name, exc)
                return None
            changed = True
        stamp, seq = resume_point_of(name)
        entry = cached[name]
        points.append(ResumePoint(name, stamp, seq, bool(entry.get("good")), list(entry.get("packs") or [])))
    if loaded is None or changed or set(cached) - set(names):
        _save_points(ctx, {name: cached[name] for name in names})
    return points


def _read_point(ctx: Context, name: str) -> dict:
    """What a resume archive names: its packs and whether verify passed (its status.json)."""
    with tempfile.TemporaryDirectory(prefix=".resume-", dir=ctx.path("checkpoint")) as temp:
        local = Path(temp) / "archive.tar.gz"
        ctx.store.download_file(name, local)
        try:
            with tarfile.open(local, "r:gz") as tar:
                members = {member.name: member for member in tar.getmembers() if member.isreg()}
                entry: dict[str, Any] = {"packs": [], "good": False}
                if RESUME_MANIFEST in members:
                    manifest = json.loads(tar.extractfile(members[RESUME_MANIFEST]).read())
                    entry["packs"] = list(manifest.get("packs") or [])
                    entry["good"] = manifest.get("verify") == "PASS"
                elif STATUS_FILENAME in members:
                    status = json.loads(tar.extractfile(members[STATUS_FILENAME]).read())
                    entry["good"] = isinstance(status, dict) and status.get("verify") == "PASS"
                return entry
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise IntegrityError(f"unreadable: {exc}") from None


def resume_pins(ctx: Context) -> set[str] | None:
    """The packs the store's resume points name (never removed while those points are kept): the
    store listed once a context, then what this process wrote and removed; None when they cannot all
    be read."""
    cached = _load_points(ctx) if ctx.resume_points_read else None
    if cached is None:
        points = resume_points(ctx)
        if points is None:
            return None
        ctx.resume_points_read = True
        return {pack for point in points for pack in point.packs}
    return {pack for entry in cached.values() for pack in entry.get("packs") or []}


def _save_points(ctx: Context, points: dict[str, dict]) -> None:
    durable_write(ctx.path(RESUME_POINTS), json.dumps(points, sort_keys=True).encode("utf-8"))


def write_resume_archive(ctx: Context, checkpoint_info: dict[str, Any] | None = None) -> str:
    """Writes and uploads a resume archive naming the state the store holds (status.json and
    resume.json); then applies the retention (see the module docstring). Returns its store name.

    `checkpoint_info` is a `push_checkpoint` the caller just made (verify passes its own); without
    it one is pushed first. When the store does not hold that state the archive is not written
    (IntegrityError): a resume point never names packs the store may lack."""
    with snapshot_lock(ctx):       # no push of another thread or process drops a pack this point names
        return _write_resume_archive(ctx, checkpoint_info)


def _write_resume_archive(ctx: Context, checkpoint_info: dict[str, Any] | None) -> str:
    if checkpoint_info is None:
        if ctx.db is None:
            raise IntegrityError("write_resume_archive needs an open database")
        checkpoint_info = push_checkpoint(ctx)
    pushed: PushResult | None = checkpoint_info.get("pushed")
    if pushed is None:
        raise IntegrityError("the store does not hold the checkpoint: no resume point names it")
    sequence, taken_at = snapshot_sequence(checkpoint_info["path"])
    status_path = ctx.path(STATUS_FILENAME)
    if not status_path.is_file():
        write_status(ctx)
    status = json.loads(status_path.read_text(encoding="utf-8"))
    manifest = {"format": RESUME_FORMAT, "database": DB_FILENAME, "checkpoint_seq": sequence,
                "checkpoint_at": taken_at, "verify": status.get("verify"), "manifest": pushed.manifest,
                "packs": pushed.packs}
    name = resume_archive_name(_dt.datetime.now(_dt.timezone.utc), sequence)
    archive = ctx.path("checkpoint") / name

    def write_tar(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as tar:
            for member_name, data in ((STATUS_FILENAME, status_path.read_bytes()),
                                      (RESUME_MANIFEST, json.dumps(manifest, sort_keys=True).encode("utf-8"))):
                info = tarfile.TarInfo(member_name)
                info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
                tar.addfile(info, io.BytesIO(data))
    durable_write(archive, write_tar)
    # Sent now or never: a point queued for later could name packs a later push has dropped by then.
    held = ctx.mirror.put(name, archive, mutable=True)
    archive.unlink(missing_ok=True)
    if held:
        cached = _load_points(ctx) or {}
        cached[name] = {"packs": pushed.packs, "good": manifest["verify"] == "PASS"}
        _save_points(ctx, cached)
        forget_resume_points(ctx)
    else:
        log_checkpoint.warning("resume archive %s not written: the store refused it (%s)", name, ctx.mirror.lagging)
    return name


def forget_resume_points(ctx: Context) -> list[str]:
    """Removes the resume points the retention does not keep, then the packs that neither a kept
    point nor the store's newest state (the workspace's page table) names. Returns the points removed."""
    with snapshot_lock(ctx):
        points = resume_points(ctx)
        if points is None:
            return []
        keep = resume_points_to_keep(points)
        removed = [point.name for point in points if point.name not in keep and ctx.mirror.remove(point.name)]
        cached = _load_points(ctx) or {}
        _save_points(ctx, {name: entry for name, entry in cached.items() if name not in removed})
        ctx.resume_points_read = True
        newest = database_packs(ctx).state()
        if newest:
            needed = set(newest) | {pack for point in points if point.name not in removed for pack in point.packs}
            ctx.mirror.prune_pages(database_packs(ctx), needed)
    if removed:
        log_checkpoint.info("removed %d resume points the retention does not keep: %s", len(removed),
                            ", ".join(removed))
    return removed
