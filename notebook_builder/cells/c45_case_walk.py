"""The case walk: a shard's case search, then each case's docket entries and the file lists of its entries.

Guarantees:
- `open_shard` pages a shard's case search (c44 `ShardPaging`): its cases, in case-number order,
  with what the table held of each (`ShardInFlight`), or its outcome ('split', 'error' recorded;
  'stopped' left pending). A row of a neighbouring number is counted and dropped.
- `walk_cases` walks the shard's cases as c44 `walk_kind` says (`update`: an update's sweep), at
  most `limit` a unit, each committed on its own with its `walked_sweep` and its search row's
  fingerprint (`record_case_walk`), so a killed sweep resumes at the case in flight, the only one
  asked again.
- `walk_case`: the case's docket entries, then the file list of each entry with documents: a new
  case's but those whose documents the table holds (the opinion pass found them); a changed case's
  every one; an update's open case's only those new to the table (an update's open case keeps its
  details as they were). A case whose entries the court will not list, or whose answers had the
  wrong shape, is recorded, not walked (walked again next sweep).
- With `changes` (an update's, c19), every write is watched and its changes recorded in its
  transaction: new documents, withdrawn ones (listed unavailable, or gone from a list that answered
  other files of their entry), restored ones, and changed metadata.
- `entry_files`: files with documentAvailable false are documents rows (withheld failures, c15);
  an entry saying hasDocuments whose list is `[]` is kept and counted; such entries are asked
  again once in each later sweep (`ask_again`). A file naming another entry as its parent is
  counted and dropped. COURT_TEXT: the court's per-page text is kept as
  `court_text/<sha256>.txt` in the workspace and the store.
- `resolve_rows`: search rows without documentID (docket entries) become documents through their
  entries' file lists, never through `id`. Answers of the wrong shape are counted per field
  (`problems`), never stored under a guessed id. `check_evidence` raises StrategyUnusable once
  most per-item answers are unusable (c44 `strategy_failing`).

Knobs read: COURT_TEXT, FULL_SWEEP (through the caller), and the clock's stop.
"""
from __future__ import annotations

import collections
import logging
import operator
from dataclasses import dataclass
from typing import Any, Mapping

from .c00_config import PermanentFetchError, ResultsLimitExceeded, StopRequested, TransientFetchError
from .c05_durable import atomic_write
from .c06_layout import court_text_store_name
from .c10_database import Database
from .c15_discovery_state import DiscoveryState
from .c19_changes import RunChanges, watching
from .c25_court import ShapeProblem, list_elements, shard_holds
from .c30_client import CourtClient
from .c35_context import Context
from .c44_discovery_rules import (DiscoverResult, ShardPaging, StrategyUnusable,
                                  case_row_fingerprint, court_text_of, days_since, files_missing, strategy_failing,
                                  walk_kind)

log_walk = logging.getLogger("kycourt.discover")


@dataclass
class ShardInFlight:
    """A case-walk shard whose case search is paged, its cases walked a batch at a time."""
    sweep: int
    shard: str
    cases: list[dict]                      # in case-number order
    previous: dict                         # case_id -> what the table held before (cases_to_walk)
    total: int                             # the court's count, neighbouring numbers left out
    pages: int
    position: int = 0                      # cases[:position] are walked (or needed no walk)
    rows_new: int = 0
    errors: int = 0
    last_error: str | None = None



