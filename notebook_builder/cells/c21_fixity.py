"""Fixity: every stored PDF and text holds what its name says, proven on a rolling schedule and
healed from a good copy; and no document is `extracted` without its figures.

Guarantees:
- `audit_fixity` is one audit run (kv `fixity_run`). Every run compares the store's listing with
  the names the archive refers to: a name missing is damage; one listed with another size than its
  bytes were proven to have (a PDF's size_bytes before any proof), or, where the listing carries the
  store's own md5 (Drive), another md5 than the one proven, is read in this run.
- Every run proves a slice: a name is due when its bucket (its hash, or its Drive text pack's, modulo
  `cycle`) is the run's, when its last proof is `cycle` runs old, and while it is damaged; so each
  name is proven at least once every `cycle` runs, as restic's `check --read-data-subset=n/t`
  covers a repository in t runs. A run that proves its slice whole records it in one kv row
  (`fixity_buckets`); a file's own row changes only when what is known of it does, so a session
  with nothing new changes a handful of the database's pages, not the whole fixity table. A proof costs what the store allows: an md5 the listing gives and
  the record holds proves the bytes unread (Drive; a name never proven whose workspace copy hashes
  right is proven from that copy at once); otherwise the store's bytes are read (a directory: in
  place). The workspace's copy of a due name is hashed too. `read_all` reads every name every run.
- What a name must hash to: a PDF's and a pack's own name; a text's, the hash derive recorded, else
  its first reading (when the workspace's copy differs, the one whose length is extracted_chars);
  kept in `fixity` and never changed after.
- Damage (other bytes, another size, missing) is healed from the first good copy: the workspace's,
  a file of pdf_backup/, another file the store holds under the name, the court (a PDF, through
  `fetch_from_court`), put back with `Store.replace_damaged`; a damaged workspace copy is replaced
  too. Each damage is a `fixity_events` row saying how it was healed or why not; `unhealed` names
  what is still damaged. A missing name the store backlog holds is lag, not damage.
- `FixityRecords.extracted_without_figures` lists `extracted` documents lacking extracted_chars or
  pages (verify puts them back in the extract queue with c13 `TextRecords.back_to_extract`).
- `bagit_manifest(rows)`: BagIt's `manifest-sha256.txt` lines.

Knobs read: none (verify passes `cycle` and `read_all`, from AUDIT and VERIFY_HASHES).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .c00_config import IntegrityError, StoreError, utc_now
from .c05_durable import atomic_write
from .c06_layout import OCR_MERGE, ocr_text_store_name, pdf_store_name, text_store_name
from .c10_database import Tables
from .c14_derived import DerivedRecords
from .c17_snapshots import StoreState
from .c20_store import Store, StoredFile, file_digests

log_fixity = logging.getLogger("kycourt.fixity")

FIXITY_CYCLE = 10                 # runs in which every stored file is proven at least once
KV_FIXITY_RUN = "fixity_run"      # the number of the last audit run
KV_FIXITY_BUCKETS = "fixity_buckets"   # the last run that proved each bucket whole (FixityRecords.bucket_proofs)
FIXITY_COLUMNS = ("name", "sha256", "md5", "size", "first_run", "checked_run", "checked_at", "damage")
BACKUP_FOLDER = "pdf_backup"
_FIXITY_HEX = re.compile(r"[0-9a-f]{64}")
_FIXITY_SELF_NAMED = re.compile(r"(?:pdf_by_hash/|text/pack-|court_text/)([0-9a-f]{64})\.(?:pdf|zip|txt)")


# ------------------------------------------------------------------ decisions


def fixity_cycle(share: float) -> int:
    """Runs to prove every stored file in: FIXITY_CYCLE, fewer when AUDIT asks for more than that
    share a run (1 for all)."""
    if share <= 0:
        return FIXITY_CYCLE
    return max(1, min(FIXITY_CYCLE, math.ceil(1 / share - 1e-9)))


def fixity_bucket(key: str, cycle: int) -> int:
    """The run (modulo `cycle`) in which a name is proven: from the hash its key holds (a PDF and
    its texts share their PDF's), else from the key's own hash."""
    found = _FIXITY_HEX.search(key)
    digest = found.group() if found else hashlib.sha256(key.encode("utf-8")).hexdigest()
    return int(digest[:8], 16) % cycle


def fixity_due(bucket: int, run: int, cycle: int, first_run: int, checked_run: int | None) -> bool:
    """Whether a sound name is proven in run `run`: its bucket's turn, or its last proof (its
    first sighting, when never proven) `cycle` runs old."""
    return bucket == run % cycle or run - (first_run if checked_run is None else checked_run) >= cycle


def self_named_sha256(name: str) -> str | None:
    """The sha256 a name states of its own bytes (a PDF, a text pack, a court text), else None (a
    text is named by its PDF's hash)."""
    found = _FIXITY_SELF_NAMED.fullmatch(name)
    return found.group(1) if found else None


def bagit_manifest(rows: Sequence[tuple[str, str]]) -> str:
    """BagIt's `manifest-sha256.txt`: one `<sha256>  <path>` line per file (two spaces), for an
    export to carry the hashes of what it holds (`DerivedRecords.manifest_rows()` gives the rows)."""
    return "".join(f"{sha256}  {name}\n" for sha256, name in rows)


# ------------------------------------------------------------------ records


class FixityRecords(Tables):
    """The `fixity` and `fixity_events` tables, and the documents' figures."""

    def next_run(self) -> int:
        with self.transaction():
            run = int(self.kv_get(KV_FIXITY_RUN, "0") or 0) + 1
            self.db.kv_set(KV_FIXITY_RUN, str(run))
        return run

    def load(self, key_of: Callable[[str], str] = lambda name: name) -> dict[str, dict[str, Any]]:
        """name -> its row (a dict of FIXITY_COLUMNS), its last proof the later of its own and its
        bucket's (`bucket_proofs`; `key_of(name)` is what its bucket is taken from: a packed text's
        pack): a slice proven whole is one kv row, not a row a file."""
        proofs = self.bucket_proofs()
        rows = {}
        for values in self.conn.execute(f"SELECT {', '.join(FIXITY_COLUMNS)} FROM fixity"):
            row = dict(zip(FIXITY_COLUMNS, values))
            if proofs and row["checked_run"] is not None and row["damage"] is None:
                bucket = fixity_bucket(key_of(row["name"]), proofs["cycle"])
                run, at = proofs["runs"].get(str(bucket), (None, None))
                if run is not None and run > row["checked_run"]:
                    row["checked_run"], row["checked_at"] = run, at
            rows[values[0]] = row
        return rows

    def bucket_proofs(self) -> dict[str, Any] | None:
        """{"cycle": c, "runs": {bucket: [run, at]}}: the last run that proved each bucket's files
        whole, under that cycle; None when there is none."""
        try:
            proofs = json.loads(self.kv_get(KV_FIXITY_BUCKETS) or "null")
        except ValueError:
            return None
        return proofs if isinstance(proofs, dict) and isinstance(proofs.get("runs"), dict) else None

    def note_bucket_proofs(self, cycle: int, buckets: Sequence[int], run: int) -> None:
        """Buckets `buckets` (of `cycle`) were proven whole in `run`."""
        proofs = self.bucket_proofs()
        if not proofs or proofs.get("cycle") != cycle:
            proofs = {"cycle": cycle, "runs": {}}
        at = utc_now()
        for bucket in buckets:
            proofs["runs"][str(bucket)] = [run, at]
        with self.transaction():
            self.db.kv_set(KV_FIXITY_BUCKETS, json.dumps(proofs, sort_keys=True))

    def save(self, rows: Sequence[dict[str, Any]]) -> None:
        columns = FIXITY_COLUMNS
        updates = ", ".join(f"{column} = excluded.{column}" for column in columns[1:])
        with self.transaction():
            self.conn.executemany(
                f"INSERT INTO fixity ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT(name) DO UPDATE SET {updates}", [[row[c] for c in columns] for row in rows])

    def add_events(self, events: Sequence[tuple[int, str, str, str, str]]) -> None:
        """(run, place, name, damage, outcome) rows."""
        with self.transaction():
            self.conn.executemany("INSERT INTO fixity_events(at, run, place, name, damage, outcome) "
                                  "VALUES (?, ?, ?, ?, ?, ?)", [(utc_now(), *event) for event in events])

    def events(self, limit: int = 100) -> list[Any]:
        return self.conn.execute("SELECT * FROM fixity_events ORDER BY event_id DESC LIMIT ?", (limit,)).fetchall()

    def expectations(self) -> dict[str, tuple[str | None, int | None]]:
        """Store name -> (sha256, size) its bytes must have, as the documents know it before any proof:
        a PDF's size_bytes, the hash derive recorded of the text it read."""
        expected: dict[str, tuple[str | None, int | None]] = {}
        for row in DerivedRecords(self.db).audit_candidates():
            sha = row["sha256"]
            expected[pdf_store_name(sha)] = (sha, row["size_bytes"])
            if row["text_sha256"]:
                name = ocr_text_store_name(sha) if row["text_source"] == OCR_MERGE else text_store_name(sha)
                expected[name] = (row["text_sha256"], None)
        return expected

    def text_characters(self) -> dict[str, int]:
        """text/<sha256>.txt -> the characters extraction recorded of it."""
        return {text_store_name(row["sha256"]): row["extracted_chars"]
                for row in DerivedRecords(self.db).audit_candidates() if row["extracted_chars"] is not None}

    def documents_holding(self, sha256: str) -> list[str]:
        return [row[0] for row in self.conn.execute(
            "SELECT document_id FROM documents WHERE sha256 = ? AND status IN ('downloaded', 'extracted') "
            "ORDER BY rowid", (sha256,))]

    def extracted_without_figures(self) -> list[Any]:
        """`extracted` documents whose extracted_chars or pages is NULL: document_id, sha256, and both."""
        return self.conn.execute(
            "SELECT document_id, sha256, extracted_chars, pages FROM documents WHERE status = 'extracted' "
            "AND (extracted_chars IS NULL OR pages IS NULL) ORDER BY rowid").fetchall()


# ------------------------------------------------------------------ the audit


@dataclass
class FixityResult:
    run: int = 0
    cycle: int = FIXITY_CYCLE
    read_all: bool = False
    names: int = 0               # store files audited: the names referred to, and Drive's packs holding texts
    listed: int = 0              # of them, compared with the listing (presence, size, the store's md5)
    due: int = 0                 # proven this run (the slice)
    proven_unread: int = 0       # proven by the listing's md5 (Drive), no byte read
    read: int = 0                # store files read
    bytes_read: int = 0
    workspace_read: int = 0      # workspace copies hashed
    found: list[str] = field(default_factory=list)      # "place name: damage" of each damage found
    healed: list[str] = field(default_factory=list)     # "name (from source)"
    healed_names: set[str] = field(default_factory=set)  # the store names healed
    unhealed: list[str] = field(default_factory=list)   # "name: damage; why it is not healed"
    missing: list[str] = field(default_factory=list)    # names still missing from the store
    errors: list[str] = field(default_factory=list)     # names the store could not give now (proven later)
    seconds: float = 0.0

    def describe(self) -> str:
        slice_words = "every file read" if self.read_all else f"slice {self.run % self.cycle + 1} of {self.cycle}"
        text = (f"run {self.run}, {slice_words}: {self.names} files listed, {self.due} proven "
                f"({self.proven_unread} by the store's md5, {self.read} read, {_fixity_bytes(self.bytes_read)}; "
                f"{self.workspace_read} workspace copies hashed), {len(self.found)} damaged, "
                f"{len(self.healed)} healed, {len(self.unhealed)} not healed, {self.seconds:.1f}s")
        if self.healed:
            text += f" (healed: {', '.join(self.healed[:3])}{', ...' if len(self.healed) > 3 else ''})"
        return text


def _fixity_bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def audit_fixity(db, store: Store, workspace: Path, names: set[str], *, cycle: int = FIXITY_CYCLE,
                 read_all: bool = False, pending: set[str] = frozenset(),
                 fetch_from_court: Callable[[str, Path], bool] | None = None,
                 interrupted: Callable[[], bool] = lambda: False) -> FixityResult:
    """One audit run over `names` (the store names the archive refers to); see the module docstring.
    `pending`: names the store backlog holds. `fetch_from_court(sha256, path)` writes a PDF the court
    gives for a document holding that hash to `path` (True if it wrote something). `interrupted`:
    a stop was asked for (the slice's rest waits for the next run)."""
    return _FixityAudit(db, store, Path(workspace), cycle=cycle, read_all=read_all, pending=pending,
                        fetch_from_court=fetch_from_court, interrupted=interrupted).run(names)


class _FixityAudit:
    """The state of one audit run: records, the listing, what was found."""

    def __init__(self, db, store: Store, workspace: Path, *, cycle: int, read_all: bool, pending,
                 fetch_from_court, interrupted):
        self.db, self.store, self.workspace = db, store, workspace
        self.records = FixityRecords(db)
        self.pending = set(pending)
        self.fetch_from_court, self.interrupted = fetch_from_court, interrupted
        self.result = FixityResult(cycle=cycle, read_all=read_all)
        self.rows: dict[str, dict[str, Any]] = {}
        self.changed: set[str] = set()
        self.listing: dict[str, StoredFile] = {}
        self.expected: dict[str, tuple[str | None, int | None]] = {}   # FixityRecords.expectations
        self.pack_members: dict[str, list[str]] = {}    # a pack's name -> the names it holds
        self.damaged: dict[str, str] = {}            # store name -> damage
        self.workspace_damaged: dict[str, str] = {}
        self.local_digests: dict[str, tuple[str, str, int] | None] = {}   # the bytes at hand (_local_copy)
        self.local_paths: dict[str, Path] = {}
        self.store_good: set[str] = set()           # names whose store bytes were proven this run
        self.events: list[tuple[int, str, str, str, str]] = []
        self._backups: dict[int, list[Path]] | None = None
        self._characters: dict[str, int] | None = None
        self._temp = tempfile.TemporaryDirectory(prefix=".fixity-", dir=workspace)

    # ------------------------------------------------------------ the run

    def run(self, names: set[str]) -> FixityResult:
        started = time.monotonic()
        result = self.result
        try:
            result.run = self.records.next_run()
            self._load(names)
            audited = self._audited(names)
            result.names = len(audited)
            suspects = self._compare_listing(audited)
            due = [name for name in audited if name in self.listing and name not in self.damaged
                   and self._is_due(name, suspects)]
            # A pack before its texts, a PDF before its texts: a pack read once serves its members.
            due.sort(key=lambda name: (self._pack_of(name) or name, self._pack_of(name) is not None))
            result.due = len(due)
            for name in due:
                if self.interrupted():
                    break
                self._prove(name, suspects.get(name))
            self._damage_pack_members(audited)
            for pack in sorted(name for name in self.damaged if name in self.pack_members):
                if self._heal(pack, self.damaged[pack]):
                    for member in self.pack_members[pack]:
                        if self.damaged.get(member, "").startswith("its pack "):
                            del self.damaged[member]
            for name in sorted(name for name in self.damaged if name not in self.pack_members):
                self._heal(name, self.damaged[name])
            for name in sorted(self.workspace_damaged):
                self._heal_workspace(name, self.workspace_damaged[name])
            result.missing = sorted(name for name in audited if name not in self.listing
                                    and name not in self.store_good)
            whole = not self.interrupted() and not result.errors
            if not whole:       # the bucket's proof is not recorded: each file proven keeps its own
                self.changed |= self.store_good
            self.records.save([self.rows[name] for name in sorted(self.changed)])
            self.records.add_events(self.events)
            if whole:
                buckets = range(result.cycle) if result.read_all else [result.run % result.cycle]
                self.records.note_bucket_proofs(result.cycle, list(buckets), result.run)
        finally:
            self._temp.cleanup()
        result.seconds = round(time.monotonic() - started, 3)
        log_fixity.info("fixity: %s", result.describe())
        return result

    def _load(self, names: set[str]) -> None:
        for folder in sorted({name.split("/", 1)[0] for name in names}):
            self.listing.update(self.store.list_files(folder))
        for name, listed in self.listing.items():
            if listed.pack is not None:
                self.pack_members.setdefault(listed.pack, []).append(name)
        self.rows = self.records.load(key_of=lambda name: self._pack_of(name) or name)
        self.expected = self.records.expectations()

    def _audited(self, names: set[str]) -> list[str]:
        packs = {self.listing[name].pack for name in names if name in self.listing and self.listing[name].pack}
        audited = sorted(set(names) | packs)
        run = self.result.run
        for name in audited:
            if name not in self.rows:
                sha, size = self.expected.get(name, (self_named_sha256(name), None))
                self.rows[name] = {"name": name, "sha256": sha or self_named_sha256(name), "md5": None,
                                   "size": size, "first_run": run, "checked_run": None, "checked_at": None,
                                   "damage": None}
                self.changed.add(name)
            elif self.rows[name]["sha256"] is None and self.expected.get(name, (None, None))[0] is not None:
                self.rows[name]["sha256"] = self.expected[name][0]
                self.changed.add(name)
        return audited

    def _at_hand(self, name: str) -> bool:
        members = self.pack_members.get(name)
        return self.workspace.joinpath(name).is_file() or (
            bool(members) and all(self.workspace.joinpath(member).is_file() for member in members))

    def _pack_of(self, name: str) -> str | None:
        listed = self.listing.get(name)
        return listed.pack if listed is not None else None

    def _compare_listing(self, audited: list[str]) -> dict[str, str]:
        """Damage the listing shows (a name missing; another size or md5 than its bytes were proven to
        have), and suspects: names listed with another size than the documents expect, read now."""
        suspects: dict[str, str] = {}
        for name in audited:
            listed, row = self.listing.get(name), self.rows[name]
            if listed is None:
                if name not in self.pending:
                    self.damaged[name] = "missing from the store"
                continue
            self.result.listed += 1
            proven = row["checked_run"] is not None
            if row["size"] is not None and listed.size != row["size"]:
                difference = f"{listed.size} bytes where {row['size']} are expected"
                if proven:
                    self.damaged[name] = f"{listed.size} bytes where its {row['size']} were proven"
                else:
                    suspects[name] = difference
            elif row["md5"] and listed.md5 and listed.md5 != row["md5"]:
                self.damaged[name] = f"md5 {listed.md5} where {row['md5']} was proven"
        return suspects

    def _is_due(self, name: str, suspects: dict[str, str]) -> bool:
        row, result = self.rows[name], self.result
        if result.read_all or name in suspects or row["damage"]:
            return True
        if self.store.listing_md5 and row["checked_run"] is None and self._at_hand(name):
            return True    # proven from the copy at hand while it is: no download later
        key = self._pack_of(name) or name
        return fixity_due(fixity_bucket(key, result.cycle), result.run, result.cycle, row["first_run"],
                          row["checked_run"])

    # ------------------------------------------------------------ proving

    def _prove(self, name: str, suspect: str | None) -> None:
        row, listed, result = self.rows[name], self.listing[name], self.result
        pack = listed.pack
        if pack is not None and pack in self.damaged:
            return                                  # its pack's damage speaks for it
        local = self._local_copy(name, row["sha256"])
        known_md5 = row["md5"] or (local[1] if local is not None else None)
        pack_sound = pack is None or (self.rows[pack]["md5"] is not None and pack in self.store_good)
        if (self.store.listing_md5 and not result.read_all and suspect is None and listed.md5
                and known_md5 == listed.md5 and pack_sound):
            result.proven_unread += 1
            self._proven(name, row["sha256"] or local[0], listed.md5, listed.size)
            return
        try:
            if row["sha256"] is None:               # a text whose hash is not known yet: its first reading
                data = self.store.read_file(name)
                digests = (hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest(), len(data))
            else:
                data, digests = None, self.store.digests(name)
        except IntegrityError as exc:
            self._damage(name, str(exc))
            return
        except StoreError as exc:
            result.errors.append(f"{name}: {exc}")
            return
        result.read += 1
        result.bytes_read += digests[2]
        if row["sha256"] is None:
            self._first_text_reading(name, data, digests)
        elif digests[0] != row["sha256"]:
            self._damage(name, f"hashes to {digests[0]} ({digests[2]} bytes)" + (f"; {suspect}" if suspect else ""))
        else:
            if suspect:
                log_fixity.info("%s: %s, yet it hashes right: its record is corrected", name, suspect)
            self._proven(name, row["sha256"], digests[1], digests[2])

    def _local_copy(self, name: str, expected: str | None) -> tuple[str, str, int] | None:
        """Digests of the bytes at hand for `name`: the workspace's copy (one that does not hash to
        `expected` is damaged, and no copy), or a pack made again from its texts' workspace copies;
        None when there is none. Its path is `self.local_paths[name]`."""
        if name in self.local_digests:
            digests = self.local_digests[name]
            return digests if digests is None or expected is None or digests[0] == expected else None
        path, digests = self.workspace / name, None
        try:
            if path.is_file():
                digests = file_digests(path)
                self.result.workspace_read += 1
            elif (assembled := self.store.assemble(name, self.workspace)) is not None:
                path = Path(self._temp.name) / f"assembled-{len(self.local_paths)}"
                path.write_bytes(assembled)
                digests = file_digests(path)
        except OSError as exc:
            self.result.errors.append(f"workspace {name}: {exc.strerror}")
        if digests is not None and expected is not None and digests[0] != expected:
            if path == self.workspace / name:
                self.workspace_damaged.setdefault(name, f"hashes to {digests[0]} ({digests[2]} bytes)")
            digests = None
        self.local_digests[name] = digests
        if digests is not None:
            self.local_paths[name] = path
        return digests

    def _first_text_reading(self, name: str, data: bytes, digests: tuple[str, str, int]) -> None:
        """A text's hash from its first reading; a workspace copy that differs is judged by its length."""
        path = self.workspace / name
        if path.is_file():
            local = path.read_bytes()
            if local != data:
                chars = self._text_characters().get(name)
                stored_right = chars is not None and len(data.decode("utf-8", "replace")) == chars
                local_right = chars is not None and len(local.decode("utf-8", "replace")) == chars
                if local_right and not stored_right:
                    self.rows[name]["sha256"] = hashlib.sha256(local).hexdigest()
                    self.changed.add(name)
                    self._damage(name, f"hashes to {digests[0]}, and holds other characters than extraction "
                                       "recorded (the workspace's copy holds them)")
                    return
                if not stored_right:
                    self.result.found.append(f"store {name}: differs from the workspace's copy")
                    self._not_healed(name, "differs from the workspace's copy", "neither is known right (both "
                                     "are kept): see RUNBOOK, a stored file does not hash to its name")
                    return
        self._proven(name, digests[0], digests[1], digests[2])

    def _text_characters(self) -> dict[str, int]:
        if self._characters is None:
            self._characters = self.records.text_characters()
        return self._characters

    def _proven(self, name: str, sha256: str | None, md5: str | None, size: int) -> None:
        row = self.rows[name]
        before = (row["sha256"], row["md5"], row["size"], row["damage"], row["checked_run"] is None)
        row.update(sha256=sha256 or row["sha256"], md5=md5 or row["md5"], size=size, checked_run=self.result.run,
                   checked_at=utc_now(), damage=None)
        # A file of this run's bucket proven again as it was is the bucket's proof (one kv row at the
        # run's end), not a row; any other (due by age, or read in a run proving every bucket) is.
        result = self.result
        own_bucket = not result.read_all and fixity_bucket(self._pack_of(name) or name, result.cycle) == \
            result.run % result.cycle
        if before != (row["sha256"], row["md5"], row["size"], None, False) or not own_bucket:
            self.changed.add(name)
        self.store_good.add(name)

    def _damage(self, name: str, damage: str) -> None:
        self.damaged[name] = damage

    def _damage_pack_members(self, audited: list[str]) -> None:
        """A damaged pack damages the texts it holds: each is healed as a file of its own."""
        for name in audited:
            pack = self._pack_of(name)
            if pack is not None and pack in self.damaged and name not in self.damaged:
                self.damaged[name] = f"its pack {pack} is damaged"

    # ------------------------------------------------------------ healing

    def _heal(self, name: str, damage: str) -> bool:
        """Puts a good copy back under `name`; True when it did. A pack no copy heals is recorded, its
        texts healed one by one after it (each then a file of its own)."""
        result, row = self.result, self.rows[name]
        log_fixity.warning("store file %s: %s", name, damage)
        result.found.append(f"store {name}: {damage}")
        if row["sha256"] is None and damage.startswith("missing") and (local := self._local_copy(name, None)):
            row["sha256"] = local[0]            # never proven, lost from the store: the copy the run wrote
        if row["sha256"] is None:
            self._not_healed(name, damage, "no hash is known to heal it by")
            return False
        for source, path in self._good_copies(name, row["sha256"], row["size"]):
            try:
                self.store.replace_damaged(name, path)
            except StoreError as exc:
                if damage.startswith("missing") and source == "the workspace":
                    # Lag, not damage: the store backlog uploads it once the store takes it.
                    StoreState(self.db).store_pending_add(name, str(path), "missing from the store at verify")
                    self._event("store", name, damage, f"queued for upload from the workspace ({exc})")
                    result.found.pop()
                    return False
                self._not_healed(name, damage, f"the store refused the good copy from {source}: {exc}")
                return False
            digests = file_digests(path)
            self._proven(name, row["sha256"], digests[1], digests[2])
            result.healed.append(f"{name} (from {source})")
            result.healed_names.add(name)
            self._event("store", name, damage, f"healed from {source}")
            log_fixity.warning("store file %s healed from %s", name, source)
            return True
        if name in self.pack_members:
            row["damage"] = damage
            self.changed.add(name)
            self._event("store", name, damage, "not healed as a whole: its texts are healed one by one")
            return False
        self._not_healed(name, damage, "no good copy in the workspace, pdf_backup/, the store or the court"
                         if name.startswith("pdf_by_hash/") else "no good copy in the workspace or the store")
        return False

    def _heal_workspace(self, name: str, damage: str) -> None:
        self.result.found.append(f"workspace {name}: {damage}")
        log_fixity.warning("workspace file %s: %s", name, damage)
        expected = self.rows[name]["sha256"]
        for source, path in self._good_copies(name, expected, self.rows[name].get("size"), workspace=False):
            self._copy_into_workspace(name, path)
            self.workspace_damaged.pop(name, None)
            self.result.healed.append(f"workspace {name} (from {source})")
            self._event("workspace", name, damage, f"healed from {source}")
            return
        moved = self.workspace / f"{name}.damaged"
        os.replace(self.workspace / name, moved)
        self.result.unhealed.append(f"workspace {name}: {damage}; no good copy (moved aside to {moved.name})")
        self._event("workspace", name, damage, f"not healed: no good copy; moved aside to {moved.name}")

    def _not_healed(self, name: str, damage: str, why: str) -> None:
        self.result.unhealed.append(f"{name}: {damage}; {why}")
        self._event("store", name, damage, f"not healed: {why}")
        log_fixity.error("store file %s: %s; %s", name, damage, why)
        if name in self.rows:
            self.rows[name]["damage"] = damage
            self.changed.add(name)

    def _event(self, place: str, name: str, damage: str, outcome: str) -> None:
        self.events.append((self.result.run, place, name, damage, outcome))

    def _copy_into_workspace(self, name: str, source: Path) -> None:
        target = self.workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)

        def copy(handle) -> None:
            with open(source, "rb") as reader:
                shutil.copyfileobj(reader, handle, 1024 * 1024)
        atomic_write(target, copy)
        self.local_digests.pop(name, None)

    def _good_copies(self, name: str, expected: str, size: int | None, *,
                     workspace: bool = True) -> Iterator[tuple[str, Path]]:
        """(source, path) of each copy found that hashes to `expected`, best first."""
        if workspace and self._local_copy(name, expected) is not None:
            yield ("the workspace" if self.local_paths[name] == self.workspace / name
                   else "its texts in the workspace"), self.local_paths[name]
        if not workspace and name in self.store_good:
            copy = Path(self._temp.name) / f"store-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
            try:
                self.store.download_file(name, copy)
            except StoreError:
                pass
            else:
                if file_digests(copy)[0] == expected:
                    yield "the store", copy
        is_pdf = name.startswith("pdf_by_hash/")
        if is_pdf:
            for path in self._backups_of_size(size):
                if file_digests(path)[0] == expected:
                    yield BACKUP_FOLDER + "/", path
        folder = Path(tempfile.mkdtemp(prefix="copies-", dir=self._temp.name))
        try:
            for path in self.store.other_copies(name, folder):
                if file_digests(path)[0] == expected:
                    yield "another copy in the store", path
        except StoreError as exc:
            log_fixity.warning("cannot read the store's other copies of %s: %s", name, exc)
        if is_pdf and self.fetch_from_court is not None:
            fetched = Path(self._temp.name) / f"court-{expected[:16]}.pdf"
            if self.fetch_from_court(expected, fetched) and file_digests(fetched)[0] == expected:
                yield "the court", fetched

    def _backups_of_size(self, size: int | None) -> list[Path]:
        """pdf_backup/'s files of that size (all of them when the size is not known)."""
        if self._backups is None:
            self._backups = {}
            folder = self.workspace / BACKUP_FOLDER
            if folder.is_dir():
                for path in folder.rglob("*"):
                    if path.is_file():
                        self._backups.setdefault(path.stat().st_size, []).append(path)
        if size is None:
            return [path for paths in self._backups.values() for path in paths]
        return self._backups.get(size, [])
