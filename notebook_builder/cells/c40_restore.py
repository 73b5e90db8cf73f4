"""Restore: bring a blank runtime back to the newest state the store holds.

Guarantees:
- `restore()` acts only when the workspace has no database; a workspace with one is left alone.
- The candidates are the database the store's page packs make (c22, `db/ky_court/`), its resume
  archives (a whole database inside, or the page packs of a state named in resume.json) and an
  earlier version's `ky_court.sqlite`, each judged by what its database records (`checkpoint_seq`,
  then `checkpoint_at`), never by file times or names: a new runtime never resumes from an older
  state than the store holds. The page table of the state chosen goes with it (c22), so the next
  checkpoint sends only what changes. An older version's (v1.2)
  state is judged by its content (newest `updated_at`, then rows); the rows only other v1.2 states
  hold are merged into the one chosen (c38), each kept byte for byte under legacy/ first.
- A candidate that is not SQLite, fails `quick_check`, or is a corrupt, truncated or hostile
  archive is rejected with its reason and the next one used; when the store holds candidates but
  none is usable, or one cannot be read, restore raises instead of starting from less.
- Archives are never unpacked by their own member names: every member is checked first (no
  absolute path, no `..`, no link leading outside, no device or fifo) and one bad member rejects the
  archive. Their `pdf_backup/`, `pdf_by_hash/` and `text/` files come back to the workspace, never
  over a file it holds; a `pdf_by_hash/` member that does not hash to its name goes to `pdf_backup/`.
- A stale workspace (no database, but other files) is moved aside to `<workspace>-pre-restore`
  (renamed, never deleted); `pdf_backup/` stays. A `ky_court.sqlite` that is not SQLite is moved
  aside only when the store holds a state to restore instead; otherwise restore raises naming it.
- The store's download journals that follow the chosen state are replayed into it: a document they
  list whose PDF the store holds is marked `downloaded`, so nothing the store holds is asked of the
  court again; a bad line or journal is a warning and those documents are downloaded again.
- PDFs and texts are fetched from the store on demand, not copied back.
- A state of another court system than COURT_SYSTEM (its kv `court_system`; none: Kentucky) is
  never restored: CourtSystemMismatch, with nothing installed (the store is another archive's).

Knobs read: WORKSPACE, STORE, COURT_SYSTEM (through the context).
"""
from __future__ import annotations

import filecmp
import gzip
import hashlib
import json
import logging
import os
import posixpath
import shutil
import sqlite3
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from .c00_config import DEFAULT_COURT_SYSTEM, CourtSystemMismatch, DiskFullError, IntegrityError, StoreError
from .c05_durable import durable_rename, raise_if_disk_full
from .c06_layout import (DB_FILENAME, STATUS_FILENAME, WORKSPACE_FOLDERS, is_resume_archive_name, journal_sequence,
                         pdf_store_name)
from .c10_database import KV_CHECKPOINT_SEQ, Database, database_uri, is_sqlite_file
from .c13_records import DownloadRecords
from .c17_snapshots import StoreState, snapshot_problems, snapshot_sequence
from .c35_context import Context
from .c22_page_packs import PagePacks, pack_folder, pack_push
from .c39_checkpoint import RESUME_MANIFEST, database_packs
from .c38_legacy import LegacyJudgement, judge_database, keep_original_locally, merge_legacy_rows

log_restore = logging.getLogger("kycourt.restore")

PRE_RESTORE_SUFFIX = "-pre-restore"
# Operator input that backfill reads; it describes no database, so it is never stale.
_RESTORE_KEPT_ENTRIES = ("pdf_backup",)
_RESTORE_COPY_CHUNK = 1024 * 1024
# Workspace folders an archive may carry beside its database (a v1.2 archive holds its workspace).
RESTORE_FILE_FOLDERS = ("pdf_backup", "pdf_by_hash", "text")
_RESTORE_FILE_GROUP = 256     # files made durable with one flush


