"""Web: the archive in a browser, search first (the pages `serve` shows).

Guarantees:
- `ArchiveWeb(site, datasette_app)` is an ASGI app. `/` is the search page:
  `/?q=&court=&type=&year=&after=&before=&sort=&page=` asks what `kycourt-pipeline search` asks
  (c87 search_archive: the same reading of the query, filters, sort and pages; never an error
  page), and `/search.json` with the same parameters answers the CLI's `--json` object. The form
  holds every filter (court, type, the case number's year, filed from/to, sort) with its current
  value, folded away on a narrow screen; the page says how the query was read when that differs
  from what was typed, "21–40 of 106" with previous and next, the facets court, case year, kind
  and publication status with their counts (each a link that narrows the search, or widens it
  again), and per hit its case number, title, court, filed date, kind, description, a snippet
  with the matched words marked, a link to its PDF and one to its document page that keeps the
  search. A parameter that cannot be read is left out and said.
- Pages are headed with the archive's court system (c28 `title`); the court facet names its
  courts; a search whose archive holds documents the court does not serve to the public says how
  many and why, and lists those of the case numbers searched.
- `/document/<document_id>` shows the document's metadata (and, for one the court does not serve
  to the public, why: registration or purchase), what derive found, its case (every document of
  it, in filed order), its citations (the archive's opinions it cites, the documents citing it,
  every citation found in its text), links to its PDF and text, and the text itself with the
  search's words marked and a link back to the results when it was reached from a search.
- `/changes` and `/feed.atom` (`?q=&court=&type=`: a saved search's new documents) are c89's; a
  withdrawn document's page says so (c89).
- `/pdf_by_hash/<sha256>.pdf` and `/text/<sha256>.txt` (`.ocr.txt`) are the archive's files,
  read-only, from the workspace or else the store, and only names a document of the archive refers
  to. `web_route()` decides the route from the raw request path: a name that is not exactly 64
  lowercase hex digits and its extension is no file of the archive, so no path outside it (`..`,
  `%2e%2e`, a slash too many) is ever served. Every other path goes to Datasette (tables, SQL,
  JSON), which serves no file but its own static ones; the tables are one click away.
- Nothing is written: the state and the index are read from the read-only copies `serve` made
  (`site.folder`); each request runs in a worker thread, so the event loop never waits on SQLite
  or the index.

Knobs read: none (the site carries the workspace and the store).
"""
from __future__ import annotations

import asyncio
import html
import json
import re
import sqlite3
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .c00_config import DEFAULT_COURT_SYSTEM, StoreError, parse_day
from .c06_layout import DB_FILENAME, ocr_text_store_name, pdf_store_name, text_store_name
from .c10_database import Database, connect
from .c11_reads import document_citations, documents_matching, rows_where
from .c12_queues import not_public_reason
from .c14_derived import DerivedRecords
from .c18_query_syntax import parse_query
from .c18_search_index import (SEARCH_KINDS, SEARCH_SORTS, SearchFilters, SearchIndex, composed,
                               open_search_index)
from .c33_best_text import best_text_sources
from .c28_court_words import ARCHIVE_TITLES, SystemWords, system_words
from .c87_index import NotPublic, SearchResult, page_past_last, query_marks, search_archive, snippet_html, text_places
from .c89_feed import changes_page, feed_answer, withdrawn_note

WEB_FACETS = (("court_code", "court"), ("year", "case year"), ("kinds", "kind"),
              ("publication_status", "publication status"))
WEB_HITS = 20                 # hits on a page
WEB_TEXT_CHARS = 200_000      # of a document's text shown on its page (the whole text is one click away)
WEB_TEXT_MARKS = 2_000        # places of the search's words marked in a document's text, at most
WEB_FILE_CHUNK = 256 * 1024
_WEB_TEXT_SOURCES = {"text_layer": "the PDF's text layer", "ocr": "the text layer with OCR of its scanned pages",
                     "court_text": "the court's own text of the document"}
