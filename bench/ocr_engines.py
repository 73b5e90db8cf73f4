"""Benchmark: which OCR engine the `ocr` stage uses, by measurement on this machine.

Renders pages of known text (simcourt's opinion-like PDFs, their text layer
being the truth) with pdfium at the stage's resolution, then recognises every
page with each installed engine: Tesseract (Debian's `tesseract-ocr` through
pytesseract, one thread per process) and RapidOCR (`rapidocr-onnxruntime`, a
pip-only engine that ships its ONNX models). Per engine: seconds per page
with 2 worker processes (wall time of the pool / pages, the figure that
matters on 2 cores), seconds per page in one process, and accuracy: word
recall (share of the truth's words, with multiplicity, that the engine gave)
and the word Jaccard of `c80_extract.text_agreement`.

Usage: .venv/bin/python bench/ocr_engines.py [--pages 12] [--dpi 200] [--workers 2]
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_THREAD_LIMIT", "1")   # Tesseract: one thread per process, the pool does the rest

from notebook_builder.cells.c80_extract import EXTRACT_ENGINE_FUNCTIONS, text_agreement  # noqa: E402
from notebook_builder.cells.c85_ocr import OCR_ENGINES, ocr_engine_available, render_page  # noqa: E402
from notebook_builder.simcourt.pdfs import opinion_pdf  # noqa: E402

_IMAGES: list = []


def word_recall(truth: str, found: str) -> float:
    want = collections.Counter(re.findall(r"\w+", truth.lower()))
    got = collections.Counter(re.findall(r"\w+", found.lower()))
    total = sum(want.values())
    return sum(min(count, got[word]) for word, count in want.items()) / total if total else 1.0


def _recognise(args):
    engine, index = args
    started = time.perf_counter()
    text = OCR_ENGINES[engine](_IMAGES[index], 600)
    return index, text, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    folder = Path("/tmp/kycourt-ocr-bench")
    folder.mkdir(exist_ok=True)
    truths = []
    seed = 0
    while len(truths) < args.pages:
        seed += 1
        pdf = folder / f"page-source-{seed}.pdf"
        pdf.write_bytes(opinion_pdf(seed=seed, case_number=f"2021-SC-{seed:06d}", court="Supreme Court",
                                    title=f"Appellant {seed} v. Commonwealth", description="Opinion",
                                    filed="2021-05-01", creation_date="20240101000000Z"))
        for number, (text, *_) in enumerate(EXTRACT_ENGINE_FUNCTIONS["pypdfium2"](str(pdf))):
            if len(truths) < args.pages:
                truths.append(text)
                _IMAGES.append(render_page(str(pdf), number, args.dpi))
    print(f"{len(truths)} rendered pages of known text at {args.dpi} dpi; {os.cpu_count()} CPUs; "
          f"{args.workers} workers")
    for engine in OCR_ENGINES:
        missing = ocr_engine_available(engine)
        if missing:
            print(f"{engine:>10}: not measured: {missing}")
            continue
        OCR_ENGINES[engine](_IMAGES[0], 600)   # warm-up (model load) outside the timing
        started = time.perf_counter()
        serial = [OCR_ENGINES[engine](image, 600) for image in _IMAGES[:3]]
        serial_seconds = (time.perf_counter() - started) / 3
        del serial
        mp = multiprocessing.get_context("fork")
        started = time.perf_counter()
        with mp.Pool(args.workers) as pool:
            results = sorted(pool.map(_recognise, [(engine, i) for i in range(len(_IMAGES))]))
        wall = time.perf_counter() - started
        recalls = [word_recall(truths[i], text) for i, text, _ in results]
        jaccards = [text_agreement(truths[i], text) for i, text, _ in results]
        print(f"{engine:>10}: {wall / len(_IMAGES):.2f} s/page with {args.workers} workers "
              f"({serial_seconds:.2f} s/page in one process); word recall median "
              f"{statistics.median(recalls):.3f} min {min(recalls):.3f}; word Jaccard median "
              f"{statistics.median(jaccards):.3f} min {min(jaccards):.3f}")


if __name__ == "__main__":
    main()
