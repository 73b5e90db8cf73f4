"""Two versions of the search side by side, on bench/search.py's queries, interleaved.

Each version is a source tree (its notebook_builder) and a workspace holding the index that tree
built over the same texts; each runs in a process of its own (bench/search.py's worker, which
speaks to either engine, FTS5 or tantivy), and the driver asks them query by query in turn (the
order alternating each run), quiet and then with one spinning process per CPU, so both meet the
same load. Prints, per version, p50/p95 of wall time and of the querying thread's CPU time, and
per query the medians side by side with how many of the 20 hits both versions return.
bench/search.py leaves both kinds of workspace behind: <root>/workspace (this tree's index) and
<root>/old-workspace (the old engine's, its tree in <root>/tree-<rev>).

    .venv/bin/python bench/search.py --workspace /tmp/kycourt-bench-search
    git archive HEAD~3 notebook_builder | tar -x -C /tmp/search-before    # another tree to compare
    .venv/bin/python bench/search_ab.py --old /tmp/search-before /tmp/before-workspace \\
        --new . /tmp/kycourt-bench-search/workspace
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import QUERIES, Version, extra_queries, percentile, quiet_then_busy  # noqa: E402


def summary(answers: dict[str, list[dict]], field: str) -> str:
    values = [answer[field] for runs in answers.values() for answer in runs]
    return f"p50 {1000 * statistics.median(values):6.1f} ms, p95 {1000 * percentile(values, 0.95):6.1f} ms"


def median_ms(runs: list[dict], field: str) -> float:
    return 1000 * statistics.median(answer[field] for answer in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs=2, metavar=("TREE", "WORKSPACE"), required=True)
    parser.add_argument("--new", nargs=2, metavar=("TREE", "WORKSPACE"), required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    queries = list(QUERIES) + extra_queries(Path(args.new[1]), random.Random(5))
    versions = [Version(name, Path(tree), Path(workspace), Path(workspace).parent / "store")
                for name, (tree, workspace) in (("old", args.old), ("new", args.new))]
    try:
        quiet, busy, loads, spinning = quiet_then_busy(versions, queries, args.runs)
        print(f"quiet (load average {loads['quiet']:.1f} before):")
        for version in versions:
            print(f"  {version.name} ({version.engine}): wall {summary(quiet[version.name], 'wall')}; "
                  f"CPU {summary(quiet[version.name], 'cpu')}")
        print(f"with {spinning} spinning processes (load average {loads['busy']:.1f} before):")
        for version in versions:
            print(f"  {version.name} ({version.engine}): wall {summary(busy[version.name], 'wall')} (goal: p95 <= 50 ms); "
                  f"CPU {summary(busy[version.name], 'cpu')}")
        print("  CPU ms old, new; busy wall ms old, new (medians); hits both return; query")
        for key, old_runs in quiet["old"].items():
            new_runs = quiet["new"][key]
            same = len(set(old_runs[0]["ids"]) & set(new_runs[0]["ids"]))
            print(f"  {median_ms(old_runs, 'cpu'):7.1f} {median_ms(new_runs, 'cpu'):7.1f} "
                  f"{median_ms(busy['old'][key], 'wall'):8.1f} {median_ms(busy['new'][key], 'wall'):8.1f}  "
                  f"{same:>2}/{len(old_runs[0]['ids']):<2}  {key[:80]}")
    finally:
        for version in versions:
            version.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
