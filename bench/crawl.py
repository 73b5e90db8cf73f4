"""Benchmark: time to a useful archive. The whole `run`'s requests, in order, old order against new.

    .venv/bin/python bench/crawl.py [--docs 98724] [--seed 1] [--only new|old]

The court: a simulated court of the captured shape at full scale (`real_counts`: 98,724 documents,
the real court's case counts per year, most cases with few or no public documents, opinions about
a fifth of the documents), its document search absent (the case walk is the way), no faults,
served in its own process and recording every request it answers, in order.

Against it, `kycourt-pipeline run` with PHASES=discover,download (the phases that ask the court;
the local ones ask nothing), pacing off, until the archive is complete, twice: the old order, the
code of OLD_COMMIT (main before issue 28, taken from git: discovery to convergence with each case's
parties and lower courts, then the downloads), and the new order, this tree (the crawl of c75).

Printed for each order: the requests to a complete archive (details apart) against the floor the
data sets (case-search pages of one sweep + one per case + one per docket entry with documents +
one per download), requests per document, and the hours projected at the default pacing (the mean
of PACING_SEARCH for a JSON request, of PACING_DL for a download) plus 0.25 s latency a request:
to the first PDF, to every opinion (the documents of the entries the opinion search lists), to every
document, to every detail (parties, lower courts). Then where the details fall against the last PDF,
and the share of the rest of the crawl (every request that is not the opinions' own: their search,
their entries' file lists, their downloads) made before the last opinion. The issue's goals are
checked on the new order.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

OLD_COMMIT = "27b792c64499a5a62021444c2de74a840cc6e92b"   # main before issue 28 (h24 and h29 merged)
FULL_CORPUS = 98_724
LATENCY_SECONDS = 0.25
FIRST_PDF_GOAL = 400             # requests: about 5 minutes of a first run
SESSION_HOURS = 10.0             # the default budget of a session
REST_SHARE_GOAL = 0.1            # the rest of the crawl made before the last opinion, at most
FLOOR_GOAL = 1.05                # requests to a complete archive against the floor, at most
JSON_ENDPOINTS_DETAILS = ("parties", "lowercourts")


# ------------------------------------------------------------------ the court


def _serve(docs: int, seed: int, ready, stop, figures) -> None:
    from notebook_builder.simcourt import SimCourt
    court = SimCourt(docs=docs, seed=seed, faults=False, shape="captured", document_search="absent",
                     real_counts=True, record_requests=True)
    ready.put(court.start())
    stop.wait()
    court.stop()
    figures.put(account(court))


def floor_of(court, page_size: int, last_year: int) -> dict[str, int]:
    """The requests the data sets: case-search pages of one sweep, one per case, one per docket entry
    with documents, one per download (details apart)."""
    from notebook_builder.cells.c25_court import KENTUCKY
    corpus = court.corpus
    pages = 0
    for shard in KENTUCKY.sweep_shards(corpus.first_year, last_year):
        cases = len(corpus.prefix_cases(shard))
        pages += max(1, math.ceil(min(cases, court.results_limit) / min(page_size, court.max_page)))
    return {"search pages": pages, "cases": len(corpus.case_keys), "entries with documents": len(set(corpus.doc_entry)),
            "downloads": corpus.size}


def account(court) -> dict:
    """The court's log read as a crawl: where the first PDF, the last opinion, the last PDF and the
    details fall, the hours to each, the rest of the crawl done before the last opinion."""
    from notebook_builder.cells.c00_config import load_config
    cfg = load_config(env={})
    pauses = {"json": sum(cfg.PACING_SEARCH) / 2, "download": sum(cfg.PACING_DL) / 2}
    corpus = court.corpus
    opinion = bytearray(corpus.size)
    for _, entry in corpus.opinion_entries():
        for doc in corpus.entry_docs(entry):
            opinion[doc] = 1
    hours = 0.0
    marks: dict[str, float | int] = {}
    downloaded: set[int] = set()
    opinions_left = sum(opinion)
    details = opinion_work = rest_before = 0
    for number, (endpoint, item) in enumerate(court.request_log, start=1):
        is_download = endpoint in ("download", "download_site")
        hours += (pauses["download" if is_download else "json"] + LATENCY_SECONDS) / 3600
        if endpoint in JSON_ENDPOINTS_DETAILS:
            details += 1
            marks.setdefault("first detail", number)
            marks["last detail"] = number
            marks["hours to every detail"] = hours
        opinion_request = (endpoint == "opinion_search" or (item >= 0 and opinion[item]
                                                            and (is_download or endpoint == "entry_documents")))
        opinion_work += opinion_request
        if opinions_left and not opinion_request:
            rest_before += 1
        if is_download and item >= 0 and item not in downloaded:
            downloaded.add(item)
            if "first PDF" not in marks:
                marks["first PDF"], marks["hours to first PDF"] = number, hours
            if opinion[item]:
                opinions_left -= 1
                if not opinions_left:
                    marks["every opinion"], marks["hours to every opinion"] = number, hours
            if len(downloaded) == corpus.size:
                marks["every document"], marks["hours to every document"] = number, hours
    total = len(court.request_log)
    floor = floor_of(court, load_config(env={}).PAGE_SIZE, corpus.last_year)
    return {"requests": total, "details": details, "opinion_work": opinion_work,
            "rest_before_last_opinion": rest_before, "rest": total - opinion_work, "marks": marks,
            "documents": corpus.size, "downloaded": len(downloaded), "opinions": sum(opinion),
            "cases": len(corpus.case_keys), "floor": floor, "hours": hours,
            "endpoints": dict(court.endpoint_requests)}


# ------------------------------------------------------------------ the run


def worker(tree: str, base_url: str, workspace: str) -> dict:
    """`run` with PHASES=discover,download, pacing off, from the package in `tree`."""
    sys.path.insert(0, tree)
    import notebook_builder
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c95_run import run_pipeline
    assert Path(notebook_builder.__file__).resolve().is_relative_to(Path(tree).resolve()), notebook_builder.__file__
    cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=f"{workspace}/w", STORE=f"{workspace}/s",
                      API_BASE=base_url, FIRST_YEAR=1990, LAST_YEAR=dt.date.today().year,
                      PHASES=("discover", "download"))
    started = time.perf_counter()
    report = run_pipeline(cfg, handle_signals=False)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 1), "exit_status": report.exit_status, "summary": report.summary()}


def old_tree(folder: Path) -> Path:
    """OLD_COMMIT's notebook_builder, from git, under `folder`."""
    archive = folder / "old.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), OLD_COMMIT,
                    "notebook_builder"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "old", filter="data")
    return folder / "old"


