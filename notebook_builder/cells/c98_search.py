"""Search the archive: full-text search of every extracted text, and the archive in a browser.

Guarantees:
- The form's query (what a search box takes: words, "an exact phrase",
  -word to leave out, OR, prefix*, a case number), court (CA, SC, or part of
  the court's name), type, the case number's year, filed from/to
  (YYYY-MM-DD), sort and page run `search_archive()` over the workspace's
  index (built by the index stage: each document's best text, OCR'd scans
  included), exactly as `kycourt-pipeline search` does; it prints how many
  documents match and which of them the page shows, how the query was read
  when that differs from what was typed, and shows the hits as a table, with
  the case number, date, title, description, a highlighted snippet of that
  text (fetched from the store when the workspace lacks it) and a link to
  the PDF in the store (a Drive file link when the store is Drive). A value
  that is no year or day, or a missing index, is one line saying what to do.
- `start_serve()` serves the archive on 127.0.0.1 in a thread of this
  process (uvicorn, as `datasette serve` itself runs): c96_web's search
  page, /search.json, document pages and files in front of Datasette
  (installed on demand in Colab) over read-only copies of ky_court.sqlite
  and of the search index (its catalog for Datasette's "index tables"), in a
  temp folder of their own, never under the workspace (a read-only copy of an
  archive serves too), with the project's metadata. There is no child
  process and no pipe: each request is one line of requests.log beside the
  copies. `Served.stop()` ends it and removes that folder: the CLI calls it
  on SIGINT, SIGTERM and SIGHUP, the form's box when FORM_SERVE is unticked
  (and a kernel restart ends the thread with the kernel).
- A port in use (checked by binding before anything is written), a
  workspace without an archive or without an index: one `ServeError`
  saying what to do. Port 0 lets the system choose.
- `FORM_SERVE` shows the served archive in an output frame through Colab's
  port proxy (elsewhere its URL); `kycourt-pipeline serve` runs the same code.

Knobs read: WORKSPACE, STORE (through the run's context or CFG).
"""
from __future__ import annotations

import errno
import html
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .c00_config import Config, PipelineError, in_colab, load_config, parse_day, utc_now
from .c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, pdf_store_name
from .c10_database import is_sqlite_file
from .c17_snapshots import backup_database
from .c18_search_index import BUILD_HINT, IndexMissingError, SearchIndex, SearchQueryError, copy_search_index
from .c87_index import EXPORT_FIELDS, page_past_last, result_heading, search_archive, snippet_html
from .c96_web import ArchiveWeb, ServedArchive

log_search = logging.getLogger("kycourt.search")

SERVE_HOST = "127.0.0.1"
SERVE_LOG = "requests.log"
SERVE_DEFAULT_PORT = 8001
SERVE_STOP_SECONDS = 5.0      # a stop waits this long for responses in flight, then cuts them


class ServeError(PipelineError):
    """The archive cannot be served (Datasette missing, a port in use, no archive or no index):
    the message says why."""


# ---------------------------------------------------------------- search


def parse_year(text: Any) -> int | None:
    """The form's year: empty means any; anything else must be a year."""
    text = str(text).strip()
    if not text:
        return None
    if not text.isdigit() or not 1900 <= int(text) <= 2100:
        raise SearchQueryError(f"year {text!r} is not a year like 2019")
    return int(text)