_WEB_SORT_NAMES = {"relevance": "relevance", "newest": "newest first", "oldest": "oldest first"}
# Every court system's court codes: a ?court= value that is one is read in capitals.
_WEB_COURT_CODES = frozenset(code for name in ARCHIVE_TITLES for code in system_words(name).courts)
_WEB_FILTER_NAMES = {"court_code": "court", "court_like": "court", "kind": "type", "year": "case year",
                     "after": "filed from", "before": "filed to", "publication_status": "publication status"}
_WEB_SHA = r"(?P<sha>[0-9a-f]{64})"
_WEB_ROUTES = (
    ("search", re.compile(r"/")),
    ("search_json", re.compile(r"/search\.json")),
    ("document", re.compile(r"/document/(?P<document_id>[0-9A-Za-z_-]{1,128})")),
    ("pdf", re.compile(rf"/pdf_by_hash/{_WEB_SHA}\.pdf")),
    ("text", re.compile(rf"/text/{_WEB_SHA}\.txt")),
    ("ocr_text", re.compile(rf"/text/{_WEB_SHA}\.ocr\.txt")),
    ("changes", re.compile(r"/changes")),          # c89: what changed, and its Atom feeds
    ("feed", re.compile(r"/feed\.atom")),
)


@dataclass
class ServedArchive:
    """What the pages read: `folder` holds the read-only copies of ky_court.sqlite and of the
    search index; files come from `workspace`, else from `store` (None: the workspace only);
    `system` is the archive's court system (its words head the pages, read its case numbers)."""
    workspace: Path
    folder: Path
    store: Any = None
    min_quality: float = 0.5      # MIN_TEXT_QUALITY: which of a document's texts is its best (c33)
    system: str = DEFAULT_COURT_SYSTEM
    _search: SearchIndex | None = field(default=None, repr=False)
    _not_public: NotPublic | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def words(self) -> SystemWords:
        return system_words(self.system)

    def search_index(self) -> SearchIndex:
        """The served copy of the index, opened once (a snapshot: it never changes under serve)."""
        with self._lock:
            if self._search is None:
                self._search = open_search_index(self.folder)
            return self._search

    def not_public(self) -> NotPublic:
        """The documents not public at the court, counted once from the served copy of the state."""
        with self._lock:
            if self._not_public is None:
                self._not_public = NotPublic(self.folder / DB_FILENAME, self.words)
            return self._not_public


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


# The search's parameters in a URL, in this order (`kind` is `type` there, as in the CLI's --type).
_WEB_PARAMETERS = ("q", "court", "type", "year", "after", "before", "sort", "page", "publication_status", "limit")


