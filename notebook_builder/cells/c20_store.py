"""The Store: the durable mirror of the workspace (a local directory, or Google Drive).

Guarantees:
- Names are POSIX relative paths (`pdf_by_hash/<sha256>.pdf`, `status.json`).
- Writes are atomic: a reader sees the old bytes or the new, never a torn file.
- A name under `pdf_by_hash/` or `text/` is content-addressed: writing other
  bytes to an existing one raises `IntegrityError`; writing the same bytes
  again is a no-op. A rewritten name (status.json) is replaced whole: no earlier
  version is kept. Only state the pipeline replaces is ever removed (`remove`,
  c06 `is_replaceable_state`: page packs, index files, journals, resume
  archives beyond their retention), and the temp files of writes a kill
  interrupted (`remove_stale_temps`); a file of record never is.
- `StoreQuotaExceeded` (a `StoreError`) tells callers the store is full, so
  they can keep working on local state and catch the store up later.
- Fixity (c21_fixity) asks a store what its listing knows of each file
  (`list_files`: size, and the md5 the store computed where it keeps one),
  reads a file's digests (`digests`), offers the other files it holds under
  a name (`other_copies`), and puts the right bytes back under a damaged or
  missing content-addressed name (`replace_damaged`: the one write that may
  change such a name, and only to the bytes its hash names).

`LocalStore` is used by tests and command-line runs; `DriveStore`
(drive_store.py) implements the same methods over pydrive2.
"""
from __future__ import annotations

import contextlib
import errno
import filecmp
import hashlib
import itertools
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

from .c00_config import IntegrityError, StoreError, StoreMissing, StoreQuotaExceeded
from .c05_durable import atomic_write, durable_rename, make_folders, sync_folders, write_temp_file
from .c06_layout import check_store_name, is_content_addressed, is_replaceable_state


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a file, read in 1 MiB pieces: what a content-addressed name says it holds."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def check_removable(name: str) -> str:
    """`name` when the pipeline may remove it from the store (state it replaces, c06
    `is_replaceable_state`); IntegrityError for anything else: a file of record is never removed."""
    check_store_name(name)
    if not is_replaceable_state(name):
        raise IntegrityError(f"the store never removes {name}: only state the pipeline replaces is removed")
    return name


def file_digests(path: str | os.PathLike) -> tuple[str, str, int]:
    """(sha256, md5, size) of a file, read once in 1 MiB pieces."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), size


@dataclass(frozen=True)
class StoredFile:
    """What a store's listing says of one file: its size, the md5 the store computed over the bytes
    it holds (None where it keeps none: a directory), and the store file holding it when it is a
    member of another (a text in a Drive text pack: `pack` is the pack's name)."""
    size: int
    md5: str | None = None
    pack: str | None = None


class Store:
    """The interface every store implements."""

    description = "store"
    # True when the methods may be called from several threads at once (content-addressed
    # uploads then run in parallel); a store that is not thread-safe keeps False.
    concurrent_uploads = False
    # True when writes are slow (Drive: ~2 a second): content-addressed uploads are then queued in
    # store_pending and made by a background uploader, behind the crawl (StoreMirror).
    deferred_uploads = False
    # More than 1 when `upload_files` stores up to that many texts as one file (Drive's text packs).
    text_pack_members = 0
    # True when `list_files` gives the md5 the store itself computed over the bytes it holds (Drive's
    # md5Checksum): a file whose md5 was proven once is then checked from the listing, unread.
    listing_md5 = False

    def exists(self, name: str) -> bool:
        raise NotImplementedError

    def size(self, name: str) -> int | None:
        """Size in bytes, or None if the name does not exist."""
        raise NotImplementedError

    def read_file(self, name: str) -> bytes:
        raise NotImplementedError

    def md5(self, name: str) -> str | None:
        """The MD5 the store itself records for `name` (Drive's md5Checksum), or None when the
        store records none (a directory) or has no such name."""
        return None

    def download_file(self, name: str, local_path: str | os.PathLike) -> None:
        raise NotImplementedError

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        raise NotImplementedError

    def remove(self, name: str) -> None:
        """Removes `name` for good (no trash, no earlier revision left): only state the pipeline
        replaces (`check_removable`; anything else raises IntegrityError). A name the store does
        not hold is no error."""
        raise NotImplementedError

    def upload_files(self, items: list[tuple[str, str | os.PathLike]]) -> None:
        """Uploads several files (name, local path) as `upload_file` would, one by one unless
        the store can do better; on an error some may be uploaded and some not."""
        for name, local_path in items:
            self.upload_file(name, local_path)

    def list_dir(self, prefix: str = "") -> list[str]:
        """Names directly inside folder `prefix` ('' is the top), sorted; files only."""
        raise NotImplementedError

    def quota(self) -> dict | None:
        """{'used': bytes, 'total': bytes} when the store knows it, else None."""
        return None

    def remove_stale_temps(self, older_than_seconds: float) -> int:
        """Removes temp files a killed write left behind (never a name); returns how many."""
        return 0

    def web_link(self, name: str) -> str | None:
        """A link a browser opens to see the stored file (search hits, show), or None."""
        return None

    def sweep_duplicates(self, folders: list[str]) -> dict | None:
        """Heals names held twice in store `folders` ('' the top) and reports what this session
        found and healed (DriveStore: Drive lets a folder hold a title twice); None when the store
        cannot hold a name twice (a directory)."""
        return None

    def list_files(self, prefix: str = "") -> dict[str, StoredFile]:
        """The files directly in folder `prefix`, as the store lists them now (never a cached
        listing): name -> StoredFile."""
        return {name: StoredFile(self.size(name) or 0) for name in self.list_dir(prefix)}

    def digests(self, name: str) -> tuple[str, str, int]:
        """(sha256, md5, size) of the bytes the store holds under `name`, read now; StoreError when
        it holds none or cannot give them."""
        with tempfile.TemporaryDirectory(prefix="kycourt-digests-") as temp:
            copy = Path(temp) / "copy"
            self.download_file(name, copy)
            return file_digests(copy)

    def other_copies(self, name: str, folder: str | os.PathLike) -> Iterator[Path]:
        """Other files the store holds under `name` (Drive: a title held twice), each downloaded
        into `folder` as it is asked for; none for a store that holds a name once (a directory)."""
        return iter(())

    def assemble(self, name: str, workspace: str | os.PathLike) -> bytes | None:
        """The bytes of a store file the store made of local files (Drive's text packs), made again
        from their copies in `workspace`; None for any other file, or when a part is not at hand."""
        return None

    def replace_damaged(self, name: str, local_path: str | os.PathLike) -> None:
        """Stores the bytes of `local_path` under `name` whatever the store holds there now (other
        bytes, a truncated file, nothing): for fixity's healing, whose caller has proven that these
        bytes are the ones the name stands for."""
        raise NotImplementedError


_store_temp_numbers = itertools.count()
_STORE_TEMP_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))


