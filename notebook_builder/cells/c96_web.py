"""Web: the archive in a browser, search first (the pages `serve` shows).

Guarantees:
- `ArchiveWeb(site, datasette_app)` is an ASGI app. `/` is the search
  page: a box (FTS5 syntax, as `kycourt-pipeline search`), the facets
  court, year, kind and publication status with their counts for the
  query (each a link that narrows it, or widens it again), the number of
  documents that match, and per hit its case number, title, date, kind, a
  snippet with the matched words marked, its score (bm25, lower is better),
  and links to its document page and its PDF. A query FTS5 cannot parse is
  one line on the page saying what to change, never an error page.
- `/document/<document_id>` shows the document's metadata, what derive
  found, its case (with every document of it), its citations (the
  archive's opinions it cites, the documents citing it, every citation
  found in its text), links to its PDF and text, and the text itself.
- `/pdf_by_hash/<sha256>.pdf` and `/text/<sha256>.txt` (`.ocr.txt`) are
  the archive's files, read-only, from the workspace or else the store, and
  only names a document of the archive refers to. The route is decided from
  the raw request path by `web_route()`: a name that is not exactly 64
  lowercase hex digits and its extension is no file of the archive, so no
  path outside it (`..`, `%2e%2e`, a slash too many) can ever be served.
  Every other path goes to Datasette (tables, SQL, JSON), which serves no
  file but its own static ones; the tables are one click away in the header.
- Nothing is written: the state and the index are read from the read-only
  copies `serve` made (`site.folder`); each request opens its own
  read-only connections, in a worker thread, so the event loop never waits
  on SQLite.

Knobs read: none (the site carries the workspace and the store).
"""
from __future__ import annotations

import asyncio
import html
import re
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .c00_config import StoreError
from .c06_layout import DB_FILENAME, ocr_text_store_name, pdf_store_name, text_store_name
from .c10_database import Database, connect
from .c11_reads import document_citations, documents_matching, rows_where
from .c14_derived import DerivedRecords
from .c18_search_index import CommonWordsQuery, SearchQueryError
from .c33_best_text import best_text_sources
from .c87_index import INDEX_COURT_CODES, court_filter, open_search_index, query_hint, search_archive, snippet_html

WEB_FACETS = (("court_code", "court"), ("year", "year"), ("kind", "kind"),
              ("publication_status", "publication status"))
WEB_HITS = 20                 # hits on a page; "more" asks for WEB_HITS more, up to WEB_HITS_MAX
WEB_HITS_MAX = 500
WEB_TEXT_CHARS = 200_000      # of a document's text shown on its page (the whole text is one click away)
WEB_FILE_CHUNK = 256 * 1024
_WEB_TEXT_SOURCES = {"text_layer": "the PDF's text layer", "ocr": "the text layer with OCR of its scanned pages",
                     "court_text": "the court's own text of the document"}
_WEB_SHA = r"(?P<sha>[0-9a-f]{64})"
_WEB_ROUTES = (
    ("search", re.compile(r"/")),
    ("document", re.compile(r"/document/(?P<document_id>[0-9A-Za-z_-]{1,128})")),
    ("pdf", re.compile(rf"/pdf_by_hash/{_WEB_SHA}\.pdf")),
    ("text", re.compile(rf"/text/{_WEB_SHA}\.txt")),
    ("ocr_text", re.compile(rf"/text/{_WEB_SHA}\.ocr\.txt")),
)


@dataclass
class ServedArchive:
    """What the pages read: `folder` holds the read-only copies of ky_court.sqlite and
    ky_search.sqlite; files come from `workspace`, else from `store` (None: the workspace only)."""
    workspace: Path
    folder: Path
    store: Any = None
    min_quality: float = 0.5      # MIN_TEXT_QUALITY: which of a document's texts is its best (c83)


@dataclass
class WebResponse:
    status: int
    content_type: str
    body: bytes = b""
    file: Path | None = None          # streamed instead of `body`
    headers: list[tuple[str, str]] = field(default_factory=list)


# ------------------------------------------------------------- decisions


def web_route(raw_path: str) -> tuple[str, dict[str, str]] | None:
    """(page, its parameters) of a request path as the client sent it (before any decoding), or
    None: the path is Datasette's."""
    for name, pattern in _WEB_ROUTES:
        match = pattern.fullmatch(raw_path)
        if match:
            return name, match.groupdict()
    return None


