"""Discovery's state: documents as the court lists them, cases, docket entries, sweeps and shards.

Guarantees:
- `upsert_discovered` inserts new documents as `discovered` and refreshes the metadata of known
  ones (a NULL never erases what the court said); status, attempts and every download and
  extract column are left alone, so a status never moves back.
- The court's word on availability: a document not yet downloaded that the court withholds is a
  withheld failure (`failed`, 404, document_available 0, WITHHELD_ERROR); one it lists as
  available again goes back to the download queue (RELEASED_ERROR).
- `record_case_walk` writes one walked case (row, entries, documents, court texts) in one
  transaction; a case's search-row fingerprint is the one it was walked at.
- A sweep's shards are rows (`start_sweep`, `finish_shard`): a resumed sweep continues with the
  shards still pending; a split adds its children atomically, so the shards a complete sweep did
  not split (`last_sweep_leaves`) cover every shard it began with.
- `record_access` writes what a court of access states (TR Portal) says of its documents: the
  state (NULL: public, document_available 1; else not public, document_available 0, never a
  failure), the court's opinion mark (once an opinion, always one) and the download path; a
  document that becomes public has its attempts back. A source with no access information (the
  feed, publications: not `authoritative`) sets a state it names and never clears one.
- Under watch (`watch=Transitions()`, an update's writes) the writes say what they changed of the
  documents the archive held: ids new to it, documents the court withdrew (listed unavailable, or
  gone from a list of their entry that answered other files: `listed_entries`), restored (available
  again), and metadata the court changed (WATCHED_COLUMNS; a value filling a NULL is no change). A
  retitled case's and a changed entry description's other documents take the new value too.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .c00_config import utc_now
from .c10_database import KV_DISCOVERY_STRATEGY, Tables, rows_in

# The top-level shard of a discovery_shards row: `2019-CA` and `2024 CA ADMIN` are their own (an ADMIN
# shard never splits), a split child `2019-CA-01` begins with its own.
_TOP_LEVEL_SQL = "CASE WHEN length(shard) IN (7, 13) THEN shard ELSE substr(shard, 1, 7) END"

DOCUMENT_METADATA_COLUMNS = (
    "case_number", "court", "case_title", "docket_entry_id", "description",
    "filed_date", "case_id", "document_name", "shard",
)


# What the case walk (and a resolved row) adds to a document (v3); written only when a row has them.
DOCUMENT_DETAIL_COLUMNS = (
    "entry_type", "entry_subtype", "dms_document_id", "mime_type", "document_description",
    "document_available", "related_case_numbers",
)


CASE_COLUMNS = ("case_id", "case_number", "court", "court_level", "title", "case_type", "classification",
                "status", "status_date", "filed_date", "closed", "category", "shard", "related_case_numbers",
                "court_path")


DOCKET_ENTRY_COLUMNS = ("docket_entry_id", "case_id", "entry_type", "subtype", "description", "filed_date",
                        "has_documents", "related_case_numbers", "secured")


_DISCOVERED_COLUMNS = ("document_id",) + DOCUMENT_METADATA_COLUMNS


# The metadata of a document a "changed" record names when the court changes it.
WATCHED_COLUMNS = ("case_number", "court", "case_title", "description", "filed_date", "document_name",
                   "entry_type", "entry_subtype", "document_description")


_INSERT_DISCOVERED_SQL = (
    f"INSERT INTO documents ({', '.join(_DISCOVERED_COLUMNS)}, status, discovered_at, updated_at) "
    f"VALUES ({', '.join('?' for _ in _DISCOVERED_COLUMNS)}, 'discovered', ?, ?) "
    "ON CONFLICT(document_id) DO NOTHING")


# Metadata only (a NULL never erases what the court said before); status and the rest are left alone.
_REFRESH_DISCOVERED_SQL = (
    f"UPDATE documents SET {', '.join(f'{c} = COALESCE(?, {c})' for c in DOCUMENT_METADATA_COLUMNS)} "
    "WHERE document_id = ?")


_DETAILS_SQL = (
    f"UPDATE documents SET {', '.join(f'{c} = COALESCE(?, {c})' for c in DOCUMENT_DETAIL_COLUMNS)} "
    "WHERE document_id = ?")


# A withheld document (the court lists it with documentAvailable false) is a permanent failure
# that was never requested: `failed`, http_status 404, document_available 0, this last_error.
WITHHELD_ERROR = "withheld: the court lists this file with documentAvailable false; not requested"


RELEASED_ERROR = "released: the court lists this file as available again; queued"
PUBLIC_AGAIN_ERROR = "public at the court again; queued"


# The court's word on availability, as it changes: a document not yet downloaded that the court
# withholds becomes a withheld failure; a withheld one it lists as available again goes back to the
# download queue (status discovered, attempts 0): the explicit way out of the permanent-404 rule.
# A downloaded document keeps its status (its bytes are held) and only records the court's word.
_WITHHOLD = "(:available = 0 AND status IN ('discovered', 'failed'))"


_RELEASE = "(:available = 1 AND status = 'failed' AND document_available = 0)"


_AVAILABILITY_SQL = (
    f"UPDATE documents SET "
    f"status = CASE WHEN {_WITHHOLD} THEN 'failed' WHEN {_RELEASE} THEN 'discovered' ELSE status END, "
    f"http_status = CASE WHEN {_WITHHOLD} THEN 404 WHEN {_RELEASE} THEN NULL ELSE http_status END, "
    f"attempts = CASE WHEN {_RELEASE} THEN 0 ELSE attempts END, "
    f"last_error = CASE WHEN {_WITHHOLD} THEN :withheld WHEN {_RELEASE} THEN :released ELSE last_error END, "
    "document_available = :available, updated_at = :now "
    "WHERE document_id = :id AND document_available IS NOT :available")


# A case row from a search refreshes what it carries; a walk's fuller header fills the rest.
_UPSERT_CASE_SQL = (
    f"INSERT INTO cases ({', '.join(CASE_COLUMNS)}, updated_at) VALUES ({', '.join('?' for _ in CASE_COLUMNS)}, ?) "
    "ON CONFLICT(case_id) DO UPDATE SET "
    + ", ".join(f"{c} = COALESCE(excluded.{c}, {c})" for c in CASE_COLUMNS[1:]) + ", updated_at = excluded.updated_at")


_UPSERT_ENTRY_SQL = (
    f"INSERT INTO docket_entries ({', '.join(DOCKET_ENTRY_COLUMNS)}, updated_at) "
    f"VALUES ({', '.join('?' for _ in DOCKET_ENTRY_COLUMNS)}, ?) ON CONFLICT(docket_entry_id) DO UPDATE SET "
    + ", ".join(f"{c} = COALESCE(excluded.{c}, {c})" for c in DOCKET_ENTRY_COLUMNS[1:])
    + ", updated_at = excluded.updated_at")


@dataclass
class Transitions:
    """What writes under watch found (see the module docstring): document ids new to the archive,
    withdrawn ones (id -> how: 'unavailable' or 'delisted'), restored ones, and changed ones (id ->
    the WATCHED_COLUMNS the court changed). c19 `ChangeLog.record` writes them."""
    added: list[str] = field(default_factory=list)
    withdrawn: dict[str, str] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    changed: dict[str, set[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.withdrawn or self.restored or self.changed)

    def change(self, document_id: str, column: str) -> None:
        self.changed.setdefault(document_id, set()).add(column)


def coverage_gaps(audit: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Shards of `DiscoveryState.coverage_audit()` holding fewer than the court announced: documents for the
    document search, cases for the case walk. [] when every shard is whole."""
    gaps = []
    for row in audit:
        held = row["cases"] if row["strategy"] == "cases" else row["documents"]
        if row["announced"] is not None and held < row["announced"]:
            gaps.append({"shard": row["shard"], "announced": row["announced"], "held": held,
                         "unit": "cases" if row["strategy"] == "cases" else "documents"})
    return gaps



