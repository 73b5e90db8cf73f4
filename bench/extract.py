"""Benchmark: pages per second of the extract stage against a serial pypdf loop over the same files.

Builds N opinion-like PDFs (simcourt's writer, 1-5 pages each) once, then in
the same run, `--repeats` times in alternation:
- a serial loop: pypdf (and pypdfium2) over every file in this process, no writes;
- the extract stage (`extract(ctx)`, WORKERS worker processes) into a fresh
  workspace and local store, with pypdf and with pypdfium2; its time includes
  the database commits, the text files and the store mirror.
Prints medians of pages/s and of the per-round ratios to the serial pypdf loop
(goal with pypdf on 2 cores: >= 1.8x); `Pool.map` (no writes, no database) is
the machine's parallel ceiling at that moment, for reading the others, then compares pypdfium2's text with pypdf's per
document (whitespace-normalized equality, else difflib similarity).

The corpus and the stage's workspace and store go in a temporary folder under
`--root` (default: the current directory, where `ky_court_workspace` goes by
default). The stage creates two files per PDF (its text, locally and in the
store) where the serial loop and Pool.map create none, and creating a file on
this machine's ext4 costs from 0.03 to 0.8 ms of CPU, varying by folder and by
hour: "file create" below prints it for the bench folder and for /tmp.

Usage: .venv/bin/python bench/extract.py [--docs 400] [--repeats 3] [--workers 2] [--root DIR]
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c80_extract import EXTRACT_ENGINE_FUNCTIONS, extract, join_page_texts  # noqa: E402
from notebook_builder.simcourt.pdfs import opinion_pdf  # noqa: E402


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def file_create_ms(root: Path, count: int = 300) -> float:
    """CPU milliseconds to create (and close) one empty file in a fresh folder under `root`."""
    with tempfile.TemporaryDirectory(dir=root) as folder:
        started = time.process_time()
        for number in range(count):
            os.close(os.open(os.path.join(folder, f"f{number}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return (time.process_time() - started) / count * 1000


def build_corpus(folder: Path, count: int) -> list[tuple[str, str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = []
    for number in range(count):
        case_number = f"20{number % 25:02d}-CA-{number:06d}"
        data = opinion_pdf(seed=number, case_number=case_number, court="Court of Appeals",
                           title=f"Appellant {number} v. Commonwealth of Kentucky",
                           description="Opinion Affirming", filed="2021-05-01",
                           creation_date="20240101000000Z")
        sha = hashlib.sha256(data).hexdigest()
        path = folder / f"{sha}.pdf"
        path.write_bytes(data)
        corpus.append((f"doc{number:05d}", sha, path))
    return corpus


def serial(corpus, engine: str) -> tuple[int, float, dict[str, str]]:
    extract_pages = EXTRACT_ENGINE_FUNCTIONS[engine]
    started = time.perf_counter()
    pages, texts = 0, {}
    for _, sha, path in corpus:
        page_texts = extract_pages(str(path))
        pages += len(page_texts)
        texts[sha] = join_page_texts(page_texts)
    return pages, time.perf_counter() - started, texts


def _pool_pages(path: str) -> int:
    return len(EXTRACT_ENGINE_FUNCTIONS["pypdf"](path))


def pool_map(corpus, workers: int) -> tuple[int, float, dict[str, str]]:
    """The machine's ceiling right now: multiprocessing.Pool.map of pypdf, no writes, no database."""
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        started = time.perf_counter()
        pages = sum(pool.map(_pool_pages, [str(path) for _, _, path in corpus], chunksize=4))
        return pages, time.perf_counter() - started, {}


