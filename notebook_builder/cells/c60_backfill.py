"""Backfill: fold the legacy `pdf_backup/` folder into the content-addressed archive.

Guarantees:
- Every file under the workspace's `pdf_backup/` (recursively, through a
  folder link too) is hashed with a streaming SHA-256. A file that does not
  begin with `%PDF-` is reported (logged, listed in the result) and skipped;
  so is a row's `local_pdf` that points at one.
- Each distinct content is written once to `pdf_by_hash/<sha256>.pdf`: a
  temp file under `tmp/` (hashed again while copied, so a file that changed
  under us is never promoted under the wrong name), made durable with the
  others of its group in one flush (c05 `durable_rename`), then mirrored to
  the store as a group; a hash the store already holds uploads nothing.
  Duplicates are counted, never written twice.
- A backup is credited to a document when the row's `local_pdf` names it:
  its path inside `pdf_backup/` (relative, absolute, or a path written on
  another machine containing `pdf_backup/`), or else its file name, wherever
  that path pointed, when every backup of that name has the same content;
  when its file name is `<document_id>.pdf`; or when the row records its
  sha256. Credited: status `downloaded` (a status never moves backwards:
  an `extracted` row stays `extracted`), sha256, size, and local_pdf
  rewritten to `pdf_by_hash/<sha>.pdf`; a row that already holds a
  different hash is left alone (counted as a conflict).
- Guarded by kv `backfill_done` (set only after a complete pass over a
  non-empty folder), and safe to re-run: a second pass writes, uploads and
  changes nothing. A stop between files leaves the guard unset. `force`
  (adoption of an older archive, c38) runs it whatever the guard and
  DRY_RUN say: it asks nothing of the court.

Knobs read: DRY_RUN (WORKSPACE through the context).
"""
from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .c00_config import utc_now
from .c05_durable import durable_rename, raise_if_disk_full, write_temp_file
from .c06_layout import pdf_store_name
from .c13_records import DownloadRecords
from .c34_mirror import progress
from .c35_context import Context

log_backfill = logging.getLogger("kycourt.backfill")

BACKFILL_FOLDER = "pdf_backup"
BACKFILL_GUARD_KEY = "backfill_done"
_BACKFILL_CHUNK = 1024 * 1024
_BACKFILL_MAGIC = b"%PDF-"
_BACKFILL_GROUP = 64            # distinct PDFs made durable (one flush) and mirrored together
_BACKFILL_SHOWN = 5             # names in one warning line


@dataclass
class BackfillResult:
    files: int = 0             # files found under pdf_backup/
    pdfs: int = 0              # of which begin with %PDF-
    distinct: int = 0          # distinct contents among them
    duplicates: int = 0        # PDFs whose content another backup file holds too
    written: int = 0           # new files in pdf_by_hash/
    uploaded: int = 0          # PDFs the store did not have
    credited: int = 0          # rows changed to point at their backup
    unmatched: int = 0         # distinct PDFs no document row claims (kept in pdf_by_hash/ all the same)
    conflicts: int = 0         # rows that already hold a different hash, or name ambiguous backups: left alone
    not_pdf: list[str] = field(default_factory=list)   # skipped, relative to pdf_backup/
    pointing_at_non_pdf: list[str] = field(default_factory=list)   # rows whose local_pdf names one of those
    skipped: str | None = None  # why nothing was done (guard set, no folder)
    stopped: str | None = None
    seconds: float = 0.0


@dataclass
class _Backup:
    relative: str              # path relative to pdf_backup/
    sha256: str
    size: int
    is_pdf: bool


def backfill(ctx: Context, *, force: bool = False) -> BackfillResult:
    """Hashes pdf_backup/, stores each distinct PDF once, credits backups to their documents."""
    started = time.monotonic()
    db = ctx.open_database()
    result = BackfillResult()
    if ctx.cfg.DRY_RUN and not force:  # a dry run writes nothing to the store
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
    uploads_before = ctx.mirror.uploads
    backups = _backfill_store_all(ctx, folder, files, result)
    if result.stopped is None:
        _backfill_credit(ctx, backups, result)
    result.uploaded = ctx.mirror.uploads - uploads_before
    result.seconds = round(time.monotonic() - started, 3)
    if result.stopped is None:
        db.kv_set(BACKFILL_GUARD_KEY, json.dumps(
            {"at": utc_now(), "files": result.files, "distinct": result.distinct, "credited": result.credited},
            sort_keys=True))
    if result.not_pdf:
        log_backfill.warning("backfill: %d files in %s/ are not PDFs and were skipped: %s%s", len(result.not_pdf),
                             BACKFILL_FOLDER, ", ".join(result.not_pdf[:_BACKFILL_SHOWN]),
                             ", ..." if len(result.not_pdf) > _BACKFILL_SHOWN else "")
    log_backfill.info("backfill: %d files, %d PDFs of %d distinct contents (%d duplicates; %d new locally, %d "
                      "uploaded), %d rows credited, %d distinct PDFs unmatched, %d conflicts, %d not PDFs%s",
                      result.files, result.pdfs, result.distinct, result.duplicates, result.written,
                      result.uploaded, result.credited, result.unmatched, result.conflicts, len(result.not_pdf),
                      f"; stopped: {result.stopped}" if result.stopped else "")
    return result


