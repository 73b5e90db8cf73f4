"""The living TR Portal court: its day moves on with what a court does meanwhile, and the plan of it.

    plan = advance(corpus, shapes, days=30, seed=7)     # SimTRPortal.advance and POST /__sim__/advance

Guarantees:
- `advance` moves the court's day on by `days` and files on the days before the new one (never on or
  after it): new cases (numbered on from each sequence's last number) with a notice of appeal;
  filings in open cases; opinions in the system's mode, each closing an open case (Nevada: a
  document of docket entry type 1000014 or 1000018, in the document search; Alabama, Florida: a
  decision on the release weekday when the span has one, so a new release list; Oregon, North
  Dakota, Wyoming: a dispositional entry with its document); one document made public
  (PURCHASABLE, IN_CART or UNAVAILABLE -> VIEWABLE); one that stops being public (VIEWABLE ->
  PURCHASABLE where the system sells documents, UNAVAILABLE elsewhere: its download is then a 302
  wall); a retitled closed case. A secured entry's documents stay as they are.
- Deterministic: the same corpus, advances, `days`, `seed` and `activity` give the same plan.
  `month_activity(corpus, days)` is the default activity (kinds in ACTIVITY_KINDS), scaled to the
  corpus; `activity` overrides any count.
- The plan (JSON): `advance`, `seed`, `days`, `day_before`, `today`, `filed_from`, `filed_through`,
  `activity`, `counts`, `added` (every new document: ids, case, court, filed instant, name,
  state, viewable, opinion, why), `made_public` and `withdrawn` (document, case, state before and
  after), `cases` (every case touched: new, why, fields changed, closed before and after) and
  `publications` (the new release lists: id, court, number, their documents).
"""
from __future__ import annotations

import datetime as _dt
import random

from ..living import activity_counts
from .planning import business_second, draw_state, sequence_key, weighted
from .systems import CATEGORY_NAMES, FILINGS, PURCHASABLE, STATE_NAMES, UNAVAILABLE, VIEWABLE

ACTIVITY_KINDS = ("new_cases", "filings", "opinions", "made_public", "withdrawn", "retitled")
SELLING_PROFILES = ("oregon", "north-dakota")      # a document that stops being public is then for sale


def month_activity(corpus, days: int) -> dict[str, int]:
    """The default activity of `days` days, scaled to the corpus's filings a day."""
    span = max(1, corpus.today - _dt.date(corpus.first_year, 1, 1).toordinal())
    new_cases = max(2, round(corpus.planned_cases / span * days))
    return {"new_cases": new_cases, "filings": max(3, new_cases), "opinions": max(2, round(0.6 * new_cases)),
            "made_public": 1, "withdrawn": 1, "retitled": 1}


