"""Benchmark: pages per second of the extract stage against a serial pypdf loop over the same files.

Builds N opinion-like PDFs (simcourt's writer, 1-5 pages each) once, then in
the same run, `--repeats` times in alternation:
- a serial loop: pypdf (and pypdfium2) over every file in this process, no writes;
- the extract stage (`extract(ctx)`, WORKERS worker processes) into a fresh
  workspace and local store, with pypdf and with pypdfium2; its time includes
  forking its workers, the database commits, the text files and the store mirror.
Prints medians of pages/s and of the per-round ratios to the serial pypdf loop
(goal with pypdf on 2 cores: >= 1.8x); `Pool.map` (pool start included, no
writes, no database) is the machine's parallel ceiling at that moment, for
reading the others, then compares pypdfium2's text with pypdf's per document
(whitespace-normalized equality, else difflib similarity).

The default corpus (1,000 PDFs) is two EXTRACT_BATCHes, so a batch boundary
is measured as the stage meets it in a real run.

The stage creates two files per PDF (its text, locally and in the store).
This machine's disk is ext4 without a journal, where creating a file skips
every inode freed in the last ~30 s, one buffer-cache lookup each (perf:
`find_inode_bit` -> `recently_deleted`): right after a folder of files is
deleted, a create costs 0.2-0.6 ms of CPU instead of ~0.01 ms, for 60 s after
the deletion (up to 360 s while the inode table is not yet written back). The
pipeline itself deletes next to nothing, so the bench deletes nothing until
the end (each stage run gets a folder of its own) and, before the rounds,
waits up to 150 s for the filesystem to forget earlier deletions (the probe's
figure is printed: "file create"). `--no-settle` skips that wait.

Usage: .venv/bin/python bench/extract.py [--docs 1000] [--repeats 3] [--workers 2] [--root DIR] [--no-settle]
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import itertools
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c13_records import DownloadRecords  # noqa: E402
from notebook_builder.cells.c15_discovery_state import DiscoveryState  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c78_page_text import join_page_texts  # noqa: E402
from notebook_builder.cells.c79_extract_engines import EXTRACT_ENGINE_FUNCTIONS  # noqa: E402
from notebook_builder.cells.c80_extract import extract  # noqa: E402
from notebook_builder.simcourt.pdfs import opinion_pdf  # noqa: E402


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _own_cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def file_create_ms(folder: Path, count: int = 200) -> float:
    """CPU milliseconds to create (and close) one empty file in `folder`; the files stay (a delete
    would make the next creates dearer, see the docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    start = len(os.listdir(folder))
    started = time.process_time()
    for number in range(start, start + count):
        os.close(os.open(os.path.join(folder, f"f{number}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return (time.process_time() - started) / count * 1000


def settle_filesystem(folder: Path, limit_ms: float = 0.03, patience: float = 150.0) -> tuple[float, float]:
    """Waits (up to `patience` s) until creating a file in `folder` costs under `limit_ms` of CPU;
    returns (seconds waited, last cost)."""
    started = time.monotonic()
    cost = file_create_ms(folder)
    while cost > limit_ms and time.monotonic() - started < patience:
        time.sleep(5)
        cost = file_create_ms(folder)
    return time.monotonic() - started, cost


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
        texts[sha] = join_page_texts([page[0] for page in page_texts])   # (text, has images, ...) a page
    return pages, time.perf_counter() - started, texts


def _pool_pages(path: str) -> int:
    return len(EXTRACT_ENGINE_FUNCTIONS["pypdf"](path))


def pool_map(corpus, workers: int) -> tuple[int, float, dict[str, str]]:
    """The machine's ceiling right now: multiprocessing.Pool.map of pypdf, no writes, no database
    (the pool's start is timed, as the stage's is)."""
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pages = sum(pool.map(_pool_pages, [str(path) for _, _, path in corpus], chunksize=4))
        return pages, time.perf_counter() - started, {}


def stage(corpus, root: Path, engine: str, workers: int) -> tuple[int, float, dict[str, str]]:
    """The extract stage into `root` (a new folder: nothing is deleted while the bench measures)."""
    env = {"KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"), "KY_PROGRESS": "0"}
    cfg = load_config(env=env).replace(WORKERS=workers, EXTRACT_ENGINES=(engine,))
    ctx = open_context(cfg)
    db = ctx.open_database()
    DiscoveryState(db).upsert_discovered([{"document_id": document_id} for document_id, _, _ in corpus])
    with db.transaction():
        for document_id, sha, path in corpus:
            name = f"pdf_by_hash/{sha}.pdf"
            os.link(path, ctx.workspace / name)
            DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=path.stat().st_size, local_pdf=name)
    result = extract(ctx)
    assert result.extracted == len(corpus) and result.failed_attempts == 0, result
    texts = {sha: (ctx.workspace / "text" / f"{sha}.txt").read_text(encoding="utf-8") for _, sha, _ in corpus}
    ctx.close()
    return result.pages, result.seconds, texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", default=".", help="folder for the temporary corpus, workspace and store")
    parser.add_argument("--no-settle", action="store_true", help="do not wait for cheap file creates")
    args = parser.parse_args(argv)
    os.environ["KY_PROGRESS"] = "0"

    with tempfile.TemporaryDirectory(prefix="bench-extract-", dir=args.root) as temp:
        temp = Path(temp)
        corpus = build_corpus(temp / "corpus", args.docs)
        probe = temp / "create-probe"
        waited, create_cost = (0.0, file_create_ms(probe)) if args.no_settle else settle_filesystem(probe)
        create_costs = [create_cost]
        runs: dict[str, list[float]] = {}
        texts: dict[str, dict[str, str]] = {}
        total_pages = None
        folders = itertools.count()
        plan = [("serial pypdf", lambda: serial(corpus, "pypdf")),
                ("serial pypdfium2", lambda: serial(corpus, "pypdfium2")),
                (f"Pool.map pypdf x{args.workers}", lambda: pool_map(corpus, args.workers)),
                (f"stage pypdf x{args.workers}",
                 lambda: stage(corpus, temp / f"run{next(folders)}", "pypdf", args.workers)),
                (f"stage pypdfium2 x{args.workers}",
                 lambda: stage(corpus, temp / f"run{next(folders)}", "pypdfium2", args.workers))]
        cpu: dict[str, list[float]] = {}
        supervisor_cpu: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for label, run in plan:
                cpu_before, own_before = _cpu_seconds(), _own_cpu_seconds()
                pages, seconds, run_texts = run()
                cpu.setdefault(label, []).append((_cpu_seconds() - cpu_before) / pages * 1000)
                supervisor_cpu.setdefault(label, []).append((_own_cpu_seconds() - own_before) / pages * 1000)
                total_pages = total_pages or pages
                assert pages == total_pages, (label, pages, total_pages)
                runs.setdefault(label, []).append(pages / seconds)
                texts.setdefault(label, run_texts)
            create_costs.append(file_create_ms(probe))

    print(f"corpus: {args.docs} PDFs, {total_pages} pages; {os.cpu_count()} CPUs; "
          f"medians of {args.repeats} alternating runs")
    print(f"{'':28} {'pages/s':>9} {'vs serial pypdf':>16}   per round: pages/s (ratio to that round's serial pypdf)")
    for label, rates in runs.items():
        ratios = [rate / serial_rate for rate, serial_rate in zip(rates, runs["serial pypdf"])]
        print(f"{label:28} {statistics.median(rates):9.0f} {statistics.median(ratios):15.2f}x   "
              + ", ".join(f"{rate:.0f} ({ratio:.2f}x)" for rate, ratio in zip(rates, ratios)))
    print("CPU ms per page (this process and its reaped workers; load-independent): "
          + ", ".join(f"{label} {statistics.median(values):.2f}" for label, values in cpu.items()))
    print("  of which this process (the stage's supervisor: dispatch, text files, database): "
          + ", ".join(f"{label} {statistics.median(values):.2f}" for label, values in supervisor_cpu.items()
                      if label.startswith("stage")))
    print("file create (CPU ms per new file, before the rounds and after each): "
          + ", ".join(f"{ms:.3f}" for ms in create_costs)
          + (f"; waited {waited:.0f} s for it to settle" if waited >= 1 else ""))
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