@dataclass(frozen=True)
class WebSearch:
    """A search as the form, the facet links, the pager and /search.json ask it."""
    q: str = ""
    court: str = ""
    kind: str = ""
    year: int | None = None
    after: str = ""
    before: str = ""
    sort: str = "relevance"
    page: int = 1
    publication_status: str = ""
    limit: int = WEB_HITS
    notes: tuple[str, ...] = ()       # parameters that could not be read, and were left out

    @classmethod
    def from_query_string(cls, query_string: str) -> "WebSearch":
        values = {key: items[-1].strip() for key, items in urllib.parse.parse_qs(query_string).items()}
        notes = []

        def number(name: str, low: int, high: int) -> int | None:
            text = values.get(name, "")
            if not text:
                return None
            if text.isdigit() and low <= int(text) <= high:
                return int(text)
            notes.append(f"{name} {text!r} is not a number from {low} to {high}: left out")
            return None

        def day(name: str) -> str:
            text = values.get(name, "")
            try:
                return parse_day(text) if text else ""
            except ValueError as exc:
                notes.append(f"{name} {exc}: left out")
                return ""
        sort = values.get("sort", "") or "relevance"
        if sort not in SEARCH_SORTS:
            notes.append(f"sort {sort!r} is not one of {', '.join(SEARCH_SORTS)}: by relevance")
            sort = "relevance"
        court = values.get("court", "")
        return cls(q=values.get("q", ""), court=court.upper() if court.upper() in _WEB_COURT_CODES else court,
                   kind=values.get("type", values.get("kind", "")), year=number("year", 1900, 2100),
                   after=day("after"), before=day("before"), sort=sort, page=number("page", 1, 10**6) or 1,
                   publication_status=values.get("publication_status", ""),
                   limit=number("limit", 1, 100) or WEB_HITS, notes=tuple(notes))

    def values(self) -> dict[str, Any]:
        return {"q": self.q, "court": self.court, "type": self.kind, "year": self.year, "after": self.after,
                "before": self.before, "sort": "" if self.sort == "relevance" else self.sort,
                "page": "" if self.page == 1 else self.page, "publication_status": self.publication_status,
                "limit": "" if self.limit == WEB_HITS else self.limit}

    def query_string(self, **changes: Any) -> str:
        """The search's URL parameters with `changes` (None or "" drops one)."""
        values = {**self.values(), **changes}
        if values.get("page") == 1:
            values["page"] = None
        kept = [(key, values[key]) for key in _WEB_PARAMETERS if values.get(key) not in (None, "")]
        return urllib.parse.urlencode(kept)

    def link(self, **changes: Any) -> str:
        """The search page's URL with `changes`; a change of anything but the page starts at page 1."""
        if any(key != "page" for key in changes):
            changes.setdefault("page", None)
        query_string = self.query_string(**changes)
        return "/?" + query_string if query_string else "/"

    def run(self, site: ServedArchive) -> SearchResult:
        return search_archive(site.workspace, self.q, court=self.court or None, year=self.year,
                              kind=self.kind or None, publication_status=self.publication_status or None,
                              after=self.after or None, before=self.before or None, sort=self.sort,
                              page=self.page, limit=self.limit, notes=self.notes, search=site.search_index(),
                              store=site.store, system=site.system, not_public=site.not_public())


# ----------------------------------------------------------------- pages

_WEB_STYLE = """
 body { margin: 0 } main { max-width: 74em; margin: 0 auto; padding: 0 1em 2em }
 header.top { background: #276890; color: white; padding: 0.5em 1em; display: flex; gap: 0.5em 1.5em;
   align-items: center; flex-wrap: wrap }
 header.top a { color: white } header.top form { display: flex; gap: 0.4em; flex: 1 1 12em }
 header.top input[type=search] { flex: 1; min-width: 0; font-size: 1.05em; padding: 0.3em }
 form.search { margin: 1em 0 } form.search .box { display: flex; gap: 0.4em }
 form.search input[type=search] { flex: 1; min-width: 0; font-size: 1.1em; padding: 0.35em }
 details.filters { margin-top: 0.5em } details.filters summary { cursor: pointer; color: #276890 }
 .fields { display: flex; flex-wrap: wrap; gap: 0.5em 1.2em; margin-top: 0.5em; align-items: end }
 .fields label { display: flex; flex-direction: column; font-size: 0.9em; gap: 0.15em }
 .fields input, .fields select { font-size: 1em; padding: 0.2em; max-width: 100% }
 .read-as { background: #fff8e1; padding: 0.4em 0.6em; border-left: 4px solid #f0b400 }
 .layout { display: flex; gap: 2em; align-items: flex-start } .facets { min-width: 13em; font-size: 0.9em }
 .facets h3 { margin: 1em 0 0.2em; font-size: 1em } .facets ul { list-style: none; padding: 0; margin: 0 }
 .facets .chosen { font-weight: bold } .hits { flex: 1; min-width: 0 } .hit { margin: 0 0 1.2em }
 .hit h2 { font-size: 1.05em; margin: 0; overflow-wrap: anywhere } .meta { color: #555; font-size: 0.9em }
 .snippet { overflow-wrap: anywhere } .pager { display: flex; gap: 1em; align-items: baseline; margin: 1.5em 0 }
 mark { background: #ffe58a } .problem { background: #fdecea; padding: 0.6em; border-left: 4px solid #c62828 }
 table.fields td, table.fields th { text-align: left; vertical-align: top; padding: 0.15em 0.8em 0.15em 0 }
 table.fields td { overflow-wrap: anywhere }
 pre.text { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 1em; border: 1px solid #ddd }
 @media (max-width: 700px) {
   main { padding: 0 0.6em 2em } .layout { flex-direction: column; gap: 0 } .facets { order: 2; width: 100% }
   .fields label { flex: 1 1 40% }
 }
"""
# Folded by default (a phone's width); opened where the screen is wide. Without JavaScript they stay folded.
_WEB_UNFOLD = ("<script>if (window.matchMedia('(min-width: 701px)').matches) "
               "document.querySelectorAll('details.unfold').forEach(function (d) { d.open = true; });</script>")


