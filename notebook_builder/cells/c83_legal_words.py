"""Legal words: how each court system's state writes its documents, as derive (c84) reads them.

Pure data, no I/O. `legal_words(system)` is a `LegalWords` for every court system:
- `headings`: the court's heading line on a document's first page ("SUPREME COURT OF KENTUCKY",
  "IN THE SUPREME COURT OF THE STATE OF NEVADA", "SUPREME COURT OF ALABAMA");
- `citations`: the state's statutes, regulations, court rules and constitution as its courts cite
  them, and its own reporter's or neutral citations ("KRS 532.080(2)", "NRS 200.010", "Ala. Code §
  13A-5-40", "2024 ND 123"), each `CitationForm` with its normalized form;
- `rendered`: the line that dates a decision ("RENDERED: APRIL 18, 2024", Nevada's "FILED JUN 18
  2026", Alabama's "REL: January 23, 2026"); `published` / `unpublished`: the marks of a published
  or unpublished decision in a document's first lines or its docket entry's words;
- `method`: the name derive records for the rules that read them ("ky-rules" for Kentucky).
Kentucky's words are those its documents have always been read with; c84 also reads Kentucky's
appellate case numbers, captions and lower courts by rules of their own. Another system's case
numbers come from its courts (c28 `text_numbers`), given to derive beside these words.

Knobs read: none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_LEGAL_MONTH = (r"(?P<month>JAN(?:UARY)?|FEB(?:RUARY)?|MAR(?:CH)?|APR(?:IL)?|MAY|JUNE?|JULY?|AUG(?:UST)?"
                r"|SEPT?(?:EMBER)?|OCT(?:OBER)?|NOV(?:EMBER)?|DEC(?:EMBER)?)")
_LEGAL_SUB = r"(?P<sub>(?:\([0-9A-Za-z.]{1,4}\))*)"


@dataclass(frozen=True)
class CitationForm:
    """One way the state's documents cite something: `kind` (statute, regulation, rule, constitution,
    case), the pattern, and the normalized form of a match. A `case` form (a reporter's or neutral
    citation) counts only in the body: the one in a document's own header is its own."""
    kind: str
    pattern: re.Pattern
    normal: Callable[[re.Match], str]


@dataclass(frozen=True)
class LegalWords:
    """How one court system's state writes its documents (see the module docstring)."""
    system: str
    state: str
    method: str
    headings: re.Pattern
    citations: tuple[CitationForm, ...]
    rendered: re.Pattern | None = None
    published: re.Pattern | None = None
    unpublished: re.Pattern | None = None


def _cite(kind: str, pattern: str, normal: Callable[[re.Match], str], flags: int = 0) -> CitationForm:
    return CitationForm(kind, re.compile(pattern, flags), normal)


def _by_section(prefix: str) -> Callable[[re.Match], str]:
    """`{prefix}{section}{sub}`: the normalized form of a statute or a rule by its section."""
    return lambda match: f"{prefix}{match.group('section').upper()}{match.groupdict().get('sub') or ''}"


# ------------------------------------------------------------------ Kentucky

