"""The Store: the durable mirror of the workspace (a local directory, or Google Drive).

Guarantees:
- Names are POSIX relative paths (`pdf_by_hash/<sha256>.pdf`, `status.json`).
- Writes are atomic: a reader sees the old bytes or the new, never a torn file.
- A name under `pdf_by_hash/` or `text/` is content-addressed: writing other
  bytes to an existing one raises `IntegrityError`; writing the same bytes
  again is a no-op. Nothing is ever deleted.
- `StoreQuotaExceeded` (a `StoreError`) tells callers the store is full, so
  they can keep working on local state and catch the store up later.

`LocalStore` is used by tests and command-line runs; `DriveStore`
(drive_store.py) implements the same methods over pydrive2.
"""
from __future__ import annotations

import errno
import filecmp
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from .c00_config import IntegrityError, StoreError, StoreQuotaExceeded

CONTENT_ADDRESSED_PREFIXES = ("pdf_by_hash/", "text/")


def check_store_name(name: str) -> str:
    """A store name must be relative, normalized and stay inside the store."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name or str(path) != name:
        raise StoreError(f"invalid store name {name!r}: expected a relative path like pdf_by_hash/<sha>.pdf")
    return name


def pdf_store_name(sha256: str) -> str:
    """The one spelling of a PDF's content-addressed name (store and workspace alike)."""
    return f"pdf_by_hash/{sha256}.pdf"


def text_store_name(sha256: str) -> str:
    """The text extracted from the PDF whose hash is `sha256`."""
    return f"text/{sha256}.txt"


def is_content_addressed(name: str) -> bool:
    return name.startswith(CONTENT_ADDRESSED_PREFIXES)


class Store:
    """The interface every store implements."""

    description = "store"
    # True when the methods may be called from several threads at once (content-addressed
    # uploads then run in parallel); a store that is not thread-safe keeps False.
    concurrent_uploads = False

    def exists(self, name: str) -> bool:
        raise NotImplementedError

    def size(self, name: str) -> int | None:
        """Size in bytes, or None if the name does not exist."""
        raise NotImplementedError

    def read_file(self, name: str) -> bytes:
        raise NotImplementedError

    def download_file(self, name: str, local_path: str | os.PathLike) -> None:
        raise NotImplementedError

    def write_bytes(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        raise NotImplementedError

    def list_dir(self, prefix: str = "") -> list[str]:
        """Names directly inside folder `prefix` ('' is the top), sorted; files only."""
        raise NotImplementedError

    def quota(self) -> dict | None:
        """{'used': bytes, 'total': bytes} when the store knows it, else None."""
        return None


class LocalStore(Store):
    """A directory as a store. Atomic writes: temp file in the same folder, fsync, os.replace."""

    concurrent_uploads = True   # each write is its own temp file and rename

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.description = f"directory {self.root}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory {self.root}: {exc.strerror}") from None

    def _path(self, name: str) -> Path:
        return self.root / check_store_name(name)

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def size(self, name: str) -> int | None:
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            return None

    def read_file(self, name: str) -> bytes:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            raise StoreError(f"{name} is not in the store ({self.description})") from None

    def download_file(self, name: str, local_path: str | os.PathLike) -> None:
        source = self._path(name)
        if not source.is_file():
            raise StoreError(f"{name} is not in the store ({self.description})")
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(target.name + ".download")
        shutil.copyfile(source, temp)
        os.replace(temp, target)

    def write_bytes(self, name: str, data: bytes) -> None:
        target = self._path(name)
        if is_content_addressed(name) and target.is_file():
            if target.read_bytes() == data:
                return
            raise IntegrityError(f"store refuses to overwrite {name} with different bytes")
        self._atomic_write(target, lambda handle: handle.write(data))

    def upload_file(self, name: str, local_path: str | os.PathLike) -> None:
        target = self._path(name)
        local_path = Path(local_path)
        if is_content_addressed(name) and target.is_file():
            if filecmp.cmp(target, local_path, shallow=False):
                return
            raise IntegrityError(f"store refuses to overwrite {name} with different bytes")

        def copy(handle) -> None:
            with open(local_path, "rb") as source:
                shutil.copyfileobj(source, handle, 1024 * 1024)
        self._atomic_write(target, copy)

    def _atomic_write(self, target: Path, write) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temp_name = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        except OSError as exc:
            raise self._error(target, exc) from None
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_name, target)
        except OSError as exc:
            Path(temp_name).unlink(missing_ok=True)
            raise self._error(target, exc) from None
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    def _error(self, target: Path, exc: OSError) -> StoreError:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreQuotaExceeded(f"store {self.root} is full writing {target.name}: {exc.strerror}")
        return StoreError(f"store {self.root} cannot write {target.relative_to(self.root)}: {exc.strerror}")

    def list_dir(self, prefix: str = "") -> list[str]:
        folder = self.root / check_store_name(prefix) if prefix else self.root
        if not folder.is_dir():
            return []
        base = PurePosixPath(prefix) if prefix else PurePosixPath()
        return sorted(str(base / entry.name) for entry in folder.iterdir()
                      if entry.is_file() and not entry.name.startswith(".tmp-"))

    def quota(self) -> dict | None:
        usage = shutil.disk_usage(self.root)
        return {"used": usage.used, "total": usage.total}
