"""Benchmark: accuracy of the derived fields and citations, and their cost per document.

Two corpora, each against the hand-checked expectations of bench/data/derive_expected.json:
- real: the seven public Kentucky opinions captured from the court's API
  (bench/data/ky_captured_opinions.json: docket fields, page one's caption and
  passages with citations), derived with `derive_fields` over the text the
  court serves (pages joined by form feeds, as the extract stage writes them);
  and the public web copies of Kentucky opinions in bench/data/ky_public_pages.json
  (first-page texts as justia, ecases, casetext, cetient and pdfkul keep them:
  the court's lines, flattened into one line, reformatted, OCR'd; no docket
  fields, so derived from the text alone; their citations are not checked);
- simulated: every document of a simulated court (`--docs`, `--seed`) whose PDF
  it serves, its text extracted with pypdf as the extract stage would; the
  expectation is per docket description, plus the document's own case number
  and its filed date as the RENDERED date, and NULL for what its texts never
  say (publication, judge, lower and trial court).

Per field it prints: checked (documents with an expectation), derived (non-NULL),
agree, wrong (a value that is not the expected one, including a value where
NULL was expected) and missed (NULL where a value was expected). The goal is
wrong = 0; nulls are allowed and counted. Citations: expected, found, extra
(found, not expected). Then the cost: milliseconds per document of the fields
alone and of the citations (eyecite and the Kentucky rules) over the simulated
texts, as a ratio to sha256-hashing the same texts (the least the stage does
with a text), and the hours a full archive (98,724 documents) would take at
that rate, one process.

Usage: .venv/bin/python bench/derive.py [--docs 120] [--seed 7] [--show-wrong]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from notebook_builder.cells.c84_legal_text import (FIELD_NAMES, derive_fields, eyecite_version,  # noqa: E402
                                                   extract_citations, normalize_case_number)
from notebook_builder.simcourt import SimCourt  # noqa: E402

DATA = ROOT / "bench" / "data"
FULL_ARCHIVE = 98_724


def compare(tally: dict, field: str, expected, derived, label: str, wrong_lines: list) -> None:
    counts = tally[field]
    counts["checked"] += 1
    counts["derived"] += derived is not None
    if derived == expected:
        counts["agree"] += 1
    elif derived is None:
        counts["missed"] += 1
    else:
        counts["wrong"] += 1
        wrong_lines.append(f"{label} {field}: derived {derived!r}, expected {expected!r}")


def print_table(title: str, tally: dict, documents: int) -> None:
    print(f"\n{title}: {documents} documents")
    print(f"  {'field':<22}{'checked':>8}{'derived':>8}{'agree':>7}{'wrong':>7}{'missed':>7}")
    for field in FIELD_NAMES:
        c = tally[field]
        print(f"  {field:<22}{c['checked']:>8}{c['derived']:>8}{c['agree']:>7}{c['wrong']:>7}{c['missed']:>7}")
    totals = {k: sum(tally[f][k] for f in FIELD_NAMES) for k in ("checked", "agree", "wrong", "missed")}
    print(f"  {'all fields':<22}{totals['checked']:>8}{'':>8}{totals['agree']:>7}{totals['wrong']:>7}"
          f"{totals['missed']:>7}")


def real_documents() -> list[dict]:
    """Every real document: the captured API responses (with their docket fields) and the public web
    copies (a text alone), each as {id, label, text, the docket fields derive_fields takes, source}."""
    documents = []
    for opinion in json.loads((DATA / "ky_captured_opinions.json").read_text())["opinions"]:
        documents.append(dict(id=opinion["document_id"], label=opinion["case_number"], source="captured API",
                              text="\f".join(opinion["pages"]),
                              arguments=dict(description=opinion["description"], entry_type=opinion["entry_type"],
                                             entry_subtype=opinion["entry_subtype"],
                                             document_name=opinion["document_name"],
                                             case_number=opinion["case_number"])))
    for page in json.loads((DATA / "ky_public_pages.json").read_text())["documents"]:
        documents.append(dict(id=page["id"], label=page["id"], source=f"{page['site']} ({page['layout']})",
                              text=page["text"], arguments={}))
    return documents


def real_corpus(expected: dict, wrong_lines: list, warnings: collections.Counter) -> tuple[dict, dict]:
    documents = real_documents()
    tally = collections.defaultdict(collections.Counter)
    cites = collections.Counter()
    second_opinion = collections.Counter()
    for document in documents:
        want = expected["real"][document["id"]]
        text = document["text"]
        fields = derive_fields(text, **document["arguments"])
        for warning in fields.warnings:
            warnings[warning.split(":", 1)[0]] += 1
        label = f"real {document['label']}"
        for field in FIELD_NAMES:
            compare(tally, field, want["fields"][field], getattr(fields, field), label, wrong_lines)
        if "citations" not in want:
            continue
        result = extract_citations(text, own_case_numbers=fields.case_numbers or (), body_start=fields.caption_end)
        found = collections.Counter((c.kind, c.normalized) for c in result.citations)
        wanted = collections.Counter(tuple(pair) for pair in want["citations"])
        cites["expected"] += sum(wanted.values())
        cites["found"] += sum((found & wanted).values())
        cites["extra"] += sum((found - wanted).values())
        for missing in (wanted - found):
            wrong_lines.append(f"{label} citation not found: {missing}")
        for extra in (found - wanted):
            wrong_lines.append(f"{label} citation not expected: {extra}")
        if want.get("juriscraper"):
            for field, value in want["juriscraper"].items():
                second_opinion["compared"] += 1
                second_opinion["agree"] += getattr(fields, field) == value
    sources = collections.Counter(document["source"] for document in documents)
    return tally, {"citations": cites, "juriscraper": second_opinion, "documents": len(documents),
                   "sources": sources}


def pdf_text(data: bytes | None) -> str | None:
    if data is None:
        return None
    import pypdf
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except Exception:   # the unparseable PDFs: extract would fail them, derive sees no text
        return None
    return "\f".join(pages) if any(page.strip() for page in pages) else ""


def simulated_corpus(expected: dict, docs: int, seed: int, wrong_lines: list,
                     warnings: collections.Counter) -> tuple[dict, dict, list]:
    court = SimCourt(docs, seed)
    tally = collections.defaultdict(collections.Counter)
    texts: list[tuple[str, dict]] = []
    documents = 0
    for document in court.documents:
        data = court.pdf_bytes(document.document_id)
        if data is None:
            continue            # never served (permanent faults, oversized): nothing to derive from a text
        documents += 1
        text = pdf_text(data)
        want = dict.fromkeys(FIELD_NAMES)
        want.update(expected["simulated"][document.description])
        own = normalize_case_number(document.case_number)
        want["case_numbers"] = [own]
        if text:
            # A duplicate's PDF is its original's: the caption and RENDERED line are the original case's.
            source = court.document(document.duplicate_of) if document.duplicate_of else document
            want.update(rendered_date=source.filed_date[:10], related_case_numbers=[],
                        case_numbers=list(dict.fromkeys([own, normalize_case_number(source.case_number)])))
        arguments = dict(description=document.description, case_number=document.case_number,
                         document_name=document.document_name)
        fields = derive_fields(text, **arguments)
        for warning in fields.warnings:
            warnings[warning.split(":", 1)[0]] += 1
        label = f"sim {document.document_id[:12]} {document.description!r}"
        for field in FIELD_NAMES:
            compare(tally, field, want[field], getattr(fields, field), label, wrong_lines)
        if text:
            texts.append((text, arguments))
    return tally, {"documents": documents}, texts


def cost(texts: list[tuple[str, dict]], repeats: int = 3) -> dict:
    rounds = collections.defaultdict(list)
    for _ in range(repeats):
        started = time.perf_counter()
        for text, _ in texts:
            hashlib.sha256(text.encode("utf-8")).hexdigest()
        rounds["hash"].append(time.perf_counter() - started)
        started = time.perf_counter()
        for text, arguments in texts:
            derive_fields(text, **arguments)
        rounds["fields"].append(time.perf_counter() - started)
        started = time.perf_counter()
        for text, arguments in texts:
            extract_citations(text, own_case_numbers=[normalize_case_number(arguments["case_number"])])
        rounds["citations"].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in rounds.items()}


def main() -> int:
    logging.getLogger("pypdf").setLevel(logging.ERROR)   # the unparseable PDFs' complaints
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--show-wrong", action="store_true", help="list every wrong or missed value")
    args = parser.parse_args()
    expected = json.loads((DATA / "derive_expected.json").read_text())
    print(f"derive bench: eyecite {eyecite_version() or 'not installed'}")
    wrong_lines: list[str] = []
    warnings: collections.Counter = collections.Counter()

    tally, real = real_corpus(expected, wrong_lines, warnings)
    print_table("real Kentucky documents (hand-checked)", tally, real["documents"])
    print("  sources: " + ", ".join(f"{source} {count}" for source, count in sorted(real["sources"].items())))
    c = real["citations"]
    print(f"  citations (captured texts): {c['expected']} expected, {c['found']} found, {c['extra']} extra "
          f"(recall {c['found'] / max(1, c['expected']):.0%})")
    j = real["juriscraper"]
    print(f"  juriscraper's expected output (judge, publication status): agrees on {j['agree']} of {j['compared']}")

    sim_tally, sim, texts = simulated_corpus(expected, args.docs, args.seed, wrong_lines, warnings)
    print_table(f"simulated court (docs={args.docs}, seed={args.seed}; documents whose PDF it serves)",
                sim_tally, sim["documents"])
    print(f"\nwarnings (both corpora): {dict(sorted(warnings.items())) or 'none'}")
    wrong_or_missed = [line for line in wrong_lines]
    wrong_values = sum(tally[f]["wrong"] + sim_tally[f]["wrong"] for f in FIELD_NAMES)
    print(f"wrong values among the checked: {wrong_values} (goal 0)")
    if args.show_wrong or wrong_values:
        for line in wrong_or_missed:
            print(f"  {line}")

    if texts:
        seconds = cost(texts)
        per_doc = {name: 1000 * value / len(texts) for name, value in seconds.items()}
        print(f"\ncost over {len(texts)} simulated texts (mean {statistics.mean(len(t) for t, _ in texts):.0f} "
              f"chars), median of 3 rounds:")
        for name in ("fields", "citations"):
            print(f"  {name:<10} {per_doc[name]:7.3f} ms/document  {seconds[name] / seconds['hash']:8.1f}x "
                  f"sha256 of the text  -> {per_doc[name] * FULL_ARCHIVE / 3.6e6:5.2f} h for {FULL_ARCHIVE:,} "
                  "documents, one process")
    # Real opinions run 10-50 pages: a long text made of the captured real passages, repeated.
    captured = json.loads((DATA / "ky_captured_opinions.json").read_text())["opinions"]
    passages = "\f".join("\f".join(opinion["pages"]) for opinion in captured)
    long_text = (passages * (1 + 80_000 // len(passages)))[:80_000]
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        found = extract_citations(long_text)
        timings.append(time.perf_counter() - started)
    long_ms = 1000 * statistics.median(timings)
    per_citation = long_ms / max(1, len(found.citations))
    print(f"  citations of an 80,000-character text (the real passages repeated): {long_ms:.0f} ms for "
          f"{len(found.citations)} citations, {per_citation:.2f} ms a citation (eyecite's court lookup "
          f"dominates) -> {per_citation * 50 * FULL_ARCHIVE / 3.6e6:.1f} h for {FULL_ARCHIVE:,} documents "
          "if they average 50 citations, one process")
    return 0 if wrong_values == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
