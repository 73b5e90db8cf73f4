"""Adopted v1.2 rows: where their files are, and what discovery has shown their ids to be.

Guarantees:
- `legacy_documents` keeps what adoption brought per row; `reconcile_legacy_ids` moves an
  unchecked id to `document` (discovery rewrote its row), `docket_entry` or `case` (linked to
  their documents, the legacy PDF matched by sha256) or, once discovery has converged, `unlisted`.
- The download queue holds back the rows of LEGACY_HELD_KINDS (`legacy_held_count` counts them).
"""
from __future__ import annotations

import sqlite3
from typing import Sequence

from .c00_config import utc_now
from .c10_database import KV_DISCOVERY_CONVERGED_AT, Tables
from .c12_queues import LEGACY_HELD_LIST_SQL
from .c15_discovery_state import DOCUMENT_METADATA_COLUMNS

# A document's discovery metadata as one value (alias d): adoption records it, and a different value
# later means discovery wrote the row, i.e. the court listed its id as a documentID.
LEGACY_METADATA_SQL = " || '|' || ".join(f"quote(d.{column})" for column in DOCUMENT_METADATA_COLUMNS)


class LegacyState(Tables):
    """Adopted v1.2 rows: where their files are, and what discovery has shown their ids to be."""

    def adopted_rows_claiming_files(self) -> list[sqlite3.Row]:
        """Adopted rows whose status says a PDF is held, with their legacy status."""
        return self.conn.execute(
            "SELECT d.document_id, d.status, d.sha256, d.size_bytes, d.local_pdf, d.extracted_chars, d.pages, "
            "d.likely_scanned, "
            "l.legacy_status "
            "FROM documents d JOIN legacy_documents l ON l.document_id = d.document_id "
            "WHERE d.status IN ('downloaded', 'extracted') ORDER BY d.rowid").fetchall()

    def adopted_rows_holding_pdfs(self) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM documents d JOIN legacy_documents l ON l.document_id = d.document_id "
            "WHERE d.status IN ('downloaded', 'extracted')").fetchone()[0]

    def set_pdf_pointers(self, pointers: Sequence[tuple[str, int | None, str, str]]) -> None:
        """(sha256, size_bytes, local_pdf, document_id): where an adopted row's PDF is."""
        with self.transaction():
            self.conn.executemany("UPDATE documents SET sha256 = ?, size_bytes = ?, local_pdf = ?, updated_at = ? "
                                  "WHERE document_id = ?", [(sha, size, local, utc_now(), document_id)
                                                            for sha, size, local, document_id in pointers])

    def note_legacy(self, document_ids: Sequence[str], note: str) -> None:
        with self.transaction():
            self.conn.executemany("UPDATE legacy_documents SET note = ? WHERE document_id = ?",
                                  [(note, document_id) for document_id in document_ids])

    def legacy_held_count(self) -> int:
        """Adopted rows the download queue holds back until discovery confirms their ids."""
        return self.conn.execute(
            f"SELECT COUNT(*) FROM legacy_documents l WHERE l.id_kind IN ({LEGACY_HELD_LIST_SQL}) AND EXISTS "
            "(SELECT 1 FROM documents d WHERE d.document_id = l.document_id AND d.status IN ('discovered', 'failed'))"
        ).fetchone()[0]

    def reconcile_legacy_ids(self) -> dict[str, int]:
        """Checks unchecked adopted ids against the discovery tables (c38_legacy): discovery rewrote
        the row's metadata -> document; the id is a docket entry's or a case's (their tables, or the
        columns of other documents) -> linked to their documents, and the legacy PDF matched against
        theirs by sha256; discovery has converged -> the rest unlisted. Counts what changed."""
        now = utc_now()
        counts: dict[str, int] = {}
        links_sql = ("SELECT COALESCE(SUM(json_array_length(linked_documents)), 0), COALESCE(SUM(matched_sha256 > 0), 0) "
                     "FROM legacy_documents WHERE id_kind IN ('docket_entry', 'case')")
        with self.transaction():
            linked_before = self.conn.execute(links_sql).fetchone()
            counts["confirmed"] = self.conn.execute(
                "UPDATE legacy_documents SET id_kind = 'document', checked_at = :now WHERE id_kind = 'unchecked' "
                f"AND metadata IS NOT (SELECT {LEGACY_METADATA_SQL} FROM documents d "
                "WHERE d.document_id = legacy_documents.document_id)", {"now": now}).rowcount
            for kind, column, table in (("docket_entry", "docket_entry_id", "docket_entries"),
                                        ("case", "case_id", "cases")):
                counts[table] = self.conn.execute(
                    f"UPDATE legacy_documents SET id_kind = :kind, checked_at = :now "
                    f"WHERE id_kind = 'unchecked' AND (document_id IN (SELECT {column} FROM {table}) "
                    f"OR document_id IN (SELECT d.{column} FROM documents d WHERE d.{column} IS NOT NULL "
                    f"AND d.document_id != d.{column}))", {"kind": kind, "now": now}).rowcount
                # Link (again: discovery may have found more of their documents since) and count matches.
                self.conn.execute(
                    "UPDATE legacy_documents SET linked_documents = (SELECT json_group_array(d.document_id) FROM "
                    f"(SELECT document_id FROM documents WHERE {column} = legacy_documents.document_id "
                    "AND document_id != legacy_documents.document_id ORDER BY document_id) d), "
                    "matched_sha256 = (SELECT COUNT(*) FROM documents d JOIN documents mine "
                    "ON mine.document_id = legacy_documents.document_id "
                    f"WHERE d.{column} = legacy_documents.document_id AND d.document_id != mine.document_id "
                    "AND d.sha256 IS NOT NULL AND d.sha256 = mine.sha256) "
                    "WHERE id_kind = :kind", {"kind": kind})
            converged = self.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
            counts["unlisted"] = self.conn.execute(
                "UPDATE legacy_documents SET id_kind = 'unlisted', checked_at = ? WHERE id_kind = 'unchecked'",
                (now,)).rowcount if converged else 0
            linked = self.conn.execute(links_sql).fetchone()
        # Both since the last call: documents discovery has found for those rows since, PDFs matched since.
        counts["linked"], counts["matched"] = linked[0] - linked_before[0], linked[1] - linked_before[1]
        counts["held"] = self.legacy_held_count()
        return counts

    def legacy_summary(self) -> dict[str, int]:
        """Adopted rows by id_kind (status.json, the report)."""
        return dict(self.conn.execute("SELECT id_kind, COUNT(*) FROM legacy_documents GROUP BY id_kind").fetchall())
