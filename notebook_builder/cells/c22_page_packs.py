"""The store's copy of an SQLite database as page packs: a checkpoint sends the pages that changed.

Guarantees:
- A database in the store is a set of packs `db/<stem>/<order:08d>-<sha256 of the pack>.pack`, each a
  header and the zlib-compressed bytes of some of its pages; a pack's order is its push's sequence
  (the database's checkpoint_seq) x PUSH_PARTS + its part. A state is a pack whose header is a
  manifest: the packs of that state in the order they apply (a later pack's page wins), the page
  size, the page count and the sha256 of the whole file. The newest manifest whose packs are all held
  and whose pages hash to its sha256 is the store's database.
- `PagePacks.push(snapshot)` sends the pages whose digest differs from what the store holds (the
  workspace's page table, `checkpoint/<stem>.pages`), as packs of at most MAX_PACK_PAGES pages, the
  manifest last; with them go the live pages of packs being folded: packs under FOLD_BELOW live
  (least live first), paid from a credit that each push raises by the pages it changed (at least
  FOLD_MIN_PAGES), so folding at most doubles what a push sends; and, past MAX_PACKS, the smallest.
  The page table changes only once the manifest is held (durably); then the packs the state dropped
  that no kept resume point names are removed by name. A snapshot whose pages the store holds
  already sends nothing.
- A run's first push lists the store (`check_held`): a table whose packs the store lacks (a moved
  store, another account's) is not believed and every page is sent; a store holding a newer push
  than the table knows, not below this one's sequence, is another workspace's newer state: the push
  raises StaleState and sends nothing. Without a table every pack the store lists is another state's
  and, unpinned, is removed once the new state is held; `remove_unneeded` lists the folder and
  removes any pack no kept state names.
- A pack named by a kept resume point (`pinned`) is never removed, nor folded.
- `PagePacks.restore(target)` writes the store's database to `target` (checked against the
  manifest's sha256, then quick_check by the caller) and the page table that goes with it; a
  manifest with a pack missing or damaged is passed over for the one before.

Knobs read: none.
"""
from __future__ import annotations

import array
import dataclasses
import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .c00_config import IntegrityError, StoreError
from .c05_durable import durable_write
from .c20_store import Store

log_pages = logging.getLogger("kycourt.pages")

PACK_FOLDER = "db"
PACK_SUFFIX = ".pack"
PACK_MAGIC = b"KYPAGES1"
MAX_PACK_PAGES = 8192            # 32 MiB of 4 KiB pages a pack at most
MAX_PACKS = 48                   # a state of more packs folds its smallest
PUSH_PARTS = 1000                # a pack's order is its push's sequence x this + its part
FOLD_BELOW = 0.5                 # a pack with less than this share of its pages live is folded
FOLD_MIN_PAGES = 256             # the folding credit a push earns at least
FOLD_CREDIT_CAP = 4 * MAX_PACK_PAGES
_DIGEST_BYTES = 8
_PACK_NAME = re.compile(r"(\d{8,})-([0-9a-f]{64})" + re.escape(PACK_SUFFIX))


def pack_folder(database_name: str) -> str:
    """`db/ky_court` for `ky_court.sqlite`: where a database's packs live in the store."""
    return f"{PACK_FOLDER}/{Path(database_name).stem}"


def pack_sequence(name: str) -> int | None:
    """The order a pack's store name (or title) carries (its push's sequence x PUSH_PARTS + its
    part); None when it names no pack."""
    found = _PACK_NAME.fullmatch(name.rsplit("/", 1)[-1])
    return int(found.group(1)) if found else None


def pack_push(name: str) -> int:
    """The sequence of the push that sent a pack (the database's: its checkpoint_seq)."""
    return (pack_sequence(name) or 0) // PUSH_PARTS


class StaleState(IntegrityError):
    """The store holds a newer state of the database than the workspace's (another workspace sent it):
    sending this one would put an older state over it."""


def page_digests(data: bytes | memoryview, page_size: int) -> bytes:
    """The 8-byte BLAKE2b digest of each page of a database file, concatenated."""
    view = memoryview(data)
    out = bytearray()
    for start in range(0, len(view), page_size):
        out += hashlib.blake2b(view[start:start + page_size], digest_size=_DIGEST_BYTES).digest()
    return bytes(out)


def database_page_size(header: bytes) -> int:
    """The page size an SQLite file's header records (bytes 16-17; 1 means 65536)."""
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise IntegrityError("not an SQLite database: no page size to read")
    size = struct.unpack(">H", header[16:18])[0]
    return 65536 if size == 1 else size


