"""v1.2-shaped state built by the suite itself: what the issue's users hold (a database with no
schema_version, resume archives holding the workspace under one folder, pdf_backup/ with absolute
local_pdf pointers written on another machine).

What v1.2's database looked like is known only from its design notes: tables `documents`,
`discovery_runs`, `extraction_log`, `kv`; `documents` with at least the columns CONTRACT.md lists,
perhaps fewer, perhaps others. `write_legacy_database` writes that, with columns dropped or added
as a test asks, and an extra table of the user's.
"""
from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from pathlib import Path

# CONTRACT.md's documents columns, as v1.2 declared them (no CHECK on status, as a legacy table lacks it).
V12_COLUMNS = {
    "document_id": "TEXT PRIMARY KEY", "case_number": "TEXT", "court": "TEXT", "case_title": "TEXT",
    "docket_entry_id": "TEXT", "description": "TEXT", "filed_date": "TEXT", "status": "TEXT",
    "attempts": "INTEGER", "http_status": "INTEGER", "last_error": "TEXT", "sha256": "TEXT",
    "size_bytes": "INTEGER", "local_pdf": "TEXT", "pages": "INTEGER", "extracted_chars": "INTEGER",
    "likely_scanned": "INTEGER", "extract_attempts": "INTEGER", "discovered_at": "TEXT", "updated_at": "TEXT",
}
FOREIGN_WORKSPACE = "/content/ky_court_workspace"     # where v1.2's Colab runtime kept its workspace


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_legacy_database(path: Path, rows: list[dict], *, drop: tuple[str, ...] = (),
                          extra: dict[str, str] | None = None, kv: dict[str, str] | None = None,
                          primary_key: bool = True, user_table: bool = True) -> Path:
    """A v1.2-shaped database at `path`: documents with V12_COLUMNS minus `drop` plus `extra`
    (name -> declaration), v1.2's discovery_runs/extraction_log/kv, and a table of the user's."""
    columns = {name: kind for name, kind in V12_COLUMNS.items() if name not in drop}
    if not primary_key:
        columns["document_id"] = "TEXT"
    columns.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"CREATE TABLE documents ({', '.join(f'{name} {kind}' for name, kind in columns.items())})")
        conn.execute("CREATE TABLE discovery_runs (run_id INTEGER PRIMARY KEY, started_at TEXT, finished_at TEXT, "
                     "new_docs INTEGER)")
        conn.execute("CREATE TABLE extraction_log (id INTEGER PRIMARY KEY, document_id TEXT, ok INTEGER, at TEXT)")
        conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO discovery_runs(started_at, finished_at, new_docs) VALUES "
                     "('2024-03-01T00:00:00Z', '2024-03-01T02:00:00Z', ?)", (len(rows),))
        conn.executemany("INSERT INTO kv(key, value) VALUES (?, ?)",
                         sorted((kv if kv is not None else {"backfill_done": "2024-03-02"}).items()))
        if user_table:
            conn.execute("CREATE TABLE reading_notes (document_id TEXT, note TEXT)")
            conn.executemany("INSERT INTO reading_notes VALUES (?, ?)",
                             [(row.get("document_id"), f"note {number}") for number, row in enumerate(rows[:3])])
        for row in rows:
            present = {name: value for name, value in row.items() if name in columns}
            conn.execute(f"INSERT INTO documents ({', '.join(present)}) VALUES ({', '.join('?' * len(present))})",
                         list(present.values()))
        conn.commit()
    finally:
        conn.close()
    return path


def discovered_row(document, *, updated_at: str = "2024-03-01T00:00:00Z", **values) -> dict:
    """A v1.2 row for a SimCourt document, as v1.2's discovery wrote it."""
    row = {"document_id": document.document_id, "case_number": document.case_number, "court": document.court,
           "case_title": document.case_title, "docket_entry_id": document.docket_entry_id,
           "description": document.description, "filed_date": document.filed_date, "status": "discovered",
           "attempts": 0, "extract_attempts": 0, "discovered_at": "2024-03-01T00:00:00Z", "updated_at": updated_at}
    row.update(values)
    return row


def downloaded_row(document, data: bytes, local_pdf: str, **values) -> dict:
    return discovered_row(document, **{"status": "downloaded", "sha256": sha256(data), "size_bytes": len(data),
                                       "local_pdf": local_pdf, "attempts": 1, "http_status": 200, **values})


def extracted_row(document, data: bytes, local_pdf: str, **values) -> dict:
    return downloaded_row(document, data, local_pdf, **{"status": "extracted", "pages": 1,
                                                        "extracted_chars": 40, "extract_attempts": 1, **values})


def write_archive(path: Path, members: dict[str, bytes]) -> Path:
    """A gzip tar of these members (name -> bytes), as `tar -czf` of a workspace folder writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        folders = sorted({"/".join(name.split("/")[:depth]) for name in members
                          for depth in range(1, name.count("/") + 1)})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


def legacy_archive(path: Path, database: Path, *, folder: str = "ky_court_workspace",
                   files: dict[str, bytes] | None = None, status: dict | None = None) -> Path:
    """A v1.2 resume archive: the workspace under one folder (database, status.json, files)."""
    members = {f"{folder}/ky_court.sqlite": database.read_bytes()}
    members[f"{folder}/status.json"] = json.dumps(status or {"phase": "download"}).encode()
    members.update({f"{folder}/{name}": data for name, data in (files or {}).items()})
    return write_archive(path, members)


def table_rows(path: Path, table: str, order: str = "rowid") -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [tuple(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
    finally:
        conn.close()