_KENTUCKY_RULE = {"RCR": "RCr"}
KENTUCKY_WORDS = LegalWords(
    system="kentucky", state="Kentucky", method="ky-rules",
    headings=re.compile(r"^(SUPREME COURT OF KENTUCKY|COURT OF APPEALS|KENTUCKY COURT OF APPEALS|KENTUCKY SUPREME COURT|"
                        r"COMMONWEALTH OF KENTUCKY)$"),
    citations=(
        _cite("statute", r"(?<![\w])KRS(?:\d{1,2})?\)?\s+(?:CHAPTER\s+)?(?P<section>\d{1,3}[A-Z]?(?:\.\d{3,4}[A-Z]?)?)"
                         r"(?P<sub>(?:\([0-9A-Za-z.]{1,4}\))*)", _by_section("KRS "), re.IGNORECASE),
        _cite("statute", r"Ky\.\s*Rev\.\s*Stat\.(?:\s*Ann\.)?\s*(?:[§\ufffd]\s*)?(?P<section>\d{1,3}[A-Z]?\.\d{3,4})"
                         r"(?P<sub>(?:\([0-9A-Za-z]{1,4}\))*)", _by_section("KRS ")),
        _cite("regulation", r"(?<![\w.])(?P<title>\d{1,3})\s+KAR(?:\d{1,2})?\s+(?P<section>\d{1,2}:\d{3})",
              lambda m: f"{m.group('title')} KAR {m.group('section')}"),
        _cite("rule", r"(?<![\w\-.])(?P<rule>CR|RCr|RCR|SCR|RAP|KRE|FCRPP|JRAP)(?:\d{1,2})?\s+"
                      r"(?P<number>\d{1,3}(?:\.\d{1,3})?)(?P<sub>(?:\([0-9A-Za-z.]{1,4}\))*)(?![\w])",
              lambda m: f"{_KENTUCKY_RULE.get(m.group('rule').upper(), m.group('rule'))} {m.group('number')}"
                        f"{m.group('sub')}"),
        _cite("constitution", r"(?:KY\.|Ky\.|Kentucky)\s+CONST(?:\.|itution)?,?\s*(?:[§\ufffd]+|Sections?|Sec\.)\s*"
                              r"(?P<section>\d{1,3})(?P<sub>(?:\([0-9A-Za-z]{1,4}\))*)",
              lambda m: f"Ky. Const. § {m.group('section')}{m.group('sub')}", re.IGNORECASE),
    ))

# ------------------------------------------------------- the other states

_LEGAL_FILED = re.compile(rf"\bFILED:?\s+{_LEGAL_MONTH}\.?\s+(?P<day>\d{{1,2}}),?\s+(?P<year>\d{{4}})", re.IGNORECASE)
_LEGAL_DATE_LINE = re.compile(rf"^\[?{_LEGAL_MONTH}\.?\s+(?P<day>\d{{1,2}}),\s+(?P<year>\d{{4}})\]?$",
                              re.IGNORECASE | re.MULTILINE)


def _by_article(state: str) -> Callable[[re.Match], str]:
    return lambda m: (f"{state} Const. art. {m.group('article').upper()}, § {m.group('section')}"
                      f"{m.groupdict().get('sub') or ''}")


NEVADA_WORDS = LegalWords(
    system="nevada", state="Nevada", method="nevada-rules",
    headings=re.compile(r"^IN THE (?:SUPREME COURT|COURT OF APPEALS) OF THE STATE OF NEVADA$"),
    citations=(
        _cite("statute", rf"(?<![\w])NRS\s+(?:Chapter\s+)?(?P<section>\d{{1,3}}[A-Z]?\.\d{{3,4}}){_LEGAL_SUB}",
              _by_section("NRS ")),
        _cite("statute", rf"Nev\.\s*Rev\.\s*Stat\.\s*(?:§+\s*)?(?P<section>\d{{1,3}}[A-Z]?\.\d{{3,4}}){_LEGAL_SUB}",
              _by_section("NRS ")),
        _cite("rule", rf"(?<![\w])(?P<rule>NRAP|NRCP|NRE|SCR|DCR|EDCR)\s+(?P<section>\d{{1,3}}[A-Z]?){_LEGAL_SUB}(?![\w])",
              lambda m: f"{m.group('rule')} {m.group('section')}{m.group('sub')}"),
        _cite("constitution", rf"Nev\.\s*Const\.\s*art\.\s*(?P<article>\d{{1,2}}|[IVX]{{1,5}}),\s*§+\s*(?P<section>\d{{1,3}}){_LEGAL_SUB}",
              _by_article("Nev.")),
        _cite("case", r"(?P<volume>\d{2,3})\s+Nev\.,?\s+Adv(?:ance|\.)\s+Op(?:inion|\.)\s+(?:No\.\s*)?(?P<number>\d{1,3})\b",
              lambda m: f"{m.group('volume')} Nev. Adv. Op. {m.group('number')}"),
    ),
    rendered=_LEGAL_FILED,
    published=re.compile(r"\bADV(?:ANCE|\.)\s+OP(?:INION|\.)|\bPUBLISHED OPINION\b|\bAUTHORED OPINION\b", re.IGNORECASE),
    unpublished=re.compile(r"\bUNPUBLISHED\b|^ORDER (?:OF (?:AFFIRMANCE|REVERSAL|DISMISSAL)|DISMISSING|AFFIRMING)",
                           re.IGNORECASE | re.MULTILINE))

