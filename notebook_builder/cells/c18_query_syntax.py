"""Query syntax: what a researcher types in the search box, read as a query (pure; no index).

Guarantees:
- `parse_query(text)` reads any text as a query and never raises: words
  (all must match), "an exact phrase", a leading minus or NOT to exclude a
  word or phrase, OR (or |) between alternatives, parentheses to group,
  prefix* (at least PREFIX_MIN letters), NEAR(a b, N) for words within N
  words of each other, and case numbers in the forms people type them:
  Kentucky's (2017-CA-0003, 2017-CA-000003-MR, 2017 CA 3, 17-CA-3,
  2017CA0003) by default, another court system's when its `CaseNumberForms`
  is given (c28_court_words makes them from its courts).
- A word typed with punctuation inside it (O'Brien, 532.032, and/or,
  Ky.R.App.) is read as the phrase of its parts, as the index splits the
  text; punctuation around words (commas, periods, "v.") is read as a
  space.
- What cannot be read as typed is repaired, and each repair is one of the
  query's `notes`: an unmatched quote closes at the end, an unmatched
  parenthesis is dropped, an operator with nothing to act on is read as
  nothing, a prefix too short is read as the word. `read_as` is the query
  as it was read (case numbers in the archive's form).
- Common words (COMMON_WORDS) and the caption connectors v, vs, versus
  typed outside quotes count for the words' order and nearness but are not
  required, unless the query has nothing else to match; inside quotes every
  word is required, in order.

Knobs read: none.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable

# The words so frequent in a filing that requiring them adds nothing (they are in nearly every
# document); the index pairs each with the word after it, so phrases with them stay exact and cheap.
COMMON_WORDS = frozenset((
    "a an and are as at be been but by for from had has have his in into is it its of on or such that the "
    "their this to was were which with").split())
CAPTION_CONNECTORS = frozenset(("v", "vs", "versus"))
PREFIX_MIN = 3
NEAR_DEFAULT = 10

# A case number as people type it: year (4 or 2 digits), court, sequence (leading zeros optional),
# an optional suffix (-MR, -DG, ...); separated by hyphens, spaces or nothing.
CASE_NUMBER = re.compile(
    r"(?<![\w-])(?P<year>\d{4}|\d{2})[ \t-]*(?P<court>CA|SC)[ \t-]*(?P<sequence>\d{1,6})"
    r"(?:-(?P<suffix>[A-Za-z]{1,4}))?(?![\w-])", re.IGNORECASE)
_QUERY_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class CaseNumberForms:
    """How a search box reads a court system's case numbers: `pattern` finds one as typed and
    `canonical(match)` is the archive's form of it."""
    pattern: re.Pattern
    canonical: Callable[[re.Match], str]


@dataclass(frozen=True)
class Word:
    word: str               # lowercased
    prefix: bool = False


@dataclass(frozen=True)
class Phrase:
    words: tuple[str, ...]  # lowercased, in order


@dataclass(frozen=True)
class CaseNumber:
    case_number: str        # the archive's form, YYYY-CC-NNNN
    words: tuple[str, ...]  # as typed, the phrase a text writes it as


@dataclass(frozen=True)
class Near:
    words: tuple[str, ...]
    distance: int


@dataclass(frozen=True)
class AnyOf:
    options: tuple["Node", ...]


@dataclass(frozen=True)
class AllOf:
    parts: tuple["Node", ...]


Node = Word | Phrase | CaseNumber | Near | AnyOf | AllOf


@dataclass(frozen=True)
class SearchQuery:
    """A query as read: `required` all match, none of `excluded` matches, `optional` (common words
    outside quotes) only rank; `sequence` is every positive word in the order typed (the words'
    order and nearness rank hits)."""
    text: str
    required: tuple[Node, ...] = ()
    excluded: tuple[Node, ...] = ()
    optional: tuple[Word, ...] = ()
    sequence: tuple[str, ...] = ()
    read_as: str = ""
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.required


# ------------------------------------------------------------------ words


def query_words(text: str) -> list[str]:
    """The words of `text` as the index splits them: runs of letters and digits, lowercased
    (compatibility forms unified: ﬁ is fi, a full-width digit a digit)."""
    return _QUERY_WORD.findall(unicodedata.normalize("NFKC", text).lower())


def canonical_case_number(year: str, court: str, sequence: str) -> str:
    """YYYY-CC-NNNN of a typed case number (a two-digit year below 50 is 20xx, else 19xx)."""
    if len(year) == 2:
        year = ("20" if int(year) < 50 else "19") + year
    return f"{year}-{court.upper()}-{int(sequence):04d}"