@dataclass(frozen=True)
class WebSearch:
    """The search page's request: the query and its filters, as the form and the facet links send them."""
    q: str = ""
    court: str = ""
    year: int | None = None
    kind: str = ""
    publication_status: str = ""
    limit: int = WEB_HITS

    @classmethod
    def from_query_string(cls, query_string: str) -> "WebSearch":
        values = {key: items[-1].strip() for key, items in urllib.parse.parse_qs(query_string).items()}
        year = values.get("year", "")
        limit = values.get("limit", "")
        return cls(q=values.get("q", ""), court=values.get("court", "").upper(),
                   year=int(year) if year.isdigit() and 1900 <= int(year) <= 2100 else None,
                   kind=values.get("kind", ""), publication_status=values.get("publication_status", ""),
                   limit=min(int(limit), WEB_HITS_MAX) if limit.isdigit() and int(limit) > 0 else WEB_HITS)

    def filters(self) -> dict[str, Any]:
        """SearchDatabase filters (court as search_archive reads it)."""
        return {**court_filter(self.court), "year": self.year, "kind": self.kind or None,
                "publication_status": self.publication_status or None}

    def link(self, **changes: Any) -> str:
        """The search page's URL with `changes` (None or "" drops a parameter)."""
        values = {"q": self.q, "court": self.court, "year": self.year, "kind": self.kind,
                  "publication_status": self.publication_status}
        values.update(changes)
        kept = {key: value for key, value in values.items() if value not in (None, "")}
        return "/?" + urllib.parse.urlencode(kept) if kept else "/"


# ----------------------------------------------------------------- pages


def _web_page(title: str, body: str, *, query: str = "") -> bytes:
    """A whole page: Datasette's stylesheet, the header (search box, the tables one click away)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/-/static/app.css">
<style>
 body {{ margin: 0 }} main {{ max-width: 74em; margin: 0 auto; padding: 0 1em 2em }}
 header.top {{ background: #276890; color: white; padding: 0.5em 1em; display: flex; gap: 1.5em;
   align-items: center; flex-wrap: wrap }}
 header.top a {{ color: white }} header.top form {{ display: flex; gap: 0.4em; flex: 1 }}
 header.top input[type=search] {{ flex: 1; font-size: 1.05em; padding: 0.3em }}
 .layout {{ display: flex; gap: 2em; align-items: flex-start }} .facets {{ min-width: 13em; font-size: 0.9em }}
 .facets h3 {{ margin: 1em 0 0.2em; font-size: 1em }} .facets ul {{ list-style: none; padding: 0; margin: 0 }}
 .facets .chosen {{ font-weight: bold }} .hits {{ flex: 1 }} .hit {{ margin: 0 0 1.2em }}
 .hit h2 {{ font-size: 1.05em; margin: 0 }} .meta {{ color: #555; font-size: 0.9em }}
 mark {{ background: #ffe58a }} .problem {{ background: #fdecea; padding: 0.6em; border-left: 4px solid #c62828 }}
 table.fields td, table.fields th {{ text-align: left; vertical-align: top; padding: 0.15em 0.8em 0.15em 0 }}
 pre.text {{ white-space: pre-wrap; background: #fafafa; padding: 1em; border: 1px solid #ddd }}
</style></head><body>
<header class="top"><strong><a href="/">Kentucky appellate courts</a></strong>
<form action="/" method="get"><input type="search" name="q" value="{html.escape(query)}"
 placeholder='words, "a phrase", NEAR(a b, 5), prefix*, OR, NOT' aria-label="search the archive">
<button type="submit">Search</button></form>
<nav><a href="/ky_court">archive tables</a> · <a href="/ky_search">index tables</a> ·
<a href="/ky_court?sql=select+*+from+documents+limit+10">SQL</a></nav></header>
<main>{body}</main></body></html>""".encode("utf-8")


def _web_html(page: bytes, status: int = 200) -> WebResponse:
    return WebResponse(status, "text/html; charset=utf-8", page)


def _web_not_found(what: str) -> WebResponse:
    return _web_html(_web_page("Not found", f'<p class="problem">{html.escape(what)}</p>'), 404)


