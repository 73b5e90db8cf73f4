"""The query layer's reads of ky_court.sqlite: a document's record with its optional fields.

Guarantees:
- `document_records_sql` / `iter_document_records` give every `documents` column plus the fields
  other parts of the project keep in their own tables (OPTIONAL_SOURCES: cases, docket_entries,
  derived, court_text), joined only when the table and column exist, NULL otherwise: an archive
  read without migrating (an older version's) gives the same columns.
- `text_source_inputs` is what the best-text choice (c83) reads of each document.
- `documents_matching` finds documents by id, sha256 or case number; `rows_where` and
  `tables_with_column` are the `show` command's related rows.
- Every function takes a connection and only reads.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Iterator, Mapping, Sequence

from .c10_database import quote_name, table_columns

# A document's fields kept outside `documents` (the search index's and the export's):
# field -> (table, column, documents' key, the table's key). An archive older than the table
# (read without migrating) gives NULL for the field.
OPTIONAL_SOURCES: dict[str, tuple[str, str, str, str]] = {
    "case_type": ("cases", "case_type", "case_id", "case_id"),
    "docket_entry_type": ("docket_entries", "entry_type", "docket_entry_id", "docket_entry_id"),
    "publication_status": ("derived", "publication_status", "document_id", "document_id"),
    "judge": ("derived", "judge", "document_id", "document_id"),
    "kind": ("derived", "kind", "document_id", "document_id"),
    "rendered_date": ("derived", "rendered_date", "document_id", "document_id"),
    "disposition": ("derived", "disposition", "document_id", "document_id"),
    "lower_court": ("derived", "lower_court", "document_id", "document_id"),
    "court_text_sha256": ("court_text", "sha256", "document_id", "document_id"),   # its name (the best text's)
}


def optional_field_sql(conn: sqlite3.Connection, field_name: str, *, alias: str = "d",
                       schema: str = "main") -> str:
    """SQL for one optional search field of the document `alias`: a column of `documents` if it has
    one, else (or where that is NULL) its OPTIONAL_SOURCES table's column, else NULL."""
    candidates = []
    document_columns = set(table_columns(conn, "documents", schema))
    if field_name in document_columns:
        candidates.append(f"{alias}.{field_name}")
    if field_name in OPTIONAL_SOURCES:
        table, column, mine, theirs = OPTIONAL_SOURCES[field_name]
        if column in table_columns(conn, table, schema) and mine in document_columns:
            candidates.append(f"(SELECT t.{column} FROM {schema}.{table} t WHERE t.{theirs} = {alias}.{mine} LIMIT 1)")
    if not candidates:
        return "NULL"
    return candidates[0] if len(candidates) == 1 else f"COALESCE({', '.join(candidates)})"


OPTIONAL_FIELDS = tuple(OPTIONAL_SOURCES)


def document_records_sql(conn: sqlite3.Connection, *, where: str = "1", schema: str = "main") -> str:
    """SELECT of every documents column plus the optional fields (OPTIONAL_SOURCES: null where
    nothing in the database knows them), by document_id."""
    optional = ", ".join(f"{optional_field_sql(conn, name, schema=schema)} AS {name}"
                         for name in OPTIONAL_FIELDS
                         if name not in table_columns(conn, "documents", schema))
    return (f"SELECT d.*{', ' + optional if optional else ''} FROM {schema}.documents d "
            f"WHERE {where} ORDER BY d.document_id")


def iter_document_records(conn: sqlite3.Connection, where: str = "1",
                          params: Sequence[Any] | Mapping[str, Any] = ()) -> Iterator[sqlite3.Row]:
    yield from conn.execute(document_records_sql(conn, where=where), params)


def document_citations(conn: sqlite3.Connection, document_id: str) -> list[str]:
    """The distinct normalized citations of a document's text, in the order they first appear
    (the export's `citations`); [] in an archive without a citations table."""
    if not table_columns(conn, "citations"):
        return []
    return [row[0] for row in conn.execute(
        "SELECT normalized FROM citations WHERE document_id = ? GROUP BY normalized ORDER BY MIN(start)",
        (document_id,))]