def page_runs(pages: Iterable[int]) -> list[list[int]]:
    """Sorted page numbers as runs [first, count]."""
    runs: list[list[int]] = []
    for page in sorted(pages):
        if runs and runs[-1][0] + runs[-1][1] == page:
            runs[-1][1] += 1
        else:
            runs.append([page, 1])
    return runs


def run_pages(runs: Iterable[Iterable[int]]) -> list[int]:
    return [page for first, count in runs for page in range(first, first + count)]


# ------------------------------------------------------------------ decisions


@dataclass
class PackInfo:
    """A pack of the state the store holds: its name, sequence, pages and compressed size."""
    name: str
    seq: int
    pages: int
    size: int


def packs_to_fold(packs: list[PackInfo], live: Mapping[str, int], pinned: set[str], credit: int, *,
                  max_packs: int = MAX_PACKS, fold_below: float = FOLD_BELOW) -> tuple[list[str], int]:
    """Which packs of a state to fold into the next push (their live pages sent again, the pack
    then dropped), and the credit left: packs under `fold_below` live, least live first, while the
    credit pays for their live pages; then, while the state would hold more than `max_packs` packs
    with the next one, the packs of fewest live pages, whatever the credit. Pinned packs and packs
    with no live page (dropped for nothing) are never folded."""
    candidates = [pack for pack in packs if live.get(pack.name, 0) > 0 and pack.name not in pinned]
    fold: list[str] = []
    for pack in sorted(candidates, key=lambda pack: (live[pack.name] / max(1, pack.pages), pack.seq)):
        share = live[pack.name] / max(1, pack.pages)
        if share >= fold_below:
            break
        if live[pack.name] <= credit:
            fold.append(pack.name)
            credit -= live[pack.name]
    kept = [pack for pack in packs if live.get(pack.name, 0) > 0 and pack.name not in fold]
    for pack in sorted((pack for pack in kept if pack.name not in pinned), key=lambda pack: (live[pack.name], pack.seq)):
        if len(kept) + 1 <= max_packs:
            break
        fold.append(pack.name)
        kept.remove(pack)
    return fold, credit


# ------------------------------------------------------------------ the pack file


def write_pack(target: Path, header: dict[str, Any], database: Path, pages: list[int], page_size: int) -> None:
    """A pack file: PACK_MAGIC, the header's length and JSON, then the pages (1-based numbers, in
    order) read from `database`, compressed."""
    header = {**header, "runs": page_runs(pages)}
    encoded = json.dumps(header, sort_keys=True).encode("utf-8")

    def write(handle) -> None:
        handle.write(PACK_MAGIC + struct.pack(">I", len(encoded)) + encoded)
        compressor = zlib.compressobj(6)
        with open(database, "rb") as source:
            for page in sorted(pages):
                source.seek((page - 1) * page_size)
                handle.write(compressor.compress(source.read(page_size)))
        handle.write(compressor.flush())
    durable_write(target, write)


def read_pack(path: Path) -> tuple[dict[str, Any], bytes]:
    """(header, the pages' bytes in the order of its runs) of a pack file; IntegrityError when it is
    not a whole pack."""
    data = Path(path).read_bytes()
    if not data.startswith(PACK_MAGIC) or len(data) < len(PACK_MAGIC) + 4:
        raise IntegrityError(f"{Path(path).name} is not a page pack")
    length = struct.unpack(">I", data[len(PACK_MAGIC):len(PACK_MAGIC) + 4])[0]
    start = len(PACK_MAGIC) + 4
    try:
        header = json.loads(data[start:start + length])
        pages = zlib.decompress(data[start + length:])
    except (ValueError, zlib.error) as exc:
        raise IntegrityError(f"{Path(path).name} is a damaged page pack: {exc}") from None
    expected = sum(count for _, count in header.get("runs", [])) * int(header.get("page_size", 0))
    if len(pages) != expected:
        raise IntegrityError(f"{Path(path).name} holds {len(pages)} bytes of pages, its header says {expected}")
    return header, pages


# ------------------------------------------------------------------ the page table