def search_page(site: ServedArchive, request: WebSearch) -> WebResponse:
    """The search page of `request` (the landing page when it has no query)."""
    query = request.q or None
    try:
        sdb = open_search_index(site.folder)
    except Exception as exc:     # an index that cannot be read: say so, keep the tables reachable
        return _web_html(_web_page("Search", f'<p class="problem">{html.escape(str(exc))}</p>'), 503)
    try:
        facets = sdb.match_facets(query, [column for column, _ in WEB_FACETS], **request.filters())
        # The index is the served copy; the texts its snippets quote are the workspace's (or the store's).
        hits = [] if query is None else search_archive(
            site.workspace, query, court=request.court or None, year=request.year, kind=request.kind or None,
            publication_status=request.publication_status or None, limit=request.limit, sdb=sdb, store=site.store)
        # An uncapped ranking counted every match already; a capped one (or none) asks the index.
        total = hits[0]["ranked_among"] if hits and not hits[0]["rank_capped"] else sdb.match_count(
            query, **request.filters())
    except SearchQueryError as exc:
        problem = (f"The query {request.q!r}: {exc}." if isinstance(exc, CommonWordsQuery) else
                   f"The query {request.q!r} cannot be read ({exc}): {query_hint(request.q)}.")
        return _web_html(_web_page(f"{request.q} - search", f'<p class="problem">{html.escape(problem)}</p>',
                                   query=request.q), 400)
    finally:
        sdb.close()
    body = [f'<div class="layout"><aside class="facets">{_web_facets(request, facets)}</aside><section class="hits">']
    if query is None:
        body.append(f"<p>{total:,} documents searchable. Type words in the box: all must match; "
                    '"a phrase"; NEAR(a b, 5); prefix*; OR; NOT. Words with punctuation, such as case '
                    'numbers, go in double quotes: "2019-CA-0012".</p>')
    else:
        shown = f"; the best {len(hits)}" if total > len(hits) else ""
        body.append(f"<p><strong>{total:,} documents match</strong>{shown}.</p>")
        body += [_web_hit(hit) for hit in hits]
        if total > len(hits) and request.limit < WEB_HITS_MAX:
            more = request.link() + ("&" if "?" in request.link() else "?") + f"limit={request.limit + WEB_HITS}"
            body.append(f'<p><a href="{html.escape(more)}">more hits</a></p>')
    body.append("</section></div>")
    return _web_html(_web_page(f"{request.q} - search" if request.q else "Search the archive", "".join(body),
                               query=request.q))


def _web_facets(request: WebSearch, facets: dict[str, list[tuple[Any, int]]]) -> str:
    chosen = {"court_code": request.court, "year": request.year, "kind": request.kind,
              "publication_status": request.publication_status}
    parameter = {"court_code": "court"}
    parts = []
    for column, label in WEB_FACETS:
        items = []
        values = facets.get(column, [])
        if column == "year":     # years in order, newest first; the others by how many match
            values = sorted(values, key=lambda item: (item[0] is None, -(item[0] or 0)))
        for value, count in values[:30]:
            if value is None:
                items.append(f"<li>unknown ({count:,})</li>")
                continue
            name = INDEX_COURT_CODES.get(value, value) if column == "court_code" else value
            if chosen[column] not in (None, "") and str(chosen[column]) == str(value):
                link = request.link(**{parameter.get(column, column): None})
                items.append(f'<li class="chosen">{html.escape(str(name))} ({count:,}) '
                             f'<a href="{html.escape(link)}" title="remove this filter">×</a></li>')
            else:
                link = request.link(**{parameter.get(column, column): value})
                items.append(f'<li><a href="{html.escape(link)}">{html.escape(str(name))}</a> ({count:,})</li>')
        parts.append(f"<h3>{label}</h3><ul>{''.join(items) or '<li>none</li>'}</ul>")
    return "".join(parts)


def _web_hit(hit: dict[str, Any]) -> str:
    document = f"/document/{urllib.parse.quote(hit['document_id'])}"
    details = [hit.get("court_code"), (hit.get("filed_date") or "")[:10], hit.get("kind"),
               hit.get("publication_status"), hit.get("description")]
    return (f'<div class="hit"><h2><a href="{html.escape(document)}">{html.escape(hit.get("case_number") or "?")}'
            f' · {html.escape(hit.get("case_title") or "untitled")}</a></h2>'
            f'<div class="meta">{" · ".join(html.escape(str(part)) for part in details if part)}'
            f' · <span title="bm25: lower is better">score {hit["score"]:.3g}</span>'
            f' · <a href="/{pdf_store_name(hit["sha256"])}">PDF</a></div>'
            f"<div>{snippet_html(hit.get('snippet'), hit.get('snippet_marks') or [])}</div></div>")


