"""The change log: what the court added, withdrew, restored and changed since the archive's first crawl.

Guarantees:
- `ChangeLog(db).record(run, transitions, today)` writes one `changes` row a document and kind of
  change (added, withdrawn, restored, changed) that a write under watch found (c15 `Transitions`),
  in the caller's transaction: the change and the rows that say so commit together, so a SIGKILL
  loses both or neither, and a change is found once (the archive's rows no longer differ from the
  court's afterwards). A run records a document's change of one kind once; a second "changed" of it
  in the same run adds its fields; a document the run added has no "changed" in it (two searches
  may give its metadata in two forms). A change the log holds as its document's latest of that kind
  already (a run read back from the store, c48) is not recorded again.
- A withdrawal sets `documents.withdrawn_on` (the court system's day first seen withdrawn; the document
  keeps its status, PDF and text); a restoration clears it.
- `rows(since=, run=)` reads the log oldest first as the contract's records (`CHANGE_FIELDS`):
  document_id, change, seen_at (ISO-8601 UTC), run, case_number, court_code, kind (as derive found
  it, else null), filed_date (the court system's day), sha256 (the PDF held, else null), fields
  (for "changed"), how. `since` is a day of the court system's zone (in Kentucky's, a change seen
  at 21:16 in Frankfort on the 5th, 01:16 UTC on the 6th, is one of the 5th) or an instant.
- kv `last_update` (JSON) is what the last update found (`set_last_update`, `last_update`), for
  status.json and the run summary.
- `RunChanges` is one run's recording: its id (`new_run_id`: the UTC instant it began and a random
  suffix), and `watch()`, one transaction whose writes' transitions become the run's changes.

Knobs read: none.
"""
from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

from .c00_config import COURT_SYSTEMS, DEFAULT_COURT_SYSTEM, court_day, day_start, utc_now
from .c10_database import KV_COURT_SYSTEM, Database, Tables, rows_in
from .c15_discovery_state import Transitions

CHANGE_KINDS = ("added", "withdrawn", "restored", "changed")
# The contract's record of a change (`kycourt-pipeline changes --json`, the store's changes/<run>.jsonl).
CHANGE_FIELDS = ("document_id", "change", "seen_at", "run", "case_number", "court_code", "kind", "filed_date",
                 "sha256", "fields", "how")
# What the store's changes/<run>.jsonl holds besides: a "changed" record's new values, so a database
# restored from an older snapshot can replay it (`replay`) and never record the change twice.
CHANGE_EXPORT_FIELDS = CHANGE_FIELDS + ("after",)
KV_LAST_UPDATE = "last_update"

_RECORD_SQL = (
    "INSERT INTO changes (run, document_id, change, seen_at, case_number, court_code, filed_date, fields, after, how) "
    "SELECT :run, d.document_id, :change, :seen_at, d.case_number, :court_code, d.filed_date, :fields, :after, :how "
    "FROM documents d WHERE d.document_id = :document_id "
    "ON CONFLICT (run, document_id, change) DO UPDATE SET fields = :fields, after = :after")

# The latest change of a document among `kinds` (availability: withdrawn and restored alternate).
_LATEST_SQL = ("SELECT change, fields, after FROM changes WHERE document_id = ? AND change IN ({kinds}) "
               "ORDER BY change_id DESC LIMIT 1")

_ROWS_SQL = (
    "SELECT c.document_id, c.change, c.seen_at, c.run, c.case_number, c.court_code, "
    "derived.kind AS kind, c.filed_date, d.sha256 AS sha256, c.fields, c.how, c.after "
    "FROM changes c LEFT JOIN documents d ON d.document_id = c.document_id "
    "LEFT JOIN derived ON derived.document_id = c.document_id ")


