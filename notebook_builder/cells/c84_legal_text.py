"""Legal text: what a researcher asks of one document, read from its text and its docket entry.

Pure functions, no I/O: the derive stage (c86) feeds them the database's fields, the text and the
court system's words (c83 `LegalWords`: its state's headings and citation forms, Kentucky's by
default; with another system's, its case numbers as c28 `text_numbers` finds them); the benchmark
feeds them the court's own captured texts.

Guarantees:
- `derive_fields()` returns a `DerivedFields` for any input, however bad: a field it cannot read
  with certainty is None, never a guess, and each doubt is one entry in `warnings`. Two sources that
  disagree (the text's publication line and the docket subtype; the description's judge and the
  caption's) give None and a warning, not a pick.
- The fields, as the Kentucky courts write them: kind (opinion / order / brief / other);
  publication_status (`TO BE PUBLISHED` / `NOT TO BE PUBLISHED`); rendered_date (`RENDERED:`);
  judge and judge_title (`BY JUSTICE X`, `X, JUDGE:`); disposition (`AFFIRMING`, ...); lower court,
  its judge and numbers, and the trial court (`APPEAL FROM ...`); the document's own case numbers
  and the related ones, normalized to `YYYY-CC-NNNN`. A caption joined into one line (a web copy,
  OCR) is split at its heading and read the same way.
- Another state's document is read by the same questions in its own words (`_derive_other`): the
  court's heading, the opinion or order heading or the author's line ("By the Court, PICKERING,
  J.:", "MENDHEIM, Justice."), the decision's date and publication marks, the disposition
  ("Vacated and remanded."), the court appealed from and its judge, the system's case numbers.
- `extract_citations()` lists every citation with its span, normalized form and kind: case law
  through eyecite (optional: without it none are found, and the result says so), the state's
  statutes, regulations, court rules and constitution (Kentucky's KRS, KAR, CR, RCr, SCR, RAP, KRE,
  FCRPP; another state's c83 forms), its reporter's or neutral citations in the body, and the case
  numbers named in the body, by which a citation resolves to a document of the archive. An
  eyecite failure on a text is a warning, never an exception.

Knobs read: none.
"""
from __future__ import annotations

import datetime as _dt
import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .c83_legal_words import KENTUCKY_WORDS, LegalWords

log_legal_text = logging.getLogger("kycourt.legal_text")
# eyecite logs every overlap it cannot classify at WARNING; the counts say enough.
logging.getLogger("eyecite").setLevel(logging.ERROR)

LEGAL_TEXT_VERSION = 2   # 2: one-line captions, caption dispositions, unknown (not empty) numbers
KINDS = ("opinion", "order", "brief", "other")
PUBLICATION_STATUSES = ("published", "unpublished")

_MONTHS = {name: number for number, name in enumerate(
    ("JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST", "SEPTEMBER",
     "OCTOBER", "NOVEMBER", "DECEMBER"), start=1)}
_MONTHS.update({name[:3]: number for name, number in list(_MONTHS.items())})
_MONTHS["SEPT"] = 9

# Lines read as the caption: the header, parties, lower court and heading come well before this.
_CAPTION_LINES = 90
_HEADER_LINES = 40
_UNHEADED_CAPTION_LINES = 15
MOJIBAKE_MARKS = ("\ufffd", "\u00c3\u00a2", "\u00e2\u20ac", "\u00c2\u00a7")

_APPELLATE_NUMBER = re.compile(
    r"(?<![\w-])((?:19|20)\d{2})\s*-\s*(CA|SC)\s*-\s*(\d{1,6})(?:-([A-Z]{2,3}))?(?![\w])")
# "2022-CA-1454, 1456, 1457": a number followed by bare sequence numbers of the same year and court.
_APPELLATE_SERIES = re.compile(
    r"(?<![\w-])((?:19|20)\d{2})-(CA|SC)-(\d{1,6})((?:\s*(?:,|&|AND)\s*\d{3,6}(?![\w-]))+)")
_TRIAL_NUMBER = re.compile(r"(?<![\w-])(\d{2,4}-[A-Z]{1,3}-\d{2,6})(?:-\d{3})?(?![\w])")
_COURT_HEADING = KENTUCKY_WORDS.headings
_RENDERED = re.compile(
    r"\bRENDERED\s?:\s*([A-Z]{3,9})\.?\s+(\d{1,2})\s*,?\s*(\d{4})|\bRENDERED\s?:\s*(\d{4})-(\d{2})-(\d{2})",
    re.IGNORECASE)
# A header line that runs on into the caption (the text joined into one line, or a scan's OCR): the
# status is read only where it opens the line, right after the RENDERED date or the NOT TO BE PUBLISHED notice.
_HEADER_STATUS_OPENING = re.compile(
    r"^(?:RENDERED\s?:\s*[A-Z]{3,9}\.?\s+\d{1,2}\s*,?\s*\d{4}(?:\s*;\s*\d{1,2}:\d{2}\s*[AP]\.\s?M\.)?\s+"
    r"(?P<status>(?:NOT\s+)?TO\s+BE\s+PUBLISHED)\b"
    r"|IMPORTANT\s+NOTICE\s+(?P<notice>NOT\s+TO\s+BE\s+PUBLISHED)\s+OPINION\b)")
_JUDGE_TITLES = r"CHIEF\s+JUSTICE|CHIEF\s+JUDGE|SPECIAL\s+JUSTICE|SENIOR\s+JUDGE|SPECIAL\s+JUDGE|JUSTICE|JUDGE"
_JUDGE_NAME = r"(?:[A-Z]\.\s*){0,2}[A-Z][A-Z'\u2019\-]+"
_BY_JUDGE = re.compile(rf"\bBY\s+(?P<title>{_JUDGE_TITLES})\s+(?P<name>{_JUDGE_NAME})")
_AUTHOR_TITLES = r"CHIEF\s+JUDGE|SENIOR\s+JUDGE|SPECIAL\s+JUDGE|JUDGE|JUSTICE"
_CAPTION_AUTHOR = re.compile(rf"^(?P<name>{_JUDGE_NAME}),\s+(?P<title>{_AUTHOR_TITLES})\s*:")
# The same author line inside a line that holds the panel too ("BEFORE: A, B, AND C, JUDGES. C, JUDGE: ...").
_INLINE_AUTHOR = re.compile(rf"(?<![\w.,'\u2019\-])(?P<name>{_JUDGE_NAME}),\s+(?P<title>{_AUTHOR_TITLES})\s*:")
_KIND_PREFIX = re.compile(
    r"^(?:(?:NOT\s+)?TO\s+BE\s+PUBLISHED\s*-\s*)?"
    r"(?:(?:MEMORANDUM\s+)?OPINION(?:\s+OF\s+THE\s+COURT)?(?:\s+AND\s+ORDER)?|ORDER)\b")