ALABAMA_WORDS = LegalWords(
    system="alabama", state="Alabama", method="alabama-rules",
    headings=re.compile(r"^(?:SUPREME COURT OF ALABAMA|ALABAMA COURT OF (?:CIVIL|CRIMINAL) APPEALS|"
                        r"COURT OF (?:CIVIL|CRIMINAL) APPEALS(?: OF ALABAMA)?)$"),
    citations=(
        _cite("statute", rf"Ala\.\s*Code\s*(?:1975\s*)?,?\s*§+\s*(?P<section>\d{{1,3}}[A-Z]?-\d{{1,3}}[A-Z]?-\d{{1,4}}(?:\.\d+)?){_LEGAL_SUB}",
              _by_section("Ala. Code § ")),
        _cite("statute", rf"§+\s*(?P<section>\d{{1,3}}[A-Z]?-\d{{1,3}}[A-Z]?-\d{{1,4}}(?:\.\d+)?){_LEGAL_SUB},\s*Ala\.\s*Code",
              _by_section("Ala. Code § ")),
        _cite("rule", rf"Rule\s+(?P<number>\d{{1,3}}(?:\.\d+)?){_LEGAL_SUB},\s*Ala\.\s*R\.\s*(?P<set>App|Civ|Crim|Evid)\.\s*P\.",
              lambda m: f"Ala. R. {m.group('set')}. P. {m.group('number')}{m.group('sub')}"),
        _cite("rule", rf"Ala\.\s*R\.\s*(?P<set>App|Civ|Crim|Evid)\.\s*P\.\s*(?P<number>\d{{1,3}}(?:\.\d+)?){_LEGAL_SUB}",
              lambda m: f"Ala. R. {m.group('set')}. P. {m.group('number')}{m.group('sub')}"),
        _cite("constitution", r"Ala\.\s*Const\.\s*(?:of\s+)?(?:1901|2022)?,?\s*(?:art\.\s*[IVX]+,\s*)?§+\s*(?P<section>\d{1,3}(?:\.\d{2})?)",
              lambda m: f"Ala. Const. § {m.group('section')}"),
    ),
    rendered=re.compile(rf"\bREL(?:EASED)?:\s*{_LEGAL_MONTH}\.?\s+(?P<day>\d{{1,2}}),?\s+(?P<year>\d{{4}})", re.IGNORECASE),
    published=re.compile(r"subject to formal revision before publication", re.IGNORECASE),
    unpublished=re.compile(r"\bNO OPINION\b|\bUNPUBLISHED\b|^MEMORANDUM\b", re.IGNORECASE | re.MULTILINE))

