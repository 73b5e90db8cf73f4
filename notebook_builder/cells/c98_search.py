"""Search the archive: full-text search of every extracted text, and a read-only browser of the archive.

Guarantees:
- The form's query (FTS5 syntax: words, "a phrase", NEAR(a b, 5),
  prefix*, AND/OR/NOT), court (CA, SC, or part of the court's name) and
  year run `search_archive()` over the workspace's index (built by the
  index stage: each document's best text, OCR'd scans included); the hits
  are shown as a table, best first (bm25), with the case number, date,
  title, description, a highlighted snippet of that text (fetched from the
  store when the workspace lacks it) and a link to the PDF in the store (a
  Drive file link when the store is Drive). A query FTS5 cannot parse, or a
  missing index, is one line saying what to do.
- `FORM_SERVE` starts Datasette (installed on demand in Colab) over
  one-file copies of ky_court.sqlite and ky_search.sqlite, every database
  immutable, bound to 127.0.0.1, with the project's metadata: titles,
  column descriptions, facets (court, year, status) and canned queries
  ("documents of a case", "failures by reason", "search"), and a plugin
  giving its connections the index's kycourt_text(name) over the
  workspace's texts, which snippets read. In Colab it is
  shown in an output frame through Colab's port proxy. A port in use is
  refused with one clear error (`ServeError`). `kycourt-pipeline serve`
  runs the same code.

Knobs read: WORKSPACE, STORE (through the run's context or CFG).
"""
from __future__ import annotations

import html
import json
import logging
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from .c00_config import Config, PipelineError, in_colab, load_config
from .c10_database import (DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_TEXT_FUNCTION, SearchQueryError, backup_database,
                           is_sqlite_file)
from .c20_store import pdf_store_name
from .c87_index import EXPORT_FIELDS, IndexMissingError, search_archive

log_search = logging.getLogger("kycourt.search")

SERVE_HOST = "127.0.0.1"
SERVE_DIR = "serve"
SERVE_DEFAULT_PORT = 8001


class ServeError(PipelineError):
    """Datasette cannot be started (missing, a port in use, no archive): the message says why."""


# ---------------------------------------------------------------- search


def parse_year(text: Any) -> int | None:
    """The form's year: empty means any; anything else must be a year."""
    text = str(text).strip()
    if not text:
        return None
    if not text.isdigit() or not 1900 <= int(text) <= 2100:
        raise SearchQueryError(f"year {text!r} is not a year like 2019")
    return int(text)


def hits_html(hits: list[dict[str, Any]], store: Any = None) -> str:
    """The hits as an HTML table; the PDF column links to the store's copy when it can."""
    link_of = getattr(store, "web_link", None)
    rows = []
    for number, hit in enumerate(hits, 1):
        pdf = pdf_store_name(hit["sha256"])
        link = None
        if link_of is not None:
            try:
                link = link_of(pdf)
            except Exception:   # a listing that fails must not hide the hits
                link = None
        pdf_cell = f'<a href="{html.escape(link)}" target="_blank">PDF</a>' if link else html.escape(pdf)
        snippet = html.escape(hit.get("snippet") or "").replace("[", "<mark>").replace("]", "</mark>")
        cells = [str(number), html.escape(hit.get("case_number") or ""),
                 html.escape((hit.get("filed_date") or "")[:10]),
                 html.escape(hit.get("case_title") or ""), html.escape(hit.get("description") or ""), snippet,
                 pdf_cell, f'<code>{html.escape(hit["document_id"][:12])}…</code>']
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    header = "".join(f"<th>{name}</th>" for name in
                     ("#", "case", "filed", "title", "document", "snippet", "file", "document id"))
    return f'<table><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def search_cell(cfg: Config, query: str, court: str = "", year: Any = "", limit: int = 20,
                store: Any = None) -> str:
    """Runs the form's search and displays the hits; returns the text it printed."""
    try:
        hits = search_archive(cfg.WORKSPACE, query, court=court or None, year=parse_year(year), limit=int(limit),
                              store=store)
    except (SearchQueryError, IndexMissingError) as exc:
        message = f"search: {exc}"
        print(message)
        return message
    message = f"{len(hits)} hits for {query!r}" + (f", court {court}" if court else "") + (
        f", year {year}" if str(year).strip() else "")
    print(message)
    try:
        from IPython.display import HTML, display
    except ImportError:
        return message
    display(HTML(hits_html(hits, store)))
    return message