_LOWER_COURT = re.compile(
    r"\b(?:ON\s+APPEALS?\s+FROM|APPEALS?\s+FROM|ON\s+REVIEW\s+FROM|ON\s+TRANSFER\s+FROM|"
    r"PETITION\s+FOR\s+REVIEW\s+OF\s+A\s+DECISION\s+OF\s+THE)\s+(?P<court>.+)$")
# At most four words before the court's kind: a county or a board's name, never a sentence of the body.
_COURT_NAME = re.compile(
    r"^(?P<court>(?:[A-Z][A-Z.'\u2019\-]*\s+){0,4}?(?:COURT\s+OF\s+APPEALS|CIRCUIT\s+COURT|DISTRICT\s+COURT|"
    r"FAMILY\s+COURT|COURT|BOARD|COMMISSION|CABINET|AGENCY))\b")
_TRIAL_COURT_LINE = re.compile(
    r"(?<![\w.'\-])(?P<court>[A-Z][A-Z.'\-]*(?:\s+[A-Z][A-Z.'\-]*)?\s+(?:CIRCUIT|DISTRICT|FAMILY)\s+COURT)\s*,?\s+"
    r"(?:ACTION\s+|INDICTMENT\s+|CASE\s+)?NOS?\s?\.")
_LOWER_OPENER = re.compile(
    r"\b(?:ON\s+APPEALS?\s+FROM|APPEALS?\s+FROM|ON\s+REVIEW\s+FROM|ON\s+TRANSFER\s+FROM|"
    r"PETITION\s+FOR\s+REVIEW\s+OF\s+A\s+DECISION\s+OF\s+THE)\s+")
_SPLIT_PETITION = re.compile(r"\bPETITION\s+FOR\s+REVIEW\s+OF\s+A\s+DECISION$")
_OF_THE = re.compile(r"^(?:V\.?\s+)?OF\s+THE\s+(?P<rest>.+)$")
_SAME_LINE = re.compile(
    r"^\s*,?\s*(?:VS?\.?\s+)?(?:HONORABLE\s+(?P<judge>[A-Z][A-Z.,'\u2019\- ]*?),\s*(?:SPECIAL\s+|SENIOR\s+|CHIEF\s+)?"
    r"JUDGE\b[,.]?\s*)?(?P<label>(?:(?:ACTION|INDICTMENT|CASE|CLAIM)\s+)?(?:NOS?\s?\.|NUMBERS?\b)\s*)?")
_APPELLATE_NUMBER_START = re.compile(r"(?:19|20)\d{2}-(?:CA|SC)-\d")
# A Workers' Compensation Board claim as the Court of Appeals' caption numbers it.
_BOARD_NUMBER = re.compile(r"WC-\d{2}-\d{4,6}")
_HONORABLE = re.compile(r"^(?:V\.?\s+)?HONORABLE\s+(?P<judge>.+?),\s*(?:SPECIAL\s+|SENIOR\s+|CHIEF\s+)?JUDGE\b")
_NUMBERS_LINE = re.compile(r"^(?:V\.\s*)?(?:ACTION\s+|INDICTMENT\s+|CASE\s+)?NOS?\.\s*(?P<rest>.*)$")
_OWN_NUMBER_LINE = re.compile(r"^(?:AND\s+)?(?:NOS?\.\s*)?(?:(?:19|20)\d{2}-(?:CA|SC)-\d{1,6}(?:-[A-Z]{2,3})?"
                              r"(?:\s*(?:,|&|AND)\s*)?)+$")
_HEADING = re.compile(r"^(?:MEMORANDUM\s+)?OPINION(?:\s+OF\s+THE\s+COURT|\s+AND\s+ORDER)?\b|^ORDER\b")


@dataclass
class DerivedFields:
    kind: str | None = None
    publication_status: str | None = None
    rendered_date: str | None = None
    judge: str | None = None
    judge_title: str | None = None
    disposition: str | None = None
    lower_court: str | None = None
    lower_court_judge: str | None = None
    lower_court_numbers: list[str] | None = None
    trial_court: str | None = None
    trial_court_numbers: list[str] | None = None
    case_numbers: list[str] | None = None
    related_case_numbers: list[str] | None = None
    caption_end: int = 0            # offset in the text where the caption ends (0: none found)
    warnings: list[str] = field(default_factory=list)


FIELD_NAMES = ("kind", "publication_status", "rendered_date", "judge", "judge_title", "disposition",
               "lower_court", "lower_court_judge", "lower_court_numbers", "trial_court",
               "trial_court_numbers", "case_numbers", "related_case_numbers")


# ------------------------------------------------------------------ numbers


def normalize_case_number(text: str | None) -> str | None:
    """`2019-CA-1234` for any spelling of a Kentucky appellate case number (`2019-CA-001234-MR`,
    `2019 - CA - 1234`), None for anything else (an ADMIN number, a trial court number)."""
    if not text:
        return None
    match = _APPELLATE_NUMBER.search(text.upper())
    if not match or match.group(0).strip() != text.strip().upper():
        return None
    return _appellate(match.group(1), match.group(2), match.group(3))


def _appellate(year: str, court: str, sequence: str) -> str:
    return f"{year}-{court}-{int(sequence):04d}"


def appellate_numbers(text: str) -> list[str]:
    """Every Kentucky appellate case number in `text`, series expanded, normalized, in order, once."""
    found: list[tuple[int, str]] = []
    upper = text.upper()
    for match in _APPELLATE_SERIES.finditer(upper):
        year, court = match.group(1), match.group(2)
        for sequence in re.findall(r"\d{3,6}", match.group(4)):
            found.append((match.start(4), _appellate(year, court, sequence)))
    for match in _APPELLATE_NUMBER.finditer(upper):
        found.append((match.start(), _appellate(match.group(1), match.group(2), match.group(3))))
    return list(dict.fromkeys(number for _, number in sorted(found)))


def _trial_numbers(text: str) -> list[str]:
    return list(dict.fromkeys(m.group(1) for m in _TRIAL_NUMBER.finditer(text.upper())
                              if not _APPELLATE_NUMBER.fullmatch(m.group(1))))


# --------------------------------------------------------------- the fields


