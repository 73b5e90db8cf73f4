"""Benchmark: the extract stage over real PDFs (court filings, opinions, parsers' hard cases).

Over every PDF in a folder (default `../shared/realpdfs` beside the repository; `--dir` for
another), in one run:
- poppler's `pdftotext` (Debian's poppler-utils; said so when absent) as the reference reader;
- the extract stage (`extract(ctx)`: KY_EXTRACT_ENGINES, WORKERS processes) into a fresh
  workspace, then `ocr(ctx)` when asked (`--ocr`);
- a serial pypdf loop in this process (the old pipeline's engine), the speed baseline.
Prints: files poppler reads that the pipeline rejects (goal 0), with their reasons; the word
Jaccard of our text with pdftotext's per file that has text (`text_agreement`: after NFKC, with
bidi marks, letter spacing and the direction of right-to-left or mirrored text not counted as
differences; goal: >= 0.8 on >= 98%), and the files where only we found words; pages per
second of the stage against the serial pypdf loop (goal >= 10x on 2 cores); the permanent
verdicts, the engines that gave the kept texts, the pages needing OCR, the pages poor in every
engine and those of them OCR has given no text (unreadable).
Then, to diagnose the next hard file from this report alone: every file's agreement (`--quiet`
leaves that list out); each file under 0.8 with each engine's own agreement (run alone, outside
the timing) and whether any engine reads it right (>= 0.8; goal: none under 0.8 that one does);
and each page where the engines disagreed (`pages.engine_reason`: not plain good text, not
agreeing readings): the engine kept, why, and each engine's agreement on that page with
poppler's page. No figure here is a test: files and machines differ; the ratios are of one run.

`--repeats` rounds (default 3) of (serial loop, stage in a fresh workspace); the speed line
gives medians and each round's ratio; the other figures are the last round's.

Usage: .venv/bin/python bench/realpdfs.py [--dir DIR] [--workers 2] [--repeats 3] [--ocr] [--quiet]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c13_records import DownloadRecords, TextRecords  # noqa: E402
from notebook_builder.cells.c15_discovery_state import DiscoveryState  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c78_page_text import POOR_TEXT, text_agreement  # noqa: E402
from notebook_builder.cells.c79_extract_engines import ExtractWorkerPool  # noqa: E402


def pdftotext(path: Path) -> str | None:
    """poppler's text of the file, or None when poppler cannot read it: pdfinfo finds no page, or
    pages of size 0 x 0 (its page tree lost: poppler exits 0 and renders 1x1 white pixels), or
    pdftotext fails."""
    try:
        info = subprocess.run(["pdfinfo", str(path)], capture_output=True, timeout=120)
        lines = info.stdout.decode("utf-8", "replace").splitlines()
        pages = [line.split()[-1] for line in lines if line.startswith("Pages:")]
        # A page tree poppler cannot find gives pages of size 0 x 0 that render as one white pixel.
        sized = not any(line.startswith("Page size:") and line.split()[2:5] == ["0", "x", "0"] for line in lines)
        if info.returncode != 0 or not pages or int(pages[0]) < 1 or not sized:
            return None
        done = subprocess.run(["pdftotext", "-q", "-enc", "UTF-8", str(path), "-"], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def engine_texts(paths: list[Path], engines: tuple[str, ...], timeout: float) -> dict[tuple[Path, str], str | None]:
    """(path, engine) -> the engine's text of the file alone (None when it failed), each in a worker
    of the stage's own pool (an engine that crashes costs that worker only)."""
    texts: dict[tuple[Path, str], str | None] = {}
    by_key = {str(number): path for number, path in enumerate(paths)}
    with ExtractWorkerPool(1, engines, timeout) as pool:
        tasks = [(key, str(path), engine) for key, path in by_key.items() for engine in engines]
        for outcome in pool.run(tasks):
            texts[(by_key[outcome.key], outcome.engine)] = (
                outcome.data.decode("utf-8", "replace") if outcome.outcome == "ok" else None)
    return texts


def page_agreement(text: str | None, page: int, reference: str) -> str:
    """Agreement of page `page` (1-based) of `text` with poppler's page, as printed."""
    if text is None:
        return "failed"
    ours, theirs = text.split("\f"), reference.split("\f")
    if page > len(ours) or page > len(theirs):
        return "-"
    return f"{text_agreement(ours[page - 1], theirs[page - 1]):.2f}"