def hits_html(hits: list[dict[str, Any]], store: Any = None, first: int = 1) -> str:
    """The hits (numbered from `first`) as an HTML table; the PDF column links to the store's copy
    when it can."""
    link_of = getattr(store, "web_link", None)
    rows = []
    for number, hit in enumerate(hits, first):
        pdf = pdf_store_name(hit["sha256"])
        link = None
        if link_of is not None:
            try:
                link = link_of(pdf)
            except Exception:   # a listing that fails must not hide the hits
                link = None
        pdf_cell = f'<a href="{html.escape(link)}" target="_blank">PDF</a>' if link else html.escape(pdf)
        snippet = snippet_html(hit.get("snippet"), hit.get("snippet_marks") or [])
        cells = [str(number), html.escape(hit.get("case_number") or ""),
                 html.escape((hit.get("filed_date") or "")[:10]),
                 html.escape(hit.get("case_title") or ""), html.escape(hit.get("description") or ""), snippet,
                 pdf_cell, f'<code>{html.escape(hit["document_id"][:12])}…</code>']
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    header = "".join(f"<th>{name}</th>" for name in
                     ("#", "case", "filed", "title", "document", "snippet", "file", "document id"))
    return f'<table><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def form_day(text: Any, name: str) -> str | None:
    """The form's day: empty means none; anything else must be a day YYYY-MM-DD (c00 `parse_day`)."""
    if not str(text).strip():
        return None
    try:
        return parse_day(text)
    except ValueError as exc:
        raise SearchQueryError(f"{name} {exc}") from None


def search_cell(cfg: Config, query: str, court: str = "", year: Any = "", limit: int = 20, store: Any = None, *,
                kind: str = "", after: Any = "", before: Any = "", sort: str = "relevance", page: int = 1) -> str:
    """Runs the form's search and displays the hits; returns the text it printed."""
    try:
        result = search_archive(cfg.WORKSPACE, query, court=court or None, year=parse_year(year), kind=kind or None,
                                after=form_day(after, "filed from"), before=form_day(before, "filed to"),
                                sort=sort or "relevance", page=int(page), limit=int(limit), store=store)
    except (SearchQueryError, IndexMissingError) as exc:
        message = f"search: {exc}"
        print(message)
        return message
    shown = f"; {result.first}-{result.last} shown" if result.hits and result.total > len(result.hits) else ""
    past = page_past_last(result)
    named = {"court_code": "court", "court_like": "court", "kind": "type", "after": "filed from", "before": "filed to",
             "publication_status": "publication status"}
    lines = [result_heading(result) + "".join(f", {named.get(name, name)} {value}"
                                               for name, value in result.filters.items())
             + ("" if result.sort == "relevance" else f", {result.sort} first") + shown
             + (f"; {past}" if past else "")]
    if result.notes:
        lines.append(f"read as: {result.read_as} ({'; '.join(result.notes)})")
    message = "\n".join(lines)
    print(message)
    try:
        from IPython.display import HTML, display
    except ImportError:
        return message
    display(HTML(hits_html(result.hits, store, first=result.first)))
    return message


# ----------------------------------------------------------------- serve


def datasette_metadata() -> dict[str, Any]:
    """Datasette's metadata for the two databases: titles, descriptions, facets, canned queries."""
    described = {name: text for name, _, text in EXPORT_FIELDS}
    columns = {name: text for name, text in described.items()
               if name not in ("pdf", "text", "year", "court_code", "citations")}
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
    search_columns.update({"text_chars": "characters of indexed text",
                           "text_name": "the indexed text's file (in the workspace and the store)",
                           "text_key": "digest of which text was indexed (incremental builds)",
                           "source_key": "digest of its fields (incremental builds)",
                           "indexed_at": "when the index last took the document in"})
    return {
        "title": "Kentucky appellate courts: public record archive",
        "description_html": 'The Kentucky Supreme Court\'s and Court of Appeals\' documents from C-Track '
                            'Public Access, read-only. <a href="/">Search them</a>; a document\'s page is '
                            '/document/&lt;document_id&gt;.',
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
                "title": "Search index catalog (ky_search.sqlite)",
                "description_html": 'What the full-text index holds, one row per document; the search itself '
                                    'is <a href="/">the front page</a> (and <code>/search.json</code>).',
                "tables": {
                    "docs": {"title": "Indexed documents", "sort_desc": "filed_date",
                             "facets": ["court", "year", "kind", "publication_status"], "columns": search_columns},
                },
            },
        },
    }


