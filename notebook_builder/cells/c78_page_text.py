"""Page text: what a text is worth, page by page, and which reading to keep. Pure decisions.

Guarantees:
- `text_quality` is the share of word-like tokens, less replacement and control characters (a
  short text is judged on its tokens if it has a few); `word_like_count` and `text_words` are what
  OCR and the court-text agreement (`text_agreement`, word Jaccard) read of a text.
- `page_defect` names what is wrong with a page's reading (letters scattered across scripts no
  language mixes, lines mostly single letters, a font without a usable map, a low score);
  `choose_page_reading` keeps a good reading over a poor one and, among good ones, the one whose
  words are whole; `extraction_step` decides whether the chain's next engine is tried, which text
  is kept, or which verdict (encrypted, empty, too large, unparseable; or transient) ends it.
- `page_needs_ocr`: a page showing an image (covering SCAN_IMAGE_COVER of it) with fewer than
  SCANNED_CHARS_PER_PAGE characters, one an image covers whole whose text is no more than a filing
  stamp (SCAN_STAMP_CHARS), or one poor in every engine; a born-digital page with little text and no
  image, or only a logo, does not. `is_likely_scanned`: some page needs OCR.
- Pages are joined with a form feed (`join_page_texts`) and split back (`text_pages`).

Knobs read: none (MIN_TEXT_QUALITY and SCANNED_CHARS_PER_PAGE are passed by the callers).
"""
from __future__ import annotations

import collections
import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, NamedTuple

# Verdicts no engine can change for these bytes: classified once, the document leaves the queue.
PERMANENT_VERDICTS = ("encrypted", "empty", "too large", "unparseable")   # in the order a reason is named

# Verdicts that may change: a worker that died (OOM, a signal), a timeout, an OS error reading the file.
TRANSIENT_VERDICTS = ("timeout", "crash", "error")


class ExtractionFailure(Exception):
    """An engine's named verdict on a PDF it cannot read: encrypted, empty, unparseable, too large."""

    def __init__(self, verdict: str, message: str):
        super().__init__(message)
        self.verdict = verdict


def classify_extract_error(exc: BaseException) -> str:
    """The verdict of an engine's exception: permanent (encrypted, empty, too large, unparseable)
    or `error` (an OS error: the file could not be read this time)."""
    if isinstance(exc, ExtractionFailure):
        return exc.verdict
    if isinstance(exc, MemoryError):
        return "too large"
    name, message = type(exc).__name__, str(exc).lower()
    if "file access error" in message or isinstance(exc, OSError):
        return "error"   # the file could not be read this time: no verdict on its bytes
    if name in ("FileNotDecryptedError", "WrongPasswordError") or "password" in message or "decrypt" in message:
        return "encrypted"
    if name == "EmptyFileError" or "empty file" in message or "cannot read an empty" in message:
        return "empty"
    if name == "LimitReachedError" or "limit reached" in message:
        return "too large"
    return "unparseable"   # the parser gave up on these bytes: it will again


def join_page_texts(page_texts: list[str]) -> str:
    """The text file's content: pages joined by form feeds; '' when no page holds any text."""
    if not any(text.strip() for text in page_texts):
        return ""
    return "\f".join(page_texts)


def page_text_chars(text: str) -> int:
    """Characters of a page's text layer that are not blank."""
    return len("".join(text.split()))   # str.split() splits at exactly the chars isspace() is true of


# A scan's image covers most of its page (strips of one add up); a logo or a seal does not.
SCAN_IMAGE_COVER = 0.25

# A scanned page under a filing stamp or a docketing header ("Case 2:85-cv-04544 Document 569-10
# Filed ... Page 242", "USCA4 Appeal: ... Filed: ..."): an image over the whole page and a text
# layer of a few dozen characters, where a page of text holds a thousand or more. Of 598 pages of
# ../shared/realpdfs, 8 are so (20-199 characters under an image covering all the page): two court
# scans under such stamps and six scans under junk text layers.
SCAN_FULL_COVER = 0.9
SCAN_STAMP_CHARS = 200


