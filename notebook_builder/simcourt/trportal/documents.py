"""The simulated TR Portal's PDFs: each document's text in its system's own words (simcourt's pdfs.py writes them).

Guarantees:
- `document_pdf(corpus, shapes, doc)` is a valid PDF with a text layer (pdfs.text_pdf), the same
  bytes for the same corpus and document. Its first lines are the court's heading ("IN THE SUPREME
  COURT OF THE STATE OF NEVADA"), the case number in the court's form ("No. 90509", "SC-2024-0492"),
  the title, for an opinion its reporter citation where the system has one ("142 Nev. Adv. Op. No.
  45", "2024 ND 123", "2024 WY 45", "375 Or 123", "335 Or App 456"), the document's name and the
  entry's description; a paragraph cites two of the system's statutes ("NRS 200.010" and "Nev. Rev.
  Stat. 200.030", "Ala. Code § 13A-5-40", "ORS 137.700", ...), then opinion-like paragraphs.
- `pdf_facts(data)`: (pages, bytes) of a PDF, what an access row's documentInfo says.
"""
from __future__ import annotations

import datetime as _dt

from .. import pdfs
from .systems import CITATION_WORDS

_OREGON_VOLUME = {"or": (2024, 372, 3), "orctapp": (2024, 331, 12)}   # (year, volume, volumes a year)


def citation(corpus, entry: int) -> str:
    """The reporter citation of an opinion entry in its system's form, or "" (none, or not an opinion)."""
    number = corpus.citation_number(entry)
    form = CITATION_WORDS[corpus.system.name][0]
    if number is None or not form:
        return ""
    year = _dt.date.fromordinal(corpus.entry_day[entry]).year
    code = corpus.court_of_case(corpus.entry_case[entry]).code
    if corpus.system.name == "nevada":
        return form.format(volume=year - 1884, number=number)
    if corpus.system.name == "oregon":
        base_year, base_volume, per_year = _OREGON_VOLUME[code]
        return form.format(volume=base_volume + (year - base_year) * per_year, app=" App" if code == "orctapp" else "",
                           number=100 + number * 7 % 800)
    return form.format(year=year, number=number)


def number_line(corpus, case: int) -> str:
    number = corpus.case_numbers[case]
    return f"No. {number}" if corpus.system.name in ("nevada", "north-dakota", "florida") else number


def document_pdf(corpus, shapes, doc: int) -> bytes:
    """The PDF of a document (see the module docstring)."""
    entry = corpus.doc_entry[doc]
    case = corpus.entry_case[entry]
    court = corpus.court_of_case(case)
    day = _dt.date.fromordinal(corpus.entry_day[entry])
    name = shapes.document_name(doc)
    description = shapes.description(entry)
    pages = pdfs.opinion_pages(seed=f"trportal:{corpus.seed}:{corpus.system.name}:{doc}",
                               case_number=corpus.case_numbers[case],
                               court=court.heading, title=corpus.planned_title(case), description=description,
                               filed=day.isoformat())
    lines = [line for page in pages for line in page]
    statutes = CITATION_WORDS[corpus.system.name][1]
    first, second = statutes[0], statutes[1 + doc % (len(statutes) - 1)]
    head = [court.heading, number_line(corpus, case), corpus.planned_title(case).upper(), ""]
    cited = citation(corpus, entry) if corpus.kind(entry).opinion and not corpus.doc_appendix[doc] else ""
    if cited:
        head += [cited, ""]
    head += [name.upper(), description, f"Filed: {day:%B} {day.day}, {day.year}", "",
             f"This matter turns on {first} and {second}, as the parties agree."]
    body = lines[7:]          # opinion_pages' own head (court, number, title, description, date) replaced
    text = head + [""] + body
    chunks = [text[i:i + pdfs.LINES_PER_PAGE] for i in range(0, len(text), pdfs.LINES_PER_PAGE)]
    stamp = f"{day:%Y%m%d}120000-00'00'"
    return pdfs.text_pdf(chunks, creation_date=stamp)


def pdf_facts(data: bytes) -> tuple[int, int]:
    """(pages, bytes) of a PDF written by pdfs.py."""
    return data.count(b"/Type /Page /Parent"), len(data)