@dataclass
class RestoreResult:
    restored: bool
    message: str
    source: str | None = None            # store name the database came from
    checkpoint_seq: int | None = None
    checkpoint_at: str | None = None
    candidates: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)   # (store name, reason)
    moved_aside: str | None = None       # where a stale workspace went
    replayed: int = 0                    # downloads taken from the store's journals
    legacy: bool = False                 # the state is an older version's (adopted next, c38)
    merged: list[tuple[str, int]] = field(default_factory=list)   # (older legacy state, rows it added)
    files: int = 0                       # pdf_backup/, pdf_by_hash/, text/ files the archives brought


@dataclass
class _RestoreCandidate:
    name: str
    database: Path
    status: Path | None
    checkpoint_seq: int
    checkpoint_at: str
    legacy: LegacyJudgement | None = None     # an older version's state: judged by its content
    files: list[tuple[str, str, int]] = field(default_factory=list)   # (member, workspace name, size)
    table: Path | None = None                 # the page table of a state made from the store's page packs

    @property
    def rank(self) -> tuple[int, str, tuple[str, int], int]:
        # No checkpoint recorded (an older version's state): its newest row update, then its rows.
        # Equal recorded states: prefer the archive, it also brings status.json.
        content = self.legacy.content_rank if self.legacy is not None else ("", 0)
        return (self.checkpoint_seq, self.checkpoint_at, content, int(self.status is not None))


# ------------------------------------------------------------- decisions


def resume_member_problem(member: tarfile.TarInfo) -> str | None:
    """Why an archive member is unsafe to accept, or None if it is harmless."""
    name = member.name
    if not name or "\x00" in name:
        return "empty or NUL in name"
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive or PurePosixPath(name).is_absolute():
        return "absolute path"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "path with '..'"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "fifo"
    if member.issym() or member.islnk():
        target = member.linkname
        if not target or target.startswith(("/", "\\")) or PureWindowsPath(target).drive:
            return f"link to absolute path {target!r}"
        # A symlink resolves from its own folder, a hard link from the archive root.
        base = posixpath.dirname(name) if member.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, target.replace("\\", "/")))
        if resolved == ".." or resolved.startswith("../"):
            return f"link pointing outside the archive ({target!r})"
        return None
    if not (member.isreg() or member.isdir()):
        return "unsupported member type"
    return None


def stale_workspace_entries(workspace: Path, *, ignore: tuple[Path, ...] = ()) -> list[Path]:
    """Top-level entries of a database-less workspace that hold files (pdf_backup/ is kept)."""
    if not workspace.is_dir():
        return []
    ignored = {path.resolve() for path in ignore}
    stale = []
    for entry in sorted(workspace.iterdir()):
        if entry.name in _RESTORE_KEPT_ENTRIES or entry.resolve() in ignored:
            continue
        if entry.is_symlink() or not entry.is_dir() or _restore_holds_files(entry):
            stale.append(entry)
    return stale


def _restore_holds_files(folder: Path) -> bool:
    for _root, _dirs, files in os.walk(folder):
        if files:
            return True
    return False


def workspace_has_database(workspace: Path) -> bool:
    return (workspace / DB_FILENAME).is_file() and is_sqlite_file(workspace / DB_FILENAME)


# ----------------------------------------------------------------- stage


