"""Probe: can the pipeline run against this court? At most 10 requests, one per endpoint.

Guarantees:
- `probe(cfg)` asks API_BASE once per endpoint the strategies need (document search, case search,
  a case's docket entries, one entry's file list, the case's parties and lower courts, the opinion
  search, the case search for last year's ADMIN numbers, one download by each of the court's
  download paths), each paced like a search and retried at most once, within
  PROBE_MAX_REQUESTS requests. Each answer is checked against the fields the pipeline reads (c25
  FIELDS_READ): a row per endpoint with its HTTP status, latency, the fields expected / present /
  missing and a verdict. Lists are asked as the pipeline asks them; a list the court pages, or one
  of exactly SUSPICIOUS_LIST_SIZE rows nothing says is whole, is a warning in its row.
- The strategy is DISCOVERY's, or for auto the one discovery would choose (c25 `choose_strategy`).
  `ProbeReport.ok` is true exactly when every endpoint that strategy needs answered with its
  required fields (c25 FIELDS_REQUIRED; a missing metadata field is listed, not fatal); parties,
  lower courts, the opinion search and the ADMIN prefix only warn. The download can run when
  either path answers a PDF, and the report names the one it will use.
- The court is COURT_SYSTEM's (c27), probed by its API family's probe (PROBES: a TR Portal court
  system's is c52's, into the same report). What is not known of a C-Track Public Access court
  (its `unknowns`, c25 PROBE_UNKNOWNS) the probe answers
  under the table (`answers`): whether it needs x-ctrack-excludeselflinks (the case search asked
  once without it: one request more), whether its documents download anonymously (the download
  rows), whether its case numbers take the configured form (the case search's rows). A list of
  lists (Delaware County's parties) is checked by its elements.
- Politeness by evidence: the table ends with the requests sent, the latency observed and the
  projected hours of a whole first crawl (FULL_CRAWL_DOCUMENTS documents at the strategy's
  requests a document) at the current pacing. It writes nothing.

Knobs read: COURT_SYSTEM, API_BASE, DISCOVERY, CASE_DETAILS, FIRST_YEAR, LAST_YEAR, HTTP_TIMEOUT, PACING, PACING_SEARCH,
PACING_DL.
"""
from __future__ import annotations

import datetime as _dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import requests

from .c00_config import Config, RunClock
from .c25_court import (FIELDS_READ, FIELDS_REQUIRED, CTrackCourt, choose_strategy, document_id_of,
                        list_elements, opinion_windows)
from .c27_court_systems import court_of_config
from .c30_client import LIST_MAX_RESULTS, SUSPICIOUS_LIST_SIZE, CourtClient, classify_http_status, projected_hours
from .c52_trportal_probe import probe_trportal

log_probe = logging.getLogger("kycourt.probe")

PROBE_MAX_REQUESTS = 10
PROBE_ROWS = 5
NEEDED = {"documents": ("document_search", "download"),
          "cases": ("case_search", "docket_entries", "entry_documents", "download")}
# Download verdicts that show the path answers (a 5xx or a restricted document is that document's).
DOWNLOAD_ANSWERS = ("ok", "transient", "restricted")
# A whole first crawl, for the projection: the record's documents, and each strategy's requests a
# document during discovery (bench/discover.py: the document search and the case walk to
# convergence, parties and lower courts included); each document then costs one download.
FULL_CRAWL_DOCUMENTS = 98_724
DISCOVERY_REQUESTS_PER_DOCUMENT = {"documents": 0.02, "cases": 2.5}


@dataclass
class ProbeRow:
    endpoint: str
    status: int | None = None         # HTTP status, None when no answer (or not asked)
    seconds: float | None = None
    expected: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    verdict: str = "skipped"   # ok, absent (404), FAIL, empty (no rows), resolvable (rows are docket
                               # entries), transient, restricted (download), skipped
    note: str = ""