def derive_fields(text: str | None, *, description: str | None = None, entry_type: str | None = None,
                  entry_subtype: str | None = None, document_name: str | None = None,
                  case_number: str | None = None, words: LegalWords = KENTUCKY_WORDS,
                  numbers: Callable[[str], list[tuple[int, int, str]]] | None = None) -> DerivedFields:
    """Every field of one document, read in the state's words (`words`; `numbers`: the court system's
    case numbers in a text, for another system than Kentucky); see the module docstring. Never raises
    on bad input."""
    fields = DerivedFields()
    try:
        if words.system == KENTUCKY_WORDS.system:
            _derive_into(fields, text, description, entry_type, entry_subtype, document_name, case_number)
        else:
            _derive_other(fields, text, description, entry_type, entry_subtype, document_name, case_number,
                          words, numbers or (lambda text: []))
    except Exception as exc:  # a rule that trips on input nobody foresaw costs that document its fields
        log_legal_text.debug("derive failed: %s", exc, exc_info=True)
        return DerivedFields(warnings=[f"derive failed: {type(exc).__name__}: {exc}"[:200]])
    return fields


def _derive_into(fields: DerivedFields, text: str | None, description: str | None, entry_type: str | None,
                 entry_subtype: str | None, document_name: str | None, case_number: str | None) -> None:
    warn = fields.warnings.append
    description_line, description_numbers = _description_parts(description)
    lines, offsets = _caption_lines(text)
    if text is not None and any(mark in text for mark in MOJIBAKE_MARKS):
        warn("mojibake: replacement or double-encoded characters in the text")
    if text is not None and not text.strip():
        warn("no text")
    heading_index = _heading_index(lines)
    inline = heading_index is None and _split_inline_heading(lines, offsets)
    if inline:
        heading_index = inline
    if text and text.strip() and heading_index is None:
        warn("no caption: no opinion or order heading in the first lines")
    if heading_index is not None:
        fields.caption_end = offsets[heading_index] + len(lines[heading_index])
    header = _header(lines)

    fields.kind = _agree(warn, "kind", [_kind_of_type(entry_type), _kind_of_description(description_line)])
    if fields.kind is None and description_line is None and entry_type is None:
        # The caption's own heading says what the document is (an order with an opinion attached is an
        # order); without one, the first opinion heading in the first lines.
        fields.kind = (_kind_of_heading(lines[heading_index]) if heading_index is not None
                       else _kind_of_caption(lines[:_CAPTION_LINES]))

    fields.publication_status = _agree(warn, "publication status", [
        _status_of_header(header, warn), _status_of_label(entry_subtype), _status_of_label(document_name)])
    # The RENDERED line stands with the caption (above it, or right under its heading): one further down
    # belongs to another paper (the opinion an order modifies, attached after it).
    fields.rendered_date = _rendered(lines[:heading_index + 3 if heading_index is not None else _CAPTION_LINES], warn)

    judge_description = _judge_of(description_line, warn) if description_line else None
    judge_caption = _judge_of_caption(lines[:(heading_index + 3) if heading_index is not None else 0],
                                      lines[:_CAPTION_LINES + 40])
    judge = _agree(warn, "judge", [judge_description, judge_caption])
    if judge:
        fields.judge_title, fields.judge = judge
    if description_line and not _BY_JUDGE.search(description_line) and " BY " in f" {description_line} ":
        warn("description has BY but no judge")
    fields.disposition = _disposition(description_line) or _disposition(_strip_status(entry_subtype))
    if fields.disposition is None and heading_index is not None:
        # No docket words for it: the caption's line under its heading ("OPINION" / "AFFIRMING").
        fields.disposition = _caption_disposition(" ".join(lines[heading_index:heading_index + 3]))

    if heading_index is not None or text:
        _lower_courts(fields, lines[:heading_index if heading_index is not None else _caption_limit(lines)])
    own = [normalize_case_number(case_number)] if normalize_case_number(case_number) else []
    # The caption: up to the heading; a document without one (a brief, a notice) its first lines.
    caption = lines[:heading_index] if heading_index is not None else lines[:_UNHEADED_CAPTION_LINES]
    caption_own = [number for line in caption if _OWN_NUMBER_LINE.match(line)
                   for number in appellate_numbers(line)]
    if inline:
        # A caption joined into one line: its numbers are the document's own but for the courts' below
        # (those of the other court, and those read as the lower court's).
        named_here = appellate_numbers(" \n".join(caption))
        below = set(fields.lower_court_numbers or [])
        caption_own += [number for number in named_here
                        if number[5:7] == named_here[0][5:7] and number not in below]
    own = list(dict.fromkeys(own + description_numbers + caption_own))
    fields.case_numbers = own or None
    named = appellate_numbers(" \n".join(caption) + " \n" + (description_line or ""))
    related = [number for number in named if number not in own]
    # With a caption read, none named is an answer ([]); from a description alone it is not; and without
    # the document's own numbers the others cannot be told from them.
    fields.related_case_numbers = (related if (lines or related) else None) if own else None


# ------------------------------------------------------------ another state

_OTHER_HEADING = re.compile(r"^(?:(?:MEMORANDUM|PER CURIAM|NONPRECEDENTIAL MEMORANDUM)\s+)?OPINION\b|^ORDER\b"
                            r"|^(?:MEMORANDUM\s+)?DECISION\b|^PER CURIAM\.?$", re.IGNORECASE)
_OTHER_PARTIES = re.compile(r"\b(?:APPELLANTS?|APPELLEES?|RESPONDENTS?|PETITIONERS?|PLAINTIFFS?|DEFENDANTS?|EX PARTE|"
                            r"IN RE|VS?\.)(?![\w])", re.IGNORECASE)
_OTHER_AUTHOR = re.compile(
    r"^(?:By the Court,\s+)?(?P<name>(?:[A-Z]\.\s*){0,2}[A-Z][A-Za-z'\u2019\-]+(?:\s+[A-Z][A-Za-z'\u2019\-]+)?),\s+"
    r"(?P<title>Chief\s+Justice|Justice|Presiding\s+Judge|Chief\s+Judge|Judge|C\.\s?J\.|P\.\s?J\.|J\.)\s*[.:]{0,2}\s*$",
    re.IGNORECASE)
_OTHER_DECISION_WORDS = r"(?:AFFIRMED|REVERSED|VACATED|REMANDED|DISMISSED|DENIED|GRANTED|QUASHED|MODIFIED|RENDERED)"
_OTHER_DISPOSITION = re.compile(
    rf"^(?:(?:APPEAL|PETITION|WRIT|JUDGMENT|ORDER)\s+)?(?P<disposition>{_OTHER_DECISION_WORDS}"
    rf"(?:\s+IN\s+PART)?(?:\s*(?:,|AND|&)?\s*(?:{_OTHER_DECISION_WORDS}|IN\s+PART|WITH\s+INSTRUCTIONS))*)\.?$",
    re.IGNORECASE)
# "we ORDER the judgment of the district court AFFIRMED" (an order's last words).
_OTHER_ORDERED = re.compile(rf"\bORDERS?\s+the\s+(?:judgment|order|petition|appeal)[^.]{{0,120}}?\s"
                            rf"(?P<disposition>{_OTHER_DECISION_WORDS}(?:\s+(?:AND|IN PART)\s+{_OTHER_DECISION_WORDS})*)")
