"""The court: what is the court's (its API's paths and headers, its courts, case numbers and field names).

A court served by Thomson Reuters' C-Track Public Access API is a `CTrackCourt`: the names its API
gives its courts (by the code its case numbers carry), the form of its case numbers
(`CaseNumbers`), whether it has the opinion search. Kentucky is `KENTUCKY`. Another court of the
same API is another instance (Delaware County, Pennsylvania serves it at its own host, under
/api/v1: API_BASE says where); a court of the vendor's newer API (TR Portal) is a module beside
this one whose court answers the same methods. The client, discovery, the walk, the probe and the
download ask the court the client holds (`CourtClient.court`); none names a path, a header, a
court or a field of its own.

Guarantees:
- `url(base, endpoint, **values)` builds every URL: ENDPOINTS' paths under the API root,
  SITE_ROOT_ENDPOINTS' (the second download path) under the site root (scheme://host of the API
  root). DOWNLOAD_PATHS names the two download paths in production use.
- Every request carries MANDATORY_HEADERS (without x-ctrack-excludeselflinks a search answers an
  empty 200); `paging_headers(start, size)` asks for a page (1-based) and its total count;
  `paging_of(headers)` reads what the answer says of its page.
- Shards (`CaseNumbers`): one a year and court (`2019-CA`) and one a year and court for ADMIN
  numbers (`2024 CA ADMIN`), in case-number order; `split_shard` gives the next digit's children
  of the zero-padded sequence (`2019-CA-0` ... `2019-CA-9`, then `2019-CA-00` ...), none for a
  whole number or an ADMIN shard; `top_level_shard` and `shard_of_number` go back up.
- `court_of(case_number)` names the court of a number (ADMIN numbers too);
  `related_case_numbers(description)` expands the numbers a description names
  (`2022-CA-1454, 1456` -> two).
- Rows: C-Track's field names become the tables' rows here, pure: `document_row` (a search
  resultItem), `case_header`, `case_search_row`, `docket_entry`, `entry_file`, `party`,
  `lower_court`; `list_elements` flattens a list whose elements are lists of elements too
  (Delaware County's parties), and an address given only as `formattedAddress` is kept. A value
  of the wrong type or a missing required key raises `ShapeProblem`
  naming the field. A document id comes only from a `documentID` field, never from `id`: a real
  search row's `id` is its docket entry's, 64 hex digits like a document's.
- `unknowns` names what is not known of a court and the probe (c55) answers: PROBE_UNKNOWNS
  (whether it needs x-ctrack-excludeselflinks, sent either way; whether its documents download
  anonymously; whether its case numbers take the configured form). Kentucky's are all known.
- `choose_strategy` picks discovery's search (the document search or the case walk) from what the
  court's two searches answered; `opinion_windows` cuts days into the opinion search's 7-day
  windows (MM/DD/YYYY).

Knobs read: none (the client gives API_BASE).
"""
from __future__ import annotations

import datetime as _dt
import operator
import re
import string
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .c00_config import COURT_SYSTEMS, REAL_API_BASE
from .c15_discovery_state import DOCUMENT_METADATA_COLUMNS

MANDATORY_HEADERS = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true"}
PAGING_START = "x-ctrack-paging-startindex"
PAGING_MAX = "x-ctrack-paging-maxresults"
PAGING_CALCULATE = "x-ctrack-paging-calculatetotalcount"
PAGING_TOTAL = "x-ctrack-paging-totalcount"
PAGING_RESULTS = "x-ctrack-paging-resultcount"
PAGING_MORE = "x-ctrack-paging-moreresults"
PAGING_LIMIT = "x-ctrack-paging-resultslimit"

_SEARCH_FILTER = ("queryString=true&searchFields[0].searchType=Starts With"
                  "&searchFields[0].operation==&searchFields[0].values[0]={prefix}"
                  "&searchFields[0].indexFieldName={field}")

