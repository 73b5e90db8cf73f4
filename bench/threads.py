"""Benchmark: what a helper thread could take off each stage's main thread, at the pace a user sees.

    .venv/bin/python bench/threads.py [--docs 600] [--seed 1]

Discovery's commits of search rows, download's finishing of fetched PDFs
(fsync, promote, mirror, commit) and extract's saving of texts (text files,
mirror, commit) each ran in a thread of their own once, to overlap with the
next request or PDF. A thread can save at most the time of the work it
carries. This bench runs discover, download and extract once over a simulated
court (faults off, pacing off, in this process), times every call of each of
those three pieces of work, and sets that time per document beside what the
same document costs a user's real run at the default pacing (KY_PACING=1: the
pause before each request is drawn from PACING_DL per PDF, PACING_SEARCH per
search page of PAGE_SIZE rows) and, for extract, beside the stage's own wall
time per document here. Printed per piece of work: ms/document, the user's
seconds/document, the share of the user's time a thread could save (its upper
bound), and that in hours over the 98.7k-document corpus. The three threads
were removed on these figures (issue 15): none saves as much as 2%.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from notebook_builder.cells.c12_queues import WorkQueues

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")

CORPUS = 98_700


class Timed:
    """Wraps `owner.name` so every call's wall time is summed (calls come from any thread)."""

    def __init__(self, owner, name: str):
        self.owner, self.name, self.original = owner, name, getattr(owner, name)
        self.seconds, self.calls, self._lock = 0.0, 0, threading.Lock()
        original, timed = self.original, self

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with timed._lock:
                    timed.seconds += time.perf_counter() - started
                    timed.calls += 1
        setattr(owner, name, wrapper)

    def restore(self) -> None:
        setattr(self.owner, self.name, self.original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from notebook_builder.cells import c47_document_search, c50_discover, c70_download, c80_extract
    from notebook_builder.cells.c00_config import KNOBS, load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.simcourt import SimCourt

    defaults = {knob.name: knob.default for knob in KNOBS}
    pacing = defaults["PACING"]
    dl_pause = pacing * statistics.fmean(defaults["PACING_DL"])
    search_pause = pacing * statistics.fmean(defaults["PACING_SEARCH"]) / defaults["PAGE_SIZE"]

    court = SimCourt(docs=args.docs, seed=args.seed, faults=False)
    base = court.start()
    timers = {
        "discover commits": Timed(c47_document_search.DiscoveryWriter, "_write"),
        "download finishing": Timed(c70_download._DownloadGroup, "_finish"),
        "extract saving": Timed(c80_extract._ExtractPass, "_save"),
    }
    stage_seconds = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0", "KY_DISCOVERY": "documents",
                                   "KY_FIRST_YEAR": "1990", "KY_LAST_YEAR": "2026"},
                              WORKSPACE=f"{folder}/w", STORE=f"{folder}/s", API_BASE=base)
            ctx = open_context(cfg)
            ctx.open_database()
            for name, stage in (("discover", c50_discover.discover), ("download", c70_download.download),
                                ("extract", c80_extract.extract)):
                started = time.perf_counter()
                stage(ctx)
                stage_seconds[name] = time.perf_counter() - started
            documents = WorkQueues(ctx.db).document_count()
            downloaded = sum(WorkQueues(ctx.db).status_counts()[s] for s in ("downloaded", "extracted"))
            ctx.close()
    finally:
        for timer in timers.values():
            timer.restore()
        court.stop()

    request = {"discover commits": search_pause, "download finishing": dl_pause}
    per_doc = {"discover commits": documents, "download finishing": downloaded, "extract saving": downloaded}
    print(f"{documents} documents discovered, {downloaded} downloaded and extracted (simulated court, "
          f"pacing off); default pacing: {dl_pause:.3f} s before each PDF, "
          f"{search_pause * 1000:.2f} ms of search pause per row")
    print(f"{'work':18} {'work ms/doc':>11} {'user s/doc':>10} {'can save':>9} {'hours on 98.7k':>15}")
    for name, timer in timers.items():
        work = timer.seconds / max(1, per_doc[name])
        if name == "extract saving":
            user = stage_seconds["extract"] / max(1, downloaded)   # extract is not paced: its own time
            basis = "stage wall time here"
        else:
            user = request[name]
            basis = "pacing pause only"
        print(f"{name:18} {work * 1000:11.3f} {user:10.4f} {work / (user + work):9.2%} "
              f"{work * CORPUS / 3600:15.3f}   ({timer.calls} calls; user time = {basis})")


if __name__ == "__main__":
    main()