def prepare_serve(cfg: Config) -> list[Path]:
    """Read-only copies in a temp folder of their own, never under the workspace: ky_court.sqlite
    (one file, which Datasette opens immutable) and the search index (c18 copy_search_index);
    returns the databases Datasette serves. ServeError, with nothing written, without an archive or
    an index."""
    workspace = Path(cfg.WORKSPACE)
    state = workspace / DB_FILENAME
    if not is_sqlite_file(state):
        raise ServeError(f"no archive database at {state}: run the pipeline first (or pass --workspace)")
    if not SearchIndex.exists(workspace):
        raise ServeError(f"no search index in {workspace}: {BUILD_HINT}")
    folder = Path(tempfile.mkdtemp(prefix="kycourt-serve-"))
    copy_search_index(workspace, folder)
    return [backup_database(state, folder / DB_FILENAME), folder / SEARCH_DB_FILENAME]


def _serve_require_datasette() -> None:
    try:
        import datasette  # noqa: F401
        return
    except ImportError:
        pass
    if not in_colab():
        raise ServeError("serve needs Datasette: pip install 'kycourt-colab[serve]'")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "datasette>=0.64"])


def _serve_socket(port: int) -> socket.socket:
    """The listening socket on 127.0.0.1, bound before anything is written: a port in use is one
    ServeError. Port 0 lets the system choose a free one."""
    if not 0 <= port < 65536:
        raise ServeError(f"port {port} is not a TCP port (0-65535)")
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it each keep-alive response waits 40 ms for a delayed ACK (headers, then body).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((SERVE_HOST, port))
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} on {SERVE_HOST} is in use: choose another with --port "
                             "(0 picks a free one)") from None
        raise ServeError(f"cannot listen on {SERVE_HOST}:{port}: {exc.strerror}") from None
    return listener


@dataclass
class Served:
    """A running server: its URL, its request log; `stop()` ends it (idempotent)."""
    url: str
    port: int
    workspace: Path
    log: Path
    server: Any = field(repr=False)
    thread: threading.Thread = field(repr=False)
    request_log: Any = field(repr=False)

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = SERVE_STOP_SECONDS) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():   # a response still streaming: cut it
            self.server.force_exit = True
            self.thread.join(timeout)
        self.request_log.close()
        shutil.rmtree(self.log.parent, ignore_errors=True)   # its copies and its log: nothing left behind


def start_serve(cfg: Config, port: int = SERVE_DEFAULT_PORT, *, store: Any = None,
                wait_seconds: float = 30.0) -> Served:
    """Serves the archive (c96_web's pages in front of Datasette) in a thread of this process;
    returns once it answers. Its requests are logged to requests.log beside its copies."""
    _serve_require_datasette()
    import uvicorn
    from datasette.app import Datasette
    listener = _serve_socket(port)
    bound = listener.getsockname()[1]
    try:
        databases = prepare_serve(cfg)
        folder = databases[0].parent
        datasette = Datasette([], immutables=[str(path) for path in databases], metadata=datasette_metadata(),
                              settings={"sql_time_limit_ms": 5000, "default_page_size": 50})
        site = ServedArchive(workspace=Path(cfg.WORKSPACE), folder=folder, store=store,
                             min_quality=cfg.MIN_TEXT_QUALITY)
        log = folder / SERVE_LOG
        app = _ServeRequestLog(ArchiveWeb(site, datasette.app()), log)
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", ws="none",
                                               timeout_graceful_shutdown=SERVE_STOP_SECONDS / 2))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="serve", daemon=True)
        thread.start()
    except BaseException:
        listener.close()
        raise
    served = Served(url=f"http://{SERVE_HOST}:{bound}", port=bound, workspace=Path(cfg.WORKSPACE), log=log,
                    server=server, thread=thread, request_log=app)
    deadline = time.monotonic() + wait_seconds
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            served.stop()
            raise ServeError(f"the server did not start on {served.url} within {wait_seconds:.0f} s")
        time.sleep(0.05)
    return served