# Every path of the API, relative to the API root (ctrack-api.md).
ENDPOINTS = {
    "document_search": "/publicaccessdocuments/search?" + _SEARCH_FILTER.replace("{field}", "caseHeader.caseNumber"),
    "case_search": "/cases/search?" + _SEARCH_FILTER.replace("{field}", "caseNumber"),
    "entry_documents": "/publicaccessdocuments?filter=parentCategory=docketentries,parentID={docket_entry_id}",
    "download": "/publicaccessdocuments/{document_id}/download",
    "download_site": "/documents/{document_id}/download",     # at the site root, not under the API root
    "case": "/cases/{case_id}",
    "docket_entries": "/cases/{case_id}/docketentries",
    "parties": "/cases/{case_id}/parties",
    "lower_courts": "/cases/{case_id}/lowercourts",
    "opinion_search": ("/opinions/search?queryString=true"
                       "&searchFields[0].operation=>=&searchFields[0].values[0]={first_day}"
                       "&searchFields[0].indexFieldName=filedDate"
                       "&searchFields[1].operation=<=&searchFields[1].values[0]={last_day}"
                       "&searchFields[1].indexFieldName=filedDate"
                       "&searchFilters[0].operation==&searchFilters[0].indexFieldName=caseHeader.court"
                       "&searchFilters[0].values[0]={court}"),
}
# Endpoints under the site root (scheme://host of the API root) rather than under it.
SITE_ROOT_ENDPOINTS = frozenset({"download_site"})
# The two download paths in production use (ctrack-api.md), by the name the pipeline keeps.
DOWNLOAD_PATHS = {"api": "download", "site": "download_site"}
# The court's lists (JSON arrays), asked with paging headers whether or not the court pages them.
LIST_ENDPOINTS = frozenset({"docket_entries", "parties", "lower_courts", "entry_documents"})
# endpoint -> the keys the pipeline reads from each row (a search's rowMap, an array's elements): what
# the probe (c55) checks.
FIELDS_READ: dict[str, tuple[str, ...]] = {
    "document_search": ("documentID", "docketEntryID", "caseHeader.caseNumber", "filedDate"),
    "case_search": ("caseNumber", "caseID"),
    "admin_case_search": ("caseNumber", "caseID"),   # the case search for `YYYY CA ADMIN` numbers
    "docket_entries": ("docketEntryID", "docketEntryDescription", "filedDate", "hasDocuments"),
    "entry_documents": ("documentID", "parentID", "documentAvailable", "caseHeader"),
    "parties": ("partyName", "attorneys"),
    "lower_courts": ("lowerCourtName", "lowerCourtCaseNumber"),
    "opinion_search": ("docketEntryID", "caseHeader.caseNumber", "filedDate", "hasDocuments"),
    "download": ("application/pdf",),
    "download_site": ("application/pdf",),       # the same document by the site-root path
}
# The fields without which a row is useless (the others are metadata: missing ones are listed, not fatal).
FIELDS_REQUIRED: dict[str, tuple[str, ...]] = {
    "document_search": ("documentID",), "case_search": ("caseNumber",), "admin_case_search": ("caseNumber",),
    "docket_entries": ("docketEntryID", "hasDocuments"), "entry_documents": ("documentID",),
    "opinion_search": ("docketEntryID",), "parties": (), "lower_courts": (), "download": ("application/pdf",),
    "download_site": ("application/pdf",),
}
STRATEGIES = ("documents", "cases")
# What may not be known of a court (`CTrackCourt.unknowns`), which the probe answers.
PROBE_UNKNOWNS = ("selflinks_header", "public_documents", "case_numbers")
OPINION_WINDOW_DAYS = 7         # crawlers ask the opinion search for 7-day windows (longer ones went stale)