def _web_page(title: str, body: str, *, query: str = "", header_box: bool = True,
              archive: str = ARCHIVE_TITLES[DEFAULT_COURT_SYSTEM]) -> bytes:
    """A whole page: Datasette's stylesheet, the header (the archive's name, a search box where the
    page has none of its own, the tables one click away)."""
    box = (f'<form action="/" method="get"><input type="search" name="q" value="{html.escape(query)}" '
           'placeholder="search the archive" aria-label="search the archive"><button type="submit">Search</button>'
           '</form>') if header_box else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/-/static/app.css">
<style>{_WEB_STYLE}</style></head><body>
<header class="top"><strong><a href="/">{html.escape(archive)}</a></strong>{box}
<nav><a href="/ky_court">archive tables</a> · <a href="/ky_search">index tables</a> ·
<a href="/ky_court?sql=select+*+from+documents+limit+10">SQL</a></nav></header>
<main>{body}</main>{_WEB_UNFOLD}</body></html>""".encode("utf-8")


def _web_html(page: bytes, status: int = 200) -> WebResponse:
    return WebResponse(status, "text/html; charset=utf-8", page)


def _web_json(value: Any, status: int = 200) -> WebResponse:
    return WebResponse(status, "application/json; charset=utf-8",
                       json.dumps(value, indent=2, default=str).encode("utf-8"))


def _web_not_found(what: str, site: "ServedArchive | None" = None) -> WebResponse:
    archive = site.words.title if site is not None else ARCHIVE_TITLES[DEFAULT_COURT_SYSTEM]
    return _web_html(_web_page("Not found", f'<p class="problem">{html.escape(what)}</p>', archive=archive), 404)


def search_json(site: ServedArchive, request: WebSearch) -> WebResponse:
    """/search.json: the CLI's `search --json` object."""
    try:
        return _web_json(request.run(site).as_json())
    except Exception as exc:     # an index that cannot be read: say so as JSON
        return _web_json({"error": str(exc)}, 503)


def search_page(site: ServedArchive, request: WebSearch) -> WebResponse:
    """The search page of `request` (with no query: the newest documents under its filters)."""
    try:
        result = request.run(site)
        filters = result.filters
        facets = site.search_index().facets(parse_query(request.q), SearchFilters(**filters))
    except Exception as exc:     # an index that cannot be read: say so, keep the tables reachable
        return _web_html(_web_page("Search", f'<p class="problem">{html.escape(str(exc))}</p>',
                                   archive=site.words.title), 503)
    body = [_web_search_form(request, filters)]
    if result.notes:
        body.append(f'<p class="read-as">Read as: <code>{html.escape(result.read_as or "(nothing to match)")}</code>'
                    f' — {html.escape("; ".join(result.notes))}.</p>')
    body += [f'<p class="read-as">{html.escape(line.strip())}</p>' for line in result.not_public_lines()]
    body.append(f'<div class="layout"><section class="hits">{_web_count(request, result)}')
    body += [_web_hit(hit, request) for hit in result.hits]
    body.append(_web_pager(request, result))
    body.append(f'</section><aside class="facets"><details class="unfold"><summary>Narrow by court, year, kind'
                f'</summary>{_web_facets(request, facets, site.words.courts)}</details></aside></div>')
    title = f"{request.q} - search" if request.q else "Search the archive"
    return _web_html(_web_page(title, "".join(body), header_box=False, archive=site.words.title))