_OTHER_COURT_WORDS = "|".join(word for name in ("District", "Circuit", "Superior", "Juvenile", "Probate", "Family",
                                                "Municipal", "Justice", "County", "Tax", "Common Pleas")
                              for word in (name, name.upper()))
_OTHER_LOWER_COURT = re.compile(
    r"(?P<court>(?:(?:[A-Z][\w.'\-]*|of)\s+){0,4}?(?:(?:Judicial|JUDICIAL)\s+)?"
    rf"(?:{_OTHER_COURT_WORDS})\s+(?:Court|COURT)"
    r"(?:\s+(?:of|for|OF|FOR)\s+(?:the\s+|THE\s+)?(?:[A-Z][\w.'\-]*\s+){0,3}?(?:County|COUNTY|Parish|District))?"
    r"(?:,\s+(?:[A-Z][\w.'\-]*\s+){1,2}(?:County|COUNTY))?"
    r"|(?:Court|COURT) (?:of|OF) (?:(?:Civil|Criminal|CIVIL|CRIMINAL) )?(?:Appeals|APPEALS))")
_OTHER_FROM = re.compile(r"\b(?:appeals?|review|petition|certified\s+questions?|transfer)\b[^.]{0,240}?\bfrom\b|"
                         r"\bon\s+(?:appeal|review)\s+from\b", re.IGNORECASE)
_OTHER_LOWER_JUDGE = re.compile(
    r"^[\s.;,:]*(?:(?:the\s+)?Honorable\s+)?(?P<judge>[A-Z][\w.'\u2019\-]*(?:\s+[A-Z][\w.'\u2019\-]*){0,3}),\s+"
    r"(?:(?:District|Circuit|Senior|Chief|Presiding|Special)\s+)?Judge\b", re.IGNORECASE)
_OTHER_TRIAL_NUMBER = re.compile(r"(?<![\w-])([A-Z]{1,4}-\d{2,4}-\d{2,7}|\d{2,4}-?[A-Z]{1,4}-?\d{2,7})(?![\w-])")


def _derive_other(fields: DerivedFields, text: str | None, description: str | None, entry_type: str | None,
                  entry_subtype: str | None, document_name: str | None, case_number: str | None,
                  words: LegalWords, numbers: Callable[[str], list[tuple[int, int, str]]]) -> None:
    """`_derive_into` for another state's document, in its words (see the module docstring)."""
    warn = fields.warnings.append
    lines, offsets = _caption_lines(text)
    if text is not None and any(mark in text for mark in MOJIBAKE_MARKS):
        warn("mojibake: replacement or double-encoded characters in the text")
    if text is not None and not text.strip():
        warn("no text")
    heading, author = _other_heading(lines, words)
    end = heading if heading is not None else author
    if text and text.strip() and end is None:
        warn("no caption: no opinion or order heading, nor an author's line, in the first lines")
    if end is not None:
        fields.caption_end = offsets[end] + len(lines[end])
    caption = lines[:end] if end is not None else lines[:_UNHEADED_CAPTION_LINES]
    docket = " \n".join(part for part in (entry_type, entry_subtype, description, document_name) if part)

    fields.kind = _agree(warn, "kind", [_kind_of_type(entry_type), _other_kind(description), _other_kind(document_name)])
    if fields.kind is None and heading is not None:
        fields.kind = _kind_of_heading(lines[heading]) or ("opinion" if author is not None else None)
    elif fields.kind is None and author is not None:
        fields.kind = "opinion"

    head = "\n".join(lines[:(end if end is not None else _HEADER_LINES) + 1])
    fields.publication_status = _agree(warn, "publication status", [_other_status(words, head, warn),
                                                                    _other_status(words, docket, warn)])
    fields.rendered_date = _other_rendered(words, head, warn)
    if author is not None:
        match = _OTHER_AUTHOR.match(lines[author])
        fields.judge_title = re.sub(r"\s+", " ", match.group("title").upper()).replace(". ", ".")
        fields.judge = re.sub(r"\s+", " ", match.group("name").upper())
    fields.disposition = _other_disposition(description, lines, end)
    # An order names the court below in its first lines, after its heading.
    _other_lower_court(fields, "\n".join(lines[:(end if end is not None else _UNHEADED_CAPTION_LINES) + 6]))

    caption_text = "\n".join(caption)
    lower_at = _OTHER_FROM.search(caption_text)
    named = numbers(caption_text)
    own = [case_number.strip().upper()] if case_number and case_number.strip() else []
    own += [number for start, _, number in named if lower_at is None or start < lower_at.start()]
    own = list(dict.fromkeys(own))
    fields.case_numbers = own or None
    related = [number for _, _, number in named + numbers(description or "") if number not in own]
    fields.related_case_numbers = (list(dict.fromkeys(related)) if (lines or related) else None) if own else None


def _other_heading(lines: list[str], words: LegalWords) -> tuple[int | None, int | None]:
    """(the opinion or order heading's line, the author's line), after the court's heading or the
    parties. With a heading, the author's line follows it within 3 lines; without one, it is the first. An
    author's line never ends a sentence begun above it (a lower court's judge: "... Rhonda K." /
    "Forsberg, Judge.")."""
    seen, heading, candidate = False, None, None
    for index, line in enumerate(lines[:_CAPTION_LINES]):
        if heading is not None and index - heading > 3:
            break
        if words.headings.match(line.upper()) or _OTHER_PARTIES.search(line):
            seen = True
            if not _OTHER_HEADING.match(line):
                continue
        if heading is None and seen and _OTHER_HEADING.match(line):
            heading = index
        elif _OTHER_AUTHOR.match(line) and not re.search(r"(?:[,;a-z]|\b[A-Z]\.)$", lines[index - 1]):
            if heading is not None:
                return heading, index
            if candidate is None and seen:
                candidate = index
    return (heading, None) if heading is not None else (None, candidate)


def _other_kind(text: str | None) -> str | None:
    """What the first of OPINION, ORDER, BRIEF a docket's words name makes a document; None: none."""
    if not text:
        return None
    found = re.search(r"\b(OPINION|DECISION|ORDER|BRIEF)\b", text.upper())
    if found is None:
        return None
    return {"OPINION": "opinion", "DECISION": "opinion", "ORDER": "order", "BRIEF": "brief"}[found.group(1)]


def _other_status(words: LegalWords, text: str, warn) -> str | None:
    published = bool(words.published and words.published.search(text))
    unpublished = bool(words.unpublished and words.unpublished.search(text))
    if published and unpublished:
        warn("publication status: the text says both")
        return None
    return "published" if published else "unpublished" if unpublished else None


