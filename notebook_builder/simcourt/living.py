"""The living court: the simulated court's day moves on, with what a court does meanwhile, and a plan of it.

    plan = advance(corpus, days=30, seed=7)      # SimCourt.advance and POST /__sim__/advance call it

Guarantees:
- `advance` moves the court's day on by `days` and files, on the days before the new one: new
  cases (numbered on from each shard's last number) with their filings; filings in open cases of
  many years (the first three in three years spread over the record); opinions in closed cases
  that stay closed, and closing opinions; a late filing that reopens a closed case of an older
  year (2019 when it can); withdrawals (alternately listed with `documentAvailable: false` and
  gone from their entry's list, 404 either way); restorations (a document an earlier advance
  withdrew, else a planned withheld file); retitled cases (every withdrawal's and restoration's
  case, and more); description changes in open cases. Each case plays one part an advance;
  withdrawals, restorations and retitlings are in closed cases, so only their changed search row
  shows them. ADMIN cases and cases with late documents are left alone; PDFs never change.
- Deterministic: the same corpus, advances, `days`, `seed` and `activity` give the same plan.
  `month_activity(corpus, days)` is the default activity, scaled to the corpus.
- The plan (JSON): `advance`, `seed`, `days`, `day_before`, `today`, `filed_from`,
  `filed_through`, `activity`, `counts`, and `added` (documents by filed date, with why and
  opinion), `withdrawn` (with how), `restored` (with was), `changed` (documents whose metadata
  changed: fields as the archive's columns), `cases` (every case touched: row and header fields
  changed, closed before and after). Each item says `seen_by`: how an update that reads only what
  changed sees it ("case_search", "open_case", "opinion_search"). The plan is computed from the
  court's answers before and after, so it is what the court then serves.
- `update_floor` counts the requests an update that reads only what changed needs (issue 37's floor).
"""
from __future__ import annotations

import datetime as _dt
import math
import random
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qs

from .corpus import _RESPONDENTS, _SURNAMES, COURT_CODES, DESCRIPTIONS, FULL_CORPUS, hex_id, is_admin_number, yearly_cases
from .shapes import Corpus

ACTIVITY_KINDS = ("new_cases", "new_case_documents", "open_case_filings", "closed_case_opinions",
                  "closing_opinions", "reopened", "withdrawals", "restorations", "retitled",
                  "description_changes")
OPINION_DESCRIPTIONS = tuple(i for i, (_, word) in enumerate(DESCRIPTIONS) if word in ("opinion", "memorandum"))
FILING_DESCRIPTIONS = tuple(i for i, (_, word) in enumerate(DESCRIPTIONS) if word not in ("opinion", "memorandum"))
NOTICE, BRIEF = (next(i for i, (_, word) in enumerate(DESCRIPTIONS) if word == kind) for kind in ("notice", "brief"))
REOPENING = next(i for i, (text, _) in enumerate(DESCRIPTIONS) if text == "ORDER GRANTING MOTION")
REOPENED_YEAR = 2019            # the reopened case; another older year when the record lacks it
SPREAD_YEARS = 3                # the first filings in open cases go to this many different years
OPINION_WINDOW_DAYS = 7         # the opinion search's windows, as crawlers ask for them (ctrack-api.md)
OPINION_PAGE_ROWS = 25          # rows a page of the opinion search


def month_activity(corpus: Corpus, days: int) -> dict[str, int]:
    """The default activity of `days` days, scaled to the corpus (see the module docstring)."""
    years = corpus.last_year - corpus.first_year + 1
    documents = max(10, round(corpus.planned_size / years / 365 * days))
    cases_a_day = sum(yearly_cases(corpus.last_year, court) for court in COURT_CODES) \
        * corpus.planned_size / FULL_CORPUS / 365
    return {"new_cases": max(2, round(cases_a_day * days)),
            "new_case_documents": max(2, round(0.35 * documents)),
            "open_case_filings": max(4, round(0.3 * documents)),
            "closed_case_opinions": max(2, round(0.15 * documents)),
            "closing_opinions": max(1, round(0.1 * documents)),
            "reopened": max(1, round(0.01 * documents)),
            "withdrawals": max(2, round(0.01 * documents)),
            "restorations": max(1, round(0.005 * documents)),
            "retitled": max(1, round(0.01 * documents)),
            "description_changes": max(1, round(0.01 * documents))}