def page_needs_ocr(chars: int, has_images: bool, chars_per_page: int, image_cover: float | None = None) -> bool:
    """A page that shows an image and has (next to) no text layer: a scan; and a page an image
    covers (SCAN_FULL_COVER, when the engine measured it) whose text layer is no more than a stamp
    (under SCAN_STAMP_CHARS). A born-digital page with little text and no image, or only a small
    one (images covering under SCAN_IMAGE_COVER of the page, when measured), is not one."""
    if not has_images:
        return False
    if chars < max(1, chars_per_page) and (image_cover is None or image_cover >= SCAN_IMAGE_COVER):
        return True
    return image_cover is not None and image_cover >= SCAN_FULL_COVER and chars < SCAN_STAMP_CHARS


def text_pages(text: str, pages: int) -> list[str] | None:
    """A text's pages, split at its form feeds ('' stands for `pages` empty pages); None when its
    form feeds do not split it into `pages` pages (an older version's text)."""
    parts = text.split("\f") if text else [""] * pages
    return parts if len(parts) == pages else None


def pages_a_kept_text_lacks(text: str, page_chars: list[int]) -> list[bool]:
    """Per page, whether `text` (the archive's text of the PDF, kept instead of this reading) lacks
    what this reading found there (`page_chars`): every page with characters when its form feeds do
    not split it into the PDF's pages, else each page it holds empty where the reading is not."""
    parts = text_pages(text, len(page_chars))
    if parts is None:
        return [chars > 0 for chars in page_chars]
    return [chars > 0 and not part.strip() for part, chars in zip(parts, page_chars)]


def is_likely_scanned(pages_needing_ocr: int) -> bool:
    """Some page of the PDF has images and no text layer."""
    return pages_needing_ocr > 0


QUALITY_MIN_TOKENS = 20

# Scripts written without spaces between words (CJK, kana, Thai, Hangul).
_UNSPACED = "\u0e00-\u0e7f\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")

# A run of such a script with the digits, Latin letters and punctuation set among it ("2019年05月").
_UNSPACED_MIXED = re.compile(f"(?=.*[{_UNSPACED}])[{_UNSPACED}\\w%.,:;()\u2010-\u2027-]+")

# A label of letters then digits ("Text1", "m2", "A10"), or digits then letters ("3com").
_ALNUM_LABEL = re.compile(r"[^\W\d_]{1,20}\d{1,6}|\d{1,6}[^\W\d_]{1,20}")

# Combining marks that belong to the letter before them (decomposed accents, Hebrew and Arabic
# vowel signs, Thai vowels): part of a word.
_MARKS = "\u0300-\u036f\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
_LETTER = f"[^\\W\\d_][{_MARKS}]*"
_WORD_TOKEN = re.compile(f"(?:{_LETTER}){{1,20}}(?:['\u2019-](?:{_LETTER}){{1,20}})*")
_NUMBER_TOKEN = re.compile(r"[$\u00a7#]?\d[\d,.:/-]*[a-z]{0,2}")
_TOKEN_EDGES = "\"'()[]{}<>,.;:!?*\u201c\u201d\u2018\u2019\u00ab\u00bb"
_PART_BREAKS = re.compile("['\u2019-]")
_MARK_CHARS = re.compile(f"[{_MARKS}]")

# Replacement and control characters (C0 but tab, line feed, form feed, carriage return; DEL; C1).
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufffd]")


def _case_shape_ok(part: str) -> bool:
    """lower, Capitalized, UPPER, or letters of a script without case (mixed case inside a word
    part is a glyph mess)."""
    return part.islower() or part.isupper() or (part[:1].isupper() and part[1:].islower()) or (
        part == part.lower() == part.upper())


def _one_script(core: str) -> bool:
    """Every letter of the token is of one script (by its Unicode name's first word: LATIN, GREEK,
    ARABIC...): a token mixing Greek and Latin letters is glyphs decoded to the wrong characters."""
    import unicodedata
    scripts = {unicodedata.name(char, "?").split(" ", 1)[0] for char in core if char.isalpha()}
    return len(scripts) <= 1


