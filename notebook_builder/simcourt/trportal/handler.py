"""What the simulated TR Portal answers: the endpoints of README §2.2 a full archive needs, paged as §2.3 says.

Guarantees (paths under the API root; numbers as the README's table):
- #1 `GET /courts`; #2 `/courts/cms/cases` (`caseHeader.filedDateFrom`/`To`: ISO instants with an
  offset, compared as instants, both ends inclusive; `caseHeader.courtID` a court GUID;
  `caseHeader.caseNumber` with `caseHeader.caseNumberSearchType` 10461 starts with, 10462 exact (the
  default), 10463 contains; `caseHeader.caseTitle` contained; `sort=caseHeader.filedDate,asc|desc`,
  by filing otherwise); #3 `/courts/{court}/cms/cases/{case}` (unenveloped); #4 `.../parties`; #5
  `.../docketentries` (`sort=docketEntryHeader.filedDate,desc` reverses); #6 `.../ticklers` (none);
  #7 `/courts/cms/docketentrydocumentsaccess` (by `caseHeader.caseInstanceUUID`,
  `docketEntryHeader.docketEntryUUID` or `documentLinkUUID`, one of them required: 400 without);
  #8 `/courts/cms/docketentrydocuments` (`docketEntryHeader.docketEntryTypeID`,
  `caseHeader.courtID`, `sort=docketEntryHeader.filedDate,asc|desc`, oldest first without; with `date_filters`,
  `docketEntryHeader.docketEntryFiledDateFrom`/`To`); #9 `/courts/{court}/cms/case/{case}/
  docketentrydocuments/{document}`: a VIEWABLE document is 200 `application/pdf` with its
  Content-Length, any other a 302 to the portal host (a purchase page for PURCHASABLE, the cart for
  IN_CART, a sign-in page otherwise); #12 `/courts/cms/publications` (`courtID` GUID,
  `sort=publicationDate,asc|desc`, newest first by default; with `date_filters`,
  `publicationDateFrom`/`To`); #13 `/courts/{court}/cms/publication/{publication}`. A court, case,
  entry or document that is not there, or not of the court in the path, is 404; so is any other path.
- Lists are paged (§2.3): 0-based `page`, `size` (20 by default) cut to `max_size`, or answered at
  `page_size`; `{"_embedded": {"results": [...]}, "page": {size, totalElements, totalPages,
  number}}`, with no `_embedded` on an empty page or one past the end; only the first `window` rows
  are reached (a page across it is cut there), and a page that begins past it answers as
  `window_answer` says. Errors are Spring's `{timestamp, status, error,
  message, path}`.
- UUIDs are matched in any letter case, in paths and filters. Checks, in order: `down`; `Referer`
  (403) when required; `Accept: application/json` (406) on JSON endpoints; then `fault_rate`.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import random
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, urlsplit

from ..downloads import DownloadAnswers
from ..controls import PLANS_PATH, STATS_PATH
from .systems import IN_CART, PURCHASABLE, VIEWABLE, instant_seconds

DEFAULT_SIZE = 20
MATCH_MODES = {"10461": "starts", "10462": "exact", "10463": "contains", "300054": "contains",
               "300055": "contains"}
CASE_RESOURCES = {"parties": "parties", "docketentries": "docket_entries", "ticklers": "ticklers"}
REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
           409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
           503: "Service Unavailable"}


class BadRequest(ValueError):
    """A request the API refuses with 400 (the message says why)."""


def endpoint_of(parts: list[str]) -> str:
    """The endpoint a path (split on "/", after the API root) names: the keys of `endpoint_requests`."""
    if parts[:2] != ["", "courts"]:
        return "other"
    if len(parts) == 2:
        return "courts"
    if len(parts) == 4 and parts[2] == "cms":
        return {"cases": "case_search", "docketentrydocumentsaccess": "documents_access",
                "docketentrydocuments": "document_search", "publications": "publications"}.get(parts[3], "other")
    if len(parts) >= 6 and parts[3] == "cms":
        if parts[4] == "cases" and len(parts) == 6:
            return "case"
        if parts[4] == "cases" and len(parts) == 7:
            return CASE_RESOURCES.get(parts[6], "other")
        if parts[4] == "case" and len(parts) == 8 and parts[6] == "docketentrydocuments":
            return "download"
        if parts[4] == "publication" and len(parts) == 6:
            return "publication"
    return "other"


class APIHandler(DownloadAnswers, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nginx"
    timeout = 60

    def log_message(self, format, *args) -> None:
        pass

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._guarded(lambda portal: self._answer(portal, head=False))

    def do_HEAD(self) -> None:
        self._guarded(lambda portal: self._answer(portal, head=True))

    def do_POST(self) -> None:
        self._guarded(self._answer_post)

    def _guarded(self, answer: Callable) -> None:
        portal = self.server.portal
        portal.answering(+1)
        try:
            answer(portal)
        finally:
            portal.answering(-1)

    # ---------------------------------------------------------- the simulation's own

    def _answer_post(self, portal) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        answer = portal.control_answer(path, url.query)
        if answer is not None:
            return self._json(*answer, False)
        if path.startswith(portal.api_path + "/courts"):
            return self._error(405, "Request method 'POST' is not supported", False)
        return self._error(404, "No static resource", False)

    # -------------------------------------------------------------- routing

    def _answer(self, portal, head: bool) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        if path == STATS_PATH:
            return self._json(200, portal.stats(), head)
        if path == PLANS_PATH:
            return self._json(200, portal.plans, head)
        if portal.api_path and not (path + "/").startswith(portal.api_path + "/"):
            return self._error(404, "No static resource", head)
        parts = path[len(portal.api_path):].split("/")
        endpoint = endpoint_of(parts)
        query = parse_qs(url.query, keep_blank_values=True)
        portal.count(endpoint, self._item(portal, endpoint, parts, query))
        if portal.down == "reset":
            portal.note_fault("down reset")
            return self._reset()
        if portal.down in ("503", "403"):
            portal.note_fault(f"down {portal.down}")
            page = {"503": b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>",
                    "403": b"<html><body><h1>403 Forbidden</h1><p>Access from your location is denied.</p>"
                           b"</body></html>"}
            return self._send(int(portal.down), page[portal.down], "text/html", head)
        if portal.referer_required and not self.headers.get("Referer", "").strip():
            return self._error(403, "Access denied", head)
        if endpoint != "download" and portal.accept_required \
                and "application/json" not in self.headers.get("Accept", "").lower():
            return self._error(406, "Could not find acceptable representation", head)
        if self._fault(portal, endpoint, parts, head):
            return
        try:
            return self._dispatch(portal, endpoint, parts, query, head)
        except BadRequest as exc:
            return self._error(400, str(exc), head)

    @staticmethod
    def _item(portal, endpoint: str, parts: list[str], query: dict) -> int | None:
        """The request log's item: a case, a document or a publication's day, where the request names one."""
        corpus = portal.corpus
        if endpoint in ("case", "parties", "docket_entries", "ticklers"):
            return corpus.find("case", parts[5])
        if endpoint == "download":
            return corpus.find("document", parts[7])
        if endpoint == "documents_access":
            return corpus.find("case", query.get("caseHeader.caseInstanceUUID", [""])[0])
        return None

    def _dispatch(self, portal, endpoint: str, parts: list[str], query: dict, head: bool) -> None:
        corpus, shapes = portal.corpus, portal.shapes
        if endpoint == "courts":
            return self._paged(portal, query, range(len(portal.system.courts)), shapes.court_row, head)
        if endpoint == "case_search":
            return self._paged(portal, query, self._case_search(portal, query), shapes.case_search_row, head)
        if endpoint == "documents_access":
            return self._paged(portal, query, self._documents_access(portal, query), shapes.access_row, head)
        if endpoint == "document_search":
            return self._paged(portal, query, self._document_search(portal, query), shapes.document_search_row, head)
        if endpoint == "publications":
            found = self._publications(portal, query)
            return self._paged(portal, query, found, lambda pub: shapes.publication_row(*pub), head)
        if endpoint == "publication":
            court, found = corpus.find_court(parts[2]), corpus.find_publication(parts[5])
            if court is None or found is None or found[0] != court:
                return self._error(404, "Publication not found", head)
            return self._json(200, shapes.publication_detail(*found), head)
        if endpoint == "other":
            return self._error(404, "No static resource", head)
        case = self._case_in_court(portal, parts[2], parts[5])
        if case is None:
            return self._error(404, "Case not found", head)
        if endpoint == "case":
            return self._json(200, shapes.case_detail(case), head)
        if endpoint == "parties":
            return self._paged(portal, query, shapes.parties(case), lambda row: row, head)
        if endpoint == "ticklers":
            return self._paged(portal, query, [], lambda row: row, head)
        if endpoint == "docket_entries":
            entries = corpus.case_entries(case)
            if _descending(query, "docketEntryHeader.filedDate"):
                entries = entries[::-1]
            return self._paged(portal, query, entries, shapes.docket_entry, head)
        return self._document(portal, case, parts[7], head)

    @staticmethod
    def _case_in_court(portal, court_guid: str, case_uuid: str) -> int | None:
        corpus = portal.corpus
        court, case = corpus.find_court(court_guid), corpus.find("case", case_uuid)
        return case if case is not None and court is not None and corpus.case_court[case] == court else None

    # ---------------------------------------------------------- the searches

    @staticmethod
    def _court_filter(portal, query: dict, name: str) -> tuple[bool, int | None]:
        """(asked, court index) of a court GUID filter; an unknown GUID is asked and None."""
        value = _value(query, name)
        return (False, None) if not value else (True, portal.corpus.find_court(value))

    def _case_search(self, portal, query: dict) -> Sequence[int]:
        corpus = portal.corpus
        asked, court = self._court_filter(portal, query, "caseHeader.courtID")
        if asked and court is None:
            return []
        low, high = _instant(query, "caseHeader.filedDateFrom"), _instant(query, "caseHeader.filedDateTo")
        cases: Sequence[int] = corpus.cases_filed_between(court, low, high)
        number = _value(query, "caseHeader.caseNumber").upper()
        if number:
            mode = MATCH_MODES.get(_value(query, "caseHeader.caseNumberSearchType") or "10462")
            if mode is None:
                raise BadRequest("Unknown caseHeader.caseNumberSearchType")
            cases = [case for case in cases if _matches(corpus.case_numbers[case].upper(), number, mode)]
        title = _value(query, "caseHeader.caseTitle").upper()
        if title:
            mode = MATCH_MODES.get(_value(query, "caseHeader.caseTitleSearchType") or "10463", "contains")
            cases = [case for case in cases if _matches(corpus.case_title(case).upper(), title, mode)]
        return cases[::-1] if _descending(query, "caseHeader.filedDate") else cases

    def _documents_access(self, portal, query: dict) -> list[int]:
        corpus = portal.corpus
        asked = {kind: _value(query, name) for kind, name in (("case", "caseHeader.caseInstanceUUID"),
                                                              ("entry", "docketEntryHeader.docketEntryUUID"),
                                                              ("document", "documentLinkUUID")) if _value(query, name)}
        if not asked:
            raise BadRequest("caseHeader.caseInstanceUUID is required")
        found = {kind: corpus.find(kind, text) for kind, text in asked.items()}
        if None in found.values():
            return []
        if "case" in found:
            docs = corpus.case_docs(found["case"])
        else:
            docs = list(corpus.entry_docs(found["entry"])) if "entry" in found else [found["document"]]
        docs = [doc for doc in docs if found.get("entry", corpus.doc_entry[doc]) == corpus.doc_entry[doc]
                and found.get("document", doc) == doc]
        court_asked, court = self._court_filter(portal, query, "caseHeader.courtID")
        if court_asked:
            docs = [doc for doc in docs if corpus.case_court[corpus.entry_case[corpus.doc_entry[doc]]] == court]
        if "documentName,asc" in query.get("sort", []):
            docs = sorted(docs, key=lambda doc: (portal.shapes.document_name(doc), doc))
        return docs

    def _document_search(self, portal, query: dict) -> Sequence[int]:
        corpus = portal.corpus
        type_text = _value(query, "docketEntryHeader.docketEntryTypeID")
        try:
            type_id = int(type_text) if type_text else None
        except ValueError:
            raise BadRequest("docketEntryHeader.docketEntryTypeID must be a number") from None
        asked, court = self._court_filter(portal, query, "caseHeader.courtID")
        if asked and court is None:
            return []
        docs = corpus.docs_by_filing(type_id, court)
        if portal.date_filters:
            low = _instant(query, "docketEntryHeader.docketEntryFiledDateFrom")
            high = _instant(query, "docketEntryHeader.docketEntryFiledDateTo")
            if low is not None or high is not None:
                docs = [doc for doc in docs if _within(corpus.entry_instant(corpus.doc_entry[doc]), low, high)]
        return docs[::-1] if _descending(query, "docketEntryHeader.filedDate") else docs

    def _publications(self, portal, query: dict) -> list[tuple]:
        asked, court = self._court_filter(portal, query, "courtID")
        if asked and court is None:
            return []
        found = [pub for pub in portal.corpus.publications() if not asked or pub[0] == court]
        if portal.date_filters:
            low, high = _instant(query, "publicationDateFrom"), _instant(query, "publicationDateTo")
            if low is not None or high is not None:
                system = portal.system
                found = [pub for pub in found if _within(system.posix_seconds(pub[1], 43200), low, high)]
        ascending = "publicationDate,asc" in query.get("sort", [])
        return found if ascending else found[::-1]

    # ------------------------------------------------------------ downloads

    def _document(self, portal, case: int, document_uuid: str, head: bool) -> None:
        corpus = portal.corpus
        doc = corpus.find("document", document_uuid)
        if doc is None or corpus.entry_case[corpus.doc_entry[doc]] != case:
            return self._error(404, "Document not found", head)
        state = corpus.doc_state[doc]
        if state != VIEWABLE:
            court_guid, case_uuid = corpus.court_guid(corpus.case_court[case]), corpus.uuid("case", case)
            document = corpus.uuid("document", doc)
            if state == PURCHASABLE:
                where = f"/portal/court/{court_guid}/case/{case_uuid}/purchase?documentLinkUUID={document}"
            elif state == IN_CART:
                where = "/portal/cart"
            else:
                where = "/portal/login?returnUrl=" + quote(f"/court/{court_guid}/case/{case_uuid}/document/{document}",
                                                           safe="")
            page = b'<html><body>Redirecting to <a href="%s">the portal</a></body></html>' % where.encode()
            return self._send(302, page, "text/html", head, {"Location": portal.portal_url + where})
        data = portal.pdf(doc)
        name = portal.shapes.document_name(doc).replace('"', "")
        self._send(200, data, "application/pdf", head, {"Content-Disposition": f'attachment; filename="{name}.pdf"'})
        if not head:
            with portal._lock:
                portal.downloads[doc] += 1
            self._count(portal, doc, len(data))

    # -------------------------------------------------------------- faults

    def _fault(self, portal, endpoint: str, parts: list[str], head: bool) -> bool:
        """At `fault_rate`, one misbehaviour; True when it answered. A request back before its
        Retry-After is refused again (429)."""
        key = ("download", parts[7].lower()) if endpoint == "download" else "json"
        if portal._too_early(key):
            portal.note_fault("429 (early)")
            self._error(429, "Too many requests", head, portal._retry_after(key))
            return True
        if portal.fault_rate <= 0:
            return False
        with portal._lock:
            number = portal.requests
        roll = random.Random(f"trportal:{portal.seed}:fault:{number}")
        if roll.random() >= portal.fault_rate:
            return False
        kinds = ("500", "503", "429", "reset", "truncated") + (("html",) if endpoint == "download" else ())
        kind = kinds[roll.randrange(len(kinds))]
        if head and kind in ("truncated", "reset"):
            kind = "503"
        portal.note_fault(kind)
        if kind in ("500", "503"):
            self._error(int(kind), "Simulated failure", head)
        elif kind == "429":
            self._error(429, "Too many requests", head, portal._retry_after(key))
        elif kind == "reset":
            self._reset()
        elif kind == "html":
            self._send(200, b"<!DOCTYPE html><html><body><h2>Sorry, something went wrong.</h2></body></html>",
                       "text/html; charset=utf-8", head)
        else:
            body = b'{"_embedded":{"results":[' if endpoint != "download" else b"%PDF-1.4\n%truncated"
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf" if endpoint == "download" else "application/json")
            self.send_header("Content-Length", str(len(body) + 4096))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        return True

    # -------------------------------------------------------------- answers

    def _paged(self, portal, query: dict, items: Sequence, row: Callable, head: bool) -> None:
        try:
            page = int(_value(query, "page") or 0)
            size = int(_value(query, "size") or DEFAULT_SIZE)
        except ValueError:
            raise BadRequest("page and size must be numbers") from None
        if page < 0 or size < 1:
            raise BadRequest("page must be >= 0 and size >= 1")
        size = portal.page_size or min(size, portal.max_size)
        total = len(items)
        info = {"size": size, "totalElements": total, "totalPages": -(-total // size), "number": page}
        if page * size >= portal.window:
            if portal.window_answer == "empty":
                return self._json(200, {"page": info}, head)
            return self._error(int(portal.window_answer), f"Result window is too large, from + size must be less "
                                                          f"than or equal to: [{portal.window}]", head)
        rows = [row(item) for item in items[page * size:min((page + 1) * size, portal.window)]]
        self._json(200, {"_embedded": {"results": rows}, "page": info} if rows else {"page": info}, head)

    def _json(self, status: int, payload, head: bool, headers: dict | None = None) -> None:
        self._send(status, json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode(),
                   "application/json", head, headers)

    def _error(self, status: int, message: str, head: bool, headers: dict | None = None) -> None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+00:00"
        self._json(status, {"timestamp": stamp, "status": status, "error": REASONS.get(status, "Error"),
                            "message": message, "path": urlsplit(self.path).path}, head, headers)


class PortalHandler(DownloadAnswers, BaseHTTPRequestHandler):
    """The portal host: every GET is a 200 HTML page (sign-in, purchase, cart, or the portal's home)."""
    protocol_version = "HTTP/1.1"
    server_version = "nginx"

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        kind = "purchase" if "/purchase" in path else "cart" if path.endswith("/cart") else \
            "login" if path.endswith("/login") else "home"
        self.server.portal.note_wall(kind)
        title = {"purchase": "Purchase Document", "cart": "Your Cart", "login": "Sign In",
                 "home": "Public Portal"}[kind]
        body = (f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{html.escape(title)}</h1>"
                f"<p>{html.escape(self.server.portal.system.state)} appellate courts: public portal.</p>"
                f"</body></html>").encode()
        self._send(200, body, "text/html; charset=utf-8", False)


def _value(query: dict, name: str) -> str:
    return query.get(name, [""])[0].strip()


def _instant(query: dict, name: str) -> float | None:
    value = _value(query, name)
    if not value:
        return None
    try:
        return instant_seconds(value)
    except ValueError:
        raise BadRequest(f"{name} must be an ISO date-time with an offset, not {value!r}") from None


def _within(seconds: float, low: float | None, high: float | None) -> bool:
    return (low is None or seconds >= low) and (high is None or seconds <= high)


def _descending(query: dict, field: str) -> bool:
    return any(value.replace(" ", "").lower() == f"{field.lower()},desc" for value in query.get("sort", []))


def _matches(text: str, wanted: str, mode: str) -> bool:
    if mode == "starts":
        return text.startswith(wanted)
    if mode == "exact":
        return text == wanted
    return wanted in text