def _web_search_form(request: WebSearch, filters: dict[str, Any]) -> str:
    def options(name: str, choices: list[tuple[str, str]], current: str) -> str:
        if current and current not in [value for value, _ in choices]:
            choices = choices + [(current, current)]
        return (f'<select name="{name}">' + "".join(
            f'<option value="{html.escape(value)}"{" selected" if value == current else ""}>{html.escape(label)}</option>'
            for value, label in choices) + "</select>")
    court = options("court", [("", "any"), ("CA", "Court of Appeals (CA)"), ("SC", "Supreme Court (SC)")], request.court)
    kind = options("type", [("", "any")] + [(name, name) for name in SEARCH_KINDS], request.kind)
    sort = options("sort", [(name, label) for name, label in _WEB_SORT_NAMES.items()], request.sort)
    chosen = [f"{_WEB_FILTER_NAMES.get(name, name)} {value}" for name, value in filters.items()] + (
        [_WEB_SORT_NAMES[request.sort]] if request.sort != "relevance" else [])
    summary = "Filters and order" + (f": {', '.join(chosen)}" if chosen else "")
    status = (f'<input type="hidden" name="publication_status" value="{html.escape(request.publication_status)}">'
              if request.publication_status else "")
    return f"""<form class="search" action="/" method="get">
<div class="box"><input type="search" name="q" value="{html.escape(request.q)}" aria-label="search the archive"
 placeholder='words, "an exact phrase", -leave out, OR, prefix*, 2019-CA-0012'><button type="submit">Search</button></div>
<details class="filters unfold"><summary>{html.escape(summary)}</summary><div class="fields">
<label>Court {court}</label><label>Type {kind}</label>
<label>Case year (the case number's) <input type="number" name="year" min="1900" max="2100" step="1"
 value="{request.year or ''}" placeholder="e.g. 2019"></label>
<label>Filed from <input type="date" name="after" value="{html.escape(request.after)}"></label>
<label>Filed to <input type="date" name="before" value="{html.escape(request.before)}"></label>
<label>Sort {sort}</label>{status}<button type="submit">Apply</button></div></details></form>"""


def _web_count(request: WebSearch, result: SearchResult) -> str:
    what = "documents match" if request.q.strip() else "documents"
    if not result.total:
        return f"<p><strong>No documents match</strong>{' under these filters' if result.filters else ''}.</p>"
    if result.hits:
        return (f"<p><strong>{result.first:,}–{result.last:,} of {result.total:,}</strong> {what}"
                f"{'' if result.sort == 'relevance' else ', ' + _WEB_SORT_NAMES[result.sort]}.</p>")
    return f"<p>{result.total:,} {what}; {html.escape(page_past_last(result))}.</p>"


def _web_pager(request: WebSearch, result: SearchResult) -> str:
    if (result.pages <= 1 and result.page == 1) or not result.total:
        return ""
    if result.page > result.pages:        # past the last: the way back to it (_web_count says where it is)
        return (f'<nav class="pager"><a rel="prev" href="{html.escape(request.link(page=result.pages))}">'
                f'← the last page, {result.pages}</a></nav>')
    parts = []
    if result.page > 1:
        parts.append(f'<a rel="prev" href="{html.escape(request.link(page=result.page - 1))}">'
                     '← previous</a>')
    parts.append(f"<span>page {result.page} of {result.pages}</span>")
    if result.page < result.pages:
        parts.append(f'<a rel="next" href="{html.escape(request.link(page=result.page + 1))}">next →</a>')
    return f'<nav class="pager">{"".join(parts)}</nav>'