# Characters of the scripts written without spaces that a font read through the wrong map lands on:
# running Chinese, Japanese or Korean text is made of the common characters each national standard
# encodes in two bytes (GB 2312, JIS X 0208, KS X 1001); codes read as the wrong characters scatter
# over the whole ranges, mostly outside those sets (Shift-JIS bytes read as code points: 0.43).
_CJK_CHAR = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ua000-\ua4cf]")
_COMMON_CJK_CODECS = ("gb2312", "euc_jp", "euc_kr")
COMMON_CJK_MIN_CHARS = 20
RARE_CJK = 0.6


@functools.lru_cache(maxsize=1 << 16)
def _common_cjk(char: str) -> bool:
    """Whether one CJK character is in a national standard's common set (a two-byte code)."""
    for codec in _COMMON_CJK_CODECS:
        try:
            if len(char.encode(codec)) == 2:
                return True
        except UnicodeEncodeError:
            continue
    return False


def common_cjk_share(text: str) -> float | None:
    """The share of the CJK characters of `text` (NFKC) that are common ones; None under
    COMMON_CJK_MIN_CHARS of them."""
    chars = _CJK_CHAR.findall(unicodedata.normalize("NFKC", text))
    if len(chars) < COMMON_CJK_MIN_CHARS:
        return None
    return round(sum(map(_common_cjk, chars)) / len(chars), 4)


@functools.lru_cache(maxsize=1 << 16)
def _word_like(token: str) -> bool | None:
    """Whether a token looks like a word or a number (None: punctuation alone). Cached: the words
    of a document repeat (most tokens of a page were judged on an earlier one)."""
    core = token.strip(_TOKEN_EDGES)
    if not core:
        return None   # punctuation alone: neither word nor noise
    if _NUMBER_TOKEN.fullmatch(core):
        return True
    if _UNSPACED_RUN.fullmatch(core) or _UNSPACED_MIXED.fullmatch(core):
        # A script written without spaces: a run of its characters is words, if they are common ones.
        cjk = _CJK_CHAR.findall(core)
        return len(cjk) < 2 or sum(map(_common_cjk, cjk)) * 2 >= len(cjk)
    if _ALNUM_LABEL.fullmatch(core):
        return core.isascii() or _one_script(core)
    if len(core) >= 4 and len(core) % 2 == 0 and core[::2] == core[1::2]:
        return False  # every letter twice: fake-bold text drawn twice, read twice
    if not _WORD_TOKEN.fullmatch(core):
        return False
    if not core.isascii() and not _one_script(core):
        return False
    # The case shapes of words, each part of a hyphenated or elided one alone ("Saint-Sauveur")
    letters = core if core.isascii() else _MARK_CHARS.sub("", core)
    if "-" not in letters and "'" not in letters and "\u2019" not in letters:
        return _case_shape_ok(letters)
    return all(_case_shape_ok(part) for part in _PART_BREAKS.split(letters) if part)


def _judged_tokens(text: str) -> list[bool]:
    """`_word_like` of each token that is not punctuation alone, where a run of three or more
    single letters (a word broken into letters) is not words."""
    judged, run = [], 0
    for token in text.split():
        verdict = _word_like(token)
        if verdict is None:
            continue
        # One character of a script written without spaces is a word (vertical text, a character a line).
        single = verdict and len(token) == 1 and token.isalpha() and not _UNSPACED_RUN.fullmatch(token)
        run = run + 1 if single else 0
        if run == 3:
            judged[-2:] = [False, False]   # the run's first two letters were counted as words
        judged.append(False if run >= 3 else verdict)
    return judged


def word_like_count(text: str) -> int:
    """How many tokens of `text` look like words or numbers (`_judged_tokens`)."""
    return sum(_judged_tokens(text))