def case_view(corpus: Corpus, case: int, listed_withheld: set[int]) -> dict:
    """What the court shows of a case: its search row (both shapes), its header, and per document id
    (its withheld files included) the metadata the archive keeps (case_title, description)."""
    title = corpus.case_title(case)
    documents = {hex_id(corpus.seed, "document", doc): (title, corpus.description(doc))
                 for doc in corpus.case_docs(case)}
    for entry in corpus.case_entries(case):
        if entry in listed_withheld:
            documents[hex_id(corpus.seed, "unavailable", entry)] = (title, corpus.description(entry))
    return {"row": corpus.captured_case_row(case)["rowMap"], "inferred_row": corpus.case_row(case)["rowMap"],
            "header": corpus.case_header(case), "documents": documents}


class _Advance:
    """One advance: its choices, the court's changes, and the plan of them (see `advance`)."""

    def __init__(self, corpus: Corpus, days: int, seed: int, activity: dict[str, int],
                 listed_withheld: set[int], restorable: set[int]):
        self.corpus, self.days, self.seed, self.activity = corpus, days, seed, activity
        self.rng = random.Random(f"{corpus.seed}:advance:{corpus.advances}:{seed}:{days}")
        self.first_day, self.last_day = corpus.today, corpus.today + days - 1
        self.listed_withheld, self.restorable = listed_withheld, restorable
        self.why: dict[int, list[str]] = {}             # case -> its part in this advance
        self.before: dict[int, dict] = {}               # case -> case_view before (cases that existed)
        self.added: list[tuple[int, str]] = []          # (document, why)
        self.withdrawn: list[tuple[int, str]] = []      # (document, how)
        self.restored: list[tuple[str, int, int, str]] = []   # (document id, entry, case, was)
        self.retitle: list[int] = []
        self.described: list[int] = []                  # entries whose description changes
        late_cases = {corpus.doc_case[doc] for doc in corpus.late}
        self.originals = set(corpus.duplicate_of.values())     # documents another one duplicates
        self.open: list[int] = []
        self.closed: list[int] = []
        for case in range(len(corpus.case_keys)):
            if case not in late_cases and not is_admin_number(corpus.case_keys[case]):
                (self.closed if corpus.case_closed(case) else self.open).append(case)

    # ----------------------------------------------------------- choices

    def _day(self) -> int:
        return self.first_day + self.rng.randrange(self.days)

    def _claim(self, case: int, why: str) -> None:
        """`case` plays its part: what the court showed of it is kept, before anything changes."""
        self.before[case] = case_view(self.corpus, case, self.listed_withheld)
        self.why[case] = [why]

    def _take(self, pool: Sequence[int], why: str, accept=lambda case: True) -> int | None:
        """A case of `pool` no part has taken yet (and `accept`s), drawn at random, claimed; None if none."""
        start = self.rng.randrange(len(pool)) if pool else 0
        for offset in range(len(pool)):
            case = pool[(start + offset) % len(pool)]
            if case not in self.why and accept(case):
                self._claim(case, why)
                return case
        return None

    def _file(self, case: int, description: int, documents: int, why: str, day: int | None = None) -> int:
        """A new docket entry in `case` with `documents` documents; returns its day."""
        day = self._day() if day is None else day
        relevance = [self.rng.getrandbits(32) for _ in range(documents)]
        self.added += [(doc, why) for doc in self.corpus.add_entry(case, day, description, relevance)]
        return day

    def run(self) -> None:
        corpus, activity, rng = self.corpus, self.activity, self.rng
        self._new_cases(activity["new_cases"], activity["new_case_documents"])
        self._open_case_filings(activity["open_case_filings"])
        for _ in range(activity["closed_case_opinions"]):
            case = self._take(self.closed, "opinion in a closed case")
            if case is not None:
                self._file(case, rng.choice(OPINION_DESCRIPTIONS), 1, "opinion in a closed case")
        for _ in range(activity["closing_opinions"]):
            case = self._take(self.open, "closing opinion")
            if case is not None:
                corpus.status_day[case] = self._file(case, rng.choice(OPINION_DESCRIPTIONS), 1, "closing opinion")
                corpus.closed_override[case] = True
        for _ in range(activity["reopened"]):
            self._reopen()
        for position in range(activity["withdrawals"]):
            self._withdraw("unavailable" if position % 2 == 0 else "delisted")
        for _ in range(activity["restorations"]):
            self._restore()
        for _ in range(activity["retitled"]):
            case = self._take(self.closed, "retitled", lambda case: len(corpus.case_docs(case)) > 0)
            if case is not None:
                self.retitle.append(case)
        for _ in range(activity["description_changes"]):
            case = self._take(self.open, "description change", lambda case: len(corpus.case_docs(case)) > 0)
            if case is not None:
                self.described.append(rng.choice(corpus.case_entries(case)))
        for case in self.retitle:
            if "retitled" not in self.why[case]:
                self.why[case].append("retitled")
            corpus.title_override[case] = self._new_title(case)
        for entry in self.described:
            corpus.description_override[entry] = corpus.description(entry) + " (CORRECTED)"
        corpus.settle()

    def _new_cases(self, count: int, documents: int) -> None:
        corpus, rng = self.corpus, self.rng
        weights = [yearly_cases(corpus.last_year, court) for court in COURT_CODES]
        filings = sorted((self._day(), rng.choices(COURT_CODES, weights)[0]) for _ in range(count))
        last_number: dict[str, int] = {}
        cases = []
        for day, court in filings:
            shard = f"{_dt.date.fromordinal(day).year}-{court}"
            if shard not in last_number:
                known = corpus.prefix_cases(shard + "-")
                last_number[shard] = int(corpus.case_keys[known[-1]][8:]) if len(known) else 0
            last_number[shard] += 2 if rng.random() < 0.04 else 1      # dense, not gap-free
            case = corpus.add_case(f"{shard}-{last_number[shard]:04d}", day)
            corpus.closed_override[case] = False
            self.why[case] = ["new case"]
            cases.append((case, day))
        if not cases:
            return
        per_case = [0] * len(cases)
        for unit in range(documents):      # the first two to two cases: two new cases have filings
            per_case[unit if unit < min(2, len(cases)) else rng.randrange(len(cases))] += 1
        for (case, day), filings_of_case in zip(cases, per_case):
            for number in range(filings_of_case):
                self._file(case, NOTICE if number == 0 else BRIEF, 1, "new case",
                           day if number == 0 else rng.randint(day, self.last_day))

    def _open_case_filings(self, count: int) -> None:
        corpus = self.corpus
        by_year: dict[int, list[int]] = {}
        for case in self.open:
            by_year.setdefault(int(corpus.case_keys[case][:4]), []).append(case)
        years = sorted(by_year)
        spread = sorted({years[position * len(years) // SPREAD_YEARS] for position in range(SPREAD_YEARS)}) \
            if years else []
        for position in range(count):
            case = None
            if position < len(spread):
                case = self._take(by_year[spread[position]], "open case")
            if case is None:
                case = self._take(self.open, "open case")
            if case is not None:
                self._file(case, self.rng.choice(FILING_DESCRIPTIONS), 2 if self.rng.random() < 0.2 else 1,
                           "open case")

    def _reopen(self) -> None:
        corpus = self.corpus
        year = REOPENED_YEAR if corpus.first_year <= REOPENED_YEAR <= corpus.last_year - 2 \
            else max(corpus.first_year, corpus.last_year - 7)
        case = self._take([case for case in self.closed if corpus.case_keys[case].startswith(f"{year}-")], "reopened")
        if case is None:
            case = self._take(self.closed, "reopened")
        if case is not None:
            corpus.status_day[case] = self._file(case, REOPENING, 1, "reopening filing")
            corpus.closed_override[case] = False

    def _withdrawable(self, doc: int) -> bool:
        corpus = self.corpus
        return (corpus.fault(doc) == "ok" and doc not in corpus.withdrawn and doc not in corpus.late
                and doc not in corpus.duplicate_of and doc not in self.originals)

    def _withdraw(self, how: str) -> None:
        corpus = self.corpus
        case = self._take(self.closed, "withdrawal",
                          lambda case: any(self._withdrawable(doc) for doc in corpus.case_docs(case)))
        if case is not None:
            doc = self.rng.choice([doc for doc in corpus.case_docs(case) if self._withdrawable(doc)])
            corpus.withdrawn[doc] = how
            self.withdrawn.append((doc, how))
            self.retitle.append(case)

    def _restore(self) -> None:
        """A document an earlier advance withdrew, else a planned withheld file, served again."""
        corpus = self.corpus
        closed = set(self.closed)
        earlier = sorted(doc for doc in corpus.withdrawn if corpus.doc_case[doc] not in self.why
                         and corpus.doc_case[doc] in closed)
        if earlier:
            doc = self.rng.choice(earlier)
            case = corpus.doc_case[doc]
            self._claim(case, "restoration")
            del corpus.withdrawn[doc]
            self.restored.append((hex_id(corpus.seed, "document", doc), corpus.doc_entry[doc], case, "withdrawn"))
        else:
            entries = {corpus.doc_case[entry]: entry for entry in sorted(self.restorable - corpus.restored_withheld)}
            case = self._take(self.closed, "restoration", lambda case: case in entries)
            if case is None:
                return
            corpus.restored_withheld.add(entries[case])
            self.restored.append((hex_id(corpus.seed, "unavailable", entries[case]), entries[case], case, "withheld"))
        self.retitle.append(case)

    def _new_title(self, case: int) -> str:
        appellant, respondent = self.corpus.case_title(case).split(" VS. ")
        others = [name for name in _RESPONDENTS + tuple(_SURNAMES) if name != respondent]
        return f"{appellant} VS. {self.rng.choice(others)}"

    # -------------------------------------------------------------- plan

    def plan(self) -> dict:
        """What this advance changed, from what the court shows now against what it showed before."""
        corpus = self.corpus
        changed_rows: set[int] = set()
        cases, changed = [], []
        for case, why in self.why.items():
            before, after = self.before.get(case), case_view(corpus, case, self.listed_withheld)
            if before is None:
                row_fields, header_fields = sorted(after["row"]), sorted(after["header"])
            else:
                row_fields = sorted({key for shape in ("row", "inferred_row") for key in after[shape]
                                     if after[shape][key] != before[shape][key]})
                header_fields = sorted(key for key in after["header"] if after["header"][key] != before["header"][key])
            if row_fields:
                changed_rows.add(case)
            cases.append({"case_id": hex_id(corpus.seed, "case", case), "case_number": corpus.case_keys[case],
                          "new": before is None, "why": why, "row_fields": row_fields,
                          "header_fields": header_fields,
                          "closed_before": None if before is None else before["header"]["closed"],
                          "closed_after": after["header"]["closed"]})
            for document_id, (title, description) in (before or {"documents": {}})["documents"].items():
                now = after["documents"][document_id]
                fields = [name for name, old, new in (("case_title", title, now[0]),
                                                      ("description", description, now[1])) if old != new]
                if fields:
                    changed.append((case, {"document_id": document_id, "case_id": hex_id(corpus.seed, "case", case),
                                           "case_number": corpus.case_keys[case], "fields": fields}))

        def seen_by(case: int, opinion_filed: int | None = None) -> list[str]:
            ways = ["case_search"] if case in changed_rows else []
            if not corpus.case_closed(case):
                ways.append("open_case")
            if opinion_filed is not None and self.first_day <= opinion_filed <= self.last_day:
                ways.append("opinion_search")
            return ways

        def about(doc_or_entry: int, case: int) -> dict:
            return {"docket_entry_id": hex_id(corpus.seed, "entry", corpus.doc_entry[doc_or_entry]),
                    "case_id": hex_id(corpus.seed, "case", case), "case_number": corpus.case_keys[case]}

        added = []
        for doc, why in self.added:
            case, entry = corpus.doc_case[doc], corpus.doc_entry[doc]
            opinion = corpus.is_opinion(entry)
            added.append({"document_id": hex_id(corpus.seed, "document", doc), **about(doc, case),
                          "court": corpus.court_names[corpus.case_keys[case][5:7]],
                          "filed_date": _dt.date.fromordinal(corpus.doc_filed[doc]).isoformat(),
                          "description": corpus.description(doc), "opinion": opinion, "why": why,
                          "seen_by": seen_by(case, corpus.doc_filed[entry] if opinion else None)})
        added.sort(key=lambda item: (item["filed_date"], item["case_number"], item["document_id"]))
        withdrawn = [{"document_id": hex_id(corpus.seed, "document", doc), **about(doc, corpus.doc_case[doc]),
                      "how": how, "seen_by": seen_by(corpus.doc_case[doc])} for doc, how in self.withdrawn]
        restored = [{"document_id": document_id, **about(entry, case), "was": was, "seen_by": seen_by(case)}
                    for document_id, entry, case, was in self.restored]
        changed_documents = [{**item, "seen_by": seen_by(case)} for case, item in changed]
        counts = {"added": len(added), "opinions": sum(item["opinion"] for item in added),
                  "withdrawn": len(withdrawn), "restored": len(restored), "changed": len(changed_documents),
                  "cases": len(cases), "new_cases": sum(case["new"] for case in cases),
                  "case_rows_changed": len(changed_rows)}
        return {"advance": corpus.advances, "seed": self.seed, "days": self.days,
                "day_before": _dt.date.fromordinal(self.first_day).isoformat(),
                "today": _dt.date.fromordinal(corpus.today).isoformat(),
                "filed_from": _dt.date.fromordinal(self.first_day).isoformat(),
                "filed_through": _dt.date.fromordinal(self.last_day).isoformat(),
                "activity": dict(self.activity), "counts": counts, "added": added, "withdrawn": withdrawn,
                "restored": restored, "changed": changed_documents,
                "cases": sorted(cases, key=lambda case: case["case_number"])}


def advance(corpus: Corpus, days: int = 30, seed: int = 0, activity: dict[str, int] | None = None, *,
            listed_withheld: Iterable[int] = (), restorable: Iterable[int] = ()) -> dict:
    """Moves the court's day on by `days` with that span's activity (`month_activity`, with the counts
    in `activity` instead); returns the plan. `listed_withheld`: the entries whose planned withheld
    file the court lists (their documents' metadata changes are planned too); `restorable`: those
    whose withheld file a restoration may serve."""
    if days < 1:
        raise ValueError("days must be at least 1")
    counts = activity_counts(month_activity(corpus, days), activity)
    work = _Advance(corpus, days, seed, counts, set(listed_withheld), set(restorable))
    work.run()
    corpus.advances += 1
    corpus.today += days
    corpus.horizon = corpus.today - 1
    return work.plan()


def activity_counts(defaults: dict[str, int], activity: dict[str, int] | None) -> dict[str, int]:
    """`defaults` (an advance's activity by kind) with the counts `activity` gives instead; ValueError
    naming an unknown kind, or for a count below 0."""
    unknown = set(activity or {}) - set(defaults)
    if unknown:
        raise ValueError(f"unknown activity {sorted(unknown)}; known: {', '.join(defaults)}")
    counts = {**defaults, **{kind: int(value) for kind, value in (activity or {}).items()}}
    if any(value < 0 for value in counts.values()):
        raise ValueError("activity counts must be >= 0")
    return counts


def advance_query(query: str) -> tuple[int, int, dict[str, int]]:
    """(days, seed, activity) of `POST /__sim__/advance?days=30&seed=0[&<activity kind>=N]` (30 days and
    seed 0 unless given); ValueError for a value that is not a whole number."""
    values = parse_qs(query)
    days, seed = (int(values.pop(name, [default])[0]) for name, default in (("days", "30"), ("seed", "0")))
    return days, seed, {name: int(given[0]) for name, given in values.items()}


def changed_cases(corpus: Corpus, plans: Iterable[dict]) -> set[int]:
    """The cases whose search row the advances of `plans` changed or added."""
    return {corpus.find_case(case["case_id"]) for plan in plans for case in plan["cases"] if case["row_fields"]}


def update_floor(corpus: Corpus, plans: Sequence[dict], shards: Iterable[str], *, page_size: int,
                 opinions_from: _dt.date, max_page: int = 1000, results_limit: int = 10000) -> dict[str, int]:
    """The requests an update needs after `plans` (the advances since the last complete crawl) when it
    reads only what changed (issue 37's floor), against the court as it is now:
    - "case search pages": one pass over `shards`' case search (`page_size` rows a page), a shard
      holding more cases than `results_limit` paged as its next-digit children (the split learnt
      once, by the crawl: its over-limit page is not asked again);
    - "opinion search pages": the 7-day windows from `opinions_from` through the court's day, both courts;
    - "docket-entry lists": one per case open now or whose search row changed (new cases included);
    - "file lists": one per new entry with documents, and per entry with documents of a case whose
      search row changed (the only way a withdrawal shows);
    - "downloads": one per added or restored document."""
    rows = min(page_size, max_page)
    search_pages = sum(_case_search_pages(corpus, shard, rows, results_limit) for shard in shards)
    opinion_pages = 0
    by_court: dict[tuple[int, str], int] = {}
    for filed, entry in corpus.opinion_entries():
        if opinions_from.toordinal() <= filed <= corpus.today:
            window = (filed - opinions_from.toordinal()) // OPINION_WINDOW_DAYS
            key = (window, corpus.case_keys[corpus.doc_case[entry]][5:7])
            by_court[key] = by_court.get(key, 0) + 1
    windows = -(-(corpus.today - opinions_from.toordinal() + 1) // OPINION_WINDOW_DAYS)
    for window in range(windows):
        for court in COURT_CODES:
            opinion_pages += max(1, math.ceil(by_court.get((window, court), 0) / OPINION_PAGE_ROWS))
    changed = changed_cases(corpus, plans)
    walked = changed | {case for case in range(len(corpus.case_keys)) if not corpus.case_closed(case)}
    new_entries = {entry for plan in plans for item in plan["added"]
                   for entry in [corpus.find_entry(item["docket_entry_id"])[0]]}
    old_entries = {entry for case in changed for entry in corpus.case_entries(case)} - new_entries
    downloads = sum(plan["counts"]["added"] + plan["counts"]["restored"] for plan in plans)
    return {"case search pages": search_pages, "opinion search pages": opinion_pages,
            "docket-entry lists": len(walked), "file lists": len(new_entries) + len(old_entries),
            "downloads": downloads}


def _case_search_pages(corpus: Corpus, shard: str, rows: int, results_limit: int) -> int:
    """The case search's pages of a shard, split as the pipeline splits one over the results limit."""
    count = len(corpus.prefix_cases(shard))
    children = _shard_children(shard)
    if count > results_limit and children:
        return sum(_case_search_pages(corpus, child, rows, results_limit) for child in children)
    return max(1, math.ceil(min(count, results_limit) / rows))


def _shard_children(shard: str) -> list[str]:
    """A shard's next-digit children (`2019-CA` -> `2019-CA-0`...; `2019-CA-01` -> `2019-CA-010`...);
    [] for an ADMIN shard or a whole case number."""
    if "ADMIN" in shard or len(shard) >= 12:
        return []
    stem = shard + "-" if len(shard) == 7 else shard
    return [stem + digit for digit in "0123456789"]
