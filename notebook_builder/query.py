"""The query layer of the command line: show one document, export the archive.

Guarantees:
- Nothing here writes to ky_court.sqlite or ky_search.sqlite: both are
  opened read-only (a text read from the store is kept in the workspace,
  under its own name, as the stages keep theirs).
- `show_document()` gathers everything known about a document id, a sha256
  or a case number: its `documents` row (and, for a document the court does
  not serve to the public, why: `not_public`, registration or purchase),
  the rows of every table that names it (extraction_log today; cases, docket entries, derived fields and
  whatever else when those tables exist), the download outcome, the files
  in the workspace and in the store, its entry in the search index, which
  of its texts is the best (c33_best_text, decided now from the archive) and
  a preview of that text. An ID that matches nothing raises `NotFound`.
- `export_archive()` writes one record per document (ordered by
  document_id) with its metadata, what derive found (rendered date,
  disposition, publication status, judge, lower court, citations), whether
  the court withholds its file (`document_available` false: withheld, never
  requested), whether the court serves it to the public (`access_state`, and
  `not_public_reason`: registration or purchase), why no text was extracted
  (`extract_failure`), which text it
  is (`text_source`:
  the text layer, the OCR merge or the court's own text) and that best
  text, as JSON Lines, CSV (every value quoted, so texts with newlines
  survive; null is an empty unquoted field, so it differs from "") or
  Parquet (pyarrow, an optional extra),
  plus `schema.json`, `manifest.json` (each file's sha256 and bytes, the
  counts) and `manifest-sha256.txt` (BagIt-style `sha256  path` lines). All
  files are written under temp names, then renamed; an earlier export's
  files in the folder are replaced or removed, so the folder holds exactly
  what the manifest lists; a folder holding other files is refused, and a
  write that fails (read-only, disk full) leaves the folder as it was. The
  same state exports to the same bytes.
- `serve` lives in the notebook's search cell (c98_search.py), which Colab
  needs too.

Court codes, years and days are the archive's court system's (c28_court_words).

Knobs read: COURT_SYSTEM (the archive's, through the CLI), WORKSPACE, STORE (through load_config in the CLI),
MIN_TEXT_QUALITY (the best text).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

from notebook_builder.cells.c00_config import Config, PipelineError, StoreError, court_day
from notebook_builder.cells.c06_layout import DB_FILENAME, pdf_store_name, text_store_name
from notebook_builder.cells.c10_database import connect, is_sqlite_file
from notebook_builder.cells.c11_reads import (document_citations, documents_matching, iter_document_records, rows_where,
                                              tables_with_column)
from notebook_builder.cells.c18_search_index import SearchIndex
from notebook_builder.cells.c12_queues import not_public_reason
from notebook_builder.cells.c20_store import sha256_file
from notebook_builder.cells.c28_court_words import words_of_config
from notebook_builder.cells.c33_best_text import best_text_sources, empty_text_reason, fetch_from_store, read_text
from notebook_builder.cells.c87_index import EXPORT_FIELDS, year_of

log_query = logging.getLogger("kycourt.query")

PREVIEW_CHARS = 600


class NotFound(PipelineError):
    """An ID that matches no document (exit status 1)."""


class QueryError(PipelineError):
    """Bad input to show, export or serve (exit status 2): the message says what is wrong."""


def open_state(workspace: str | os.PathLike):
    path = Path(workspace) / DB_FILENAME
    if not is_sqlite_file(path):
        raise QueryError(f"no archive database at {path}: run `kycourt-pipeline run` first "
                         "(or pass --workspace)")
    return connect(path, readonly=True)


# ------------------------------------------------------------------ show


def show_document(cfg: Config, identifier: str, *, store: Any = None) -> dict[str, Any]:
    """Everything known about a document id, a sha256 or a case number."""
    workspace = Path(cfg.WORKSPACE)
    conn = open_state(workspace)
    try:
        matched_by, rows = documents_matching(conn, identifier.strip())
        if not rows:
            raise NotFound(f"no document id, sha256 or case number matches {identifier!r} "
                           f"in {workspace / DB_FILENAME}")
        related_tables = {column: [t for t in tables_with_column(conn, column) if t != "documents"]
                          for column in ("document_id", "docket_entry_id", "case_id")}
        search = _show_open_index(workspace)
        best = best_text_sources(conn, cfg.MIN_TEXT_QUALITY, f"d.document_id IN ({', '.join('?' * len(rows))})",
                                 tuple(row["document_id"] for row in rows))
        documents = []
        for row in rows:
            entry: dict[str, Any] = {"document": row}
            if row.get("access_state"):
                entry["not_public"] = {"access_state": row["access_state"],
                                       "reason": not_public_reason(row["access_state"])}
            entry["download"] = {"status": row["status"], "attempts": row["attempts"],
                                 "http_status": row["http_status"], "last_error": row["last_error"],
                                 "downloaded_at": row.get("downloaded_at")}
            for column, label in (("document_id", "related"), ("docket_entry_id", "docket_entry"),
                                  ("case_id", "case")):
                if row.get(column) is None:
                    continue
                found = {table: rows_where(conn, table, column, row[column], limit=200)
                         for table in related_tables[column]}
                entry[label] = {table: hits for table, hits in found.items() if hits}
            source, name = best[row["document_id"]]
            entry["files"] = _show_files(workspace, row, name, store)
            entry["index"] = _show_index_entry(search, row, name)
            entry["text_source"] = source
            entry["text_preview"] = _show_preview(workspace, name, store)
            documents.append(entry)
        if search is not None:
            search.close()
        return {"id": identifier, "matched_by": matched_by, "count": len(documents), "documents": documents}
    finally:
        conn.close()


def _show_open_index(workspace: Path) -> SearchIndex | None:
    try:
        return SearchIndex.open(workspace, readonly=True)
    except Exception:   # no index, or an unusable one: show says so per document
        return None


def _show_index_entry(search: SearchIndex | None, row: dict, text_name: str | None) -> dict[str, Any]:
    if search is None:
        return {"indexed": False, "note": "no search index in the workspace"}
    indexed = search.get(row["document_id"])
    if indexed is None:
        return {"indexed": False}
    return {"indexed": True, "current": indexed["text_name"] == text_name, "indexed_at": indexed["indexed_at"],
            "text_source": indexed["text_source"], "year": indexed["year"], "court_code": indexed["court_code"]}


def _show_files(workspace: Path, row: dict, best_name: str | None, store: Any) -> dict[str, Any]:
    sha = row.get("sha256")
    if not sha:
        return {}
    files = {}
    named = [("pdf", pdf_store_name(sha)), ("text", text_store_name(sha))]
    if best_name not in (None, text_store_name(sha)):
        named.append(("best text", best_name))
    for kind, name in named:
        local = workspace / name
        info: dict[str, Any] = {"name": name, "workspace_bytes": local.stat().st_size if local.is_file() else None}
        if store is not None:
            try:
                info["store_bytes"] = store.size(name)
                link = getattr(store, "web_link", None)
                if info["store_bytes"] is not None and link is not None:
                    info["store_link"] = link(name)
            except (StoreError, OSError) as exc:
                info["store_error"] = str(exc)
        files[kind] = info
    return files


def _show_preview(workspace: Path, name: str | None, store: Any) -> str | None:
    data = read_text(workspace, name, fetch_from_store(workspace, store))
    return None if data is None else data[:PREVIEW_CHARS * 4].decode("utf-8", "replace")[:PREVIEW_CHARS]


def format_show(report: dict[str, Any]) -> str:
    """The human form of show's report."""
    lines = [f"{report['count']} document(s) matched by {report['matched_by']}: {report['id']}"]
    for entry in report["documents"]:
        document = entry["document"]
        lines.append("")
        lines.append(f"== {document['document_id']}")
        for key, value in document.items():
            if value is not None:
                lines.append(f"  {key:<20} {value}")
        if entry.get("not_public"):
            lines.append(f"  not public at the court: {entry['not_public']['reason']} "
                         f"({entry['not_public']['access_state']}): kept as a record, never requested")
        for label in ("case", "docket_entry", "related"):
            for table, rows in (entry.get(label) or {}).items():
                lines.append(f"  -- {table} ({len(rows)} row{'s' if len(rows) != 1 else ''})")
                for row in rows[:20]:
                    lines.append("     " + ", ".join(f"{k}={v}" for k, v in row.items() if v is not None))
        for kind, info in (entry.get("files") or {}).items():
            where = []
            where.append(f"workspace {info['workspace_bytes']} bytes" if info.get("workspace_bytes") is not None
                         else "not in the workspace")
            if "store_error" in info:
                where.append(f"store unavailable ({info['store_error']})")
            elif "store_bytes" in info:
                where.append(f"store {info['store_bytes']} bytes" if info["store_bytes"] is not None
                             else "NOT in the store")
            if info.get("store_link"):
                where.append(info["store_link"])
            lines.append(f"  {kind:<5} {info['name']}: {'; '.join(where)}")
        index = entry.get("index") or {}
        if index.get("indexed"):
            state = "indexed" if index.get("current") else "indexed with an outdated text (run kycourt-pipeline index)"
        else:
            state = f"not indexed ({index['note']})" if index.get("note") else "not indexed"
        lines.append(f"  index {state}")
        if entry.get("text_preview"):
            lines.append(f"  text preview ({entry.get('text_source')}):")
            lines.extend("    " + line for line in entry["text_preview"].splitlines()[:12])
    return "\n".join(lines)