def _store_create_temp(folder: str) -> tuple[int, str]:
    """A new `.tmp-<pid>-<n>` file in `folder` (O_EXCL: never an existing one): (descriptor, path).
    Cheaper than tempfile.mkstemp's random names, which cost more than the write of a text. Mode
    0o666 less the umask, as any tool's files (mkstemp's 0o600 made every stored file private)."""
    while True:
        temp = os.path.join(folder, f".tmp-{os.getpid()}-{next(_store_temp_numbers)}")
        try:
            return os.open(temp, _STORE_TEMP_FLAGS, 0o666), temp
        except FileExistsError:
            continue   # left by a killed process that had this pid


class LocalStore(Store):
    """A directory as a store. Durable writes (c05_durable): temp file in the same folder, fsync,
    rename, fsync of the folder."""

    concurrent_uploads = True   # each write is its own temp file and rename

    def __init__(self, root: str | os.PathLike, *, create: bool = True):
        """`create`: a directory that is not there is made (a new archive's store); without it, a
        missing one is StoreMissing and nothing is made (a command that only reads, a typo)."""
        self.root = Path(root)
        self._root = os.fspath(self.root)
        self._staging = threading.local()      # .group: the upload_files group this thread is writing
        self.description = f"directory {self.root}"
        if not create:
            if not self.root.is_dir():
                raise StoreMissing(f"no store at {self.root}" + (" (a file, not a folder)" if self.root.exists() else ""))
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory {self.root}: {exc.strerror}") from None

    def _target(self, name: str) -> str:
        return os.path.join(self._root, check_store_name(name))

    def exists(self, name: str) -> bool:
        return os.path.isfile(self._target(name))

    def web_link(self, name: str) -> str | None:
        return Path(self._target(name)).resolve().as_uri()

    def size(self, name: str) -> int | None:
        try:
            return os.stat(self._target(name)).st_size
        except FileNotFoundError:
            return None

    def read_file(self, name: str) -> bytes:
        try:
            with open(self._target(name), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            raise StoreError(f"{name} is not in the store ({self.description})") from None

    def download_file(self, name: str, local_path: str | os.PathLike) -> None:
        source = self._target(name)
        if not os.path.isfile(source):
            raise StoreError(f"{name} is not in the store ({self.description})")
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)

        def copy(handle) -> None:
            with open(source, "rb") as reader:
                shutil.copyfileobj(reader, handle, 1024 * 1024)
        atomic_write(target, copy)

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        group = getattr(self._staging, "group", None)
        staged = self._stage_upload(name, local_path, durable=group is None)
        if staged is None:
            return
        if group is not None:        # upload_files makes the group durable, then renames
            group.append(staged)
            return
        self._promote(*staged)

    def remove(self, name: str) -> None:
        """Unlinks the file and syncs its folder."""
        target = self._target(check_removable(name))
        try:
            os.unlink(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._error(target, exc) from None
        sync_folders([os.path.dirname(target)])

    def upload_files(self, items: list[tuple[str, str | os.PathLike]]) -> None:
        """`upload_file` of each, but durable together: each is written to its temp name, then
        the group is made durable and renamed into place (`durable_rename`: one flush for the
        group instead of one per file, one fsync of each folder). No name appears before its bytes
        are durable. On an error the names not yet renamed are not, and their temps are removed."""
        staged: list[tuple[str, str]] = []        # (temp name, target), written, not yet durable
        self._staging.group = staged
        try:
            for name, local_path in items:
                self.upload_file(name, local_path)
            group, staged[:] = list(staged), []   # durable_rename removes what it does not rename
            try:
                durable_rename(group)
            except OSError as exc:
                raise self._error(exc.filename or self._root, exc) from None
        finally:
            self._staging.group = None
            for temp_name, _ in staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp_name)

    def _stage_upload(self, name: str, local_path: str | os.PathLike, *,
                      durable: bool) -> tuple[str, str] | None:
        """The file's bytes under a temp name beside the name's target: (temp, target); None when
        the store holds these bytes under that name already."""
        target = self._target(name)
        if is_content_addressed(name) and os.path.isfile(target):
            if filecmp.cmp(target, local_path, shallow=False):
                return None
            raise IntegrityError(f"store refuses to overwrite {name} with different bytes")

        def copy(handle) -> None:
            with open(local_path, "rb") as source:
                shutil.copyfileobj(source, handle, 1024 * 1024)
        return self._write_temp(target, copy, durable=durable), target

    def _promote(self, temp: str, target: str) -> None:
        """The durable temp renamed over its target, the folder synced (`durable_rename`)."""
        try:
            durable_rename([(temp, target)], synced=True)
        except OSError as exc:
            raise self._error(target, exc) from None

    def _write_temp(self, target: str, data, *, durable: bool) -> str:
        """`data` (bytes, or a function writing into the handle) into a new temp file in the
        target's folder (fsynced when `durable`); returns the temp's path."""
        folder = os.path.dirname(target)
        try:
            try:
                descriptor, temp = _store_create_temp(folder)
            except FileNotFoundError:   # the folder's first file (a mkdir per write costs a syscall)
                make_folders(folder)
                descriptor, temp = _store_create_temp(folder)
            write_temp_file(temp, data, sync=durable, descriptor=descriptor)
        except OSError as exc:
            raise self._error(target, exc) from None
        return temp

    def _error(self, target: str | os.PathLike, exc: OSError) -> StoreError:
        target = os.fspath(target)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreQuotaExceeded(f"store {self.root} is full writing {os.path.basename(target)}: "
                                      f"{exc.strerror}")
        where = os.path.relpath(target, self._root) if target != self._root else "its files"
        return StoreError(f"store {self.root} cannot write {where}: {exc.strerror}")

    def list_dir(self, prefix: str = "") -> list[str]:
        folder = self.root / check_store_name(prefix) if prefix else self.root
        if not folder.is_dir():
            return []
        base = PurePosixPath(prefix) if prefix else PurePosixPath()
        return sorted(str(base / entry.name) for entry in folder.iterdir()
                      if entry.is_file() and not entry.name.startswith(".tmp-"))

    def remove_stale_temps(self, older_than_seconds: float) -> int:
        """`.tmp-*` files (a write killed before its rename; up to a group of them after
        `upload_files`) anywhere in the store (db/ky_court/ too), older than the limit."""
        cutoff = time.time() - older_than_seconds
        removed = 0
        folders = [Path(root) for root, _dirs, _files in os.walk(self.root)]
        for folder in folders:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if (entry.name.startswith(".tmp-") and entry.is_file(follow_symlinks=False)
                            and entry.stat(follow_symlinks=False).st_mtime < cutoff):
                        Path(entry.path).unlink(missing_ok=True)
                        removed += 1
        return removed

    def quota(self) -> dict | None:
        usage = shutil.disk_usage(self.root)
        return {"used": usage.used, "total": usage.total}

    def list_files(self, prefix: str = "") -> dict[str, StoredFile]:
        """One scandir of the folder: each file's size from its stat (a directory keeps no md5)."""
        folder = os.path.join(self._root, check_store_name(prefix)) if prefix else self._root
        base = f"{prefix}/" if prefix else ""
        files: dict[str, StoredFile] = {}
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.name.startswith(".tmp-") and entry.is_file(follow_symlinks=False):
                        files[base + entry.name] = StoredFile(entry.stat(follow_symlinks=False).st_size)
        except FileNotFoundError:
            pass
        return files

    def digests(self, name: str) -> tuple[str, str, int]:
        """Read in place."""
        try:
            return file_digests(self._target(name))
        except FileNotFoundError:
            raise StoreError(f"{name} is not in the store ({self.description})") from None
        except OSError as exc:
            raise StoreError(f"store {self.root} cannot read {name}: {exc.strerror}") from None

    def replace_damaged(self, name: str, local_path: str | os.PathLike) -> None:
        """A durable temp beside the name, renamed over whatever the name holds."""
        def copy(handle) -> None:
            with open(local_path, "rb") as source:
                shutil.copyfileobj(source, handle, 1024 * 1024)
        target = self._target(name)
        self._promote(self._write_temp(target, copy, durable=True), target)
