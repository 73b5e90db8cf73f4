"""Discovery of a TR Portal court system: the opinion feed, the case search by filed date, each case's
docket entries and access list, then its header, parties and originating courts.

Guarantees:
- The same units as Kentucky's discovery (c50 `Discovery`: `step`, `unit`, `work_left`,
  `details`, `finish`), in this order: the court directory (`/courts`, kv `court_directory`); the
  opinion feed (c43, a page or a publication a unit); the case search over every filed day from
  FIRST_YEAR to today in the system's time zone (c31 `case_search`, oldest first, a page a unit)
  and each page's cases walked CRAWL-sized batches at a time, each case committed with its
  documents; then the details pass (a case's detail and parties, after the PDFs). Every unit
  commits before it returns; the cursor (kv `trportal_crawl`: the sweep, its stage, the case
  search's window, page and last instant) lets a killed run resume at its page. The sweep's one
  discovery_shards row (TR_SHARD, every case it lists carries it) announces the first window's
  total, the search over every filed day (a closing sweep, over the days since the crawl began,
  announces none), so verify's coverage audit compares it with the cases held.
- Every document of a case is a row (c26 `access_document`): id its documentLinkUUID in lower
  case, case number as written, court, the entry's filed date, description, name, entry type,
  access state (c26 `document_state`: a secured entry's is never public), the court's opinion
  mark, its download path. A document not public (PURCHASABLE, IN_CART, UNAVAILABLE, secured) is
  kept with its state and never queued (c15 `record_access`); the feed says nothing of access
  but the secured mark, so its rows never clear a state. A case whose docket entries or document
  list the court refuses (a permanent status, a 400 on the first page, a list past the results
  window) is kept seen, not walked (its documents unknown, asked again next sweep), counted in the
  answers' problems; the run goes on.
- Opinions first: until every opinion the court shows is listed (`opinions_only()`: Nevada's
  once the feed is read; the others' once the first sweep has walked every case, since their
  opinions are docket entries too) the crawl downloads opinions alone.
- A sweep without errors converges (kv `discovery_converged_at`; complete through today, or,
  for a crawl that began on an earlier day, after the feed and the case search since then are
  read again). Once converged every run is an update (c48): the feed since kv
  `opinions_checked_through` (with OPINION_OVERLAP_DAYS), the whole case search (new cases,
  changed rows, closed flags), every new, changed or open case walked again (c44 `walk_kind`);
  its changes are recorded: a new public document added, a not-public one becoming public added
  (restored when it was withdrawn), a public one becoming not public withdrawn, one gone from its
  case's list withdrawn (delisted).

Knobs read: FIRST_YEAR, LAST_YEAR, CASE_DETAILS, DRY_RUN, TODAY (and the client's).
"""
from __future__ import annotations

import collections
import datetime as _dt
import json
import logging
import math
import time
import zoneinfo
from typing import Any, Mapping

from .c00_config import PermanentFetchError, StopRequested, TransientFetchError, utc_now
from .c10_database import KV_ARCHIVE_UPDATED_AT, KV_COMPLETE_THROUGH, KV_DISCOVERY_CONVERGED_AT, KV_DISCOVERY_STRATEGY
from .c12_queues import WorkQueues
from .c15_discovery_state import DiscoveryState, Transitions
from .c19_changes import watching
from .c25_court import ShapeProblem
from .c26_trportal import (PATHS, CourtDirectory, access_document, case_row, docket_entry, instant_text, lower_courts,
                           party, uuid_key)
from .c30_client import SearchRefused
from .c31_court_client import PastWindow, TRPortalClient, court_client
from .c35_context import Context
from .c43_trportal_feed import FEEDS
from .c44_discovery_rules import (DISCOVER_ASK_AGAIN_UPDATE_SHARE, DISCOVER_DETAILS_BATCH, KV_CRAWL_STARTED_ON,
                                  OPINION_OVERLAP_DAYS, DiscoverResult, days_since, kv_date, walk_kind)
from .c46_opinions import KV_OPINIONS_CHECKED_THROUGH
from .c48_update import Update

log_tr = logging.getLogger("kycourt.discover")

KV_TRPORTAL_CRAWL = "trportal_crawl"
KV_COURT_DIRECTORY = "court_directory"
TR_SHARD = "cases"           # the sweep's one discovery_shards row: the case search