@dataclass
class ProbeReport:
    rows: list[ProbeRow] = field(default_factory=list)
    strategy: str = ""
    why: str = ""
    requests: int = 0
    ok: bool = False
    download_path: str | None = None     # the court's download path that answered a PDF, if one did
    latency_seconds: float = 0.0         # mean time to an answer's headers
    projected_hours: float | None = None # a whole first crawl at the current pacing
    answers: list[str] = field(default_factory=list)   # what was unknown of the court, as the probe found it

    def table(self) -> str:
        head = ("endpoint", "HTTP", "ms", "expected", "present", "missing", "verdict")
        lines = [head]
        for row in self.rows:
            lines.append((row.endpoint, "-" if row.status is None else str(row.status),
                          "-" if row.seconds is None else f"{row.seconds * 1000:.0f}",
                          str(len(row.expected)), str(len(row.present)),
                          ",".join(row.missing) or "-", row.verdict + (f" ({row.note})" if row.note else "")))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
        text.append(f"strategy: {self.strategy or 'none'} ({self.why}); download path: {self.download_path or 'none'}; "
                    f"{self.requests} requests; "
                    f"{'the pipeline can run against this court' if self.ok else 'the pipeline cannot run: see FAIL rows'}")
        if self.projected_hours is not None:
            text.append(f"politeness: observed latency {self.latency_seconds:.2f} s a request; a whole first crawl "
                        f"(~{FULL_CRAWL_DOCUMENTS:,} documents) projects to {self.projected_hours:.1f} h at the "
                        "current pacing (KY_PACING scales it)")
        if self.answers:
            text.append("unknown at this court, as the probe found it:")
            text += [f"  {answer}" for answer in self.answers]
        return "\n".join(text)


def list_warning(rows: int, paging) -> str | None:
    """What makes a list's answer doubtful (`paging`: the court's `paging_of` its headers): the court
    says more rows follow (the pipeline follows them), or exactly SUSPICIOUS_LIST_SIZE rows come
    back with nothing saying the list is whole."""
    if paging.more:
        return "warning: paged (moreresults), the pipeline follows the pages"
    if rows == SUSPICIOUS_LIST_SIZE and paging.total is None:
        return f"warning: exactly {SUSPICIOUS_LIST_SIZE} rows, nothing says the list is whole (a default page?)"
    return None


