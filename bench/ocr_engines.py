"""Benchmark: which OCR engine the `ocr` stage uses, and what orientation detection costs and gives.

Renders pages of known text (simcourt's opinion-like PDFs, their text layer
being the truth) with pdfium at the stage's resolution, turns some of them as
a scanner would have (upside down, sideways), then recognises every page:

- Tesseract three ways: as the stage read pages before orientation detection
  (page segmentation mode 3, the page handed over as PNG: the baseline),
  without orientation detection (mode 3, BMP: what the stage does where the
  `osd` traineddata is missing) and with it (mode 1: OSD, then the page read
  in the orientation found, hOCR for the rotation: the stage's way);
- RapidOCR (`rapidocr-onnxruntime`, a pip-only engine) where it is installed.

Per way: seconds per page with WORKERS processes (wall time of the pool /
pages, the figure that matters on 2 cores; the median of `--rounds` rounds,
the ways taking turns, so a load that comes and goes weighs on each alike),
its ratio to the baseline, and word recall (share of the truth's words, with
multiplicity, that the engine gave) on the upright and on the turned pages,
with the lowest page's; the rotations the stage would record.

Usage: .venv/bin/python bench/ocr_engines.py [--pages 12] [--dpi 300] [--workers 2] [--rounds 2]
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

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c79_extract_engines import EXTRACT_ENGINE_FUNCTIONS  # noqa: E402
from notebook_builder.cells.c85_ocr import (OCR_ENGINES, ocr_engine_available, orientation_unavailable,  # noqa: E402
                                            render_page)
from notebook_builder.simcourt.pdfs import opinion_pdf  # noqa: E402

# How the scanner left each page, in turn (degrees counter-clockwise): half upright.
TURNS = (0, 180, 0, 90, 0, 180, 0, 270)
_IMAGES: list = []


def word_recall(truth: str, found: str) -> float:
    want = collections.Counter(re.findall(r"\w+", truth.lower()))
    got = collections.Counter(re.findall(r"\w+", found.lower()))
    total = sum(want.values())
    return sum(min(count, got[word]) for word, count in want.items()) / total if total else 1.0


def _before_orientation(image, timeout):
    """The stage's Tesseract call before orientation detection: mode 3, the image as PNG."""
    import pytesseract
    image = image.copy()
    image.format = None                   # pytesseract then writes PNG
    return pytesseract.image_to_string(image, lang="eng", timeout=timeout), None


WAYS = {   # name -> f(image, timeout) -> (text, rotation)
    "tesseract, before (mode 3, PNG)": _before_orientation,
    "tesseract, no orientation detection": lambda image, timeout: OCR_ENGINES["tesseract"](image, timeout, False),
    "tesseract, orientation detected (the stage)": lambda image, timeout: OCR_ENGINES["tesseract"](image, timeout,
                                                                                                   True),
    "rapidocr": lambda image, timeout: OCR_ENGINES["rapidocr"](image, timeout, True),
}
BASELINE = "tesseract, before (mode 3, PNG)"


def _recognise(args):
    way, index = args
    text, rotation = WAYS[way](_IMAGES[index], 600)
    return index, text, rotation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--dpi", type=int, default=load_config({}).OCR_DPI)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path("/tmp/kycourt-ocr-bench")
    folder.mkdir(exist_ok=True)
    truths, turns = [], []
    seed = 0
    while len(truths) < args.pages:
        seed += 1
        pdf = folder / f"page-source-{seed}.pdf"
        pdf.write_bytes(opinion_pdf(seed=seed, case_number=f"2021-SC-{seed:06d}", court="Supreme Court",
                                    title=f"Appellant {seed} v. Commonwealth", description="Opinion",
                                    filed="2021-05-01", creation_date="20240101000000Z"))
        for number, (text, *_) in enumerate(EXTRACT_ENGINE_FUNCTIONS["pypdfium2"](str(pdf))):
            if len(truths) < args.pages:
                turn = TURNS[len(truths) % len(TURNS)]
                truths.append(text)
                turns.append(turn)
                _IMAGES.append(render_page(str(pdf), number, args.dpi).rotate(turn, expand=True))
    print(f"{len(truths)} rendered pages of known text at {args.dpi} dpi, {sum(1 for t in turns if t)} of them "
          f"turned ({dict(collections.Counter(turns))} degrees counter-clockwise); {os.cpu_count()} CPUs; "
          f"{args.workers} workers; {args.rounds} rounds")
    ways = []
    for way in WAYS:
        engine = "rapidocr" if way == "rapidocr" else "tesseract"
        missing = ocr_engine_available(engine)
        if missing:
            print(f"{way}: not measured: {missing}")
            continue
        if way.endswith("(the stage)") and orientation_unavailable(engine):
            print(f"{way}: not measured: {orientation_unavailable(engine)}")
            continue
        WAYS[way](_IMAGES[0], 600)   # warm-up (model load) outside the timing
        ways.append(way)
    walls: dict[str, list[float]] = collections.defaultdict(list)
    results: dict[str, list] = {}
    mp = multiprocessing.get_context("fork")
    for _ in range(args.rounds):
        for way in ways:
            started = time.perf_counter()
            with mp.Pool(args.workers) as pool:
                results[way] = sorted(pool.map(_recognise, [(way, i) for i in range(len(_IMAGES))]))
            walls[way].append((time.perf_counter() - started) / len(_IMAGES))
    base = statistics.median(walls[BASELINE]) if BASELINE in walls else None
    for way in ways:
        seconds = statistics.median(walls[way])
        recalls = [word_recall(truths[i], text) for i, text, _ in results[way]]
        upright = [recall for recall, turn in zip(recalls, turns) if not turn]
        turned = [recall for recall, turn in zip(recalls, turns) if turn]
        rotations = collections.Counter(rotation for _, _, rotation in results[way])
        ratio = f" ({seconds / base:.2f}x the baseline)" if base else ""
        print(f"{way}: {seconds:.2f} s/page{ratio} (rounds: {', '.join(f'{w:.2f}' for w in walls[way])}); "
              f"word recall upright median {statistics.median(upright):.3f} min {min(upright):.3f}, "
              f"turned median {statistics.median(turned):.3f} min {min(turned):.3f}; "
              f"pages under 0.8: {sum(1 for recall in recalls if recall < 0.8)}"
              + (f"; rotations found {dict(rotations)}" if any(rotations) else ""))


if __name__ == "__main__":
    main()
