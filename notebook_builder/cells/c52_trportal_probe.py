"""Probe of a TR Portal court system: at most 10 requests, can the pipeline run against it?

Guarantees:
- `probe_trportal(cfg)` asks API_BASE once each: the court directory (`/courts`), a page of the
  case search by filed date, one case's docket entries and access list, the opinion feed's first
  page (the document search by opinion type, or the publications; none for a system without a
  feed), one document's download (a public one by c26 `document_state`: VIEWABLE, its entry not
  secured; a redirect to the wall is never followed), and, with CASE_DETAILS, the case's detail
  and parties: each paced and retried as the pipeline asks them (c31), within PROBE_MAX_REQUESTS.
  Each answer is checked against the fields the pipeline reads (TR_FIELDS_READ) in a c55
  `ProbeRow`; `ProbeReport.ok` is true exactly when the directory names the configured courts,
  the case search, the docket entries and the access list answer their fields, and the download
  answers a PDF. A request that fails (the court's refusal, a dropped connection, the breaker, a
  stop) is its row's FAIL, never raised. It writes nothing.

Knobs read: API_BASE, COURT_SYSTEM, FIRST_YEAR, LAST_YEAR, CASE_DETAILS, PACING* (the client's).
"""
from __future__ import annotations

import datetime as _dt
import zoneinfo
from typing import Any, Callable

import requests

from .c00_config import Config, CourtUnreachable, PermanentFetchError, RunClock, StopRequested, TransientFetchError
from .c25_court import ShapeProblem
from .c26_trportal import PATHS, CourtDirectory, docket_entry, document_state, instant_text, uuid_key
from .c30_client import SearchRefused
from .c31_court_client import PastWindow, TRPortalClient, court_client

TR_PROBE_MAX_REQUESTS = 10
TR_PROBE_ROWS = 5
# endpoint -> the keys the pipeline reads from the first row (dotted: nested)
TR_FIELDS_READ: dict[str, tuple[str, ...]] = {
    "courts": ("resourceID", "externalIdentifier", "displayName"),
    "case_search": ("caseHeader.caseInstanceUUID", "caseHeader.caseNumber", "caseHeader.courtID", "caseHeader.filedDate"),
    "docket_entries": ("docketEntryHeader.docketEntryUUID", "docketEntryHeader.filedDate",
                       "docketEntryHeader.docketEntryType", "docketEntryHeader.documentCount"),
    "access": ("documentLinkUUID", "docketEntryUUID", "userDocumentState", "documentName"),
    "document_search": ("documentLinkUUID", "docketEntryHeader.docketEntryTypeID", "caseHeader.caseInstanceUUID"),
    "publications": ("publicationUUID", "publicationDate"),
    "case": ("caseHeader.caseInstanceUUID", "caseHeader.caseNumber"),
    "parties": ("partyHeader.partyActorInstance",),
    "download": ("application/pdf",),
}
TR_NEEDED = ("courts", "case_search", "docket_entries", "access", "download")