def _backfill_store_all(ctx: Context, folder: Path, files: list[Path], result: BackfillResult) -> list[_Backup]:
    """Pass 1: hashes every file and stores each distinct PDF once (groups of _BACKFILL_GROUP)."""
    backups: list[_Backup] = []
    seen: set[str] = set()
    group: list[tuple[Path, str, int]] = []
    with progress(ctx.cfg, len(files), "backfill", unit="file") as bar:
        for path in files:
            if ctx.clock.should_stop():
                result.stopped = ctx.clock.stop_reason or "stop"
                break
            relative = path.relative_to(folder).as_posix()
            sha256, size, is_pdf = _backfill_hash(path)
            bar.update(1)
            backups.append(_Backup(relative, sha256, size, is_pdf))
            if not is_pdf:
                result.not_pdf.append(relative)
                continue
            result.pdfs += 1
            if sha256 in seen:
                result.duplicates += 1
                continue
            seen.add(sha256)
            group.append((path, sha256, size))
            if len(group) >= _BACKFILL_GROUP:
                _backfill_store_group(ctx, group, result)
                group = []
        _backfill_store_group(ctx, group, result)
    result.distinct = len(seen)
    return backups


def _backfill_store_group(ctx: Context, group: list[tuple[Path, str, int]], result: BackfillResult) -> None:
    """Writes the group's PDFs the workspace lacks (one flush for all), then mirrors the group."""
    if not group:
        return
    pairs = []
    try:
        for source, sha256, size in group:
            target = ctx.path(pdf_store_name(sha256))
            if target.is_file() and target.stat().st_size == size:
                continue
            temp = ctx.path("tmp") / f"backfill-{sha256}.part"
            try:
                write_temp_file(temp, _backfill_copier(source, sha256), sync=False)
            except _BackfillChanged:
                log_backfill.warning("backfill: %s changed while it was read; skipped", source)
                continue
            pairs.append((temp, target))
        durable_rename(pairs)
    except OSError as exc:
        raise_if_disk_full(exc, ctx.path("pdf_by_hash"))
        raise
    result.written += len(pairs)
    names = [pdf_store_name(sha256) for _, sha256, _ in group if ctx.path(pdf_store_name(sha256)).is_file()]
    ctx.mirror.put_many([(name, ctx.path(name)) for name in names])


