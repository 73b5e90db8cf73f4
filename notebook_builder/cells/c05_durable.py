"""Durable writes: the one way a file is written so that a crash leaves the old bytes or the new.

Guarantees:
- `durable_write(path, data)` follows restic's order: the bytes go to a temp
  name in the same folder, are fsynced, the file is closed, renamed over
  `path`, and the folder is fsynced, so the name survives a power cut with
  these bytes behind it. A reader never sees a torn file; the temp is removed
  on any failure; a full disk raises `DiskFullError` naming the mount to free.
- `durable_rename(pairs)` is the group form for files already written under
  temp names: one flush for the whole group (`sync_files`), then every rename,
  then one fsync of each folder. No name appears before its bytes are durable.
  On an error the names already renamed stay durable, the temps not yet
  renamed are removed, and the OSError names (`filename`) the first target
  that is not in place.
- `atomic_write(path, data)` is the same temp-then-rename without the fsyncs,
  for files whose durable copy is elsewhere (texts mirrored to the store, the
  chart): a reader still never sees a torn file.
- `data` is bytes, or a function that writes into the open binary handle.
- `sync_files` makes a group durable with one syncfs(2) where that is as
  durable as an fsync of each (Linux >= 5.8, a local filesystem), else with an
  fsync of each.

Knobs read: none.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, Union

from .c00_config import DiskFullError

Data = Union[bytes, Callable[[Any], Any]]   # the bytes, or a function writing into the binary handle
PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------ single files


def durable_write(path: PathLike, data: Data, *, temp: PathLike | None = None) -> None:
    """Writes `data` to `path` durably (temp, fsync, close, rename, fsync of the folder).

    `temp` (default `.<name>.tmp` beside `path`; any folder of the same filesystem will do) is
    overwritten if a killed write left it. ENOSPC/EDQUOT raise DiskFullError.
    """
    temp = os.fspath(temp) if temp is not None else default_temp(path)
    try:
        write_temp_file(temp, data, sync=True)
        durable_rename([(temp, path)], synced=True)
    except OSError as exc:
        raise_if_disk_full(exc, path)
        raise


def atomic_write(path: PathLike, data: Data, *, temp: PathLike | None = None) -> None:
    """Writes `data` to `path` atomically (temp, rename) without fsyncs: a reader sees the old
    file or the new; after a power cut either may be there (its durable copy is elsewhere)."""
    temp = os.fspath(temp) if temp is not None else default_temp(path)
    try:
        write_temp_file(temp, data, sync=False)
        try:
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise_if_disk_full(exc, path)
        raise


def default_temp(path: PathLike) -> str:
    """`.<name>.tmp` in the folder of `path`."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.tmp")


def write_temp_file(temp: PathLike, data: Data, *, sync: bool, descriptor: int | None = None) -> None:
    """`data` into the file `temp` (created or truncated; or the open `descriptor` of it), flushed
    and fsynced when `sync`, closed. On any failure `temp` is removed and the error raised."""
    try:
        with open(descriptor if descriptor is not None else temp, "wb") as handle:
            if isinstance(data, (bytes, bytearray, memoryview)):
                handle.write(data)
            else:
                data(handle)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


# ------------------------------------------------------------------ groups


def durable_rename(pairs: Sequence[tuple[PathLike, PathLike]], *, synced: bool = False) -> None:
    """Renames each written temp over its target, durably, as a group: (unless `synced`: their
    bytes are durable already) one flush for all temps, then every rename, then one fsync of each
    target folder. On an OSError: the folders of the names already renamed are synced (best
    effort), the temps not yet renamed are removed, and the error is raised naming the first
    target not in place."""
    pending = [(os.fspath(temp), os.fspath(target)) for temp, target in pairs]
    folders: set[str] = set()
    try:
        if not synced:
            sync_files(temp for temp, _ in pending)
        while pending:
            temp, target = pending[0]
            os.replace(temp, target)
            pending.pop(0)
            folders.add(os.path.dirname(target))
        sync_folders(folders)
    except OSError as exc:
        with contextlib.suppress(OSError):
            sync_folders(folders)        # the names already renamed into place stay durable
        for temp, _ in pending:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
        failed = pending[0][1] if pending else (exc.filename or "")
        raise OSError(exc.errno, exc.strerror, failed) from exc


