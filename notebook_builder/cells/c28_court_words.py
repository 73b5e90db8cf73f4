"""The words of a court system's archive: its title, its courts' codes, and its case numbers as people type them.

Guarantees:
- `system_words(name)` (`words_of_config(cfg)`) is the `SystemWords` of every COURT_SYSTEMS name, made
  from its court (c27): `title` names the archive in page headers, feeds and charts ("Kentucky
  appellate courts"); `courts` maps each court's code to its name, highest court first; `court_title`
  names a court's panel ("Kentucky Supreme Court (SC)").
- `code_of(case_number, court)` is a document's court code, from its case number, else from the
  court's name as the archive holds it (None when neither tells); `court_filter(value)` reads a
  --court value: a code, a word of one court's name ("appeals", "criminal"), else part of a name.
  `year_of(case_number)` is the year a case number carries (None for a form without one: Nevada's
  90509, Oregon's S072851). Kentucky's answers are the archive's as they have always been (CA/SC;
  the number's first four digits).
- `typed_numbers` reads the case numbers typed in a search box (c18 `CaseNumberForms`): Kentucky's
  c18 forms; another system's, its courts' forms with the separators free ("sc 2024 492" is
  SC-2024-0492, the last sequence zero-padded where the form has letters) and a number of digits
  alone only from 5 digits on (a year typed stays a word). `text_numbers(text)` finds (start, end,
  number) of the system's case numbers in a document's text (derive, c84): a number of digits alone
  only after "No."/"Nos.".
- A court's number form is its configuration's (c27 `number_segments`: the year where the form
  marks it).

Knobs read: COURT_SYSTEM (words_of_config).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .c00_config import COURT_SYSTEMS, Config
from .c18_query_syntax import KENTUCKY_CASE_NUMBERS, CaseNumberForms
from .c25_court import CTrackCourt
from .c26_trportal import TRPortalCourt
from .c27_court_systems import Segment, court_system, number_segments

# What each court system's archive is called where a page, a feed or a chart names it.
ARCHIVE_TITLES = {
    "kentucky": "Kentucky appellate courts",
    "delaware-county-pa": "Delaware County (Pennsylvania) Court of Common Pleas",
    "nevada": "Nevada appellate courts",
    "alabama": "Alabama appellate courts",
    "oregon": "Oregon appellate courts",
    "north-dakota": "North Dakota Supreme Court",
    "wyoming": "Wyoming Supreme Court",
    "florida": "Florida appellate courts",
}
_KENTUCKY_CODES = {"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"}
_SEPARATOR = r"[ \t-]*"
_NUMBER_END = r"(?![\w-])(?!\.\d)"
_NUMBER_START = r"(?<![\w.\-/])"


def _segment_regex(segment: Segment, *, typed: bool, last_digits: bool, lettered: bool) -> str:
    if segment.is_literal:
        return re.escape(segment.literal)
    if segment.digits is None:
        return r"\d{5,}" if typed and not lettered else r"\d+"
    if typed and last_digits and lettered and not segment.year:
        return rf"\d{{1,{segment.digits}}}"
    return rf"\d{{{segment.digits}}}"


@dataclass(frozen=True)
class CourtNumbers:
    """One court's case numbers: its code and the segments of its form."""
    code: str
    segments: tuple[Segment, ...]

    @property
    def lettered(self) -> bool:
        return any(segment.is_literal for segment in self.segments)

    def regex(self, *, typed: bool, prefix: str) -> str:
        """The form as a regular expression, each segment a group `{prefix}{index}`: typed, separators free."""
        last = max((index for index, segment in enumerate(self.segments) if not segment.is_literal), default=-1)
        parts = []
        for index, segment in enumerate(self.segments):
            between = _SEPARATOR if typed and index else ("-" if segment.separated else "")
            parts.append(between + f"(?P<{prefix}{index}>"
                         + _segment_regex(segment, typed=typed, last_digits=index == last, lettered=self.lettered) + ")")
        return "".join(parts)

    def canonical(self, match: re.Match, prefix: str) -> str:
        """The archive's form of a typed match: the form's separators, the last digits zero-padded."""
        pieces = []
        for index, segment in enumerate(self.segments):
            value = match[f"{prefix}{index}"].upper()
            if not segment.is_literal and segment.digits:
                value = value.zfill(segment.digits)
            pieces.append(("-" if segment.separated else "") + value)
        return "".join(pieces)

    @functools.cached_property
    def _written(self) -> re.Pattern:
        """The form as written (`regex(typed=False)`), compiled once."""
        return re.compile(self.regex(typed=False, prefix="s"), re.IGNORECASE)

    def year_of(self, number: str) -> int | None:
        """The year the number carries, where the form has one (two digits are 20YY)."""
        match = self._written.fullmatch(number.strip())
        if match is None:
            return None
        for index, segment in enumerate(self.segments):
            if segment.year:
                year = int(match[f"s{index}"])
                return year + 2000 if segment.digits == 2 else year
        return None


def court_numbers(court: CTrackCourt | TRPortalCourt) -> tuple[CourtNumbers, ...]:
    """Each court's number form (c27 `number_segments`)."""
    return tuple(CourtNumbers(code, segments) for code, segments in number_segments(court).items())


def _typed_forms(numbers: tuple[CourtNumbers, ...]) -> CaseNumberForms:
    # A form with letters first: "90082 COA" is the Court of Appeals' number, not the Supreme Court's 90082.
    numbers = tuple(sorted(numbers, key=lambda court: not court.lettered))
    pattern = re.compile(_NUMBER_START + "(?:" + "|".join(
        "(?:" + court.regex(typed=True, prefix=f"c{index}_") + ")" for index, court in enumerate(numbers))
        + ")" + _NUMBER_END, re.IGNORECASE)

    def canonical(match: re.Match) -> str:
        index = next(index for index in range(len(numbers)) if match[f"c{index}_0"] is not None)
        return numbers[index].canonical(match, f"c{index}_")
    return CaseNumberForms(pattern, canonical)