def fields_of(rows: list, fields: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(present, missing): a field is present when the first row has it (rows: rowMaps or elements)."""
    first = rows[0] if rows and isinstance(rows[0], dict) else {}
    present = tuple(name for name in fields if name in first)
    return present, tuple(name for name in fields if name not in first)


class _Prober:
    def __init__(self, cfg: Config, session: requests.Session | None, court: CTrackCourt):
        self.cfg = cfg
        self.client = CourtClient(cfg, RunClock(3600.0), session=session, court=court)
        self.court = court
        self.report = ProbeReport()
        self.paging = court.paging_of({})        # what the last JSON answer's headers said of its page

    def ask(self, endpoint: str, headers: dict | None = None, **values: str) -> tuple[ProbeRow, Any]:
        row = ProbeRow(endpoint, expected=FIELDS_READ[endpoint])
        self.report.rows.append(row)
        response = None
        while response is None:
            if self.client.requests_sent >= PROBE_MAX_REQUESTS:
                row.verdict, row.note = ("FAIL" if row.verdict == "FAIL" else "skipped"), \
                    (row.note + "; " if row.note else "") + "request budget spent"
                return row, None
            self.client._pace(self.cfg.PACING_SEARCH)
            started = time.monotonic()
            try:
                path = {"admin_case_search": "case_search"}.get(endpoint, endpoint)
                answer = self.client._get(self.client.url(path, **values), headers or {},
                                          stream=endpoint in ("download", "download_site"))
            except requests.RequestException as exc:
                row.seconds = time.monotonic() - started
                row.verdict, row.note = "FAIL", f"no answer: {type(exc).__name__}"
                if self.spare_requests() < 1 or row.note.endswith("(retried)"):
                    return row, None
                row.note += " (retried)"
                continue
            if (endpoint not in ("download", "download_site") and classify_http_status(answer.status_code) == "transient"
                    and answer.status_code != 200 and not row.note and self.spare_requests() >= 1):
                row.note = f"HTTP {answer.status_code} (retried)"      # one busy answer is not a verdict
                answer.close()
                continue
            response = answer
        row.seconds, row.status = time.monotonic() - started, response.status_code
        if endpoint in ("download", "download_site"):
            kind = response.headers.get("Content-Type", "")
            response.close()
            ok = response.status_code == 200 and "application/pdf" in kind
            row.present, row.missing = (("application/pdf",), ()) if ok else ((), ("application/pdf",))
            if ok:
                row.verdict = "ok"
            elif response.status_code != 200 and classify_http_status(response.status_code) == "transient":
                # One document's 5xx or 429 is the download stage's business (it retries), not a shape.
                row.verdict, row.note = "transient", f"HTTP {response.status_code}: the download stage retries"
            elif response.status_code in (401, 403):
                # The route answered for this document: it is restricted (a permanent failure of its own).
                row.verdict, row.note = "restricted", f"HTTP {response.status_code} for this document"
            else:
                row.verdict, row.note = "FAIL", f"HTTP {response.status_code}, Content-Type {kind or 'none'}"
            return row, None
        if response.status_code == 404:
            row.verdict = "absent"
            return row, None
        if response.status_code != 200:
            row.verdict, row.note = "FAIL", f"HTTP {response.status_code}"
            return row, None
        try:
            body = response.json()
        except ValueError:
            row.verdict, row.note = "FAIL", "200 that is not JSON"
            return row, None
        self.paging = self.court.paging_of(response.headers)
        return row, body

    def spare_requests(self) -> int:
        """Requests left beyond one per endpoint still to ask (retries and extra downloads use them)."""
        asked = {row.endpoint for row in self.report.rows}
        still = len([name for name in FIELDS_READ if name not in asked])
        return PROBE_MAX_REQUESTS - self.client.requests_sent - still

    def search(self, endpoint: str, **values: str) -> tuple[ProbeRow, list]:
        """A search's first PROBE_ROWS rows (its items), their fields checked."""
        row, body = self.ask(endpoint, self.court.paging_headers(1, PROBE_ROWS), **values)
        items = self.court.search_items(body) if body is not None else None
        if items is None:
            if body is not None:
                row.verdict, row.note = "FAIL", "no resultItems list"
            return row, []
        return self.check(row, [self.court.search_row_map(item) for item in items]), items

    def array(self, endpoint: str, **values: str) -> tuple[ProbeRow, list]:
        """A list's rows, asked as the pipeline asks them, their fields checked."""
        row, body = self.ask(endpoint, self.court.paging_headers(1, LIST_MAX_RESULTS), **values)
        if body is None:
            return row, []
        if not isinstance(body, list):
            row.verdict, row.note = "FAIL", f"not a JSON array but {type(body).__name__}"
            return row, []
        nested = any(isinstance(element, list) for element in body)
        self.check(row, list_elements(body) if nested else body)
        if nested:
            row.note = "nested lists, read element by element" + (f"; {row.note}" if row.note else "")
        warning = list_warning(len(body), self.paging)
        if warning:
            row.note = (row.note + "; " if row.note else "") + warning
        return row, body

    @staticmethod
    def check(row: ProbeRow, rows: list) -> ProbeRow:
        if not rows:
            row.verdict, row.note = "empty", "no rows: fields unchecked"
            return row
        row.present, row.missing = fields_of(rows, row.expected)
        fatal = [name for name in row.missing if name in FIELDS_REQUIRED[row.endpoint]]
        row.verdict = "FAIL" if fatal else "ok"
        if row.endpoint == "document_search" and fatal == ["documentID"] and "docketEntryID" in row.present:
            row.verdict = "resolvable"      # docket entries: their files name the documents
        if row.missing and not fatal:
            row.note = "metadata fields missing"
        return row


def probe(cfg: Config, *, session: requests.Session | None = None, court=None) -> ProbeReport:
    """Probes the court at cfg.API_BASE (COURT_SYSTEM's, unless `court` is given) by its API family's
    probe (PROBES); never raises for the court's answers."""
    court = court if court is not None else court_of_config(cfg)
    return PROBES[court.family](cfg, session, court)


def _probe_ctrack(cfg: Config, session: requests.Session | None, court: CTrackCourt) -> ProbeReport:
    """The probe of a C-Track Public Access court (see the module docstring)."""
    prober = _Prober(cfg, session, court)
    report = prober.report
    prefix = court.numbers.shards(cfg.last_year, cfg.last_year)[0]
    try:
        search_row, search_items = prober.search("document_search", prefix=prefix)
        documents_ok = search_row.status == 200 and bool(search_items) and all(
            document_id_of(item) for item in search_items)
        if search_items and not documents_ok:
            search_row.note = "rows without documentID: resolved through their entries' files"
        case_row, cases = prober.search("case_search", prefix=prefix)
        case_search = ("absent" if case_row.verdict == "absent" else "rows" if cases
                       else "empty" if case_row.status == 200 else "unknown")
        if "selflinks_header" in court.unknowns:
            report.answers.append(_selflinks_answer(prober, prefix, len(cases) if case_row.status == 200 else None))
        if "case_numbers" in court.unknowns:
            report.answers.append(_numbers_answer(court, prefix, cases))
        strategy, why = choose_strategy(cfg.DISCOVERY, search_items if search_row.status == 200 else None,
                                        case_search)
        report.strategy, report.why = strategy, why
        case_id = next((item.get("rowMap", {}).get("caseID") or item.get("id") for item in cases
                        if isinstance(item, dict)), None)
        candidates = [document_id_of(item) for item in search_items if document_id_of(item)] \
            if strategy == "documents" else []
        entry_ids: list[str] = []
        if case_id:
            _, entries = prober.array("docket_entries", case_id=case_id)
            entry_ids = [entry.get("docketEntryID") for entry in entries
                         if isinstance(entry, dict) and entry.get("hasDocuments")]
        else:
            report.rows.append(ProbeRow("docket_entries", expected=FIELDS_READ["docket_entries"],
                                        note="no case to ask for"))
        if entry_ids:
            files_row, files = prober.array("entry_documents", docket_entry_id=entry_ids[0])
            if not files and len(entry_ids) > 1:
                # An entry saying hasDocuments can list none: a second one, paid for by the ADMIN
                # check (it only warns) when the budget is short.
                if prober.spare_requests() < 1:
                    report.rows.append(ProbeRow("admin_case_search", expected=FIELDS_READ["admin_case_search"],
                                                note="budget spent on a second entry's file list"))
                report.rows.remove(files_row)
                files_row, files = prober.array("entry_documents", docket_entry_id=entry_ids[1])
                files_row.note = (files_row.note + "; " if files_row.note else "") + \
                    "the first entry with documents listed none"
            candidates += [f.get("documentID") for f in files if isinstance(f, dict)
                           and f.get("documentAvailable") is not False and isinstance(f.get("documentID"), str)]
        else:
            report.rows.append(ProbeRow("entry_documents", expected=FIELDS_READ["entry_documents"],
                                        note="no docket entry with documents to ask for"))
        if case_id and cfg.CASE_DETAILS:
            prober.array("parties", case_id=case_id)
            prober.array("lower_courts", case_id=case_id)
        today = cfg.today()
        first_day, last_day = opinion_windows(today - _dt.timedelta(days=6), today)[0]
        if court.opinion_courts():
            prober.search("opinion_search", court=court.opinion_courts()[0], first_day=first_day, last_day=last_day)
        # ADMIN numbers are swept as case-search prefixes; whether this court lists them so is checked here.
        admin = court.numbers.admin_shards(cfg.last_year - 1, cfg.last_year - 1)
        if admin and "admin_case_search" not in {row.endpoint for row in report.rows}:
            admin_row, _ = prober.search("admin_case_search", prefix=admin[0])
            if admin_row.verdict == "empty":
                admin_row.note = "no ADMIN case listed by prefix: only the opinion search finds them"
        _probe_downloads(prober, candidates)
    finally:
        report.requests = prober.client.requests_sent
        report.latency_seconds = prober.client.observed_latency()
        prober.client.close()
    verdicts = {row.endpoint: row.verdict for row in report.rows}
    if "public_documents" in court.unknowns:
        report.answers.append(_public_answer(court, report.rows))
    answered = [path for path, endpoint in court.download_paths.items()
                if verdicts.get(endpoint) in DOWNLOAD_ANSWERS]
    report.download_path = next((path for path in answered if verdicts.get(court.download_paths[path]) == "ok"),
                                answered[0] if answered else None)
    needed = NEEDED.get(report.strategy, ())
    if report.strategy == "documents" and verdicts.get("document_search") == "resolvable":
        needed = needed + ("entry_documents",)      # rows resolved through their entries' files
    report.ok = bool(report.strategy) and all(
        verdicts.get(endpoint) == "ok"
        or (endpoint == "document_search" and verdicts.get(endpoint) == "resolvable")
        or (endpoint == "download" and report.download_path is not None)
        for endpoint in needed)
    for row in report.rows:
        if row.verdict not in ("FAIL", "absent"):
            continue
        if row.endpoint in court.download_paths.values() and report.download_path:
            row.note = (row.note + "; " if row.note else "") + f"the {report.download_path} path answers"
        elif row.endpoint not in needed:
            row.note = (row.note + "; " if row.note else "") + "not needed by this strategy"
    if report.strategy:
        discovery = FULL_CRAWL_DOCUMENTS * DISCOVERY_REQUESTS_PER_DOCUMENT[report.strategy]
        report.projected_hours = (
            projected_hours(round(discovery), cfg.PACING_SEARCH, cfg.PACING, report.latency_seconds)
            + projected_hours(FULL_CRAWL_DOCUMENTS, cfg.PACING_DL, cfg.PACING, report.latency_seconds))
    log_probe.info("probe of %s: strategy %s, %s", cfg.API_BASE, report.strategy or "none",
                   "ok" if report.ok else "cannot run")
    return report


SELFLINKS_HEADER = "x-ctrack-excludeselflinks"


def _selflinks_answer(prober: _Prober, prefix: str, with_header: int | None) -> str:
    """Whether the court needs x-ctrack-excludeselflinks: its case search asked once more without it."""
    if with_header is None:
        return f"{SELFLINKS_HEADER}: unknown (the case search did not answer with it)"
    if prober.client.requests_sent >= PROBE_MAX_REQUESTS:
        return f"{SELFLINKS_HEADER}: unknown (the request budget is spent; it is sent anyway)"
    prober.client._pace(prober.cfg.PACING_SEARCH)
    try:
        answer = prober.client._get(prober.client.url("case_search", prefix=prefix),
                                    {SELFLINKS_HEADER: None, **prober.court.paging_headers(1, PROBE_ROWS)})
        items = prober.court.search_items(answer.json()) if answer.status_code == 200 else None
    except (requests.RequestException, ValueError) as exc:
        return f"{SELFLINKS_HEADER}: unknown (asked without it: {type(exc).__name__}); it is sent anyway"
    if items is None:
        return f"{SELFLINKS_HEADER}: unknown (without it the case search answered HTTP {answer.status_code}); " \
               "it is sent anyway"
    if with_header and not items:
        return (f"{SELFLINKS_HEADER}: required (the case search answered {with_header} rows with it, none "
                "without it); it is sent")
    if items:
        return f"{SELFLINKS_HEADER}: not required (the case search answered rows without it); it is sent anyway"
    return f"{SELFLINKS_HEADER}: unknown (the case search answered no rows with it or without it); it is sent anyway"


def _numbers_answer(court: CTrackCourt, prefix: str, cases: list) -> str:
    """Whether the numbers the case search lists take the configured form."""
    numbers = [item.get("rowMap", {}).get("caseNumber") for item in cases if isinstance(item, dict)]
    numbers = [number for number in numbers if isinstance(number, str)]
    if not numbers:
        return (f"case numbers: unknown (the case search for the configured prefix {prefix} listed none; "
                "the form may be another)")
    strange = [number for number in numbers if court.code_of(number) is None]
    if strange:
        return f"case numbers: not the configured form (the case search for {prefix} listed {strange[0]})"
    return f"case numbers: the configured form (the case search for {prefix} listed {numbers[0]})"


def _public_answer(court: CTrackCourt, rows: list[ProbeRow]) -> str:
    """Whether a document downloads anonymously, from the download rows."""
    downloads = [row for row in rows if row.endpoint in court.download_paths.values() and row.status is not None]
    if any(row.verdict == "ok" for row in downloads):
        path = next(name for name, endpoint in court.download_paths.items()
                    if any(row.endpoint == endpoint and row.verdict == "ok" for row in downloads))
        return f"documents public: yes (a PDF downloaded anonymously by the {path} path)"
    refused = [row for row in downloads if row.verdict == "restricted"]
    if refused:
        return (f"documents public: no (HTTP {refused[0].status} for a document asked anonymously: it needs "
                "registration or purchase)")
    if downloads:
        return f"documents public: unknown (the download answered HTTP {downloads[0].status})"
    return "documents public: unknown (no document to ask for)"


# The court's API family -> its probe.
PROBES = {"ctrack": _probe_ctrack,
          "trportal": lambda cfg, session, court: probe_trportal(cfg, session=session, court=court,
                                                                 report=ProbeReport(), row_type=ProbeRow)}


def _probe_downloads(prober: _Prober, candidates: list[str]) -> None:
    """One document by both download paths; after a 404 on both, another document while the budget lasts
    (one withdrawn or restricted document says nothing of the paths)."""
    report = prober.report
    if not candidates:
        report.rows.append(ProbeRow("download", expected=FIELDS_READ["download"], verdict="FAIL",
                                    note="no document id to ask for"))
        return
    for position, document_id in enumerate(candidates):
        rows = [prober.ask(endpoint, document_id=document_id)[0] for endpoint in prober.court.download_paths.values()]
        if position:
            for row in rows:
                row.note = (row.note + "; " if row.note else "") + "another document after a 404"
        if any(row.status != 404 for row in rows) or position + 1 >= len(candidates) \
                or prober.spare_requests() < len(rows):
            return
        for row in rows:
            report.rows.remove(row)


if __name__ == "__main__":  # the notebook's "probe first" box: the probe, before any stage runs
    if globals().get("CFG") is not None and CFG.PROBE_FIRST and not CFG.DRY_RUN:  # noqa: F821
        PROBE_REPORT = probe(CFG)  # noqa: F821
        print(PROBE_REPORT.table())
        if not PROBE_REPORT.ok:
            raise SystemExit("probe: the pipeline cannot run against this court (see the table); nothing ran")
        CFG = CFG.replace(PROBE_FIRST=False)  # noqa: F821  (probed: the run cell does not ask again)