@dataclass
class PageTable:
    """What the store holds of one database, as the workspace remembers it: the state's packs in
    order, each page's digest and pack, the next sequence and the folding credit."""
    page_size: int = 0
    packs: list[PackInfo] = field(default_factory=list)
    digests: bytes = b""
    owners: array.array = field(default_factory=lambda: array.array("H"))
    next_seq: int = 1
    credit: int = 0

    @property
    def page_count(self) -> int:
        return len(self.owners)

    def live(self) -> dict[str, int]:
        counts = [0] * len(self.packs)
        for owner in self.owners:
            counts[owner] += 1
        return {pack.name: counts[number] for number, pack in enumerate(self.packs)}

    def save(self, path: Path) -> None:
        header = {"format": 1, "page_size": self.page_size, "next_seq": self.next_seq, "credit": self.credit,
                  "packs": [dataclasses.astuple(pack) for pack in self.packs], "page_count": self.page_count}
        encoded = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n"
        durable_write(path, encoded + self.digests + self.owners.tobytes())

    @classmethod
    def load(cls, path: Path) -> "PageTable | None":
        """The table at `path`; None when there is none or it cannot be read (a push then sends every page)."""
        try:
            data = path.read_bytes()
            line, _, rest = data.partition(b"\n")
            header = json.loads(line)
            count = int(header["page_count"])
            owners = array.array("H")
            owners.frombytes(rest[count * _DIGEST_BYTES:])
            table = cls(page_size=int(header["page_size"]), packs=[PackInfo(*pack) for pack in header["packs"]],
                        digests=rest[:count * _DIGEST_BYTES], owners=owners, next_seq=int(header["next_seq"]),
                        credit=int(header.get("credit", 0)))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log_pages.warning("page table %s is unreadable (%s): every page is sent again", path, exc)
            return None
        if len(table.digests) != count * _DIGEST_BYTES or len(owners) != count or (
                owners and max(owners) >= len(table.packs)):
            log_pages.warning("page table %s does not add up: every page is sent again", path)
            return None
        return table


# ------------------------------------------------------------------ push and restore


@dataclass
class PushResult:
    uploaded: bool
    changed_pages: int = 0
    folded_pages: int = 0
    packs_sent: int = 0
    bytes_sent: int = 0
    removed: int = 0
    manifest: str | None = None       # the store name of the state's manifest
    packs: list[str] = field(default_factory=list)   # the state's packs


@dataclass
class RestoredDatabase:
    manifest: str
    packs: list[str]
    pages: int
    rejected: list[tuple[str, str]] = field(default_factory=list)