def _tr_has(row: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(row, dict) or part not in row:
            return False
        row = row[part]
    return True


def _secured_entries(court, rows: list) -> set[str]:
    """The ids of the docket entries (c26 `docket_entry`) the court marks securedDocument."""
    secured = set()
    for raw in rows:
        try:
            entry = docket_entry(court, raw, "")
        except ShapeProblem:
            continue
        if entry["secured"]:
            secured.add(entry["docket_entry_id"])
    return secured


def probe_trportal(cfg: Config, *, session: requests.Session | None = None, court=None, report=None,
                   row_type=None):
    """The probe of the configured TR Portal court, or of `court` (see the module docstring);
    `report` and `row_type` are c55's ProbeReport and ProbeRow."""
    # One try a request: the probe's budget counts what the court is asked, and a retry is a request.
    client: TRPortalClient = court_client(cfg.replace(SEARCH_ATTEMPTS=1), RunClock(3600.0), session, court=court)
    court = client.court

    def answer(row, call: Callable[[], Any]) -> Any:
        """call()'s answer; None when it raised, the row saying why (the probe never raises for the
        court's answers, a dropped connection or a stop)."""
        started = client.answer_seconds       # the court's time to answer, the pacing pause apart
        try:
            return call()
        except (SearchRefused, PermanentFetchError) as exc:
            row.status, row.verdict, row.note = exc.http_status, "absent" if exc.http_status == 404 else "FAIL", str(exc)[:80]
        except (TransientFetchError, PastWindow, ShapeProblem, StopRequested) as exc:
            row.verdict, row.note = "FAIL", str(exc)[:80]
        except CourtUnreachable as exc:       # the breaker opened: every later row says so too
            row.verdict, row.note = "FAIL", f"court unreachable: {exc}"[:80]
        finally:
            row.seconds = client.answer_seconds - started
        return None

    def ask(endpoint: str, call: Callable[[], Any]) -> Any:
        row = row_type(endpoint, expected=TR_FIELDS_READ[endpoint])
        report.rows.append(row)
        if client.requests_sent >= TR_PROBE_MAX_REQUESTS:
            row.verdict, row.note = "skipped", "request budget spent"
            return None
        answered = answer(row, call)
        if answered is None:
            return None
        row.status = 200
        rows = answered.results if hasattr(answered, "results") else [answered]
        if not rows:
            row.verdict, row.note = "empty", "no rows: fields unchecked"
            return answered
        row.present = tuple(name for name in row.expected if _tr_has(rows[0], name))
        row.missing = tuple(name for name in row.expected if name not in row.present)
        row.verdict = "FAIL" if row.missing and endpoint in TR_NEEDED else "ok"
        return answered

    try:
        courts = ask("courts", lambda: client.page(PATHS["courts"], {}, 0, 500, "courts"))
        directory = CourtDirectory.from_rows(court, courts.results if courts else [])
        unknown = [code for code in court.courts if directory.by_code(code) is None]
        if courts is not None and unknown:
            report.rows[-1].verdict, report.rows[-1].note = "FAIL", f"courts not in the directory: {', '.join(unknown)}"
        zone = zoneinfo.ZoneInfo(court.time_zone)
        low = _dt.datetime.combine(_dt.date(cfg.FIRST_YEAR, 1, 1), _dt.time(), zone)
        high = _dt.datetime.combine(min(cfg.today(), _dt.date(cfg.last_year, 12, 31)), _dt.time(23, 59, 59, 999000), zone)
        cases = ask("case_search", lambda: client.page(PATHS["case_search"], {
            "caseHeader.filedDateFrom": instant_text(low), "caseHeader.filedDateTo": instant_text(high),
            "sort": "caseHeader.filedDate,desc"}, 0, TR_PROBE_ROWS, "case search"))
        header = (cases.results[0].get("caseHeader") or {}) if cases and cases.results else {}
        found = directory.of_header(court, header) if header else None
        case_path = PATHS["case"].format(court=found.guid, case=header["caseInstanceUUID"]) if found else None
        documents = []
        if case_path:
            entries = ask("docket_entries", lambda: client.page(case_path + "/docketentries", {}, 0, 500,
                                                                "docket entries"))
            access = ask("access", lambda: client.page(PATHS["access"], {
                "caseHeader.caseInstanceUUID": header["caseInstanceUUID"]}, 0, 500, "access list"))
            secured = _secured_entries(court, entries.results if entries else [])
            documents = [row for row in (access.results if access else []) if isinstance(row, dict)
                         and document_state(row.get("userDocumentState"),
                                            uuid_key(row.get("docketEntryUUID")) in secured) is None]
        if court.opinions == "document_search":
            ask("document_search", lambda: client.page(PATHS["document_search"], {
                "docketEntryHeader.docketEntryTypeID": court.opinion_types[0], "sort": "docketEntryHeader.filedDate,desc"},
                0, TR_PROBE_ROWS, "opinion feed"))
        elif court.opinions == "publications":
            ask("publications", lambda: client.page(PATHS["publications"], {"sort": "publicationDate,desc"}, 0,
                                                    TR_PROBE_ROWS, "publications"))
        row = row_type("download", expected=TR_FIELDS_READ["download"])
        report.rows.append(row)
        if documents and found:
            path = PATHS["download"].format(court=found.guid, case=header["caseInstanceUUID"],
                                            document=documents[0]["documentLinkUUID"])
            response = answer(row, lambda: client.download_response("", url=client.base + path))
            if response is not None:
                row.status = response.status_code
                kind = response.headers.get("Content-Type", "")
                response.close()
                pdf = response.status_code == 200 and "application/pdf" in kind
                row.present, row.missing = (("application/pdf",), ()) if pdf else ((), ("application/pdf",))
                row.verdict = "ok" if pdf else "restricted" if 300 <= response.status_code < 400 else "FAIL"
                if row.verdict == "restricted":
                    row.note = "the court's wall for a document it lists as viewable"
        else:
            row.verdict, row.note = "skipped", "no viewable document in the case asked"
        if case_path and cfg.CASE_DETAILS:
            ask("case", lambda: client.get_object(case_path, "case detail"))
            ask("parties", lambda: client.page(case_path + "/parties", {}, 0, 100, "parties"))
    finally:
        report.requests = client.requests_sent
        report.latency_seconds = client.observed_latency()
        client.close()
    verdicts = {row.endpoint: row.verdict for row in report.rows}
    report.strategy, report.why = "cases", f"{court.name}: TR Portal's case search, docket entries and access lists"
    report.download_path = "api" if verdicts.get("download") == "ok" else None
    report.ok = all(verdicts.get(name) in ("ok", "empty") if name == "access" else verdicts.get(name) == "ok"
                    or (name == "download" and verdicts.get(name) == "skipped") for name in TR_NEEDED)
    return report