def cpu_seconds() -> float:
    """CPU of this process and of its children that ended (the stage's workers, once it closed its pool)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def serial_pypdf(paths: list[Path]) -> tuple[int, float]:
    """(pages, seconds) of pypdf over every file in this process, failures skipped."""
    import pypdf
    pages, started = 0, time.perf_counter()
    for path in paths:
        try:
            reader = pypdf.PdfReader(str(path))
            if reader.is_encrypted:
                reader.decrypt("")
            for page in reader.pages:
                page.extract_text()
                pages += 1
        except Exception:
            continue
    return pages, time.perf_counter() - started


def fresh_workspace(folder: Path, paths: list[Path], workers: int):
    """A workspace whose documents are `paths`, downloaded: (context, document_id -> path)."""
    cfg = load_config(env={"KY_WORKSPACE": str(folder / "ws"), "KY_STORE": str(folder / "store"),
                           "KY_PROGRESS": "0"}).replace(WORKERS=workers)
    ctx = open_context(cfg)
    db = ctx.open_database()
    by_id = {}
    for number, path in enumerate(paths):
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        name = f"pdf_by_hash/{sha}.pdf"
        (ctx.workspace / name).write_bytes(data)
        document_id = f"real{number:04d}"
        by_id[document_id] = path
        DiscoveryState(db).upsert_discovered([{"document_id": document_id, "document_name": path.name}])
        DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    return ctx, by_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT.parent / "shared" / "realpdfs"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ocr", action="store_true", help="also run the ocr stage and time it")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of (serial loop, stage); medians")
    parser.add_argument("--quiet", action="store_true", help="leave out the agreement of every file")
    args = parser.parse_args()
    folder = Path(args.dir)
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")
    if not paths:
        sys.exit(f"no PDFs under {folder}")
    have_poppler = shutil.which("pdftotext") is not None
    print(f"{len(paths)} PDFs under {folder}; {os.cpu_count()} CPUs; {args.workers} workers; "
          f"pdftotext {'present' if have_poppler else 'ABSENT (apt-get install poppler-utils): no reference'}")

    root = Path(tempfile.mkdtemp(prefix="kycourt-realpdfs-"))
    try:
        from notebook_builder.cells.c80_extract import extract
        rates, ratios, cpu_ratios = [], [], []
        load_before = os.getloadavg()[0]
        for round_number in range(max(1, args.repeats)):
            cpu_before = cpu_seconds()
            serial_pages, serial_seconds = serial_pypdf(paths)
            serial_cpu = cpu_seconds() - cpu_before
            ctx, by_id = fresh_workspace(root / f"round{round_number}", paths, args.workers)
            started, cpu_before = time.perf_counter(), cpu_seconds()
            result = extract(ctx)
            stage_seconds, stage_cpu = time.perf_counter() - started, cpu_seconds() - cpu_before
            # The wall ratio had each side had its cores to itself: the stage's CPU spread over its workers.
            cpu_ratios.append((serial_cpu / serial_pages) / (stage_cpu / args.workers / result.pages))
            stage_rate, serial_rate = result.pages / stage_seconds, serial_pages / serial_seconds
            rates.append((stage_rate, serial_rate))
            ratios.append(stage_rate / serial_rate)
            if round_number < args.repeats - 1:
                ctx.close()
        cfg, db = ctx.cfg, ctx.db
        ocr_line = ""
        if args.ocr:
            from notebook_builder.cells.c85_ocr import ocr
            ocr_result = ocr(ctx)
            ocr_line = (f"ocr stage: {ocr_result.skipped or ''} {ocr_result.pages} pages of {ocr_result.pdfs} PDFs "
                        f"in {ocr_result.seconds:.1f} s ({ocr_result.seconds / max(1, ocr_result.pages):.2f} s/page)")

        rejected, agreements, no_text, only_ours, references = [], [], 0, [], {}
        for document_id, path in by_id.items():
            row = db.get_document(document_id)
            reference = pdftotext(path) if have_poppler else None
            if row["status"] != "extracted":
                if reference is not None:
                    rejected.append((path.name, row["extract_failure"] or "transient", row["last_error"] or ""))
                continue
            if reference is None:
                continue
            references[path] = reference
            ours = (ctx.workspace / "text" / f"{row['sha256']}.txt").read_text(encoding="utf-8")
            if not reference.split() and not ours.split():
                no_text += 1
                continue
            if not reference.split():
                # Text poppler does not show (drawn off the page, say) is kept as a disagreement.
                only_ours.append(path.name)
            agreements.append((text_agreement(ours, reference), path.name, row["likely_scanned"], row["sha256"]))

        print(f"extract stage ({','.join(cfg.EXTRACT_ENGINES)}, {args.workers} workers, {result.pages} pages): "
              f"median {statistics.median(r for r, _ in rates):.0f} pages/s; serial pypdf loop ({serial_pages} pages): "
              f"median {statistics.median(r for _, r in rates):.0f} pages/s; ratio median "
              f"{statistics.median(ratios):.1f}x (rounds: {', '.join(f'{r:.1f}x' for r in ratios)}; goal >= 10x)")
        print(f"    load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (other work shares the "
              f"cores); from CPU seconds, the ratio with {args.workers} free cores: median "
              f"{statistics.median(cpu_ratios):.1f}x")
        print(f"extracted {result.extracted}, failed {result.failed_attempts} (permanent {result.permanent}), "
              f"fallbacks to a next engine {result.fallbacks}, pages reread by a next engine {result.pages_reread}, "
              f"pages kept from another engine than the document's {result.pages_other_engine}, "
              f"kept by {result.kept_by}, pages needing OCR {result.pages_needing_ocr} "
              f"({db.conn.execute('SELECT COUNT(*) FROM documents WHERE likely_scanned = 1').fetchone()[0]} "
              f"documents likely_scanned), pages poor in every engine {result.pages_poor_text} "
              f"(unreadable without OCR text: {TextRecords(db).unreadable_text_pages(POOR_TEXT)})")
        reasons = collections.Counter(r[0] for r in db.conn.execute(
            "SELECT extract_failure FROM documents WHERE extract_failure IS NOT NULL"))
        print(f"permanent verdicts: {dict(reasons)}")
        if ocr_line:
            print(ocr_line)
        if not have_poppler:
            print("no pdftotext: agreement and 'poppler reads, pipeline rejects' not measured")
            return
        print(f"poppler reads, pipeline rejects: {len(rejected)} (goal 0)")
        for name, reason, error in rejected:
            print(f"    {name}: {reason}: {error[:160]}")
        good = sum(1 for score, *_ in agreements if score >= 0.8)
        share = good / len(agreements) if agreements else 1.0
        print(f"word Jaccard with pdftotext >= 0.8: {good} of {len(agreements)} files with text = {share:.1%} "
              f"(goal >= 98%); median {statistics.median(s for s, *_ in agreements):.3f}; "
              f"{no_text} files without text in either")
        print(f"files with words in our text and none in pdftotext's (counted, agreement 0): {len(only_ours)}"
              + (f" ({', '.join(only_ours[:5])})" if only_ours else ""))
        kept_engines = {row["sha256"]: row["engine"] for row in db.conn.execute(
            "SELECT sha256, engine FROM extraction_log WHERE outcome = 'ok'")}
        if not args.quiet:
            print("agreement per file (kept engine):")
            for score, name, scanned, sha in sorted(agreements):
                print(f"    {score:.3f}  {name}  ({kept_engines.get(sha)}{', likely_scanned' if scanned else ''})")

        # Pages where the engines disagreed, and the files under 0.8: each engine's own text.
        disagreed = db.conn.execute(
            "SELECT sha256, page, engine, engine_reason FROM pages WHERE engine_reason IS NOT NULL "
            "AND engine_reason NOT IN ('good text', 'engines agree') ORDER BY sha256, page").fetchall()
        path_of = {sha: by_id[document_id] for document_id, sha in
                   db.conn.execute("SELECT document_id, sha256 FROM documents WHERE status = 'extracted'")}
        below = [(score, name, sha) for score, name, _, sha in sorted(agreements) if score < 0.8]
        looked_at = sorted({path_of[sha] for _, _, sha in below} | {path_of[row["sha256"]] for row in disagreed
                                                                   if row["sha256"] in path_of}, key=str)
        texts = engine_texts(looked_at, cfg.EXTRACT_ENGINES, cfg.EXTRACT_TIMEOUT)
        print(f"files under 0.8: {len(below)} (goal: none that an engine reads right)")
        for score, name, sha in below:
            path = path_of[sha]
            alone = {engine: (None if texts.get((path, engine)) is None
                              else text_agreement(texts[(path, engine)], references[path]))
                     for engine in cfg.EXTRACT_ENGINES}
            verdict = ("an engine reads it right" if any(a is not None and a >= 0.8 for a in alone.values())
                       else "no engine reads it right")
            print(f"    {score:.3f}  {name}  kept {kept_engines.get(sha)}; alone: "
                  + ", ".join(f"{engine} {'failed' if a is None else f'{a:.3f}'}" for engine, a in alone.items())
                  + f"  -> {verdict}")
        print(f"pages where the engines disagreed: {len(disagreed)}")
        for row in disagreed:
            path = path_of.get(row["sha256"])
            if path is None or path not in references:
                continue
            each = ", ".join(f"{engine} {page_agreement(texts.get((path, engine)), row['page'], references[path])}"
                             for engine in cfg.EXTRACT_ENGINES)
            print(f"    {path.name} p{row['page']}: kept {row['engine']} ({row['engine_reason'][:150]}); "
                  f"agreement with poppler's page: {each}")
        ctx.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
