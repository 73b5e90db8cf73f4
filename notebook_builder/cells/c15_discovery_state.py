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
  shards still pending; a split adds its children atomically.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .c00_config import utc_now
from .c10_database import KV_DISCOVERY_STRATEGY, Tables

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
                "status", "status_date", "filed_date", "closed", "category", "shard", "related_case_numbers")


DOCKET_ENTRY_COLUMNS = ("docket_entry_id", "case_id", "entry_type", "subtype", "description", "filed_date",
                        "has_documents", "related_case_numbers")


_DISCOVERED_COLUMNS = ("document_id",) + DOCUMENT_METADATA_COLUMNS


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

    def upsert_discovered(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Inserts new documents as `discovered`; refreshes metadata of known ones.

        Returns how many document ids were new. Status, attempts and every
        download/extract column are left alone, so a status never moves back.
        """
        now = utc_now()
        values = [[row.get(c) for c in _DISCOVERED_COLUMNS] for row in rows]
        with self.transaction():
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
            return new

    def cases_to_walk(self, sweep: int, case_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """case_id -> (walked_sweep, walked_at, closed, search_row) of the given cases the table holds."""
        found: dict[str, sqlite3.Row] = {}
        wanted = list(case_ids)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for row in self.conn.execute(
                    f"SELECT case_id, walked_sweep, walked_at, closed, search_row FROM cases "
                    f"WHERE case_id IN ({', '.join('?' * len(chunk))})", chunk):
                found[row["case_id"]] = row
        return found

    def record_case_walk(self, sweep: int | None, case: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]],
                         documents: list[dict], court_texts: Sequence[Mapping[str, Any]] = ()) -> int:
        """One walked case in one transaction: its row (walked in `sweep`, with the search row's
        fingerprint it was walked at; None: seen, not walked, so the fingerprint of its last walk
        stays; a case of None: entries alone), entries, documents and the court's texts. Returns the
        new documents."""
        now = utc_now()
        with self.transaction():
            if case is not None:
                self.conn.execute(_UPSERT_CASE_SQL, [case.get(c) for c in CASE_COLUMNS] + [now])
            if sweep is not None and case is not None:
                self.conn.execute("UPDATE cases SET walked_sweep = ?, walked_at = ?, search_row = ? WHERE case_id = ?",
                                  (sweep, now, case.get("search_row"), case["case_id"]))
            self.conn.executemany(_UPSERT_ENTRY_SQL, ([entry.get(c) for c in DOCKET_ENTRY_COLUMNS] + [now]
                                                      for entry in entries))
            # Entries whose file list was asked: why it must be asked again (NULL: it need not).
            self.conn.executemany(
                "UPDATE docket_entries SET files_missing = ?, files_asked_sweep = ? WHERE docket_entry_id = ?",
                ((entry["files_missing"], entry["files_asked_sweep"], entry["docket_entry_id"])
                 for entry in entries if "files_asked_sweep" in entry))
            new = self.upsert_discovered(documents) if documents else 0
            self.conn.executemany(
                "INSERT INTO court_text(document_id, sha256, pages, chars, replacement_chars, fetched_at) "
                "VALUES (:document_id, :sha256, :pages, :chars, :replacement_chars, :now) "
                "ON CONFLICT(document_id) DO UPDATE SET sha256 = excluded.sha256, pages = excluded.pages, "
                "chars = excluded.chars, replacement_chars = excluded.replacement_chars, fetched_at = excluded.fetched_at",
                ({**text, "now": now} for text in court_texts))
            return new

    # The details pass: walked cases whose parties and lower courts are not fetched for their last walk.
    _DETAILS_DUE_SQL = "walked_sweep IS NOT NULL AND (details_sweep IS NULL OR details_sweep < walked_sweep)"

    def cases_needing_details(self, limit: int, after: str = "") -> list[sqlite3.Row]:
        """The next `limit` walked cases whose details are due, in case-number order after `after`."""
        return self.conn.execute(
            f"SELECT case_id, case_number, walked_sweep FROM cases WHERE {self._DETAILS_DUE_SQL} "
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

    def entries_to_ask_again(self, sweep: int, limit: int = -1, after: str = "") -> list[sqlite3.Row]:
        """The next `limit` docket entries (by id, after `after`) whose file list came back empty or with
        withheld files, not asked in `sweep` yet (with their case's number, for the documents' rows)."""
        return self.conn.execute(
            "SELECT e.*, c.case_number, c.court, c.title FROM docket_entries e "
            "LEFT JOIN cases c ON c.case_id = e.case_id "
            "WHERE e.files_missing IS NOT NULL AND COALESCE(e.files_asked_sweep, 0) < ? AND e.docket_entry_id > ? "
            "ORDER BY e.docket_entry_id LIMIT ?", (sweep, after, limit)).fetchall()

    def entries_missing_files(self) -> dict[str, int]:
        """How many docket entries wait for their files to be listed again, by reason."""
        return dict(self.conn.execute(
            "SELECT files_missing, COUNT(*) FROM docket_entries WHERE files_missing IS NOT NULL "
            "GROUP BY files_missing").fetchall())

    def withheld_documents(self, limit: int | None = None) -> list[sqlite3.Row]:
        """Documents the court lists but withholds (documentAvailable false), by case number."""
        return self.conn.execute(
            "SELECT document_id, case_number, description, document_name, filed_date, status FROM documents "
            "WHERE document_available = 0 ORDER BY case_number, document_id LIMIT ?",
            (-1 if limit is None else limit,)).fetchall()

    def withheld_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM documents WHERE document_available = 0").fetchone()[0]

    def known_docket_entries_with_documents(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these docket entries already have a document in the table that the court listed:
        an adopted row discovery has not confirmed as a document (legacy_documents: unchecked, or an
        entry's or case's id) does not count, so its entry is asked and the answer confirms it, or
        finds the entry's real documents (c38_legacy)."""
        known: set[str] = set()
        wanted = list(entry_ids)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            known.update(row[0] for row in self.conn.execute(
                f"SELECT DISTINCT docket_entry_id FROM documents d WHERE docket_entry_id IN ({', '.join('?' * len(chunk))}) "
                "AND NOT EXISTS (SELECT 1 FROM legacy_documents l WHERE l.document_id = d.document_id "
                "AND l.id_kind != 'document')", chunk))
        return known

    def coverage_audit(self) -> list[sqlite3.Row]:
        """Per top-level shard of the latest sweep that paged it: what the court announced
        (`announced`: documents for the document search, cases for the case walk; for a split shard,
        the sum of its paged leaves, whose totals leave out neighbouring numbers) next to what the
        tables hold (`documents`, `cases`)."""
        return self.conn.execute(
            "WITH latest AS (SELECT shard, MAX(sweep) AS sweep FROM discovery_shards "
            "                WHERE total_count IS NOT NULL AND length(shard) IN (7, 13) GROUP BY shard) "
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