def make_folders(folder: PathLike) -> None:
    """os.makedirs, then an fsync of each new folder's parent: a name made durable inside a new
    folder must not vanish with the folder after a power cut."""
    missing, current = [], os.fspath(folder)
    while not os.path.isdir(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    os.makedirs(folder, exist_ok=True)
    sync_folders(os.path.dirname(path) for path in missing)


def sync_folders(folders: Iterable[PathLike]) -> None:
    """fsync of each folder (once each), so the names renamed into it are durable (POSIX only)."""
    if os.name != "posix":
        return
    for folder in sorted({os.fspath(folder) for folder in folders}):
        _fsync_path(folder)


def _fsync_path(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ------------------------------------------------------------------ one flush for a group


def _load_syncfs():
    """libc's syncfs(2) (Linux), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    return function


def _kernel_reports_syncfs_errors() -> bool:
    """syncfs(2) reports writeback errors (EIO, ENOSPC) only since Linux 5.8."""
    try:
        major, minor = (int(part) for part in os.uname().release.split("-")[0].split(".")[:2])
    except (ValueError, AttributeError):
        return False
    return (major, minor) >= (5, 8)


SYNCFS = _load_syncfs() if _kernel_reports_syncfs_errors() else None
# Fewer files than this are fsynced one by one: syncfs writes back every dirty file of the
# filesystem, which only pays when it replaces several flushes.
SYNCFS_MIN_FILES = 4
# Filesystems whose syncfs makes the data durable. Not FUSE (a mounted Drive, sshfs): the
# kernel does not ask a FUSE server to persist anything on syncfs, and still returns 0.
SYNCFS_FILESYSTEMS = frozenset({"ext4", "ext3", "xfs", "btrfs", "f2fs", "tmpfs"})
_filesystem_types: dict[int, str] = {}   # st_dev -> filesystem type


def _mount_types() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount, from /proc/self/mountinfo."""
    mounts = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                before, _, after = line.partition(" - ")
                fields = before.split()
                if len(fields) >= 5 and after:
                    point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                    mounts.append((point, after.split()[0]))
    except OSError:
        pass
    return mounts


def filesystem_type(path: PathLike) -> str:
    """The type of the filesystem holding `path` ('ext4', 'fuse', …; '' when unknown)."""
    device = os.stat(path).st_dev
    if device not in _filesystem_types:
        real = os.path.realpath(path)
        best, kind = "", ""
        for point, fs_type in _mount_types():
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, fs_type
        _filesystem_types[device] = kind
    return _filesystem_types[device]


def sync_files(paths: Iterable[PathLike]) -> None:
    """Makes the written data of several files durable at once.

    One syncfs(2) of the filesystem holding them (one journal commit and one disk
    flush, however many files) where that is known to be as durable as an fsync each
    (Linux >= 5.8, which reports writeback errors; a local filesystem of
    SYNCFS_FILESYSTEMS), else an fsync of each. Measured here for 32 small
    files: an fsync each 0.3-1.2 ms of CPU a file, one syncfs 0.13-0.18 ms a file.
    Raises OSError (ENOSPC, EIO) as fsync would.
    """
    paths = [os.fspath(path) for path in paths]
    if SYNCFS is not None and len(paths) >= SYNCFS_MIN_FILES:
        # One stat per folder, not per file: a folder's files are on its filesystem.
        folders = {os.path.dirname(path): path for path in paths}
        one_per_device = list({os.stat(path).st_dev: path for path in folders.values()}.values())
        if all(filesystem_type(path) in SYNCFS_FILESYSTEMS for path in one_per_device):
            try:
                for path in one_per_device:
                    _syncfs(path)
                return
            except NotImplementedError:
                pass
    for path in paths:
        _fsync_path(path)


def _syncfs(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        if SYNCFS(descriptor) != 0:
            code = ctypes.get_errno()
            if code in (errno.ENOSYS, errno.EINVAL):
                raise NotImplementedError(path)
            raise OSError(code, os.strerror(code), path)
    finally:
        os.close(descriptor)


# ------------------------------------------------------------------ a full disk


def mount_point(path: PathLike) -> Path:
    """The mount point of the filesystem holding `path` (the disk to free)."""
    current = Path(os.path.abspath(path))
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def raise_if_disk_full(exc: OSError, path: PathLike) -> None:
    """DiskFullError (from `exc`) when `exc` is ENOSPC or EDQUOT; otherwise nothing."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise DiskFullError(f"workspace disk is full writing {path}: free space on the filesystem "
                            f"mounted at {mount_point(path)}") from exc