def document_page(site: ServedArchive, document_id: str) -> WebResponse:
    """Everything the archive knows of one document, with its text."""
    db = Database.open_readonly(site.folder / DB_FILENAME)
    try:
        conn = db.conn
        rows = rows_where(conn, "documents", "document_id", document_id, limit=1)
        if not rows:
            return _web_not_found(f"no document {document_id} in this archive")
        row = rows[0]
        derived = _web_optional(lambda: rows_where(conn, "derived", "document_id", document_id, limit=1))
        case_documents = documents_matching(conn, row["case_number"])[1] if row.get("case_number") else []
        cases = _web_optional(lambda: rows_where(conn, "cases", "case_id", row.get("case_id"), limit=1))
        cites = _web_optional(lambda: [dict(r) for r in DerivedRecords(db).cites(document_id)])
        cited_by = _web_optional(lambda: [dict(r) for r in DerivedRecords(db).cited_by(document_id)])
        citations = _web_optional(lambda: document_citations(conn, document_id))
        text_source, text_name = best_text_sources(conn, site.min_quality, "d.document_id = ?",
                                                   (document_id,)).get(document_id, (None, None))
    finally:
        db.close()
    sha = row.get("sha256")
    has_pdf = bool(sha) and row.get("status") in ("downloaded", "extracted")
    # The court's own text is shown on the page, not served as a file of its own.
    text_link = text_name if text_name and web_route(f"/{text_name}") is not None else None
    title = f"{row.get('case_number') or '?'} · {row.get('case_title') or 'untitled'}"
    links = [f'<a href="/{pdf_store_name(sha)}">PDF</a>' if has_pdf else "no PDF in the archive"]
    if text_link:
        links.append(f'<a href="/{text_link}">text</a>')
    links.append(f'<a href="/ky_court/documents/{urllib.parse.quote(document_id)}">row in Datasette</a>')
    found = derived[0] if derived else {}
    summary = [row.get("court"), (row.get("filed_date") or "")[:10], row.get("description"), found.get("kind"),
               found.get("publication_status"), f"rendered {found['rendered_date']}" if found.get("rendered_date") else None,
               f"{row['pages']} page{'s' if row['pages'] != 1 else ''}" if row.get("pages") else None]
    body = [f"<h1>{html.escape(title)}</h1>",
            f'<p>{" · ".join(html.escape(str(part)) for part in summary if part)}</p><p>{" · ".join(links)}</p>']
    body.append(f"<h2>Its case: {html.escape(row.get('case_number') or '?')}</h2>")
    if cases:
        body.append(_web_fields(cases[0]))
    body.append("<ul>" + "".join(
        f'<li>{html.escape((other.get("filed_date") or "")[:10])} · '
        f'<a href="/document/{urllib.parse.quote(other["document_id"])}">{html.escape(other.get("description") or "?")}</a>'
        f' · {html.escape(other.get("status") or "")}{" (this one)" if other["document_id"] == document_id else ""}</li>'
        for other in case_documents) + "</ul>")
    body.append("<h2>Citations</h2>")
    body.append(_web_citation_list("The archive's opinions it cites", cites)
                + _web_citation_list("Documents of the archive citing it", cited_by))
    body.append("<p>In its text: " + (html.escape("; ".join(citations)) if citations else "none found") + "</p>")
    body.append(f"<h2>Text ({html.escape(_WEB_TEXT_SOURCES.get(text_source, 'none'))})</h2>")
    text = _web_read_text(site, text_name) if text_name else None
    if text is None:
        body.append("<p>No text: " + html.escape(row.get("extract_failure") or row.get("status") or "unknown") + "</p>")
    else:
        shown = text[:WEB_TEXT_CHARS]
        more = (f'<p>The first {WEB_TEXT_CHARS:,} of {len(text):,} characters'
                + (f'; <a href="/{text_link}">the whole text</a>' if text_link else "") + ".</p>"
                if len(text) > WEB_TEXT_CHARS else "")
        body.append(f'{more}<pre class="text">{html.escape(shown)}</pre>')
    body.append("<h2>Everything the archive records of it</h2><details><summary>the document's row</summary>"
                f"{_web_fields(row)}</details>")
    if found:
        body.append(f"<details><summary>what derive found</summary>{_web_fields(found)}</details>")
    return _web_html(_web_page(title, "".join(body)))


def _web_optional(read: Callable[[], Any]) -> Any:
    """Rows of a table an older archive may lack: [] then."""
    try:
        return read()
    except sqlite3.OperationalError:
        return []


def _web_fields(row: dict[str, Any]) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>"
                    for key, value in row.items() if value not in (None, ""))
    return f'<table class="fields">{cells}</table>'