def _other_rendered(words: LegalWords, text: str, warn) -> str | None:
    match = words.rendered.search(text) if words.rendered else None
    if match is None:
        return None
    month_text, year = match.group("month"), int(match.group("year"))
    month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text.upper().rstrip("."))
    try:
        return _dt.date(year + 2000 if year < 100 else year, month or 0, int(match.group("day"))).isoformat()
    except ValueError:
        warn(f"rendered date: {match.group(0)!r} is not a date")
        return None


def _other_disposition(description: str | None, lines: list[str], end: int | None) -> str | None:
    """What the court did: the docket's quoted words ("Vacated and remanded."), else a line of the caption
    or of the text's last lines that says only that, else an order's "ORDER the judgment ... AFFIRMED"."""
    def normal(words: str) -> str:
        return re.sub(r"\s+", " ", words.upper().replace("&", "AND")).strip(" .,")
    for quoted in re.findall(r"\"([^\"]{3,80})\"", description or ""):
        match = _OTHER_DISPOSITION.match(quoted.strip())
        if match:
            return normal(match.group("disposition"))
    around = lines[:(end if end is not None else _UNHEADED_CAPTION_LINES) + 3] + lines[-60:]
    for line in around:
        match = _OTHER_DISPOSITION.match(line.strip())
        if match:
            return normal(match.group("disposition"))
    ordered = _OTHER_ORDERED.search(" ".join(lines[-60:]))
    return normal(ordered.group("disposition")) if ordered else None


def _other_lower_court(fields: DerivedFields, caption: str) -> None:
    """The court appealed from (its judge and numbers): the first court named after "Appeal from"."""
    opener = _OTHER_FROM.search(caption)
    if opener is None:
        return
    court = _OTHER_LOWER_COURT.search(caption, opener.end(), opener.end() + 400)
    if court is None:
        return
    name = re.sub(r"\s+", " ", court.group("court")).strip().upper()
    fields.lower_court = re.sub(r"^THE ", "", name)
    rest = caption[court.end():court.end() + 240]
    # To the sentence's end (not an initial's period: "Rhonda K." / "Forsberg, Judge."), or the parenthesis'.
    rest = rest[:re.search(r"(?<!\s[A-Z])\.[ \t]*(?:\n|$)|\)|$", rest).start()]
    rest = " ".join(rest.split())
    judge = _OTHER_LOWER_JUDGE.match(rest)
    fields.lower_court_judge = re.sub(r"\s+", " ", judge.group("judge")).upper() if judge else None
    found = list(dict.fromkeys(_OTHER_TRIAL_NUMBER.findall(rest.upper())))
    fields.lower_court_numbers = found or None
    if "APPEALS" not in fields.lower_court:
        fields.trial_court, fields.trial_court_numbers = fields.lower_court, found or None


def _agree(warn, what: str, values: Iterable[Any]) -> Any:
    """The one value the sources that know agree on; None (and a warning) when they disagree."""
    known = list(dict.fromkeys(value for value in values if value is not None))
    if len(known) > 1:
        warn(f"{what} sources disagree: {' / '.join(map(str, known))}")
        return None
    return known[0] if known else None


def _description_parts(description: str | None) -> tuple[str | None, list[str]]:
    """(the description's first line without its leading case numbers, those numbers)."""
    if not description or not description.strip():
        return None, []
    first = re.sub(r"\s+", " ", description.replace("\r\n", "\n").split("\n")[0]).strip().upper()
    numbers: list[str] = []
    leading = re.match(r"^((?:(?:19|20)\d{2}-(?:CA|SC)-\d{1,6}(?:-[A-Z]{2,3})?|\d{3,6})"
                       r"(?:\s*(?:,|&|AND)\s*|\s+))+", first)
    if leading and _APPELLATE_NUMBER.search(leading.group(0)):
        numbers = appellate_numbers(leading.group(0))
        first = first[leading.end():].strip()
    return first or None, numbers


def _caption_lines(text: str | None) -> tuple[list[str], list[int]]:
    """The first lines of the text (page one and a little more), stripped, blank ones dropped,
    with each line's offset in the text."""
    if not text:
        return [], []
    lines, offsets = [], []
    for match in re.finditer(r"[^\r\n\f]+", text[:20000]):
        line = re.sub(r"\s+", " ", match.group(0)).strip()
        if line:
            lines.append(line)
            offsets.append(match.start() + (len(match.group(0)) - len(match.group(0).lstrip())))
        if len(lines) >= _CAPTION_LINES + 60:
            break
    return lines, offsets


def _heading_index(lines: list[str]) -> int | None:
    """The caption's opinion/order heading: the first such line after the parties (an APPELLEE,
    RESPONDENT or MOVANT line, a `V.` line, or the court's name), else None."""
    seen_parties = False
    for index, line in enumerate(lines[:_CAPTION_LINES]):
        upper = line.upper()
        if re.search(r"\b(APPELLEES?|RESPONDENTS?|MOVANTS?|PETITIONERS?|IN RE:|IN SUPREME COURT|V\.|VS\.)",
                     upper) or _COURT_HEADING.match(upper):
            seen_parties = True
            if not _HEADING.match(upper):
                continue
        if seen_parties and _HEADING.match(upper) and not upper.startswith("OPINIONS "):
            return index
    return None


_ROLE_WORD = re.compile(r"\b(?:CROSS-)?(?:APPELLEES?|APPELLANTS?|RESPONDENTS?|PETITIONERS?|MOVANTS?)\b")
_INLINE_HEADING = re.compile(
    rf"\b(?:(?:MEMORANDUM\s+)?OPINION(?:\s+OF\s+THE\s+COURT)?(?:\s+AND\s+ORDER)?"
    rf"(?:\s+BY\s+(?:{_JUDGE_TITLES})\s+{_JUDGE_NAME})?|ORDER)\s+(?=[A-Z]+ING\b)")
_DISPOSITION_WORD = re.compile(r"[A-Z]+ING|AND|&|,|IN|PART")


def _split_inline_heading(lines: list[str], offsets: list[int]) -> int | None:
    """A caption joined into one line (a site's copy, a scan's OCR) holds its heading inside a line:
    `... COMMONWEALTH OF KENTUCKY APPELLEE OPINION AFFIRMING ** ** ...`. The line is split in two there
    (in place) and the heading's index returned; None when no line holds a heading after a party's role
    and before the caption's row of stars, followed by what the court did."""
    for index, line in enumerate(lines[:5]):
        upper = line.upper()
        end = upper.find("** ** **")
        role = _ROLE_WORD.search(upper, 0, end if end >= 0 else len(upper))
        if not role:
            continue
        heading = _INLINE_HEADING.search(upper, role.end(), end if end >= 0 else len(upper))
        if not heading:
            continue
        lines[index:index + 1] = [line[:heading.start()].rstrip(), line[heading.start():]]
        offsets[index:index + 1] = [offsets[index], offsets[index] + heading.start()]
        return index + 1
    return None