class PagePacks:
    """One database's packs in one store, pushed from one workspace (see the module docstring)."""

    def __init__(self, store: Store | None, database_name: str, checkpoint_dir: str | os.PathLike, *,
                 table_path: str | os.PathLike | None = None):
        self.store = store
        self.folder = pack_folder(database_name)
        self.checkpoint_dir = Path(checkpoint_dir)
        self.table_path = Path(table_path) if table_path else self.checkpoint_dir / f"{Path(database_name).stem}.pages"

    def _name(self, seq: int, sha256: str) -> str:
        return f"{self.folder}/{seq:08d}-{sha256}{PACK_SUFFIX}"

    def held(self) -> list[str]:
        """The pack names the store lists, oldest first."""
        return sorted((name for name in self.store.list_dir(self.folder) if pack_sequence(name) is not None),
                      key=pack_sequence)

    def state(self) -> list[str]:
        """The packs of the state the workspace's table says the store holds ([] without one)."""
        table = PageTable.load(self.table_path)
        return [pack.name for pack in table.packs] if table else []

    # ---------------------------------------------------------------- push

    def push(self, snapshot: str | os.PathLike, *, sequence: int | None = None, check_held: bool = False,
             pinned: set[str] | None = frozenset(), extra: Mapping[str, Any] = {}) -> PushResult:
        """Sends the pages of `snapshot` the store does not hold (see the module docstring).
        `sequence`: the push's (the database's checkpoint_seq; None: the table's next). `check_held`:
        list the store first (a run's first push): a table whose packs the store lacks (a moved or
        another store) is not believed, and a store holding a newer push than the table knows, of a
        sequence not below this one, raises StaleState. `pinned`: the packs kept resume points name
        (None: not known now, so nothing is removed). `extra` goes into the manifest's header. A store
        fault raises StoreError with the table unchanged."""
        snapshot = Path(snapshot)
        data = snapshot.read_bytes()
        page_size = database_page_size(data[:100])
        if len(data) % page_size:
            raise IntegrityError(f"{snapshot} is {len(data)} bytes, not a whole number of {page_size}-byte pages")
        digests = page_digests(data, page_size)
        count = len(data) // page_size
        table = PageTable.load(self.table_path)
        if table is not None and table.page_size != page_size:
            table = None
        strays: list[str] = []          # without a table: every pack the store lists is another state's
        if table is None or check_held:
            listed = self.held()
            if table is not None and not {pack.name for pack in table.packs} <= set(listed):
                log_pages.warning("the store lacks packs the workspace's page table of %s names (a moved or "
                                  "another store): every page is sent", self.folder)
                table = None
            newest = max((pack_push(name) for name in listed), default=0)
            known = max((pack_push(pack.name) for pack in table.packs), default=0) if table else 0
            if sequence is not None and newest > known and newest >= sequence:
                raise StaleState(f"the store holds a newer state of its database (checkpoint {newest}) than this "
                                 f"workspace's ({sequence}): another workspace sent it; move this workspace aside "
                                 "and run again to restore the store's newest state")
            if table is None:
                strays = listed
                table = PageTable(page_size=page_size, next_seq=newest + 1)
        if sequence is not None and sequence < table.next_seq:
            raise StaleState(f"this workspace's database (checkpoint {sequence}) is older than the state it last sent "
                             f"the store (checkpoint {table.next_seq - 1})")
        changed = [page for page in range(1, count + 1)
                   if page > table.page_count
                   or digests[(page - 1) * _DIGEST_BYTES:page * _DIGEST_BYTES]
                   != table.digests[(page - 1) * _DIGEST_BYTES:page * _DIGEST_BYTES]]
        if not changed and count == table.page_count and table.packs and not strays:
            return PushResult(uploaded=True, manifest=table.packs[-1].name,
                              packs=[pack.name for pack in table.packs])
        changed_set = set(changed)
        live = [0] * len(table.packs)
        for page, owner in enumerate(table.owners[:count], start=1):
            if page not in changed_set:
                live[owner] += 1
        live_by_name = {pack.name: live[number] for number, pack in enumerate(table.packs)}
        credit = min(FOLD_CREDIT_CAP, table.credit + max(len(changed), FOLD_MIN_PAGES))
        fold, credit = packs_to_fold(table.packs, live_by_name, set(pinned or ()), credit)
        fold_numbers = {number for number, pack in enumerate(table.packs) if pack.name in fold}
        folded = [page for page, owner in enumerate(table.owners[:count], start=1)
                  if owner in fold_numbers and page not in changed_set]
        sent = sorted(changed_set.union(folded))
        kept = [pack for number, pack in enumerate(table.packs) if live[number] > 0 and number not in fold_numbers]
        header_base = {"format": 1, "database": Path(self.folder).name, "page_size": page_size}
        new_packs: list[PackInfo] = []
        result = PushResult(uploaded=False, changed_pages=len(changed), folded_pages=len(folded))
        push = sequence if sequence is not None else table.next_seq
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".packs-", dir=self.checkpoint_dir) as temp:
            groups = [sent[start:start + MAX_PACK_PAGES] for start in range(0, len(sent), MAX_PACK_PAGES)]
            for number, group in enumerate(groups):
                final = number == len(groups) - 1
                seq = push * PUSH_PARTS + number
                header = dict(header_base, seq=seq)
                if final:
                    header.update(extra, manifest=True, page_count=count, sha256=hashlib.sha256(data).hexdigest(),
                                  packs=[pack.name for pack in kept + new_packs])
                path = Path(temp) / f"{seq}.pack"
                write_pack(path, header, snapshot, group, page_size)
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                name = self._name(seq, sha)
                self.store.upload_file(name, path)
                size = path.stat().st_size
                new_packs.append(PackInfo(name, seq, len(group), size))
                result.packs_sent += 1
                result.bytes_sent += size
                path.unlink()
        state = kept + new_packs
        owners = array.array("H", [0] * count)
        position = {pack.name: number for number, pack in enumerate(state)}
        for page in range(1, count + 1):
            if page <= table.page_count and page not in changed_set and table.owners[page - 1] not in fold_numbers:
                owners[page - 1] = position[table.packs[table.owners[page - 1]].name]
        for pack, group in zip(new_packs, [sent[start:start + MAX_PACK_PAGES]
                                           for start in range(0, len(sent), MAX_PACK_PAGES)]):
            for page in group:
                owners[page - 1] = position[pack.name]
        new_table = PageTable(page_size=page_size, packs=state, digests=digests, owners=owners, next_seq=push + 1,
                              credit=credit)
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        new_table.save(self.table_path)
        result.uploaded = True
        result.manifest = new_packs[-1].name
        result.packs = [pack.name for pack in state]
        if pinned is not None:
            dropped = [pack.name for pack in table.packs] + strays
            result.removed = self._remove([name for name in dropped if name not in set(result.packs) | set(pinned)])
        return result

    def _remove(self, names: list[str]) -> int:
        removed = 0
        for name in names:
            try:
                self.store.remove(name)
                removed += 1
            except StoreError as exc:
                log_pages.warning("cannot remove %s, which no state needs: %s", name, exc)
        return removed

    def remove_unneeded(self, needed: set[str]) -> int:
        """Removes the packs the store lists that no kept state names (a push removes the packs its
        own state drops; this catches the rest: a killed push's, an unpinned point's); returns how
        many. A removal the store refuses is logged (a later sweep tries again)."""
        try:
            listed = self.held()
        except StoreError as exc:
            log_pages.warning("cannot list %s to remove packs no state needs: %s", self.folder, exc)
            return 0
        return self._remove([name for name in listed if name not in needed])

    # ---------------------------------------------------------------- restore

    def restore(self, target: str | os.PathLike, *, manifest: str | None = None,
                downloads: str | os.PathLike | None = None) -> RestoredDatabase:
        """Writes the store's newest whole state (or the state of `manifest`) to `target` and the
        page table that goes with it. IntegrityError when no state can be made whole; StoreError
        when the store cannot be read. `downloads`: a folder whose packs (downloaded and checked
        there before) are not downloaded again, and where this restore leaves its own."""
        target = Path(target)
        listed = self.held()
        candidates = [manifest] if manifest is not None else list(reversed(listed))
        rejected: list[tuple[str, str]] = []
        with tempfile.TemporaryDirectory(prefix=".restore-packs-", dir=target.parent) as temp:
            folder = Path(downloads) if downloads is not None else Path(temp)
            folder.mkdir(parents=True, exist_ok=True)
            cache: dict[str, Path] = {}

            def fetch(name: str) -> Path:
                if name not in cache:
                    local = folder / Path(name).name
                    if not local.is_file():
                        self.store.download_file(name, local)
                        found = _PACK_NAME.fullmatch(Path(name).name)
                        if found is None or hashlib.sha256(local.read_bytes()).hexdigest() != found.group(2):
                            local.unlink(missing_ok=True)
                            raise IntegrityError(f"{name} does not hash to its name")
                    cache[name] = local
                return cache[name]

            for name in candidates:
                try:
                    header, _ = read_pack(fetch(name))
                    if not header.get("manifest"):
                        continue
                    missing = [pack for pack in header["packs"] if pack not in listed and pack != name]
                    if missing:
                        raise IntegrityError(f"{len(missing)} of its packs are gone ({missing[0]})")
                    restored = self._assemble(name, header, fetch, target, listed)
                    restored.rejected = rejected
                    return restored
                except IntegrityError as exc:
                    rejected.append((name, str(exc)))
                    log_pages.warning("restore passes over %s: %s", name, exc)
        reasons = "; ".join(f"{name}: {reason}" for name, reason in rejected) or "no pack"
        raise IntegrityError(f"the store's packs in {self.folder} make no whole database ({reasons})")

    def _assemble(self, manifest: str, header: dict[str, Any], fetch, target: Path, listed: list[str]
                  ) -> RestoredDatabase:
        page_size, count = int(header["page_size"]), int(header["page_count"])
        names = list(header["packs"]) + ([manifest] if manifest not in header["packs"] else [])
        owners = array.array("H", [0xFFFF] * count)
        infos: list[PackInfo] = []
        temp = target.with_name(target.name + ".assemble")
        with open(temp, "wb") as out:
            out.truncate(count * page_size)
            for number, name in enumerate(names):
                pack_header, pages = read_pack(fetch(name))
                if int(pack_header.get("page_size", 0)) != page_size:
                    raise IntegrityError(f"{name} has pages of another size")
                numbers = run_pages(pack_header["runs"])
                for index, page in enumerate(numbers):
                    if page > count:
                        continue
                    out.seek((page - 1) * page_size)
                    out.write(pages[index * page_size:(index + 1) * page_size])
                    owners[page - 1] = number
                infos.append(PackInfo(name, int(pack_header["seq"]), len(numbers), fetch(name).stat().st_size))
        if 0xFFFF in owners:
            temp.unlink(missing_ok=True)
            raise IntegrityError(f"page {owners.index(0xFFFF) + 1} is in none of its packs")
        data = temp.read_bytes()
        if hashlib.sha256(data).hexdigest() != header["sha256"]:
            temp.unlink(missing_ok=True)
            raise IntegrityError("its pages do not hash to the sha256 it records")
        os.replace(temp, target)
        table = PageTable(page_size=page_size, packs=infos, digests=page_digests(data, page_size), owners=owners,
                          next_seq=max(pack_push(name) for name in listed) + 1)
        self.table_path.parent.mkdir(parents=True, exist_ok=True)
        table.save(self.table_path)
        return RestoredDatabase(manifest, names, count)
