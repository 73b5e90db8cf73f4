"""Benchmark: adopting a full-scale v1.2 archive, and the court requests its first run saves.

    .venv/bin/python bench/legacy.py [--rows 98724] [--backups 9582] [--distinct 3326] [--court-docs 5000]
                                     [--discovery auto|documents|cases] [--skip-court]

1. Adoption at full scale: a v1.2-shaped database of `--rows` rows (the simulated court's
   corpus metadata; `--distinct` rows downloaded, their local_pdf written on another machine),
   and a pdf_backup/ of `--backups` files holding `--distinct` distinct small PDFs. Timed:
   `adopt` (judge, keep the original, the schema in one transaction, settle the rows), and the
   fold of pdf_backup/ it runs (c60 backfill, forced), each against a baseline in the same run:
   adoption against a bare online-backup copy of the same database (what any adoption of a copy
   costs at least), backfill against a bare loop that hashes every file and copies each distinct
   one once (no database, no fsync, no store).
2. Court requests (`--court-docs`, faults off, pacing off; PHASES discover,backfill,download):
   a crawl from nothing against the first run over a v1.2 state of the same court (every
   document discovered, the same share as above downloaded into pdf_backup/). Printed: search,
   docket-entry and download requests of each, the downloads the legacy state saved, whether any
   request asked for a PDF the legacy state held (goal: none), and the projected hours at the
   default pacing (mean pause + 0.25 s latency a request), also scaled linearly to 98,724
   documents.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("KY_PROGRESS", "0")

FULL_CORPUS = 98_724
LATENCY_SECONDS = 0.25          # per request, on top of the pacing pause (as bench/discover.py)
NO_COURT = "http://127.0.0.1:9/api/api/v1"
FROM_NOTHING, OVER_LEGACY = "from nothing", "over v1.2's state"


def small_pdf(number: int) -> bytes:
    return (f"%PDF-1.4\n% legacy backup {number}\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n"
            "%%EOF\n").encode()


def build_legacy(root: Path, documents, downloaded: int, backups: int) -> Path:
    """The workspace of a v1.2 user: ky_court.sqlite and pdf_backup/ (returns the workspace)."""
    from legacy_fixture import discovered_row, downloaded_row, write_legacy_database
    workspace = root / "workspace"
    folder = workspace / "pdf_backup"
    folder.mkdir(parents=True)
    rows = []
    for number, document in enumerate(documents):
        if number < downloaded:
            name = f"{document.case_number[:4]}/{number}.pdf"
            rows.append(downloaded_row(document, small_pdf(number), f"/content/ky_court_workspace/pdf_backup/{name}"))
        else:
            rows.append(discovered_row(document))
    write_legacy_database(workspace / "ky_court.sqlite", rows)
    for copy in range(backups):
        number = copy % downloaded
        year = documents[number].case_number[:4]
        name = f"{year}/{number}.pdf" if copy < downloaded else f"copies-{copy // downloaded}/{year}/{number}.pdf"
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(small_pdf(number))
    return workspace


def bare_copy(database: Path, target: Path) -> float:
    started = time.perf_counter()
    reader = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    writer = sqlite3.connect(target)
    reader.backup(writer)
    writer.close()
    reader.close()
    return time.perf_counter() - started


def bare_fold(folder: Path, target: Path) -> float:
    started = time.perf_counter()
    target.mkdir()
    seen = set()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if sha not in seen:
            seen.add(sha)
            (target / f"{sha}.pdf").write_bytes(data)
    return time.perf_counter() - started


def measure_adoption(args) -> None:
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c38_legacy import adopt
    from notebook_builder.cells.c60_backfill import backfill
    from notebook_builder.simcourt import SimCourt
    started = time.perf_counter()
    court = SimCourt(args.rows, seed=2026, faults=False)
    documents = list(court.documents)
    root = Path(tempfile.mkdtemp(prefix="ky-bench-legacy-"))
    try:
        workspace = build_legacy(root, documents, args.distinct, args.backups)
        size = (workspace / "ky_court.sqlite").stat().st_size
        print(f"legacy state: {args.rows:,} rows ({size / 2 ** 20:.1f} MiB), {args.backups:,} backups of "
              f"{args.distinct:,} distinct PDFs, built in {time.perf_counter() - started:.1f} s")
        copy_seconds = bare_copy(workspace / "ky_court.sqlite", root / "bare-copy.sqlite")
        fold_seconds = bare_fold(workspace / "pdf_backup", root / "bare-fold")
        cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(root / "store"), "KY_API_BASE": NO_COURT,
                           "KY_PROGRESS": "0"})
        ctx = open_context(cfg)
        timed = {}

        def fold(ctx):
            begun = time.perf_counter()
            result = backfill(ctx, force=True)
            timed["backfill"] = time.perf_counter() - begun
            return result
        begun = time.perf_counter()
        result = adopt(ctx, fold)
        total = time.perf_counter() - begun
        ctx.close()
        adoption = total - timed["backfill"]
        print(f"adoption: {adoption:.2f} s (judge, keep the original, schema in one transaction, settle "
              f"{result.pdfs:,} rows' PDFs) vs a bare backup-API copy {copy_seconds:.2f} s: ratio "
              f"{adoption / copy_seconds:.1f}x")
        backups = result.backfill
        print(f"backfill: {timed['backfill']:.2f} s ({backups.files:,} files, {backups.distinct:,} distinct, "
              f"{backups.duplicates:,} duplicates, {backups.credited:,} rows credited, {backups.uploaded:,} "
              f"uploaded to a local store) vs a bare hash-and-copy loop {fold_seconds:.2f} s: ratio "
              f"{timed['backfill'] / fold_seconds:.1f}x")
        print(f"adopt in all: {total:.2f} s; {result.held:,} rows wait for discovery to confirm their ids")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def crawl(court, root: Path, legacy_share: float | None, discovery: str) -> dict:
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c95_run import run_pipeline
    held: list[str] = []
    if legacy_share is not None:
        documents = list(court.documents)
        downloaded = round(len(documents) * legacy_share)
        from legacy_fixture import discovered_row, downloaded_row, write_legacy_database
        workspace = root / "workspace"
        (workspace / "pdf_backup").mkdir(parents=True)
        rows = []
        for number, document in enumerate(documents):
            if number < downloaded:
                data = court.pdf_bytes(document.document_id)
                (workspace / "pdf_backup" / f"{number}.pdf").write_bytes(data)
                rows.append(downloaded_row(document, data, f"/content/ky_court_workspace/pdf_backup/{number}.pdf"))
                held.append(document.document_id)
            else:
                rows.append(discovered_row(document))
        write_legacy_database(workspace / "ky_court.sqlite", rows)
    before = dict(court.endpoint_requests)
    cfg = load_config({"KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"),
                       "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_PROGRESS": "0",
                       "KY_PHASES": "discover,backfill,download", "KY_DISCOVERY": discovery})
    started = time.perf_counter()
    report = run_pipeline(cfg, handle_signals=False)
    requests = {kind: count - before.get(kind, 0) for kind, count in court.endpoint_requests.items()}
    requests = {kind: count for kind, count in sorted(requests.items()) if count}
    return {"requests": requests, "seconds": time.perf_counter() - started, "exit": report.exit_status,
            "held_asked": sum(court.requests_for(document_id) for document_id in held), "held": len(held),
            "summary": report.summary()}


def measure_requests(args) -> None:
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.simcourt import SimCourt
    defaults = load_config(env={})
    search_pause = sum(defaults.PACING_SEARCH) / 2 + LATENCY_SECONDS
    download_pause = sum(defaults.PACING_DL) / 2 + LATENCY_SECONDS
    share = args.distinct / args.rows
    results = {}
    for label, legacy_share in ((FROM_NOTHING, None), (OVER_LEGACY, share)):
        root = Path(tempfile.mkdtemp(prefix="ky-bench-legacy-court-"))
        try:
            with SimCourt(args.court_docs, seed=2026, faults=False) as court:   # a fresh court: counters at 0
                results[label] = crawl(court, root, legacy_share, args.discovery)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    scale = FULL_CORPUS / args.court_docs
    for label, result in results.items():
        asked = result["requests"]
        discovery = sum(count for kind, count in asked.items() if kind != "download")
        hours = discovery * search_pause / 3600 + asked.get("download", 0) * download_pause / 3600
        print(f"first run {label}: exit {result['exit']}, {discovery:,} discovery requests "
              f"({', '.join(f'{kind} {count:,}' for kind, count in asked.items() if kind != 'download')}) + "
              f"{asked.get('download', 0):,} downloads ({result['seconds']:.1f} s at pacing 0); projected "
              f"{hours:.2f} h at the default pacing, {hours * scale:.1f} h scaled to {FULL_CORPUS:,} documents")
    clean, legacy = results[FROM_NOTHING], results[OVER_LEGACY]
    discovery_saved = (sum(count for kind, count in clean["requests"].items() if kind != "download")
                       - sum(count for kind, count in legacy["requests"].items() if kind != "download"))
    print(f"downloads saved: {clean['requests'].get('download', 0) - legacy['requests'].get('download', 0):,} "
          f"(the legacy state holds {legacy['held']:,} PDFs); discovery requests saved: {discovery_saved:,} (the "
          "adopted rows are known, so the sweep that checks their ids adds none and already converges)")
    print(f"requests for a PDF the legacy state holds: {legacy['held_asked']} (goal: 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=FULL_CORPUS)
    parser.add_argument("--backups", type=int, default=9582)
    parser.add_argument("--distinct", type=int, default=3326)
    parser.add_argument("--court-docs", type=int, default=5000)
    parser.add_argument("--discovery", choices=("auto", "documents", "cases"), default="auto",
                        help="the court runs' KY_DISCOVERY (auto: the document search, which the simulated court has)")
    parser.add_argument("--skip-court", action="store_true")
    args = parser.parse_args()
    measure_adoption(args)
    if not args.skip_court:
        measure_requests(args)


if __name__ == "__main__":
    main()
