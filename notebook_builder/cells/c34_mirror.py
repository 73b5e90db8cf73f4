"""The store mirror: the only way stages write to the store, and the progress bars.

Guarantees:
- `StoreMirror` is thread-safe (Drive's HTTP objects are not), skips an
  upload the store already holds, and on quota exhaustion or a store outage
  keeps the run going on local state: the name is queued in `store_pending`,
  the mirror is marked lagging, and `catch_up()` (every run, at start and at
  sync) brings the store level.
- Behind the crawl (a store with `deferred_uploads`, Google Drive): a
  content-addressed put is only a durable `store_pending` row (the crawl
  never waits for Drive's ~2 writes a second); a background uploader thread
  drains the backlog in order, paced by the store, and stops on a signal
  with the rest still pending, so a later run (or a killed one's successor)
  goes on from there. `catch_up()` stops that thread and drains the rest
  itself. Its progress is a tqdm bar `mirror` and, in status.json,
  `store_pending` with `store_eta_seconds`.
- `pending_local_file` finds the local file a backlog entry uploads.
- `progress()` is every stage's progress bar (tqdm.auto: Colab and a
  terminal alike), none when PROGRESS is off.

Knobs read: PROGRESS.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from tqdm.auto import tqdm

from .c00_config import Config, RunClock, StoreError, StoreQuotaExceeded
from .c05_durable import raise_if_disk_full
from .c06_layout import CONTENT_ADDRESSED_PREFIXES, is_content_addressed
from .c10_database import Database
from .c17_snapshots import StoreState
from .c20_store import Store
from .c22_page_packs import PagePacks, PushResult

log_mirror = logging.getLogger("kycourt.mirror")


def progress(cfg: Config, total: int | None, desc: str, unit: str = "doc") -> tqdm:
    """A progress bar that renders in Colab and in a terminal (tqdm.auto); none when not PROGRESS."""
    return progress_bar(total, desc, unit, disable=not cfg.PROGRESS)


def progress_bar(total: int | None, desc: str, unit: str, *, disable: bool = False) -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, mininterval=1.0, dynamic_ncols=True, disable=disable)


_MIRROR_RETRY_SECONDS = 30.0     # the background uploader's pause after a store fault
_MIRROR_PACK_MIN = 16            # mid-run, fewer pending texts than this wait for more to pack
_MIRROR_RATE_WINDOW = 120.0      # seconds of uploads the ETA's rate is taken over


class _MirrorRate:
    """Uploads a second over the last couple of minutes, for the mirror's ETA."""

    def __init__(self, now=time.monotonic):
        self._now = now
        self._stamps: list[float] = []
        self._lock = threading.Lock()

    def note(self, files: int = 1) -> None:
        with self._lock:
            now = self._now()
            self._stamps.extend([now] * files)
            while self._stamps and self._stamps[0] < now - _MIRROR_RATE_WINDOW:
                self._stamps.pop(0)

    def eta(self, pending: int) -> float | None:
        if pending == 0:
            return 0.0
        with self._lock:
            if len(self._stamps) < 2 or self._stamps[-1] <= self._stamps[0]:
                return None
            rate = (len(self._stamps) - 1) / (self._stamps[-1] - self._stamps[0])
        return round(pending / rate, 1)