class _Advance:
    """One advance: its choices, the court's changes and the plan of them."""

    def __init__(self, corpus, shapes, days: int, seed: int, activity: dict[str, int]):
        self.corpus, self.shapes, self.days, self.seed, self.activity = corpus, shapes, days, seed, activity
        self.rng = random.Random(f"trportal:{corpus.seed}:advance:{corpus.advances}:{seed}:{days}")
        self.first_day, self.last_day = corpus.today, corpus.today + days - 1
        self.before: dict[int, dict | None] = {}     # case -> what it showed before (None: new)
        self.why: dict[int, list[str]] = {}
        self.added: list[tuple[int, str]] = []       # (document, why)
        self.added_entries: list[int] = []
        self.flipped: dict[str, list[tuple[int, int]]] = {"made_public": [], "withdrawn": []}   # (doc, state before)
        self.publications_before = {(court, day) for court, day, _ in corpus.publications()}

    def _touch(self, case: int, why: str, new: bool = False) -> None:
        if case not in self.before:
            self.before[case] = None if new else self._view(case)
        self.why.setdefault(case, []).append(why)

    def _view(self, case: int) -> dict:
        return {"caseTitle": self.corpus.case_title(case), "closedFlag": self.corpus.case_closed(case)}

    def _file(self, case: int, day: int, kind, why: str) -> None:
        corpus = self.corpus
        documents = 1 if kind.document_name else 0
        states = [draw_state(corpus.system.access, kind, _dt.date.fromordinal(day), self.rng.random())
                  for _ in range(documents)]
        entry = corpus.add_entry(case, day, business_second(self.rng), kind, documents, states)
        self.added_entries.append(entry)
        self.added += [(doc, why) for doc in corpus.entry_docs(entry)]

    def run(self) -> None:
        corpus, rng, activity = self.corpus, self.rng, self.activity
        self._new_cases(activity["new_cases"])
        open_cases = [case for case in range(corpus.case_count)
                      if not corpus.case_closed(case) and corpus.case_filed[case] < self.first_day]
        for _ in range(activity["filings"]):
            if open_cases:
                case = rng.choice(open_cases)
                self._touch(case, "filing")
                self._file(case, self._day_from(corpus.case_filed[case]), FILINGS[1 + rng.randrange(len(FILINGS) - 1)],
                           "filing")
        deciding = rng.sample(open_cases, min(len(open_cases), activity["opinions"]))
        for case in deciding:
            kinds = [(kind, weight) for kind, weight in corpus.system.dispositions(corpus.court_of_case(case))
                     if kind.document_name]
            kind = weighted(rng, kinds)
            day = self._decision_day()
            self._touch(case, "opinion" if kind.opinion else "decision")
            self._file(case, day, kind, "opinion" if kind.opinion else "decision")
            corpus.case_closed_on[case] = day
        settled = {doc for doc, _ in self.added}       # new documents, secured ones and those flipped already
        settled |= {doc for doc in range(corpus.doc_count) if corpus.entry_secured[corpus.doc_entry[doc]]}
        for _ in range(activity["made_public"]):
            self._flip("made_public", lambda doc: corpus.doc_state[doc] != VIEWABLE and doc not in settled,
                       VIEWABLE, settled)
        gone = PURCHASABLE if corpus.system.access in SELLING_PROFILES else UNAVAILABLE
        for _ in range(activity["withdrawn"]):
            self._flip("withdrawn", lambda doc: corpus.doc_state[doc] == VIEWABLE and doc not in settled, gone,
                       settled)
        closed = [case for case in range(corpus.case_count) if corpus.case_closed(case) and case not in self.why]
        for case in rng.sample(closed, min(len(closed), activity["retitled"])):
            self._touch(case, "retitled")
            corpus.title_override[case] = self._new_title(case)
        corpus.changed()

    def _day_from(self, earliest: int) -> int:
        return self.rng.randint(max(self.first_day, earliest), self.last_day)

    def _decision_day(self) -> int:
        """A day of the span; in the publications mode the release weekday when the span has one."""
        system = self.corpus.system
        if system.opinion_mode == "publications":
            release = [day for day in range(self.first_day, self.last_day + 1)
                       if _dt.date.fromordinal(day).weekday() == system.release_weekday]
            if release:
                return self.rng.choice(release)
        return self._day_from(self.first_day)

    def _new_cases(self, count: int) -> None:
        corpus, rng, system = self.corpus, self.rng, self.corpus.system
        filings = []
        for _ in range(count):
            day = self._day_from(self.first_day)
            active = [(index, court.yearly_cases) for index, court in enumerate(system.courts)
                      if court.since is None or court.since.toordinal() <= day]
            filings.append((day, weighted(rng, active)))
        for day, court in sorted(filings):
            year = _dt.date.fromordinal(day).year
            key = sequence_key(system, court, year)
            number = corpus.last_sequence[key] = corpus.last_sequence.get(key, 0) + (2 if rng.random() < 0.04 else 1)
            code = system.courts[court].code
            category = 1 if "crim" in code else 0 if "civ" in code else rng.randrange(len(CATEGORY_NAMES))
            case = corpus.add_case(court, system.case_number(system.courts[court], year, number), day, category)
            self._touch(case, "new case", new=True)
            self._file(case, day, FILINGS[0], "new case")

    def _flip(self, change: str, eligible, state: int, settled: set[int]) -> None:
        """One document `eligible` takes to `state` (none when none is); it is then `settled`."""
        corpus = self.corpus
        candidates = [doc for doc in range(corpus.doc_count) if eligible(doc)]
        if not candidates:
            return
        doc = self.rng.choice(candidates)
        settled.add(doc)
        self.flipped[change].append((doc, corpus.doc_state[doc]))
        corpus.doc_state[doc] = state
        self._touch(corpus.entry_case[corpus.doc_entry[doc]], change.replace("_", " "))

    def _new_title(self, case: int) -> str:
        title = self.corpus.case_title(case)
        for separator in (" VS. ", " v. "):
            if separator in title:
                first, rest = title.split(separator, 1)
                suffix = rest[rest.index(" ("):] if self.corpus.system.title_style == "nevada" and " (" in rest else ""
                other = self.rng.choice(("ESTATE OF ", "THE ")) + rest.replace(suffix, "")
                return f"{first}{separator}{other if suffix else other.title()}{suffix}"
        return f"{title} (AMENDED)"

    # ------------------------------------------------------------------ plan

    def plan(self) -> dict:
        corpus, shapes = self.corpus, self.shapes

        def about(doc: int) -> dict:
            entry = corpus.doc_entry[doc]
            case = corpus.entry_case[entry]
            return {"document_id": corpus.uuid("document", doc), "docket_entry_id": corpus.uuid("entry", entry),
                    "case_id": corpus.uuid("case", case), "case_number": corpus.case_numbers[case],
                    "court_id": corpus.court_guid(corpus.case_court[case]),
                    "court": corpus.court_of_case(case).display_name}

        added = [{**about(doc), "filed_date": shapes.entry_filed(corpus.doc_entry[doc]),
                  "document_name": shapes.document_name(doc), "state": STATE_NAMES[corpus.doc_state[doc]],
                  "viewable": corpus.doc_state[doc] == VIEWABLE, "opinion": corpus.kind(corpus.doc_entry[doc]).opinion,
                  "why": why} for doc, why in self.added]
        flips = {change: [{**about(doc), "state_before": STATE_NAMES[before],
                           "state_after": STATE_NAMES[corpus.doc_state[doc]]} for doc, before in pairs]
                 for change, pairs in self.flipped.items()}
        cases = []
        for case, why in self.why.items():
            before, after = self.before[case], self._view(case)
            cases.append({"case_id": corpus.uuid("case", case), "case_number": corpus.case_numbers[case],
                          "court_id": corpus.court_guid(corpus.case_court[case]), "new": before is None, "why": why,
                          "fields": sorted(after) if before is None else
                          sorted(key for key in after if after[key] != before[key]),
                          "closed_before": None if before is None else before["closedFlag"],
                          "closed_after": after["closedFlag"]})
        publications = [{"publication_id": corpus.publication_uuid(court, day), "court_id": corpus.court_guid(court),
                         "publication_number": shapes.publication_head(court, day, entries)["publicationNumber"],
                         "documents": [corpus.uuid("document", doc) for entry in entries
                                       for doc in corpus.entry_docs(entry)]}
                        for court, day, entries in corpus.publications()
                        if (court, day) not in self.publications_before]
        counts = {"added": len(added), "opinions": sum(item["opinion"] for item in added),
                  "made_public": len(flips["made_public"]), "withdrawn": len(flips["withdrawn"]), "cases": len(cases),
                  "new_cases": sum(case["new"] for case in cases), "publications": len(publications)}
        return {"advance": corpus.advances, "seed": self.seed, "days": self.days,
                "day_before": _dt.date.fromordinal(self.first_day).isoformat(),
                "today": _dt.date.fromordinal(corpus.today).isoformat(),
                "filed_from": _dt.date.fromordinal(self.first_day).isoformat(),
                "filed_through": _dt.date.fromordinal(self.last_day).isoformat(),
                "activity": dict(self.activity), "counts": counts,
                "added": sorted(added, key=lambda item: (item["filed_date"], item["document_id"])),
                "made_public": flips["made_public"], "withdrawn": flips["withdrawn"],
                "cases": sorted(cases, key=lambda item: item["case_number"]), "publications": publications}


def advance(corpus, shapes, days: int = 30, seed: int = 0, activity: dict[str, int] | None = None) -> dict:
    """Moves the court's day on by `days` with that span's activity; returns the plan (see the module docstring)."""
    if days < 1:
        raise ValueError("days must be at least 1")
    work = _Advance(corpus, shapes, days, seed, activity_counts(month_activity(corpus, days), activity))
    work.run()
    corpus.advances += 1
    corpus.today += days
    return work.plan()