def _web_document_link(row: dict[str, Any]) -> str:
    return (f'<a href="/document/{urllib.parse.quote(row["document_id"])}">'
            f'{html.escape(row.get("case_number") or row["document_id"][:12])}</a>')


def _web_citation_list(title: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return f"<p>{title}: none.</p>"
    items = "".join(f'<li>{_web_document_link(row)} · {html.escape(row.get("case_title") or "")} · '
                    f'{html.escape(row.get("rendered_date") or "")} (as {html.escape(row.get("cited_case_number") or "")})'
                    f"</li>" for row in rows)
    return f"<p>{title}:</p><ul>{items}</ul>"


# ----------------------------------------------------------------- files


def archive_file(site: ServedArchive, kind: str, sha: str) -> WebResponse:
    """A PDF or text the archive refers to: the workspace's copy, else the store's."""
    conn = connect(site.folder / DB_FILENAME, readonly=True)
    try:
        rows = rows_where(conn, "documents", "sha256", sha, limit=50)
    finally:
        conn.close()
    if kind == "pdf":
        name, content_type = pdf_store_name(sha), "application/pdf"
        known = any(row["status"] in ("downloaded", "extracted") for row in rows)
    else:
        name = ocr_text_store_name(sha) if kind == "ocr_text" else text_store_name(sha)
        content_type = "text/plain; charset=utf-8"
        known = any(row["status"] == "extracted" and (kind == "text" or row.get("extracted_by_ocr")) for row in rows)
    if not known:
        return _web_not_found(f"{name} is no file of this archive")
    headers = [("content-disposition", f'inline; filename="{Path(name).name}"'),
               ("x-content-type-options", "nosniff")]
    local = site.workspace / name
    if local.is_file():
        return WebResponse(200, content_type, file=local, headers=headers)
    data = _web_store_read(site, name)
    if data is None:
        return _web_not_found(f"{name} is in neither the workspace nor the store")
    return WebResponse(200, content_type, data, headers=headers)


def _web_store_read(site: ServedArchive, name: str) -> bytes | None:
    if site.store is None:
        return None
    try:
        return site.store.read_file(name)
    except (StoreError, OSError):
        return None


def _web_read_text(site: ServedArchive, name: str) -> str | None:
    local = site.workspace / name
    try:
        return local.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        data = _web_store_read(site, name)
        return None if data is None else data.decode("utf-8", "replace")


# ----------------------------------------------------------------- ASGI


class ArchiveWeb:
    """The ASGI app: the pages above on their routes, Datasette on every other path."""

    def __init__(self, site: ServedArchive, datasette_app: Callable):
        self.site = site
        self.datasette_app = datasette_app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            raw_path = (scope.get("raw_path") or scope["path"].encode("utf-8")).decode("latin-1").split("?", 1)[0]
            route = web_route(raw_path)
            if route is not None:
                if scope["method"] not in ("GET", "HEAD"):
                    response = WebResponse(405, "text/plain; charset=utf-8", b"read-only\n", headers=[("allow", "GET, HEAD")])
                else:
                    query_string = scope.get("query_string", b"").decode("latin-1")
                    response = await asyncio.to_thread(self.respond, route, query_string)
                await _web_send(send, response, head=scope["method"] == "HEAD")
                return
        await self.datasette_app(scope, receive, send)

    def respond(self, route: tuple[str, dict[str, str]], query_string: str) -> WebResponse:
        page, parameters = route
        if page == "search":
            return search_page(self.site, WebSearch.from_query_string(query_string))
        if page == "document":
            return document_page(self.site, parameters["document_id"])
        return archive_file(self.site, page, parameters["sha"])


async def _web_send(send: Callable, response: WebResponse, *, head: bool) -> None:
    size = response.file.stat().st_size if response.file is not None else len(response.body)
    headers = [(b"content-type", response.content_type.encode()), (b"content-length", str(size).encode())]
    headers += [(name.encode(), value.encode()) for name, value in response.headers]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    if head:
        await send({"type": "http.response.body", "body": b""})
        return
    if response.file is None:
        await send({"type": "http.response.body", "body": response.body})
        return
    chunks = _web_chunks(response.file)
    while True:
        chunk = await asyncio.to_thread(next, chunks, b"")
        last = len(chunk) < WEB_FILE_CHUNK
        await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        if last:
            return


def _web_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(WEB_FILE_CHUNK):
            yield chunk