OREGON_WORDS = LegalWords(
    system="oregon", state="Oregon", method="oregon-rules",
    headings=re.compile(r"^IN THE (?:SUPREME COURT|COURT OF APPEALS) OF THE STATE OF OREGON$"),
    citations=(
        _cite("statute", rf"(?<![\w])ORS\s+(?:chapter\s+)?(?P<section>\d{{1,3}}[A-Z]?\.\d{{3,4}}){_LEGAL_SUB}",
              _by_section("ORS ")),
        _cite("rule", rf"(?<![\w])(?P<rule>ORCP|ORAP|OEC|UTCR)\s+(?P<section>\d{{1,3}}(?:\.\d{{2,3}})?)"
                      rf"(?:\s+(?P<letter>[A-H])(?![\w]))?{_LEGAL_SUB}",
              lambda m: f"{m.group('rule')} {m.group('section')}{' ' + m.group('letter') if m.group('letter') else ''}"
                        f"{m.group('sub')}"),
        _cite("constitution", r"Article\s+(?P<article>[IVX]+),\s+section\s+(?P<section>\d{1,3}[a-z]?)(?:\(\d+\))?,?\s+of\s+"
                              r"the\s+Oregon\s+Constitution", _by_article("Or."), re.IGNORECASE),
        _cite("case", r"(?<![\w])(?P<volume>\d{2,3})\s+Or\s+App\s+(?P<page>\d{1,4})\b",
              lambda m: f"{m.group('volume')} Or App {m.group('page')}"),
        _cite("case", r"(?<![\w])(?P<volume>\d{2,3})\s+Or\s+(?!App)(?P<page>\d{1,4})\b",
              lambda m: f"{m.group('volume')} Or {m.group('page')}"),
    ),
    rendered=_LEGAL_FILED,
    unpublished=re.compile(r"\bNONPRECEDENTIAL\b", re.IGNORECASE))

NORTH_DAKOTA_WORDS = LegalWords(
    system="north-dakota", state="North Dakota", method="north-dakota-rules",
    headings=re.compile(r"^IN THE SUPREME COURT,?\s+STATE OF NORTH DAKOTA$"),
    citations=(
        _cite("statute", rf"N\.\s?D\.\s?C\.\s?C\.\s*§+\s*(?P<section>\d{{1,2}}(?:\.\d)?-\d{{2}}(?:\.\d)?-\d{{2}}(?:\.\d+)?){_LEGAL_SUB}",
              _by_section("N.D.C.C. § ")),
        _cite("rule", rf"N\.\s?D\.\s?R\.\s?(?P<set>App|Civ|Crim|Ev)\.\s?P\.\s*(?P<section>\d{{1,3}}(?:\.\d)?){_LEGAL_SUB}",
              lambda m: f"N.D.R.{m.group('set')}.P. {m.group('section')}{m.group('sub')}"),
        _cite("constitution", r"N\.\s?D\.\s?Const\.\s*art\.\s*(?P<article>[IVX]+),\s*§+\s*(?P<section>\d{1,3})",
              _by_article("N.D.")),
        _cite("case", r"(?<![\w])(?P<year>(?:19|20)\d{2})\s+ND\s+(?P<number>\d{1,3})\b",
              lambda m: f"{m.group('year')} ND {m.group('number')}"),
    ),
    rendered=re.compile(r"\bFiled\s+(?P<month>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{2,4})\s+by\s+Clerk", re.IGNORECASE),
    published=re.compile(r"(?<![\w])(?:19|20)\d{2}\s+ND\s+\d{1,3}\b"))

WYOMING_WORDS = LegalWords(
    system="wyoming", state="Wyoming", method="wyoming-rules",
    headings=re.compile(r"^IN THE SUPREME COURT,?\s+STATE OF WYOMING$"),
    citations=(
        _cite("statute", rf"Wyo\.\s*Stat\.\s*(?:Ann\.\s*)?§+\s*(?P<section>\d{{1,2}}-\d{{1,2}}-\d{{3,4}}){_LEGAL_SUB}",
              _by_section("Wyo. Stat. Ann. § ")),
        _cite("rule", r"(?<![\w])W\.\s?R\.\s?(?P<set>A|Cr|C|E)\.\s?P\.\s*(?P<section>\d{1,3}(?:\.\d{1,2})?)",
              lambda m: f"W.R.{m.group('set')}.P. {m.group('section')}"),
        _cite("constitution", r"Wyo\.\s*Const\.\s*art\.\s*(?P<article>\d{1,2}),\s*§+\s*(?P<section>\d{1,3})",
              _by_article("Wyo.")),
        _cite("case", r"(?<![\w])(?P<year>(?:19|20)\d{2})\s+WY\s+(?P<number>\d{1,3})\b",
              lambda m: f"{m.group('year')} WY {m.group('number')}"),
    ),
    rendered=_LEGAL_DATE_LINE,
    published=re.compile(r"(?<![\w])(?:19|20)\d{2}\s+WY\s+\d{1,3}\b"))

