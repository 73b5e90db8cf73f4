"""Benchmark: an update a month after a complete crawl, against its floor and a full re-walk.

    .venv/bin/python bench/update.py [--docs 98724] [--seed 1] [--advance-seed 1] [--days 30] [--results-limit N]

The court: a simulated court of the captured shape (`real_counts`, as bench/crawl.py: 98,724 documents
at full scale, the real court's case counts per year), its document search absent (the case walk is
the way), no faults, its day 2026-06-01, its results limit 10,000 (`--results-limit`: a smaller one
splits shards, as the court's does its largest), in this process, recording every request in order.
Against it, `kycourt-pipeline run` with PHASES=discover,download and pacing off, in a process of its own,
until the archive is complete (KY_TODAY: the court's day); then the court moves `--days` on with a
month of the real court's activity (living.py: new cases, filings in open cases of many years,
opinions, a reopened 2019 case, withdrawals, a restoration, retitled cases), and one more run, the
update (KY_TODAY: the court's new day).

Printed: the update's requests by endpoint against its floor (living.update_floor: one pass of the
case search + the opinion windows since the last crawl + a docket-entry list per open or changed
case + a file list per new entry with documents and per entry with documents of a changed case +
a download per new document; the details pass, the parties and lower courts of new and changed
cases, is counted apart) and against a full re-walk (every case's docket entries and every entry's
file list again); the hours projected at the default pacing (the mean of PACING_SEARCH a JSON
request, of PACING_DL a download, plus 0.25 s latency a request); the hours into the update when
the month's last new opinion was archived; and the changes recorded against the plan. The issue's
goals are checked.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FULL_CORPUS = 98_724
DAY = dt.date(2026, 6, 1)
LATENCY_SECONDS = 0.25
FLOOR_GOAL = 1.1                 # the update's requests (details apart) against its floor, at most
OPINIONS_GOAL_HOURS = 10 / 60    # the month's new opinions archived within the update's first 10 minutes
SESSION_HOURS = 10.0             # the default budget of a session: the whole update within one
DETAILS = ("parties", "lowercourts")


def run(base_url: str, workspace: str, today: dt.date) -> dict:
    """One `run` (discover, download) in a process of its own; its summary and exit status."""
    code = ("import json, sys\n"
            "from notebook_builder.cells.c00_config import load_config\n"
            "from notebook_builder.cells.c95_run import run_pipeline\n"
            "base, workspace, today = sys.argv[1:]\n"
            "cfg = load_config(env={'KY_PACING': '0', 'KY_PROGRESS': '0', 'KY_TODAY': today},"
            " WORKSPACE=workspace + '/w', STORE=workspace + '/s', API_BASE=base, FIRST_YEAR=1990, LAST_YEAR=2026,"
            " PHASES=('discover', 'download'))\n"
            "report = run_pipeline(cfg, handle_signals=False)\n"
            "print(json.dumps({'exit_status': report.exit_status, 'summary': report.summary()}))\n")
    started = time.perf_counter()
    output = subprocess.run([sys.executable, "-c", code, base_url, workspace, today.isoformat()], check=True,
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "KY_PROGRESS": "0"}).stdout
    return {**json.loads(output.strip().splitlines()[-1]), "seconds": round(time.perf_counter() - started, 1)}


def hours_of(log, start: int) -> list[float]:
    """The hours at the default pacing (+ latency) after each request of the log from `start` on."""
    from notebook_builder.cells.c00_config import load_config
    cfg = load_config(env={})
    json_pause, download_pause = sum(cfg.PACING_SEARCH) / 2, sum(cfg.PACING_DL) / 2
    hours, total = [], 0.0
    for number, (endpoint, _) in enumerate(log):
        if number < start:
            continue
        total += (download_pause if endpoint in ("download", "download_site") else json_pause) + LATENCY_SECONDS
        hours.append(total / 3600)
    return hours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--advance-seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--results-limit", type=int, default=10_000)
    args = parser.parse_args()
    from notebook_builder.cells.c25_court import KENTUCKY
    from notebook_builder.simcourt import SimCourt, update_floor

    court = SimCourt(docs=args.docs, seed=args.seed, faults=False, shape="captured", document_search="absent",
                     real_counts=True, record_requests=True, today=DAY, results_limit=args.results_limit)
    scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with court, tempfile.TemporaryDirectory(prefix="kycourt-update-", dir=scratch) as workspace:
        started = time.perf_counter()
        for session in range(1, 6):
            run(court.base_url, workspace, DAY)
            status = json.loads((Path(workspace) / "w" / "status.json").read_text())
            if status["discovery_converged"] and not status["queues"]["download"]:
                break
        crawl_requests = len(court.request_log)
        print(f"court: {args.docs:,} documents (seed {args.seed}), {len(court.corpus.case_keys):,} cases; first crawl: "
              f"{session} runs, {crawl_requests:,} requests, {time.perf_counter() - started:.0f} s; complete through "
              f"{status['complete_through']}")
        opinions_from = dt.date.fromisoformat(status["complete_through"]) - dt.timedelta(days=7)
        plan = court.advance(args.days, seed=args.advance_seed)
        print(f"advance: {args.days} days (seed {args.advance_seed}) to {plan['today']}: " + ", ".join(
            f"{name} {count:,}" for name, count in plan["counts"].items()))
        floor = update_floor(court.corpus, [plan], KENTUCKY.sweep_shards(1990, 2026), page_size=500,
                             opinions_from=opinions_from, results_limit=args.results_limit)
        update = run(court.base_url, workspace, dt.date.fromisoformat(plan["today"]))
        log = list(court.request_log)[crawl_requests:]
        endpoints: dict[str, int] = {}
        for endpoint, _ in log:
            endpoints[endpoint] = endpoints.get(endpoint, 0) + 1
        details = sum(endpoints.get(name, 0) for name in DETAILS)
        requests = len(log) - details
        floor_total = sum(floor.values())
        corpus = court.corpus
        rewalk = (floor["case search pages"] + floor["opinion search pages"] + len(corpus.case_keys)
                  + len(set(corpus.doc_entry)) + floor["downloads"])
        hours = hours_of(court.request_log, crawl_requests)
        opinions = {court.corpus.find_document(item["document_id"]) for item in plan["added"] if item["opinion"]}
        last_opinion = max((number for number, (endpoint, item) in enumerate(log)
                            if endpoint == "download" and item in opinions), default=None)
        db = sqlite3.connect(Path(workspace) / "w" / "ky_court.sqlite")
        changes = db.execute("SELECT change, COUNT(*) FROM changes GROUP BY change").fetchall()
        recorded = {kind: {row[0] for row in db.execute("SELECT document_id FROM changes WHERE change = ?", (kind,))}
                    for kind in ("added", "withdrawn", "restored", "changed")}
        last = json.loads(dict(db.execute("SELECT key, value FROM kv")).get("last_update") or "{}")
        db.close()
    print(f"update: run {update['seconds']:.0f} s, exit {update['exit_status']}; {len(log):,} requests ({details:,} "
          "details); by endpoint: " + ", ".join(f"{name} {count:,}" for name, count in sorted(endpoints.items())))
    print(f"  against its floor {floor_total:,} (" + ", ".join(f"{name} {count:,}" for name, count in floor.items())
          + f"): {requests:,} requests (details apart), {requests / floor_total:.3f} of the floor")
    print(f"  against a full re-walk ({rewalk:,} requests): {requests / rewalk:.3f}")
    print(f"  projected at the default pacing: {hours[-1] if hours else 0:.2f} h in all; the month's "
          f"{len(opinions)} new opinions archived at request {last_opinion + 1 if last_opinion is not None else '-'}"
          f", {hours[last_opinion] * 60 if last_opinion is not None else math.nan:.1f} min into the update")
    print("  changes recorded: " + ", ".join(f"{kind} {count:,}" for kind, count in changes)
          + f"; last_update: {last.get('words')}")
    judged = {kind: recorded[kind] == {item["document_id"] for item in plan[kind]} for kind in
              ("added", "withdrawn", "restored", "changed")}
    checks = [
        (f"requests <= {FLOOR_GOAL} x the floor", requests <= FLOOR_GOAL * floor_total),
        ("the month's new opinions archived within the update's first 10 minutes",
         last_opinion is not None and hours[last_opinion] <= OPINIONS_GOAL_HOURS),
        (f"the whole update within one {SESSION_HOURS:g}-hour session", bool(hours) and hours[-1] <= SESSION_HOURS),
        ("every change of the plan recorded, none more: " + ", ".join(
            f"{kind} {'yes' if held else 'NO'}" for kind, held in judged.items()), all(judged.values())),
        ("complete through the court's day", last.get("through") == plan["today"]),
    ]
    print("\n".join(f"goal: {name}: {'met' if held else 'NOT MET'}" for name, held in checks))


if __name__ == "__main__":
    main()