class ChangeLog(Tables):
    """The `changes` table and what a run writes of it (see the module docstring)."""

    @property
    def time_zone(self) -> str:
        """The zone of the archive's court system (kv court_system; none: Kentucky's): a day a change
        is read by, and a filed date written as a day, are that court's."""
        system = self.kv_get(KV_COURT_SYSTEM) or DEFAULT_COURT_SYSTEM
        return COURT_SYSTEMS[system if system in COURT_SYSTEMS else DEFAULT_COURT_SYSTEM].time_zone

    def record(self, run: str, transitions: Transitions, today: str, court_code=lambda number: None) -> int:
        """The changes `transitions` found, as rows of `run`; `today`: the court's day a withdrawal
        is first seen; `court_code(case_number)`: the court's code of a number. Returns the rows
        written (a change already the latest of its kind is not written again)."""
        if not transitions:
            return 0
        now = utc_now()
        written = 0
        with self.transaction():
            withdrawn = list(transitions.withdrawn)
            self.conn.executemany("UPDATE documents SET withdrawn_on = ? WHERE document_id = ? AND withdrawn_on IS NULL",
                                  ((today, document_id) for document_id in withdrawn))
            self.conn.executemany("UPDATE documents SET withdrawn_on = NULL WHERE document_id = ?",
                                  ((document_id,) for document_id in transitions.restored))
            numbers = self._numbers([*transitions.added, *withdrawn, *transitions.restored, *transitions.changed])
            for change, document_id, fields, how in self._items(transitions):
                after = None
                if change == "changed":
                    if self._added_in(run, document_id):
                        continue         # new this run: its metadata settling (two searches' forms) is no change
                    fields = self._fields_of_run(run, document_id) | fields
                    after = self._values(document_id, fields)
                if not self._new(change, document_id, after):
                    continue
                self.conn.execute(_RECORD_SQL, {
                    "run": run, "change": change, "seen_at": now, "document_id": document_id,
                    "court_code": court_code(numbers.get(document_id)), "how": how,
                    "fields": json.dumps(sorted(fields)) if fields is not None else None,
                    "after": json.dumps(after, sort_keys=True) if after is not None else None})
                written += 1
        return written

    @staticmethod
    def _items(transitions: Transitions) -> Iterator[tuple[str, str, set[str] | None, str | None]]:
        for document_id in transitions.added:
            yield "added", document_id, None, None
        for document_id, how in transitions.withdrawn.items():
            yield "withdrawn", document_id, None, how
        for document_id in transitions.restored:
            yield "restored", document_id, None, None
        for document_id, fields in transitions.changed.items():
            if document_id not in transitions.added:
                yield "changed", document_id, set(fields), None

    def _numbers(self, document_ids: list[str]) -> dict[str, str | None]:
        return {row[0]: row[1] for row in rows_in(
            self.conn, "SELECT document_id, case_number FROM documents WHERE document_id IN ({ids})", document_ids)}

    def _new(self, change: str, document_id: str, after: dict | None) -> bool:
        """Whether the log does not hold this change as its document's latest of its kind already
        (for "changed": with these new values)."""
        kinds = {"added": ("added",), "changed": ("changed",)}.get(change, ("withdrawn", "restored"))
        latest = self.conn.execute(_LATEST_SQL.format(kinds=", ".join("?" * len(kinds))),
                                   (document_id, *kinds)).fetchone()
        if latest is None:
            return True
        if change == "added":
            return False
        if change == "changed":
            return json.loads(latest["after"] or "null") != after
        return latest["change"] != change

    def _added_in(self, run: str, document_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM changes WHERE run = ? AND document_id = ? AND change = 'added'",
                                 (run, document_id)).fetchone() is not None

    def _fields_of_run(self, run: str, document_id: str) -> set[str]:
        """The fields this run's "changed" row of a document names already."""
        row = self.conn.execute("SELECT fields FROM changes WHERE run = ? AND document_id = ? AND change = 'changed'",
                                (run, document_id)).fetchone()
        return set(json.loads(row["fields"])) if row is not None and row["fields"] else set()

    def _values(self, document_id: str, fields: set[str]) -> dict[str, Any]:
        """The document's values of `fields` now (its metadata columns)."""
        names = sorted(field for field in fields if field.isidentifier())
        row = self.conn.execute(f"SELECT {', '.join(names)} FROM documents WHERE document_id = ?",
                                (document_id,)).fetchone() if names else None
        return {name: row[name] for name in names} if row is not None else {}

    # ------------------------------------------------------------ reads

    def rows(self, *, since: str | None = None, run: str | None = None,
             names: tuple[str, ...] = CHANGE_FIELDS) -> list[dict[str, Any]]:
        """The log's records, oldest first (`names` of each): those seen on or after `since` (a
        day YYYY-MM-DD of the court system, or an instant), or of one `run`."""
        where, params, zone = [], [], self.time_zone
        if since:
            where.append("c.seen_at >= ?")
            params.append(seen_since(since, zone))
        if run:
            where.append("c.run = ?")
            params.append(run)
        sql = _ROWS_SQL + (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY c.change_id"
        return [change_record(row, names, time_zone=zone) for row in self.conn.execute(sql, params)]

    def newest(self, limit: int, *, change: str | None = None, since: str | None = None) -> list[dict[str, Any]]:
        """The `limit` newest records, newest first (of one kind of change, seen on or after a
        day `since` of the court system, when given)."""
        where, params, zone = [], [], self.time_zone
        if change:
            where.append("c.change = ?")
            params.append(change)
        if since:
            where.append("c.seen_at >= ?")
            params.append(seen_since(since, zone))
        sql = _ROWS_SQL + (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY c.change_id DESC LIMIT ?"
        return [change_record(row, time_zone=zone) for row in self.conn.execute(sql, (*params, limit))]

    def runs(self) -> list[str]:
        """The runs that recorded a change, oldest first."""
        return [row[0] for row in self.conn.execute("SELECT run FROM changes GROUP BY run ORDER BY MIN(change_id)")]

    def counts(self, run: str) -> dict[str, int]:
        """A run's changes by kind (every kind named, 0 when none)."""
        found = dict(self.conn.execute("SELECT change, COUNT(*) FROM changes WHERE run = ? GROUP BY change", (run,)))
        return {kind: found.get(kind, 0) for kind in CHANGE_KINDS}

    def replay(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Records of a run exported to the store (c89) that this database lacks (it was restored from
        an older snapshot) written back, so a change they hold is never recorded twice."""
        written = 0
        with self.transaction():
            for record in records:
                fields = record.get("fields")
                after = record.get("after")
                cursor = self.conn.execute(
                    "INSERT INTO changes (run, document_id, change, seen_at, case_number, court_code, filed_date, "
                    "fields, after, how) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (run, document_id, change) DO NOTHING",
                    (record["run"], record["document_id"], record["change"], record["seen_at"],
                     record.get("case_number"), record.get("court_code"), record.get("filed_date"),
                     json.dumps(fields) if fields is not None else None,
                     json.dumps(after, sort_keys=True) if after is not None else None, record.get("how")))
                written += cursor.rowcount
        return written

    def withdrawn_count(self) -> int:
        """Documents the court withdrew that the archive keeps (withdrawn_on set); 0 for a database
        from before the change log (read before the run that migrates it)."""
        try:
            return self.conn.execute("SELECT COUNT(*) FROM documents WHERE withdrawn_on IS NOT NULL").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    # ------------------------------------------------------- last update

    def set_last_update(self, figures: Mapping[str, Any]) -> None:
        self.db.kv_set(KV_LAST_UPDATE, json.dumps(dict(figures), sort_keys=True))

    def last_update(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.kv_get(KV_LAST_UPDATE) or "null")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def change_record(row: sqlite3.Row | Mapping[str, Any], names: tuple[str, ...] = CHANGE_FIELDS, *,
                  time_zone: str) -> dict[str, Any]:
    """A `changes` row (joined as `rows` joins it) as the contract's record (`names`: CHANGE_EXPORT_FIELDS
    for the store's copy), its filed date the court's day (in `time_zone`)."""
    record = {name: row[name] for name in names}
    if "filed_date" in record:
        record["filed_date"] = court_day(record["filed_date"], time_zone)
    record["fields"] = json.loads(record["fields"]) if record["fields"] else ([] if record["change"] == "changed"
                                                                            else None)
    if "after" in record:
        record["after"] = json.loads(record["after"]) if record["after"] else None
    return record


def seen_since(since: str, time_zone: str) -> str:
    """The first `seen_at` on or after `since`: the instant a day (YYYY-MM-DD) of `time_zone` begins,
    or an instant as it is."""
    return day_start(since, time_zone) if len(since.strip()) == 10 else since


def new_run_id() -> str:
    """A run's id: the UTC instant it began, and a random suffix (two sessions in one second differ)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


class RunChanges:
    """One run's recording of changes (see the module docstring); `written` counts its rows."""

    def __init__(self, db: Database, run: str, today: str, court_code: Callable[[Any], str | None]):
        self.db, self.run, self.today, self.court_code = db, run, today, court_code
        self.written = 0

    @contextlib.contextmanager
    def watch(self) -> Iterator[Transitions]:
        """One transaction: what its writes under watch found is recorded before it commits."""
        with self.db.transaction():
            transitions = Transitions()
            yield transitions
            self.written += ChangeLog(self.db).record(self.run, transitions, self.today, self.court_code)


def watching(changes: RunChanges | None) -> contextlib.AbstractContextManager[Transitions | None]:
    """`changes.watch()`, or (no changes recorded: a first crawl) a context that watches nothing."""
    return changes.watch() if changes is not None else contextlib.nullcontext()


def change_line(record: Mapping[str, Any]) -> str:
    """A change on one line, as `kycourt-pipeline changes` prints it."""
    fields = f"  [{', '.join(record['fields'])}]" if record.get("fields") else ""
    how = f"  ({record['how']})" if record.get("how") else ""
    return (f"{record['seen_at']}  {record['change']:<9}  {record.get('case_number') or '-'}  "
            f"{record.get('court_code') or '-'}  {record.get('kind') or '-'}  {record.get('filed_date') or '-'}  "
            f"{record['document_id']}{fields}{how}")