FLORIDA_WORDS = LegalWords(
    system="florida", state="Florida", method="florida-rules",
    headings=re.compile(r"^(?:SUPREME COURT OF FLORIDA|DISTRICT COURT OF APPEAL OF FLORIDA,?\s+\w+ DISTRICT|"
                        r"FLORIDA \w+ DISTRICT COURT OF APPEAL)$"),
    citations=(
        _cite("statute", r"§+\s*(?P<section>\d{1,3}\.\d{2,4})(?P<sub>(?:\(\d+\)|\([a-z]\))*),\s*Fla\.\s*Stat\.(?:\s*\(\d{4}\))?",
              _by_section("Fla. Stat. § ")),
        _cite("statute", r"Fla\.\s*Stat\.\s*§+\s*(?P<section>\d{1,3}\.\d{2,4})(?P<sub>(?:\(\d+\)|\([a-z]\))*)",
              _by_section("Fla. Stat. § ")),
        _cite("rule", rf"Fla\.\s*R\.\s*(?P<set>App|Civ|Crim|Juv)\.\s*P\.\s*(?P<section>\d{{1,2}}\.\d{{3}}){_LEGAL_SUB}",
              lambda m: f"Fla. R. {m.group('set')}. P. {m.group('section')}{m.group('sub')}"),
        _cite("constitution", r"[Aa]rt\.\s*(?P<article>[IVX]+),\s*§+\s*(?P<section>\d{1,2})(?P<sub>(?:\([a-z0-9]+\))*),\s*"
                              r"Fla\.\s*Const\.", _by_article("Fla.")),
    ),
    rendered=_LEGAL_DATE_LINE,
    unpublished=re.compile(r"^PER CURIAM\.?\s*AFFIRMED\.?$", re.IGNORECASE | re.MULTILINE))

DELAWARE_COUNTY_WORDS = LegalWords(
    system="delaware-county-pa", state="Pennsylvania", method="pennsylvania-rules",
    headings=re.compile(r"^IN THE COURT OF COMMON PLEAS (?:OF|FOR) DELAWARE COUNTY,?\s+PENNSYLVANIA$"),
    citations=(
        _cite("statute", rf"(?P<title>\d{{1,2}})\s+Pa\.\s?C\.\s?S\.(?:A\.)?\s*§+\s*(?P<section>\d{{1,5}}(?:\.\d+)?){_LEGAL_SUB}",
              lambda m: f"{m.group('title')} Pa.C.S. § {m.group('section')}{m.group('sub')}"),
        _cite("statute", r"(?P<title>\d{1,2})\s+P\.\s?S\.\s*§+\s*(?P<section>\d{1,5}(?:[.-]\d+)*)",
              lambda m: f"{m.group('title')} P.S. § {m.group('section')}"),
        _cite("rule", rf"Pa\.\s?R\.\s?(?P<set>C|Crim|E|A)\.\s?P\.\s*(?:No\.\s*)?(?P<section>\d{{1,4}}(?:\.\d+)?){_LEGAL_SUB}",
              lambda m: f"Pa.R.{m.group('set')}.P. {m.group('section')}{m.group('sub')}"),
        _cite("constitution", r"Pa\.\s*Const\.\s*art\.\s*(?P<article>[IVX]+),\s*§+\s*(?P<section>\d{1,3})", _by_article("Pa.")),
    ),
    rendered=_LEGAL_FILED)

LEGAL_WORDS = {words.system: words for words in (KENTUCKY_WORDS, DELAWARE_COUNTY_WORDS, NEVADA_WORDS, ALABAMA_WORDS,
                                                 OREGON_WORDS, NORTH_DAKOTA_WORDS,
                                                 WYOMING_WORDS, FLORIDA_WORDS)}


def legal_words(system: str) -> LegalWords:
    """The words of the court system `system` (a COURT_SYSTEMS name; KeyError for another)."""
    return LEGAL_WORDS[system]