def _web_facets(request: WebSearch, facets: dict[str, list[tuple[Any, int]]], courts: dict[str, str]) -> str:
    chosen = {"court_code": request.court, "year": request.year, "kinds": request.kind,
              "publication_status": request.publication_status}
    parameter = {"court_code": "court", "kinds": "type"}
    parts = []
    for column, label in WEB_FACETS:
        items = []
        values = facets.get(column, [])
        if column == "year":     # years in order, newest first; the others by how many match
            values = sorted(values, key=lambda item: -int(item[0]))
        for value, count in values[:40]:
            name = courts.get(value, value) if column == "court_code" else value
            if chosen[column] not in (None, "") and str(chosen[column]).lower() == str(value).lower():
                link = request.link(**{parameter.get(column, column): None})
                items.append(f'<li class="chosen">{html.escape(str(name))} ({count:,}) '
                             f'<a href="{html.escape(link)}" title="remove this filter">×</a></li>')
            else:
                link = request.link(**{parameter.get(column, column): value})
                items.append(f'<li><a href="{html.escape(link)}">{html.escape(str(name))}</a> ({count:,})</li>')
        parts.append(f"<h3>{label}</h3><ul>{''.join(items) or '<li>none</li>'}</ul>")
    return "".join(parts)


def _web_hit(hit: dict[str, Any], request: WebSearch) -> str:
    query_string = request.query_string()
    document = f"/document/{urllib.parse.quote(hit['document_id'])}" + (f"?{query_string}" if query_string else "")
    details = [hit.get("court_code"), f"filed {hit['filed_date'][:10]}" if hit.get("filed_date") else None,
               hit.get("kind"), hit.get("publication_status"), hit.get("description")]
    pdf = f' · <a href="/{pdf_store_name(hit["sha256"])}">PDF</a>' if hit.get("sha256") else ""
    return (f'<div class="hit"><h2><a href="{html.escape(document)}">{html.escape(hit.get("case_number") or "?")}'
            f' · {html.escape(hit.get("case_title") or "untitled")}</a></h2>'
            f'<div class="meta">{" · ".join(html.escape(str(part)) for part in details if part)}{pdf}</div>'
            f'<div class="snippet">{snippet_html(hit.get("snippet"), hit.get("snippet_marks") or [])}</div></div>')