KENTUCKY_CASE_NUMBERS = CaseNumberForms(
    CASE_NUMBER, lambda match: canonical_case_number(match["year"], match["court"], match["sequence"]))


# ------------------------------------------------------------------ lexer


@dataclass
class _QueryToken:
    kind: str           # word, phrase, case, open, close, or, and, not, minus, near
    text: str           # as typed
    value: object = None


@dataclass
class _QueryReading:
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


_QUERY_CASE_MARK = "\x00"


def _query_tokens(text: str, reading: _QueryReading, forms: CaseNumberForms) -> list[_QueryToken]:
    text = text.replace(_QUERY_CASE_MARK, " ")
    cases: list[tuple[str, str]] = []

    def mark_case(match: re.Match) -> str:
        cases.append((match.group(0), forms.canonical(match)))
        return f" {_QUERY_CASE_MARK}{len(cases) - 1}{_QUERY_CASE_MARK} "

    # Case numbers outside quotes (a quoted one is recognised when it is the whole phrase).
    pieces = text.split('"')
    for at in range(0, len(pieces), 2):
        pieces[at] = forms.pattern.sub(mark_case, pieces[at])
    text = '"'.join(pieces)
    tokens: list[_QueryToken] = []
    at, size = 0, len(text)
    while at < size:
        char = text[at]
        if char.isspace():
            at += 1
        elif char == '"':
            end = text.find('"', at + 1)
            if end == -1:
                reading.note("the unmatched quote was closed at the end")
                end = size
            inner = text[at + 1:end]
            tokens.append(_QueryToken("phrase", inner))
            at = end + 1
        elif char in "()":
            tokens.append(_QueryToken("open" if char == "(" else "close", char))
            at += 1
        elif char == _QUERY_CASE_MARK:
            end = text.index(_QUERY_CASE_MARK, at + 1)
            typed, canonical = cases[int(text[at + 1:end])]
            tokens.append(_QueryToken("case", typed, canonical))
            at = end + 1
        elif char == "-" and at + 1 < size and not text[at + 1].isspace() and (at == 0 or text[at - 1].isspace()
                                                                               or text[at - 1] in "()"):
            tokens.append(_QueryToken("minus", "-"))
            at += 1
        else:
            end = at
            while end < size and not text[end].isspace() and text[end] not in '"()' and text[end] != _QUERY_CASE_MARK:
                end += 1
            bare = text[at:end]
            at = end
            if bare == "NEAR" and at < size and text[at] == "(":
                close = text.find(")", at)
                if close != -1:
                    tokens.append(_QueryToken("near", f"NEAR{text[at:close + 1]}", text[at + 1:close]))
                    at = close + 1
                    continue
            kind = {"OR": "or", "|": "or", "AND": "and", "&&": "and", "NOT": "not"}.get(bare, "word")
            tokens.append(_QueryToken(kind, bare))
    return tokens


# ----------------------------------------------------------------- parser


