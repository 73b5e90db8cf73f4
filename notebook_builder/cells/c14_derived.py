"""Derive's rows: what is derived of each document, its citations, and the reads of them.

Guarantees:
- The derive queue holds a document whose derived row is missing or stale (another method or
  version, another description, a text extracted since, another PDF or text source); with
  `redo`, every document.
- `cites` / `cited_by` / `citations_of` / `derived` / `derived_facets` are the query layer's reads.
- `manifest_rows` lists (sha256, store name) of every PDF held and every text derive hashed: the
  lines of a BagIt-style manifest; `audit_candidates` the distinct PDFs the audit checks.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Mapping, Sequence

from .c10_database import Tables
from .c11_reads import text_source_inputs


class DerivedRecords(Tables):
    """What derive reads and records of each document, and the reads of it."""

    def _docket_entry_join(self) -> tuple[str, str, str]:
        """(select columns, join clause, description expression): each document's entry type,
        subtype and description, from its own columns (v3) or else its docket entry's row."""
        select = ("COALESCE(d.entry_type, de.entry_type) AS entry_type, "
                  "COALESCE(d.entry_subtype, de.subtype) AS entry_subtype")
        join = "LEFT JOIN docket_entries de ON de.docket_entry_id = d.docket_entry_id"
        return select, join, "COALESCE(d.description, de.description)"

    def _derive_queue_sql(self, what: str, *, redo: bool) -> str:
        select, join, description = self._docket_entry_join()
        # A derived row older than text_source read the text layer; a document whose source is not
        # recorded yet is read from it too. The court's text is named by its hash.
        stale = "1" if redo else (
            "(x.document_id IS NULL OR x.method != :method OR x.version < :version "
            f"OR x.source_description IS NOT {description} "
            "OR (d.status = 'extracted' AND (x.source_sha256 IS NOT d.sha256 "
            "OR COALESCE(x.text_source, 'text_layer') IS NOT COALESCE(d.text_source, 'text_layer') "
            "OR (d.text_source = 'court_text' AND x.text_sha256 IS NOT ct.sha256))))")
        columns = ("COUNT(*)" if what == "count" else
                   "d.rowid AS rowid, d.document_id, d.case_number, d.court, d.status, d.sha256, "
                   f"d.extracted_chars, d.document_name, d.text_source, ct.sha256 AS court_sha256, "
                   f"{description} AS description, {select}")
        return (f"SELECT {columns} FROM documents d LEFT JOIN derived x ON x.document_id = d.document_id "
                f"LEFT JOIN court_text ct ON ct.document_id = d.document_id {join} WHERE {stale}")

    def derive_queue(self, method: str, version: int, limit: int, after_rowid: int = 0, *,
                     redo: bool = False) -> list[sqlite3.Row]:
        """Documents whose derived row is missing or stale (older method or version, another
        description, a text extracted since, or a new PDF): the next `limit` after `after_rowid`.
        With `redo`, every document."""
        return self.conn.execute(
            self._derive_queue_sql("rows", redo=redo) + " AND d.rowid > :after ORDER BY d.rowid LIMIT :limit",
            {"method": method, "version": version, "after": after_rowid, "limit": limit}).fetchall()

    def derive_queue_size(self, method: str, version: int, *, redo: bool = False) -> int:
        return self.conn.execute(self._derive_queue_sql("count", redo=redo),
                                 {"method": method, "version": version}).fetchone()[0]

    def court_text_agreement_queue(self, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        """Extracted documents whose court text is known and whose agreement is not recorded yet:
        rowid and `text_source_inputs` (c33_best_text names the text of ours to compare)."""
        return [row for row in text_source_inputs(
            self.conn, "d.rowid IN (SELECT d.rowid FROM documents d JOIN court_text ct "
            "ON ct.document_id = d.document_id WHERE d.status = 'extracted' AND d.sha256 IS NOT NULL "
            "AND d.court_text_agreement IS NULL AND ct.chars > 0 AND d.rowid > ? ORDER BY d.rowid LIMIT ?)",
            (after_rowid, limit))]

    def record_court_text_agreement(self, agreements: Sequence[tuple[float, str]]) -> None:
        """(agreement, document_id) pairs."""
        with self.transaction():
            self.conn.executemany("UPDATE documents SET court_text_agreement = ? WHERE document_id = ?",
                                  agreements)

    def save_derived(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Replaces, in one transaction, each entry's `derived` row (entry["row"]: its columns),
        its citations (entry["citations"]: dicts of the citations columns) and its own case
        numbers (entry["case_numbers"])."""
        if not entries:
            return
        columns = list(entries[0]["row"])
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "document_id")
        citation_columns = ("document_id", "start", "end", "kind", "form", "matched_text", "normalized",
                            "case_number", "year", "court", "extractor")
        with self.transaction():
            self.conn.executemany(
                f"INSERT INTO derived ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
                f"ON CONFLICT(document_id) DO UPDATE SET {updates}",
                [[entry["row"][c] for c in columns] for entry in entries])
            ids = [(entry["row"]["document_id"],) for entry in entries]
            self.conn.executemany("DELETE FROM citations WHERE document_id = ?", ids)
            self.conn.executemany("DELETE FROM derived_case_numbers WHERE document_id = ?", ids)
            self.conn.executemany(
                f"INSERT INTO citations ({', '.join(citation_columns)}) "
                f"VALUES ({', '.join('?' for _ in citation_columns)})",
                [[citation.get(c) for c in citation_columns] for entry in entries
                 for citation in entry.get("citations", ())])
            self.conn.executemany(
                "INSERT OR IGNORE INTO derived_case_numbers(document_id, case_number) VALUES (?, ?)",
                [(entry["row"]["document_id"], number) for entry in entries
                 for number in entry.get("case_numbers", ())])

    def derived(self, document_id: str) -> sqlite3.Row | None:
        """The document's derived row (list fields are JSON text), or None."""
        return self.conn.execute("SELECT * FROM derived WHERE document_id = ?", (document_id,)).fetchone()

    def citations_of(self, document_id: str) -> list[sqlite3.Row]:
        """Every citation of the document's text, in text order."""
        return self.conn.execute("SELECT * FROM citations WHERE document_id = ? ORDER BY start, end, kind",
                                 (document_id,)).fetchall()

    def cites(self, document_id: str) -> list[sqlite3.Row]:
        """The archive's opinions that this document cites (by an appellate case number in its
        text): document_id, case_number, case_title, rendered_date and the cited case number."""
        return self.conn.execute(
            "SELECT DISTINCT n.document_id, d.case_number, d.case_title, x.rendered_date, "
            "c.case_number AS cited_case_number FROM citations c "
            "JOIN derived_case_numbers n ON n.case_number = c.case_number "
            "JOIN documents d ON d.document_id = n.document_id "
            "JOIN derived x ON x.document_id = n.document_id AND x.kind = 'opinion' "
            "WHERE c.document_id = ? AND n.document_id != ? ORDER BY c.case_number, n.document_id",
            (document_id, document_id)).fetchall()

    def cited_by(self, document_id: str) -> list[sqlite3.Row]:
        """The archive's documents whose texts cite one of this document's case numbers."""
        return self.conn.execute(
            "SELECT DISTINCT c.document_id, d.case_number, d.case_title, x.kind, x.rendered_date, "
            "c.case_number AS cited_case_number FROM derived_case_numbers n "
            "JOIN citations c ON c.case_number = n.case_number "
            "JOIN documents d ON d.document_id = c.document_id "
            "LEFT JOIN derived x ON x.document_id = c.document_id "
            "WHERE n.document_id = ? AND c.document_id != ? ORDER BY c.document_id",
            (document_id, document_id)).fetchall()

    def derived_facets(self, top: int = 20) -> dict[str, list[tuple[Any, int]]]:
        """Counts for the query layer's filters: kind, publication status, judge (the `top` most
        frequent), rendered year. A NULL (unknown) is a value of its own."""
        facets = {}
        for name, expression, limit in (("kind", "kind", -1), ("publication_status", "publication_status", -1),
                                        ("judge", "judge", top), ("year", "substr(rendered_date, 1, 4)", -1)):
            facets[name] = [tuple(row) for row in self.conn.execute(
                f"SELECT {expression} AS value, COUNT(*) AS n FROM derived GROUP BY value "
                "ORDER BY n DESC, value LIMIT ?", (limit,))]
        return facets

    def derive_warning_counts(self) -> dict[str, int]:
        """How many derived rows carry each kind of warning (the text before the first colon)."""
        counts: dict[str, int] = {}
        for (warnings,) in self.conn.execute("SELECT warnings FROM derived WHERE warnings IS NOT NULL "
                                             "AND warnings != '[]'"):
            for warning in json.loads(warnings):
                key = str(warning).split(":", 1)[0]
                counts[key] = counts.get(key, 0) + 1
        return counts

    def manifest_rows(self) -> list[tuple[str, str]]:
        """(sha256 of the bytes, store name) of every PDF the archive holds and of every text whose
        hash derive recorded, sorted by name: the lines of a BagIt-style manifest."""
        rows = self.conn.execute(
            "SELECT DISTINCT sha256, 'pdf_by_hash/' || sha256 || '.pdf' FROM documents "
            "WHERE status IN ('downloaded', 'extracted') AND sha256 IS NOT NULL "
            "UNION SELECT DISTINCT x.text_sha256, CASE COALESCE(x.text_source, 'text_layer') "
            "WHEN 'ocr' THEN 'text/' || x.source_sha256 || '.ocr.txt' "
            "WHEN 'court_text' THEN 'court_text/' || x.text_sha256 || '.txt' "
            "ELSE 'text/' || x.source_sha256 || '.txt' END FROM derived x "
            "JOIN documents d ON d.document_id = x.document_id AND d.sha256 = x.source_sha256 "
            "WHERE d.status = 'extracted' AND x.text_sha256 IS NOT NULL").fetchall()
        return sorted(((row[0], row[1]) for row in rows), key=lambda pair: pair[1])

    def audit_candidates(self) -> list[sqlite3.Row]:
        """Each distinct PDF the archive holds: sha256, size_bytes, whether a text was extracted,
        its extracted_chars, and the sha256 derive recorded of the PDF's text it read (or NULL) with
        that text's source (text_layer or ocr; a derived row older than the column read the layer)."""
        return self.conn.execute(
            "SELECT d.sha256, MAX(d.size_bytes) AS size_bytes, MAX(d.status = 'extracted') AS extracted, "
            "MAX(CASE WHEN d.status = 'extracted' THEN d.extracted_chars END) AS extracted_chars, "
            "MAX(x.text_sha256) AS text_sha256, MAX(COALESCE(x.text_source, 'text_layer')) AS text_source "
            "FROM documents d LEFT JOIN derived x ON x.document_id = d.document_id AND x.source_sha256 = d.sha256 "
            "AND COALESCE(x.text_source, 'text_layer') IN ('text_layer', 'ocr') "
            "WHERE d.status IN ('downloaded', 'extracted') AND d.sha256 IS NOT NULL "
            "GROUP BY d.sha256 ORDER BY d.sha256").fetchall()