def _caption_disposition(text: str) -> str | None:
    """What the court did, as the caption prints it under (or after) its heading: `AFFIRMING`,
    `AFFIRMING, IN PART, AND REVERSING AND REMANDING, IN PART`; None when no such words follow."""
    rest = _HEADING.sub("", text.upper().strip(), count=1)
    rest = re.sub(rf"^(?:\s+OF\s+THE\s+COURT)?(?:\s+AND\s+ORDER)?\s*(?:BY\s+(?:{_JUDGE_TITLES})\s+{_JUDGE_NAME})?",
                  "", rest)
    words: list[str] = []
    tokens = re.findall(r"[A-Z]+|&|,|\S", rest)
    for position, token in enumerate(tokens):
        if not _DISPOSITION_WORD.fullmatch(token):
            break
        if token == "IN" and (position + 1 >= len(tokens) or tokens[position + 1] != "PART"):
            break
        if token == "PART" and (not words or words[-1] != "IN"):
            break
        words.append(token)
    while words and words[-1] in ("AND", "&", ",", "IN"):
        words.pop()
    if not words or not any(word.endswith("ING") for word in words):
        return None
    return re.sub(r"\s+,", ",", " ".join("AND" if word == "&" else word for word in words))


def _caption_limit(lines: list[str]) -> int:
    """Without a heading, the caption's end: the row of stars or the panel line, else the first lines."""
    for index, line in enumerate(lines[:_CAPTION_LINES]):
        if line.startswith("** **") or line.upper().startswith("BEFORE:"):
            return index
    return _CAPTION_LINES


def _header(lines: list[str]) -> list[str]:
    """The lines before the court's name (RENDERED, publication status, notices)."""
    for index, line in enumerate(lines[:_HEADER_LINES]):
        if _COURT_HEADING.match(line.upper()) or line.upper().startswith("SUPREME COURT OF KENTUCKY"):
            return lines[:index]
    return lines[:12]


def _kind_of_type(entry_type: str | None) -> str | None:
    if not entry_type or not entry_type.strip():
        return None
    upper = entry_type.upper()
    if "OPINION" in upper:
        return "opinion"
    if "ORDER" in upper:
        return "order"
    if "BRIEF" in upper:
        return "brief"
    return None   # a type we do not know says nothing either way


def _kind_of_description(line: str | None) -> str | None:
    if not line:
        return None
    line = _strip_status(line) or ""
    if re.match(r"^(?:MEMORANDUM\s+)?OPINION\b", line):
        return "opinion"
    if re.match(r"^(?:AMENDED\s+|SPECIAL\s+)?ORDER\b", line):
        return "order"
    if re.match(r"^(?:\w+\s+){0,3}BRIEF\b", line):
        return "brief"
    return "other"


def _kind_of_heading(line: str) -> str | None:
    upper = line.upper()
    if re.match(r"^(?:MEMORANDUM\s+)?OPINION\b", upper):
        return "opinion"
    if re.match(r"^ORDER\b", upper):
        return "order"
    return None


def _kind_of_caption(lines: list[str]) -> str | None:
    for line in lines:
        upper = line.upper()
        if re.match(r"^(?:MEMORANDUM\s+)?OPINION(?:\s+OF\s+THE\s+COURT|\s+AND\s+ORDER)?\b", upper):
            return "opinion"
    return None


def _strip_status(label: str | None) -> str | None:
    if not label:
        return None
    return re.sub(r"^(?:NOT\s+)?TO\s+BE\s+PUBLISHED\s*-\s*", "", label.strip().upper()) or None


def _status_of_header(header: list[str], warn) -> str | None:
    found = set()
    for line in header:
        upper = line.upper().strip(" .")
        opening = _HEADER_STATUS_OPENING.match(upper)
        if re.fullmatch(r"NOT\s+TO\s+BE\s+PUBLISHED(?:\s+OPINION)?", upper):
            found.add("unpublished")
        elif re.fullmatch(r"TO\s+BE\s+PUBLISHED", upper):
            found.add("published")
        elif opening:
            found.add("published" if (opening.group("status") or opening.group("notice")) == "TO BE PUBLISHED"
                      else "unpublished")
    if len(found) > 1:
        warn("publication status: the header says both")
        return None
    return found.pop() if found else None


def _status_of_label(label: str | None) -> str | None:
    if not label:
        return None
    upper = label.strip().upper()
    if upper.startswith("NOT TO BE PUBLISHED"):
        return "unpublished"
    if upper.startswith("TO BE PUBLISHED"):
        return "published"
    return None


def _rendered(lines: list[str], warn) -> str | None:
    for line in lines:
        match = _RENDERED.search(line)
        if not match:
            continue
        try:
            if match.group(1):
                month = _MONTHS.get(match.group(1).upper())
                if month is None:
                    warn(f"rendered date: unknown month {match.group(1)!r}")
                    return None
                day = _dt.date(int(match.group(3)), month, int(match.group(2)))
            else:
                day = _dt.date(int(match.group(4)), int(match.group(5)), int(match.group(6)))
        except ValueError:
            warn(f"rendered date: {match.group(0)!r} is not a date")
            return None
        return day.isoformat()
    return None


def _normalize_judge(title: str, name: str) -> tuple[str, str]:
    name = re.sub(r"\.\s*", ". ", name.upper().replace("\u2019", "'")).strip()
    return re.sub(r"\s+", " ", title.upper()), re.sub(r"\s+", " ", name)


def _not_a_name(word: str) -> bool:
    return word.endswith("ING") or word in ("AND", "THE", "OF", "IN", "PART", "ORDER", "OPINION")


def _judge_of(line: str, warn) -> tuple[str, str] | None:
    match = _BY_JUDGE.search(line)
    if not match:
        return None
    name = match.group("name")
    # "OPINION OF THE COURT BY JUSTICE REVERSING": the name left out, the disposition read as one.
    if _not_a_name(name):
        warn(f"judge: {name!r} after {match.group('title')} is not a name")
        return None
    return _normalize_judge(match.group("title"), name)


