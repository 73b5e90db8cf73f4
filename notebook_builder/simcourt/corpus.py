"""The simulated court's planned corpus: every case and document, from a seed.

Guarantees:
- `PlannedCorpus(docs, seed, ...)` plans exactly `docs` documents (late ones included) over
  first_year..last_year and both courts, in the real yearly proportions, case sequences dense with
  a few gaps; the same arguments give the same corpus. Documents are numbered in case-number order
  ("YYYY-CC-NNNN"); metadata is held in compact arrays and `SimDocument`s are built on demand, so
  98,724 documents cost a few tens of MB. shapes.py's `Corpus` adds the court's answers.
- The fault plan (faults on): ~70% of documents "ok"; the first 34 faulty slots cycle through every
  fault, so 300 documents hold each at least twice; later slots favour the common transient ones.
- `real_counts`: the real record's shape (each year's case count scaled by docs / FULL_CORPUS, most
  cases with few public documents, opinions about a fifth, nothing filed after yesterday).
  `admin_share` files a share of each year's documents under ADMIN numbers (their real numbers only
  in the description). `late_opinions` plans opinions filed yesterday in closed cases.
- Nothing planned is filed on or after the court's day when it is given (`today`), as in the real
  record; left to the real date, the plan ignores the calendar, so a test's corpus is the same any day.
- The court's day (`today`, the real date unless given) moves on with advance() (living.py): what
  it adds comes after the plan (documents from `planned_size`, cases from `planned_cases`), and
  retitlings, changed descriptions, opened and closed cases, withdrawn and restored documents are
  held beside it; `prefix_cases` / `prefix_docs` answer in case-number order over both.
"""
from __future__ import annotations

import bisect
import datetime as _dt
import hashlib
import math
import random
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass


COURTS = {"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"}
COURT_CODES = ("CA", "SC")          # sorted, so shard order is case-number order
CASES_PER_YEAR = {"SC": (500, 1100), "CA": (1300, 3500)}

FAULTS = (
    "ok",
    "http_500", "http_503", "reset", "truncated", "rate_limited", "html",   # transient
    "stalled",                                                              # transient, slow
    "always_503",                                                           # never succeeds
    "http_401", "http_403", "http_404",                                     # permanent
    "oversized", "lying_length",                                            # too large
    "duplicate", "image_only", "no_text", "unparseable",                    # content
)
TRANSIENT_FAULTS = ("http_500", "http_503", "reset", "truncated", "rate_limited", "html", "stalled")
PERMANENT_STATUS = {"http_401": 401, "http_403": 403, "http_404": 404}
NEVER = 1_000_000   # transient_failures of a document that never answers well

# After the guaranteed two of each, faulty slots are drawn with these weights.
_FAULT_WEIGHTS = {
    "http_500": 3, "http_503": 3, "reset": 2, "truncated": 2, "rate_limited": 2, "html": 1, "stalled": 0.3,
    "always_503": 1, "http_401": 1, "http_403": 1, "http_404": 2, "oversized": 0.3,
    "lying_length": 0.3, "duplicate": 2, "image_only": 2, "no_text": 1, "unparseable": 1,
}
FAULTY_FRACTION = 0.30
_DOCS_PER_CASE = ((1, 3), (2, 3), (3, 2), (4, 2))   # (documents, weight): mean ~2.3
FULL_CORPUS = 98_724           # documents of the real record (the v1.2 archive's count)
# real_counts: (documents, weight) of a case, before the shard's total is met exactly: most cases
# hold no public document or one.
SPARSE_DOCS_PER_CASE = ((0, 52), (1, 24), (2, 11), (3, 6), (4, 4), (6, 2), (9, 1))