def measure(label: str, tree: Path, args) -> dict:
    spawn = multiprocessing.get_context("spawn")
    ready, stop, figures = spawn.Queue(), spawn.Event(), spawn.Queue()
    server = spawn.Process(target=_serve, args=(args.docs, args.seed, ready, stop, figures), daemon=True)
    server.start()
    scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="kycourt-crawl-", dir=scratch) as workspace:
        try:
            base_url = ready.get(timeout=600)
            output = subprocess.run([sys.executable, __file__, "--worker", str(tree), base_url, workspace],
                                    check=True, capture_output=True, text=True,
                                    env={**os.environ, "KY_PROGRESS": "0"}).stdout
            run = json.loads(output.strip().splitlines()[-1])
        finally:
            stop.set()
        court = figures.get(timeout=600)
        server.join(timeout=60)
    return {"label": label, "run": run, "court": court}


# ------------------------------------------------------------------ report


def report(measured: dict) -> list[str]:
    court, run = measured["court"], measured["run"]
    marks, floor = court["marks"], court["floor"]
    floor_total = sum(floor.values())
    archive = court["requests"] - court["details"]
    lines = [f"{measured['label']}: run {run['seconds']:.0f} s, exit {run['exit_status']}; "
             f"{court['downloaded']:,} of {court['documents']:,} documents downloaded, {court['requests']:,} requests "
             f"({court['details']:,} details); by endpoint: "
             + ", ".join(f"{name} {count:,}" for name, count in sorted(court["endpoints"].items()))]
    lines.append(f"  to a complete archive (details apart): {archive:,} requests, {archive / court['documents']:.3f} "
                 f"a document; floor {floor_total:,} (" + ", ".join(f"{k} {v:,}" for k, v in floor.items())
                 + f"): {archive / floor_total:.3f} of the floor")
    for name in ("first PDF", "every opinion", "every document"):
        if name in marks:
            lines.append(f"  {name}: request {marks[name]:,}, projected {marks['hours to ' + name]:.2f} h")
        else:
            lines.append(f"  {name}: never")
    if "first detail" in marks:
        after = marks["first detail"] > marks.get("every document", math.inf)
        lines.append(f"  details: requests {marks['first detail']:,}..{marks['last detail']:,}, "
                     f"{'after' if after else 'BEFORE'} the last PDF (request {marks.get('every document', 0):,}); "
                     f"every detail at {marks['hours to every detail']:.2f} h")
    share = court["rest_before_last_opinion"] / max(1, court["rest"])
    lines.append(f"  before the last opinion: {court['rest_before_last_opinion']:,} of the rest's {court['rest']:,} "
                 f"requests ({share:.3f}); the opinions' own work {court['opinion_work']:,} requests "
                 f"for {court['opinions']:,} opinions")
    return lines


def goals(new: dict) -> list[str]:
    court = new["court"]
    marks = court["marks"]
    floor_total = sum(court["floor"].values())
    archive = court["requests"] - court["details"]
    share = court["rest_before_last_opinion"] / max(1, court["rest"])
    checks = [
        (f"first PDF within {FIRST_PDF_GOAL} requests", marks.get("first PDF", math.inf) <= FIRST_PDF_GOAL),
        (f"every opinion within the first {SESSION_HOURS:g}-hour session",
         marks.get("hours to every opinion", math.inf) <= SESSION_HOURS),
        (f"every opinion before {REST_SHARE_GOAL:g} of the rest of the crawl", share < REST_SHARE_GOAL),
        (f"requests to a complete archive <= {FLOOR_GOAL} x the floor", archive <= FLOOR_GOAL * floor_total),
        ("the details pass after, never before, the documents",
         marks.get("first detail", math.inf) > marks.get("every document", math.inf)),
        ("every document downloaded", court["downloaded"] == court["documents"]),
    ]
    return [f"goal: {name}: {'met' if held else 'NOT MET'}" for name, held in checks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("old", "new"))
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    measured = []
    with tempfile.TemporaryDirectory(prefix="kycourt-old-") as folder:
        if args.only != "new":
            measured.append(measure(f"old order ({OLD_COMMIT[:7]})", old_tree(Path(folder)), args))
        if args.only != "old":
            measured.append(measure("new order (this tree)", REPO, args))
    print(f"court: {args.docs:,} documents (seed {args.seed}), captured shape, document search absent, "
          f"{measured[0]['court']['cases']:,} cases, {measured[0]['court']['opinions']:,} opinions; "
          f"hours at the default mean pacing + {LATENCY_SECONDS} s latency a request")
    for one in measured:
        print("\n".join(report(one)))
    if measured[-1]["label"].startswith("new"):
        print("\n".join(goals(measured[-1])))


if __name__ == "__main__":
    main()