def document_page(site: ServedArchive, document_id: str, request: WebSearch = WebSearch()) -> WebResponse:
    """Everything the archive knows of one document, with its text; reached from a search
    (`request`), a link back to its results and the search's words marked in the text."""
    db = Database.open_readonly(site.folder / DB_FILENAME)
    try:
        conn = db.conn
        rows = rows_where(conn, "documents", "document_id", document_id, limit=1)
        if not rows:
            return _web_not_found(f"no document {document_id} in this archive", site)
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
    searched = bool(request.query_string(page=None))
    keep = request.query_string()
    sha = row.get("sha256")
    has_pdf = bool(sha) and row.get("status") in ("downloaded", "extracted")
    # The court's own text is shown on the page, not served as a file of its own.
    text_link = text_name if text_name and web_route(f"/{text_name}") is not None else None
    title = f"{row.get('case_number') or '?'} · {row.get('case_title') or 'untitled'}"
    reason = not_public_reason(row.get("access_state"))
    links = [f'<a href="/{pdf_store_name(sha)}">PDF</a>' if has_pdf else
             f"no PDF: not public at the court ({reason})" if reason else "no PDF in the archive"]
    if text_link:
        links.append(f'<a href="/{text_link}">text</a>')
    links.append(f'<a href="/ky_court/documents/{urllib.parse.quote(document_id)}">row in Datasette</a>')
    found = derived[0] if derived else {}
    summary = [row.get("court"), f"filed {(row.get('filed_date') or '')[:10]}" if row.get("filed_date") else None,
               row.get("description"), found.get("kind"), found.get("publication_status"),
               f"rendered {found['rendered_date']}" if found.get("rendered_date") else None,
               f"{row['pages']} page{'s' if row['pages'] != 1 else ''}" if row.get("pages") else None,
               withdrawn_note(row), not_public_note(row)]
    body = []
    if searched:
        body.append(f'<p><a href="{html.escape(request.link(page=request.page if request.page > 1 else None))}">'
                    f'← back to the results</a>{" for <strong>" + html.escape(request.q) + "</strong>" if request.q else ""}'
                    '</p>')
    body += [f"<h1>{html.escape(title)}</h1>",
             f'<p>{" · ".join(html.escape(str(part)) for part in summary if part)}</p><p>{" · ".join(links)}</p>']
    body.append(f"<h2>Its case: {html.escape(row.get('case_number') or '?')}</h2>")
    if cases:
        body.append(_web_fields(cases[0]))
    case_documents.sort(key=lambda other: ((other.get("filed_date") or "9999"), other["document_id"]))
    body.append("<ul>" + "".join(
        f'<li>{html.escape((other.get("filed_date") or "")[:10])} · '
        f'<a href="/document/{urllib.parse.quote(other["document_id"])}{"?" + keep if keep else ""}">'
        f'{html.escape(other.get("description") or "?")}</a>'
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
        shown = composed(text[:WEB_TEXT_CHARS])
        places = text_places(shown, query_marks(parse_query(request.q)), limit=None,
                             matches=WEB_TEXT_MARKS) if request.q else []
        if request.q:
            body.append(f'<p>{len(places):,} place{"s" if len(places) != 1 else ""} of the search\'s words marked'
                        + (' (<a href="#mark-1">the first</a>)' if places else "") + ".</p>")
        more = (f'<p>The first {WEB_TEXT_CHARS:,} of {len(text):,} characters'
                + (f'; <a href="/{text_link}">the whole text</a>' if text_link else "") + ".</p>"
                if len(text) > WEB_TEXT_CHARS else "")
        body.append(f'{more}<pre class="text">{_web_marked(shown, places)}</pre>')
    body.append("<h2>Everything the archive records of it</h2><details><summary>the document's row</summary>"
                f"{_web_fields(row)}</details>")
    if found:
        body.append(f"<details><summary>what derive found</summary>{_web_fields(found)}</details>")
    return _web_html(_web_page(title, "".join(body), query=request.q, archive=site.words.title))


def not_public_note(row: dict[str, Any]) -> str:
    """"not public at the court: registration (unavailable)" for a document the court does not serve to the
    public ('' otherwise)."""
    state = row.get("access_state")
    return f"not public at the court: {not_public_reason(state)} ({state})" if state else ""


def _web_marked(text: str, places: list[tuple[int, int, int]]) -> str:
    """`text` as HTML, each place a <mark> with an id (mark-1, mark-2, ...)."""
    parts, at = [], 0
    for number, (start, end, _) in enumerate(places, 1):
        if start < at:
            continue
        parts += [html.escape(text[at:start]), f'<mark id="mark-{number}">', html.escape(text[start:end]), "</mark>"]
        at = end
    return "".join(parts) + html.escape(text[at:])


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
        return _web_not_found(f"{name} is no file of this archive", site)
    headers = [("content-disposition", f'inline; filename="{Path(name).name}"'),
               ("x-content-type-options", "nosniff")]
    local = site.workspace / name
    if local.is_file():
        return WebResponse(200, content_type, file=local, headers=headers)
    data = _web_store_read(site, name)
    if data is None:
        return _web_not_found(f"{name} is in neither the workspace nor the store", site)
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
        if page == "search_json":
            return search_json(self.site, WebSearch.from_query_string(query_string))
        if page == "document":
            return document_page(self.site, parameters["document_id"], WebSearch.from_query_string(query_string))
        if page == "changes":
            return _web_html(_web_page(*changes_page(self.site.folder, query_string), archive=self.site.words.title))
        if page == "feed":
            return WebResponse(*feed_answer(self.site.folder, query_string))
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
