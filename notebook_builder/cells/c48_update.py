"""An update: a run after the archive's first complete crawl, its changes, how far it reached, what it found.

Guarantees:
- `Update(ctx, db, court)` begins one: its run (c19 `RunChanges`: every change recorded in the
  transaction of the write that found it) and the court system's day it began, kept in kv
  `update_started_on` until an update completes (a resumed one keeps its day). Before recording,
  the runs the store's `changes/` holds and this database lacks (it was restored from an older
  snapshot) are read back (`replay`), so a change is never recorded twice.
- `finish(complete, ...)`: a complete update (every shard swept without errors, the opinion search
  answered, nothing stopped it) moves kv `complete_through` to the day it began, sets
  `archive_updated_at` and forgets `update_started_on`; an incomplete one leaves them, and the next
  run resumes its sweep. Either way kv `last_update` (c19) says when, the requests this run sent,
  the changes by kind, the day the archive was complete through before (`since`), the hours an
  update of this size takes at the default pacing, and all that in words (`update_words`).
- `export_changes(ctx, db, current=)`: each run's records as `changes/<run>.jsonl` (c19
  CHANGE_EXPORT_FIELDS, one object a line), written to the workspace and the store at the end of a
  session, once every write of its runs is over (`current`, this session's update, even with no
  change): a name the store holds is never written again.

Knobs read: TODAY (through Config.today), PACING_SEARCH and PACING_DL's defaults (the projection).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from .c00_config import KNOB_BY_NAME, StoreError, utc_now
from .c05_durable import atomic_write
from .c06_layout import CHANGES_FOLDER, changes_store_name
from .c10_database import KV_ARCHIVE_UPDATED_AT, KV_COMPLETE_THROUGH, Database
from .c19_changes import CHANGE_EXPORT_FIELDS, ChangeLog, RunChanges, new_run_id
from .c30_client import projected_hours
from .c35_context import Context

log_update = logging.getLogger("kycourt.update")

KV_UPDATE_STARTED_ON = "update_started_on"


def default_pacing_hours(json_requests: int, downloads: int, latency_seconds: float) -> float:
    """Hours these requests take one at a time at the default pacing (PACING, PACING_SEARCH, PACING_DL
    as shipped) and the latency observed."""
    pacing = KNOB_BY_NAME["PACING"].default
    return (projected_hours(json_requests, KNOB_BY_NAME["PACING_SEARCH"].default, pacing, latency_seconds)
            + projected_hours(downloads, KNOB_BY_NAME["PACING_DL"].default, pacing, latency_seconds))


def update_words(figures: Mapping[str, Any]) -> str:
    """What an update found, in words: '12 new documents, 3 withdrawn since 2026-11-28 (1,234 requests,
    0.4 h at the default pacing)'."""
    counts = figures.get("counts") or {}
    nouns = (("added", "new document", "new documents"), ("withdrawn", "withdrawn", "withdrawn"),
             ("restored", "restored", "restored"), ("changed", "changed", "changed"))
    said = [f"{counts[kind]:,} {one if counts[kind] == 1 else many}" for kind, one, many in nouns if counts.get(kind)]
    found = ", ".join(said) or "nothing new"
    since = f" since {figures['since']}" if figures.get("since") else ""
    cost = (f" ({figures.get('requests', 0):,} requests, {figures.get('hours_at_default_pacing', 0.0):.1f} h "
            "at the default pacing)")
    if figures.get("complete"):
        return f"{found}{since}; complete through {figures.get('through')}{cost}"
    return f"update not complete yet: {found}{since} so far; the next run goes on{cost}"


def last_update_lines(db: Database) -> list[str]:
    """The status cell's line of what the last update found ([] before the first)."""
    figures = ChangeLog(db).last_update()
    return [f"last update ({figures.get('at')}): {figures.get('words')}"] if figures else []


class Update:
    """One update (see the module docstring)."""

    def __init__(self, ctx: Context, db: Database, court):
        self.ctx, self.db = ctx, db
        self.since = db.kv_get(KV_COMPLETE_THROUGH)
        self.started_on = db.kv_get(KV_UPDATE_STARTED_ON) or ctx.cfg.today().isoformat()
        db.kv_set(KV_UPDATE_STARTED_ON, self.started_on)
        self.changes = RunChanges(db, new_run_id(), ctx.cfg.today().isoformat(), court.code_of)
        self.replayed = replay(ctx, db)

    @property
    def run(self) -> str:
        return self.changes.run

    def finish(self, *, complete: bool, json_requests: int, downloads: int, latency_seconds: float) -> dict:
        """The update's end (see the module docstring); returns its kv `last_update` figures."""
        db = self.db
        if complete:
            with db.transaction():
                db.kv_set(KV_COMPLETE_THROUGH, self.started_on)
                db.kv_set(KV_ARCHIVE_UPDATED_AT, utc_now())
                db.conn.execute("DELETE FROM kv WHERE key = ?", (KV_UPDATE_STARTED_ON,))
        figures = {"at": utc_now(), "run": self.run, "complete": complete, "since": self.since,
                   "through": self.started_on if complete else None, "requests": json_requests + downloads,
                   "counts": ChangeLog(db).counts(self.run),
                   "hours_at_default_pacing": round(default_pacing_hours(json_requests, downloads, latency_seconds), 2)}
        figures["words"] = update_words(figures)
        ChangeLog(db).set_last_update(figures)
        log_update.info("update: %s", figures["words"])
        return figures


def replay(ctx: Context, db: Database) -> int:
    """The store's changes/<run>.jsonl of runs this database does not hold, read back into it (c19
    `ChangeLog.replay`); returns the records written. A store that cannot be listed replays nothing."""
    log = ChangeLog(db)
    try:
        names = [name for name in ctx.store.list_dir(CHANGES_FOLDER) if name.endswith(".jsonl")]
    except StoreError as exc:
        log_update.warning("the store's %s/ cannot be listed (%s): none replayed", CHANGES_FOLDER, exc)
        return 0
    known = set(log.runs())
    written = 0
    for name in sorted(names):
        run = name.rsplit("/", 1)[-1][:-len(".jsonl")]
        if run in known:
            continue
        local = ctx.path(changes_store_name(run))
        local.parent.mkdir(parents=True, exist_ok=True)
        if not ctx.mirror.fetch(changes_store_name(run), local):
            continue
        records = [json.loads(line) for line in local.read_text(encoding="utf-8").splitlines() if line.strip()]
        written += log.replay(records)
    if written:
        log_update.info("changes: %d records of earlier runs read back from the store", written)
    return written


def export_changes(ctx: Context, db: Database, *, current: str | None = None) -> list[str]:
    """Every run's changes/<run>.jsonl the store lacks, and the run `current` (this session's update,
    ending) even when it recorded nothing; returns the names written."""
    log = ChangeLog(db)
    runs = [*log.runs(), *([current] if current else [])]
    if not runs:       # nothing recorded yet (a first crawl): nothing to list the store for
        return []
    try:
        held = set(ctx.store.list_dir(CHANGES_FOLDER))
    except StoreError as exc:
        log_update.warning("the store's %s/ cannot be listed (%s): changes not exported this run", CHANGES_FOLDER, exc)
        return []
    written = []
    for run in dict.fromkeys(runs):
        name = changes_store_name(run)
        if name in held:
            continue
        records = log.rows(run=run, names=CHANGE_EXPORT_FIELDS)
        path = ctx.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, "".join(json.dumps(record, sort_keys=True) + "\n" for record in records).encode("utf-8"))
        if ctx.mirror.put(name, path):
            written.append(name)
    return written