def _backfill_copier(source: Path, sha256: str):
    def copy(writer) -> None:
        digest = hashlib.sha256()
        with open(source, "rb") as reader:
            while chunk := reader.read(_BACKFILL_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
        if digest.hexdigest() != sha256:
            raise _BackfillChanged(source)     # never promoted: write_temp_file removes the temp
    return copy


def _backfill_credit(ctx: Context, backups: list[_Backup], result: BackfillResult) -> None:
    """Pass 2: credits each PDF to the rows that claim it (path, file name, id name, sha256)."""
    db = ctx.db
    folder = ctx.path(BACKFILL_FOLDER)
    rows = DownloadRecords(db).documents_with_local_pdf()
    by_path, by_name = _backfill_claims(rows, folder.resolve(), folder.absolute())
    files_by_path = {backup.relative: backup for backup in backups}
    names: dict[str, set[str]] = {}
    for backup in backups:
        if backup.is_pdf:
            names.setdefault(PurePosixPath(backup.relative).name, set()).add(backup.sha256)
    claims: dict[str, set[str]] = {}          # document_id -> sha256 of the backups it claims
    resolved: set[str] = set()                 # rows whose local_pdf path names a backup file
    for relative, document_ids in by_path.items():
        backup = files_by_path.get(relative)
        if backup is None:
            continue
        resolved.update(document_ids)
        for document_id in document_ids:
            if backup.is_pdf:
                claims.setdefault(document_id, set()).add(backup.sha256)
            else:
                result.pointing_at_non_pdf.append(f"{document_id} -> {BACKFILL_FOLDER}/{relative}")
    non_pdf_names = {PurePosixPath(backup.relative).name for backup in backups if not backup.is_pdf}
    for name, document_ids in by_name.items():
        shas = names.get(name)
        for document_id in document_ids:
            if document_id in resolved:
                continue
            if shas is None:
                if name in non_pdf_names:
                    result.pointing_at_non_pdf.append(f"{document_id} -> {name}")
                continue
            if len(shas) > 1:
                result.conflicts += 1
                log_backfill.warning("backfill: %s's local_pdf names %s, and %d backups of that name hold "
                                     "different PDFs; none credited", document_id, name, len(shas))
                continue
            claims.setdefault(document_id, set()).update(shas)
    pdf_shas = {backup.sha256 for backup in backups if backup.is_pdf}
    stems = {}                                  # <document_id>.pdf, as written or in lower case
    for backup in backups:
        if backup.is_pdf and backup.relative.lower().endswith(".pdf"):
            stem = PurePosixPath(backup.relative).stem
            stems.setdefault(stem, backup.sha256)
            stems.setdefault(stem.lower(), backup.sha256)
    for document_id in DownloadRecords(db).existing_document_ids(stems):
        claims.setdefault(document_id, set()).add(stems[document_id])
    for document_id, sha256 in DownloadRecords(db).document_ids_with_sha256(pdf_shas):
        claims.setdefault(document_id, set()).add(sha256)
    sizes = {backup.sha256: backup.size for backup in backups if backup.is_pdf}
    credited_shas: set[str] = set()
    with db.transaction():
        for document_id in sorted(claims):
            for sha256 in sorted(claims[document_id]):
                name = pdf_store_name(sha256)
                if not ctx.path(name).is_file():
                    continue        # a backup that changed while read: never credited
                credited_shas.add(sha256)
                if DownloadRecords(db).credit_backup(document_id, sha256=sha256, size_bytes=sizes[sha256], local_pdf=name):
                    result.credited += 1
                else:
                    row = db.get_document(document_id)
                    if row is not None and row["sha256"] not in (None, sha256):
                        result.conflicts += 1
                        log_backfill.warning("backfill: %s holds %s, a backup it claims has %s; row left alone",
                                             document_id, row["sha256"], sha256)
    result.unmatched = len(pdf_shas - credited_shas)
    if result.pointing_at_non_pdf:
        log_backfill.warning("backfill: %d rows' local_pdf names a backup that is not a PDF (not credited): %s%s",
                             len(result.pointing_at_non_pdf),
                             "; ".join(result.pointing_at_non_pdf[:_BACKFILL_SHOWN]),
                             "; ..." if len(result.pointing_at_non_pdf) > _BACKFILL_SHOWN else "")


def _backfill_claims(rows, *folders: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(path relative to pdf_backup/ → document ids whose local_pdf points at it, file name →
    document ids whose local_pdf points elsewhere, by the name it ends with). `folders`: the
    spellings of pdf_backup/'s absolute path on this machine."""
    bases = tuple(dict.fromkeys(folder.as_posix().rstrip("/") + "/" for folder in folders))
    by_path: dict[str, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    for row in rows:
        text = posixpath.normpath(str(row["local_pdf"]).replace("\\", "/").strip())
        relative = _backfill_relative(text, bases)
        if relative is not None:
            by_path.setdefault(relative, []).append(row["document_id"])
        name = posixpath.basename(text)
        if name and not text.startswith("pdf_by_hash/"):
            by_name.setdefault(name, []).append(row["document_id"])
    return by_path, by_name


def _backfill_relative(text: str, bases: tuple[str, ...]) -> str | None:
    """A legacy local_pdf (normalized, '/'-separated) as a path relative to pdf_backup/, or None if
    it points elsewhere. Accepted: an absolute path inside the folder (`bases`: its absolute
    spellings), any path containing `pdf_backup/` (one written on another machine), or a bare
    relative path, taken as inside the folder."""
    if text.startswith("pdf_by_hash/"):
        return None
    for base in bases:
        if text.startswith(base):
            return text[len(base):]
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


class _BackfillChanged(Exception):
    """The file changed between its hash and its copy."""