class TRPortalDiscovery:
    """Discovery of a TR Portal court system (see the module docstring)."""

    def __init__(self, ctx: Context, *, opinion_pass: bool = False):
        self.ctx, self.cfg = ctx, ctx.cfg
        self.db = ctx.open_database()
        self.state = DiscoveryState(self.db)
        self.result = DiscoverResult(strategy="cases", opinion_unit="feed request")
        self.own_client = ctx.client is None
        self.client: TRPortalClient = court_client(ctx.cfg, ctx.clock) if self.own_client else ctx.client
        self.court = self.client.court
        self.started = time.monotonic()
        self.requests_before = self.client.requests_sent
        self.downloads_before = self.client.downloads_sent
        self.problems: collections.Counter = collections.Counter()
        self.stage = "begin"          # begin, opinions, cases, done
        self.directory: CourtDirectory | None = None
        self.feed = None
        self.update: Update | None = None
        self.changes = None
        self.cursor: dict[str, Any] = {}
        self.search = None            # the case search's pages (c31 case_search), in flight
        self.window: tuple | None = None
        self.page_cases: list[tuple[dict, str]] = []     # the page's cases to walk, with how
        self.in_sweep = False
        self.sweep = 0
        self.shards_done = 0
        self.details_after = ""
        self.update_complete = False

    # ------------------------------------------------------------ units

    def unit(self) -> str | None:
        return None if self.stage == "done" else "opinions" if self.stage in ("begin", "opinions") else "walk"

    def opinions_only(self) -> bool:
        return self.db.kv_get(KV_DISCOVERY_CONVERGED_AT) is None and not self.cursor.get("opinions_listed")

    def work_left(self) -> dict[str, int]:
        windows = self.feed.left() if self.feed is not None and self.stage in ("begin", "opinions") else 0
        total, read = self.cursor.get("total"), self.cursor.get("read", 0)
        size = self.cursor.get("size") or self.cfg.PAGE_SIZE
        shards = 0 if self.stage == "done" else max(1, -(-((total or size) - read) // size))
        return {"windows": windows, "shards": shards}

    def step(self, cases: int | None = None) -> bool:
        try:
            if self.stage != "done" and self.ctx.clock.should_stop():
                self._stop()
            elif self.stage == "begin":
                self._begin()
            elif self.stage == "opinions":
                self._feed_unit()
            elif self.stage == "cases":
                self._cases_unit(cases)
        except StopRequested:
            self._stop()
        return self.stage != "done"

    def _stop(self) -> None:
        self.result.stopped = True
        self.stage = "done"

    def _begin(self) -> None:
        db, cfg, result = self.db, self.cfg, self.result
        db.kv_set(KV_DISCOVERY_STRATEGY, "cases")
        db.kv_set("discovery_strategy_reason", f"{self.court.name}: TR Portal's case search, docket entries and "
                                               "access lists")
        try:
            self.cursor = json.loads(db.kv_get(KV_TRPORTAL_CRAWL) or "{}")
        except ValueError:
            self.cursor = {}
        if self.directory is None:
            self.directory = self._court_directory()
        converged = db.kv_get(KV_DISCOVERY_CONVERGED_AT) is not None
        if db.kv_get(KV_CRAWL_STARTED_ON) is None:
            db.kv_set(KV_CRAWL_STARTED_ON, cfg.today().isoformat())
        result.incremental = converged
        if converged and self.update is None:
            self.update = Update(self.ctx, db, self.court)
            self.changes = self.update.changes
        if not self.cursor.get("sweep") or self.cursor.get("stage") == "done":
            self._new_pass(converged)
        self.sweep = self.cursor["sweep"]
        first = _dt.date(cfg.FIRST_YEAR, 1, 1)
        since = max(first, _dt.date.fromisoformat(self.cursor["since"])) if self.cursor.get("since") else first
        self.feed = FEEDS[self.court.opinions](db, self.client, self.directory, self._write_feed, since, self.ctx.clock,
                                               until=_dt.date(cfg.last_year, 12, 31))
        if self.cursor.get("feed_restart"):
            self.feed.restart()
            self.cursor["feed_restart"] = False
            self._save()
        self.stage = "opinions" if self.cursor["stage"] == "opinions" else "cases"
        result.opinion_pass_complete = bool(self.cursor.get("opinions_listed"))

    def _new_pass(self, converged: bool) -> None:
        """A new sweep: the first crawl's, an update's, or the window's closing (`closing` in the cursor)."""
        today = self.cfg.today()
        previous = self.cursor
        sweep = int(previous.get("sweep") or 0) + 1
        closing = previous.get("closing_from")
        if converged:
            since = kv_date(self.db, KV_OPINIONS_CHECKED_THROUGH) or today
            since -= _dt.timedelta(days=OPINION_OVERLAP_DAYS)
            low = _dt.date(self.cfg.FIRST_YEAR, 1, 1)
        elif closing:
            since = _dt.date.fromisoformat(closing) - _dt.timedelta(days=OPINION_OVERLAP_DAYS)
            low = _dt.date.fromisoformat(closing) - _dt.timedelta(days=1)
        else:
            since, low = None, _dt.date(self.cfg.FIRST_YEAR, 1, 1)
        high = min(today, _dt.date(self.cfg.last_year, 12, 31))
        self.cursor = {"sweep": sweep, "stage": "opinions", "since": since and since.isoformat(),
                       "low": low.isoformat(), "high": high.isoformat(), "closing": bool(closing),
                       "opinions_listed": previous.get("opinions_listed", False), "feed_restart": True}
        self.state.start_sweep(sweep, [TR_SHARD])
        self._save()

    def _save(self) -> None:
        self.db.kv_set(KV_TRPORTAL_CRAWL, json.dumps(self.cursor, sort_keys=True))

    def _court_directory(self) -> CourtDirectory:
        """The courts as /courts serves them (kept in kv court_directory); the configuration's when it
        cannot be read."""
        try:
            rows = [row for page in self.client.pages(PATHS["courts"], {}, "courts") for row in page.results]
            directory = CourtDirectory.from_rows(self.court, rows)
            self.db.kv_set(KV_COURT_DIRECTORY, directory.to_json())
            return directory
        except (TransientFetchError, SearchRefused, PastWindow, ShapeProblem) as exc:
            kept = self.db.kv_get(KV_COURT_DIRECTORY)
            log_tr.warning("the court directory (/courts) could not be read (%s): the %s one", exc,
                           "kept" if kept else "configured")
            return CourtDirectory.from_json(kept) if kept else CourtDirectory.configured(self.court)

    # ------------------------------------------------------------ the feed

    def _feed_unit(self) -> None:
        done = self.feed.step()
        self.result.opinion_windows += 1
        if done is None:
            self._stop()
        elif done:
            self.result.errors += self.feed.errors
            if self.feed.complete and self.court.opinions == "document_search":
                self.cursor["opinions_listed"] = True
            self.cursor["stage"] = "cases"
            self._save()
            self.result.opinion_pass_complete = bool(self.cursor.get("opinions_listed"))
            self.stage = "cases"

    def _write_feed(self, documents: list[dict]) -> int:
        """The feed's documents, with their cases as it shows them, committed (watched in an update)."""
        cases: dict[str, dict] = {}
        for document in documents:
            case = document.pop("case", None) or {"case_id": document["case_id"], "case_number": document["case_number"],
                                                  "court": document["court"], "title": document["case_title"],
                                                  "court_path": document.pop("case_path", None)}
            document.pop("case_path", None)
            cases.setdefault(case["case_id"], case)
        self.state.upsert_cases(list(cases.values()))
        return self._write_documents(documents, authoritative=False)

    def _write_documents(self, documents: list[dict], *, case: Mapping[str, Any] | None = None,
                         entries: list[dict] | None = None, kind: str = "new", listed: bool = False,
                         case_id: str | None = None, authoritative: bool = True) -> int:
        """Documents (and, of a walked case, the case and its entries) committed with their access
        states in one transaction; in an update their changes recorded (see the module docstring).
        Not `authoritative` (the feed's rows): a state they do not name is the table's."""
        ids = [document["document_id"] for document in documents]
        with watching(self.changes) as watch:
            before = self.state.access_of(ids) if watch is not None else {}
            if case is not None:
                new = self.state.record_case_walk(self.sweep, case, entries or [], documents, watch=watch,
                                                  title_seen=True, details_due=kind != "open")
            else:
                new = self.state.upsert_discovered(documents, watch=watch)
            self.state.record_access(documents, authoritative=authoritative)
            if watch is not None:
                _note_access(before, self.state.access_of(ids), watch)
                if listed:
                    self.state.withdraw_unlisted("case_id = ?", (case_id or case["case_id"],),
                                                 {d["document_id"] for d in documents}, watch)
        self.result.rows_new += new
        return new

    # ----------------------------------------------------- the case search

    def _search_pages(self):
        cursor = self.cursor
        zone = zoneinfo.ZoneInfo(self.court.time_zone)
        low = _dt.datetime.combine(_dt.date.fromisoformat(cursor["low"]), _dt.time(), zone)
        high = _dt.datetime.combine(_dt.date.fromisoformat(cursor["high"]), _dt.time(23, 59, 59, 999000), zone)
        window = cursor.get("window")
        first = _dt.datetime.fromisoformat(window["from"]) if window else low
        latest = _dt.datetime.fromisoformat(window["latest"]) if window and window.get("latest") else None
        return self.client.case_search(first, high, start_page=window["page"] if window else 0,
                                       size=window.get("size") if window else None, latest=latest)

    def _cases_unit(self, limit: int | None) -> None:
        if self.page_cases:
            self._walk_batch(limit)
            return
        if self.search is None:
            self.search = self._search_pages()
            self.in_sweep = True
        try:
            first, page, latest = next(self.search)
        except StopIteration:
            if self.update is not None and not self.cursor.get("asked_again"):
                self._ask_again()
                return
            self._end_sweep(errors=self.cursor.get("errors", 0))
            return
        except (TransientFetchError, SearchRefused, PastWindow) as exc:
            log_tr.warning("sweep %d: the case search stopped: %s", self.sweep, exc)
            self.state.finish_shard(self.sweep, TR_SHARD, state="error", error=str(exc)[:500])
            self.result.errors += 1
            self.search, self.in_sweep = None, False
            self.stage = "done"          # the next run resumes at this page
            return
        self.result.pages += 1
        self.result.rows_seen += len(page.results)
        cases = []
        for raw in page.results:
            try:
                cases.append({**case_row(self.court, self.directory, raw), "shard": TR_SHARD})
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
        previous = self.state.cases_to_walk(self.sweep, [case["case_id"] for case in cases])
        self.state.upsert_cases([{key: value for key, value in case.items() if key != "search_row"} for case in cases])
        for case in cases:
            before = previous.get(case["case_id"])
            kind = walk_kind(before, case, self.sweep, update=self.update is not None,
                             days_since_walk=days_since(before["walked_at"] if before else None))
            if kind is not None:
                self.page_cases.append((case, kind))
            elif before is not None and before["walked_sweep"] < self.sweep:
                self.result.cases_unchanged += 1
        if self.cursor.get("window") is None and not self.cursor.get("closing"):
            self.cursor["announced"] = page.total     # the first window spans the sweep: its total is the sweep's
        self.cursor.update(window={"from": instant_text(first), "page": page.number + 1, "size": page.size,
                                   "latest": latest and instant_text(latest)},
                           total=page.total, read=page.offset + len(page.results))
        if not self.page_cases:
            self._page_done()

    def _ask_again(self) -> None:
        """An update's lists asked again: DISCOVER_ASK_AGAIN_UPDATE_SHARE of the cases holding documents
        not public (those asked longest ago first, at least one), for those the court made public."""
        share = math.ceil(self.state.cases_not_public_count(self.sweep) * DISCOVER_ASK_AGAIN_UPDATE_SHARE)
        for row in self.state.cases_not_public(self.sweep, share):
            case = {key: row[key] for key in row.keys()}
            case["case_uuid"] = case["court_path"].rsplit("/", 1)[-1]
            self.page_cases.append((case, "access"))
        self.cursor["asked_again"] = True
        self.search = self.search or iter(())

    def _walk_batch(self, limit: int | None) -> None:
        walked = 0
        while self.page_cases and (limit is None or walked < limit):
            if self.ctx.clock.should_stop():
                raise StopRequested(self.ctx.clock.stop_reason or "stop requested")
            case, kind = self.page_cases.pop(0)
            try:
                self.walk_case(case, kind)
            except TransientFetchError as exc:
                self.cursor["errors"] = self.cursor.get("errors", 0) + 1
                log_tr.debug("case %s: %s", case["case_number"], exc)
            walked += 1
        if not self.page_cases:
            self._page_done()

    def _page_done(self) -> None:
        self.shards_done += 1
        self._save()

    def walk_case(self, case: dict, kind: str) -> int:
        """One case's docket entries and access list, committed with its documents (see the docstring);
        kind 'access': its access list alone, its entries as the table holds them (walked 'again' in
        full when an entry's secured mark is unknown: written before schema v15)."""
        label = f"case {case['case_number']}"
        entries = [dict(row) for row in self.state.entries_of_case(case["case_id"])] if kind == "access" else []
        if any(entry["secured"] is None for entry in entries):
            kind = "again"
        if kind != "access":
            try:
                raw_entries = [row for page in self.client.pages(case["court_path"] + "/docketentries",
                                                                 {"sort": "docketEntryHeader.filedDate,asc"}, label)
                               for row in page.results]
            except (PermanentFetchError, SearchRefused, PastWindow) as exc:
                return self._refused(case, kind, [], f"docketentries {exc}")
            entries = []
            for raw in raw_entries:
                try:
                    entries.append(docket_entry(self.court, raw, case["case_id"]))
                except ShapeProblem as problem:
                    self.problems[problem.field] += 1
        documents: list[dict] = []
        asked = any(entry["has_documents"] for entry in entries)
        if asked:
            court = self.directory.by_code(self.court.code_of(case["case_number"])) or self.directory.courts[0]
            by_entry = {entry["docket_entry_id"]: entry for entry in entries}
            try:
                pages = list(self.client.pages(PATHS["access"], {"caseHeader.caseInstanceUUID": case["case_uuid"]},
                                               f"{label} documents"))
            except (PermanentFetchError, SearchRefused, PastWindow) as exc:
                return self._refused(case, kind, entries, f"access {exc}")
            for raw in (raw for page in pages for raw in page.results):
                try:
                    entry = by_entry.get(uuid_key(raw.get("docketEntryUUID")) if isinstance(raw, Mapping) else None)
                    documents.append(access_document(raw, entry, case, court))
                except ShapeProblem as problem:
                    self.problems[problem.field] += 1
        if kind == "access":
            self.result.entries_asked_again += 1
            new = self._write_documents(documents, listed=asked, case_id=case["case_id"])
            self.state.note_case_asked(case["case_id"])
            return new
        self.result.cases_walked += 1
        return self._write_documents(documents, case=case, entries=entries, kind=kind, listed=asked and kind != "new")

    def _refused(self, case: dict, kind: str, entries: list[dict], why: str) -> int:
        """A case whose docket entries or document list the court refused (a permanent status, a 400 on
        the first page, a list past the results window): counted in `problems`, the case (and the entries
        read) kept as seen, not walked, so a later sweep asks again; its documents stay as the table
        holds them. Returns 0 (no new document)."""
        self.problems[why[:60]] += 1
        log_tr.debug("case %s: %s", case["case_number"], why)
        if kind == "access":
            self.state.note_case_asked(case["case_id"])
        else:
            self.state.record_case_walk(None, case, entries, [])
        return 0

    def _end_sweep(self, errors: int) -> None:
        """The case search read to its end: the sweep converges (or closes the window) when nothing failed."""
        self.search, self.in_sweep = None, False
        # As many answers of the wrong shape as 1% of the rows (at least 10): what they held is unknown.
        errors += int(sum(self.problems.values()) >= max(10, self.result.rows_seen // 100))
        self.state.finish_shard(self.sweep, TR_SHARD, state="error" if errors else "done",
                                total_count=self.cursor.get("announced"), rows_seen=self.result.rows_seen,
                                rows_new=self.result.rows_new)
        self.state.finish_sweep(self.sweep, time.monotonic() - self.started, complete=True)
        self.result.sweeps += 1
        today = self.cfg.today()
        cursor = self.cursor
        cursor["opinions_listed"] = True      # every case the search lists is walked (or failed: said)
        if errors or self.feed.errors:
            cursor.update(stage="done")        # the next run sweeps again: what failed is walked then
            self.result.errors += errors
        elif self.update is not None:
            self.db.kv_set(KV_OPINIONS_CHECKED_THROUGH, today.isoformat())
            self.update_complete = True
            cursor.update(stage="done")
        else:
            began = kv_date(self.db, KV_CRAWL_STARTED_ON) or today
            if began < today and not cursor.get("closing"):
                cursor.update(stage="done", closing_from=began.isoformat())      # read again what came since
            else:
                now = utc_now()
                self.db.kv_set(KV_OPINIONS_CHECKED_THROUGH, today.isoformat())
                self.db.kv_set(KV_COMPLETE_THROUGH, today.isoformat())
                self.db.kv_set(KV_DISCOVERY_CONVERGED_AT, now)
                self.db.kv_set(KV_ARCHIVE_UPDATED_AT, now)
                self.result.converged = True
                cursor.update(stage="done", closing_from=None)
        self.result.opinion_pass_complete = bool(cursor.get("opinions_listed"))
        self._save()
        if cursor.get("closing_from") and not self.result.converged:
            self._new_pass(False)              # the window's closing, in this run
            self._begin()
            return
        self.result.converged = self.result.converged or self.update_complete
        self.stage = "done"

    # --------------------------------------------------------- details

    def details_due(self) -> bool:
        return (self.cfg.CASE_DETAILS and WorkQueues(self.db).download_queue_size(self.cfg) == 0
                and not self.ctx.clock.should_stop())

    def details(self, limit: int = DISCOVER_DETAILS_BATCH) -> int | None:
        """The detail (header, originating courts) and parties of the next `limit` walked cases whose
        details are due, each committed; None on a stop."""
        if self.directory is None:
            self.directory = self._court_directory()
        rows = self.state.cases_needing_details(limit, self.details_after)
        for row in rows:
            if self.ctx.clock.should_stop():
                self.result.stopped = True
                return None
            self.details_after = row["case_number"]
            path = row["court_path"]
            try:
                detail = self.client.get_object(path, f"case {row['case_number']}")
                parties = [party(raw, row["case_id"], position) for position, raw in enumerate(
                    raw for page in self.client.pages(path + "/parties", {"sort": "orderBy,asc"}, "parties")
                    for raw in page.results)]
                header = case_row(self.court, self.directory, detail)
                self.state.upsert_cases([{key: value for key, value in header.items() if key != "search_row"}])
                self.state.record_case_details(row["case_id"], row["walked_sweep"], parties,
                                               lower_courts(detail, row["case_id"]))
            except StopRequested:
                self.result.stopped = True
                return None
            except (TransientFetchError, PermanentFetchError, SearchRefused, ShapeProblem) as exc:
                self.result.details_errors += 1
                log_tr.debug("details of %s: %s", row["case_number"], exc)
                continue
            self.result.details_cases += 1
        return len(rows)

    # -------------------------------------------------------- the end

    def finish(self) -> DiscoverResult:
        result, client = self.result, self.client
        if self.own_client:
            client.close()
        result.stopped = result.stopped or self.ctx.clock.stop_event.is_set()
        result.requests = client.requests_sent - self.requests_before
        result.shape_problems = dict(self.problems)
        result.seconds = round(time.monotonic() - self.started, 3)
        result.documents = WorkQueues(self.db).document_count()
        result.not_public = WorkQueues(self.db).not_public_counts()["not_public"]
        if self.update is not None:
            downloads = client.downloads_sent - self.downloads_before
            figures = self.update.finish(complete=self.update_complete and not result.stopped,
                                         json_requests=result.requests - downloads, downloads=downloads,
                                         latency_seconds=client.observed_latency())
            result.run, result.update = self.update.run, figures["words"]
        result.complete_through = self.db.kv_get(KV_COMPLETE_THROUGH)
        if self.problems:
            log_tr.warning("discovery: answers lacking a field: %s",
                           ", ".join(f"{name} x{count}" for name, count in self.problems.most_common()))
        return result


def _public(row: Mapping[str, Any]) -> bool:
    return row["access_state"] is None and row["document_available"] != 0


def _note_access(before: Mapping[str, Any], after: Mapping[str, Any], watch: Transitions) -> None:
    """What a court of access states changed, as the change log counts it, from the table's access
    states before and after the writes: a document is in the archive once it is public (see the
    module docstring)."""
    for document_id, now in after.items():
        public, old = _public(now), before.get(document_id)
        if old is None:
            if not public and document_id in watch.added:
                watch.added.remove(document_id)
            continue
        was_public = _public(old)
        if public and not was_public:
            if old["withdrawn_on"]:
                watch.restored.append(document_id)
            elif document_id not in watch.added:
                watch.added.append(document_id)
        elif was_public and not public:
            watch.withdrawn.setdefault(document_id, "unavailable")
