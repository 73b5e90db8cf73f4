"""A tiny, deterministic PDF writer for the simulated court's documents.

Guarantees:
- `opinion_pdf()` returns a valid PDF (1-5 pages, Helvetica, Flate-compressed
  content) whose text layer holds the case number, the title and
  opinion-like paragraphs, three in five of them opening with a sentence on
  a real subject (restitution in orders; ineffective assistance at a
  suppression hearing, or due process, in the others: what the demo's
  printed search and docs/searching.md's examples look for); pypdf and
  pypdfium2 extract the case number.
- `prose="record"`: the body is the record's prose instead, as bench/search.py draws a full-scale
  corpus (MEASURED.md: 1,911 MB of text for 98,724 documents): a length log-normal about 15,000
  characters (5,000-60,000), pieces of a Zipf-like mix of function words, legal phrases and a long
  tail of 20,000 rarer words, with a topic's phrases, and the same heading and closing lines; pages
  as many as the text fills.
- `image_only_pdf()` is one page that only paints an image (a "scan"):
  every engine extracts 0 characters. `blank_pdf()` has pages and no text.
- `unparseable_pdf()` begins with `%PDF-` and no parser can open it.
- Same arguments, same bytes: there are no timestamps but the fixed
  creation date passed in, and zlib output is deterministic.

Written by hand rather than with fpdf2 because it is ~20x faster and the
download benchmark generates thousands of these.
"""
from __future__ import annotations

import math
import random
import zlib

_WORDS = (
    "appellant appellee court circuit judgment statute review record trial motion evidence "
    "jury instruction error harmless abuse discretion standard de novo findings fact law "
    "conclusion affirm reverse remand proceedings consistent opinion commonwealth defendant "
    "plaintiff petition writ mandamus prohibition custody sentence probation parole claim "
    "contract tort negligence duty breach damages immunity sovereign county board agency "
    "administrative hearing officer order summary dismissal jurisdiction venue precedent "
    "constitution section amendment due process equal protection search seizure warrant "
    "testimony witness objection preserved palpable manifest injustice substantial"
).split()

_CLOSINGS = ("AFFIRMED.", "REVERSED AND REMANDED.", "AFFIRMED IN PART, REVERSED IN PART.",
             "VACATED AND REMANDED.", "DISMISSED.")

# One sentence of real subject matter, in place of a text's first paragraph line, so that the
# demo's printed search and docs/searching.md's examples find something in the demo's archive:
# (sentences of orders, of the others).
# Each fits one line (88 characters) and names no citation, judge or court, so derive reads the
# same fields as before.
_TOPICS = (
    ("The order directs the defendant to pay restitution to the victim within ninety days.",
     "Restitution is not owed until the amount is proven at a hearing on remand."),
    ("The appellant claims ineffective assistance of counsel at the suppression hearing.",
     "The record shows no ineffective assistance: the suppression hearing was fair.",
     "The parties dispute whether due process required notice and a hearing first."),
)


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _assemble(objects: list[bytes], creation_date: str) -> bytes:
    """objects[i] is the body of object i+1; object 1 must be the catalog."""
    info_number = len(objects) + 1
    objects = objects + [b"<< /Producer (kycourt simcourt) /CreationDate (D:" +
                         creation_date.encode("ascii") + b") >>"]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += (b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objects) + 1, info_number, xref_at))
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    packed = zlib.compress(data, 6)
    return (b"<< /Length %d /Filter /FlateDecode" % len(packed) + extra + b" >>\nstream\n"
            + packed + b"\nendstream")


def _document(page_contents: list[bytes], creation_date: str,
              resources: bytes = b"<< /Font << /F1 3 0 R >> >>",
              extra_objects: list[bytes] = ()) -> bytes:
    # 1 catalog, 2 pages, 3 font, 4.. extra objects, then page/content pairs.
    first_page = 4 + len(extra_objects)
    kids = b" ".join(b"%d 0 R" % (first_page + 2 * i) for i in range(len(page_contents)))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(page_contents),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"]
    objects += list(extra_objects)
    for i, content in enumerate(page_contents):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       + resources + b" /Contents %d 0 R >>" % (first_page + 2 * i + 1))
        objects.append(_stream(content))
    return _assemble(objects, creation_date)