# ---------------------------------------------------------------- export

EXPORT_FORMATS = ("jsonl", "csv", "parquet")
_EXPORT_DATA_FILE = "documents.{fmt}"
_EXPORT_FILES = tuple(_EXPORT_DATA_FILE.format(fmt=fmt) for fmt in EXPORT_FORMATS) + (
    "schema.json", "manifest.json", "manifest-sha256.txt")
_EXPORT_BATCH = 1000


def export_records(cfg: Config, *, store: Any = None, counts: dict[str, int] | None = None
                   ) -> Iterator[dict[str, Any]]:
    """One record per document, by document_id, with EXPORT_FIELDS."""
    workspace = Path(cfg.WORKSPACE)
    words = words_of_config(cfg)
    conn = open_state(workspace)
    fetch = fetch_from_store(workspace, store)
    try:
        best = best_text_sources(conn, cfg.MIN_TEXT_QUALITY, "d.status = 'extracted'")
        for row in iter_document_records(conn):
            record = {name: None for name, _, _ in EXPORT_FIELDS}
            for name in record:
                if name in row.keys():
                    record[name] = row[name]
            record["case_title"] = None if row["case_title"] is None else " ".join(row["case_title"].split())
            record["court_code"] = words.code_of(row["case_number"], row["court"])
            record["year"] = year_of(row["case_number"], row["filed_date"], words)
            record["filed_date"] = court_day(row["filed_date"], words.time_zone)
            record["not_public_reason"] = not_public_reason(record["access_state"])
            for flag in ("likely_scanned", "document_available"):
                record[flag] = None if record[flag] is None else bool(record[flag])
            record["citations"] = document_citations(conn, row["document_id"])
            record["pdf"] = pdf_store_name(row["sha256"]) if row["sha256"] and row["status"] in (
                "downloaded", "extracted") else None
            record["text_source"], name = best.get(row["document_id"], (None, None))
            data = read_text(workspace, name, fetch)
            record["text"] = None if data is None else data.decode("utf-8", "replace")
            record["text_note"] = empty_text_reason(row, record["text"])
            if counts is not None:
                counts["documents"] = counts.get("documents", 0) + 1
                key = "with_text" if record["text"] is not None else "without_text"
                counts[key] = counts.get(key, 0) + 1
                counts[f"status_{row['status']}"] = counts.get(f"status_{row['status']}", 0) + 1
            yield record
    finally:
        conn.close()