def restore(ctx: Context, *, point: str | None = None) -> RestoreResult:
    """Puts the newest state the store holds into a workspace that has no database (`point`: the
    state of that resume archive, or of the store's page packs when it names `db/ky_court`, which
    then goes on as the newest: `_restore_outrank_newer`)."""
    workspace = ctx.workspace
    if workspace_has_database(workspace):
        return RestoreResult(False, "workspace has a database: nothing to restore")
    try:
        names = ctx.store.list_dir("")
    except StoreError as exc:
        raise StoreError(f"restore cannot list the store ({ctx.store.description}): {exc}; "
                         "not starting from less than the store may hold") from None
    candidates = [name for name in names if name == DB_FILENAME or is_resume_archive_name(name)]
    try:
        if database_packs(ctx).held():
            candidates.insert(0, pack_folder(DB_FILENAME))
    except StoreError as exc:
        raise StoreError(f"restore cannot list the store's page packs: {exc}; "
                         "not starting from less than the store may hold") from None
    if point is not None:
        if point not in candidates:
            raise IntegrityError(f"the store holds no resume point {point!r} (it holds: "
                                 f"{', '.join(candidates) or 'none'})")
        candidates = [point]
    result = RestoreResult(False, "", candidates=candidates)
    temp_root = Path(tempfile.mkdtemp(prefix=".restore-", dir=workspace))
    try:
        best, others = _restore_choose(ctx, candidates, temp_root, result)
        if best is not None:
            _restore_check_court_system(ctx, best)
        damaged = workspace / DB_FILENAME
        if best is None and damaged.is_file() and damaged.stat().st_size > 0:
            # With nothing to restore instead, moving it aside would silently start a new archive.
            raise IntegrityError(f"{damaged} is not an SQLite database and the store holds no saved "
                                 "state to restore instead; nothing was changed: move it aside or "
                                 "delete it to start a new archive")
        stale = stale_workspace_entries(workspace, ignore=(temp_root,))
        if stale:
            result.moved_aside = str(_restore_move_aside(workspace, stale))
            log_restore.warning("workspace %s had no database but %d stale entries: moved to %s",
                                workspace, len(stale), result.moved_aside)
        if best is None:
            result.message = "store holds no saved state: starting a new archive"
            return result
        contributing = [best]
        older = _restore_older_legacy(best, others) if best.legacy is not None else []
        for candidate in [best, *older] if older else []:
            # Merging changes the newer state's file: each state is kept as v1.2 wrote it first.
            keep_original_locally(ctx, candidate.database)
        # v1.2 kept its backups only in its archives: when the store's snapshot wins, the newest
        # archive's pdf_backup/ holds the PDFs of the rows both states hold.
        newest_archive = next((candidate for candidate in older if is_resume_archive_name(candidate.name)), None)
        for candidate in older:
            added = merge_legacy_rows(best.database, candidate.database)
            result.merged.append((candidate.name, added))
            log_restore.info("restore: %d rows only the older legacy state %s holds merged into %s",
                             added, candidate.name, best.name)
            if added or (candidate is newest_archive and not is_resume_archive_name(best.name)):
                contributing.append(candidate)      # its workspace files may be those rows' PDFs
        for candidate in contributing:
            result.files += _restore_unpack_files(ctx, candidate, workspace, temp_root)
        if best.legacy is None:
            result.replayed = _restore_replay(ctx, best, temp_root)
        if point is not None and best.legacy is None:
            _restore_outrank_newer(ctx, best)
        _restore_install(workspace, best)
    finally:
        shutil.rmtree(temp_root, ignore_errors=True)
    result.restored = True
    result.source = best.name
    result.legacy = best.legacy is not None
    result.checkpoint_seq, result.checkpoint_at = best.checkpoint_seq, best.checkpoint_at
    if best.legacy is not None:
        result.message = (f"restored the older version's state {best.name} ({best.legacy.rows} rows, newest "
                          f"update {best.legacy.newest_updated_at or 'unknown'})"
                          + "".join(f"; {added} rows only {name} held merged in" for name, added in result.merged))
    else:
        result.message = (f"restored {best.name} (checkpoint {best.checkpoint_seq} of "
                          f"{best.checkpoint_at or 'unknown time'})"
                          + (f"; {result.replayed} later downloads from the store's journal" if result.replayed else ""))
    if result.files:
        result.message += f"; {result.files} workspace files from the archive"
    log_restore.info("%s", result.message)
    return result


