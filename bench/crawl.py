"""Benchmark: time to a useful archive. The whole `run`'s requests, in order, old order against new.

    .venv/bin/python bench/crawl.py [--docs 98724] [--seed 1] [--only new|old]
    .venv/bin/python bench/crawl.py --court-system nevada [--seed 1] [--scale 1.0] [--no-details]

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

With `--court-system NAME` (a TR Portal system, nevada by default for this mode): the simulated TR
Portal court of that system at the real record's order (`real_counts`; `--scale` below 1 plans that
share of its cases and documents), no faults, recording every request in order, crawled to done
(PHASES=discover,download) by this tree at the default pacing on a virtual clock: every pause the
client decides is recorded, not slept, and each request starts at the pauses so far plus the real
answer times before it. Printed: requests against the court's floor (truth.py `floor`: case-search
pages at the largest page, one docket list and one access list a case, one GET a viewable document,
the opinion feed's pages; the details, a case's detail and parties, apart), the request at which the
first opinion arrives, whether every opinion came before any other document, the most requests begun
in any one second and the most in flight at once (politeness, from the client's pacing decisions),
the hours at the default pacing (the pauses as drawn + 0.25 s latency a request), and the archive
against the court's truth. The goals: <= 1.1 x the floor, the first opinion within 50 requests, every
opinion before any other document, never more than 4 requests a second, one at a time.
"""
from __future__ import annotations

import argparse
import collections
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


# ------------------------------------------------------------ a TR Portal court

TR_FLOOR_GOAL = 1.1
TR_FIRST_OPINION_GOAL = 50
TR_RATE_GOAL = 4
TR_TODAY = dt.date(2026, 10, 1)
TR_DETAILS = ("case", "parties")