class _QueryParser:
    """Recursive descent over the tokens: query := clause*; clause := [NOT|-] item (OR item)*;
    item := word | phrase | case | near | ( query )."""

    def __init__(self, tokens: list[_QueryToken], reading: _QueryReading, forms: CaseNumberForms):
        self.tokens = tokens
        self.forms = forms
        self.at = 0
        self.reading = reading
        self.depth = 0

    def peek(self) -> _QueryToken | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _QueryToken:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def sequence(self) -> list[tuple[bool, object, str]]:
        """(excluded, node or None, rendering) of each clause until the end or a closing parenthesis."""
        clauses = []
        while (token := self.peek()) is not None:
            if token.kind == "close":
                if self.depth:
                    return clauses
                self.take()
                self.reading.note("an unmatched ) was left out")
                continue
            if token.kind == "and":
                self.take()
                continue
            if token.kind == "or":
                self.take()
                self.reading.note(f"{token.text} with nothing before it was left out")
                continue
            clause = self.clause()
            if clause is not None:
                clauses.append(clause)
        return clauses

    def clause(self) -> tuple[bool, object, str] | None:
        excluded = False
        while (token := self.peek()) is not None and token.kind in ("not", "minus"):
            self.take()
            excluded = True
        if self.peek() is None or self.peek().kind in ("close", "or", "and"):
            if excluded:
                self.reading.note("NOT or - with nothing after it was left out")
            return None
        options = [self.item()]
        while (token := self.peek()) is not None and token.kind == "or":
            self.take()
            following = self.peek()
            if following is None or following.kind in ("close", "or", "and", "not", "minus"):
                self.reading.note(f"{token.text} with nothing after it was left out")
                break
            options.append(self.item())
        options = [option for option in options if option[0] is not None]
        if not options:
            return None
        if len(options) == 1:
            node, rendering = options[0]
        else:
            node = AnyOf(tuple(option[0] for option in options))
            rendering = " OR ".join(option[1] for option in options)
        return excluded, node, ("-" if excluded else "") + rendering

    def item(self) -> tuple[object, str]:
        token = self.take()
        if token.kind == "open":
            self.depth += 1
            inner = self.sequence()
            self.depth -= 1
            if self.peek() is not None and self.peek().kind == "close":
                self.take()
            else:
                self.reading.note("an unmatched ( was left out")
            parts = [node for excluded, node, _ in inner if not excluded]
            if any(excluded for excluded, _, _ in inner):
                self.reading.note("an exclusion inside parentheses was read as a word to match")
                parts = [node for _, node, _ in inner]
            if not parts:
                return None, ""
            rendering = " ".join(text.lstrip("-") for _, _, text in inner)
            return (parts[0] if len(parts) == 1 else AllOf(tuple(parts))), f"({rendering})"
        if token.kind == "case":
            if " ".join(token.text.split()).upper() != token.value:
                self.reading.note(f"{token.text} was read as the case number {token.value}")
            return CaseNumber(token.value, tuple(query_words(token.text))), str(token.value)
        if token.kind == "near":
            return self.near(token)
        if token.kind == "phrase":
            words = tuple(query_words(token.text))
            match = self.forms.pattern.fullmatch(token.text.strip())
            if match:
                canonical = self.forms.canonical(match)
                return CaseNumber(canonical, words), f'"{token.text.strip()}"'
            if not words:
                self.reading.note(f'"{token.text}" has no words and was left out')
                return None, ""
            return Phrase(words), '"' + " ".join(words) + '"'     # quoted, even one word is exact
        return self.bare(token)

    def bare(self, token: _QueryToken) -> tuple[object, str]:
        text = token.text
        prefix = text.endswith("*")
        words = query_words(text)
        if not words:
            if text.strip("*"):
                self.reading.note(f"{text} has no letters or digits and was left out")
            return None, ""
        if prefix and len(words) == 1 and len(words[0]) < PREFIX_MIN:
            self.reading.note(f"{text} is too short a prefix ({PREFIX_MIN} letters at least): read as the word "
                              f"{words[0]}")
            prefix = False
        if len(words) == 1:
            return Word(words[0], prefix), words[0] + ("*" if prefix else "")
        if prefix:
            self.reading.note(f"{text}: a prefix of several words was read as the phrase of its words")
        return Phrase(tuple(words)), '"' + " ".join(words) + '"'

    def near(self, token: _QueryToken) -> tuple[object, str]:
        inside = str(token.value)
        distance = NEAR_DEFAULT
        match = re.search(r",\s*(\d+)\s*$", inside)
        if match:
            distance = int(match.group(1))
            inside = inside[:match.start()]
        words = tuple(query_words(inside))
        if len(words) < 2:
            if not words:
                return None, ""
            return Word(words[0]), words[0]
        return Near(words, distance), f"NEAR({' '.join(words)}, {distance})"


def parse_query(text: str | None, case_numbers: CaseNumberForms = KENTUCKY_CASE_NUMBERS) -> SearchQuery:
    """`text` read as a query (module docstring), its case numbers in `case_numbers`' forms; an
    empty or blank text is the empty query."""
    text = text or ""
    reading = _QueryReading()
    parser = _QueryParser(_query_tokens(text, reading, case_numbers), reading, case_numbers)
    clauses = parser.sequence()
    required: list[object] = []
    excluded: list[object] = []
    optional: list[Word] = []
    sequence: list[str] = []
    for is_excluded, node, _ in clauses:
        if is_excluded:
            excluded.append(node)
            continue
        sequence += _query_node_words(node)
        if isinstance(node, Word) and not node.prefix and (node.word in COMMON_WORDS
                                                            or node.word in CAPTION_CONNECTORS):
            optional.append(node)
        else:
            required.append(node)
    if not required and optional:      # only common words: they are what to find
        required, optional = list(optional), []
    read_as = " ".join(rendering for _, _, rendering in clauses)
    return SearchQuery(text=text, required=tuple(required), excluded=tuple(excluded), optional=tuple(optional),
                       sequence=tuple(sequence), read_as=read_as, notes=tuple(reading.notes))


def _query_node_words(node: object) -> list[str]:
    if isinstance(node, Word):
        return [node.word]
    if isinstance(node, (Phrase, CaseNumber, Near)):
        return list(node.words)
    if isinstance(node, AllOf):
        return [word for part in node.parts for word in _query_node_words(part)]
    return []     # alternatives have no one order