def _restore_check_court_system(ctx: Context, best: "_RestoreCandidate") -> None:
    """CourtSystemMismatch when the chosen state is another court system's archive than COURT_SYSTEM's."""
    system = DEFAULT_COURT_SYSTEM
    if best.legacy is None:
        conn = sqlite3.connect(database_uri(best.database, mode="ro"), uri=True)
        try:
            row = conn.execute("SELECT value FROM kv WHERE key = 'court_system'").fetchone()
        except sqlite3.DatabaseError:
            row = None
        finally:
            conn.close()
        system = row[0] if row and row[0] else DEFAULT_COURT_SYSTEM
    if system != ctx.cfg.COURT_SYSTEM:
        raise CourtSystemMismatch(f"the store {ctx.store.description} belongs to court system {system}; "
                                  f"--court-system {ctx.cfg.COURT_SYSTEM} would mix two archives: use another store")


def _restore_outrank_newer(ctx: Context, best: _RestoreCandidate) -> None:
    """A point chosen by hand becomes the archive's newest state: its checkpoint_seq is set to the
    newest push the store holds, so its next checkpoint is the store's newest, not a stale one
    (c22 StaleState)."""
    newest = max((pack_push(name) for name in database_packs(ctx).held()), default=0)
    if newest <= best.checkpoint_seq:
        return
    db = Database.open(best.database)
    try:
        db.kv_set(KV_CHECKPOINT_SEQ, str(newest))
        db.conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        db.close()
    log_restore.info("restore: the chosen point (checkpoint %d) goes on as checkpoint %d, the store's newest",
                     best.checkpoint_seq, newest)


def _restore_older_legacy(best: _RestoreCandidate, others: list[_RestoreCandidate]) -> list[_RestoreCandidate]:
    """The other legacy states, newest first: their rows the best one lacks are merged into it."""
    return sorted((candidate for candidate in others if candidate.legacy is not None and candidate is not best),
                  key=lambda candidate: candidate.rank, reverse=True)


def _restore_choose(ctx: Context, candidates: list[str], temp_root: Path,
                    result: RestoreResult) -> tuple[_RestoreCandidate | None, list[_RestoreCandidate]]:
    """Downloads and judges every candidate; keeps the best one on disk, and every legacy one (an
    older legacy state's rows are merged into a newer one). Returns (best, the others kept)."""
    best: _RestoreCandidate | None = None
    kept: list[_RestoreCandidate] = []
    made = _Assembled()
    for index, name in enumerate(candidates):
        folder = temp_root / f"candidate-{index}"
        folder.mkdir()
        download = folder / "download"
        try:
            if name != pack_folder(DB_FILENAME):
                ctx.store.download_file(name, download)
        except StoreError as exc:
            raise StoreError(f"restore cannot read {name} from the store: {exc}; "
                             "not starting from an older state than the store holds") from None
        except OSError as exc:
            raise_if_disk_full(exc, download)
            raise
        try:
            candidate = _restore_judge(name, download, folder, _restore_packs(ctx, folder, made))
        except _Outranked:           # names an older state than the one in hand: not made at all
            shutil.rmtree(folder, ignore_errors=True)
            continue
        except IntegrityError as exc:
            result.rejected.append((name, str(exc)))
            log_restore.warning("restore rejects %s: %s", name, exc)
            shutil.rmtree(folder, ignore_errors=True)
            continue
        if candidate.legacy is not None:
            kept.append(candidate)      # its rows may be merged, its files restored
        if best is None or candidate.rank > best.rank:
            if best is not None and best.legacy is None:
                shutil.rmtree(best.database.parent, ignore_errors=True)
            best = candidate
            made.best_seq = candidate.checkpoint_seq
        elif candidate.legacy is None:
            shutil.rmtree(folder, ignore_errors=True)
    if candidates and best is None:
        reasons = "; ".join(f"{name}: {reason}" for name, reason in result.rejected)
        raise IntegrityError(f"the store holds saved state but none of it is usable ({reasons}); "
                             "nothing was changed")
    return best, kept


class _Outranked(Exception):
    """A resume point naming an older state than the best one in hand: it cannot win, so it is not made."""


@dataclass
class _Assembled:
    """What one restore made from the store's page packs: each manifest's database (made once, copied
    for another candidate naming it), and the checkpoint of the best state in hand."""
    by_manifest: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    best_seq: int = -1


