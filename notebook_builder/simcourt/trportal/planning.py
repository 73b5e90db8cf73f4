"""Planning a TR Portal corpus: who files what, when, under which number, and who may read it.

Guarantees (corpus.py's `TRCorpus` calls `plan` once):
- Exactly `cases` cases, apportioned to the system's courts by their yearly cases over the days each
  sat (each court with a case when there are enough), filed on days before the court's day, in
  filing order; numbered in the system's form at the real record's pace (`_numbers`).
- A case is decided 45 to 700 days after it was filed (one in twenty never is); a closed case ends
  with a dispositional entry of the system's kinds
  (with one document, or none for a kind without one) while the document budget lasts; in the
  publications mode a decision falls on the system's release weekday when it can. Then the rest of
  the `docs` documents as filings (a notice of appeal first; one entry in seven has two documents),
  and one to three entries without documents a case.
- Each document's access state from the system's profile (`draw_state`); a secured entry's
  documents UNAVAILABLE unless the corpus's `secured_state` is "drawn".
"""
from __future__ import annotations

import datetime as _dt
import math
import random
from collections.abc import Sequence

from .systems import (BARE_ENTRIES, FILINGS, KIND_INDEX, KINDS, PURCHASABLE, UNAVAILABLE, VIEWABLE, CourtSystem,
                      EntryKind)

CATEGORY_WEIGHTS = ((0, 45), (1, 40), (2, 15))      # Civil Appeal, Criminal Appeal, Original Proceeding
REAL_DISPOSITION_SHARE = {"nevada": 0.40}           # real_counts: closed cases with a dispositional entry
SMALL_DISPOSITION_SHARE = 0.85
SECURED_SHARE = 0.03


def weighted(rng: random.Random, table: Sequence[tuple[object, int]]):
    """One item of an (item, weight) table."""
    return rng.choices([item for item, _ in table], [weight for _, weight in table])[0]


def business_second(rng: random.Random) -> int:
    """A moment of a working day (08:00 to 17:00 local), in seconds after midnight."""
    return 8 * 3600 + rng.randrange(9 * 3600)


def draw_state(profile: str, kind: EntryKind, day: _dt.date, roll: float) -> int:
    """A document's access state in a system's access profile (README §2.5)."""
    if profile == "nevada":
        return VIEWABLE if kind.opinion or roll < 0.85 else UNAVAILABLE
    if profile == "alabama":   # docket documents from March 2022 need registration; released ones do not
        return VIEWABLE if kind.published or day < _dt.date(2022, 3, 1) else UNAVAILABLE
    if profile in ("oregon", "north-dakota"):   # many purchasable
        if kind.dispositional:
            viewable = 0.6 if profile == "oregon" else 0.8
        else:
            viewable = 0.35 if profile == "oregon" else 0.45
        if roll < viewable:
            return VIEWABLE
        return UNAVAILABLE if roll > 0.93 and not kind.dispositional else PURCHASABLE
    return VIEWABLE


def apportion(total: int, weights: Sequence[float], minimum: int = 0) -> list[int]:
    """`total` split by `weights` (largest remainder), each item of positive weight given `minimum` first."""
    counts = [minimum if weight > 0 else 0 for weight in weights]
    rest = total - sum(counts)
    if rest < 0:
        counts = [0] * len(weights)
        rest = total
    whole = sum(weights) or 1
    exact = [rest * weight / whole for weight in weights]
    shares = [math.floor(value) for value in exact]
    order = sorted(range(len(weights)), key=lambda i: (shares[i] - exact[i], i))
    for i in order[:rest - sum(shares)]:
        shares[i] += 1
    return [count + share for count, share in zip(counts, shares)]