def stage(corpus, root: Path, engine: str, workers: int) -> tuple[int, float, dict[str, str]]:
    shutil.rmtree(root, ignore_errors=True)
    env = {"KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"), "KY_PROGRESS": "0"}
    cfg = load_config(env=env).replace(WORKERS=workers, EXTRACT_ENGINE=engine)
    ctx = open_context(cfg)
    db = ctx.open_database()
    db.upsert_discovered([{"document_id": document_id} for document_id, _, _ in corpus])
    with db.transaction():
        for document_id, sha, path in corpus:
            name = f"pdf_by_hash/{sha}.pdf"
            os.link(path, ctx.workspace / name)
            db.mark_downloaded(document_id, sha256=sha, size_bytes=path.stat().st_size, local_pdf=name)
    result = extract(ctx)
    assert result.extracted == len(corpus) and result.failed_attempts == 0, result
    texts = {sha: (ctx.workspace / "text" / f"{sha}.txt").read_text(encoding="utf-8") for _, sha, _ in corpus}
    ctx.close()
    return result.pages, result.seconds, texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", default=".", help="folder for the temporary corpus, workspace and store")
    args = parser.parse_args(argv)
    os.environ["KY_PROGRESS"] = "0"

    with tempfile.TemporaryDirectory(prefix="bench-extract-", dir=args.root) as temp:
        temp = Path(temp)
        create_ms = {folder: file_create_ms(folder) for folder in (temp, Path(tempfile.gettempdir()))}
        corpus = build_corpus(temp / "corpus", args.docs)
        runs: dict[str, list[float]] = {}
        texts: dict[str, dict[str, str]] = {}
        total_pages = None
        plan = [("serial pypdf", lambda: serial(corpus, "pypdf")),
                ("serial pypdfium2", lambda: serial(corpus, "pypdfium2")),
                (f"Pool.map pypdf x{args.workers}", lambda: pool_map(corpus, args.workers)),
                (f"stage pypdf x{args.workers}", lambda: stage(corpus, temp / "run", "pypdf", args.workers)),
                (f"stage pypdfium2 x{args.workers}", lambda: stage(corpus, temp / "run", "pypdfium2", args.workers))]
        cpu: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for label, run in plan:
                cpu_before = _cpu_seconds()
                pages, seconds, run_texts = run()
                cpu.setdefault(label, []).append((_cpu_seconds() - cpu_before) / pages * 1000)
                total_pages = total_pages or pages
                assert pages == total_pages, (label, pages, total_pages)
                runs.setdefault(label, []).append(pages / seconds)
                texts.setdefault(label, run_texts)

    print(f"corpus: {args.docs} PDFs, {total_pages} pages; {os.cpu_count()} CPUs; "
          f"medians of {args.repeats} alternating runs")
    print(f"{'':28} {'pages/s':>9} {'vs serial pypdf':>16}   per round: pages/s (ratio to that round's serial pypdf)")
    for label, rates in runs.items():
        ratios = [rate / serial_rate for rate, serial_rate in zip(rates, runs["serial pypdf"])]
        print(f"{label:28} {statistics.median(rates):9.0f} {statistics.median(ratios):15.2f}x   "
              + ", ".join(f"{rate:.0f} ({ratio:.2f}x)" for rate, ratio in zip(rates, ratios)))
    print("CPU ms per page (this process and its reaped workers; load-independent): "
          + ", ".join(f"{label} {statistics.median(values):.2f}" for label, values in cpu.items()))
    print("file create (CPU ms per new file): " + ", ".join(f"{folder} {ms:.3f}" for folder, ms in create_ms.items()))
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (anything above ~0.2 is other work sharing the cores)")
    same_stage = texts["serial pypdf"] == texts[f"stage pypdf x{args.workers}"]
    print(f"stage pypdf text == serial pypdf text: {same_stage}")

    reference, candidate = texts["serial pypdf"], texts[f"stage pypdfium2 x{args.workers}"]
    equal, ratios, case_number_found = 0, [], 0
    for (_, sha, _), number in zip(corpus, range(len(corpus))):
        if f"-CA-{number:06d}" in candidate[sha]:
            case_number_found += 1
        a, b = reference[sha].split(), candidate[sha].split()
        if a == b:
            equal += 1
        else:
            ratios.append(difflib.SequenceMatcher(None, a, b, autojunk=False).ratio())
    print(f"pypdfium2 vs pypdf text: {equal}/{len(corpus)} documents equal after whitespace "
          f"normalization; case number found in {case_number_found}/{len(corpus)}"
          + (f"; word similarity of the others: min {min(ratios):.3f}, median {statistics.median(ratios):.3f}"
             if ratios else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