# A `documents` column -> the key of a search resultItem's rowMap it is taken from, as is.
DOCUMENT_ROW_FIELDS = {
    "case_number": "caseHeader.caseNumber",
    "court": "caseHeader.court",
    "case_title": "caseHeader.shortTitle",
    "docket_entry_id": "docketEntryID",
    "description": "docketEntryDescription",
    "filed_date": "filedDate",
    "case_id": "caseHeader.caseID",
    "document_name": "documentName",
}
# The rowMap keys of DOCUMENT_METADATA_COLUMNS but 'shard' (the last column; discovery adds it).
_RAW_METADATA_KEYS = tuple(DOCUMENT_ROW_FIELDS[column] for column in DOCUMENT_METADATA_COLUMNS if column != "shard")
_raw_metadata_values = operator.itemgetter(*_RAW_METADATA_KEYS)
_UTC_OFFSET = re.compile(r"([+-])(\d\d)(\d\d)$")


class ShapeProblem(ValueError):
    """A court answer lacks a field, or holds a value of the wrong type: `field` names it."""

    def __init__(self, field: str, detail: str = "missing"):
        super().__init__(f"{field}: {detail}")
        self.field = field


# ------------------------------------------------------------ case numbers


@dataclass(frozen=True)
class CaseNumbers:
    """The form of a court's case numbers: `form` with {year}, {code} and a zero-padded {sequence} of
    `digits` digits last (`2019-CA-0012`), and `admin` the form of its ADMIN numbers' prefix
    (`2024 CA ADMIN - ...`, which no year-and-court prefix matches; None: the court has none)."""
    codes: tuple[str, ...]
    form: str = "{year}-{code}-{sequence}"
    digits: int = 4
    admin: str | None = "{year} {code} ADMIN"

    def __post_init__(self):
        if not self.form.endswith("{sequence}"):
            raise ValueError("a case number's form ends with its {sequence}")
        stem = self.form[:-len("{sequence}")]
        object.__setattr__(self, "_stem", stem)
        object.__setattr__(self, "_separator", stem[len(stem.rstrip("-/ .")):])
        object.__setattr__(self, "_top", _form_pattern(stem[:len(stem) - len(self._separator)], self.codes))
        object.__setattr__(self, "_admin", _form_pattern(self.admin, self.codes) if self.admin else None)
        object.__setattr__(self, "_related", re.compile(
            r"\b" + _form_pattern(stem, self.codes, flags=0).pattern + rf"(\d{{{self.digits}}})"
            + rf"((?:\s*,\s*(?:&\s*)?\d{{{self.digits}}}(?![\d-]))*)"))

    def shards(self, first: int, last: int) -> list[str]:
        """Top-level shards, in case-number order: 1990-CA, 1990-SC, 1991-CA, ..."""
        return [self._stem[:len(self._stem) - len(self._separator)].format(year=year, code=code)
                for year in range(first, last + 1) for code in self.codes]

    def admin_shards(self, first: int, last: int) -> list[str]:
        """The ADMIN-number shards (`2024 CA ADMIN`); [] for a court without ADMIN numbers."""
        if not self.admin:
            return []
        return [self.admin.format(year=year, code=code) for year in range(first, last + 1) for code in self.codes]

    def number(self, year: int, code: str, sequence: int) -> str:
        return self.form.format(year=year, code=code, sequence=f"{sequence:0{self.digits}d}")

    def split_shard(self, shard: str) -> list[str]:
        """The next-digit children of a shard; [] for a whole case number or an ADMIN shard."""
        if self._admin is not None and self._admin.fullmatch(shard):
            return []
        top = self._top.match(shard)
        if top is None or len(shard) >= top.end() + len(self._separator) + self.digits:
            return []
        stem = shard + self._separator if top.end() == len(shard) else shard
        return [stem + digit for digit in "0123456789"]

    def _match(self, text: Any) -> re.Match | None:
        """The top-level shard a text begins with (an ADMIN one first), as a match; None if none."""
        if not isinstance(text, str):
            return None
        for pattern in (self._admin, self._top):
            found = pattern.match(text) if pattern is not None else None
            if found is not None:
                return found
        return None

    def top_level_shard(self, shard: str) -> str:
        """The top-level shard a shard (or a case number) belongs to: `2019-CA-01` -> `2019-CA`,
        `2024 CA ADMIN - ...` -> `2024 CA ADMIN`; anything else as it is."""
        found = self._match(shard)
        return shard if found is None else found.group(0)

    def shard_of_number(self, case_number: Any) -> str | None:
        """The top-level shard of a case number; None for anything that is not one."""
        found = self._match(case_number)
        return None if found is None else found.group(0)

    def code_of(self, case_number: Any) -> str | None:
        """The court code a case number carries (ADMIN numbers too), upper-case; None if none."""
        found = self._match(case_number)
        return None if found is None else found.group("code").upper()

    def related(self, description: Any) -> str | None:
        """The case numbers a description names, expanded (`2022-CA-1454, 1456` -> two), comma-joined."""
        if not isinstance(description, str):
            return None
        numbers: list[str] = []
        for match in self._related.finditer(description):
            year, code, first, rest = match.group("year"), match.group("code"), match.group(3), match.group(4)
            for sequence in [first, *re.findall(rf"\d{{{self.digits}}}(?![\d-])", rest)]:
                number = self.form.format(year=year, code=code, sequence=sequence)
                if number not in numbers:
                    numbers.append(number)
        return ", ".join(numbers) or None