# ----------------------------------------------------------------- serve


def port_in_use(port: int, host: str = SERVE_HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def datasette_metadata() -> dict[str, Any]:
    """Datasette's metadata for the two databases: titles, descriptions, facets, canned queries."""
    described = {name: text for name, _, text in EXPORT_FIELDS}
    columns = {name: text for name, text in described.items() if name not in ("pdf", "text", "year", "court_code")}
    columns.update({
        "attempts": "download attempts so far", "last_error": "the last download or extraction error",
        "local_pdf": "the PDF's name in the workspace and store", "extract_attempts": "text extraction attempts",
        "discovered_at": "when discovery first saw the document", "updated_at": "when the row last changed",
        "shard": "the discovery shard (YYYY-CC) that found it",
    })
    # The index's own columns only (the rest are described on the documents table): a table page
    # lists every description above its rows.
    search_columns = {name: described[name] for name in ("court_code", "year", "kind", "publication_status", "judge",
                                                         "text_source")}
    search_columns.update({"text_chars": "characters of indexed text", "doc_rowid": "the row in docs_fts",
                           "text_name": "the indexed text's file (in the workspace and the store)",
                           "text_key": "digest of what docs_fts holds of it (incremental builds)",
                           "source_key": "digest of its other fields (incremental builds)"})
    return {
        "title": "Kentucky appellate courts: public record archive",
        "description": "The Kentucky Supreme Court's and Court of Appeals' documents from C-Track "
                       "Public Access, read-only.",
        "databases": {
            "ky_court": {
                "title": "Archive state (ky_court.sqlite)",
                "tables": {
                    "documents": {"title": "Documents", "description": "one row per court document",
                                  "sort_desc": "filed_date", "facets": ["court", "status"], "columns": columns},
                    "extraction_log": {"title": "Extraction attempts", "facets": ["outcome", "engine"]},
                },
                "queries": {
                    "documents_of_a_case": {
                        "title": "Documents of a case",
                        "description": "every document of one case number, e.g. 2019-CA-0012",
                        "sql": "SELECT document_id, filed_date, description, status, pages, sha256 "
                               "FROM documents WHERE case_number = :case_number ORDER BY filed_date, document_id"},
                    "failures_by_reason": {
                        "title": "Failures by reason",
                        "sql": "SELECT CASE WHEN status = 'downloaded' THEN 'extraction failed' "
                               "WHEN http_status IN (400, 401, 403, 404, 413) THEN 'permanent http ' || http_status "
                               "ELSE 'transient or exhausted' END AS reason, COUNT(*) AS documents, "
                               "MIN(last_error) AS example_error FROM documents "
                               "WHERE status = 'failed' OR (status = 'downloaded' AND extract_attempts > 0) "
                               "GROUP BY reason ORDER BY documents DESC"},
                },
            },
            "ky_search": {
                "title": "Full-text search (ky_search.sqlite)",
                "tables": {
                    "docs": {"title": "Indexed documents", "fts_table": "docs_fts", "fts_pk": "doc_rowid",
                             "facets": ["court", "year", "kind", "publication_status"], "columns": search_columns},
                },
                "queries": {
                    "search": {
                        "title": "Search",
                        "description": 'FTS5 syntax: words, "a phrase", NEAR(a b, 5), prefix*, AND/OR/NOT',
                        # Datasette escapes HTML, so the matched words are marked [like this].
                        "sql": "SELECT d.case_number, substr(d.filed_date, 1, 10) AS filed, d.case_title, "
                               "snippet(docs_fts, 2, '[', ']', ' … ', 16) AS snippet, d.description, "
                               "round(docs_fts.rank, 4) AS score, d.document_id "
                               "FROM docs_fts JOIN docs d ON d.doc_rowid = docs_fts.rowid "
                               "WHERE docs_fts MATCH :q ORDER BY docs_fts.rank LIMIT 50"},
                },
            },
        },
    }


# Datasette's connections read the index's texts through this plugin (docs_text's kycourt_text):
# the same reading as c10_database.search_text_reader, standalone, for Datasette's process.
SERVE_PLUGIN = '''"""kycourt-colab: kycourt_text(name), the text file the search index names, for snippets."""
import pathlib

from datasette import hookimpl

TEXT_ROOT = pathlib.Path({root!r})


def kycourt_text(name):
    try:
        return None if name is None else (TEXT_ROOT / name).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None


@hookimpl
def prepare_connection(conn):
    conn.execute("PRAGMA trusted_schema = ON")
    conn.create_function({function!r}, 1, kycourt_text, deterministic=True)
'''


def prepare_serve(cfg: Config) -> tuple[list[Path], Path]:
    """One-file copies of the databases, the metadata file and the plugin under workspace/serve/."""
    workspace = Path(cfg.WORKSPACE)
    state = workspace / DB_FILENAME
    if not is_sqlite_file(state):
        raise ServeError(f"no archive database at {state}: run the pipeline first (or pass --workspace)")
    folder = workspace / SERVE_DIR
    databases = [backup_database(state, folder / DB_FILENAME)]
    search = workspace / SEARCH_DB_FILENAME
    if is_sqlite_file(search):
        databases.append(backup_database(search, folder / SEARCH_DB_FILENAME))
    else:
        log_search.warning("no search index at %s: serving the archive without it", search)
    metadata = folder / "metadata.json"
    metadata.write_text(json.dumps(datasette_metadata(), indent=2) + "\n", encoding="utf-8")
    (folder / "plugins").mkdir(exist_ok=True)
    (folder / "plugins" / "kycourt_text.py").write_text(
        SERVE_PLUGIN.format(root=str(workspace), function=SEARCH_TEXT_FUNCTION), encoding="utf-8")
    return databases, metadata


def serve_command(databases: list[Path], metadata: Path, port: int) -> list[str]:
    command = [sys.executable, "-m", "datasette", "serve", "--host", SERVE_HOST, "--port", str(port),
               "--metadata", str(metadata), "--plugins-dir", str(metadata.parent / "plugins"),
               "--setting", "sql_time_limit_ms", "5000", "--setting", "default_page_size", "50"]
    for database in databases:
        command += ["--immutable", str(database)]
    return command


def _serve_require_datasette() -> None:
    try:
        import datasette  # noqa: F401
        return
    except ImportError:
        pass
    if not in_colab():
        raise ServeError("serve needs Datasette: pip install 'kycourt-colab[serve]'")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "datasette>=0.64"])