def _judge_of_caption(heading_lines: list[str], lines: list[str]) -> tuple[str, str] | None:
    for line in heading_lines:
        match = _BY_JUDGE.search(line.upper())
        if match and not _not_a_name(match.group("name")):
            return _normalize_judge(match.group("title"), match.group("name"))
    for index, line in enumerate(lines):
        upper = line.upper()
        before = upper.find("BEFORE:")
        if before == 0:
            # The panel on its line, the author's "NAME, JUDGE:" opening the next, or on the panel's line
            # after it (a text joined into fewer lines).
            inline = _INLINE_AUTHOR.search(upper, before + 7, before + 400)
            if inline:
                return _normalize_judge(inline.group("title"), inline.group("name"))
            for following in lines[index + 1:index + 4]:
                match = _CAPTION_AUTHOR.match(following.upper())
                if match:
                    return _normalize_judge(match.group("title"), match.group("name"))
            return None
        if before > 0 and re.search(r"\*\s*\*\s*\*\s*\*\s*\*\s*BEFORE:$", upper[:before + 7]):
            # One line holding the whole caption: the panel follows the caption's row of stars.
            inline = _INLINE_AUTHOR.search(upper, before + 7, before + 400)
            return _normalize_judge(inline.group("title"), inline.group("name")) if inline else None
    return None


def _disposition(line: str | None) -> str | None:
    if not line:
        return None
    rest = _KIND_PREFIX.sub("", line.upper(), count=1)
    # "BY JUSTICE REVERSING": a name left out; only "BY JUSTICE" goes, the disposition stays.
    rest = _BY_JUDGE.sub(lambda m: f" {m.group('name')}" if _not_a_name(m.group("name")) else " ", rest)
    rest = re.sub(rf"\bBY\s+(?:{_JUDGE_TITLES})\s*$", " ", rest)
    rest = re.sub(r"\s+", " ", rest).strip(" ,.;:-")
    if not rest or not re.search(r"\b[A-Z]+ING\b", rest) or rest in ("OTHER",):
        return None
    return rest


def _lower_courts(fields: DerivedFields, lines: list[str]) -> None:
    lower_court = None
    lower_judges: list[str] = []
    lower_numbers: list[str] = []
    trial_court = None
    trial_numbers: list[str] = []
    appellate_lower: list[str] = []

    def take_numbers(numbers: list[str]) -> None:
        nonlocal appellate_lower, lower_numbers
        appellate_lower += [n for n in numbers if _APPELLATE_NUMBER.fullmatch(n)]
        lower_numbers += numbers

    index = 0
    while index < len(lines):
        upper = lines[index].upper()
        # A text joined into one line holds its body too: the caption ends at the row of stars.
        caption_part = upper.split("** ** **")[0]
        if _SPLIT_PETITION.search(caption_part) and index + 1 < len(lines):
            following = _OF_THE.match(lines[index + 1].upper())
            if following:     # "PETITION FOR REVIEW OF A DECISION" / "v. OF THE WORKERS' COMPENSATION BOARD"
                caption_part = f"{caption_part} OF THE {following.group('rest')}"
                index += 1
        openers = list(_LOWER_OPENER.finditer(caption_part))
        for number, opener in enumerate(openers):
            segment = caption_part[opener.end():openers[number + 1].start() if number + 1 < len(openers) else None]
            court = _COURT_NAME.match(segment.strip())
            name = _court_name(court.group("court")) if court else None
            if name and lower_court not in (None, name):
                fields.warnings.append(f"lower court: the caption names {lower_court} and {name}")
                fields.lower_court = None
                return
            lower_court = name or lower_court
            if court:   # what the line holds after the court's name: its judge, its numbers
                judge, numbers = _same_line_details(segment.strip()[court.end():])
                lower_judges += [judge] if judge else []
                take_numbers(numbers)
        if openers:
            for following in lines[index + 1:index + 6]:
                fupper = following.upper()
                honorable = _HONORABLE.match(fupper)
                if honorable:
                    lower_judges.append(re.sub(r"\s+", " ", honorable.group("judge")).strip())
                    continue
                numbers = _NUMBERS_LINE.match(fupper)
                continuation = re.match(r"^(?:&|AND|,)\s*\S", fupper) and (
                    _APPELLATE_NUMBER.search(fupper) or _TRIAL_NUMBER.search(fupper))
                if _TRIAL_COURT_LINE.search(fupper):
                    break
                if numbers or continuation:
                    rest = numbers.group("rest") if numbers else fupper
                    take_numbers(_leading_numbers(rest) or (appellate_numbers(rest) + _trial_numbers(rest)))
                    continue
                if _LOWER_OPENER.search(fupper) or _APPELLATE_NUMBER.search(fupper) is None:
                    break
        trial = _TRIAL_COURT_LINE.search(caption_part)
        if trial:
            trial_court = trial_court or re.sub(r"\s+", " ", trial.group("court"))
            found = [n for n in _leading_numbers(caption_part[trial.end():]) if not _APPELLATE_NUMBER.fullmatch(n)]
            if not found and not caption_part[trial.end():].strip():
                # "BULLITT CIRCUIT COURT NOS." with its numbers on the lines below
                for following in lines[index + 1:index + 5]:
                    rest = following.upper()
                    numbers = _leading_numbers(rest, whole=True)
                    if not numbers:
                        break
                    found += numbers
            trial_numbers += found
        index += 1
    if lower_court is None:
        if lines and any(re.search(r"\bIN SUPREME COURT\b|ORIGINAL ACTION", line.upper()) for line in lines):
            fields.lower_court = None   # an original action: there is no lower court
        return
    fields.lower_court = lower_court
    judges = list(dict.fromkeys(lower_judges))
    if len(judges) > 1:
        fields.warnings.append(f"lower court judge: the caption names {' and '.join(judges)}")
    fields.lower_court_judge = judges[0] if len(judges) == 1 else None
    # A court named without a number: the numbers are unknown, not none.
    fields.lower_court_numbers = list(dict.fromkeys(lower_numbers)) or None
    if trial_court is None and re.search(r"\b(CIRCUIT|DISTRICT|FAMILY) COURT$", lower_court):
        trial_court, trial_numbers = lower_court, [n for n in lower_numbers if n not in appellate_lower]
    fields.trial_court = trial_court
    fields.trial_court_numbers = (list(dict.fromkeys(trial_numbers)) or None) if trial_court else None


def _court_name(name: str) -> str:
    name = re.sub(r"^THE\s+", "", re.sub(r"\s+", " ", name).strip())
    return "COURT OF APPEALS" if name == "KENTUCKY COURT OF APPEALS" else name


def _same_line_details(rest: str) -> tuple[str | None, list[str]]:
    """(the judge, the numbers) that follow a lower court's name on its own line, in the caption's order:
    `HONORABLE A. B, JUDGE ACTION NO. 18-CR-00927`, `CASE NO. 2010-CA-001194-MR`; anything else ends it."""
    match = _SAME_LINE.match(rest)
    judge = re.sub(r"\s+", " ", match.group("judge")).strip() if match and match.group("judge") else None
    after = rest[match.end():] if match else rest
    if match and (match.group("label") or match.group("judge")) or _APPELLATE_NUMBER_START.match(after.strip()):
        return judge, _leading_numbers(after)
    return judge, []


