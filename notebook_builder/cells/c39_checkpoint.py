"""Checkpoints, the download journal and resume archives: the state a new runtime resumes from.

Guarantees:
- `push_checkpoint(ctx)` writes a consistent database snapshot (c10
  `checkpoint`) and mirrors it as the store's ky_court.sqlite; once the store
  holds it, the database notes it (`record_store_checkpoint`, which never
  moves backwards), and the download journal follows it; `snapshot_lock`
  lets one thread of one process at a time do so in a workspace (a
  `verify` beside a run takes its turn). Before the first
  snapshot of a database replaces the store's ky_court.sqlite, the legacy
  originals are in the store (c38 `keep_legacy_originals`): a v1.2 database
  there is never overwritten before it is kept under legacy/.
- `push_journal(ctx)` uploads the download journal
  (`journal/downloads-after-<seq>.jsonl`: the documents committed downloaded
  since snapshot <seq>, the newest the store holds, was taken), so a fresh
  runtime that restores that snapshot does not ask the court again for those
  whose PDFs the store holds (restore replays it). "Since" is by
  checkpoint_seq, stamped on each row in its own commit, not by clock.
- `Checkpointer` pushes a checkpoint every CHECKPOINT_SECONDS from a
  background thread while the stages commit, and the journal every
  JOURNAL_SECONDS in between; a failure is logged, never kills the run.
- Resume archives: `write_resume_archive()` writes a fresh checkpoint plus
  status.json as `ky_court-WIP-resume-<UTC yyyymmddTHHMMSSZ>-<seq>.tar.gz`,
  uploaded without ever overwriting; older archives are kept. Restore (c40)
  reads the same format, named by the same functions.

Knobs read: CHECKPOINT_SECONDS, JOURNAL_SECONDS.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from .c00_config import IntegrityError
from .c05_durable import durable_write
from .c06_layout import DB_FILENAME, STATUS_FILENAME
from .c17_snapshots import checkpoint, journal_rows, record_store_checkpoint, snapshot_sequence
from .c35_context import Context, write_status
from .c38_legacy import keep_legacy_originals

log_checkpoint = logging.getLogger("kycourt.checkpoint")

JOURNAL_PREFIX = "journal/downloads-after-"
JOURNAL_SUFFIX = ".jsonl"
RESUME_ARCHIVE_PREFIX = "ky_court-WIP-resume-"
RESUME_ARCHIVE_SUFFIX = ".tar.gz"
SNAPSHOT_LOCK = "checkpoint/snapshot.lock"


def journal_store_name(checkpoint_seq: int) -> str:
    """The download journal that follows snapshot `checkpoint_seq`."""
    return f"{JOURNAL_PREFIX}{checkpoint_seq}{JOURNAL_SUFFIX}"


def journal_sequence(name: str) -> int | None:
    """The checkpoint a journal's store name follows, or None if it names no journal."""
    if not (name.startswith(JOURNAL_PREFIX) and name.endswith(JOURNAL_SUFFIX)):
        return None
    number = name[len(JOURNAL_PREFIX):-len(JOURNAL_SUFFIX)]
    return int(number) if number.isdigit() else None


def is_resume_archive_name(name: str) -> bool:
    return (name.startswith(RESUME_ARCHIVE_PREFIX) and name.endswith(RESUME_ARCHIVE_SUFFIX)
            and "/" not in name)


def resume_archive_name(taken_at: _dt.datetime, checkpoint_seq: int) -> str:
    stamp = taken_at.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{RESUME_ARCHIVE_PREFIX}{stamp}-{checkpoint_seq}{RESUME_ARCHIVE_SUFFIX}"


@contextlib.contextmanager
def snapshot_lock(ctx: Context):
    """Held while the workspace's snapshot file is written and mirrored: by one thread of this
    process (the checkpointer's, verify's) and by no other process working in the workspace (a
    `verify` in a second terminal beside a run). A POSIX lock, which a forked worker does not
    inherit, so a pool forked while it is held never keeps it."""
    with ctx.checkpoint_lock:
        path = ctx.path(SNAPSHOT_LOCK)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            fcntl.lockf(handle, fcntl.LOCK_EX)
            yield                                  # closing the file releases the lock


def push_checkpoint(ctx: Context) -> dict[str, Any] | None:
    """Snapshot the database and mirror it as the store's ky_court.sqlite."""
    if ctx.db is None:
        return None
    snapshot = ctx.path("checkpoint") / DB_FILENAME
    with snapshot_lock(ctx):
        info = checkpoint(ctx.db_path, snapshot)
        # An older version's database in the store is kept under legacy/ before it is replaced.
        info["uploaded"] = keep_legacy_originals(ctx) and ctx.mirror.put(DB_FILENAME, snapshot, mutable=True)
        if info["uploaded"]:
            # The download journal follows the newest snapshot the store holds: after a failed
            # upload it keeps following the one before, so no download falls between the two.
            record_store_checkpoint(ctx.db_path, info["checkpoint_seq"])
    ctx.refresh_quota()
    return info


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


# ---------------------------------------------------------------- resume archives


def write_resume_archive(ctx: Context, snapshot: Path | None = None) -> str:
    """Writes and uploads a resume archive: database snapshot + status.json. Returns its store name.

    `snapshot` is a checkpoint the caller just made (verify passes the one it
    pushed); without it a fresh checkpoint is pushed first. The upload never
    overwrites; when the store refuses it, the archive stays in the
    workspace's checkpoint/ folder and is queued for the store backlog.
    """
    if snapshot is None:
        if ctx.db is None:
            raise IntegrityError("write_resume_archive needs an open database")
        snapshot = Path(push_checkpoint(ctx)["path"])
    sequence, _taken_at = snapshot_sequence(snapshot)
    status_path = ctx.path(STATUS_FILENAME)
    if not status_path.is_file():
        write_status(ctx)
    name = resume_archive_name(_dt.datetime.now(_dt.timezone.utc), sequence)
    archive = ctx.path("checkpoint") / name

    def write_tar(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as tar:
            for member_name, path in ((DB_FILENAME, snapshot), (STATUS_FILENAME, status_path)):
                info = tar.gettarinfo(str(path), arcname=member_name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o644
                with open(path, "rb") as source:
                    tar.addfile(info, source)
    durable_write(archive, write_tar)
    if ctx.mirror.put(name, archive, mutable=False):
        archive.unlink(missing_ok=True)   # the store holds it now; the workspace is throwaway
    else:
        log_checkpoint.warning("resume archive %s is queued for the store (store lags)", name)
    return name
