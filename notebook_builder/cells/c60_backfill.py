"""Backfill: fold the legacy `pdf_backup/` folder into the content-addressed archive.

Guarantees:
- Every file under the workspace's `pdf_backup/` (recursively) is hashed
  with a streaming SHA-256. A file that does not begin with `%PDF-` is
  reported (logged, listed in the result) and skipped.
- Each distinct content is written once to `pdf_by_hash/<sha256>.pdf`: a
  temp file under `tmp/` (hashed again while copied, so a file that changed
  under us is never promoted under the wrong name), written with c05
  `durable_write` (fsync, rename, fsync of the folder). It is mirrored to the
  store; a hash the store already holds
  uploads nothing.
- A backup is credited to its document when the row's `local_pdf` points at
  it (relative, absolute, or a legacy path containing `pdf_backup/`) or its
  file name is `<document_id>.pdf`: status `downloaded`, sha256, size, and
  local_pdf normalized to `pdf_by_hash/<sha>.pdf`. A status never moves
  backwards (an `extracted` row stays `extracted`), and a row that already
  holds a different hash is left alone.
- Guarded by kv `backfill_done` (set only after a complete pass over a
  non-empty folder), and safe to re-run: a second pass writes, uploads and
  changes nothing. A stop between files leaves the guard unset.

Knobs read: none of its own (WORKSPACE through the context).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .c00_config import utc_now
from .c20_store import pdf_store_name
from .c05_durable import durable_write
from .c34_mirror import progress
from .c35_context import Context

log_backfill = logging.getLogger("kycourt.backfill")

BACKFILL_FOLDER = "pdf_backup"
BACKFILL_GUARD_KEY = "backfill_done"
_BACKFILL_CHUNK = 1024 * 1024
_BACKFILL_MAGIC = b"%PDF-"
_BACKFILL_DOCUMENT_NAME = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class BackfillResult:
    files: int = 0             # files found under pdf_backup/
    pdfs: int = 0              # of which begin with %PDF-
    distinct: int = 0          # distinct contents among them
    written: int = 0           # new files in pdf_by_hash/
    uploaded: int = 0          # PDFs the store did not have
    credited: int = 0          # rows changed to point at their backup
    unmatched: int = 0         # PDFs no document row claims (kept in pdf_by_hash/ all the same)
    conflicts: int = 0         # rows that already hold a different hash: left alone
    not_pdf: list[str] = field(default_factory=list)   # skipped, relative to pdf_backup/
    skipped: str | None = None  # why nothing was done (guard set, no folder)
    stopped: str | None = None
    seconds: float = 0.0


def backfill(ctx: Context, *, force: bool = False) -> BackfillResult:
    """Hashes pdf_backup/, stores each distinct PDF once, credits backups to their documents."""
    started = time.monotonic()
    db = ctx.open_database()
    result = BackfillResult()
    if ctx.cfg.DRY_RUN:  # a dry run writes nothing to the store
        result.skipped = "dry run"
        return result
    guard = db.kv_get(BACKFILL_GUARD_KEY)
    if guard is not None and not force:
        result.skipped = f"{BACKFILL_GUARD_KEY} set ({guard})"
        return result
    folder = ctx.path(BACKFILL_FOLDER)
    files = sorted(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []
    result.files = len(files)
    if not files:
        result.skipped = f"no files in {BACKFILL_FOLDER}/"
        return result
    for needed in ("tmp", "pdf_by_hash"):
        ctx.path(needed).mkdir(parents=True, exist_ok=True)
    claims = _backfill_claims(ctx, db.documents_with_local_pdf())
    seen: set[str] = set()
    uploads_before = ctx.mirror.uploads
    with progress(ctx.cfg, len(files), "backfill", unit="file") as bar:
        for path in files:
            if ctx.clock.should_stop():
                result.stopped = ctx.clock.stop_reason or "stop"
                break
            relative = path.relative_to(folder).as_posix()
            sha256, size, is_pdf = _backfill_hash(path)
            bar.update(1)
            if not is_pdf:
                result.not_pdf.append(relative)
                log_backfill.warning("backfill: %s/%s is not a PDF; skipped", BACKFILL_FOLDER, relative)
                continue
            result.pdfs += 1
            name = pdf_store_name(sha256)
            if sha256 not in seen:
                stored = _backfill_store(ctx, path, name, sha256, size)
                if stored is None:
                    log_backfill.warning("backfill: %s changed while it was read; skipped", relative)
                    continue
                seen.add(sha256)
                result.written += stored
                ctx.mirror.put(name, ctx.path(name))
            owners = set(claims.get(relative, ()))
            if _BACKFILL_DOCUMENT_NAME.match(path.stem.lower()) and path.suffix.lower() == ".pdf":
                owners.add(path.stem.lower())
            matched = False
            for document_id in sorted(owners):
                row = db.get_document(document_id)
                if row is None:
                    continue
                matched = True
                if db.credit_backup(document_id, sha256=sha256, size_bytes=size, local_pdf=name):
                    result.credited += 1
                elif row["sha256"] not in (None, sha256):
                    result.conflicts += 1
                    log_backfill.warning("backfill: %s holds %s, backup %s has %s; row left alone",
                                         document_id, row["sha256"], relative, sha256)
            result.unmatched += not matched
    result.distinct = len(seen)
    result.uploaded = ctx.mirror.uploads - uploads_before
    result.seconds = round(time.monotonic() - started, 3)
    if result.stopped is None:
        db.kv_set(BACKFILL_GUARD_KEY, json.dumps(
            {"at": utc_now(), "files": result.files, "distinct": result.distinct, "credited": result.credited},
            sort_keys=True))
    log_backfill.info("backfill: %d files, %d distinct PDFs (%d new locally, %d uploaded), %d rows credited, "
                      "%d unmatched, %d not PDFs%s", result.files, result.distinct, result.written,
                      result.uploaded, result.credited, result.unmatched, len(result.not_pdf),
                      f"; stopped: {result.stopped}" if result.stopped else "")
    return result


def _backfill_claims(ctx: Context, rows) -> dict[str, list[str]]:
    """Path relative to pdf_backup/ → document ids whose local_pdf points at it."""
    folder = ctx.path(BACKFILL_FOLDER).resolve()
    claims: dict[str, list[str]] = {}
    for row in rows:
        relative = _backfill_relative(row["local_pdf"], folder)
        if relative is not None:
            claims.setdefault(relative, []).append(row["document_id"])
    return claims


def _backfill_relative(local_pdf: str, folder: Path) -> str | None:
    """A legacy local_pdf as a path relative to pdf_backup/, or None if it points elsewhere.

    Accepted: an absolute path inside the folder, any path containing `pdf_backup/`
    (one written on another machine), or a bare relative path, taken as inside the folder.
    """
    text = PurePosixPath(local_pdf.replace("\\", "/").strip()).as_posix()
    if text.startswith("pdf_by_hash/"):
        return None
    if text.startswith("/"):
        try:
            return Path(text).resolve().relative_to(folder).as_posix()
        except ValueError:
            pass
    marker = f"{BACKFILL_FOLDER}/"
    if text.startswith(marker) or f"/{marker}" in text:
        return text[text.rindex(marker) + len(marker):]
    return None if text.startswith("/") else text


def _backfill_hash(path: Path) -> tuple[str, int, bool]:
    """(sha256, size, begins with %PDF-), streaming."""
    digest, size, head = hashlib.sha256(), 0, b""
    with open(path, "rb") as handle:
        while chunk := handle.read(_BACKFILL_CHUNK):
            if size == 0:
                head = chunk[:len(_BACKFILL_MAGIC)]
            size += len(chunk)
            digest.update(chunk)
    return digest.hexdigest(), size, head == _BACKFILL_MAGIC


def _backfill_store(ctx: Context, source: Path, name: str, sha256: str, size: int) -> int | None:
    """Writes pdf_by_hash/<sha>.pdf from `source` unless it is there: 1 written, 0 held, None changed."""
    target = ctx.path(name)
    if target.is_file() and target.stat().st_size == size:
        return 0
    def copy(writer) -> None:
        digest = hashlib.sha256()
        with open(source, "rb") as reader:
            while chunk := reader.read(_BACKFILL_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
        if digest.hexdigest() != sha256:
            raise _BackfillChanged(source)     # never promoted: durable_write removes the temp
    try:
        durable_write(target, copy, temp=ctx.path("tmp") / f"backfill-{sha256}.part")
    except _BackfillChanged:
        return None
    return 1


class _BackfillChanged(Exception):
    """The file changed between its hash and its copy."""