def start_serve(cfg: Config, port: int = SERVE_DEFAULT_PORT, *, wait_seconds: float = 30.0
                ) -> tuple[subprocess.Popen, str]:
    """Starts Datasette in the background; returns (process, base URL) once it answers."""
    if not 0 < port < 65536:
        raise ServeError(f"port {port} is not a TCP port (1-65535)")
    _serve_require_datasette()
    if port_in_use(port):
        raise ServeError(f"port {port} on {SERVE_HOST} is in use: choose another with --port")
    databases, metadata = prepare_serve(cfg)
    process = subprocess.Popen(serve_command(databases, metadata, port), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    url = f"http://{SERVE_HOST}:{port}"
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode("utf-8", "replace") if process.stdout else ""
            raise ServeError(f"Datasette exited with status {process.returncode}: {output.strip()[-500:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/versions.json", timeout=1):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise ServeError(f"Datasette did not answer on {url} within {wait_seconds:.0f} s")


def show_served(port: int, url: str) -> None:
    """In Colab, the served archive in an output frame (Colab's port proxy); elsewhere its URL."""
    if in_colab():
        from google.colab import output
        output.serve_kernel_port_as_iframe(port, path="/ky_search/search", height=700)
    else:
        print(f"serving the archive read-only at {url}/")


if __name__ == "__main__":  # Search the archive { display-mode: "form" }
    FORM_SEARCH_QUERY = "opinion"  #@param {type:"string"}
    FORM_SEARCH_COURT = ""  #@param ["", "SC", "CA"] {allow-input: true}
    FORM_SEARCH_YEAR = ""  #@param {type:"string"}
    FORM_SEARCH_LIMIT = 20  #@param {type:"integer"}
    FORM_SERVE = False  #@param {type:"boolean"}
    _search_cfg = globals().get("CFG") or load_config()
    _search_run = globals().get("RUN_REPORT")
    _search_store = getattr(_search_run, "store", None)
    SEARCH_TEXT = search_cell(_search_cfg, FORM_SEARCH_QUERY, FORM_SEARCH_COURT, FORM_SEARCH_YEAR,
                              FORM_SEARCH_LIMIT, _search_store)
    if FORM_SERVE:
        try:
            SERVE_PROCESS, _serve_url = start_serve(_search_cfg)
            show_served(SERVE_DEFAULT_PORT, _serve_url)
        except ServeError as _serve_error:
            print(f"serve: {_serve_error}")