def _wrap(text: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def _text_page(lines: list[str]) -> bytes:
    parts = [b"BT /F1 11 Tf 14 TL 72 740 Td"]
    for line in lines:
        parts.append(b"(" + _escape(line) + b") Tj T*")
    parts.append(b"ET")
    return b"\n".join(parts)


LINES_PER_PAGE = 48


def text_pdf(pages: list[list[str]], *, creation_date: str) -> bytes:
    """A PDF with a text layer: each page these lines, Helvetica 11 pt from the top left."""
    return _document([_text_page(lines) for lines in pages], creation_date)


def opinion_pdf(*, seed: int | str, case_number: str, court: str, title: str,
                description: str, filed: str, creation_date: str, prose: str = "plain") -> bytes:
    """A 1-5 page opinion (`prose="record"`: as long as its text) whose first lines carry the case
    number and title."""
    pages = opinion_pages(seed=seed, case_number=case_number, court=court, title=title,
                          description=description, filed=filed, prose=prose)
    return _document([_text_page(chunk) for chunk in pages], creation_date)


def opinion_pages(*, seed: int | str, case_number: str, court: str, title: str,
                  description: str, filed: str, prose: str = "plain") -> list[list[str]]:
    """The lines of each page of `opinion_pdf` with the same arguments (the court's own
    documentText of the document is made from them)."""
    if prose not in PROSE:
        raise ValueError(f"prose must be one of {PROSE}")
    rng = random.Random(f"pdf:{seed}")
    pages = rng.choice((1, 1, 2, 2, 3, 4, 5))
    lines = [court.upper(), f"NO. {case_number}", title, "", description, f"RENDERED: {filed}", ""]
    if prose == "record":
        lines += record_paragraphs(seed)
        target = len(lines)
    else:
        target = pages * LINES_PER_PAGE - rng.randrange(0, LINES_PER_PAGE // 2)
    paragraph_number = 1
    while len(lines) < target:
        words = [rng.choice(_WORDS) for _ in range(rng.randrange(40, 140))]
        sentence_starts = range(0, len(words), rng.randrange(9, 18))
        for start in sentence_starts:
            words[start] = words[start].capitalize()
        text = f"{paragraph_number}. " + " ".join(words) + "."
        lines.extend(_wrap(text))
        lines.append("")
        paragraph_number += 1
    lines = lines[:target] + ["", rng.choice(_CLOSINGS), f"Case {case_number}"]
    # Its own random stream: every other line, and the pages, stay as they were without it.
    topic = random.Random(f"topic:{seed}")
    if topic.random() < 0.6:
        lines[7] = topic.choice(_TOPICS[0] if "ORDER" in description.upper() else _TOPICS[1])
    return [lines[i:i + LINES_PER_PAGE] for i in range(0, len(lines), LINES_PER_PAGE)]


PROSE = ("plain", "record")
# The record's prose (bench/search.py's corpus): function words, general legal phrases, rarer words.
_COMMON = ("the of and to in a that is for was on as by with it this be not court appeal order which "
           "are from or have had an at his her their were been would argues held finds under").split()
_GENERAL = ("the trial court", "the Commonwealth", "the appellant", "the appellee", "we affirm",
            "we reverse and remand", "abuse of discretion", "the record", "the evidence", "the statute",
            "KRS", "testimony", "clearly erroneous", "de novo review", "circuit court", "harmless error")
_TOPIC_PHRASES = (
    ("motion to suppress", "search warrant", "probable cause", "ineffective assistance of counsel",
     "double jeopardy", "jury instruction", "persistent felony offender", "palpable error", "sentencing"),
    ("child custody", "visitation", "dissolution of marriage", "maintenance", "best interests of the child"),
    ("workers compensation", "permanent partial disability", "Administrative Law Judge", "impairment rating"),
    ("negligence", "summary judgment", "damages", "sovereign immunity", "proximate cause", "comparative fault"),
    ("breach of contract", "specific performance", "unjust enrichment", "arbitration clause"),
    ("unemployment insurance", "zoning", "habeas corpus", "due process", "open records", "equal protection"),
)
_SYLLABLES = "ka ri mo te lu sa ve no di pa ro mi ta ne lo fe gu ba si ze".split()
_POOL_WORDS = 400_000
_pool: list[str] = []


def _prose_pool() -> str:
    """Sentences of the record's prose, drawn once (deterministically) and shared by every document."""
    if not _pool:
        rng = random.Random("record prose")
        rare = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(3, 5))) for _ in range(20_000)]
        vocabulary = _COMMON + list(_GENERAL) + rare
        tokens = rng.choices(vocabulary, [1.0 / (rank + 1) for rank in range(len(vocabulary))], k=_POOL_WORDS)
        sentences, start = [], 0
        while start < len(tokens):
            size = rng.randint(8, 30)
            sentence = " ".join(tokens[start:start + size])
            sentences.append(sentence[:1].upper() + sentence[1:] + ".")
            start += size
        _pool.append(" ".join(sentences))
    return _pool[0]