def _restore_packs(ctx: Context, folder: Path, made: _Assembled):
    """Makes a database from the store's page packs in `folder` (the newest whole state, or the
    state a resume archive's manifest names, `sequence` its checkpoint): (database, page table)."""
    def assemble(manifest: str | None, sequence: int | None = None) -> tuple[Path, Path]:
        if sequence is not None and sequence < made.best_seq:
            raise _Outranked()
        database, table = folder / DB_FILENAME, folder / "page-table"
        earlier = made.by_manifest.get(manifest) if manifest else None
        if earlier is not None and earlier[0].is_file() and earlier[1].is_file():
            shutil.copyfile(earlier[0], database)
            shutil.copyfile(earlier[1], table)
            return database, table
        try:
            restored = PagePacks(ctx.store, DB_FILENAME, folder, table_path=table).restore(
                database, manifest=manifest, downloads=folder.parent / "packs")
        except StoreError as exc:
            raise StoreError(f"restore cannot read the store's page packs: {exc}; "
                             "not starting from an older state than the store holds") from None
        made.by_manifest[restored.manifest] = (database, table)
        return database, table
    return assemble


def _restore_judge(name: str, download: Path, folder: Path, assemble) -> _RestoreCandidate:
    files: list[tuple[str, str, int]] = []
    table = None
    if name == DB_FILENAME:
        database, status = download, None
    elif name == pack_folder(DB_FILENAME):
        (database, table), status = assemble(None), None
    else:
        database, status, files = _restore_unpack(download, folder, assemble)
        if database.with_name("page-table").is_file():
            table = database.with_name("page-table")
    judgement = judge_database(database)
    if judgement.legacy:
        # An older version's state records no checkpoint: judged by its content, adopted after restore.
        if judgement.problems:
            raise IntegrityError(f"an older version's database that cannot be adopted: {'; '.join(judgement.problems)}")
        candidate = _RestoreCandidate(name, database, status, 0, "", legacy=judgement, files=files)
    else:
        if judgement.kind == "foreign":
            raise IntegrityError(f"{DB_FILENAME} is not this pipeline's: {'; '.join(judgement.problems)}")
        sequence, taken_at = snapshot_sequence(database)
        problems = snapshot_problems(database)
        if problems:
            raise IntegrityError(f"database fails quick_check: {problems[:3]}")
        candidate = _RestoreCandidate(name, database, status, sequence, taken_at, files=files, table=table)
    if download != database:
        download.unlink(missing_ok=True)      # read again from the store for its files, if this state is chosen
    return candidate


def archive_layout(names: list[str]) -> tuple[str, str]:
    """(the database member, its folder) of an archive with these member names (normalized, files
    only): the one `ky_court.sqlite` at any depth. Raises IntegrityError when there is none, or more."""
    found = [name for name in names if posixpath.basename(name) == DB_FILENAME]
    if not found:
        raise IntegrityError(f"archive holds no {DB_FILENAME}")
    if len(found) > 1:
        raise IntegrityError(f"archive holds {len(found)} databases ({', '.join(sorted(found)[:3])}): which "
                             "one is the state is not clear, so none is taken from it")
    return found[0], posixpath.dirname(found[0])


def archive_workspace_name(name: str, root: str) -> str | None:
    """The workspace name a member under the database's folder restores to (pdf_backup/, pdf_by_hash/,
    text/), or None for members restore does not take."""
    relative = posixpath.relpath(name, root) if root else name
    folder = relative.split("/", 1)[0]
    return relative if folder in RESTORE_FILE_FOLDERS and "/" in relative and not relative.startswith("../") else None


