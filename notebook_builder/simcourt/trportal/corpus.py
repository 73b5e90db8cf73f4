"""The simulated TR Portal's planned corpus: every case, docket entry and document of a system, from a seed.

Guarantees:
- `TRCorpus(system, cases=, docs=, seed=, today=)` plans exactly `cases` cases and `docs` documents
  over `first_year`..the day before `today` (nothing is filed on or after the court's day), every
  court of the system with at least one case when there are enough; the same arguments give the
  same corpus. Cases are numbered in filing order (`case_number`: the system's form, numbers rising
  with the filing day at the real record's pace, so a small corpus has sparse numbers and a full one
  dense numbers), filed at 00:00:00.000 local time. Closed cases end with a dispositional entry of the
  system's kinds (systems.py) in most; filings and entries without documents fill the dockets.
- `real_counts`: the real record's order (each court's yearly cases from `real_first_year`; Nevada
  about 59,000 cases numbered past 90,000 and 42,000 documents). Metadata is held in compact arrays;
  nothing is generated per document until it is asked for, so a full-scale court starts in seconds.
- Each document has an access state (systems.py: VIEWABLE, PURCHASABLE, IN_CART, UNAVAILABLE) drawn
  from the system's access profile (`draw_state`); a secured entry's documents are UNAVAILABLE
  (`secured_state` "unavailable") or drawn like the others ("drawn": the flag says nothing).
- UUIDs (`uuid`, `find`) carry their index in their last 48 bits (a keyed permutation), so a UUID
  is looked up without a table and one not made here is never found; a lookup ignores case.
- Publications (`publications`): the published entries since the system's `publications_since`,
  one release list a court and day. Citation numbers (`citation_number`): each year's opinions in
  filing order (Nevada: its published opinions only).
- living.py adds cases and entries after the plan (`add_case`, `add_entry`) and changes states,
  titles and closings; `changed()` drops what was derived from them.
"""
from __future__ import annotations

import bisect
import datetime as _dt
import hashlib
import re
from array import array
from collections.abc import Sequence

from . import systems
from .planning import plan
from .systems import CATEGORY_NAMES, KIND_INDEX, KINDS, CourtSystem, EntryKind, TRCourt

SECURED_STATES = ("unavailable", "drawn")
_MASK48 = (1 << 48) - 1
_MULTIPLIER = 0x9E3779B97F4B           # odd: a permutation of 48-bit numbers
_INVERSE = pow(_MULTIPLIER, -1, 1 << 48)
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
GIVEN = ("Jane", "John", "Maria", "James", "Linda", "Robert", "Ana", "David", "Kasie", "Byron", "Tyler", "Julie")
SURNAMES = ("ZHANG", "GARCIA", "SMITH", "ROBINSON", "CARTER", "POWERS", "SINGH", "ENGLE", "CHABOT", "LEWIS",
            "MOORE", "JOHNSON", "BENNETT", "MUNSON", "HAYES", "PALMER", "JUDD", "WALKER", "NGUYEN", "ROSENBROOK",
            "FRIEDLANDER", "ULVANG", "DEL TORO", "RICHT", "CAUSEY", "PERRY", "TISSIER", "SESSIONS", "EVANS", "WATTS")
BUSINESSES = ("Lennar Communities, LLC", "Vegas Aqua, LLC", "Wells Fargo Bank, N.A.", "Shoe Show, Inc.",
              "City of Las Vegas", "Clark County School District", "Department of Human Resources", "Acme Mining Co.")


def _salt(seed: int, kind: str) -> int:
    return int.from_bytes(hashlib.sha256(f"trportal-salt:{seed}:{kind}".encode()).digest()[:6], "big")


def make_uuid(seed: int, kind: str, index: int) -> str:
    """The lowercase UUID of item `index` of `kind` (random-looking, version 4)."""
    head = hashlib.sha256(f"trportal:{seed}:{kind}:{index}".encode()).hexdigest()
    tail = ((index * _MULTIPLIER) & _MASK48) ^ _salt(seed, kind)
    return f"{head[:8]}-{head[8:12]}-4{head[13:16]}-{'89ab'[int(head[16], 16) % 4]}{head[17:20]}-{tail:012x}"