# (docketEntryDescription, the word in documentName)
DESCRIPTIONS = (
    ("OPINION AFFIRMING", "opinion"), ("OPINION REVERSING AND REMANDING", "opinion"),
    ("OPINION AFFIRMING IN PART, REVERSING IN PART", "opinion"),
    ("MEMORANDUM OPINION AND ORDER", "memorandum"), ("ORDER DENYING DISCRETIONARY REVIEW", "order"),
    ("ORDER DISMISSING APPEAL", "order"), ("ORDER GRANTING MOTION", "order"),
    ("OPINION AND ORDER", "opinion"), ("NOTICE OF APPEAL", "notice"), ("BRIEF FOR APPELLANT", "brief"),
)
# real_counts: the weight of each description (opinions 35 of 200; with ADMIN opinions about a fifth).
OPINION_SHARE_WEIGHTS = tuple(7 if word in ("opinion", "memorandum") else 33 for _, word in DESCRIPTIONS)
_SURNAMES = ("SMITH JOHNSON WILLIAMS BROWN JONES MILLER DAVIS WILSON ANDERSON TAYLOR THOMAS MOORE "
             "JACKSON MARTIN LEE THOMPSON WHITE HARRIS CLARK LEWIS ROBINSON WALKER YOUNG ALLEN KING "
             "WRIGHT SCOTT HILL GREEN ADAMS BAKER NELSON CARTER MITCHELL ROBERTS TURNER PHILLIPS "
             "CAMPBELL PARKER EVANS EDWARDS COLLINS STEWART MORRIS ROGERS REED COOK MORGAN BELL "
             "MURPHY BAILEY COOPER HOWARD WARD COX RICHARDSON WOOD WATSON BROOKS BENNETT GRAY").split()
_RESPONDENTS = ("COMMONWEALTH", "COMMONWEALTH", "COMMONWEALTH", "COMMONWEALTH OF KENTUCKY",
                "KENTUCKY UNEMPLOYMENT INSURANCE COMMISSION", "CITY OF LOUISVILLE",
                "LEXINGTON-FAYETTE URBAN COUNTY GOVERNMENT", "KENTUCKY BAR ASSOCIATION",
                "CABINET FOR HEALTH AND FAMILY SERVICES", "WORKERS' COMPENSATION BOARD")
_CASE_TYPES = {"CA": ("Appeal", "Appeal", "Original Action", "Motion for Interlocutory Relief"),
               "SC": ("Matter of Right Appeal", "Discretionary Review", "Original Action",
                      "Bar Discipline", "Workers' Compensation")}

COURT_LEVELS = {"CA": "Court of Appeals", "SC": "Supreme Court"}
CAPTURED_CASE_TYPES = ("CIVIL", "CRIMINAL", "FAMILY", "WORKERS COMPENSATION", "REGULATION", "WRIT")
CAPTURED_OPEN_STATUSES = ("CASE OPENED", "BRIEFING", "PETITION FOR REHEARING", "SUBMITTED")
BARE_ENTRY_DESCRIPTIONS = ("NOTICE OF APPEARANCE FILED", "BRIEFING SCHEDULE SET", "RECORD ON APPEAL RECEIVED")
LOWER_COUNTIES = ("JEFFERSON", "FAYETTE", "OLDHAM", "BULLITT", "KENTON", "WARREN", "PIKE", "HARDIN")


def is_admin_number(case_number: str) -> bool:
    """`2024 CA ADMIN - NON-CONFIDENTIAL OPINION - 002`: a number no `YYYY-CA` prefix matches."""
    return " ADMIN" in case_number[:14]


@dataclass(frozen=True)
class SimDocument:
    """One document as the court holds it, and what the pipeline should end with.

    expected_text_chars_zero is meaningful only when expected_status is 'extracted'.
    transient_failures is NEVER for always_503 and 0 for permanent faults.
    """
    index: int
    document_id: str
    document_name: str
    case_number: str          # "2019-CA-0012": zero-padded, as in the rowMap
    shard: str                # "2019-CA"
    court: str
    case_id: str
    case_title: str
    docket_entry_id: str
    description: str
    filed_date: str           # "2019-03-01T00:00:00.000-05:00"
    fault: str
    transient_failures: int
    late: bool
    duplicate_of: str | None
    expected_status: str
    expected_http_status: int
    expected_text_chars_zero: bool


def expected_outcome(fault: str) -> tuple[str, int, bool]:
    """(status, http_status, text_chars_zero) a correct pipeline ends with for a fault."""
    if fault in PERMANENT_STATUS:
        return "failed", PERMANENT_STATUS[fault], False
    if fault == "always_503":
        return "failed", 503, False
    if fault in ("oversized", "lying_length"):
        return "failed", 413, False
    if fault == "unparseable":
        return "downloaded", 200, False
    return "extracted", 200, fault in ("image_only", "no_text")