def record_paragraphs(seed: int | str) -> list[str]:
    """A document's body in the record's prose, wrapped, a blank line after each paragraph."""
    rng = random.Random(f"prose:{seed}")
    pool = _prose_pool()
    length = int(min(60_000, max(5_000, rng.lognormvariate(math.log(15_000), 0.6))))
    phrases = rng.sample(rng.choice(_TOPIC_PHRASES), k=3)
    lines, size, number = [], 0, 1
    while size < length:
        start = rng.randrange(0, len(pool) - 4000)
        piece = pool[start:start + rng.randint(1500, 4000)].strip()
        piece += " " + " ".join(rng.choice(phrases) for _ in range(rng.randint(1, 4))).capitalize() + "."
        lines += _wrap(f"{number}. {piece}") + [""]
        size += len(piece)
        number += 1
    return lines


def image_only_pdf(*, seed: int | str, creation_date: str) -> bytes:
    """One page painted by a grey 'scan' image; there is no text layer."""
    rng = random.Random(f"scan:{seed}")
    width, height = 170, 220
    rows = bytearray()
    for _ in range(height):
        base = rng.randrange(200, 256)
        rows += bytes((base - rng.randrange(0, 60)) if rng.random() < 0.08 else base
                      for _ in range(width))
    image = _stream(bytes(rows), b" /Type /XObject /Subtype /Image /Width %d /Height %d"
                    b" /ColorSpace /DeviceGray /BitsPerComponent 8" % (width, height))
    content = b"q 540 0 0 700 36 46 cm /Im1 Do Q"
    return _document([content], creation_date,
                     resources=b"<< /XObject << /Im1 4 0 R >> >>", extra_objects=[image])


def blank_pdf(*, seed: int | str, creation_date: str) -> bytes:
    """1-3 valid pages with nothing drawn on them."""
    pages = random.Random(f"blank:{seed}").randrange(1, 4)
    return _document([b"q Q"] * pages, creation_date)


def unparseable_pdf(*, seed: int | str) -> bytes:
    """`%PDF-` then noise: no objects, no xref, no trailer, nothing to recover."""
    rng = random.Random(f"broken:{seed}")
    # Bytes 0x80-0xff only, so no accidental 'obj', 'xref' or 'trailer' appears.
    noise = bytes(rng.randrange(0x80, 0x100) for _ in range(rng.randrange(2000, 6000)))
    return b"%PDF-1.7\n" + noise