class StoreMirror:
    """Mirrors workspace files into the store, degrading on store faults."""

    def __init__(self, store: Store, *, clock: RunClock | None = None, show_progress: bool = False):
        self.store = store
        self.db: Database | None = None
        self.lagging: str | None = None   # why the store is behind, if it is
        self.uploads = 0       # content-addressed names uploaded (PDFs, texts, archives)
        self.skipped = 0
        self.clock = clock
        self.show_progress = show_progress
        self._lock = threading.RLock()
        self._counts_lock = threading.Lock()
        self._uploader: threading.Thread | None = None
        self._uploader_stop = threading.Event()
        self._uploader_wake = threading.Event()
        self._rate = _MirrorRate()

    def attach(self, db: Database) -> None:
        self.db = db

    @property
    def backlog(self) -> StoreState:
        """The names waiting for the store, in the attached database."""
        return StoreState(self.db)

    @property
    def behind(self) -> bool:
        """Content-addressed uploads run behind the crawl (the store is slow to write to)."""
        return bool(getattr(self.store, "deferred_uploads", False)) and self.db is not None

    def eta_seconds(self) -> float | None:
        """Seconds the backlog needs at the rate uploads went lately; None when unknown."""
        if self.db is None:
            return None
        return self._rate.eta(self.backlog.store_pending_count())

    def has(self, name: str) -> bool:
        with self._lock:
            try:
                return self.store.exists(name)
            except StoreError as exc:
                self._note_lag(exc)
                return False

    def put(self, name: str, local_path: str | os.PathLike, *, mutable: bool = False) -> bool:
        """Uploads unless the store already has `name` (content-addressed names only).

        Returns True when the store holds the name afterwards. Store faults
        are recorded and swallowed: the run keeps going on local state. Once
        the store is full, content-addressed names are queued without asking
        the store again (three wasted Drive requests per document otherwise);
        mutable names (status.json, the checkpoint) are still tried, so a
        freed quota is noticed.
        """
        # A content-addressed upload to a store that takes concurrent calls runs unlocked, so one
        # thread's upload never holds up another's (the checkpointer's, a fetch for the extract
        # workers); everything else is serialized.
        if not mutable and self.behind and is_content_addressed(name):
            return self._defer(name, local_path)
        concurrent = not mutable and self.store.concurrent_uploads
        with contextlib.nullcontext() if concurrent else self._lock:
            if not mutable:
                settled = self._held_or_queued(name, local_path)
                if settled is not None:
                    return settled
            try:
                self.store.upload_file(name, local_path)
                if not mutable:      # counts archive content, not status/checkpoint rewrites
                    with self._counts_lock:
                        self.uploads += 1
                return True
            except StoreError as exc:   # includes StoreQuotaExceeded
                self._note_lag(exc)
                if not mutable:
                    self._queue(name, local_path, str(exc))
                return False

    def put_many(self, items: list[tuple[str, str | os.PathLike]]) -> dict[str, bool]:
        """`put` of several content-addressed files, uploaded together (`Store.upload_files`: a
        LocalStore makes them durable with one flush). Returns name -> held by the store afterwards.
        Should the group fail, each is put on its own, so each gets its own outcome (or queue row)."""
        if self.behind:
            return {name: self.put(name, local_path) for name, local_path in items}
        if type(self.store).upload_files is Store.upload_files:
            # No group upload: one put each, so the lock is never held across many uploads.
            return {name: self.put(name, local_path) for name, local_path in items}
        held: dict[str, bool] = {}
        missing: list[tuple[str, str | os.PathLike]] = []
        # As in put: a store that takes concurrent calls is not locked (a group's write and flush
        # must not hold up the checkpointer's upload or a fetch for the extract workers).
        with contextlib.nullcontext() if self.store.concurrent_uploads else self._lock:
            for name, local_path in items:
                settled = self._held_or_queued(name, local_path)
                if settled is None:
                    missing.append((name, local_path))
                else:
                    held[name] = settled
            if not missing:
                return held
            try:
                self.store.upload_files(missing)
            except StoreError as exc:
                log_mirror.info("group upload of %d files failed (%s); one at a time", len(missing), exc)
                for name, local_path in missing:
                    held[name] = self.put(name, local_path)
                return held
            with self._counts_lock:
                self.uploads += len(missing)
            held.update((name, True) for name, _ in missing)
            return held

    def _defer(self, name: str, local_path: str | os.PathLike) -> bool:
        """Queues a content-addressed name for the background uploader; False: not held yet."""
        self._queue(name, local_path, "behind the crawl")
        self._start_uploader()
        self._uploader_wake.set()
        return False

    def _held_or_queued(self, name: str, local_path: str | os.PathLike) -> bool | None:
        """A content-addressed name before its upload: True when the store has it already, False
        when it was queued instead (the store is full, or cannot be asked), None: upload it."""
        if self.quota_exhausted:
            self._queue(name, local_path, self.lagging or "quota exceeded")
            return False
        try:
            if self.store.exists(name):
                with self._counts_lock:
                    self.skipped += 1
                return True
        except StoreError as exc:
            self._note_lag(exc)
            self._queue(name, local_path, str(exc))
            return False
        return None

    def push_pages(self, packs: PagePacks, snapshot: str | os.PathLike, **options) -> PushResult | None:
        """`packs.push(snapshot, **options)` (a database's changed pages, c22) under the mirror's lock;
        a store fault is noted as lag and gives None (the next checkpoint sends those pages)."""
        with self._lock:
            try:
                return packs.push(snapshot, **options)
            except StoreError as exc:
                self._note_lag(exc)
                return None

    def prune_pages(self, packs: PagePacks, needed: set[str]) -> int:
        """`packs.remove_unneeded(needed)` under the mirror's lock: the packs no kept state names."""
        with self._lock:
            return packs.remove_unneeded(needed)

    def remove(self, name: str) -> bool:
        """Removes state the pipeline replaces (`Store.remove`); a store fault is logged, not lag (the
        name is removed at a later try). True when the store no longer holds it."""
        with self._lock:
            try:
                self.store.remove(name)
                return True
            except StoreError as exc:
                log_mirror.warning("cannot remove %s from the store: %s", name, exc)
                return False

    def fetch(self, name: str, local_path: str | os.PathLike) -> bool:
        """Downloads `name` from the store (under the lock); False if it cannot."""
        with self._lock:
            try:
                if not self.store.exists(name):
                    return False
                self.store.download_file(name, local_path)
                return True
            except OSError as exc:
                raise_if_disk_full(exc, local_path)
                log_mirror.warning("cannot fetch %s from the store: %s", name, exc)
                return False
            except StoreError as exc:
                log_mirror.warning("cannot fetch %s from the store: %s", name, exc)
                return False

    @property
    def quota_exhausted(self) -> bool:
        return bool(self.lagging and self.lagging.startswith("quota exceeded"))

    def _queue(self, name: str, local_path: str | os.PathLike, reason: str) -> None:
        if self.db is not None:
            self.backlog.store_pending_add(name, str(local_path), reason)

    def get_quota(self) -> dict | None:
        """The store's quota, or None; a failed read is logged, not taken as lag."""
        with self._lock:
            try:
                return self.store.quota()
            except StoreError as exc:
                log_mirror.warning("cannot read the store quota: %s", exc)
                return None

    def _note_lag(self, exc: StoreError) -> None:
        kind = "quota exceeded" if isinstance(exc, StoreQuotaExceeded) else "store error"
        if self.lagging is None:
            log_mirror.warning("store %s: %s (%s); continuing on local state, the store will catch up",
                                self.store.description, kind, exc)
        self.lagging = f"{kind}: {exc}"

    def catch_up(self, workspace: Path, *, wait: bool = True) -> dict[str, int]:
        """Uploads every queued name whose local file still exists; returns counts. The background
        uploader is stopped first (this drains what it left); a signal stops the drain too.
        `wait=False` (a run's start) with a store behind the crawl only starts the uploader."""
        if self.db is None:
            return {"uploaded": 0, "left": 0}
        if not wait and self.behind:
            left = self.backlog.store_pending_count()
            if left:
                self._start_uploader()
            return {"uploaded": 0, "left": left}
        self.stop_uploader()
        self.lagging = None
        pending = self.backlog.store_pending_count()
        bar = progress_bar(pending, "mirror", "file") if self.show_progress and self.behind and pending else None
        try:
            uploaded = self._drain(self.db, workspace, lambda: self.clock is not None and self.clock.interrupted,
                                   bar=bar)
        finally:
            if bar is not None:
                bar.close()
        return {"uploaded": uploaded, "left": self.backlog.store_pending_count()}

    def _drain(self, db: Database, workspace: Path, stopping, *, final: bool = True, bar: tqdm | None = None) -> int:
        """Uploads the backlog in order until it is empty, a store fault, or `stopping()`.

        A store that packs texts (`text_pack_members` > 0: Drive) gets the pending texts in groups of
        that many through `upload_files`, one store file each group; unless `final`, a group
        smaller than _MIRROR_PACK_MIN waits for more texts (the uploader thread, mid-run). `bar`
        counts the files uploaded."""
        uploaded = 0
        workspace = Path(workspace).absolute()
        rows = StoreState(db).store_pending()
        groups: list[list] = []
        size = self.store.text_pack_members
        if size > 1:
            texts = [row for row in rows if row["name"].startswith("text/")]
            rows = [row for row in rows if not row["name"].startswith("text/")]
            groups = [texts[start:start + size] for start in range(0, len(texts), size)]
            if groups and not final and len(groups[-1]) < _MIRROR_PACK_MIN:
                groups.pop()
        for group in groups + [[row] for row in rows]:
            if stopping():
                break
            items = []
            for row in group:
                local = pending_local_file(row["name"], row["local_path"], workspace)
                if local is not None:
                    items.append((row["name"], local))
                    continue
                log_mirror.warning("store backlog: %s is gone locally; dropping it from the backlog",
                                    row["name"])
                StoreState(db).store_pending_done(row["name"])
            if not items:
                continue
            with self._lock:
                try:
                    missing = [(name, local) for name, local in items if not self.store.exists(name)]
                    if len(missing) == 1:
                        self.store.upload_file(*missing[0])
                    elif missing:
                        self.store.upload_files(missing)
                    with self._counts_lock:
                        self.uploads += len(missing)
                except StoreError as exc:
                    self._note_lag(exc)
                    break
            with db.transaction():
                for name, _ in items:
                    StoreState(db).store_pending_done(name)
            self._rate.note(len(items))
            uploaded += len(items)
            if bar is not None:
                bar.update(len(items))
        return uploaded

    # ------------------------------------------------ background uploader

    def _start_uploader(self) -> None:
        with self._counts_lock:
            if self._uploader is not None and self._uploader.is_alive():
                return
            self._uploader_stop.clear()
            self._uploader = threading.Thread(target=self._uploader_loop, name="store-uploader", daemon=True)
            self._uploader.start()

    def stop_uploader(self) -> None:
        """Stops the background uploader after the file in flight; the rest stays pending."""
        thread = self._uploader
        if thread is None:
            return
        self._uploader_stop.set()
        self._uploader_wake.set()
        thread.join()
        self._uploader = None

    def _uploader_loop(self) -> None:
        db = self.db                       # on a connection of this thread's own (Database.conn)
        workspace = Path(self.db.path).parent
        # One bar for the thread's life: its total grows as the crawl queues more, its rate and
        # remaining time are the mirror's own.
        bar = progress_bar(0, "mirror", "file", disable=not self.show_progress)

        def stopping() -> bool:
            return self._uploader_stop.is_set() or (self.clock is not None and self.clock.interrupted)
        try:
            while not stopping():
                self._uploader_wake.clear()
                try:
                    bar.total = bar.n + StoreState(db).store_pending_count()
                    bar.refresh()
                    self._drain(db, workspace, stopping, final=False, bar=bar)
                except Exception as exc:   # noqa: BLE001 - the uploader must never kill the run
                    log_mirror.warning("store uploader: %s", exc)
                if self.lagging:           # a fault: try again in a while, not in a tight loop
                    self._uploader_wake.wait(_MIRROR_RETRY_SECONDS)
                    if not stopping():
                        self.lagging = None
                else:
                    self._uploader_wake.wait(1.0)
        finally:
            bar.close()


def pending_local_file(name: str, recorded: str, workspace: Path) -> Path | None:
    """The local file a store-backlog entry uploads, or None when it is gone.

    The path as recorded; a relative one (a workspace given as a relative path, before paths were
    made absolute at configuration) is tried against the current directory, where it was written,
    and the workspace. A content-addressed name (pdf_by_hash/, text/) is also found at its own place
    in the workspace, whatever path was recorded: that heals a backlog whose paths were recorded
    relative to the wrong folder. Never the live database: other names are only taken as recorded.
    """
    path = Path(recorded)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, workspace / path]
    if name.startswith(CONTENT_ADDRESSED_PREFIXES):
        candidates.append(workspace / name)
    return next((candidate for candidate in candidates if candidate.is_file()), None)