def _restore_unpack(archive: Path, folder: Path, assemble) -> tuple[Path, Path | None, list[tuple[str, str, int]]]:
    """Checks every member of a resume archive, then copies out its database (with its -wal, folded
    in; or, for an archive naming page packs, the database those make: `assemble(manifest)`) and
    status; returns them and the (member, workspace name) of its workspace files."""
    data_filter = getattr(tarfile, "data_filter", None)   # Python >= 3.12 and recent patch releases
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            members = tar.getmembers()   # reads to the end: a truncated archive fails here
            regular: dict[str, tarfile.TarInfo] = {}
            for member in members:
                problem = resume_member_problem(member)
                if problem is None and data_filter is not None:
                    try:
                        data_filter(member, str(folder))
                    except tarfile.FilterError as exc:
                        problem = str(exc)
                if problem is not None:
                    raise IntegrityError(f"hostile archive member {member.name!r}: {problem}")
                key = posixpath.normpath(member.name)
                if member.isreg():
                    if key in regular:
                        raise IntegrityError(f"archive holds {key} twice")
                    regular[key] = member
                elif posixpath.basename(key) in (DB_FILENAME, STATUS_FILENAME) and not member.isdir():
                    raise IntegrityError(f"archive member {key} is not a regular file")
            if RESUME_MANIFEST in regular and not any(posixpath.basename(key) == DB_FILENAME for key in regular):
                return _restore_named_state(tar, regular, folder, assemble)
            database_key, root = archive_layout(sorted(regular))
            wanted = {DB_FILENAME: regular[database_key]}
            for name in (STATUS_FILENAME, DB_FILENAME + "-wal"):
                key = posixpath.join(root, name) if root else name
                if key in regular:
                    wanted[name] = regular[key]
            files = [(key, workspace_name, regular[key].size) for key in sorted(regular)
                     if (workspace_name := archive_workspace_name(key, root)) is not None]
            needed = sum(member.size for member in wanted.values())
            if shutil.disk_usage(folder).free < needed:
                raise DiskFullError(f"workspace disk is full: unpacking a resume archive needs "
                                    f"{needed} bytes in {folder.parent}")
            paths = {}
            for key, member in wanted.items():
                paths[key] = folder / key
                source = tar.extractfile(member)
                with source, open(paths[key], "xb") as target:
                    shutil.copyfileobj(source, target, _RESTORE_COPY_CHUNK)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise IntegrityError(f"corrupt or truncated archive: {exc}") from None
    except OSError as exc:
        raise_if_disk_full(exc, folder)
        raise IntegrityError(f"archive cannot be read: {exc}") from None
    if DB_FILENAME + "-wal" in paths:
        _restore_fold_wal(paths[DB_FILENAME])
    status = paths.get(STATUS_FILENAME)
    if status is not None and not _restore_is_json_object(status):
        log_restore.warning("resume archive %s has an unreadable status.json; ignoring it", archive.name)
        status = None
    return paths[DB_FILENAME], status, files