def export_archive(cfg: Config, out_dir: str | os.PathLike, fmt: str, *, store: Any = None) -> dict[str, Any]:
    """Writes the dataset to `out_dir`, replacing an earlier export there; returns the manifest.

    Every file is written under a temp name first and renamed once all are written; a failure
    (a read-only folder, a full disk) leaves the folder as it was and raises QueryError. A folder
    holding anything but an earlier export's files is refused: the export never deletes what it
    did not write."""
    if fmt not in EXPORT_FORMATS:
        raise QueryError(f"--format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    writer = {"jsonl": _export_jsonl, "csv": _export_csv, "parquet": _export_parquet}[fmt]
    if fmt == "parquet":
        _export_require_pyarrow()
    state = open_state(cfg.WORKSPACE)
    try:
        sequence = state.execute("SELECT value FROM kv WHERE key = 'checkpoint_seq'").fetchone()
    finally:
        state.close()
    out = Path(out_dir)
    others = sorted(path.name for path in out.iterdir() if path.name not in _EXPORT_FILES) if out.is_dir() else []
    if others:
        raise QueryError(f"--out {out} holds other files than an export's ({', '.join(others[:3])}"
                         f"{', ...' if len(others) > 3 else ''}): choose an empty folder or an earlier export's")
    created = not out.exists()
    temps: dict[str, Path] = {}
    try:
        out.mkdir(parents=True, exist_ok=True)
        manifest = _export_write(cfg, out, fmt, writer, store, sequence, temps)
        for name, temp in temps.items():
            os.replace(temp, out / name)
        for name in _EXPORT_FILES:
            if name not in temps:
                (out / name).unlink(missing_ok=True)   # an earlier export's file of another format
    except BaseException as exc:
        for temp in temps.values():
            temp.unlink(missing_ok=True)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        if isinstance(exc, OSError):
            raise QueryError(f"cannot write the export to {out}: {exc.strerror or exc}") from None
        raise
    return manifest


def _export_write(cfg: Config, out: Path, fmt: str, writer: Callable[[Path, Iterator[dict[str, Any]]], None],
                  store: Any, sequence: Any, temps: dict[str, Path]) -> dict[str, Any]:
    """The export's files under temp names (recorded in `temps`, final name -> temp path)."""
    def temp_for(name: str) -> Path:
        temps[name] = out / f".{name}.tmp"
        return temps[name]

    counts: dict[str, int] = {}
    data_name = _EXPORT_DATA_FILE.format(fmt=fmt)
    writer(temp_for(data_name), export_records(cfg, store=store, counts=counts))
    schema = {"name": "kycourt-documents", "format": fmt, "primary_key": "document_id",
              "order": "document_id ascending",
              "fields": [{"name": name, "type": kind, "description": text} for name, kind, text in EXPORT_FIELDS]}
    if fmt == "csv":
        schema["csv"] = ('every value is quoted; an empty unquoted field is null, "" is an empty text; '
                         'bool is true/false; list<string> is a JSON array')
    temp_for("schema.json").write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    files = [{"path": name, "bytes": temps[name].stat().st_size, "sha256": sha256_file(temps[name])}
             for name in (data_name, "schema.json")]
    manifest = {"dataset": "kycourt-documents", "format": fmt, "records": counts.get("documents", 0),
                "counts": dict(sorted(counts.items())), "files": files,
                "source_checkpoint_seq": int(sequence[0]) if sequence else 0}
    temp_for("manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    bagit = "".join(f"{entry['sha256']}  {entry['path']}\n" for entry in files)
    bagit += f"{sha256_file(temps['manifest.json'])}  manifest.json\n"
    temp_for("manifest-sha256.txt").write_text(bagit, encoding="utf-8")
    return manifest


def _export_jsonl(path: Path, records: Iterator[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def csv_field(value: Any) -> str:
    """One CSV field: null as an empty unquoted field, everything else quoted (so "" is an empty
    text, and newlines, quotes and commas survive); true/false; a list as its JSON text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, list):
        value = json.dumps(value, ensure_ascii=False)
    return '"' + str(value).replace('"', '""') + '"'


def _export_csv(path: Path, records: Iterator[dict[str, Any]]) -> None:
    names = [name for name, _, _ in EXPORT_FIELDS]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(",".join(csv_field(name) for name in names) + "\n")
        for record in records:
            handle.write(",".join(csv_field(record[name]) for name in names) + "\n")


def _export_require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise QueryError("--format parquet needs pyarrow: pip install 'kycourt-colab[parquet]'") from None


def _export_parquet(path: Path, records: Iterator[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(), "list<string>": pa.list_(pa.string())}
    schema = pa.schema([pa.field(name, types[kind]) for name, kind, _ in EXPORT_FIELDS])
    writer = pq.ParquetWriter(str(path), schema, compression="zstd")
    try:
        batch: list[dict[str, Any]] = []
        for record in records:
            batch.append(record)
            if len(batch) >= _EXPORT_BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    finally:
        writer.close()