def hex_id(seed: int, kind: str, number: int) -> str:
    return hashlib.sha256(f"simcourt:{seed}:{kind}:{number}".encode()).hexdigest()


def _key(hex_text: str) -> int:
    return int(hex_text[:16], 16)


def yearly_cases(year: int, court: str) -> int:
    """The planned case count of a year at full scale (independent of the seed)."""
    low, high = CASES_PER_YEAR[court]
    return random.Random(f"cases:{year}:{court}").randint(low, high)


def corpus_counts(docs: int, first_year: int = 1990, last_year: int = 2026) -> dict[str, int]:
    """Documents per shard ("2019-CA") for a corpus of `docs` documents, in shard order."""
    shards = [(f"{year}-{court}", yearly_cases(year, court))
              for year in range(first_year, last_year + 1) for court in COURT_CODES]
    total_weight = sum(weight for _, weight in shards)
    exact = [docs * weight / total_weight for _, weight in shards]
    counts = [math.floor(value) for value in exact]
    # Largest remainder, so the counts add up to exactly `docs`.
    by_remainder = sorted(range(len(shards)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[:docs - sum(counts)]:
        counts[i] += 1
    return {shard: count for (shard, _), count in zip(shards, counts)}


def _offset(month: int) -> str:
    return "-04:00" if 4 <= month <= 10 else "-05:00"   # Eastern time, DST roughly


def _fold(days_after: int, case_filed: int, horizon: int | None) -> int:
    """`days_after` folded into the days from `case_filed` to `horizon` (None: no bound), so that a
    court given its day draws the same numbers as one left to the calendar and differs in dates alone."""
    if horizon is not None and case_filed + days_after > horizon:
        return days_after % max(1, horizon - case_filed + 1)
    return days_after


class PlannedCorpus:
    """The planned corpus: its cases, entries and documents, their texts and their lookups (shapes.py's
    `Corpus` adds what the court answers). Read-only but for advance() (living.py)."""

    def __init__(self, docs: int, seed: int, *, faults: bool = True, late_docs: int = 0,
                 first_year: int = 1990, last_year: int = 2026, admin_share: float = 0.0,
                 late_opinions: int = 0, midnight_instants: bool = False, real_counts: bool = False,
                 today: _dt.date | None = None, court_names: dict[str, str] | None = None):
        if docs < 0 or not 0 <= late_docs <= docs or first_year > last_year or not 0 <= admin_share < 0.5:
            raise ValueError("need docs >= 0, 0 <= late_docs <= docs, first_year <= last_year, "
                             "0 <= admin_share < 0.5")
        self.seed, self.size = seed, docs
        self.court_names = dict(court_names or COURTS)   # code -> the name the court's answers give it
        self.real_counts = real_counts
        # The court's day: nothing is filed on it yet (real_counts files up to the day before; late
        # opinions are filed the day before). advance() moves it on.
        self.today = (today or _dt.date.today()).toordinal()
        self.horizon = self.today - 1     # the last day anything planned is filed (real_counts, or a day given)
        self.bounded = real_counts or today is not None
        self.midnight_instants = midnight_instants
        self.admin_share = admin_share
        self.admin_description: dict[int, str] = {}      # ADMIN documents: their description
        self.first_year, self.last_year = first_year, last_year
        self.case_keys: list[str] = []               # "2019-CA-0012"; sorted but for the cases advance() adds
        self.case_first_doc = array("I")             # + a sentinel at the end
        self.case_filed = array("I")                 # date ordinal
        self.doc_case = array("I")
        self.doc_entry = array("I")                  # index of the entry's first document
        self.doc_description = array("B")
        self.doc_filed = array("I")
        # What the planned corpus was; advance() adds after it (living.py plans the changes).
        self.planned_size, self.planned_cases = docs, 0     # the cases: once planned (below)
        self.advances = 0
        self.case_extra: dict[int, list[int]] = {}       # case -> documents filed in it by advance()
        self._extra_keys: list[str] = []                 # case numbers of the added documents, sorted ...
        self._extra_docs: list[int] = []                 # ... and the documents, in that order
        self._order: tuple[list[str], list[int]] | None = None   # case numbers sorted, their cases (new ones)
        self.title_override: dict[int, str] = {}         # case -> its title since a retitling ("A VS. B")
        self.description_override: dict[int, str] = {}   # entry -> its description since a change
        self.closed_override: dict[int, bool] = {}       # case -> closed, once advance() opened or closed it
        self.status_day: dict[int, int] = {}             # case -> the day its status last changed (advance)
        self.withdrawn: dict[int, str] = {}              # document -> 'unavailable' or 'delisted'
        self.restored_withheld: set[int] = set()         # entries whose withheld file the court now serves
        self._plan_cases(corpus_counts(docs, first_year, last_year))
        self.planned_cases = len(self.case_keys)
        self.doc_fault = array("B", bytes(docs))
        self.doc_transient = array("I", [0]) * docs
        self.duplicate_of: dict[int, int] = {}
        self.late: set[int] = set()
        if faults:
            self._plan_faults()
        self._plan_late(late_docs)
        self.late_opinions: set[int] = set()
        self._plan_late_opinions(late_opinions)
        rng = random.Random(f"{seed}:relevance")
        self.doc_relevance = array("I", (rng.getrandbits(32) for _ in range(docs)))
        self._doc_by_key = {_key(hex_id(seed, "document", i)): i for i in range(docs)}
        self._entry_by_key = {_key(hex_id(seed, "entry", i)): i for i in set(self.doc_entry)}
        self._entry_by_key_of_withheld = {_key(hex_id(seed, "unavailable", i)): i for i in set(self.doc_entry)}
        self._case_by_key = {_key(hex_id(seed, "case", i)): i for i in range(len(self.case_keys))}
        self._opinion_entries: list[tuple[int, int]] | None = None   # (filed ordinal, entry), sorted

    # ------------------------------------------------------------ planning

    def _plan_cases(self, counts: dict[str, int]) -> None:
        sizes, weights = zip(*_DOCS_PER_CASE)
        admin = {shard: (round(count * self.admin_share) if count >= 10 else 0) for shard, count in counts.items()}
        for year in range(self.first_year, self.last_year + 1):
            # "2024 CA ADMIN - ..." < "2024 SC ADMIN - ..." < "2024-CA-0001": the key order.
            for court in COURT_CODES:
                self._plan_admin_cases(year, court, admin[f"{year}-{court}"])
            for court in COURT_CODES:
                shard = f"{year}-{court}"
                if self.real_counts:
                    self._plan_real_cases(shard, counts[shard] - admin[shard])
                else:
                    self._plan_shard_cases(shard, counts[shard] - admin[shard], sizes, weights)
        self.case_first_doc.append(len(self.doc_case))

    def _plan_admin_cases(self, year: int, court: str, documents: int) -> None:
        rng = random.Random(f"{self.seed}:{year}:{court}:admin")
        for number in range(1, documents + 1):
            case = len(self.case_keys)
            self.case_keys.append(f"{year} {court} ADMIN - NON-CONFIDENTIAL OPINION - {number:03d}")
            self.case_first_doc.append(len(self.doc_case))
            filed = _dt.date(year, 1, 1).toordinal() + rng.randrange(365)
            if self.bounded:
                filed = min(filed, self.horizon)
            self.case_filed.append(filed)
            doc = len(self.doc_case)
            self.doc_case.append(case)
            self.doc_entry.append(doc)
            self.doc_description.append(0)
            self.doc_filed.append(filed)
            first = rng.randrange(1, 3000)
            related = f"{year - 1}-{court}-{first:04d}" + "".join(
                f", {first + step:04d}" for step in range(1, rng.randrange(1, 4)))
            judge = _SURNAMES[rng.randrange(len(_SURNAMES))]
            self.admin_description[doc] = f"{related} OPINION AFFIRMING BY JUDGE {judge}"

    def _plan_shard_cases(self, shard: str, remaining: int, sizes, weights) -> None:
        year = int(shard[:4])
        rng = random.Random(f"{self.seed}:{shard}")
        sequence = 0
        while remaining > 0:
            sequence += 2 if rng.random() < 0.04 else 1      # dense, not gap-free
            slots_left = max(1, 9999 - sequence)
            in_case = max(rng.choices(sizes, weights)[0], math.ceil(remaining / slots_left))
            in_case = min(in_case, remaining)
            remaining -= in_case
            case_filed = _dt.date(year, 1, 1).toordinal() + rng.randrange(365)
            self._add_case(f"{shard}-{sequence:04d}", min(case_filed, self.horizon) if self.bounded else case_filed,
                           in_case, rng, lambda shares_entry: rng.randrange(len(DESCRIPTIONS)),
                           lambda case_filed: _fold(rng.randrange(0, 400), case_filed, self.horizon if self.bounded else None))


    def _add_case(self, key: str, case_filed: int, documents: int, rng: random.Random,
                  describe: Callable[[bool], int], filed_after: Callable[[int], int]) -> None:
        """A case and its documents (one entry in five shared with the document before): `describe`
        (shares the entry?) -> a DESCRIPTIONS index, `filed_after` (case_filed) -> days after it."""
        case = len(self.case_keys)
        self.case_keys.append(key)
        self.case_first_doc.append(len(self.doc_case))
        self.case_filed.append(case_filed)
        for position in range(documents):
            doc = len(self.doc_case)
            self.doc_case.append(case)
            shares_entry = position > 0 and rng.random() < 0.2
            self.doc_entry.append(self.doc_entry[-1] if shares_entry else doc)
            self.doc_description.append(describe(shares_entry))
            self.doc_filed.append(case_filed + filed_after(case_filed))

    def _plan_real_cases(self, shard: str, remaining: int) -> None:
        """real_counts: the year's real case count (scaled), most cases with few or no documents."""
        year, court = int(shard[:4]), shard[5:7]
        rng = random.Random(f"{self.seed}:{shard}:real")
        cases = max(1 if remaining else 0, round(yearly_cases(year, court) * self.size / FULL_CORPUS))
        sizes = rng.choices(*zip(*SPARSE_DOCS_PER_CASE), k=cases)
        missing = remaining - sum(sizes)            # met exactly: documents added to or taken from cases
        while missing:
            case = rng.randrange(cases)
            if missing > 0 or sizes[case]:
                sizes[case] += 1 if missing > 0 else -1
                missing += -1 if missing > 0 else 1
        sequence = 0
        for in_case in sizes:
            sequence += 2 if rng.random() < 0.04 else 1      # dense, not gap-free
            self._add_case(f"{shard}-{sequence:04d}",
                           min(_dt.date(year, 1, 1).toordinal() + rng.randrange(365), self.horizon), in_case, rng,
                           lambda shares_entry: self.doc_description[-1] if shares_entry else
                           rng.choices(range(len(DESCRIPTIONS)), OPINION_SHARE_WEIGHTS)[0],
                           lambda case_filed: rng.randrange(max(1, min(400, self.horizon - case_filed + 1))))

    def _plan_faults(self) -> None:
        rng = random.Random(f"{self.seed}:faults")
        kinds = FAULTS[1:]
        weights = [_FAULT_WEIGHTS[kind] for kind in kinds]
        faulty = rng.sample(range(self.size), round(FAULTY_FRACTION * self.size))
        for slot, doc in enumerate(faulty):
            kind = kinds[slot % len(kinds)] if slot < 2 * len(kinds) else rng.choices(kinds, weights)[0]
            self.doc_fault[doc] = FAULTS.index(kind)
            if kind in TRANSIENT_FAULTS:
                self.doc_transient[doc] = 1 if kind == "stalled" else rng.randint(1, 2)
            elif kind == "always_503":
                self.doc_transient[doc] = NEVER
        ok = [doc for doc in range(self.size) if self.doc_fault[doc] == 0]
        for doc in faulty:
            if FAULTS[self.doc_fault[doc]] == "duplicate":
                if ok:
                    self.duplicate_of[doc] = rng.choice(ok)
                else:
                    self.doc_fault[doc] = 0     # nothing to duplicate in a tiny corpus

    def _plan_late(self, late_docs: int) -> None:
        if not late_docs:
            return
        rng = random.Random(f"{self.seed}:late")
        originals = set(self.duplicate_of.values())
        candidates = [doc for doc in range(self.size)
                      if self.doc_fault[doc] == 0 and doc not in originals]
        if len(candidates) < late_docs:
            candidates = [doc for doc in range(self.size) if doc not in originals]
            candidates = candidates if len(candidates) >= late_docs else list(range(self.size))
        self.late = set(rng.sample(candidates, late_docs))

    def _plan_late_opinions(self, count: int) -> None:
        """Opinions filed yesterday in cases that stay closed: entries of their own, hidden until
        their case's docket was read once (the court filed them after the walk saw the case)."""
        if not count:
            return
        rng = random.Random(f"{self.seed}:late-opinions")
        originals = set(self.duplicate_of.values())
        candidates = [doc for doc in range(self.size)
                      if self.doc_fault[doc] == 0 and doc not in self.late and doc not in originals
                      and self.doc_entry[doc] == doc and self.entry_docs(doc) == [doc]
                      and doc not in self.admin_description and self._closed_by_hash(self.doc_case[doc])
                      and len(self.case_docs(self.doc_case[doc])) > 1]
        if len(candidates) < count:
            raise ValueError(f"only {len(candidates)} documents can be late opinions in closed cases")
        yesterday = self.today - 1
        for doc in rng.sample(candidates, count):
            self.late_opinions.add(doc)
            self.late.add(doc)
            self.doc_description[doc] = 0          # OPINION AFFIRMING
            self.doc_filed[doc] = yesterday

    # ------------------------------------------------------------- lookups

    def __len__(self) -> int:
        return self.size

    def find_document(self, document_id: str) -> int | None:
        return self._find(self._doc_by_key, "document", document_id)

    def _find(self, by_key: dict, kind: str, hex_key: str) -> int | None:
        """The index whose id of `kind` is `hex_key`, or None."""
        try:
            index = by_key.get(_key(hex_key))
        except ValueError:
            return None
        if index is None or hex_id(self.seed, kind, index) != hex_key.lower():
            return None
        return index

    def find_withheld(self, document_id: str) -> int | None:
        """The entry whose withheld file (`unavailable_file`) has this id, or None."""
        entry = self._find(self._entry_by_key_of_withheld, "unavailable", document_id)
        return entry if entry is not None and self.has_withheld_file(entry) else None

    def find_entry(self, entry_id: str) -> list[int]:
        """Documents of a docket entry, in order (their entry is contiguous)."""
        first = self._find(self._entry_by_key, "entry", entry_id)
        if first is None:
            return []
        docs = [first]
        while docs[-1] + 1 < self.size and self.doc_entry[docs[-1] + 1] == first:
            docs.append(docs[-1] + 1)
        return docs

    def planned_case_span(self, prefix: str) -> tuple[int, int]:
        """Planned cases [lo, hi) whose zero-padded case number starts with `prefix` (the cases
        advance() adds are not in it: `prefix_cases` has every case)."""
        prefix = prefix.upper()
        lo = bisect.bisect_left(self.case_keys, prefix, 0, self.planned_cases)
        hi = bisect.bisect_left(self.case_keys, prefix + "\uffff", 0, self.planned_cases)
        return lo, hi

    def planned_doc_span(self, prefix: str) -> tuple[int, int]:
        """Planned documents [lo, hi) of the planned cases under `prefix` (`prefix_docs` has every one)."""
        lo, hi = self.planned_case_span(prefix)
        return self.case_first_doc[lo], self.case_first_doc[hi]

    def _sorted_cases(self) -> tuple[list[str], Sequence[int]]:
        """Every case number sorted, and the case of each (the identity until advance() adds cases)."""
        if self._order is None:
            return self.case_keys, range(len(self.case_keys))
        return self._order

    def prefix_cases(self, prefix: str) -> Sequence[int]:
        """Every case whose case number starts with `prefix`, in case-number order."""
        keys, cases = self._sorted_cases()
        prefix = prefix.upper()
        return cases[bisect.bisect_left(keys, prefix):bisect.bisect_left(keys, prefix + "\uffff")]

    def prefix_docs(self, prefix: str) -> Sequence[int]:
        """Every document of the cases under `prefix`: the planned ones, then those advance() filed."""
        planned = range(*self.planned_doc_span(prefix))
        if not self._extra_docs:
            return planned
        prefix = prefix.upper()
        lo = bisect.bisect_left(self._extra_keys, prefix)
        hi = bisect.bisect_left(self._extra_keys, prefix + "\uffff")
        return list(planned) + self._extra_docs[lo:hi]

    def prefix_neighbours(self, prefix: str, kind: str) -> list[int]:
        """The cases (kind "cases") or documents just outside `prefix` in case-number order: the
        last before it and the first after it (what "Starts With" also answers)."""
        keys, cases = self._sorted_cases()
        prefix = prefix.upper()
        lo, hi = bisect.bisect_left(keys, prefix), bisect.bisect_left(keys, prefix + "\uffff")
        if kind == "cases":
            return [cases[position] for position in (lo - 1, hi) if 0 <= position < len(keys)]
        found = []
        for positions, pick in ((range(lo - 1, -1, -1), -1), (range(hi, len(keys)), 0)):
            for position in positions:
                docs = self.case_docs(cases[position])
                if len(docs):
                    found.append(docs[pick])
                    break
        return found

    def fault(self, doc: int) -> str:
        return FAULTS[self.doc_fault[doc]]

    # ------------------------------------------- the living court (living.py)

    def add_case(self, key: str, filed: int) -> int:
        """A new case numbered `key`, filed on day `filed`, with no document yet; `settle()` after."""
        case = len(self.case_keys)
        self.case_keys.append(key)
        self.case_first_doc.append(self.planned_size)     # its planned documents: none
        self.case_filed.append(filed)
        self._case_by_key[_key(hex_id(self.seed, "case", case))] = case
        return case

    def add_entry(self, case: int, filed: int, description: int, relevance: Sequence[int]) -> list[int]:
        """A new docket entry of `case` filed on day `filed`, with one document a `relevance` value,
        served cleanly (fault "ok"); returns its documents (the first is the entry). `settle()` after."""
        first = self.size
        for value in relevance:
            doc = self.size
            self.doc_case.append(case)
            self.doc_entry.append(first)
            self.doc_description.append(description)
            self.doc_filed.append(filed)
            self.doc_fault.append(0)
            self.doc_transient.append(0)
            self.doc_relevance.append(value)
            self._doc_by_key[_key(hex_id(self.seed, "document", doc))] = doc
            self.case_extra.setdefault(case, []).append(doc)
            self.size += 1
        self._entry_by_key[_key(hex_id(self.seed, "entry", first))] = first
        return list(range(first, self.size))

    def settle(self) -> None:
        """After add_case / add_entry: the case-number orders rebuilt, the opinion index dropped."""
        if len(self.case_keys) > self.planned_cases:
            order = sorted(range(len(self.case_keys)), key=self.case_keys.__getitem__)
            self._order = ([self.case_keys[case] for case in order], order)
        added = sorted(range(self.planned_size, self.size), key=lambda doc: (self.case_keys[self.doc_case[doc]], doc))
        self._extra_keys = [self.case_keys[self.doc_case[doc]] for doc in added]
        self._extra_docs = added
        self._opinion_entries = None

    # ------------------------------------------------------- derived texts

    def case_title(self, case: int) -> str:
        """"APPELLANT VS. RESPONDENT": as planned, or as a retitling (advance) made it."""
        retitled = self.title_override.get(case)
        return retitled if retitled is not None else self.planned_title(case)

    def planned_title(self, case: int) -> str:
        h = int(hex_id(self.seed, "case", case)[16:32], 16)
        appellant = _SURNAMES[h % len(_SURNAMES)]
        if (h >> 20) % 3 == 0:
            respondent = _SURNAMES[(h >> 8) % len(_SURNAMES)]
        else:
            respondent = _RESPONDENTS[(h >> 8) % len(_RESPONDENTS)]
        return f"{appellant} VS. {respondent}"

    def case_type(self, case: int) -> str:
        types = _CASE_TYPES[self.case_keys[case][5:7]]
        return types[int(hex_id(self.seed, "case", case)[32:40], 16) % len(types)]

    @staticmethod
    def iso_date(ordinal: int) -> str:
        day = _dt.date.fromordinal(ordinal)
        return f"{day.isoformat()}T00:00:00.000{_offset(day.month)}"

    def document_name(self, doc: int) -> str:
        key = self.case_keys[self.doc_case[doc]]
        if is_admin_number(key):
            return f"{key[:4]}-{key[5:7]}-ADMIN-{key[-3:]} opinion.pdf"
        return f"{key[:8]}{int(key[8:]):06d} {DESCRIPTIONS[self.doc_description[doc]][1]}.pdf"

    def document(self, doc: int) -> SimDocument:
        if not 0 <= doc < self.size:
            raise IndexError(doc)
        case = self.doc_case[doc]
        key = self.case_keys[case]
        fault = self.fault(doc)
        status, http_status, zero = expected_outcome(fault)
        original = self.duplicate_of.get(doc)
        return SimDocument(
            index=doc, document_id=hex_id(self.seed, "document", doc),
            document_name=self.document_name(doc), case_number=key, shard=self.shard_of_case(case),
            court=self.court_names[key[5:7]], case_id=hex_id(self.seed, "case", case),
            case_title=self.case_title(case),
            docket_entry_id=hex_id(self.seed, "entry", self.doc_entry[doc]),
            description=self.description(doc),
            filed_date=self.iso_date(self.doc_filed[doc]), fault=fault,
            transient_failures=self.doc_transient[doc], late=doc in self.late,
            duplicate_of=None if original is None else hex_id(self.seed, "document", original),
            expected_status=status, expected_http_status=http_status,
            expected_text_chars_zero=zero)

    def description(self, doc: int) -> str:
        """The docket entry's description, as planned or as a change (advance) made it."""
        changed = self.description_override.get(self.doc_entry[doc])
        return changed if changed is not None else self.planned_description(doc)

    def planned_description(self, doc: int) -> str:
        admin = self.admin_description.get(doc)
        return admin if admin is not None else DESCRIPTIONS[self.doc_description[doc]][0]

    def shard_of_case(self, case: int) -> str:
        """"2019-CA", or "2024 CA ADMIN" for an ADMIN number."""
        key = self.case_keys[case]
        return key[:len("2024 CA ADMIN")] if is_admin_number(key) else key[:7]

    def find_case(self, case_id: str) -> int | None:
        return self._find(self._case_by_key, "case", case_id)

    def case_docs(self, case: int) -> Sequence[int]:
        """The case's documents: the planned ones, then those advance() filed in it."""
        planned = range(self.case_first_doc[case], self.case_first_doc[case + 1])
        extra = self.case_extra.get(case)
        return list(planned) + extra if extra else planned

    def case_closed(self, case: int) -> bool:
        """Mostly closed in older years; never while a document of the case is still to come (late),
        but for a late opinion (it comes to a closed case); as advance() opened or closed it."""
        if case in self.closed_override:
            return self.closed_override[case]
        if any(doc in self.late and doc not in self.late_opinions for doc in self.case_docs(case)):
            return False
        return self._closed_by_hash(case)

    def _closed_by_hash(self, case: int) -> bool:
        case_id = hex_id(self.seed, "case", case)
        year = int(self.case_keys[case][:4])
        return (int(case_id[40:48], 16) % 100) < (95 if year < self.last_year - 1 else 40)

    def is_opinion(self, doc: int) -> bool:
        return doc in self.admin_description or DESCRIPTIONS[self.doc_description[doc]][1] in ("opinion", "memorandum")

    def entry_docs(self, entry: int) -> list[int]:
        """The documents of the entry whose first document is `entry` (contiguous)."""
        docs = [entry]
        while docs[-1] + 1 < self.size and self.doc_entry[docs[-1] + 1] == entry:
            docs.append(docs[-1] + 1)
        return docs

    def case_entries(self, case: int) -> list[int]:
        """The docket entries (their first document) of a case, in filing order."""
        return sorted(set(self.doc_entry[doc] for doc in self.case_docs(case)), key=lambda e: (self.doc_filed[e], e))

    def has_withheld_file(self, entry: int) -> bool:
        """Whether an entry lists an extra, withheld file: one planned entry in ~20 (none advance() files)."""
        return entry < self.planned_size and int(hex_id(self.seed, "entry", entry)[60:64], 16) % 20 == 0

    def opinion_entries(self) -> list[tuple[int, int]]:
        """(filed ordinal, entry) of every opinion entry, by date (built once)."""
        if self._opinion_entries is None:
            self._opinion_entries = sorted(
                (self.doc_filed[entry], entry) for entry in set(self.doc_entry) if self.is_opinion(entry))
        return self._opinion_entries


class DocumentList(Sequence):
    """`SimCourt.documents`: a read-only sequence that builds SimDocuments on demand."""

    def __init__(self, corpus: PlannedCorpus):
        self._corpus = corpus

    def __len__(self) -> int:
        return len(self._corpus)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._corpus.document(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        return self._corpus.document(index)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"<{len(self)} SimDocuments>"