def _text_pattern(numbers: tuple[CourtNumbers, ...]) -> re.Pattern:
    """The system's case numbers in running text; a form of digits alone after No./Nos. only."""
    lettered = "|".join(court.regex(typed=False, prefix=f"l{index}_") for index, court in enumerate(numbers)
                        if court.lettered)
    bare = "|".join(court.regex(typed=False, prefix=f"b{index}_") for index, court in enumerate(numbers)
                    if not court.lettered)
    options = []
    if lettered:
        options.append(_NUMBER_START + f"(?P<number>{lettered})" + _NUMBER_END)
    if bare:     # four digits at least: "Adv. Op. No. 45" is no case number
        options.append(r"\b(?:Docket\s+|Case\s+)?Nos?\.\s*(?P<bare>(?=\d{4})(?:" + bare + "))" + _NUMBER_END)
    return re.compile("|".join(options))


@dataclass(frozen=True)
class SystemWords:
    """What the archive of one court system says and reads (see the module docstring)."""
    system: str
    title: str
    courts: dict[str, str]
    time_zone: str
    court: CTrackCourt | TRPortalCourt = field(repr=False)
    numbers: tuple[CourtNumbers, ...] = field(repr=False)
    typed_numbers: CaseNumberForms = field(repr=False)
    _text: re.Pattern | None = field(default=None, repr=False)

    @property
    def kentucky(self) -> bool:
        return self.system == "kentucky"

    @property
    def access_states(self) -> bool:
        """Whether the court's API says a listed document is not public (TR Portal's access states);
        an archive of a C-Track Public Access court holds no such document."""
        return isinstance(self.court, TRPortalCourt)

    def court_title(self, code: str) -> str:
        return f"{self.courts[code]} ({code})" if code in self.courts else code

    def code_of(self, case_number: str | None, court: str | None) -> str | None:
        """A document's court code, from its case number, else from the court's name."""
        if self.kentucky:
            code = (case_number or "")[5:7].upper()
            if code in _KENTUCKY_CODES:
                return code
            name = (court or "").lower()
            return "CA" if "appeals" in name else "SC" if "supreme" in name else None
        code = self.court.code_of(case_number) if case_number else None
        if code is not None:
            return code
        wanted = (court or "").strip().lower()
        return next((code for code, name in self.courts.items()
                     if wanted and wanted in (name.lower(), code.lower())), None)

    def code_of_court(self, court: str | None) -> str | None:
        """The code of a court named as the archive holds it ("Kentucky Court of Appeals"); None if none."""
        return self.code_of(None, court)

    def year_of(self, case_number: str | None) -> int | None:
        """The year a case number carries (Kentucky's: its first four digits)."""
        if not case_number:
            return None
        if self.kentucky:
            head = case_number[:4]
            return int(head) if head.isdigit() and 1900 <= int(head) <= 2100 else None
        code = self.court.code_of(case_number)
        for court in self.numbers:
            if code in (None, court.code):
                year = court.year_of(case_number)
                if year is not None and 1900 <= year <= 2100:
                    return year
        return None

    def court_filter(self, value: str | None) -> dict[str, str]:
        """SearchFilters of a --court value: a code, a word that names one court ('appeals',
        'supreme'), else part of a court's name."""
        if not value or not value.strip():
            return {}
        text = value.strip()
        if text.upper() in self.courts:
            return {"court_code": text.upper()}
        lowered = text.lower()
        if self.kentucky:
            if lowered in ("appeals", "court of appeals", "coa"):
                return {"court_code": "CA"}
            if lowered in ("supreme", "supreme court"):
                return {"court_code": "SC"}
            return {"court_like": text}
        named = [code for code, name in self.courts.items() if lowered == name.lower()
                 or re.search(rf"\b{re.escape(lowered)}\b", name.lower())]
        return {"court_code": named[0]} if len(named) == 1 else {"court_like": text}

    def text_numbers(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, number) of each of the system's case numbers in `text`, as the court writes it
        (Kentucky's appellate numbers are c84's own reading)."""
        if self._text is None or not text:
            return []
        found = []
        for match in self._text.finditer(text):
            group = "number" if match.groupdict().get("number") else "bare"
            found.append((match.start(group), match.end(group), match[group].upper()))
        return found


@functools.lru_cache(maxsize=None)
def system_words(name: str) -> SystemWords:
    """The words of the court system `name` (ConfigError for a name c00 COURT_SYSTEMS does not hold)."""
    court = court_system(name)
    numbers = court_numbers(court)
    courts = dict(court.courts)
    if "SC" in courts:      # the highest court first (Kentucky's codes are in case-number order)
        courts = {"SC": courts["SC"], **{code: name for code, name in courts.items() if code != "SC"}}
    kentucky = court.system == "kentucky"
    return SystemWords(system=court.system, title=ARCHIVE_TITLES[court.system], courts=courts,
                       time_zone=COURT_SYSTEMS[court.system].time_zone, court=court, numbers=numbers,
                       typed_numbers=KENTUCKY_CASE_NUMBERS if kentucky else _typed_forms(numbers),
                       _text=None if kentucky else _text_pattern(numbers))


def words_of_config(cfg: Config) -> SystemWords:
    return system_words(cfg.COURT_SYSTEM)
