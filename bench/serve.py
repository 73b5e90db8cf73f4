"""Benchmark of `serve`: what a search page costs over the query alone, and a server that stays up.

On bench/search.py's synthetic corpus (98,724 documents by default), served
as `kycourt-pipeline serve` serves it (c98_search.start_serve: the search
page and Datasette in this process), over one keep-alive connection:
- the search page of bench/search.py's queries (its 20 and the others it
  asks: phrases of common words, case numbers, captions, pasted sentences;
  hits, the total and the four facets' counts) against `search_archive()`
  alone on the same index (the baseline: what `kycourt-pipeline search`
  asks), p50/p95 and their ratio, quiet and with every core busy (goal: the
  page's p95 <= 100 ms); /search.json the same way;
- the floor of the server, Datasette's /-/versions.json, and a document page;
- REQUESTS requests in a row (landing page, a document page, a search page,
  Datasette's JSON), all answered: the requests a second, and the hours a
  user would need to reach the count the old server froze at (about 720).

    .venv/bin/python bench/serve.py --docs 20000          # a quick run
    .venv/bin/python bench/serve.py                      # full scale (builds the corpus: minutes)
"""
from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import search as search_bench  # noqa: E402  (bench/search.py: the corpus and its queries)

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c06_layout import DB_FILENAME  # noqa: E402
from notebook_builder.cells.c10_database import Database  # noqa: E402
from notebook_builder.cells.c12_queues import WorkQueues  # noqa: E402
from notebook_builder.cells.c18_search_index import SearchIndex, open_search_index  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c87_index import index, search_archive  # noqa: E402
from notebook_builder.cells.c98_search import start_serve  # noqa: E402

REQUESTS = 3000
OLD_FREEZE = 720      # requests the old server answered before its pipe filled


def timed_get(connection: http.client.HTTPConnection, target: str) -> tuple[float, int]:
    started = time.perf_counter()
    connection.request("GET", target)
    response = connection.getresponse()
    response.read()
    return time.perf_counter() - started, response.status


def page_target(query: str, filters: dict, page: str = "/") -> str:
    """The search page's (or /search.json's) URL of a bench query; its `kind` is the page's `type`."""
    values = {"q": query, **{{"kind": "type"}.get(key, key): value for key, value in filters.items()}}
    return page + "?" + urllib.parse.urlencode(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=search_bench.FULL_SCALE)
    parser.add_argument("--workspace", default="/tmp/kycourt-bench-serve")
    args = parser.parse_args()
    root = Path(args.workspace)
    workspace = root / "workspace"
    if not (workspace / "corpus-bytes").is_file():
        workspace.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        search_bench.build_corpus(workspace, args.docs)
        search_bench.write_state(REPO, workspace, workspace / search_bench.CORPUS_ROWS)
        print(f"corpus: {args.docs} documents made in {time.monotonic() - started:.0f} s")
    cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(root / "store"), "KY_PROGRESS": "0"})
    if not SearchIndex.exists(workspace):
        ctx = open_context(cfg)
        started = time.monotonic()
        index(ctx)
        ctx.close()
        print(f"index built in {time.monotonic() - started:.0f} s")
    state = Database.open_readonly(workspace / DB_FILENAME)
    docs = WorkQueues(state).document_count()
    document_id = state.conn.execute("SELECT document_id FROM documents ORDER BY document_id LIMIT 1 OFFSET ?",
                                     (docs // 2,)).fetchone()[0]
    state.close()
    queries = list(search_bench.QUERIES) + search_bench.extra_queries(workspace, random.Random(5))

    def baseline_run() -> list[float]:
        seconds = []
        search = open_search_index(workspace)
        try:
            for _ in range(3):
                for query, filters in queries:
                    started = time.perf_counter()
                    search_archive(workspace, query, limit=20, search=search, **filters)
                    seconds.append(time.perf_counter() - started)
        finally:
            search.close()
        return seconds

    served = start_serve(cfg, 0)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=120)

        def pages_run(page: str) -> list[float]:
            for query, filters in queries:          # a warming run
                timed_get(connection, page_target(query, filters, page))
            return [timed_get(connection, page_target(query, filters, page))[0]
                    for _ in range(3) for query, filters in queries]
        load_quiet = os.getloadavg()[0]
        baseline, pages, answers = baseline_run(), pages_run("/"), pages_run("/search.json")
        load_busy = os.getloadavg()[0]
        with search_bench.every_core_busy():
            busy_baseline, busy_pages, busy_answers = baseline_run(), pages_run("/"), pages_run("/search.json")
        floor = [timed_get(connection, "/-/versions.json")[0] for _ in range(50)]
        document = [timed_get(connection, f"/document/{document_id}?q=restitution")[0] for _ in range(20)]
        targets = ("/", f"/document/{document_id}", page_target("suppression", {}), "/-/versions.json")
        started = time.perf_counter()
        statuses = [timed_get(connection, targets[number % len(targets)])[1] for number in range(REQUESTS)]
        run_seconds = time.perf_counter() - started
        connection.close()
    finally:
        served.stop()

    def ms(values: list[float], share: float) -> float:
        return 1000 * search_bench.percentile(values, share)

    print(f"documents: {docs}")
    for label, load, base, page, answer in (("quiet", load_quiet, baseline, pages, answers),
                                            ("every core busy", load_busy, busy_baseline, busy_pages, busy_answers)):
        print(f"{label} (load average {load:.1f} before), {len(queries)} queries x 3:")
        print(f"  search_archive alone (the baseline): p50 {ms(base, 0.5):.1f} ms, p95 {ms(base, 0.95):.1f} ms")
        print(f"  search page (hits, total, 4 facets) over HTTP: p50 {ms(page, 0.5):.1f} ms, p95 {ms(page, 0.95):.1f} ms "
              f"(goal <= 100 ms) = {statistics.median(page) / statistics.median(base):.1f}x / "
              f"{search_bench.percentile(page, 0.95) / search_bench.percentile(base, 0.95):.1f}x the baseline")
        print(f"  /search.json over HTTP: p50 {ms(answer, 0.5):.1f} ms, p95 {ms(answer, 0.95):.1f} ms")
    print(f"server floor (/-/versions.json): p50 {ms(floor, 0.5):.1f} ms; document page p50 {ms(document, 0.5):.1f} ms")
    answered = sum(1 for status in statuses if status == 200)
    print(f"{REQUESTS} requests in a row: {answered} answered 200 in {run_seconds:.1f} s "
          f"({REQUESTS / run_seconds:.0f} a second; the old server froze for good after about {OLD_FREEZE})")
    return 0 if answered == REQUESTS else 1


if __name__ == "__main__":
    raise SystemExit(main())