def _restore_named_state(tar: tarfile.TarFile, regular: dict[str, tarfile.TarInfo], folder: Path,
                         assemble) -> tuple[Path, Path | None, list]:
    """A resume archive that names its state in page packs (resume.json): that state made from the
    store's packs, and the archive's status.json."""
    try:
        manifest = json.loads(tar.extractfile(regular[RESUME_MANIFEST]).read())
        name = manifest["manifest"]
        sequence = int(manifest["checkpoint_seq"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"its {RESUME_MANIFEST} names no state: {exc}") from None
    status = None
    if STATUS_FILENAME in regular:
        status = folder / STATUS_FILENAME
        with tar.extractfile(regular[STATUS_FILENAME]) as source, open(status, "xb") as target:
            shutil.copyfileobj(source, target, _RESTORE_COPY_CHUNK)
        if not _restore_is_json_object(status):
            status = None
    database, _table = assemble(name, sequence)
    return database, status, []


def _restore_fold_wal(database: Path) -> None:
    """A database an archive carries with its -wal (a live workspace packed as it was): the WAL is
    folded into this copy (the archive keeps the original), so it is one self-contained file."""
    try:
        conn = sqlite3.connect(str(database))
        try:
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(f"{DB_FILENAME} and its -wal cannot be read: {exc}") from None


def _restore_unpack_files(ctx: Context, candidate: _RestoreCandidate, workspace: Path, temp_root: Path) -> int:
    """Copies a chosen archive's pdf_backup/, pdf_by_hash/ and text/ members into the workspace (the
    archive read from the store again: archives are not kept on disk while candidates are judged).
    A file is never put over another one (a backup of other bytes goes under pdf_backup/<archive>/,
    a name the workspace holds with those bytes is left as it is), and a pdf_by_hash/ member that
    does not hash to its name goes to pdf_backup/ for backfill to hash. Returns the files written."""
    if not candidate.files:
        return 0
    archive = temp_root / "archive.tar.gz"
    needed = sum(size for _, _, size in candidate.files)
    try:
        ctx.store.download_file(candidate.name, archive)
    except StoreError as exc:
        raise StoreError(f"restore cannot read {candidate.name} again for its workspace files: {exc}") from None
    if shutil.disk_usage(workspace).free < needed:
        archive.unlink(missing_ok=True)
        raise DiskFullError(f"workspace disk is full: the workspace files of {candidate.name} need {needed} bytes "
                            f"in {workspace}")
    stem = candidate.name[:-len(".tar.gz")] if candidate.name.endswith(".tar.gz") else candidate.name
    staging = temp_root / "files"
    staging.mkdir(exist_ok=True)
    written = 0
    planned: dict[Path, Path] = {}       # target -> the temp holding its bytes, not renamed yet
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for number, (member_name, name, _) in enumerate(candidate.files):
                temp = staging / f"{number}.part"
                digest = hashlib.sha256()
                source = tar.extractfile(member_name)
                with source, open(temp, "wb") as handle:
                    while chunk := source.read(_RESTORE_COPY_CHUNK):
                        digest.update(chunk)
                        handle.write(chunk)
                target = _restore_file_target(workspace, name, stem, temp, digest.hexdigest(), planned)
                if target is None:
                    temp.unlink()
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                planned[target] = temp
                if len(planned) >= _RESTORE_FILE_GROUP:
                    durable_rename([(temp, target) for target, temp in planned.items()])
                    written, planned = written + len(planned), {}
        durable_rename([(temp, target) for target, temp in planned.items()])
        written += len(planned)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise IntegrityError(f"{candidate.name}: its files cannot be read: {exc}") from None
    except OSError as exc:
        raise_if_disk_full(exc, workspace)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        archive.unlink(missing_ok=True)
    log_restore.info("restore: %d workspace files (pdf_backup/, pdf_by_hash/, text/) from %s", written,
                     candidate.name)
    return written


def _restore_file_target(workspace: Path, name: str, stem: str, temp: Path, sha256: str,
                         planned: dict[Path, Path]) -> Path | None:
    """Where an archive's workspace file goes (None: the workspace holds it already, or will)."""
    folder, rest = name.split("/", 1)
    if folder == "pdf_by_hash" and rest != f"{sha256}.pdf":
        # Its name does not say its bytes: a backup, for backfill to hash and credit.
        folder, rest, name = "pdf_backup", f"pdf_by_hash/{rest}", f"pdf_backup/pdf_by_hash/{rest}"
    for target in (workspace / name, workspace / "pdf_backup" / stem / rest):
        holder = planned.get(target) or (target if target.exists() else None)
        if holder is None:
            return target
        if folder != "pdf_backup" or filecmp.cmp(holder, temp, shallow=False):
            return None      # a content-addressed name holds its bytes; a backup is there already
    return None


def _restore_is_json_object(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def _restore_move_aside(workspace: Path, stale: list[Path]) -> Path:
    """Renames the stale entries into a fresh `<workspace>-pre-restore[-N]` folder."""
    base = workspace.resolve()
    for number in range(1, 10_000):
        suffix = PRE_RESTORE_SUFFIX if number == 1 else f"{PRE_RESTORE_SUFFIX}-{number}"
        target = base.with_name(base.name + suffix)
        try:
            target.mkdir()    # claims the name atomically
            break
        except FileExistsError:
            continue
    else:
        raise IntegrityError(f"too many {base.name}{PRE_RESTORE_SUFFIX}* folders next to the workspace")
    for entry in stale:
        try:
            os.rename(entry, target / entry.name)
        except OSError as exc:
            raise_if_disk_full(exc, target)
            shutil.move(str(entry), str(target / entry.name))   # another filesystem: copy, then remove
    return target


def _restore_install(workspace: Path, best: _RestoreCandidate) -> None:
    for folder in WORKSPACE_FOLDERS:
        (workspace / folder).mkdir(parents=True, exist_ok=True)
    if best.status is not None:
        os.replace(best.status, workspace / STATUS_FILENAME)
    # What the store holds of the database goes with it (without one, the first checkpoint sends every page).
    table = PagePacks(None, DB_FILENAME, workspace / "checkpoint").table_path
    if best.table is not None:
        os.replace(best.table, table)
    else:
        table.unlink(missing_ok=True)
    os.replace(best.database, workspace / DB_FILENAME)   # last: its presence means "restored"


def journal_entry_problem(entry: Any) -> str | None:
    """Why a journal line cannot be replayed, or None."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    sha = entry.get("sha256")
    if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        return "sha256 is not 64 lowercase hex digits"
    if not isinstance(entry.get("document_id"), str) or not entry["document_id"]:
        return "no document_id"
    size = entry.get("size_bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "size_bytes is not a count of bytes"
    return None


def _restore_replay(ctx: Context, best: _RestoreCandidate, temp_root: Path) -> int:
    """Replays the journals after the chosen state into its database (before it is installed);
    notes that state as the store's newest snapshot. Returns the documents marked downloaded."""
    replayed = 0
    db = Database.open(best.database)
    try:
        try:
            replayed = _restore_replay_journals(ctx, db, best.checkpoint_seq, temp_root)
        except Exception as exc:   # a journal only saves requests: never let it stop a restore
            log_restore.warning("restore could not replay the store's journal (%s: %s): the downloads "
                                "it lists are fetched again", type(exc).__name__, exc)
        # The store holds this state: the next journal follows it (the snapshot's own note is older).
        StoreState(db).record_store_checkpoint(best.checkpoint_seq)
        # Back to one self-contained file (WAL folded in) before it is moved into place.
        db.conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        db.close()
    return replayed


def _restore_replay_journals(ctx: Context, db: Database, sequence: int, temp_root: Path) -> int:
    listed = ((journal_sequence(name), name) for name in ctx.store.list_dir("journal"))
    names = sorted(((number, name) for number, name in listed if number is not None and number >= sequence),
                   reverse=True)
    if not names:
        return 0
    held = set(ctx.store.list_dir("pdf_by_hash"))      # one listing, not a question per entry
    replayed = unknown = 0
    for _, name in names:                               # newest first: the first mark wins
        local = temp_root / "journal.jsonl"
        try:
            ctx.store.download_file(name, local)
            lines = local.read_text(encoding="utf-8").splitlines()
        except (StoreError, OSError, UnicodeDecodeError) as exc:
            log_restore.warning("restore skips %s (%s): its downloads are fetched again", name, exc)
            continue
        for number in range(len(lines), 0, -1):         # a journal's later lines are newer
            try:
                entry = json.loads(lines[number - 1])
            except ValueError:
                entry = None
            problem = journal_entry_problem(entry)
            if problem is not None:
                log_restore.warning("restore skips line %d of %s: %s", number, name, problem)
                continue
            stored = pdf_store_name(entry["sha256"])
            if stored not in held:
                continue
            if DownloadRecords(db).mark_downloaded(entry["document_id"], sha256=entry["sha256"], size_bytes=entry["size_bytes"],
                                  local_pdf=stored):
                replayed += 1
            elif db.get_document(entry["document_id"]) is None:
                unknown += 1
    if replayed or unknown:
        log_restore.info("restore: %d downloads after checkpoint %d replayed from %s%s", replayed, sequence,
                         ", ".join(name for _, name in names),
                         f"; {unknown} listed documents are not in this state (discovery finds them again)"
                         if unknown else "")
    return replayed