def trportal_crawl(system: str, seed: int, scale: float, details: bool) -> dict:
    """Crawls the simulated court to done at the default pacing on a virtual clock (see the docstring)."""
    from notebook_builder.cells import c31_court_client
    from notebook_builder.cells.c00_config import RunClock, load_config
    from notebook_builder.cells.c95_run import run_pipeline
    from notebook_builder.simcourt import SimTRPortal
    from notebook_builder.simcourt.trportal.corpus import TRCorpus
    from notebook_builder.simcourt.trportal.systems import system_named

    class VirtualClock(RunClock):
        """Pauses recorded and added to a virtual time, not slept."""
        def __init__(self):
            super().__init__(10 ** 9, 0.0)
            self.virtual = 0.0

        def sleep(self, seconds: float) -> bool:
            self.virtual += max(0.0, seconds)
            return not self.stop_event.is_set()

    starts: list[float] = []
    in_flight = [0, 0]                   # now, most

    class TimedClient(c31_court_client.TRPortalClient):
        def _get(self, url, headers, **kwargs):
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            starts.append(self.clock.virtual)
            began = time.perf_counter()
            try:
                return super()._get(url, headers, **kwargs)
            finally:
                self.clock.virtual += time.perf_counter() - began
                in_flight[0] -= 1

    sizes = {}
    if scale < 1:
        planned = TRCorpus(system_named(system), seed=seed, today=TR_TODAY, real_counts=True)
        sizes = {"cases": max(1, round(planned.case_count * scale)), "docs": max(1, round(planned.doc_count * scale)),
                 "first_year": planned.first_year}
    c31_court_client.CLIENTS["trportal"] = TimedClient
    with SimTRPortal(system, seed=seed, today=TR_TODAY, real_counts=not sizes, record_requests=True, **sizes) as court, \
            tempfile.TemporaryDirectory(prefix="kycourt-trcrawl-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
        cfg = load_config(env={"KY_PROGRESS": "0"}, COURT_SYSTEM=system, WORKSPACE=f"{folder}/w", STORE=f"{folder}/s",
                          API_BASE=court.base_url, FIRST_YEAR=court.corpus.first_year, TODAY=TR_TODAY.isoformat(),
                          PHASES=("discover", "download"), CASE_DETAILS=details)
        clock = VirtualClock()
        started = time.perf_counter()
        report = run_pipeline(cfg, clock=clock, handle_signals=False)
        seconds = time.perf_counter() - started
        truth = court.truth(hashes=False)
        log = list(court.request_log)
        floor = court.floor(page_size=cfg.PAGE_SIZE)
        import sqlite3
        conn = sqlite3.connect(f"{folder}/w/ky_court.sqlite")
        held = {row[0]: row[1:] for row in conn.execute("SELECT document_id, sha256, access_state FROM documents")}
        conn.close()
    return {"system": system, "seconds": seconds, "exit_status": report.exit_status, "truth": truth, "log": log,
            "floor": floor, "starts": starts, "in_flight": in_flight[1], "virtual_hours": clock.virtual / 3600,
            "held": held, "cases": court.corpus.case_count, "first_year": court.corpus.first_year}


def trportal_report(run: dict) -> list[str]:
    truth, log, floor = run["truth"], run["log"], run["floor"]
    details = sum(endpoint in TR_DETAILS for endpoint, _ in log)
    archive = len(log) - details
    floor_total = floor["total"]
    downloads = [(number, item) for number, (endpoint, item) in enumerate(log, start=1) if endpoint == "download"]
    opinion_numbers = [number for number, item in downloads if truth[item].opinion]
    other_numbers = [number for number, item in downloads if not truth[item].opinion]
    first_opinion = opinion_numbers[0] if opinion_numbers else math.inf
    opinions_first = not opinion_numbers or not other_numbers or opinion_numbers[-1] < other_numbers[0]
    starts, busiest, low = sorted(run["starts"]), 0, 0
    for high, moment in enumerate(starts):
        while moment - starts[low] >= 1.0:
            low += 1
        busiest = max(busiest, high - low + 1)
    json_requests = len(log) - len(downloads)
    hours = run["virtual_hours"] + len(log) * LATENCY_SECONDS / 3600

    def hours_at(number: int) -> float:
        """Hours to the start of request `number` (1-based): the pauses drawn before it, its latency."""
        return (starts[number - 1] + number * LATENCY_SECONDS) / 3600 if number <= len(starts) else math.nan
    last_document = downloads[-1][0] if downloads else 0
    viewable = [t for t in truth if t.viewable]
    fetched = {item for _, item in downloads}
    missing = sum(t.document_id.lower() not in run["held"] for t in truth)
    unheld = sum(run["held"].get(t.document_id.lower(), (None,))[0] is None for t in viewable)
    asked_hidden = sum(not truth[item].viewable for item in fetched)
    endpoints = collections.Counter(endpoint for endpoint, _ in log)
    lines = [
        f"court: {run['system']} at the real record's order: {run['cases']:,} cases since {run['first_year']}, "
        f"{len(truth):,} documents ({len(viewable):,} viewable, {sum(t.opinion for t in truth):,} opinions); "
        f"run {run['seconds']:.0f} s, exit {run['exit_status']}",
        f"  requests: {len(log):,} ({details:,} details: " + ", ".join(f"{e} {endpoints[e]:,}" for e in TR_DETAILS)
        + "); by endpoint: " + ", ".join(f"{name} {count:,}" for name, count in sorted(endpoints.items())),
        f"  to a complete archive (details apart): {archive:,} requests against the floor {floor_total:,} ("
        + ", ".join(f"{k} {v:,}" for k, v in floor.items() if k != "total") + f"): {archive / floor_total:.3f} x",
        f"  first opinion: request {first_opinion}; every opinion before any other document: "
        f"{'yes' if opinions_first else 'NO'} (last opinion at request {opinion_numbers[-1] if opinion_numbers else '-'}, "
        f"first other document at request {other_numbers[0] if other_numbers else '-'})",
        f"  politeness (the client's pacing decisions at the default pacing): at most {busiest} requests begun in any "
        f"one second, at most {run['in_flight']} in flight",
        f"  hours at the default pacing: {hours:.1f} in all ({json_requests:,} JSON requests, {len(downloads):,} "
        f"downloads; the pauses as drawn, {run['virtual_hours']:.1f} h, + {LATENCY_SECONDS} s latency a request): "
        f"the first opinion at {hours_at(first_opinion) if opinion_numbers else math.nan:.2f} h, every opinion at "
        f"{hours_at(opinion_numbers[-1]) if opinion_numbers else math.nan:.1f} h, every document (request "
        f"{last_document:,}) at {hours_at(last_document) if last_document else math.nan:.1f} h",
        f"  the archive against the court's truth: {missing} documents missing, {unheld} viewable ones without bytes, "
        f"{asked_hidden} not-public ones asked for, {len(downloads) - len(fetched)} fetched twice",
    ]
    checks = [(f"requests <= {TR_FLOOR_GOAL} x the floor, details apart", archive <= TR_FLOOR_GOAL * floor_total),
              (f"the first opinion within {TR_FIRST_OPINION_GOAL} requests", first_opinion <= TR_FIRST_OPINION_GOAL),
              ("every opinion before any other document", opinions_first),
              (f"never more than {TR_RATE_GOAL} requests a second, one at a time",
               busiest <= TR_RATE_GOAL and run["in_flight"] == 1),
              ("every viewable document archived once, no other asked for",
               not missing and not unheld and not asked_hidden and len(downloads) == len(fetched))]
    return lines + [f"goal: {name}: {'met' if held else 'NOT MET'}" for name, held in checks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("old", "new"))
    parser.add_argument("--court-system", default="kentucky",
                        help="kentucky (the old order against the new), or a TR Portal system such as nevada")
    parser.add_argument("--scale", type=float, default=1.0, help="TR Portal: this share of the real record's order")
    parser.add_argument("--no-details", action="store_true", help="TR Portal: crawl without the details pass")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.court_system != "kentucky":
        print("\n".join(trportal_report(trportal_crawl(args.court_system, args.seed, args.scale,
                                                       not args.no_details))))
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