def _form_pattern(form: str, codes: tuple[str, ...], *, flags: int = re.IGNORECASE) -> re.Pattern:
    """A case-number form's literal text with {year} and {code} as named groups."""
    pattern = ""
    for literal, name, _, _ in string.Formatter().parse(form):
        pattern += re.escape(literal)
        if name == "year":
            pattern += r"(?P<year>\d{4})"
        elif name == "code":
            pattern += "(?P<code>" + "|".join(map(re.escape, codes)) + ")"
        elif name is not None:
            raise ValueError(f"a case number's form knows {{year}}, {{code}} and {{sequence}}, not {{{name}}}")
    return re.compile(pattern, flags)


def shard_holds(shard: str, case_number: Any) -> bool:
    """Whether a search row belongs to its shard: its case number starts with the shard's prefix
    ("Starts With" also answers neighbouring numbers). A row that names no case number is kept."""
    if not isinstance(case_number, str) or not case_number.strip():
        return True
    return case_number.strip().upper().startswith(shard.upper())


def opinion_windows(first_day: _dt.date, last_day: _dt.date, days: int = OPINION_WINDOW_DAYS) -> list[tuple[str, str]]:
    """[first, last] in windows of `days` days, as the opinion search takes them (MM/DD/YYYY)."""
    windows = []
    start = first_day
    while start <= last_day:
        end = min(last_day, start + _dt.timedelta(days=days - 1))
        windows.append((start.strftime("%m/%d/%Y"), end.strftime("%m/%d/%Y")))
        start = end + _dt.timedelta(days=1)
    return windows


def choose_strategy(configured: str, document_rows: list | None,
                    case_search: str = "unknown") -> tuple[str, str]:
    """(strategy, why) from the knob and, for auto, the evidence of the probes: `document_rows` the
    first rows the document search answered in any shard ([] none anywhere, None: refused, 404);
    `case_search` what the case search answered ("rows", "empty", "absent", or "unknown": not
    asked). No rows is no evidence; the strategy whose endpoints answer is preferred. ("", why)
    when neither search is there."""
    if configured != "auto":
        return configured, f"DISCOVERY={configured}"
    if document_rows and all(document_id_of(item) for item in document_rows):
        return "documents", "the document search answers rows with documentID"
    if case_search == "absent":
        if document_rows is None:
            return "", "the document search and the case search both answer 404"
        if document_rows:
            return "documents", ("the case search answers 404; the document search's rows are docket "
                                 "entries, resolved through their file lists")
        return "documents", "the case search answers 404; the document search answers, with no rows yet"
    if document_rows is None:
        return "cases", "the document search is absent (404)"
    if document_rows:
        return "cases", "the document search answers rows without documentID (docket entries)"
    if case_search == "rows":
        return "cases", "the document search answered no rows in any shard; the case search did"
    return "cases", "no search answered rows: the confirmed case walk"