def plan(corpus, cases: int, docs: int, first_day: int) -> None:
    """Fills `corpus`'s arrays (see the module docstring)."""
    system: CourtSystem = corpus.system
    rng = random.Random(f"trportal:{corpus.seed}:{system.name}:plan")
    last_day = corpus.today - 1
    starts = [max(first_day, court.since.toordinal()) if court.since else first_day for court in system.courts]
    weights = [court.yearly_cases * max(0, last_day - start + 1) for court, start in zip(system.courts, starts)]
    counts = apportion(cases, weights, minimum=1 if cases >= len(system.courts) else 0)
    filings = sorted((rng.randint(start, last_day), court)
                     for court, (count, start) in enumerate(zip(counts, starts)) for _ in range(count))
    numbers = _numbers(system, filings, corpus.today, corpus.last_sequence)
    closing: list[int] = []
    for (filed, court), number in zip(filings, numbers):
        corpus.case_court.append(court)
        corpus.case_numbers.append(number)
        corpus.case_filed.append(filed)
        code = system.courts[court].code
        category = 1 if "crim" in code else 0 if "civ" in code else weighted(rng, CATEGORY_WEIGHTS)
        corpus.case_category.append(category)
        closing.append(_closing_day(system, rng, filed, last_day))
    entries: list[list[tuple[int, int, int, int]]] = [[] for _ in filings]   # (day, second, kind, documents)
    budget = docs
    share = REAL_DISPOSITION_SHARE.get(system.name, 0.6) if corpus.real_counts else SMALL_DISPOSITION_SHARE
    for case in rng.sample(range(len(filings)), len(filings)):
        if not closing[case] or rng.random() >= share:
            continue
        kind = weighted(rng, system.dispositions(system.courts[filings[case][1]]))
        documents = 1 if kind.document_name else 0
        if documents > budget:
            continue
        budget -= documents
        entries[case].append((closing[case], business_second(rng), KIND_INDEX[kind], documents))
    while budget > 0:
        case = rng.randrange(len(filings))
        end = closing[case] - 1 if closing[case] else last_day
        documents = 2 if budget >= 2 and rng.random() < 1 / 7 else 1
        budget -= documents
        entries[case].append((rng.randint(filings[case][0], max(filings[case][0], end)), business_second(rng),
                              -1, documents))
    for case, (filed, _) in enumerate(filings):
        end = closing[case] or last_day
        for _ in range(rng.randint(1, 3)):
            kind = BARE_ENTRIES[rng.randrange(len(BARE_ENTRIES))]
            entries[case].append((rng.randint(filed, max(filed, end)), business_second(rng), KIND_INDEX[kind], 0))
    for case, (filed, _) in enumerate(filings):
        corpus.case_first_entry.append(len(corpus.entry_case))
        _write_case(corpus, rng, case, sorted(entries[case]))
        corpus.case_closed_on.append(closing[case])
    corpus.case_first_entry.append(len(corpus.entry_case))
    corpus.entry_first_doc.append(len(corpus.doc_entry))


def _closing_day(system: CourtSystem, rng: random.Random, filed: int, last_day: int) -> int:
    """The day a case was decided, 45 to 700 days after it was filed (0: not yet, or never: one in twenty)."""
    day = filed + rng.randint(45, 700)
    if rng.random() < 0.05 or day > last_day:
        return 0
    since = system.publications_since
    if system.opinion_mode == "publications" and (since is None or day >= since.toordinal()):
        release = day - (_dt.date.fromordinal(day).weekday() - system.release_weekday) % 7
        day = release if release > filed else release + 7 if release + 7 <= last_day else day
    return day


def _write_case(corpus, rng: random.Random, case: int, planned: list[tuple[int, int, int, int]]) -> None:
    """The case's entries in filing order: filings get their kinds here (a notice of appeal first)."""
    system = corpus.system
    first_filing = True
    for day, second, kind_index, documents in planned:
        if kind_index < 0:
            kind = FILINGS[0] if first_filing else FILINGS[1 + rng.randrange(len(FILINGS) - 1)]
            first_filing = False
            kind_index = KIND_INDEX[kind]
        kind = KINDS[kind_index]
        secured = documents > 0 and rng.random() < (SECURED_SHARE if not kind.dispositional else
                                                   0.02 if system.name == "nevada" else 0.0)
        entry = len(corpus.entry_case)
        corpus.entry_case.append(case)
        corpus.entry_day.append(day)
        corpus.entry_second.append(second)
        corpus.entry_kind.append(kind_index)
        corpus.entry_secured.append(1 if secured else 0)
        corpus.entry_first_doc.append(len(corpus.doc_entry))
        for part in range(documents):
            roll = rng.random()
            if secured and corpus.secured_state == "unavailable":
                state = UNAVAILABLE
            else:
                state = draw_state(system.access, kind, _dt.date.fromordinal(day), roll)
            corpus.doc_entry.append(entry)
            corpus.doc_state.append(state)
            corpus.doc_appendix.append(1 if part else 0)


def sequence_key(system: CourtSystem, court_index: int, year: int) -> object:
    """What a case number's sequence runs over: a court's year, a court, or (Nevada) the system."""
    if system.yearly_numbers:
        return (court_index, year)
    return "" if system.numbering == "nevada" else system.courts[court_index].prefix


def _numbers(system: CourtSystem, filings: list[tuple[int, int]], today: int, last: dict) -> list[str]:
    """Each case's number, rising with its filing day at the real record's pace; `last` keeps each
    sequence's last number (living.py numbers on from it)."""
    numbers: list[str] = []
    for day, court_index in filings:
        court = system.courts[court_index]
        date = _dt.date.fromordinal(day)
        key = sequence_key(system, court_index, date.year)
        if system.yearly_numbers:
            target = 1 + int(court.yearly_cases * (date.timetuple().tm_yday - 1) / 366)
        else:
            rate = sum(c.yearly_cases for i, c in enumerate(system.courts) if sequence_key(system, i, 0) == key)
            target = int(system.sequence_now[key] - rate * (today - day) / 365.25)
        sequence = max(last.get(key, 0) + 1, target)
        last[key] = sequence
        numbers.append(system.case_number(court, date.year, sequence))
    return numbers