def find_uuid(seed: int, kind: str, text: str, limit: int) -> int | None:
    """The index below `limit` whose UUID of `kind` is `text` (any letter case), or None."""
    text = text.strip().lower()
    if not UUID_PATTERN.fullmatch(text):
        return None
    index = ((int(text[-12:], 16) ^ _salt(seed, kind)) * _INVERSE) & _MASK48
    return index if index < limit and make_uuid(seed, kind, index) == text else None


class TRCorpus:
    """The planned corpus (see the module docstring). Read-only but for living.py's changes."""

    def __init__(self, system: CourtSystem, *, cases: int | None = None, docs: int = 120, seed: int = 1,
                 today: _dt.date | None = None, first_year: int | None = None, real_counts: bool = False,
                 secured_state: str = "unavailable"):
        if secured_state not in SECURED_STATES:
            raise ValueError(f"secured_state must be one of {SECURED_STATES}")
        self.system, self.seed, self.real_counts = system, seed, real_counts
        self.secured_state = secured_state
        self.today = (today or _dt.date.today()).toordinal()
        self.first_year = first_year or (system.real_first_year if real_counts else
                                         _dt.date.fromordinal(self.today).year - 6)
        first_day = _dt.date(self.first_year, 1, 1).toordinal()
        if first_day >= self.today:
            raise ValueError("first_year must be before the court's day")
        if real_counts and cases is None:
            cases = self._real_case_count(first_day)
            docs = system.real_docs or round(cases * 1.5)
        if cases is None:
            cases = max(len(system.courts), round(docs / 1.6))
        if cases < 1 or docs < 0:
            raise ValueError("need cases >= 1 and docs >= 0")
        self.case_court = array("B")
        self.case_numbers: list[str] = []
        self.case_filed = array("I")
        self.case_closed_on = array("I")      # the day it was decided; 0: open
        self.case_category = array("B")
        self.case_first_entry = array("I")    # + a sentinel
        self.entry_case = array("I")
        self.entry_day = array("I")
        self.entry_second = array("I")        # seconds after the entry day's local midnight
        self.entry_kind = array("H")
        self.entry_secured = array("B")
        self.entry_first_doc = array("I")     # + a sentinel
        self.doc_entry = array("I")
        self.doc_state = array("B")
        self.doc_appendix = array("B")        # the second document of its entry
        self.case_extra: dict[int, list[int]] = {}    # case -> entries living.py filed in it
        self.last_sequence: dict[object, int] = {}    # a case-number sequence -> its last number
        self.title_override: dict[int, str] = {}
        self.planned_cases = 0
        self.advances = 0
        self._derived: dict[str, object] = {}
        plan(self, cases, docs, first_day)
        self.planned_cases = self.case_count     # living.py's cases come after these

    def _real_case_count(self, first_day: int) -> int:
        """Each court's yearly cases over the days it sat since `first_day`."""
        total = sum(court.yearly_cases * max(0.0, (self.today - max(first_day, court.since.toordinal() if court.since
                                                                     else first_day)) / 365.25)
                    for court in self.system.courts)
        return max(len(self.system.courts), round(total))

    # ---------------------------------------------------------------- sizes

    @property
    def case_count(self) -> int:
        return len(self.case_court)

    @property
    def entry_count(self) -> int:
        return len(self.entry_case)

    @property
    def doc_count(self) -> int:
        return len(self.doc_entry)

    # -------------------------------------------------------------- UUIDs

    def uuid(self, kind: str, index: int) -> str:
        """The UUID of an item as the system writes it (Alabama: UPPERCASE)."""
        text = make_uuid(self.seed, kind, index)
        return text.upper() if self.system.uppercase_uuids else text

    def court_guid(self, court: int) -> str:
        guid = self.system.courts[court].resource_id
        return guid.upper() if self.system.uppercase_uuids else guid

    def find(self, kind: str, text: str) -> int | None:
        limit = {"case": self.case_count, "entry": self.entry_count, "document": self.doc_count}[kind]
        return find_uuid(self.seed, kind, text, limit)

    def find_court(self, guid: str) -> int | None:
        wanted = guid.strip().lower()
        return next((index for index, court in enumerate(self.system.courts) if court.resource_id == wanted), None)

    # ---------------------------------------------------------- the record

    def court_of_case(self, case: int) -> TRCourt:
        return self.system.courts[self.case_court[case]]

    def kind(self, entry: int) -> EntryKind:
        return KINDS[self.entry_kind[entry]]

    def case_entries(self, case: int) -> list[int]:
        """The case's docket entries in filing order (the planned ones, then those living.py filed)."""
        planned = (range(self.case_first_entry[case], self.case_first_entry[case + 1])
                   if case < self.planned_cases else ())
        return list(planned) + self.case_extra.get(case, [])

    def entry_docs(self, entry: int) -> range:
        return range(self.entry_first_doc[entry], self.entry_first_doc[entry + 1])

    def case_docs(self, case: int) -> list[int]:
        return [doc for entry in self.case_entries(case) for doc in self.entry_docs(entry)]

    def case_closed(self, case: int) -> bool:
        return self.case_closed_on[case] != 0

    def case_title(self, case: int) -> str:
        retitled = self.title_override.get(case)
        return retitled if retitled is not None else self.planned_title(case)

    def _hash(self, kind: str, index: int) -> int:
        return int.from_bytes(hashlib.sha256(f"trportal:{self.seed}:{kind}:{index}".encode()).digest()[:8], "big")

    def planned_title(self, case: int) -> str:
        h = self._hash("title", case)
        first = GIVEN[h % len(GIVEN)]
        surname = SURNAMES[(h >> 8) % len(SURNAMES)]
        other = SURNAMES[(h >> 16) % len(SURNAMES)]
        category = CATEGORY_NAMES[self.case_category[case]]
        system = self.system
        if system.title_style == "nevada":
            suffix = " (CRIMINAL)" if category == "Criminal Appeal" else " (CIVIL)"
            if category == "Criminal Appeal":
                title = f"{surname} ({first.upper()}) VS. {system.state_party}"
            elif category == "Original Proceeding":
                title = f"{surname} VS. DIST. CT. ({other})"
            else:
                title = f"{surname} VS. {other}"
            consolidated = f" C/W {max(1, int(self.case_numbers[case].split('-')[0]) - 1 - h % 900)}" \
                if (h >> 24) % 25 == 0 else ""
            return title + suffix + consolidated
        if category == "Criminal Appeal":
            return f"{first} {surname.title()} v. {system.state_party}"
        if category == "Original Proceeding":
            return f"Ex parte {first} {surname.title()}"
        if (h >> 28) % 3 == 0:
            respondent = BUSINESSES[(h >> 16) % len(BUSINESSES)]
        else:
            respondent = f"{GIVEN[(h >> 20) % len(GIVEN)]} {other.title()}"
        return f"{first} {surname.title()} v. {respondent}"

    def lower_court(self, case: int) -> tuple[str, str]:
        """(originating court name, originating case number) of a case."""
        h = self._hash("lower", case)
        county = self.system.counties[h % len(self.system.counties)]
        year = _dt.date.fromordinal(self.case_filed[case]).year - 1 - (h >> 8) % 2
        prefix = "CR" if self.case_category[case] == 1 else "CV"
        name = (f"{county} County District Court" if self.system.title_style == "nevada"
                else f"{county} Circuit Court")
        return name, f"{prefix}-{year % 100:02d}-{900000 + (h >> 12) % 9000}"

    # -------------------------------------------------------- derived views

    def changed(self) -> None:
        """After living.py changed the corpus: what is derived from it is built again when asked."""
        self._derived.clear()

    def _cached(self, key: str, build):
        value = self._derived.get(key)
        if value is None:
            value = self._derived[key] = build()
        return value

    def cases_by_filing(self, court: int | None) -> list[int]:
        """Cases (of one court, or all) by filing day, then case index."""
        def build():
            return sorted((case for case in range(self.case_count) if court is None or self.case_court[case] == court),
                          key=lambda case: (self.case_filed[case], case))
        return self._cached(f"cases:{court}", build)

    def cases_filed_between(self, court: int | None, low: float | None, high: float | None) -> list[int]:
        """Cases (of one court, or all) filed at instants in [low, high] (POSIX seconds, None: open), by filing."""
        ordered = self.cases_by_filing(court)
        seconds = lambda case: self.system.posix_seconds(self.case_filed[case])
        lo = 0 if low is None else bisect.bisect_left(ordered, low, key=seconds)
        hi = len(ordered) if high is None else bisect.bisect_right(ordered, high, key=seconds)
        return ordered[lo:hi]

    def entry_instant(self, entry: int) -> int:
        """An entry's POSIX seconds."""
        return self.system.posix_seconds(self.entry_day[entry], self.entry_second[entry])

    def docs_by_filing(self, type_id: int | None, court: int | None = None) -> list[int]:
        """Documents (of entries of one type id, or all; of one court, or all) by their entry's filing
        instant, then index."""
        def build():
            chosen = [doc for doc in range(self.doc_count)
                      if (type_id is None or self.kind(self.doc_entry[doc]).type_id == type_id)
                      and (court is None or self.case_court[self.entry_case[self.doc_entry[doc]]] == court)]
            return sorted(chosen, key=lambda doc: (self.entry_instant(self.doc_entry[doc]), doc))
        return self._cached(f"docs:{type_id}:{court}", build)

    def citation_number(self, entry: int) -> int | None:
        """The entry's number among its year's opinions (Nevada: published opinions), or None."""
        def build():
            numbers, counters = {}, {}
            opinions = [e for e in range(self.entry_count) if self._cited(e)]
            for e in sorted(opinions, key=lambda e: (self.entry_day[e], self.entry_second[e], e)):
                year = _dt.date.fromordinal(self.entry_day[e]).year
                counters[year] = counters.get(year, 0) + 1
                numbers[e] = counters[year]
            return numbers
        return self._cached("citations", build).get(entry)

    def _cited(self, entry: int) -> bool:
        kind = self.kind(entry)
        if self.system.opinion_mode == "document-search":
            return kind.type_id == systems.PUBLISHED_NEVADA
        return kind.opinion

    def publications(self) -> list[tuple[int, int, list[int]]]:
        """(court, day ordinal, published entries in filing order) of every release list, by day then court."""
        def build():
            since = self.system.publications_since
            if self.system.opinion_mode != "publications":
                return []
            groups: dict[tuple[int, int], list[int]] = {}
            for entry in range(self.entry_count):
                day = self.entry_day[entry]
                if self.kind(entry).published and (since is None or day >= since.toordinal()):
                    groups.setdefault((day, self.case_court[self.entry_case[entry]]), []).append(entry)
            return [(court, day, sorted(entries, key=lambda e: (self.entry_second[e], e)))
                    for (day, court), entries in sorted(groups.items())]
        return self._cached("publications", build)

    def publication_uuid(self, court: int, day: int) -> str:
        return self.uuid("publication", day * 16 + court)

    def find_publication(self, text: str) -> tuple[int, int, list[int]] | None:
        found = find_uuid(self.seed, "publication", text, 1 << 32)
        if found is None:
            return None
        day, court = divmod(found, 16)
        return next((pub for pub in self.publications() if pub[0] == court and pub[1] == day), None)

    def publication_of(self, entry: int) -> tuple[int, int] | None:
        """(court, day) of the release list that lists an entry, or None."""
        def build():
            return {e: (court, day) for court, day, entries in self.publications() for e in entries}
        return self._cached("published", build).get(entry)

    # ------------------------------------------------------ living.py's writes

    def add_case(self, court: int, number: str, filed: int, category: int) -> int:
        case = self.case_count
        self.case_court.append(court)
        self.case_numbers.append(number)
        self.case_filed.append(filed)
        self.case_closed_on.append(0)
        self.case_category.append(category)
        return case

    def add_entry(self, case: int, day: int, second: int, kind: EntryKind, documents: int, states: Sequence[int],
                  secured: bool = False) -> int:
        """A new entry of `case` with `documents` documents in the given states; kept in filing order."""
        entry = self.entry_count
        self.entry_case.append(case)
        self.entry_day.append(day)
        self.entry_second.append(second)
        self.entry_kind.append(KIND_INDEX[kind])
        self.entry_secured.append(1 if secured else 0)
        for part in range(documents):
            self.doc_entry.append(entry)
            self.doc_state.append(states[part])
            self.doc_appendix.append(1 if part else 0)
        self.entry_first_doc.append(self.doc_count)      # the sentinel: the new entry's end
        extra = self.case_extra.setdefault(case, [])
        extra.append(entry)
        extra.sort(key=lambda e: (self.entry_day[e], self.entry_second[e], e))
        return entry