def text_quality(text: str, min_tokens: int = QUALITY_MIN_TOKENS) -> float | None:
    """How much `text` looks like language, 0..1: the share of its tokens that look like words or
    numbers (lower, Capitalized or UPPER letters of at most 20 in a row, of one script, so words
    run together or wrongly decoded glyphs count against it; three or more single letters in a row
    are a word broken into letters and count against it too), less twice the share of replacement
    and control characters. None when it has fewer than `min_tokens` tokens to judge (a short page
    is not bad text)."""
    if len(text.split()) < min_tokens:
        return None
    return _quality(_judged_tokens(text), len(_BAD_CHARS.findall(text)), len(text), min_tokens)


def _quality(judged: list[bool], bad: int, length: int, min_tokens: int) -> float | None:
    if len(judged) < min_tokens:
        return None
    return round(max(0.0, sum(judged) / len(judged) - 2 * bad / max(1, length)), 4)


def text_quality_by_page(page_texts: list[str]) -> tuple[float | None, list[float | None]]:
    """`text_quality` of the pages joined (judged if it has 3 tokens) and of each page (judged if it
    has QUALITY_MIN_TOKENS), each token judged once."""
    judged_pages = [_judged_tokens(text) for text in page_texts]
    bad_pages = [len(_BAD_CHARS.findall(text)) for text in page_texts]
    pages = [_quality(judged, bad, len(text), QUALITY_MIN_TOKENS)
             for judged, bad, text in zip(judged_pages, bad_pages, page_texts)]
    length = sum(map(len, page_texts)) + max(0, len(page_texts) - 1)
    whole = _quality([verdict for judged in judged_pages for verdict in judged], sum(bad_pages), length, 3)
    return whole, pages


# In scripts without spaces each character is a token. A word keeps its combining marks (Arabic
# vowel signs, decomposed accents): they are part of it, not a break.
_WORDS = re.compile(f"[{_UNSPACED}]|(?:[^\\W{_UNSPACED}][\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670"
                    f"\u06d6-\u06ed\u0591-\u05c7\u0e31\u0e34-\u0e3a\u0e47-\u0e4e]*)+")


# Format characters: one reader writes them, another does not; they are not letters of a word.
# Zero-width ones and soft hyphens join (are dropped); bidi embeddings and isolates, which one
# reader puts around each run of another direction, separate.
_FORMAT_CHARS = re.compile("[\u00ad\u061c\u200b-\u200f\u2060-\u2064\ufeff]")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")

# Three or more single letters in a row on one line: a letter-spaced word ("O P I N I O N"), which
# one reader splits at each wide gap and another does not. Joined, a capital after a small letter
# begins the next word ("H e l l o W o r l d").
_LETTER_SPACED = re.compile(r"(?<![^\W\d_])(?:[^\W\d_][ \t]+){2,}[^\W\d_](?![^\W\d_])")


def _join_letter_spaced(match: re.Match) -> str:
    letters = match.group().split()
    return "".join(f" {b}" if a.islower() and b.isupper() else b for a, b in zip([""] + letters, letters))


def text_words(text: str) -> set[str]:
    """The distinct words of `text` as readers of a PDF agree on them: NFKC-normalised (a ligature
    'ﬃ' is 'ffi', a full-width letter the letter), case-folded, format characters dropped, a
    letter-spaced word joined, a character each in scripts without spaces; a word and its reversal
    count as one (right-to-left and mirrored text come out in visual order from one reader and in
    logical order from another: the letters are the same, their direction is the reader's)."""
    return {min(word, word[::-1]) for word in normalized_words(text)}


def normalized_words(text: str) -> list[str]:
    """The words of `text` in order, as `text_words` has them but in the direction written."""
    import unicodedata
    text = _LETTER_SPACED.sub(_join_letter_spaced, _FORMAT_CHARS.sub("", _BIDI_CONTROLS.sub(" ", unicodedata.normalize("NFKC", text))))
    return _WORDS.findall(text.casefold())


def text_agreement(a: str, b: str) -> float:
    """Word Jaccard of two texts of one document (e.g. ours and the court's documentText, or
    pdftotext's): |shared words| / |words of either| (`text_words`); 1.0 when both have none."""
    words_a, words_b = text_words(a), text_words(b)
    if not words_a and not words_b:
        return 1.0
    return round(len(words_a & words_b) / len(words_a | words_b), 4)