def text_source_inputs(conn: sqlite3.Connection, where: str = "1",
                       params: Sequence[Any] | Mapping[str, Any] = ()) -> Iterator[sqlite3.Row]:
    """What c33_best_text's choice reads, for each document `where` (over alias d) selects, in
    rowid order: rowid, document_id, status, sha256, extracted_chars, text_quality, extracted_by_ocr, the recorded
    text_source, ocr_chars (what OCR gave the PDF's pages), ocr_quality (of the merged text, any
    document holding the PDF), court_chars and court_sha256 (the court's own text). A column an
    older archive (read without migrating) lacks is NULL."""
    documents, pages = set(table_columns(conn, "documents")), set(table_columns(conn, "pages"))
    merged = "d.extracted_by_ocr = 1" if "extracted_by_ocr" in documents else "0"
    columns = ["d.rowid AS rowid"] + [f"d.{name}" if name in documents else f"NULL AS {name}" for name in (
        "document_id", "status", "sha256", "extracted_chars", "text_quality", "extracted_by_ocr", "text_source")]
    columns.append(f"CASE WHEN {merged} THEN (SELECT SUM(p.ocr_chars) FROM pages p WHERE p.sha256 = d.sha256) END "
                   "AS ocr_chars" if "ocr_chars" in pages else "NULL AS ocr_chars")
    columns.append(f"CASE WHEN {merged} THEN (SELECT MAX(o.ocr_quality) FROM documents o "
                   "WHERE o.sha256 = d.sha256) END AS ocr_quality" if "ocr_quality" in documents
                   else "NULL AS ocr_quality")
    join = ""
    if table_columns(conn, "court_text"):
        columns += ["ct.chars AS court_chars", "ct.sha256 AS court_sha256"]
        join = "LEFT JOIN court_text ct ON ct.document_id = d.document_id"
    else:
        columns += ["NULL AS court_chars", "NULL AS court_sha256"]
    yield from conn.execute(f"SELECT {', '.join(columns)} FROM documents d {join} WHERE {where} "
                            "ORDER BY d.rowid", params)


def extracted_fingerprint(conn: sqlite3.Connection) -> str:
    """Count and newest update of the extracted documents: changes whenever one is added, removed
    or given another text (each of those writes updated_at). A cheap "is the index current?"."""
    count, newest = conn.execute(
        "SELECT COUNT(*), MAX(updated_at) FROM documents WHERE status = 'extracted'").fetchone()
    return f"{count}/{newest}"


def tables_with_column(conn: sqlite3.Connection, column: str) -> list[str]:
    """Every table of the database that has `column` (the show command's related rows)."""
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return [table for table in tables if column in table_columns(conn, table)]


def rows_where(conn: sqlite3.Connection, table: str, column: str, value: Any,
               limit: int = 1000) -> list[dict[str, Any]]:
    order = "rowid" if table != "documents" else "document_id"
    try:
        rows = conn.execute(f"SELECT * FROM {quote_name(table)} WHERE {quote_name(column)} = ? "
                            f"ORDER BY {order} LIMIT ?", (value, limit)).fetchall()
    except sqlite3.OperationalError:    # a WITHOUT ROWID table
        rows = conn.execute(f"SELECT * FROM {quote_name(table)} WHERE {quote_name(column)} = ? LIMIT ?",
                            (value, limit)).fetchall()
    return [dict(row) for row in rows]


def documents_matching(conn: sqlite3.Connection, identifier: str) -> tuple[str, list[dict[str, Any]]]:
    """(what matched: 'document_id' | 'sha256' | 'case_number' | '', the document rows) of an ID."""
    for column in ("document_id", "sha256", "case_number"):
        rows = rows_where(conn, "documents", column, identifier)
        if rows:
            return column, rows
    rows = [dict(row) for row in conn.execute(
        "SELECT * FROM documents WHERE case_number = ? COLLATE NOCASE ORDER BY document_id LIMIT 1000",
        (identifier.strip(),))]
    return ("case_number", rows) if rows else ("", [])