def _leading_numbers(text: str, whole: bool = False) -> list[str]:
    """The case numbers that open `text` (separated by commas, `&`, `AND`), normalized, up to the first
    word that is not one; with `whole`, none unless they are all the text holds."""
    numbers: list[str] = []
    for token in re.findall(r"[^\s,&]+|[,&]", text.upper()):
        token = token.rstrip(".;")
        if token in ("", ",", "&", "AND"):
            continue
        appellate = _APPELLATE_NUMBER.fullmatch(token)
        trial = _TRIAL_NUMBER.fullmatch(token)
        if appellate:
            numbers.append(_appellate(appellate.group(1), appellate.group(2), appellate.group(3)))
        elif trial:
            numbers.append(trial.group(1))
        elif _BOARD_NUMBER.fullmatch(token):
            numbers.append(token)
        else:
            return [] if whole else numbers
    return numbers


# ---------------------------------------------------------------- citations


@dataclass(frozen=True)
class Citation:
    start: int
    end: int
    kind: str          # case, statute, regulation, rule, constitution, case_number, journal
    form: str          # full, short, id, supra, reference
    matched_text: str
    normalized: str
    case_number: str | None = None   # a Kentucky appellate number the citation names (resolution)
    year: str | None = None
    court: str | None = None


@dataclass
class CitationResult:
    citations: list[Citation] = field(default_factory=list)
    unparsed: int = 0                # what eyecite found but could not read
    warnings: list[str] = field(default_factory=list)
    extractor: str = ""


@functools.lru_cache(maxsize=1)
def eyecite_version() -> str | None:
    """eyecite's version, or None when it is not installed (asked once: not imported here)."""
    try:
        import importlib.util
        from importlib.metadata import version
        if importlib.util.find_spec("eyecite") is None:
            return None
        return version("eyecite")
    except Exception:   # installed without metadata
        return None


# eyecite costs ~2 us a character even where there is nothing to find (measured: 17 ms for an
# 8,000-character text with no citation); it is run only on texts holding something citation-shaped:
# a number, a reporter-like capitalized group, a number or a blank page (`545 S.W.3d 284`,
# `648 S.W.3d at 89`, `2022 WL 2182801`, `545 S.W.3d ___`), Id., Ibid., supra, a section sign, or a
# neutral citation (`2019-Ohio-123`).
_EYECITE_CANDIDATE = re.compile(r"\d\s+[A-Z][\w.&'\s]{0,30}?\s+(?:\d|_{2,})|\b(?:[Ii]d|[Ii]bid)\.|\bsupra\b|§"
                                r"|\d-[A-Z][a-z]+-\d")


def extract_citations(text: str | None, *, own_case_numbers: Iterable[str] = (), body_start: int = 0,
                      use_eyecite: bool = True, words: LegalWords = KENTUCKY_WORDS,
                      numbers: Callable[[str], list[tuple[int, int, str]]] | None = None) -> CitationResult:
    """Every citation of `text` (see the module docstring), in the state's words (`words`; `numbers`:
    the court system's case numbers in a text, for another system than Kentucky), sorted by start;
    never raises."""
    result = CitationResult()
    if not text:
        return result
    version = eyecite_version() if use_eyecite else None
    prefix = words.method.removesuffix("-rules") if words.method.endswith("-rules") else words.method
    result.extractor = f"{prefix}-rules-{LEGAL_TEXT_VERSION}" + (f"+eyecite-{version}" if version else "")
    if use_eyecite and version is None:
        result.warnings.append("eyecite not installed: case law citations not extracted")
    if version and _EYECITE_CANDIDATE.search(text):
        _eyecite_citations(text, result)
    own = set(own_case_numbers)
    case_law = [(citation.start, citation.end) for citation in result.citations if citation.kind == "case"]
    for form in words.citations:
        for match in form.pattern.finditer(text):
            if form.kind == "case" and (match.start() < body_start or any(
                    start < match.end() and match.start() < end for start, end in case_law)):
                continue      # the document's own citation in its header, or one eyecite read
            result.citations.append(Citation(match.start(), match.end(), form.kind, "full", match.group(0),
                                             form.normal(match)))
    if numbers is None:
        found = ((match.start(), match.end(), _appellate(match.group(1), match.group(2), match.group(3)))
                 for match in _APPELLATE_NUMBER.finditer(text))
    else:
        found = numbers(text)
    for start, end, number in found:
        if start < body_start or number in own:
            continue
        result.citations.append(Citation(start, end, "case_number", "reference", text[start:end], number,
                                         case_number=number))
    result.citations.sort(key=lambda citation: (citation.start, citation.end, citation.kind))
    return result


def collapse_whitespace(text: str) -> tuple[str, list[int]]:
    """(the text with each run of whitespace made one space, the offset in `text` of each of its
    characters): eyecite reads `2022 \r\nWL 2182801` only as `2022 WL 2182801`."""
    pieces, offsets = [], []
    for match in re.finditer(r"\s+|\S+", text):
        if match.group(0)[0].isspace():
            pieces.append(" ")
            offsets.append(match.start())
        else:
            pieces.append(match.group(0))
            offsets.extend(range(match.start(), match.end()))
    return "".join(pieces), offsets


def _eyecite_citations(text: str, result: CitationResult) -> None:
    try:
        from eyecite import get_citations
        from eyecite import models
        collapsed, offsets = collapse_whitespace(text)
        found = get_citations(collapsed)
    except Exception as exc:   # eyecite trips on a text: its case law is lost, nothing else
        result.warnings.append(f"eyecite failed: {type(exc).__name__}: {exc}"[:200])
        return
    forms = ((models.FullCaseCitation, "case", "full"), (models.ShortCaseCitation, "case", "short"),
             (models.SupraCitation, "case", "supra"), (models.IdCitation, "case", "id"),
             (models.FullLawCitation, "statute", "full"), (models.FullJournalCitation, "journal", "full"))
    for citation in found:
        for cls, kind, form in forms:
            if isinstance(citation, cls):
                break
        else:
            result.unparsed += 1
            continue
        try:
            start, end = citation.span()
            start, end = offsets[start], offsets[end - 1] + 1   # back to the text as given
            normalized = citation.corrected_citation() if form in ("full", "short") else citation.matched_text()
            metadata = getattr(citation, "metadata", None)
            year = getattr(metadata, "year", None) if form == "full" else None
            court = getattr(metadata, "court", None) if form == "full" else None
        except Exception:   # a citation eyecite found but cannot describe
            result.unparsed += 1
            continue
        result.citations.append(Citation(start, end, kind, form, text[start:end], str(normalized),
                                         year=None if year is None else str(year),
                                         court=None if court is None else str(court)))