# Letters beyond Latin and its extensions: only they are looked up by script (a court filing has few).
_NON_LATIN_LETTER = re.compile(r"[^\x00-\u024f\W\d_]")

# Unicode names' first words that are one writing system (Japanese mixes kanji, kana and full-width
# forms; Korean hangul and hanja) or letter-like symbols any text may hold (mathematics): LATIN.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "BOPOMOFO": "CJK", "IDEOGRAPHIC": "CJK",
                  "FULLWIDTH": "CJK", "HALFWIDTH": "CJK", "KANGXI": "CJK", "MATHEMATICAL": "LATIN",
                  "BLACK-LETTER": "LATIN", "DOUBLE-STRUCK": "LATIN", "SCRIPT": "LATIN", "MODIFIER": "LATIN",
                  "PLANCK": "LATIN"}


# A line holding one letter of an alphabet (not a character of a script written without spaces,
# where one character is a word).
_SINGLE_LETTER_LINE = re.compile(rf"^[ \t]*[^\W\d_{_UNSPACED}][{_MARKS}]*[ \t]*$", re.M)
_TEXT_LINE = re.compile(r"^[ \t]*\S", re.M)

# Characters that stand for no letter: private use (a font's own glyph codes), replacement and
# control characters (codes read as characters).
_UNMAPPED_CHARS = re.compile("[\ue000-\uf8ff\ufffd\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


@functools.lru_cache(maxsize=1 << 12)
def _script(char: str) -> str:
    import unicodedata
    first = unicodedata.name(char, "?").split(" ", 1)[0]
    return _SCRIPT_GROUPS.get(first, first)


def scattered_letter_share(text: str) -> float:
    """The share of the non-Latin letters of `text` (0 when it has under 10) that are of neither
    its main non-Latin script nor Latin: Latin goes with any script, two others together are
    letters decoded through a broken character map (a CID font read as Unicode gives Oriya,
    Kannada, Greek and Arabic side by side)."""
    letters = _NON_LATIN_LETTER.findall(text)
    if len(letters) < 10:
        return 0.0
    counts = collections.Counter(map(_script, letters))
    counts.pop("LATIN", None)
    return round((sum(counts.values()) - max(counts.values(), default=0)) / len(letters), 4)


class PageMeasures(NamedTuple):
    """What the worker measured of one engine's text of one page."""
    quality: float | None          # text_quality, None when too short to judge
    scattered: float = 0.0         # scattered_letter_share
    single_letter_lines: int = 0   # lines holding one letter of an alphabet
    lines: int = 0                 # lines holding anything
    decoded: float | None = None   # characters per text object, or share of them that gave text
    unmapped: float = 0.0          # share of its non-blank characters that stand for no letter
    common_cjk: float | None = None  # common_cjk_share


def measure_pages(page_texts: list[str], objects: list[tuple[int, ...] | None]) -> tuple[float | None, list[PageMeasures]]:
    """(quality of the whole text, PageMeasures of each page); `objects`: (text objects, characters
    they gave[, text objects that draw something but gave no text]) per page where the engine counts
    them. `decoded` is the lower of characters per text object and the share of objects that gave text."""
    whole, qualities = text_quality_by_page(page_texts)
    measures = []
    for text, quality, counted in zip(page_texts, qualities, objects):
        shares = []
        if counted and counted[0] >= QUALITY_MIN_TOKENS:
            shares.append(counted[1] / counted[0])
        if counted and len(counted) > 2 and counted[0] >= SILENT_OBJECTS_MIN:
            shares.append((counted[0] - counted[2]) / counted[0])
        unmapped = len(_UNMAPPED_CHARS.findall(text))
        measures.append(PageMeasures(quality, scattered_letter_share(text), len(_SINGLE_LETTER_LINE.findall(text)),
                                     len(_TEXT_LINE.findall(text)), round(min(shares), 4) if shares else None,
                                     round(unmapped / max(1, page_text_chars(text)), 4) if unmapped else 0.0,
                                     common_cjk_share(text)))
    return whole, measures


# A page is poor text when its letters scatter over scripts (SCATTERED_LETTERS of its non-Latin
# letters), when its CJK characters are mostly rare ones (under RARE_CJK common: codes read through
# the wrong map), when most of its lines (and at least SINGLE_LETTER_RUN of them) are single letters
# (rotated or vertical runs read a glyph at a time), when most of its text objects (at least
# SILENT_OBJECTS_MIN) gave no character or UNMAPPED_CHARS of its characters stand for no letter (a
# font without a usable map), or when it scores under MIN_TEXT_QUALITY. A page with
# SINGLE_LETTER_RUN single-letter lines or more, a third of its lines, is doubtful: the next engine
# reads it too, and the readings are compared.
SCATTERED_LETTERS = 0.15
SILENT_OBJECTS_MIN = 3
UNMAPPED_CHARS = 0.3
SINGLE_LETTER_RUN = 5
DOUBTFUL_SINGLE_LETTERS = 0.3


def page_defect(page: PageMeasures, min_quality: float) -> str | None:
    """Why one engine's text of a page is poor ('scattered scripts', 'rare characters', 'single
    letters', 'undecoded', 'low quality'), or None."""
    if page.scattered >= SCATTERED_LETTERS:
        return "scattered scripts"
    if page.common_cjk is not None and page.common_cjk < RARE_CJK:
        return "rare characters"
    if page.single_letter_lines >= SINGLE_LETTER_RUN and page.single_letter_lines * 2 >= page.lines:
        return "single letters"
    if (page.decoded is not None and page.decoded < 0.5) or page.unmapped >= UNMAPPED_CHARS:
        return "undecoded"
    if page.quality is not None and page.quality < min_quality:
        return "low quality"
    return None


def page_is_doubtful(page: PageMeasures, min_quality: float) -> bool:
    """Poor (`page_defect`), or with enough single-letter lines that another engine should read it too."""
    return page_defect(page, min_quality) is not None or (
        page.single_letter_lines >= SINGLE_LETTER_RUN
        and page.single_letter_lines >= DOUBTFUL_SINGLE_LETTERS * page.lines)


def _segments_into(word: str, vocabulary: set[str], start: int = 0, parts: int = 0) -> bool:
    """`word[start:]` is two or more (with `parts` before it) words of `vocabulary`, each of two letters or more."""
    if start == len(word):
        return parts >= 2
    return any(word[start:cut] in vocabulary and _segments_into(word, vocabulary, cut, parts + 1)
               for cut in range(len(word), start + 1, -1) if cut - start < len(word))


def word_wholeness(words: set[str], others: set[str], vocabulary: set[str] = frozenset()) -> tuple[int, int, int]:
    """(whole, fragments, joined) among the words of one reading of a page (`words`) that the other
    readings (`others`) lack. A joined word is two or more of the others' words (of two letters or
    more) run together ('thecourt'); a fragment is part of a word only the others have that is not
    joined ('beijin' of 'beijing'), and not a word of `vocabulary` (the words the readings share
    over the document's compared pages); a whole word is any other. Only words of three letters or
    more count: shorter ones, and words with digits, are formulas' as often as words'."""
    own, theirs = words - others, others - words
    pieces, own_pieces = others | vocabulary, words | vocabulary
    theirs_whole = [word for word in theirs if not (4 <= len(word) <= 40 and _segments_into(word, own_pieces))]
    whole = fragments = joined = 0
    for word in own:
        if len(word) < 3 or not word.isalpha():
            continue
        if 4 <= len(word) <= 40 and _segments_into(word, pieces):
            joined += 1
        elif word not in vocabulary and any(word in other for other in theirs_whole):
            fragments += 1
        else:
            whole += 1
    return whole, fragments, joined


class PageReading(NamedTuple):
    """One engine's text of one page and what was measured of it."""
    engine: str
    text: str
    measures: PageMeasures


@dataclass(frozen=True)
class PageChoice:
    """The reading kept for a page: its index among the page's readings, why, and whether every
    reading was poor (the page goes to OCR)."""
    index: int
    reason: str
    poor: bool = False


# Defects a reading of a page cannot have for good text: text drawn from a broken map, or a glyph
# at a time. A low score alone may be a table or code that every engine reads alike.
STRONG_DEFECTS = ("scattered scripts", "rare characters", "single letters", "undecoded")

# The reason of a page whose every reading was poor: it needs OCR, and without OCR text it is unreadable.
POOR_TEXT = "poor in every engine"

# Whole words (less fragments and words run together) by which a reading must beat the kept
# engine's to replace it: one or two words are the readers' different ways with formulas.
WHOLE_WORDS_MARGIN = 2


def choose_page_reading(readings: list[PageReading], kept: int, min_quality: float,
                        vocabulary: set[str] | None = None) -> PageChoice:
    """Which of a page's readings (in the chain's order) to keep; `kept` is the reading of the
    engine the document-level decision kept; `vocabulary` the words the readings share over the
    document's compared pages.

    A reading with no defect (`page_defect`) beats one scored low, which beats one with a strong
    defect (STRONG_DEFECTS). Among the best, readings with the same words keep `kept` (else the
    first); readings that differ keep the one whose words are whole (`word_wholeness`: whole words
    less fragments and words run together), `kept` unless another is better by WHOLE_WORDS_MARGIN.
    When every reading has a strong defect, the best scored is kept and the page is poor: it goes
    to OCR."""
    defects = [page_defect(reading.measures, min_quality) for reading in readings]
    tiers = [0 if defect is None else 2 if defect in STRONG_DEFECTS else 1 for defect in defects]
    best_tier = min(tiers)
    best = [index for index, tier in enumerate(tiers) if tier == best_tier]
    poor_ones = "; ".join(f"{readings[i].engine}: {defect}" for i, defect in enumerate(defects) if defect)
    if best_tier == 2:
        def score(index: int) -> tuple:
            quality = readings[index].measures.quality
            return (quality if quality is not None else -1.0, index == kept)
        return PageChoice(max(best, key=score), f"{POOR_TEXT} ({poor_ones})", poor=True)
    if len(readings) == 1:
        return PageChoice(0, "good text" if best_tier == 0 else f"the only reading ({poor_ones})")
    if len(best) == 1:
        return PageChoice(best[0], f"the others poor ({poor_ones})")
    words = {index: set(normalized_words(readings[index].text)) for index in best}
    default = kept if kept in best else best[0]
    if all(words[index] == words[default] for index in best):
        return PageChoice(default, "engines agree")
    scores = {}
    for index in best:
        others = set().union(*(words[other] for other in best if other != index))
        whole, fragments, joined = word_wholeness(words[index], others, vocabulary or set())
        scores[index] = (whole - fragments - joined, fragments, joined)
    challenger = max(best, key=lambda index: (scores[index][0], index == default, -index))
    chosen = challenger if scores[challenger][0] >= scores[default][0] + WHOLE_WORDS_MARGIN else default
    counts = ", ".join(f"{readings[i].engine} {scores[i][0]:+d} ({scores[i][1]} fragments, {scores[i][2]} run together)"
                       for i in best)
    return PageChoice(chosen, ("whole words: " if chosen != default else "engines differ, kept: ") + counts)


def pages_to_reread(page_measures: list[list[PageMeasures]], tried: Iterable[str], engines: tuple[str, ...],
                    min_quality: float) -> tuple[str, tuple[int, ...]] | None:
    """(the next engine, the pages (0-based) it should read) after a document was kept: the pages
    whose every reading so far (`page_measures[page]`) is doubtful (`page_is_doubtful`), for the first
    engine of the chain not `tried` yet; None when no page is doubtful or no engine is left."""
    doubtful = tuple(page for page, readings in enumerate(page_measures)
                     if readings and all(page_is_doubtful(measures, min_quality) for measures in readings))
    left = [engine for engine in engines if engine not in set(tried)]
    return (left[0], doubtful) if doubtful and left else None


@dataclass(frozen=True)
class ExtractStep:
    """What to do after an engine's attempt: `next` engine, `keep` attempt number `index`, or
    `fail` (`permanent` or not) with `reason`."""
    action: str
    engine: str | None = None
    index: int = -1
    reason: str = ""
    permanent: bool = False


# Text quality is an estimate: text under SURE_TEXT_QUALITY (but over MIN_TEXT_QUALITY) is
# doubtful, and the next engine is tried too; a later engine's text replaces an acceptable earlier
# one only when its quality is higher by BETTER_TEXT_BY (a clear difference, not the estimate's noise).
SURE_TEXT_QUALITY = 0.7
BETTER_TEXT_BY = 0.2

# ...and when it has at least this share of the earlier one's word-like tokens (where counted).
WORDS_KEPT_SHARE = 0.8


def extraction_step(attempts: list[tuple[str, str, float | None]], engines: tuple[str, ...],
                    min_quality: float) -> ExtractStep:
    """The chain's decision after `attempts` ((engine, verdict, quality[, word-like tokens]) so far,
    in order).

    Good text (verdict ok, quality unknown or >= max(min_quality, SURE_TEXT_QUALITY)) is kept at
    once, unless an earlier engine gave acceptable text (then the two are weighed). Otherwise the next untried engine is tried, whatever the failure (another parser may read
    what one cannot), or the text was low (< min_quality) or doubtful (< SURE_TEXT_QUALITY).
    With none left the best ok text is kept even if its quality is low (it is all there is); an
    earlier text of at least min_quality stays unless a later one is better by BETTER_TEXT_BY and
    has WORDS_KEPT_SHARE of its word-like tokens or more (where they were counted).
    Failing that, the PDF fails, permanently when every engine gave a permanent verdict or died
    (at least one verdict being permanent; the reason named in the order of PERMANENT_VERDICTS),
    else transiently (a timeout, a lone crash, an OS error: retried in a later pass).
    """
    engine, verdict, quality = attempts[-1][:3]
    # An acceptable (doubtful) earlier text: the last one is weighed against it below.
    acceptable_before = any(attempt[1] == "ok" and (attempt[2] is None or attempt[2] >= min_quality)
                            for attempt in attempts[:-1])
    if verdict == "ok" and (quality is None or quality >= max(min_quality, SURE_TEXT_QUALITY)) \
            and not acceptable_before:
        return ExtractStep("keep", engine, len(attempts) - 1)
    tried = {attempt[0] for attempt in attempts}
    left = [candidate for candidate in engines if candidate not in tried]
    if left:
        return ExtractStep("next", left[0])
    readable = [index for index, attempt in enumerate(attempts) if attempt[1] == "ok"]
    if readable:
        def score(index: int) -> float:
            return attempts[index][2] if attempts[index][2] is not None else 1.0
        def words(index: int) -> int | None:
            return attempts[index][3] if len(attempts[index]) > 3 else None
        best = readable[0]
        for index in readable[1:]:
            margin = BETTER_TEXT_BY if score(best) >= min_quality else 0.0
            # Cleaner but missing words (an engine that skips form fields) is not better.
            fewer = margin and words(index) is not None and words(best) is not None \
                and words(index) < WORDS_KEPT_SHARE * words(best)
            if score(index) > score(best) and score(index) >= score(best) + margin and not fewer:
                best = index
        return ExtractStep("keep", attempts[best][0], best)
    verdicts = [attempt[1] for attempt in attempts]
    # A worker that died on bytes another engine called hopeless died of them (a parser aborting
    # at the memory cap on an inflate bomb): that is no reason to parse them again.
    transient = [verdict for verdict in verdicts if verdict not in PERMANENT_VERDICTS
                 and not (verdict == "crash" and set(verdicts) & set(PERMANENT_VERDICTS))]
    if transient:
        return ExtractStep("fail", reason=transient[0], permanent=False)
    return ExtractStep("fail", reason=next(v for v in PERMANENT_VERDICTS if v in verdicts), permanent=True)
