"""The run context: what every stage receives, and the status document.

Guarantees:
- `Context` carries the config, workspace, database, store mirror, HTTP client and run clock;
  stages take it and return a small result. `open_context()` checks the workspace first (a file,
  or a folder this process cannot write, is StoreError), then opens the store, then makes the
  workspace's folders: a refused workspace or store leaves nothing behind. A directory store is
  made only for a workspace with no archive yet, or one that names no store (`may_start_store`);
  a store an archive names that is not there is StoreMissing, said with the store the workspace
  names (`missing_store_message`): a typo or a moved store never begins a second archive.
- The store's sleeps (Drive's backoff and pacing) are the run clock's (`store_sleep`): a signal
  ends them at once, the budget's end does not.
- `write_status()` writes status.json (CONTRACT.md) durably to the workspace and mirrors it: at
  a run's first write, at once with `mirror_now` (verify's verdict), else when
  STATUS_MIRROR_SECONDS have passed since it last went (a Drive write each time: the heartbeats
  of a download phase, the crawl's turns, a phase's start, each checkpoint);
  `done` comes from the same queue functions the stages use. It says up to which day (the court
  system's) the archive is complete (`complete_through`), once the court was asked this run `court` (requests,
  latency, projected hours of the downloads left), what adopting an older version's archive
  brought (`legacy_adoption`), `final_states` and `counts_explained` (what `downloaded` and
  `failed` hold, in words), and the first documents the court does not serve to the public, with
  why (`not_public_documents`, when there are any). It names the store (`store`, `drive_folder` on Drive, and
  `store_relative` when the store lies beside the workspace): `store_of_workspace()` reads it
  back, beside the workspace first, so the commands find a workspace's store without being told
  and a folder copied whole uses its own store.
- status.json's `crawl` (`crawl_status`, `crawl_projection`): requests left and hours projected,
  at the current pacing and the latency observed, until (a) every opinion, (b) every document and
  (c) every detail is archived, from what the crawl's units cost and found so far (kv
  crawl_figures, written by c75); None while a kind of work has no evidence yet; each says whether
  it is archived. `crawl_words` says it in one line (the run summary, the status cell).
- `read_only_workspace()`: a workspace this process cannot write (read-only media, a copy): the
  commands that read then write nothing at all.
- A workspace and its store belong to one court system: status.json's `court_system`, kv
  `court_system` (set when a run first opens the database); an archive that records none is
  Kentucky's. `open_context` refuses (CourtSystemMismatch, before anything is written) a workspace
  or store of another system than COURT_SYSTEM (`court_system_conflict`); `archive_court_system`
  says which one an archive is of.

Knobs read: COURT_SYSTEM, WORKSPACE, STORE, DRIVE_FOLDER, QUOTA_WARN_FRACTION, PROGRESS,
BUDGET_SECONDS, SHUTDOWN_SECONDS, PACING, PACING_SEARCH, PACING_DL, CASE_DETAILS.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .c00_config import (DEFAULT_COURT_SYSTEM, Config, CourtSystemMismatch, RunClock, StoreError, StoreMissing,
                         count_noun, utc_now)
from .c05_durable import durable_write, raise_if_disk_full
from .c06_layout import DB_FILENAME, STATUS_FILENAME, WORKSPACE_FOLDERS
from .c10_database import (KV_ARCHIVE_UPDATED_AT, KV_CHECKPOINT_SEQ, KV_COMPLETE_THROUGH, KV_COURT_SYSTEM, KV_CRAWL_FIGURES,
                           KV_DISCOVERY_CONVERGED_AT, KV_DISCOVERY_STRATEGY, KV_LEGACY_ADOPTION,
                           KV_OPINIONS_ARCHIVED_AT, SCHEMA_VERSION, Database, is_sqlite_file)
from .c12_queues import WorkQueues, not_public_reason
from .c15_discovery_state import DiscoveryState
from .c16_legacy_state import LegacyState
from .c17_snapshots import StoreState
from .c19_changes import ChangeLog
from .c20_store import LocalStore, Store
from .c28_court_words import SystemWords, system_words
from .c34_mirror import StoreMirror

log_context = logging.getLogger("kycourt.context")


@dataclass
class Context:
    cfg: Config
    workspace: Path
    store: Store
    mirror: StoreMirror
    clock: RunClock
    db: Database | None = None
    client: Any = None
    phase: str = "start"
    quota: dict | None = None
    checkpoint_lock: threading.RLock = field(default_factory=threading.RLock)
    snapshot_locked: bool = False                   # c39 snapshot_lock is held (by the thread holding checkpoint_lock)
    pages_checked: bool = False                     # c39: the store's page packs listed against the table, once
    journal_pushed: tuple[int, int] | None = None   # (checkpoint_seq, hash of the rows) last uploaded
    court_unreachable: str | None = None            # the circuit breaker's message, once it opened
    legacy_kept: bool = False                       # c38 keep_legacy_originals has run for this database
    resume_points_read: bool = False                # c39: the store's resume points listed, once a context
    journals_swept: bool = False                    # c39: the store's older journals listed and removed, once
    quota_asked_at: float | None = None             # time.monotonic() of the last quota asked (refresh_quota)
    status_mirrored_at: float | None = None         # time.monotonic() status.json was last put to the store

    def path(self, name: str) -> Path:
        return self.workspace / name

    def held_characters(self, name: str) -> int | None:
        """The characters of the text the archive holds under `name` (the workspace's, else fetched
        from the store); None when neither has it."""
        local = self.path(name)
        if not local.is_file() and not self.mirror.fetch(name, local):
            return None
        return len(local.read_bytes().decode("utf-8", "replace"))

    @property
    def db_path(self) -> Path:
        return self.workspace / DB_FILENAME

    def open_database(self) -> Database:
        if self.db is None:
            self.db = Database.open(self.db_path)
            self.mirror.attach(self.db)
            if self.db.kv_get(KV_COURT_SYSTEM) is None:
                # open_context checked the archive is of this system (one that records none is Kentucky's).
                self.db.kv_set(KV_COURT_SYSTEM, self.cfg.COURT_SYSTEM)
        return self.db

    def close(self) -> None:
        self.mirror.stop_uploader()
        if self.client is not None and hasattr(self.client, "close"):
            self.client.close()
            self.client = None
        if self.db is not None:
            self.db.close()
            self.db = None
    def refresh_quota(self, max_age: float = 0.0) -> dict | None:
        """The store's quota, asked now unless it was asked less than `max_age` seconds ago (a
        checkpoint's: Drive's about.get is a request, not worth one every few minutes)."""
        if max_age and self.quota_asked_at is not None and time.monotonic() - self.quota_asked_at < max_age:
            return self.quota
        self.quota_asked_at = time.monotonic()
        quota = self.mirror.get_quota()
        if quota and quota.get("total"):
            quota = dict(quota)
            quota["fraction"] = round(quota["used"] / quota["total"], 4)
            if quota["fraction"] >= self.cfg.QUOTA_WARN_FRACTION:
                log_context.warning("store quota %.0f%% used (%s of %s bytes)",
                                    100 * quota["fraction"], quota["used"], quota["total"])
        self.quota = quota
        return quota


def open_store(cfg: Config, *, sleep: Any = time.sleep, create: bool = False) -> Store:
    """The store CFG names: a directory, or Google Drive ('drive'), whose retries and pacing
    wait through `sleep` (the run clock's: a stop ends the wait). A directory that is not there
    is made only when `create` (a new archive's); otherwise it is StoreMissing."""
    if cfg.store_is_drive:
        from .drive_store import open_drive_store
        return open_drive_store(cfg, sleep=sleep)
    return LocalStore(cfg.STORE, create=create)


def may_start_store(cfg: Config) -> bool:
    """Whether a run may make a new store at CFG's STORE: only for a workspace that holds no
    archive yet, or one whose status.json names no store. A store an archive names that is not
    there is a typo or a moved store: said (`missing_store_message`), never a second archive."""
    workspace = Path(cfg.WORKSPACE)
    return not is_sqlite_file(workspace / DB_FILENAME) or store_of_workspace(workspace) is None


def missing_store_message(cfg: Config) -> str:
    """What to say of a store CFG names that is not there, with the store the workspace names."""
    named = (store_of_workspace(cfg.WORKSPACE) or {}).get("STORE")
    if named is None or named == "drive":
        return f"no store at {cfg.STORE}: give --store DIR (or KY_STORE) where the archive's store is"
    recorded = saved_status(cfg.WORKSPACE).get("store")
    last = f" (its last run mirrored to {recorded})" if recorded not in (None, named, cfg.STORE) else ""
    if Path(named) == Path(cfg.STORE):
        return (f"no store at {cfg.STORE}, the store the workspace {cfg.WORKSPACE} names{last} (moved or "
                "deleted?): give --store DIR where it is now")
    there = "" if Path(named).is_dir() else " (not there either)"
    return (f"no store at {cfg.STORE} (a typo?): the workspace {cfg.WORKSPACE} mirrors to {named}{there}; "
            "to start a new store at the path given, create its folder first")


def read_only_workspace(workspace: str | os.PathLike) -> bool:
    """Whether this process cannot write the workspace (read-only media, a copy without write
    permission): the commands that read then write nothing at all, and those that write refuse."""
    workspace = Path(workspace)
    database = workspace / DB_FILENAME
    return workspace.is_dir() and (not os.access(workspace, os.W_OK)
                                   or (database.exists() and not os.access(database, os.W_OK)))


def store_sleep(clock: RunClock):
    """The store's sleep (retry backoff, pacing): a signal ends it at once (returns False), the
    budget's end does not (verify still mirrors the checkpoint then, patiently)."""
    def sleep(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if clock.interrupted:
                return False
            if clock.stop_event.is_set():      # the budget: the event no longer waits
                time.sleep(min(left, 0.25))
            else:
                clock.stop_event.wait(left)
        return not clock.interrupted
    return sleep


def open_context(cfg: Config, *, clock: RunClock | None = None, store: Store | None = None,
                 create_store: bool | None = None) -> Context:
    """Checks the workspace, opens the store (made only when `create_store`, by default when
    `may_start_store`), then creates the workspace layout; the database is opened after restore.
    A workspace that cannot be one, or a store that cannot be opened, is StoreError with nothing
    written."""
    workspace = Path(cfg.WORKSPACE)
    _check_workspace(workspace)
    clock = clock or RunClock(cfg.BUDGET_SECONDS, cfg.SHUTDOWN_SECONDS)
    if store is None:
        create = may_start_store(cfg) if create_store is None else create_store
        try:
            store = open_store(cfg, sleep=store_sleep(clock), create=create)
        except StoreMissing:
            raise StoreMissing(missing_store_message(cfg)) from None
    # A directory store's status.json is read where it lies; Drive's state is checked by restore, which
    # reads the store's snapshot anyway (no request more).
    conflict = court_system_conflict(cfg)
    if conflict:
        raise CourtSystemMismatch(conflict)
    try:
        for folder in WORKSPACE_FOLDERS:
            (workspace / folder).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise_if_disk_full(exc, workspace)
        raise StoreError(f"cannot create workspace {workspace}: {exc.strerror}") from None
    mirror = StoreMirror(store, clock=clock, show_progress=cfg.PROGRESS)
    return Context(cfg=cfg, workspace=workspace, store=store, mirror=mirror, clock=clock)


def _check_workspace(workspace: Path) -> None:
    """StoreError when `workspace` cannot be a workspace this process writes: a file, under a
    file, or where it cannot write (read-only media, a copy without write permission)."""
    existing = workspace
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == workspace else f"is under {existing}, a file"
        raise StoreError(f"the workspace {workspace} {where}, not a folder: give --workspace DIR")
    if not os.access(existing, os.W_OK | os.X_OK) or read_only_workspace(workspace):
        raise StoreError(f"cannot write the workspace {workspace} ({existing} is read-only): status, show, "
                         "search, export, report and verify read it as it is")


# ---------------------------------------------------------- court system


def _database_court_system(path: Path) -> str | None:
    """kv court_system of a database (None: it records none, or it cannot be read as this version's)."""
    if not is_sqlite_file(path):
        return None
    try:
        db = Database.open_readonly(path)
    except Exception:   # noqa: BLE001 - an unreadable database records no system; the command says the rest
        return None
    try:
        return db.kv_get(KV_COURT_SYSTEM)
    except Exception:   # noqa: BLE001 - an older version's database has no kv table
        return None
    finally:
        db.close()


def _store_status(cfg: Config, store: Store | None) -> dict[str, Any] | None:
    """The store's status.json (None: it has none, or it cannot be read); a directory store is read
    where it is when no store object is given."""
    try:
        if store is not None:
            data = store.read_file(STATUS_FILENAME) if store.exists(STATUS_FILENAME) else None
        elif cfg.store_is_drive:
            return None
        else:
            path = Path(cfg.STORE) / STATUS_FILENAME
            data = path.read_bytes() if path.is_file() else None
        saved = json.loads(data) if data is not None else None
    except (OSError, ValueError, StoreError):
        return None
    return saved if isinstance(saved, dict) else None


def archive_words(workspace: str | os.PathLike, system: str | None = None) -> SystemWords:
    """The words (c28) of `system`, else of the court system the archive in `workspace` is of
    (Kentucky's when it holds none)."""
    return system_words(system or archive_court_system(workspace) or DEFAULT_COURT_SYSTEM)


def archive_court_system(workspace: str | Path) -> str | None:
    """The court system the archive in `workspace` is of: its status.json's, else its database's, else
    Kentucky's when it holds an archive (every archive before court systems); None for no archive."""
    workspace = Path(workspace)
    saved = saved_status(workspace)
    if isinstance(saved.get("court_system"), str):
        return saved["court_system"]
    recorded = _database_court_system(workspace / DB_FILENAME)
    if recorded:
        return recorded
    return DEFAULT_COURT_SYSTEM if saved or is_sqlite_file(workspace / DB_FILENAME) else None


def court_system_conflict(cfg: Config, store: Store | None = None) -> str | None:
    """Why CFG's court system may not write to this workspace or store, in one line (None: it may):
    they belong to another court system (see the module docstring)."""
    found = archive_court_system(cfg.WORKSPACE)
    if found is not None and found != cfg.COURT_SYSTEM:
        return (f"the workspace {cfg.WORKSPACE} belongs to court system {found}; --court-system "
                f"{cfg.COURT_SYSTEM} would mix two archives: use another workspace")
    saved = _store_status(cfg, store)
    if saved is not None:
        found = saved.get("court_system") if isinstance(saved.get("court_system"), str) else DEFAULT_COURT_SYSTEM
        if found != cfg.COURT_SYSTEM:
            where = f"Drive folder {cfg.DRIVE_FOLDER}" if cfg.store_is_drive else cfg.STORE
            return (f"the store {where} belongs to court system {found}; --court-system {cfg.COURT_SYSTEM} "
                    "would mix two archives: use another store")
    return None


# ---------------------------------------------------------------- status


def store_of_workspace(workspace: str | Path) -> dict[str, str] | None:
    """The store (and Drive folder) the workspace's last run mirrored to, as its status.json
    names it; None when it names none. A store that lay beside the workspace (`store_relative`)
    is named beside it, wherever the two are now: a folder copied whole reads and writes its own
    store, never the original's (a workspace moved alone is told where its store was)."""
    saved = saved_status(workspace)
    if not isinstance(saved.get("store"), str) or not saved["store"].strip():
        return None
    named = {"STORE": saved["store"]}
    beside = saved.get("store_relative")
    if isinstance(beside, str) and beside.strip():
        named["STORE"] = os.path.normpath(Path(workspace).absolute() / beside)
    if isinstance(saved.get("drive_folder"), str):
        named["DRIVE_FOLDER"] = saved["drive_folder"]
    return named


def saved_status(workspace: str | Path) -> dict[str, Any]:
    """The workspace's status.json as the last run wrote it ({} when there is none or it is unreadable)."""
    try:
        saved = json.loads((Path(workspace) / STATUS_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def store_beside(cfg: Config) -> str | None:
    """The store's path relative to the workspace when both lie in one folder (the demo's
    workspace/ and store/), else None."""
    if cfg.store_is_drive:
        return None
    parent = Path(cfg.WORKSPACE).parent
    store = Path(cfg.STORE)
    if store == parent or parent not in store.parents:
        return None
    return os.path.relpath(store, cfg.WORKSPACE)


def remaining_text(queues: dict[str, int], converged: bool) -> str | None:
    """None when the archive is done; otherwise what remains, as `verify` and the summary say it:
    'N to download, M to extract' (', discovery not converged' when it has not converged yet)."""
    if converged and not queues.get("download") and not queues.get("extract"):
        return None
    text = f"{queues.get('download', 0)} to download, {queues.get('extract', 0)} to extract"
    return text if converged else text + ", discovery not converged"


def _final_reasons(final: dict[str, Any]) -> str:
    """' (unparseable 3, encrypted 1)': why the not extractable PDFs are so ('' when none is)."""
    reasons = ", ".join(f"{reason} {n}" for reason, n in final["not_extractable_reasons"].items())
    return f" ({reasons})" if reasons else ""


def explain_counts(counts: dict[str, int], final: dict[str, Any]) -> str:
    """What the `downloaded` and `failed` counts hold, in words: which documents are in their
    final state (not extractable, withheld, failed for good) and which a later run still works on."""
    waiting = counts.get("downloaded", 0) - final["not_extractable"]
    return (f"downloaded {counts.get('downloaded', 0)} = {final['not_extractable']} not extractable for good"
            f"{_final_reasons(final)} + {waiting} waiting for extraction; "
            f"failed {counts.get('failed', 0)} = {final['failed_for_good']} failed for good (a permanent "
            f"answer: never asked again; permanent_failures counts them, and withheld ones the court "
            f"answered so) + {final['withheld']} withheld by the court + {final['out_of_attempts']} out of "
            f"attempts (run --retry-hard asks again) + {final['retrying']} still retrying"
            + (f"; discovered {counts.get('discovered', 0)} = {not_public_words(final)} + "
               f"{counts.get('discovered', 0) - final['not_public']} to download" if final.get("not_public") else ""))


def not_public_words(final: dict[str, Any]) -> str:
    """'3 not public at the court (registration 2, purchase 1)': documents kept as records, never asked for."""
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted((final.get("not_public_reasons") or {}).items()))
    return f"{final.get('not_public', 0)} not public at the court" + (f" ({reasons})" if reasons else "")


def final_states_line(final: dict[str, Any]) -> str:
    """The final states in one line (the verify summary's)."""
    return (f"{count_noun(final['not_extractable'], 'PDF')} not extractable{_final_reasons(final)}, "
            f"{final['failed_for_good']} failed for good, {final['withheld']} withheld, "
            f"{final['out_of_attempts']} out of attempts, {final['retrying']} still retrying"
            + (f"; {final['withdrawn']} withdrawn by the court (kept)" if final.get("withdrawn") else "")
            + (f"; {not_public_words(final)} (kept, never asked for)" if final.get("not_public") else ""))


def crawl_projection(figures: Mapping[str, Any], *, opinions_queued: int, queued: int, details_due: int,
                     converged: bool, details: bool, pauses: tuple[float, float]) -> dict[str, Any]:
    """Requests left and projected hours until (a) every opinion, (b) every document and (c) every
    detail is archived, in the crawl's order (each figure includes the ones before it), from what the
    crawl's units cost and found so far (`figures`, kv crawl_figures: per kind its requests, units,
    documents found, cases walked; discovery's work left, none once it has converged; the latency
    observed) and what waits now.
    `pauses`: the mean pacing pause of a JSON request and of a download. A figure is None while
    there is no evidence for it yet (work left of a kind no unit has finished)."""
    def rate(kind: str, what: str, default: float | None = None) -> float | None:
        entry = figures.get(kind) or {}
        return entry.get(what, 0) / entry["units"] if entry.get("units") else default

    # Once discovery has converged, what is left of it (an update's few shards) is not projected.
    left = {"windows": 0, "shards": 0} if converged else figures.get("left")
    windows = left["windows"] if left else 0
    shards = left["shards"] if left else None
    per_download = rate("downloads", "requests", 1.0)      # one GET a document until downloads say more
    parts: list[tuple[float, float] | None] = []           # (JSON requests, downloads) of each kind left
    if windows and rate("opinions", "requests") is None:
        parts.append(None)
    else:
        found = windows * (rate("opinions", "documents") or 0.0)
        parts.append((windows * (rate("opinions", "requests") or 0.0), (found + opinions_queued) * per_download))
    if shards is None or (shards and rate("walk", "requests") is None):
        parts.append(None)
    else:
        found = shards * rate("walk", "documents", 0.0)
        parts.append((shards * rate("walk", "requests", 0.0), (found + queued - opinions_queued) * per_download))
    if not details:
        parts.append((0.0, 0.0))
    elif shards is None:
        parts.append(None)
    else:
        cases = details_due + shards * rate("walk", "cases", 0.0)
        parts.append((cases * rate("details", "requests", 2.0), 0.0))   # parties and lower courts: two lists
    latency = figures.get("latency") or {}
    seconds = latency["seconds"] / latency["answers"] if latency.get("answers") else 0.0
    projection: dict[str, Any] = {"latency_seconds": round(seconds, 3)}
    total: tuple[float, float] | None = (0.0, 0.0)
    for name, part in zip(("opinions", "documents", "details"), parts):
        total = None if total is None or part is None else (total[0] + part[0], total[1] + part[1])
        projection[name] = {"requests_left": None if total is None else round(total[0] + total[1]),
                            "hours": None if total is None else round(
                                (total[0] * (pauses[0] + seconds) + total[1] * (pauses[1] + seconds)) / 3600, 2)}
    listed = bool(figures.get("opinion_pass_complete")) or converged
    projection["opinions"]["archived"] = listed and opinions_queued == 0
    projection["documents"]["archived"] = converged and queued == 0
    projection["details"]["archived"] = converged and queued == 0 and (details_due == 0 or not details)
    return projection


def crawl_status(db: Database, cfg: Config, *, queued: int | None = None) -> dict[str, Any] | None:
    """The crawl's projection (`crawl_projection`) from the database, and when every opinion the court
    lists was first archived (`opinions_archived_at`); None for a database this code has not migrated
    yet (read-only, by `status` or a report before the next run)."""
    if int(db.kv_get("schema_version", "0") or 0) < SCHEMA_VERSION:
        return None
    try:
        figures = json.loads(db.kv_get(KV_CRAWL_FIGURES) or "{}")
    except ValueError:
        figures = {}
    mean = lambda window: cfg.PACING * (window[0] + window[1]) / 2     # noqa: E731
    projection = crawl_projection(
        figures if isinstance(figures, dict) else {}, opinions_queued=WorkQueues(db).opinions_to_download(cfg),
        queued=WorkQueues(db).download_queue_size(cfg) if queued is None else queued, details_due=DiscoveryState(db).details_due_count(),
        converged=db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None, details=cfg.CASE_DETAILS,
        pauses=(mean(cfg.PACING_SEARCH), mean(cfg.PACING_DL)))
    projection["opinions_archived_at"] = db.kv_get(KV_OPINIONS_ARCHIVED_AT)
    return projection


def crawl_words(projection: Mapping[str, Any]) -> str:
    """The projection in words: for every opinion, every document and every detail, archived, or the
    requests left and the hours they take (unknown before a unit of that kind has finished)."""
    said = []
    for name, noun in (("opinions", "every opinion"), ("documents", "every document"), ("details", "every detail")):
        figure = projection[name]
        if figure.get("archived"):
            since = projection.get("opinions_archived_at") if name == "opinions" else None
            said.append(f"{noun} archived" + (f" (since {since})" if since else ""))
        elif figure["requests_left"] is None:
            said.append(f"{noun}: not known yet")
        else:
            said.append(f"{noun} in {figure['requests_left']:,} request{'' if figure['requests_left'] == 1 else 's'}, "
                        f"{figure['hours']:.1f} h")
    return "; ".join(said)


STATUS_MIRROR_SECONDS = 30.0   # the store's status.json at most this often (a Drive write each time), but mirror_now
STATUS_NOT_PUBLIC_SHOWN = 20     # documents not public at the court that status.json names


def status_document(db: Database | None, cfg: Config, *, phase: str, verify: str | None = None,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The status.json of CONTRACT.md, from the database (empty workspace: zeros)."""
    if db is None:
        counts = {"discovered": 0, "downloaded": 0, "extracted": 0, "failed": 0}
        queues = {"download": 0, "extract": 0}
        converged = False
    else:
        counts = WorkQueues(db).status_counts()
        queues = WorkQueues(db).queue_sizes(cfg)
        converged = db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
    done = bool(converged and queues["download"] == 0 and queues["extract"] == 0)
    document = {
        "updated_at": utc_now(),
        "court_system": (db.kv_get(KV_COURT_SYSTEM) if db is not None else None) or (
            DEFAULT_COURT_SYSTEM if db is not None else cfg.COURT_SYSTEM),
        "phase": phase,
        "counts": counts,
        "queues": queues,
        "done": done,
        "verify": verify,
        "documents": sum(counts.values()),
        "discovery_converged": converged,
        # What is left, in words: nothing about the archive should need the counts decoded.
        "remaining": remaining_text(queues, converged),
    }
    if db is not None:
        document["permanent_failures"] = WorkQueues(db).permanent_failure_count()
        final = WorkQueues(db).final_states(cfg)
        final["withdrawn"] = ChangeLog(db).withdrawn_count()     # kept with their PDFs, never failures
        final.update(WorkQueues(db).not_public_counts())         # kept as records, never requested
        document["final_states"] = final
        document["counts_explained"] = explain_counts(counts, final)
        if final["not_public"]:     # which, and why (the first STATUS_NOT_PUBLIC_SHOWN)
            document["not_public_documents"] = [
                {**dict(row), "reason": not_public_reason(row["access_state"])}
                for row in WorkQueues(db).not_public_documents(limit=STATUS_NOT_PUBLIC_SHOWN)]
        document["store_pending"] = StoreState(db).store_pending_count()
        document["checkpoint_seq"] = int(db.kv_get(KV_CHECKPOINT_SEQ, "0"))
        # When the archive was last brought up to date (a converged sweep, or a complete update).
        document["archive_updated_at"] = db.kv_get(KV_ARCHIVE_UPDATED_AT)
        document["discovery_strategy"] = db.kv_get(KV_DISCOVERY_STRATEGY)
        # The court system's day up to which the archive is complete (convergence closed the window, or an update).
        document["complete_through"] = db.kv_get(KV_COMPLETE_THROUGH)
        # What adopting an older version's archive (v1.2) brought, when this archive began as one.
        adoption = db.kv_get(KV_LEGACY_ADOPTION)
        if adoption:
            document["legacy_adoption"] = {**json.loads(adoption), "ids": LegacyState(db).legacy_summary()}
        # Time to a useful archive: requests left and hours until every opinion, document, detail.
        document["crawl"] = crawl_status(db, cfg, queued=queues["download"])
        # What the last update (a run after the first complete crawl) found, in figures and words (c48).
        document["last_update"] = ChangeLog(db).last_update()
    document.update(extra or {})
    return document


def write_status(ctx: Context, *, verify: str | None = None, mirror_now: bool = False, **extra: Any) -> dict[str, Any]:
    """status.json written durably to the workspace, and to the store when `mirror_now` or when
    STATUS_MIRROR_SECONDS have passed since it was last put there (see the module docstring)."""
    extra = dict(extra)
    # The store this workspace mirrors to: the query commands read it (store_of_workspace).
    extra["store"] = ctx.cfg.STORE
    beside = store_beside(ctx.cfg)
    if beside:
        extra["store_relative"] = beside
    if ctx.cfg.store_is_drive:
        extra["drive_folder"] = ctx.cfg.DRIVE_FOLDER
    extra["store_lagging"] = ctx.mirror.lagging
    if ctx.mirror.behind:
        extra["store_eta_seconds"] = ctx.mirror.eta_seconds()
    if ctx.court_unreachable:
        extra["court_unreachable"] = ctx.court_unreachable
    if ctx.quota is not None:
        extra["store_quota"] = ctx.quota
    document = status_document(ctx.db, ctx.cfg, phase=ctx.phase, verify=verify, extra=extra)
    if ctx.client is not None and getattr(ctx.client, "requests_sent", 0) and ctx.db is not None:
        document["court"] = ctx.client.pace_figures(document["queues"]["download"])   # the queue counted once
    path = ctx.path(STATUS_FILENAME)
    durable_write(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    now = time.monotonic()
    if mirror_now or ctx.status_mirrored_at is None or now - ctx.status_mirrored_at >= STATUS_MIRROR_SECONDS:
        ctx.status_mirrored_at = now
        ctx.mirror.put(STATUS_FILENAME, path, mutable=True)
    return document