class DiscoveryState(Tables):
    """What discovery knows: documents, cases, docket entries, sweeps and shards."""

    def upsert_discovered(self, rows: Iterable[Mapping[str, Any]], *, watch: Transitions | None = None) -> int:
        """Inserts new documents as `discovered`; refreshes metadata of known ones.

        Returns how many document ids were new. Status, attempts and every
        download/extract column are left alone, so a status never moves back.
        `watch`: what the writes changed is added to it.
        """
        now = utc_now()
        if watch is not None:
            rows = list(rows)
        values = [[row.get(c) for c in _DISCOVERED_COLUMNS] for row in rows]
        with self.transaction():
            held = self._watched([row["document_id"] for row in rows]) if watch is not None else None
            # changes() of a DO NOTHING insert counts the new ids exactly, without two COUNT(*)s
            # over the table; only a page that held known ids needs the metadata refresh.
            before = self.conn.total_changes
            self.conn.executemany(_INSERT_DISCOVERED_SQL, (v + [now, now] for v in values))
            new = self.conn.total_changes - before
            if new < len(values):
                self.conn.executemany(_REFRESH_DISCOVERED_SQL, (v[1:] + v[:1] for v in values))
            details = [[row.get(c) for c in DOCUMENT_DETAIL_COLUMNS] + [row["document_id"]] for row in rows
                       if any(row.get(c) is not None for c in DOCUMENT_DETAIL_COLUMNS)] if isinstance(rows, list) else []
            if details:
                # Availability first: it reads the stored document_available the details then refresh.
                self.conn.executemany(_AVAILABILITY_SQL, (
                    {"id": row["document_id"], "available": row["document_available"], "now": now,
                     "withheld": WITHHELD_ERROR, "released": RELEASED_ERROR}
                    for row in rows if row.get("document_available") is not None))
                self.conn.executemany(_DETAILS_SQL, details)
            if watch is not None:
                _note_transitions(held, rows, watch)
            return new

    def record_access(self, rows: Sequence[Mapping[str, Any]], *, authoritative: bool = True) -> None:
        """Each row's `access_state`, `opinion` and `court_path` (see the module docstring); not
        `authoritative` (a source with no access information: the feed, publications), a row's None
        keeps the state the table holds."""
        now = utc_now()
        state = "COALESCE(:state, CASE WHEN :authoritative THEN NULL ELSE access_state END)"
        with self.transaction():
            self.conn.executemany(
                "UPDATE documents SET "
                f"attempts = CASE WHEN {state} IS NULL AND access_state IS NOT NULL THEN 0 ELSE attempts END, "
                "last_error = CASE WHEN :state IS NOT NULL THEN :why "
                f"  WHEN {state} IS NULL AND access_state IS NOT NULL THEN :public ELSE last_error END, "
                f"access_state = {state}, document_available = ({state} IS NULL), "
                "opinion = MAX(COALESCE(opinion, 0), :opinion), court_path = COALESCE(:path, court_path), "
                "updated_at = :now WHERE document_id = :id",
                ({"id": row["document_id"], "state": row.get("access_state"), "opinion": row.get("opinion") or 0,
                  "path": row.get("court_path"), "now": now, "public": PUBLIC_AGAIN_ERROR,
                  "authoritative": int(authoritative),
                  "why": f"not public at the court: {row.get('access_state')}; not requested"} for row in rows))

    def access_of(self, document_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """id -> (access_state, document_available, withdrawn_on) of the given documents the table holds."""
        return {row["document_id"]: row for row in rows_in(
            self.conn, "SELECT document_id, access_state, document_available, withdrawn_on FROM documents "
                       "WHERE document_id IN ({ids})", document_ids)}

    def upsert_cases(self, cases: Sequence[Mapping[str, Any]]) -> None:
        """Cases as a search lists them (not walked), in one transaction: what a row carries refreshes
        what the table holds."""
        now = utc_now()
        with self.transaction():
            self.conn.executemany(_UPSERT_CASE_SQL, ([case.get(c) for c in CASE_COLUMNS] + [now] for case in cases))

    def _watched(self, document_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """id -> (WATCHED_COLUMNS, document_available) of the given documents the table holds."""
        return {row["document_id"]: row for row in rows_in(
            self.conn, f"SELECT document_id, {', '.join(WATCHED_COLUMNS)}, document_available FROM documents "
                       "WHERE document_id IN ({ids})", document_ids)}

    def cases_to_walk(self, sweep: int, case_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """case_id -> (walked_sweep, walked_at, closed, search_row) of the given cases the table holds."""
        return {row["case_id"]: row for row in rows_in(
            self.conn, "SELECT case_id, walked_sweep, walked_at, closed, search_row FROM cases "
                       "WHERE case_id IN ({ids})", case_ids)}

    def record_case_walk(self, sweep: int | None, case: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]],
                         documents: list[dict], court_texts: Sequence[Mapping[str, Any]] = (), *,
                         watch: Transitions | None = None, listed_entries: Sequence[str] = (),
                         title_seen: bool = False, details_due: bool = True) -> int:
        """One walked case in one transaction: its row (walked in `sweep`, with the search row's
        fingerprint it was walked at; None: seen, not walked, so the fingerprint of its last walk
        stays; a case of None: entries alone), entries, documents and the court's texts. Returns the
        new documents. `watch` (see the module docstring): `listed_entries` are the entries whose
        file list answered files in this walk, `title_seen` that the case's title is the one its
        files carry (so a different stored title is a retitling). Unless `details_due`, a case whose
        parties and lower courts were fetched for its last walk keeps them as fetched for this one."""
        now = utc_now()
        with self.transaction():
            if watch is not None:
                old_title = self.conn.execute("SELECT title FROM cases WHERE case_id = ?",
                                              (case["case_id"],)).fetchone() if case is not None else None
                old_descriptions = self._entry_descriptions([entry["docket_entry_id"] for entry in entries])
            if case is not None:
                self.conn.execute(_UPSERT_CASE_SQL, [case.get(c) for c in CASE_COLUMNS] + [now])
            if sweep is not None and case is not None:
                if not details_due:
                    self.conn.execute("UPDATE cases SET details_sweep = ? WHERE case_id = ? AND details_sweep >= walked_sweep",
                                      (sweep, case["case_id"]))
                self.conn.execute("UPDATE cases SET walked_sweep = ?, walked_at = ?, search_row = ? WHERE case_id = ?",
                                  (sweep, now, case.get("search_row"), case["case_id"]))
            self.conn.executemany(_UPSERT_ENTRY_SQL, ([entry.get(c) for c in DOCKET_ENTRY_COLUMNS] + [now]
                                                      for entry in entries))
            # Entries whose file list was asked: why it must be asked again (NULL: it need not).
            self.conn.executemany(
                "UPDATE docket_entries SET files_missing = ?, files_asked_sweep = ? WHERE docket_entry_id = ?",
                ((entry["files_missing"], entry["files_asked_sweep"], entry["docket_entry_id"])
                 for entry in entries if "files_asked_sweep" in entry))
            new = self.upsert_discovered(documents, watch=watch) if documents else 0
            if watch is not None:
                listed = {document["document_id"] for document in documents}
                if title_seen and old_title is not None and case.get("title") and old_title[0] \
                        and old_title[0] != case["title"]:
                    self.follow(watch, "case_title", "case_id", case["case_id"], case["title"], listed)
                for entry in entries:
                    old = old_descriptions.get(entry["docket_entry_id"])
                    if old and entry.get("description") and old != entry["description"]:
                        self.follow(watch, "description", "docket_entry_id", entry["docket_entry_id"],
                                     entry["description"], listed)
                self._withdraw_delisted(watch, listed_entries, listed)
            self.conn.executemany(
                "INSERT INTO court_text(document_id, sha256, pages, chars, replacement_chars, fetched_at) "
                "VALUES (:document_id, :sha256, :pages, :chars, :replacement_chars, :now) "
                "ON CONFLICT(document_id) DO UPDATE SET sha256 = excluded.sha256, pages = excluded.pages, "
                "chars = excluded.chars, replacement_chars = excluded.replacement_chars, fetched_at = excluded.fetched_at",
                ({**text, "now": now} for text in court_texts))
            return new

    def _entry_descriptions(self, entry_ids: Sequence[str]) -> dict[str, str | None]:
        return {row[0]: row[1] for row in rows_in(
            self.conn, "SELECT docket_entry_id, description FROM docket_entries WHERE docket_entry_id IN ({ids})",
            entry_ids)}

    def follow(self, watch: Transitions, column: str, key: str, value_of_key: str, value: str,
                listed: set[str]) -> None:
        """The documents of a case (`key` case_id) or an entry (docket_entry_id) this walk did not list
        take its new `column` value (a retitling, a changed description), each a change."""
        ids = [row[0] for row in self.conn.execute(
            f"SELECT document_id FROM documents WHERE {key} = ? AND {column} IS NOT NULL AND {column} != ?",
            (value_of_key, value)) if row[0] not in listed]
        self.conn.executemany(f"UPDATE documents SET {column} = ? WHERE document_id = ?",
                              ((value, document_id) for document_id in ids))
        for document_id in ids:
            watch.change(document_id, column)

    def _withdraw_delisted(self, watch: Transitions, entry_ids: Sequence[str], listed: set[str]) -> None:
        """Documents the archive holds of an entry whose list answered other files and not them."""
        for entry_id in entry_ids:
            self.withdraw_unlisted("docket_entry_id = ?", (entry_id,), listed, watch)

    def withdraw_unlisted(self, where: str, params: Sequence[Any], listed: set[str], watch: Transitions) -> list[str]:
        """The documents `where` names that the archive holds as served and the court's complete list of
        them (`listed`) no longer names: withdrawn ('delisted'), withheld from now on as
        `documentAvailable: false` ones are (an adopted row whose id discovery has not confirmed as a
        document is not one). Returns their ids."""
        gone = [row[0] for row in self.conn.execute(
            f"SELECT document_id FROM documents d WHERE {where} AND COALESCE(document_available, 1) != 0 "
            "AND NOT EXISTS (SELECT 1 FROM legacy_documents l WHERE l.document_id = d.document_id "
            "AND l.id_kind != 'document')", tuple(params)) if row[0] not in listed]
        now = utc_now()
        self.conn.executemany(_AVAILABILITY_SQL, (
            {"id": document_id, "available": 0, "now": now, "withheld": WITHHELD_ERROR, "released": RELEASED_ERROR}
            for document_id in gone))
        for document_id in gone:
            watch.withdrawn[document_id] = "delisted"
        return gone

    # The details pass: walked cases whose parties and lower courts are not fetched for their last walk.
    _DETAILS_DUE_SQL = "walked_sweep IS NOT NULL AND (details_sweep IS NULL OR details_sweep < walked_sweep)"

    def cases_needing_details(self, limit: int, after: str = "") -> list[sqlite3.Row]:
        """The next `limit` walked cases whose details are due, in case-number order after `after`."""
        return self.conn.execute(
            f"SELECT case_id, case_number, walked_sweep, court_path FROM cases WHERE {self._DETAILS_DUE_SQL} "
            "AND case_number > ? ORDER BY case_number LIMIT ?", (after, limit)).fetchall()

    def details_due_count(self) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM cases WHERE {self._DETAILS_DUE_SQL}").fetchone()[0]

    def record_case_details(self, case_id: str, walked_sweep: int, parties: Sequence[Mapping[str, Any]] | None,
                            lower_courts: Sequence[Mapping[str, Any]] | None) -> None:
        """A case's parties and lower courts (each None: the court gave no usable list, the old rows
        stay), and that they were fetched for the walk of `walked_sweep`; one transaction."""
        with self.transaction():
            if parties is not None:
                self.conn.execute("DELETE FROM parties WHERE case_id = ?", (case_id,))
                self.conn.executemany(
                    "INSERT INTO parties(case_id, position, name, role, status, pro_se, address, attorneys) "
                    "VALUES (:case_id, :position, :name, :role, :status, :pro_se, :address, :attorneys)",
                    ({**party, "attorneys": json.dumps(party.get("attorneys") or [])} for party in parties))
            if lower_courts is not None:
                self.conn.execute("DELETE FROM lower_courts WHERE case_id = ?", (case_id,))
                self.conn.executemany(
                    "INSERT INTO lower_courts(case_id, position, name, case_number, case_title) "
                    "VALUES (:case_id, :position, :name, :case_number, :case_title)", lower_courts)
            self.conn.execute("UPDATE cases SET details_sweep = ? WHERE case_id = ?", (walked_sweep, case_id))

    _NOT_PUBLIC_CASES_SQL = ("FROM cases c WHERE EXISTS (SELECT 1 FROM documents d WHERE d.case_id = c.case_id "
                             "AND d.access_state IS NOT NULL) AND COALESCE(c.walked_sweep, 0) < ?")

    def cases_not_public(self, sweep: int, limit: int) -> list[sqlite3.Row]:
        """The next `limit` cases holding documents not public at the court that the sweep `sweep` has not
        walked, those asked longest ago first (a court of access states: their lists are asked again)."""
        return self.conn.execute(
            f"SELECT c.* {self._NOT_PUBLIC_CASES_SQL} ORDER BY COALESCE(c.walked_at, ''), c.case_number LIMIT ?",
            (sweep, limit)).fetchall()

    def cases_not_public_count(self, sweep: int) -> int:
        return self.conn.execute(f"SELECT COUNT(*) {self._NOT_PUBLIC_CASES_SQL}", (sweep,)).fetchone()[0]

    def note_case_asked(self, case_id: str) -> None:
        """A case whose list was asked again now (its walk is not renewed)."""
        with self.transaction():
            self.conn.execute("UPDATE cases SET walked_at = ? WHERE case_id = ?", (utc_now(), case_id))

    def entries_of_case(self, case_id: str) -> list[sqlite3.Row]:
        """The case's docket entries, each with `opinion`: 1 when a document of it is marked an opinion
        (the court's mark, c12), else 0; one query."""
        return self.conn.execute(
            "SELECT e.*, COALESCE((SELECT MAX(COALESCE(d.opinion, 0)) FROM documents d "
            "WHERE d.docket_entry_id = e.docket_entry_id), 0) AS opinion "
            "FROM docket_entries e WHERE e.case_id = ?", (case_id,)).fetchall()

    def entries_to_ask_again(self, sweep: int, limit: int = -1, after: str = "", *,
                             oldest_first: bool = False) -> list[sqlite3.Row]:
        """The next `limit` docket entries (by id, after `after`; or, `oldest_first`, those asked
        longest ago) whose file list came back empty or with withheld files, not asked in `sweep` yet
        (with their case's number, for the documents' rows)."""
        order = "COALESCE(e.files_asked_sweep, 0), e.docket_entry_id" if oldest_first else "e.docket_entry_id"
        return self.conn.execute(
            "SELECT e.*, c.case_number, c.court, c.title FROM docket_entries e "
            "LEFT JOIN cases c ON c.case_id = e.case_id "
            "WHERE e.files_missing IS NOT NULL AND COALESCE(e.files_asked_sweep, 0) < ? AND e.docket_entry_id > ? "
            f"ORDER BY {order} LIMIT ?", (sweep, after, limit)).fetchall()

    def entries_missing_files(self) -> dict[str, int]:
        """How many docket entries wait for their files to be listed again, by reason."""
        return dict(self.conn.execute(
            "SELECT files_missing, COUNT(*) FROM docket_entries WHERE files_missing IS NOT NULL "
            "GROUP BY files_missing").fetchall())

    def withheld_documents(self, limit: int | None = None) -> list[sqlite3.Row]:
        """Documents the court lists but withholds (documentAvailable false) and the archive never held,
        by case number (one it held and the court withdrew since is kept: c19 counts those)."""
        return self.conn.execute(
            "SELECT document_id, case_number, description, document_name, filed_date, status FROM documents "
            f"WHERE {self._withheld()} ORDER BY case_number, document_id LIMIT ?",
            (-1 if limit is None else limit,)).fetchall()

    def withheld_count(self) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM documents WHERE {self._withheld()}").fetchone()[0]

    def _withheld(self) -> str:
        """Listed with documentAvailable false and never held: a document the court withdrew after the
        archive held it is not withheld (a database from before the change log has no withdrawn_on),
        nor one the court serves to some and not to the public (access_state, c12)."""
        columns = self.db.document_columns()
        where = "document_available = 0"
        if "withdrawn_on" in columns:
            where += " AND withdrawn_on IS NULL"
        if "access_state" in columns:
            where += " AND access_state IS NULL"
        return where

    def known_docket_entries_with_documents(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these docket entries already have a document in the table that the court listed:
        an adopted row discovery has not confirmed as a document (legacy_documents: unchecked, or an
        entry's or case's id) does not count, so its entry is asked and the answer confirms it, or
        finds the entry's real documents (c38_legacy)."""
        return {row[0] for row in rows_in(
            self.conn, "SELECT DISTINCT docket_entry_id FROM documents d WHERE docket_entry_id IN ({ids}) "
                       "AND NOT EXISTS (SELECT 1 FROM legacy_documents l WHERE l.document_id = d.document_id "
                       "AND l.id_kind != 'document')", entry_ids)}

    def settled_entries(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these docket entries an update's walk of an open case does not list again: those
        whose documents the table holds, and those waiting to be asked again (files_missing)."""
        return self.known_docket_entries_with_documents(entry_ids) | {row[0] for row in rows_in(
            self.conn, "SELECT docket_entry_id FROM docket_entries WHERE docket_entry_id IN ({ids}) "
                       "AND files_missing IS NOT NULL", entry_ids)}

    def coverage_audit(self) -> list[sqlite3.Row]:
        """Per top-level shard of the latest sweep that paged it: what the court announced
        (`announced`: documents for the document search, cases for the case walk; for a split shard,
        the sum of its paged leaves, whose totals leave out neighbouring numbers) next to what the
        tables hold (`documents`, `cases`)."""
        return self.conn.execute(
            f"WITH latest AS (SELECT {_TOP_LEVEL_SQL} AS shard, MAX(sweep) AS sweep FROM discovery_shards "
            f"                WHERE total_count IS NOT NULL GROUP BY {_TOP_LEVEL_SQL}) "
            "SELECT latest.shard, latest.sweep, "
            "  (SELECT SUM(leaf.total_count) FROM discovery_shards leaf WHERE leaf.sweep = latest.sweep "
            "   AND leaf.state = 'done' AND substr(leaf.shard, 1, length(latest.shard)) = latest.shard) AS announced, "
            "  (SELECT COUNT(*) FROM documents d WHERE d.shard = latest.shard) AS documents, "
            "  (SELECT COUNT(*) FROM cases c WHERE c.shard = latest.shard) AS cases, "
            f"  (SELECT value FROM kv WHERE key = '{KV_DISCOVERY_STRATEGY}') AS strategy "
            "FROM latest "
            "ORDER BY latest.shard").fetchall()

    def start_sweep(self, sweep: int, shards: Sequence[str]) -> int:
        """Creates the sweep's run row and pending shard rows, unless they exist (resume)."""
        now = utc_now()
        with self.transaction():
            row = self.conn.execute("SELECT run_id FROM discovery_runs WHERE sweep = ?", (sweep,)).fetchone()
            if row is None:
                run_id = self.conn.execute(
                    "INSERT INTO discovery_runs(sweep, started_at) VALUES (?, ?)", (sweep, now)).lastrowid
            else:
                run_id = row[0]
            self.conn.executemany(
                "INSERT OR IGNORE INTO discovery_shards(sweep, shard, state, updated_at) VALUES (?, ?, 'pending', ?)",
                ((sweep, shard, now) for shard in shards))
            return run_id

    def last_sweep_leaves(self, before: int) -> list[str]:
        """The shards the last complete sweep before sweep `before` did not split (paged to their
        end, or failed), in shard order; [] when no sweep is complete."""
        return [row[0] for row in self.conn.execute(
            "SELECT shard FROM discovery_shards WHERE state != 'split' AND sweep = "
            "(SELECT MAX(sweep) FROM discovery_runs WHERE complete = 1 AND sweep < ?) ORDER BY shard", (before,))]

    def pending_shards(self, sweep: int) -> list[str]:
        return [row[0] for row in self.conn.execute(
            "SELECT shard FROM discovery_shards WHERE sweep = ? AND state = 'pending' ORDER BY shard", (sweep,))]

    def finish_shard(self, sweep: int, shard: str, *, state: str, total_count: int | None = None,
                     pages: int = 0, rows_seen: int = 0, rows_new: int = 0, error: str | None = None,
                     children: Sequence[str] = ()) -> None:
        """Records a shard's outcome; a split adds its children as pending, atomically."""
        now = utc_now()
        with self.transaction():
            self.conn.execute(
                "UPDATE discovery_shards SET state = ?, total_count = ?, pages = pages + ?, "
                "rows_seen = rows_seen + ?, rows_new = rows_new + ?, error = ?, updated_at = ? "
                "WHERE sweep = ? AND shard = ?",
                (state, total_count, pages, rows_seen, rows_new, error, now, sweep, shard))
            self.conn.executemany(
                "INSERT OR IGNORE INTO discovery_shards(sweep, shard, state, updated_at) VALUES (?, ?, 'pending', ?)",
                ((sweep, child, now) for child in children))

    def add_shard_progress(self, sweep: int, shard: str, *, pages: int, rows_seen: int, rows_new: int) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE discovery_shards SET pages = pages + ?, rows_seen = rows_seen + ?, "
                "rows_new = rows_new + ?, updated_at = ? WHERE sweep = ? AND shard = ?",
                (pages, rows_seen, rows_new, utc_now(), sweep, shard))

    def finish_sweep(self, sweep: int, seconds: float, *, complete: bool) -> sqlite3.Row:
        """Totals the sweep's shard rows into its `discovery_runs` row."""
        with self.transaction():
            totals = self.conn.execute(
                "SELECT COUNT(*) AS shards, COALESCE(SUM(pages), 0) AS pages, "
                "COALESCE(SUM(rows_seen), 0) AS rows_seen, COALESCE(SUM(rows_new), 0) AS rows_new, "
                "COALESCE(SUM(state = 'error'), 0) AS errors FROM discovery_shards WHERE sweep = ?",
                (sweep,)).fetchone()
            self.conn.execute(
                "UPDATE discovery_runs SET finished_at = ?, shards = ?, pages = ?, rows_seen = ?, "
                "rows_new = ?, errors = ?, seconds = seconds + ?, complete = ? WHERE sweep = ?",
                (utc_now(), totals["shards"], totals["pages"], totals["rows_seen"], totals["rows_new"],
                 totals["errors"], seconds, int(complete), sweep))
        return self.conn.execute("SELECT * FROM discovery_runs WHERE sweep = ?", (sweep,)).fetchone()

    def abandon_sweep(self, sweep: int, reason: str, seconds: float) -> sqlite3.Row:
        """Ends a sweep whose strategy the court's answers showed unusable: its pending shards are
        errors (so it never counts as converged), and the next sweep starts afresh."""
        with self.transaction():
            self.conn.execute("UPDATE discovery_shards SET state = 'error', error = ?, updated_at = ? "
                              "WHERE sweep = ? AND state = 'pending'", (reason[:500], utc_now(), sweep))
        return self.finish_sweep(sweep, seconds, complete=True)

    def discovery_runs(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM discovery_runs ORDER BY sweep").fetchall()

    def shard_has_documents(self, shard: str) -> bool:
        """Whether any document was discovered in a top-level shard ("2019-CA") before."""
        return self.conn.execute("SELECT 1 FROM documents WHERE shard = ? LIMIT 1", (shard,)).fetchone() is not None

    def shard_states(self, sweep: int) -> dict[str, int]:
        """How many of the sweep's shards are in each state (pending, done, split, error)."""
        return dict(self.conn.execute(
            "SELECT state, COUNT(*) FROM discovery_shards WHERE sweep = ? GROUP BY state", (sweep,)).fetchall())

    def iter_document_metadata(self) -> Iterator[tuple]:
        """(document_id, *DOCUMENT_METADATA_COLUMNS, document_available) of every document, for
        discovery's change check."""
        yield from self.conn.execute(
            f"SELECT document_id, {', '.join(DOCUMENT_METADATA_COLUMNS)}, document_available FROM documents")


def _note_transitions(before: Mapping[str, sqlite3.Row], rows: Sequence[Mapping[str, Any]], watch: Transitions) -> None:
    """What an upsert of `rows` changed, against the rows the table held `before` it."""
    for row in rows:
        document_id = row["document_id"]
        old = before.get(document_id)
        if old is None:
            if document_id not in watch.added:
                watch.added.append(document_id)
            continue
        for column in WATCHED_COLUMNS:
            value = row.get(column)
            if value is not None and old[column] is not None and value != old[column]:
                watch.change(document_id, column)
        available = row.get("document_available")
        if available == 0 and old["document_available"] != 0:
            watch.withdrawn.setdefault(document_id, "unavailable")
        elif available == 1 and old["document_available"] == 0 and document_id not in watch.restored:
            watch.restored.append(document_id)
