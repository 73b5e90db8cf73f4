"""Benchmark: both discovery strategies over the full 98,724-document simulated court.

    .venv/bin/python bench/discover.py [--docs 98724] [--rounds 2] [--skip-cases]

The document search (KY_DISCOVERY=documents) against a bare paging loop, as
before; then the case walk (KY_DISCOVERY=cases, parties and lower courts on,
the court's text kept) against a court of the captured shape with the same
documents, and its requests compared with the floor the data sets: one per
case-search page, one per case (its docket entries), one per docket entry
with documents, plus one each per case for parties and lower courts (the
details pass asks those once discovery has converged: they count in the
requests to convergence, not in the first sweep's). The case walk runs twice: against the captured court as it was, and against the
same court with every behaviour of the real court the simulated one has
switched on (withheld files, paged lists of at most 3 rows, entries listing
no file, null texts, late opinions in closed cases, neighbouring case
numbers, instants near midnight UTC): what asking withheld and empty
entries again, following pages and closing the window with the opinion
search cost. For each strategy: requests per document and the projected
hours at the default pacing (the mean of PACING_SEARCH) plus 0.25 s of
latency per request.

The court runs in its own process, so neither measured process carries its
memory. Each measurement is a fresh subprocess, so its peak RSS
(getrusage ru_maxrss) is its own:
- `discover`: the Discover stage (a fresh workspace, pacing off) sweeping
  until it converges;
- `bare`: the same requests (same shards, splits, page size and number of
  sweeps) through one requests.Session, rows parsed from JSON and dropped,
  no database.
Runs alternate bare/discover in the same court, and the ratio is of the
medians of the same run. The court's own peak RSS (VmHWM) is printed apart.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FULL_CORPUS = 98_724
LATENCY_SECONDS = 0.25          # per request, on top of the pacing pause, for the projection


# The real court's behaviours (tests/support.py REAL_COURT_BEHAVIOURS, with pages of 3 rows).
REAL_COURT = dict(unavailable_files=True, release_withheld=True, paged_lists=3, empty_file_lists=True,
                  null_texts=True, late_opinions=3, neighbours=True, midnight_instants=True)


def _serve(docs: int, seed: int, ready, stop, shape: str = "inferred", options: dict | None = None) -> None:
    from notebook_builder.simcourt import SimCourt
    court = SimCourt(docs=docs, seed=seed, faults=False, shape=shape, **(options or {}))
    ready.put(court.start())
    stop.wait()
    court.stop()


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def worker_discover(base_url: str) -> dict:
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c50_discover import discover
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=f"{folder}/w", STORE=f"{folder}/s",
                          API_BASE=base_url, FIRST_YEAR=1990, LAST_YEAR=2026)
        ctx = open_context(cfg)
        started = time.perf_counter()
        result = discover(ctx)
        seconds = time.perf_counter() - started
        ctx.close()
    return {"seconds": seconds, "sweeps": result.sweeps, "pages": result.pages,
            "rows_seen": result.rows_seen, "repages": result.repages, "documents": result.documents,
            "converged": result.converged, "requests": result.requests, "peak_rss_mib": _peak_rss_mib()}


def worker_cases(base_url: str) -> dict:
    """The case walk: one sweep (its requests against the floor), then on to convergence."""
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c50_discover import discover
    with tempfile.TemporaryDirectory() as folder:
        cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=f"{folder}/w", STORE=f"{folder}/s",
                          API_BASE=base_url, FIRST_YEAR=1990, LAST_YEAR=2026, DISCOVERY="cases", MAX_SWEEPS=1)
        ctx = open_context(cfg)
        started = time.perf_counter()
        first = discover(ctx)
        first_seconds = time.perf_counter() - started
        db = ctx.db
        one = lambda sql: db.conn.execute(sql).fetchone()[0]   # noqa: E731
        floor = {"search pages": one("SELECT COALESCE(SUM(pages), 0) FROM discovery_shards WHERE sweep = 1"),
                 "cases": one("SELECT COUNT(*) FROM cases"),
                 "entries with documents": one("SELECT COUNT(*) FROM docket_entries WHERE has_documents = 1")}
        floor["parties + lower courts"] = 2 * floor["cases"]
        ctx.cfg = ctx.cfg.replace(MAX_SWEEPS=8)
        rest = discover(ctx)
        seconds = time.perf_counter() - started
        documents = rest.documents
        court_texts = one("SELECT COUNT(*) FROM court_text")
        ctx.close()
    return {"seconds": seconds, "first_sweep_seconds": first_seconds, "sweeps": first.sweeps + rest.sweeps,
            "first_sweep_requests": first.requests, "requests": first.requests + rest.requests,
            "floor": floor, "documents": documents, "converged": rest.converged, "court_texts": court_texts,
            "unavailable": first.unavailable, "empty_entries": first.empty_entries,
            "asked_again": first.entries_asked_again + rest.entries_asked_again,
            "opinion_rows": first.opinion_rows + rest.opinion_rows,
            "foreign_rows": first.foreign_rows + rest.foreign_rows, "peak_rss_mib": _peak_rss_mib()}


def worker_bare(base_url: str, sweeps: int) -> dict:
    """The same requests as Discover, without the database: the floor Discover is compared with."""
    import requests
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c25_court import ENDPOINTS, KENTUCKY, MANDATORY_HEADERS
    from notebook_builder.cells.c44_discovery_rules import DISCOVER_MAX_REPAGES, needs_repage, needs_split
    page_size = load_config(env={}).PAGE_SIZE
    session = requests.Session()
    session.headers.update(MANDATORY_HEADERS)
    pages = rows = repages = 0
    started = time.perf_counter()
    for _ in range(sweeps):
        shards = KENTUCKY.sweep_shards(1990, 2026)
        while shards:
            shard = shards.pop(0)
            start, limit, seen, passes = 1, None, set(), 0
            while True:
                size = page_size if limit is None else min(page_size, limit - start + 1)
                response = session.get(base_url + ENDPOINTS["document_search"].format(prefix=shard),
                                       headers={"x-ctrack-paging-startindex": str(start),
                                                "x-ctrack-paging-maxresults": str(size),
                                                "x-ctrack-paging-calculatetotalcount": "true"},
                                       timeout=60)
                limit = int(response.headers["x-ctrack-paging-resultslimit"])
                items = response.json()["resultItems"]
                pages += 1
                if needs_split(int(response.headers["x-ctrack-paging-totalcount"]), limit):
                    shards[:0] = KENTUCKY.numbers.split_shard(shard)
                    break
                rows += len(items)
                # Discover's re-page rule, so both loops send the same requests: the distinct ids
                # of a shard are counted, and a pass that fell short of the total is paged again.
                seen.update(item["rowMap"]["documentID"] for item in items)
                total = int(response.headers["x-ctrack-paging-totalcount"])
                if (response.headers["x-ctrack-paging-moreresults"] == "true"
                        and not (passes and len(seen) >= total)):
                    start += int(response.headers["x-ctrack-paging-resultcount"])
                    continue
                if not needs_repage(len(seen), total, passes, DISCOVER_MAX_REPAGES):
                    break
                passes, start = passes + 1, 1
                repages += 1
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "sweeps": sweeps, "pages": pages, "rows_seen": rows, "repages": repages,
            "requests": pages, "peak_rss_mib": _peak_rss_mib()}


def _run_worker(*args: str) -> dict:
    env = {**os.environ, "KY_PROGRESS": "0"}
    output = subprocess.run([sys.executable, __file__, "--worker", *args], check=True,
                            capture_output=True, text=True, env=env).stdout
    return json.loads(output.strip().splitlines()[-1])


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-cases", action="store_true", help="measure the document search only")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, base_url, *rest = args.worker
        if kind == "discover":
            result = worker_discover(base_url)
        elif kind == "cases":
            result = worker_cases(base_url)
        else:
            result = worker_bare(base_url, int(rest[0]))
        print(json.dumps(result))
        return

    spawn = multiprocessing.get_context("spawn")
    ready, stop = spawn.Queue(), spawn.Event()
    server = spawn.Process(target=_serve, args=(args.docs, args.seed, ready, stop), daemon=True)
    server.start()
    try:
        base_url = ready.get(timeout=300)
        runs: dict[str, list[dict]] = {"discover": [], "bare": []}
        for _ in range(args.rounds):
            runs["discover"].append(_run_worker("discover", base_url))
            sweeps = runs["discover"][-1]["sweeps"]
            runs["bare"].append(_run_worker("bare", base_url, str(sweeps)))
        server_peak = _vm_hwm_mib(server.pid)
    finally:
        stop.set()
        server.join(timeout=10)

    def per_second(run: dict) -> float:
        return run["rows_seen"] / run["seconds"]

    for run in runs["discover"]:
        print(f"discover: {run['seconds']:.2f} s, {run['sweeps']} sweeps, {run['pages']} pages "
              f"({run['repages']} shard re-pages), "
              f"{run['rows_seen']} rows seen, {run['documents']} documents, converged={run['converged']}, "
              f"{per_second(run):,.0f} rows/s, peak RSS {run['peak_rss_mib']:.1f} MiB")
    for run in runs["bare"]:
        print(f"bare:     {run['seconds']:.2f} s, {run['sweeps']} sweeps, {run['pages']} pages "
              f"({run['repages']} shard re-pages), "
              f"{run['rows_seen']} rows seen, {per_second(run):,.0f} rows/s, "
              f"peak RSS {run['peak_rss_mib']:.1f} MiB")
    discover_seconds = statistics.median(run["seconds"] / run["rows_seen"] for run in runs["discover"])
    bare_seconds = statistics.median(run["seconds"] / run["rows_seen"] for run in runs["bare"])
    documents = runs["discover"][-1]["documents"]
    print(f"documents: {documents} (corpus {args.docs})")
    print(f"discover {1 / discover_seconds:,.0f} rows/s, bare {1 / bare_seconds:,.0f} rows/s, "
          f"ratio discover/bare time {discover_seconds / bare_seconds:.3f} (goal <= 1.3)")
    print(f"peak RSS: discover {max(r['peak_rss_mib'] for r in runs['discover']):.1f} MiB (goal < 200), "
          f"bare {max(r['peak_rss_mib'] for r in runs['bare']):.1f} MiB, court process {server_peak:.1f} MiB")
    pause = statistics.mean(load_default_pacing())
    last = runs["discover"][-1]
    print(f"document search: {last['requests']:,} requests for {documents:,} documents "
          f"({last['requests'] / max(1, documents):.4f} a document), projected "
          f"{projected_hours(last['requests'], pause):.2f} h at the default pacing ({pause:.2f} s) "
          f"+ {LATENCY_SECONDS} s latency a request")
    if args.skip_cases:
        return
    for label, options in (("captured shape", {}), ("every real-court behaviour on", REAL_COURT)):
        _case_walk(args, spawn, ready, stop, pause, label, options)


def _case_walk(args, spawn, ready, stop, pause: float, label: str, options: dict) -> None:
    server = spawn.Process(target=_serve, args=(args.docs, args.seed, ready, stop, "captured", options), daemon=True)
    stop.clear()
    server.start()
    try:
        walk = _run_worker("cases", ready.get(timeout=300))
        server_peak = _vm_hwm_mib(server.pid)
    finally:
        stop.set()
        server.join(timeout=10)
    floor = walk["floor"]
    floor_total = sum(floor.values())
    print(f"case walk ({label}): {walk['seconds']:.1f} s ({walk['first_sweep_seconds']:.1f} s the first sweep), "
          f"{walk['sweeps']} sweeps, {walk['documents']:,} documents (corpus {args.docs:,}), converged={walk['converged']}, "
          f"{walk['court_texts']:,} court texts, {walk['unavailable']:,} withheld files kept, "
          f"{walk['empty_entries']:,} empty file lists, {walk['asked_again']:,} file lists asked again, "
          f"{walk['opinion_rows']:,} opinion rows, {walk['foreign_rows']:,} neighbouring rows dropped, "
          f"peak RSS {walk['peak_rss_mib']:.1f} MiB, court process {server_peak:.1f} MiB")
    print(f"case walk ({label}) floor (one sweep): " + ", ".join(f"{name} {count:,}" for name, count in floor.items())
          + f" = {floor_total:,} requests")
    print(f"case walk ({label}) requests: first sweep {walk['first_sweep_requests']:,} "
          f"({walk['first_sweep_requests'] / floor_total:.4f} of the floor), "
          f"to convergence {walk['requests']:,} ({walk['requests'] - walk['first_sweep_requests']:,} more: "
          "the next sweep's case searches and open cases, file lists asked again, the closing opinion search)")
    for which, requests in (("first sweep", walk["first_sweep_requests"]), ("to convergence", walk["requests"])):
        print(f"case walk ({label}) {which}: {requests / max(1, walk['documents']):.3f} requests a document, "
              f"projected {projected_hours(requests, pause):.1f} h at the default pacing + {LATENCY_SECONDS} s "
              f"latency; {projected_hours(round(requests * FULL_CORPUS / max(1, walk['documents'])), pause):.1f} h "
              f"for {FULL_CORPUS:,} documents")


def load_default_pacing() -> tuple[float, float]:
    from notebook_builder.cells.c00_config import load_config
    return load_config(env={}).PACING_SEARCH


def projected_hours(requests: int, pause: float) -> float:
    return requests * (pause + LATENCY_SECONDS) / 3600


if __name__ == "__main__":
    main()
