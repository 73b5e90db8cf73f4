"""Two versions of the search side by side: bench/search.py's 20 fixed queries, interleaved.

Each version is a source tree (its notebook_builder) with the index it built over the same
texts; each runs in a process of its own, and the driver asks them query by query in turn (the
order alternating each run), quiet and then with one spinning process per CPU, so both meet the
same load. Prints, per version, p50/p95 of wall time and of the querying thread's CPU time, and
per query the medians side by side with how many of the 20 hits both versions return.

    git archive main notebook_builder bench | tar -x -C /tmp/search-old       # the old tree
    (cd /tmp/search-old && python bench/search.py --workspace /tmp/kycourt-bench-search)
    cp /tmp/kycourt-bench-search/workspace/ky_search.sqlite /tmp/old-index.sqlite
    .venv/bin/python bench/search.py --workspace /tmp/kycourt-bench-search      # the new index
    .venv/bin/python bench/search_ab.py --old /tmp/search-old /tmp/old-index.sqlite \\
        --new . /tmp/kycourt-bench-search/workspace/ky_search.sqlite --workspace /tmp/kycourt-bench-search/workspace
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import QUERIES, every_core_busy, percentile  # noqa: E402

# A version's process: its tree's search_archive over its index, a JSON line per query.
WORKER = """
import json, sys, time
tree, index_path, workspace = sys.argv[1:4]
sys.path.insert(0, tree)
from notebook_builder.cells.c10_database import SearchDatabase
from notebook_builder.cells.c87_index import search_archive
sdb = SearchDatabase.open(index_path, readonly=True, text_root=workspace)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    wall, cpu = time.perf_counter(), time.thread_time()
    hits = search_archive(workspace, request["query"], limit=20, sdb=sdb, **request["filters"])
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"wall": wall, "cpu": cpu, "ids": [hit["document_id"] for hit in hits]}), flush=True)
"""


class Version:
    def __init__(self, name: str, tree: str, index_path: str, workspace: str):
        self.name = name
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(Path(tree).resolve()), index_path, workspace],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        json.loads(self.process.stdout.readline())

    def ask(self, query: str, filters: dict) -> dict:
        self.process.stdin.write(json.dumps({"query": query, "filters": filters}) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def phase(versions: list[Version], runs: int) -> dict[str, dict[str, list[dict]]]:
    """Every query `runs` times (after one warming run) on each version in turn."""
    answers: dict[str, dict[str, list[dict]]] = {version.name: {} for version in versions}
    for run in range(runs + 1):
        for query, filters in QUERIES:
            for version in (versions if run % 2 else versions[::-1]):
                answer = version.ask(query, filters)
                if run:
                    answers[version.name].setdefault(query + str(filters or ""), []).append(answer)
    return answers


def summary(answers: dict[str, list[dict]], field: str) -> str:
    values = [answer[field] for runs in answers.values() for answer in runs]
    return f"p50 {1000 * statistics.median(values):6.1f} ms, p95 {1000 * percentile(values, 0.95):6.1f} ms"


def median_ms(runs: list[dict], field: str) -> float:
    return 1000 * statistics.median(answer[field] for answer in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs=2, metavar=("TREE", "INDEX"), required=True)
    parser.add_argument("--new", nargs=2, metavar=("TREE", "INDEX"), required=True)
    parser.add_argument("--workspace", required=True, help="the texts both indexes were built from")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    versions = [Version("old", *args.old, args.workspace), Version("new", *args.new, args.workspace)]
    try:
        load = os.getloadavg()[0]
        quiet = phase(versions, args.runs)
        print(f"quiet (load average {load:.1f} before):")
        for version in versions:
            print(f"  {version.name}: wall {summary(quiet[version.name], 'wall')}; "
                  f"CPU {summary(quiet[version.name], 'cpu')}")
        load = os.getloadavg()[0]
        with every_core_busy() as burners:
            busy = phase(versions, args.runs)
        print(f"with {len(burners)} spinning processes (load average {load:.1f} before):")
        for version in versions:
            print(f"  {version.name}: wall {summary(busy[version.name], 'wall')} (goal: p95 < 50 ms); "
                  f"CPU {summary(busy[version.name], 'cpu')}")
        print("  CPU ms old, new; busy wall ms old, new (medians); hits both return; query")
        for key, old_runs in quiet["old"].items():
            new_runs = quiet["new"][key]
            same = len(set(old_runs[0]["ids"]) & set(new_runs[0]["ids"]))
            print(f"  {median_ms(old_runs, 'cpu'):7.1f} {median_ms(new_runs, 'cpu'):7.1f} "
                  f"{median_ms(busy['old'][key], 'wall'):8.1f} {median_ms(busy['new'][key], 'wall'):8.1f}  "
                  f"{same:>2}/{len(old_runs[0]['ids']):<2}  {key}")
    finally:
        for version in versions:
            version.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