class _ServeRequestLog:
    """ASGI middleware: one line per request (time, method, path, status, bytes, seconds) appended
    to a file beside serve's copies, so nothing a server prints can fill a pipe nobody reads."""

    def __init__(self, app: Any, path: Path):
        self.app = app
        self.handle = open(path, "a", encoding="utf-8", buffering=1)

    def close(self) -> None:
        self.handle.close()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, answer = time.monotonic(), {"status": 0, "bytes": 0}

        async def logged(message: dict) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            elif message["type"] == "http.response.body":
                answer["bytes"] += len(message.get("body", b""))
            await send(message)
        try:
            await self.app(scope, receive, logged)
        finally:
            target = scope.get("raw_path") or scope["path"].encode()
            query = scope.get("query_string") or b""
            self.handle.write(f"{utc_now()} {scope['method']} {target.decode('latin-1')}"
                              f"{'?' + query.decode('latin-1') if query else ''} {answer['status']} "
                              f"{answer['bytes']} {time.monotonic() - started:.3f}s\n")


def show_served(served: Served) -> None:
    """In Colab, the served archive in an output frame (Colab's port proxy); elsewhere its URL."""
    if in_colab():
        from google.colab import output
        output.serve_kernel_port_as_iframe(served.port, path="/", height=700)
    else:
        print(f"serving the archive read-only at {served.url}/ (untick FORM_SERVE and run the cell to stop it)")


def serve_box(cfg: Config, wanted: bool, running: Served | None, store: Any = None,
              start: Any = None) -> Served | None:
    """The search cell's FORM_SERVE box: ticked, the archive served (the running server kept when
    it serves this workspace and still runs); unticked, a running server stopped. Returns what runs."""
    start = start or start_serve
    if running is not None and (not wanted or not running.alive() or running.workspace != Path(cfg.WORKSPACE)):
        running.stop()
        print(f"serve: stopped {running.url}")
        running = None
    if not wanted or running is not None:
        return running
    try:
        served = start(cfg, SERVE_DEFAULT_PORT, store=store)
    except ServeError as exc:
        print(f"serve: {exc}")
        return None
    show_served(served)
    return served


if __name__ == "__main__":  # Search the archive { display-mode: "form" }
    FORM_SEARCH_QUERY = "opinion"  #@param {type:"string"}
    FORM_SEARCH_COURT = ""  #@param ["", "SC", "CA"] {allow-input: true}
    FORM_SEARCH_TYPE = ""  #@param ["", "opinion", "order", "brief", "other"] {allow-input: true}
    FORM_SEARCH_YEAR = ""  #@param {type:"string"}
    FORM_SEARCH_FILED_FROM = ""  #@param {type:"string"}
    FORM_SEARCH_FILED_TO = ""  #@param {type:"string"}
    FORM_SEARCH_SORT = "relevance"  #@param ["relevance", "newest", "oldest"]
    FORM_SEARCH_PAGE = 1  #@param {type:"integer"}
    FORM_SEARCH_LIMIT = 20  #@param {type:"integer"}
    FORM_SERVE = False  #@param {type:"boolean"}
    _search_cfg = globals().get("CFG") or load_config()
    _search_store = getattr(globals().get("RUN_REPORT"), "store", None)
    SEARCH_TEXT = search_cell(_search_cfg, FORM_SEARCH_QUERY, FORM_SEARCH_COURT, FORM_SEARCH_YEAR, FORM_SEARCH_LIMIT,
                              _search_store, kind=FORM_SEARCH_TYPE, after=FORM_SEARCH_FILED_FROM,
                              before=FORM_SEARCH_FILED_TO, sort=FORM_SEARCH_SORT, page=FORM_SEARCH_PAGE)
    SERVED = serve_box(_search_cfg, FORM_SERVE, globals().get("SERVED"), _search_store)