# ------------------------------------------------------------------ values


def document_id_of(item: Mapping[str, Any]) -> str | None:
    """The normalized (stripped, lower-case) document id of a search resultItem, or None.

    Only from `rowMap.documentID`: a real row's `id` may be its docket entry's id (64 hex digits
    too), and a document stored under it would be downloaded as a 404 ("withdrawn")."""
    row_map = item.get("rowMap") if isinstance(item, Mapping) else None
    document_id = row_map.get("documentID") if isinstance(row_map, Mapping) else None
    if not isinstance(document_id, str) or not document_id.strip():
        return None
    return document_id.strip().lower()


def availability_of(value: Any) -> int | None:
    """documentAvailable as the table keeps it: 1, 0, or None when the court did not say (or said
    something that is no boolean)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return int(value.strip().lower() == "true")
    return None


def court_date(value: Any, field_name: str = "filedDate") -> str | None:
    """A court timestamp as ISO 8601 with a colon in the offset (`+0000` -> `+00:00`, which Python
    3.10's fromisoformat reads); None stays None; anything but text is a ShapeProblem."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ShapeProblem(field_name, f"not a date string: {value!r}"[:80])
    return _UTC_OFFSET.sub(r"\1\2:\3", value.strip())


def one_line(title: Any) -> str | None:
    """A title on one line: the court puts `\r\n` between the parties."""
    return " ".join(title.split()) if isinstance(title, str) and title.strip() else None


def _text(raw: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise ShapeProblem(key)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ShapeProblem(key, f"not text: {type(value).__name__}")
    text = str(value).strip()
    if required and not text:
        raise ShapeProblem(key, "empty")
    return text or None


def _flag_value(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return int(value.strip().lower() == "true")
    raise ShapeProblem(key, f"not a boolean: {value!r}"[:80])


def _mapping(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ShapeProblem(what, f"not an object: {type(raw).__name__}")
    return raw


def _address(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return None
    locality = ", ".join(str(raw[key]) for key in ("city", "state") if raw.get(key))
    if raw.get("postalCode"):
        locality = f"{locality} {raw['postalCode']}".strip()
    parts = [str(raw[key]).strip() for key in ("line1", "line2", "line3", "line4") if raw.get(key)]
    formatted = raw.get("formattedAddress")
    return (", ".join(part for part in [*parts, locality] if part)
            or (one_line(formatted) if isinstance(formatted, str) else None))


def list_elements(raw: list) -> list:
    """The elements of a court's list, a nested list's elements in its place (Delaware County's parties
    come as party objects or lists of them), in order."""
    elements: list = []
    for item in raw:
        if isinstance(item, list):
            elements.extend(list_elements(item))
        else:
            elements.append(item)
    return elements


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return None if value is None else int(str(value).strip())
    except ValueError:
        return None


# ------------------------------------------------------------------- court


@dataclass(frozen=True)
class Paging:
    """What an answer's paging headers say of its page (None: the header is absent or unreadable)."""
    total: int | None
    results: int | None
    more: bool | None
    limit: int | None


@dataclass(frozen=True)
class CTrackCourt:
    """A court of C-Track Public Access (see the module docstring): `courts` maps the code its case
    numbers carry to the name its API gives the court (the opinion search's filter, a row's court),
    in case-number order; `numbers` is their form. `system` is its court system's name (c00
    COURT_SYSTEMS, c27), `family` its API's."""
    name: str
    api_base: str
    courts: Mapping[str, str]
    numbers: CaseNumbers = field(default=None)      # type: ignore[assignment]
    opinion_search: bool = True
    download_paths: Mapping[str, str] = field(default_factory=lambda: dict(DOWNLOAD_PATHS))
    system: str = "kentucky"
    portal: str = "https://appellatepublic.kycourts.net"
    unknowns: tuple[str, ...] = ()          # of PROBE_UNKNOWNS: what the probe answers
    family: ClassVar[str] = "ctrack"
    follows_redirects: ClassVar[bool] = True       # a download's redirect is followed to the file

    @staticmethod
    def headers() -> Mapping[str, str]:
        """The headers every request carries (MANDATORY_HEADERS)."""
        return MANDATORY_HEADERS

    download_headers = headers

    @property
    def time_zone(self) -> str:
        """The time zone the court's days are in (c00 COURT_SYSTEMS)."""
        return COURT_SYSTEMS[self.system].time_zone

    def api_ids(self, code: str) -> dict[str, str]:
        """The ids the API knows a court by: its name (the opinion search's filter, a row's court)."""
        return {"court": self.courts[code]}

    def __post_init__(self):
        if self.numbers is None:
            object.__setattr__(self, "numbers", CaseNumbers(tuple(self.courts)))

    # ------------------------------------------------------------ the API

    @staticmethod
    def url(base: str, endpoint: str, **values: str) -> str:
        """The URL of an endpoint (ENDPOINTS) for the API root `base`."""
        if endpoint in SITE_ROOT_ENDPOINTS:
            split = urllib.parse.urlsplit(base)
            base = f"{split.scheme}://{split.netloc}"
        return base.rstrip("/") + ENDPOINTS[endpoint].format(**values)

    @staticmethod
    def paging_headers(start: int, size: int) -> dict[str, str]:
        """The headers that ask for a page: `size` rows from `start` (1-based), with the total."""
        return {PAGING_START: str(start), PAGING_MAX: str(size), PAGING_CALCULATE: "true"}

    @staticmethod
    def paging_of(headers: Mapping[str, str]) -> Paging:
        more = headers.get(PAGING_MORE)
        return Paging(total=_header_int(headers, PAGING_TOTAL), results=_header_int(headers, PAGING_RESULTS),
                      more=None if more is None else str(more).strip().lower() == "true",
                      limit=_header_int(headers, PAGING_LIMIT))

    def opinion_courts(self) -> list[str]:
        """The court names the opinion search is asked for, one at a time ([] when it has none)."""
        return list(self.courts.values()) if self.opinion_search else []

    # ---------------------------------------------------------- numbers

    def code_of(self, case_number: Any) -> str | None:
        """The code of the court a case number names (`CaseNumbers.code_of`), upper-case; None if none."""
        return self.numbers.code_of(case_number)

    def court_of(self, case_number: Any) -> str | None:
        """The court a case number names: `2019-CA-0012` and `2024 CA ADMIN - ...` alike."""
        code = self.numbers.code_of(case_number)
        return None if code is None else self.courts.get(code)

    def sweep_shards(self, first: int, last: int) -> list[str]:
        """Every top-level shard of FIRST_YEAR..last, ADMIN shards included, sorted as the table sorts them."""
        return sorted(self.numbers.shards(first, last) + self.numbers.admin_shards(first, last))

    # ------------------------------------------------------------- rows

    def document_row(self, item: Mapping[str, Any]) -> dict | None:
        """A document search resultItem -> a `documents` row; None when it names no document id."""
        document_id = document_id_of(item)
        if document_id is None:
            return None
        get = (item.get("rowMap") or {}).get
        row = {"document_id": document_id, **{column: get(key) for column, key in DOCUMENT_ROW_FIELDS.items()},
               "document_available": availability_of(get("documentAvailable"))}
        # Real rows carry neither court nor one-line title, and `+0000` offsets: made what the table holds.
        if row["court"] is None:
            row["court"] = self.court_of(row["case_number"])
        if isinstance(row["case_title"], str) and "\n" in row["case_title"]:
            row["case_title"] = one_line(row["case_title"])
        if isinstance(row["filed_date"], str) and _UTC_OFFSET.search(row["filed_date"]):
            row["filed_date"] = court_date(row["filed_date"])
        return row

    @staticmethod
    def document_row_key(item: Mapping[str, Any], shard: str) -> int:
        """The hash of (DOCUMENT_METADATA_COLUMNS, document_available) of the row `document_row` makes
        of a search resultItem, from the item itself (the values are copied as they are), so an
        unchanged row is never normalized (discovery's `metadata_fingerprint` of the stored row)."""
        row_map = item.get("rowMap") or {}
        try:
            values = _raw_metadata_values(row_map)
        except KeyError:
            values = tuple(row_map.get(key) for key in _RAW_METADATA_KEYS)
        return hash((*values, shard, availability_of(row_map.get("documentAvailable"))))

    @staticmethod
    def search_row_fields(item: Any) -> tuple[str | None, str | None, str | None]:
        """(case number, case id, docket entry id) of a search resultItem, each None when absent."""
        row_map = item.get("rowMap") if isinstance(item, Mapping) else None
        if not isinstance(row_map, Mapping):
            return None, None, None
        values = [row_map.get(key) for key in ("caseHeader.caseNumber", "caseHeader.caseID", "docketEntryID")]
        return tuple(value if isinstance(value, str) else None for value in values)   # type: ignore[return-value]

    @staticmethod
    def search_items(body: Any) -> list | None:
        """A search answer's rows (resultItems, as sent); None when the body has no list of them."""
        items = body.get("resultItems") if isinstance(body, Mapping) else None
        return items if isinstance(items, list) else None

    @staticmethod
    def search_row_map(item: Any) -> Any:
        """The fields of a search row (its rowMap), for the probe's field check."""
        return item.get("rowMap") if isinstance(item, Mapping) else None

    def search_row_entry(self, item: Any) -> tuple[dict, Any] | None:
        """A search row that is a docket entry (an opinion-search row, a document-search row without
        documentID) -> (its `docket_entries` row, its case number); None when it names no docket
        entry. A value of the wrong type raises ShapeProblem, as `docket_entry` does."""
        row_map = item.get("rowMap") if isinstance(item, Mapping) else None
        if not isinstance(row_map, Mapping) or not isinstance(row_map.get("docketEntryID"), str):
            return None
        case_id = row_map.get("caseHeader.caseID")
        return (self.docket_entry(row_map, str(case_id).lower() if case_id else None),
                row_map.get("caseHeader.caseNumber"))

    def case_header(self, raw: Any, *, case_id: str | None = None) -> dict:
        """A case header (`/cases/{id}`, a file's `caseHeader`, or a case-search rowMap) -> a `cases` row."""
        raw = _mapping(raw, "caseHeader")
        case_number = _text(raw, "caseNumber", required=True)
        found_id = _text(raw, "caseID") or case_id
        if not found_id:
            raise ShapeProblem("caseID")
        return {"case_id": found_id.lower(), "case_number": case_number,
                "court": _text(raw, "court") or self.court_of(case_number),
                "court_level": _text(raw, "courtLevel"), "title": one_line(raw.get("shortTitle")),
                "case_type": _text(raw, "caseType"), "classification": _text(raw, "caseClassification"),
                "status": _text(raw, "caseStatus"),
                "status_date": court_date(raw.get("caseStatusDate"), "caseStatusDate"),
                "filed_date": court_date(raw.get("filedDate")), "closed": _flag_value(raw, "closed"),
                "category": _text(raw, "caseCategory"),
                "related_case_numbers": None}

    def case_search_row(self, item: Any) -> dict:
        """A case-search resultItem -> a partial `cases` row (its id is the case's: rowMap.caseID, or id)."""
        item = _mapping(item, "resultItems[]")
        row_map = _mapping(item.get("rowMap"), "rowMap")
        return self.case_header(row_map, case_id=_text(item, "id"))

    def docket_entry(self, raw: Any, case_id: str | None) -> dict:
        """An element of `/cases/{id}/docketentries` (or an opinion-search rowMap) -> a `docket_entries` row."""
        raw = _mapping(raw, "docketentries[]")
        description = _text(raw, "docketEntryDescription")
        has_documents = _flag_value(raw, "hasDocuments")
        return {"docket_entry_id": _text(raw, "docketEntryID", required=True).lower(), "case_id": case_id,
                "entry_type": _text(raw, "docketEntryType"), "subtype": _text(raw, "docketEntrySubtype"),
                "description": description, "filed_date": court_date(raw.get("filedDate")),
                "has_documents": 1 if has_documents is None else has_documents,
                "related_case_numbers": self.numbers.related(description)}

    def entry_file(self, raw: Any, entry: Mapping[str, Any], case: Mapping[str, Any] | None) -> dict:
        """A file of a docket entry -> a `documents` row (with the detail columns and `court_pages`).

        The id is the file's `documentID` (required); case fields come from its nested caseHeader,
        else from the case row the walk holds."""
        raw = _mapping(raw, "publicaccessdocuments[]")
        document_id = _text(raw, "documentID", required=True).lower()
        header = raw.get("caseHeader")
        case_fields = self.case_header(header) if isinstance(header, Mapping) else dict(case or {})
        available = _flag_value(raw, "documentAvailable")
        pages = raw.get("documentText")
        if pages is not None and not (isinstance(pages, list) and all(isinstance(p, str) for p in pages)):
            raise ShapeProblem("documentText", "not a list of page strings")
        case_number = case_fields.get("case_number")
        return {"document_id": document_id, "case_number": case_number,
                "court": case_fields.get("court") or self.court_of(case_number),
                "case_title": case_fields.get("title"),
                "docket_entry_id": (_text(raw, "parentID") or entry["docket_entry_id"]).lower(),
                "description": entry.get("description"),
                "filed_date": court_date(raw.get("parentDate"), "parentDate") or entry.get("filed_date"),
                "case_id": case_fields.get("case_id"), "document_name": _text(raw, "documentName"),
                "entry_type": _text(raw, "parentType") or entry.get("entry_type"),
                "entry_subtype": _text(raw, "parentSubtype") or entry.get("subtype"),
                "dms_document_id": _text(raw, "dmsDocumentID"), "mime_type": _text(raw, "mimeType"),
                "document_description": _text(raw, "documentDescription"),
                "document_available": 1 if available is None else available,
                "related_case_numbers": entry.get("related_case_numbers"),
                "court_pages": pages}

    @staticmethod
    def party(raw: Any, case_id: str, position: int) -> dict:
        """An element of `/cases/{id}/parties` -> a `parties` row (attorneys as a JSON list)."""
        raw = _mapping(raw, "parties[]")
        name = raw.get("partyName") if isinstance(raw.get("partyName"), Mapping) else {}
        attorneys = []
        for attorney in raw.get("attorneys") or []:
            if not isinstance(attorney, Mapping):
                raise ShapeProblem("attorneys[]", "not an object")
            attorney_name = attorney.get("attorneyName") if isinstance(attorney.get("attorneyName"), Mapping) else {}
            attorneys.append({"name": attorney_name.get("displayName"), "role": attorney_name.get("role"),
                              "address": _address(attorney.get("address")), "bar_number": attorney.get("barNumber")})
        return {"case_id": case_id, "position": position, "name": name.get("displayName"),
                "role": name.get("role"), "status": _text(raw, "partyStatus"),
                "pro_se": _flag_value(raw, "proSe"), "address": _address(raw.get("address")),
                "attorneys": attorneys}

    @staticmethod
    def lower_court(raw: Any, case_id: str, position: int) -> dict:
        """An element of `/cases/{id}/lowercourts` -> a `lower_courts` row."""
        raw = _mapping(raw, "lowercourts[]")
        return {"case_id": case_id, "position": position, "name": _text(raw, "lowerCourtName"),
                "case_number": _text(raw, "lowerCourtCaseNumber"),
                "case_title": one_line(raw.get("lowerCourtCaseTitle"))}


KENTUCKY = CTrackCourt(
    name="Kentucky Court of Justice", api_base=REAL_API_BASE,
    courts={"CA": "Kentucky Court of Appeals", "SC": "Kentucky Supreme Court"})