class CaseWalk:
    """The case walk, and the file lists both strategies resolve docket entries through."""

    def __init__(self, ctx: Context, db: Database, client: CourtClient, result: DiscoverResult):
        self.ctx, self.db, self.client, self.result = ctx, db, client, result
        self.court = client.court
        self.update = False                          # an update's sweep (c44 walk_kind)
        self.changes: RunChanges | None = None       # an update's change recording
        self.state = DiscoveryState(db)
        self.problems: collections.Counter = collections.Counter()
        self.sweep_number: int | None = None
        self.usable = self.unusable = 0      # this sweep's per-item answers (docket entries, file lists)
        self.last_unusable: str | None = None

    def begin_sweep(self, sweep: int) -> None:
        self.sweep_number = sweep
        self.usable = self.unusable = 0
        self.last_unusable = None

    def check_evidence(self, *, complete: bool = False) -> None:
        """Raises StrategyUnusable when most of this sweep's per-item answers were unusable."""
        if strategy_failing(self.usable, self.unusable, complete=complete):
            raise StrategyUnusable(f"{self.unusable} of {self.usable + self.unusable} answers unusable "
                                   f"(last: {self.last_unusable})")

    # --------------------------------------------------------- answers

    def _json_list(self, endpoint: str, what: str, **values: str) -> list:
        """A list the court answers, its usability counted (a 404 or a non-list is unusable)."""
        try:
            answer = self.client.get_json(endpoint, **values)
        except PermanentFetchError as exc:
            self.unusable += 1
            self.last_unusable = f"{what} HTTP {exc.http_status}"
            raise
        if not isinstance(answer, list):
            self.problems[what] += 1
            self.unusable += 1
            self.last_unusable = f"{what}: not a list but {type(answer).__name__}"
            raise ShapeProblem(what, f"not a list but {type(answer).__name__}")
        self.usable += 1
        return answer

    def entry_files(self, entry: dict, case: Mapping[str, Any] | None, shard: str
                    ) -> tuple[list[dict], list[dict], dict | None]:
        """(documents, court texts, the case header the files carry) of one docket entry.

        Withheld files (documentAvailable false) are documents too (`upsert_discovered` keeps them
        as withheld failures); a file naming another entry as its parent is counted and dropped.
        `entry` gains `files_missing` (why its list must be asked again) and `files_asked_sweep`."""
        self.result.entries_resolved += 1
        try:
            files = self._json_list("entry_documents", "publicaccessdocuments", docket_entry_id=entry["docket_entry_id"])
        except ShapeProblem:
            return [], [], None
        documents, texts, header = [], [], None
        withheld = 0
        for raw in files:
            try:
                document = self.court.entry_file(raw, entry, case)
                if document["docket_entry_id"] != entry["docket_entry_id"]:
                    raise ShapeProblem("parentID", "another entry's")
                if header is None and isinstance(raw.get("caseHeader"), Mapping):
                    header = self.court.case_header(raw["caseHeader"])
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
                continue
            if document["document_available"] == 0:
                self.result.unavailable += 1
                withheld += 1
            pages = document.pop("court_pages")
            document["shard"] = shard or self.court.numbers.shard_of_number(document["case_number"])
            documents.append(document)
            if pages is not None and self.ctx.cfg.COURT_TEXT:
                texts.append(self._keep_court_text(document["document_id"], pages))
        entry["files_missing"] = files_missing(entry.get("has_documents"), files, withheld)
        entry["files_asked_sweep"] = self.sweep_number
        if entry["files_missing"] == "empty":
            self.result.empty_entries += 1
        return documents, texts, header

    def _keep_court_text(self, document_id: str, pages: list[str]) -> dict:
        text, figures = court_text_of(pages)
        name = court_text_store_name(figures["sha256"])
        path = self.ctx.workspace / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text.encode("utf-8"))
        self.ctx.mirror.put(name, path)
        return {"document_id": document_id, **figures}

    # ------------------------------------------------------------ sweep

    def open_shard(self, sweep: int, shard: str) -> "ShardInFlight | str":
        """Pages a shard's case search: its cases to walk, or its outcome ('split', 'error' recorded;
        'stopped': left pending)."""
        ctx, db, client, result = self.ctx, self.db, self.client, self.result
        top = self.court.numbers.top_level_shard(shard)
        cases: dict[str, dict] = {}
        foreign: set[str] = set()      # neighbouring numbers "Starts With" answered: counted, not walked
        pages = 0
        paging = ShardPaging(ctx, db, client.search_cases, shard, "cases", lambda: len(cases) + len(foreign), result,
                             top_level=shard == top)
        try:
            for page in paging.pages():
                pages += 1
                result.pages += 1
                for item in page.raw_items:
                    try:
                        case = self.court.case_search_row(item)
                    except ShapeProblem as problem:
                        self.problems[problem.field] += 1
                        continue
                    if not shard_holds(shard, case["case_number"]):
                        if case["case_id"] not in foreign:
                            foreign.add(case["case_id"])
                            result.foreign_rows += 1
                        continue
                    case["shard"] = top
                    case["search_row"] = case_row_fingerprint(item)
                    cases[case["case_id"]] = case
                result.rows_seen += page.raw_count
        except StopRequested:
            return "stopped"
        except ResultsLimitExceeded as exc:
            children = self.court.numbers.split_shard(shard)
            total = paging.page.total_count if paging.page is not None else None
            if not children:
                DiscoveryState(db).finish_shard(sweep, shard, state="error", total_count=total, pages=pages,
                                error=f"cannot split further: {exc}"[:500])
                result.errors += 1
                return "error"
            DiscoveryState(db).finish_shard(sweep, shard, state="split", total_count=total, pages=pages, children=children)
            return "split"
        except TransientFetchError as exc:
            DiscoveryState(db).finish_shard(sweep, shard, state="error", total_count=paging.page.total_count if paging.page else None,
                            pages=pages, error=str(exc)[:500])
            result.errors += 1
            log_walk.warning("sweep %d shard %s: %s", sweep, shard, exc)
            return "error"
        ordered = sorted(cases.values(), key=operator.itemgetter("case_number"))
        return ShardInFlight(sweep, shard, ordered, DiscoveryState(db).cases_to_walk(sweep, list(cases)),
                             total=paging.page.total_count - len(foreign), pages=pages)

    def walk_cases(self, flight: "ShardInFlight", limit: int | None, rewalk_open: bool) -> str:
        """Walks the shard's next `limit` cases that need a walk (None: all that are left), each
        committed on its own: 'more' (cases left), 'done' or 'error' (the shard recorded), 'stopped'."""
        ctx, db, result = self.ctx, self.db, self.result
        walked = 0
        try:
            while flight.position < len(flight.cases):
                if limit is not None and walked >= limit:
                    return "more"
                if ctx.clock.should_stop():
                    return "stopped"
                case = flight.cases[flight.position]
                previous = flight.previous.get(case["case_id"])
                kind = walk_kind(previous, case, flight.sweep, update=self.update, rewalk_open=rewalk_open,
                                 days_since_walk=days_since(previous["walked_at"] if previous else None))
                if kind is None:
                    flight.position += 1
                    result.cases_unchanged += previous["walked_sweep"] < flight.sweep
                    continue
                try:
                    flight.rows_new += self.walk_case(flight.sweep, case, kind=kind)
                except TransientFetchError as exc:
                    flight.errors += 1
                    flight.last_error = f"{case['case_number']}: {exc}"
                flight.position += 1
                walked += 1
                self.check_evidence()
        except StopRequested:
            return "stopped"
        state = "error" if flight.errors else "done"
        result.rows_new += flight.rows_new
        if flight.errors:
            result.errors += 1
            log_walk.warning("sweep %d shard %s: %d cases failed; last: %s", flight.sweep, flight.shard,
                                 flight.errors, flight.last_error)
        DiscoveryState(db).finish_shard(flight.sweep, flight.shard, state=state, total_count=flight.total, pages=flight.pages,
                        rows_seen=len(flight.cases), rows_new=flight.rows_new,
                        error=flight.last_error and flight.last_error[:500])
        return state

    def walk_case(self, sweep: int, case: dict, *, kind: str = "new") -> int:
        """One case's record (`kind`: c44 `walk_kind`): docket entries and the files of its entries
        with documents, committed as one (parties and lower courts come later, in the details pass).
        A 'new' case's entries whose documents the table holds (the opinion pass found them) are not
        asked again, nor an 'open' one's entries the table knows; a 'changed' or 'again' walk asks
        every entry (a file may have joined one, or left). An entry left incomplete is asked again
        by `ask_again`. A case whose docket entries the court would not list, or whose answers had
        the wrong shape, is recorded, not walked (walked again next sweep)."""
        result = self.result
        case_id = case["case_id"]
        entries: list[dict] = []
        documents: list[dict] = []
        texts: list[dict] = []
        problems_before = sum(self.problems.values())
        try:
            raw_entries = self._json_list("docket_entries", "docketentries", case_id=case_id)
        except (PermanentFetchError, ShapeProblem) as exc:
            if isinstance(exc, PermanentFetchError):
                self.problems[f"docketentries HTTP {exc.http_status}"] += 1
            self.state.record_case_walk(None, case, [], [])
            return 0
        for raw in raw_entries:
            try:
                entries.append(self.court.docket_entry(raw, case_id))
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
        with_documents = [entry for entry in entries if entry["has_documents"]]
        wanted = [entry["docket_entry_id"] for entry in with_documents]
        known = (self.state.known_docket_entries_with_documents(wanted) if kind == "new"
                 else self.state.settled_entries(wanted) if kind == "open" else set())
        header = None
        listed: list[str] = []           # entries whose list answered files: what they lack was withdrawn
        for entry in with_documents:
            if entry["docket_entry_id"] in known:
                result.entries_known += 1
                continue
            try:
                found, found_texts, found_header = self.entry_files(entry, case, case["shard"])
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                continue
            emptied = False
            if not found and self.changes is not None and entry.get("files_missing") == "empty":
                found, found_texts, found_header, emptied = self._empty_again(entry, case)
            documents += found
            texts += found_texts
            header = header or found_header
            if found or emptied:
                listed.append(entry["docket_entry_id"])
        if header is None and kind == "changed" and self.changes is not None:
            header = self._header_of(case_id)
        if header is not None:
            case = {**case, **{key: value for key, value in header.items() if value is not None}}
        related = [entry["related_case_numbers"] for entry in entries if entry["related_case_numbers"]]
        case["related_case_numbers"] = ", ".join(dict.fromkeys(", ".join(related).split(", "))) if related else None
        result.cases_walked += 1
        # Answers of the wrong shape: what they held is unknown, so the case counts as seen, not walked.
        walked = sweep if sum(self.problems.values()) == problems_before else None
        with watching(self.changes) as watch:
            return self.state.record_case_walk(walked, case, entries, documents, texts, watch=watch,
                                               listed_entries=listed if walked is not None else (),
                                               title_seen=header is not None, details_due=kind != "open")

    def _empty_again(self, entry: dict, case: Mapping[str, Any]) -> tuple[list[dict], list[dict], dict | None, bool]:
        """An update's entry whose list answered no file while the archive holds documents of it: asked
        once more (the court answers `[]` now and then): (documents, texts, header, emptied), emptied
        when it answers none again: the documents the archive holds of it were withdrawn."""
        if entry["docket_entry_id"] not in self.state.known_docket_entries_with_documents([entry["docket_entry_id"]]):
            return [], [], None, False
        try:
            found, texts, header = self.entry_files(entry, case, case["shard"])
        except PermanentFetchError as exc:
            self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
            return [], [], None, False
        return found, texts, header, not found and entry.get("files_missing") == "empty"

    def _header_of(self, case_id: str) -> dict | None:
        """A changed case's header (`/cases/{id}`), when none of its files carried one this walk and the
        archive holds documents of it: its title is the one its documents take."""
        if not self.db.conn.execute("SELECT 1 FROM documents WHERE case_id = ? LIMIT 1", (case_id,)).fetchone():
            return None
        try:
            return self.court.case_header(self.client.get_json("case", case_id=case_id))
        except (PermanentFetchError, ShapeProblem):
            return None

    def write_documents(self, documents: list[dict]) -> int:
        """Documents rows a search resolved (c46, c47), committed (watched in an update): the new ones."""
        with watching(self.changes) as watch:
            return self.state.upsert_discovered(documents, watch=watch)

    def details_list(self, endpoint: str, what: str, case_id: str, normalize) -> list[dict] | None:
        """A case's parties or lower courts, normalized; None when the court gives no list (404, not a list)."""
        try:
            raw = self.client.get_json(endpoint, case_id=case_id)
        except PermanentFetchError:
            return None
        if not isinstance(raw, list):
            self.problems[what] += 1
            return None
        rows = []
        for position, item in enumerate(list_elements(raw)):     # a nested list's elements in its place
            try:
                rows.append(normalize(item, case_id, position))
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
        return rows

    # ------------------------------------------------------ resolution

    def resolve_rows(self, items: list, shard: str) -> list[dict]:
        """Search rows without documentID -> documents, through their docket entries' file lists.

        Entries whose documents the table already holds are not asked for again (an entry whose
        list was empty or withheld is asked again by `ask_again`)."""
        entries: dict[str, dict] = {}
        for item in items:
            try:
                found = self.court.search_row_entry(item)
            except ShapeProblem as problem:
                self.problems[problem.field] += 1
                self.result.unresolved += 1
                continue
            if found is None:
                self.result.unresolved += 1
                continue
            entries.setdefault(found[0]["docket_entry_id"], {"entry": found[0], "number": found[1]})
        if not entries:
            return []
        known = self.state.known_docket_entries_with_documents(list(entries))
        documents: list[dict] = []
        numbers = self.court.numbers
        for entry_id, found in entries.items():
            if entry_id in known:
                continue
            number = found["number"]
            case = {"case_id": found["entry"]["case_id"], "case_number": number,
                    "court": self.court.court_of(number), "title": None}
            try:
                found_documents, texts, header = self.entry_files(found["entry"], case, shard)
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                self.result.unresolved += 1
                continue
            case_row = {**case, **(header or {}),
                        "shard": numbers.top_level_shard(shard) if shard else numbers.shard_of_number(number),
                        "related_case_numbers": found["entry"]["related_case_numbers"]}
            # The case and entry as far as this row shows them; not walked (its other entries are
            # unknown), and its documents are the caller's to write, so they count as new there.
            self.state.record_case_walk(None, case_row if case_row.get("case_id") else None, [found["entry"]], [], texts)
            documents += found_documents
        return documents

    def ask_again(self, sweep: int, limit: int, after: str, *, oldest_first: bool = False) -> tuple[int, int, str] | None:
        """The file lists of the next `limit` entries (by id, after `after`; `oldest_first`: those asked
        longest ago) that came back empty or with withheld files before this sweep, asked once more:
        (entries asked, documents new to the table, the last entry's id), or None on a stop. A
        released withheld file is queued by the upsert."""
        rows = self.state.entries_to_ask_again(sweep, limit, after, oldest_first=oldest_first)
        new = 0
        for row in rows:
            if self.ctx.clock.should_stop():
                return None
            entry = {key: row[key] for key in ("docket_entry_id", "case_id", "entry_type", "subtype", "description",
                                               "filed_date", "has_documents", "related_case_numbers")}
            case = {"case_id": row["case_id"], "case_number": row["case_number"], "court": row["court"],
                    "title": row["title"]}
            try:
                documents, texts, _ = self.entry_files(entry, case, self.court.numbers.shard_of_number(row["case_number"]) or "")
            except PermanentFetchError as exc:
                self.problems[f"publicaccessdocuments HTTP {exc.http_status}"] += 1
                continue
            except (TransientFetchError, StopRequested):
                if self.ctx.clock.should_stop():
                    return None
                continue
            self.result.entries_asked_again += 1
            with watching(self.changes) as watch:
                new += self.state.record_case_walk(None, None, [entry], documents, texts, watch=watch)
        self.result.rows_new += new
        return len(rows), new, rows[-1]["docket_entry_id"] if rows else after

