"""Benchmark of the query layer on a full-scale synthetic corpus.

98,724 documents by default (the archive's size), texts drawn like real
opinions (log-normal lengths, median 15 KB, clipped to 5-60 KB; legal
prose in a Zipf-like mix; each document has a topic and uses a few of its
phrases; party names and rare words per document).
Prints: the index build in seconds, MB/s and documents/s against reading
the same texts (the baseline: the build cannot beat the disk), an
incremental run with nothing to do, the index size as a ratio of the text
(goal <= 0.6: the index keeps no copy of the texts), p50/p95 of 20 fixed
queries (snippets included) on a quiet machine and with every core busy
(one spinning process per CPU beside the queries; goal: p95 < 50 ms), in
wall time and in the CPU time of the querying thread (what the code costs,
whatever else the machine runs), with the load average before each phase,
the cores the spinners used and the share of a core the queries got;
filtered counts and every-match rankings (what `search --rank-all`, the CLI's
total and the web page's counts run), against one grep-style scan of every
text (what a user had before), `show` p50/p95, and the state snapshot's size
before and after.

    .venv/bin/python bench/search.py                      # full scale, corpus in /tmp/kycourt-bench-search
    .venv/bin/python bench/search.py --docs 5000          # a quick run
    .venv/bin/python bench/search.py --workspace DIR      # keep or reuse a corpus
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c06_layout import DB_FILENAME, SEARCH_DB_FILENAME  # noqa: E402
from notebook_builder.cells.c10_database import Database  # noqa: E402
from notebook_builder.cells.c12_queues import WorkQueues  # noqa: E402
from notebook_builder.cells.c17_snapshots import checkpoint  # noqa: E402
from notebook_builder.cells.c18_search_index import SEARCH_RANK_CAP, SearchDatabase  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c33_best_text import record_text_sources  # noqa: E402
from notebook_builder.cells.c87_index import index, search_archive  # noqa: E402
from notebook_builder.query import show_document  # noqa: E402

FULL_SCALE = 98_724
# Every document has a topic; of its topic's phrases it uses a handful, as an opinion does, so a
# topical word is in a share of the documents (not in all of them, as a single Zipf mix would do).
TOPICS = {   # topic: (share of documents, phrases)
    "criminal": (0.40, ("motion to suppress", "suppression hearing", "search warrant", "probable cause",
                        "ineffective assistance of counsel", "double jeopardy", "jury instruction", "murder",
                        "burglary", "robbery", "restitution", "persistent felony offender", "RCr 11.42",
                        "palpable error", "Miranda warnings", "sentencing", "directed verdict")),
    "family": (0.12, ("child custody", "visitation", "dissolution of marriage", "maintenance", "child support",
                      "best interests of the child", "termination of parental rights", "domestic violence order")),
    "workers": (0.10, ("workers compensation", "permanent partial disability", "Administrative Law Judge",
                       "Workers Compensation Board", "impairment rating", "vocational rehabilitation")),
    "torts": (0.15, ("negligence", "summary judgment", "damages", "sovereign immunity", "proximate cause",
                     "medical malpractice", "comparative fault", "premises liability", "statute of limitations")),
    "contracts": (0.08, ("breach of contract", "specific performance", "unjust enrichment", "promissory estoppel",
                         "summary judgment", "damages", "arbitration clause")),
    "public": (0.10, ("unemployment insurance", "zoning", "habeas corpus", "due process", "open records",
                      "administrative agency", "substantial evidence", "equal protection")),
    "bar": (0.05, ("attorney discipline", "suspended from the practice of law", "Kentucky Bar Association",
                   "Rules of Professional Conduct", "public reprimand")),
}
GENERAL = ("the trial court", "the Commonwealth", "the appellant", "the appellee", "we affirm",
           "we reverse and remand", "abuse of discretion", "the record", "the evidence", "the statute",
           "KRS", "testimony", "clearly erroneous", "de novo review", "circuit court", "harmless error")
COMMON = ("the of and to in a that is for was on as by with it this be not court appeal order which "
          "are from or have had an at his her their were been would argues held finds under").split()
SYLLABLES = "ka ri mo te lu sa ve no di pa ro mi ta ne lo fe gu ba si ze".split()
SURNAMES = ("SMITH JOHNSON WILLIAMS BROWN JONES MILLER DAVIS WILSON ANDERSON TAYLOR THOMAS MOORE JACKSON "
            "MARTIN LEE THOMPSON WHITE HARRIS CLARK LEWIS ROBINSON WALKER YOUNG ALLEN KING WRIGHT SCOTT HILL "
            "GREEN ADAMS BAKER NELSON CARTER MITCHELL ROBERTS TURNER PHILLIPS CAMPBELL PARKER EVANS EDWARDS "
            "COLLINS STEWART MORRIS ROGERS REED COOK MORGAN BELL MURPHY BAILEY COOPER HOWARD WARD COX").split()
DESCRIPTIONS = ("OPINION AFFIRMING", "OPINION REVERSING AND REMANDING", "ORDER DENYING DISCRETIONARY REVIEW",
                "MEMORANDUM OPINION AND ORDER", "ORDER DISMISSING APPEAL", "OPINION AND ORDER")
def rare_token(number: int) -> str:
    """A word that about 20 documents hold (a party, a place, an exhibit)."""
    return "q" + hashlib.md5(str(number // 20).encode()).hexdigest()[:7]


QUERIES = (   # what researchers ask; the last-but-one is a generic word, the worst case
    ("suppression", {}), ('"ineffective assistance of counsel"', {}), ('"due process"', {}),
    ("warrant AND suppress*", {}), ("custody OR visitation", {}), ("NEAR(summary judgment, 5)", {}),
    ("neglig*", {}), ('"sovereign immunity"', {}), ('"palpable error"', {}), ('"workers compensation"', {}),
    ("restitution NOT murder", {}), ('"persistent felony offender"', {"court": "SC"}), ("cooper", {}),
    (rare_token(50_000), {}), ('"double jeopardy"', {"court": "SC"}), ("restitution", {"year": 2015}),
    ('"habeas corpus"', {"court": "CA", "year": 2020}), ('"abuse of discretion"', {"kind": "ORDER"}),
    ("commonwealth", {}), ("court", {"court": "SC", "year": 2010}),
)


def text_length(rng: random.Random) -> int:
    return int(min(60_000, max(5_000, rng.lognormvariate(math.log(15_000), 0.6))))


def make_pool(rng: random.Random, words: int) -> str:
    """General opinion prose: function words, general legal phrases and a long tail of rarer words."""
    rare = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 5))) for _ in range(20000)]
    vocabulary = list(COMMON) + list(GENERAL) + rare
    weights = [1.0 / (rank + 1) ** 1.0 for rank in range(len(vocabulary))]
    tokens = rng.choices(vocabulary, weights, k=words)
    sentences, start = [], 0
    while start < len(tokens):
        size = rng.randint(8, 30)
        sentence = " ".join(tokens[start:start + size])
        sentences.append(sentence[:1].upper() + sentence[1:] + ".")
        start += size
    return " ".join(sentences)


def build_corpus(workspace: Path, docs: int, seed: int = 17) -> int:
    """Writes the state database (every document extracted) and the texts; returns the text bytes."""
    rng = random.Random(seed)
    pool = make_pool(rng, 3_000_000)
    topic_names = list(TOPICS)
    topic_weights = [TOPICS[name][0] for name in topic_names]
    text_dir = workspace / "text"
    text_dir.mkdir(parents=True, exist_ok=True)
    db = Database.open(workspace / DB_FILENAME)
    total, rows = 0, []
    for number in range(docs):
        year = 1990 + number * 37 // docs
        court = "SC" if number % 4 == 0 else "CA"
        case_number = f"{year}-{court}-{number % 9000:04d}"
        title = f"{rng.choice(SURNAMES)} VS. {rng.choice(SURNAMES + ['COMMONWEALTH'] * 20)}"
        description = rng.choice(DESCRIPTIONS)
        length = text_length(rng)
        parts = [f"{'SUPREME COURT OF KENTUCKY' if court == 'SC' else 'COMMONWEALTH OF KENTUCKY COURT OF APPEALS'}\n"
                 f"NO. {case_number}\n{title}\n{description}\n"]
        size = len(parts[0])
        topic = rng.choices(topic_names, topic_weights)[0]
        phrases = rng.sample(TOPICS[topic][1], k=min(len(TOPICS[topic][1]), rng.randint(2, 6)))
        while size < length:
            start = rng.randrange(0, len(pool) - 4000)
            piece = pool[start:start + rng.randint(1500, 4000)]
            piece += " " + " ".join(rng.choice(phrases) for _ in range(rng.randint(1, 4))).capitalize() + ".\n"
            parts.append(piece)
            size += len(piece)
        parts.append(" ".join(rng.choice(SURNAMES).title() for _ in range(3)) + f" {rare_token(number)}")
        text = "".join(parts).encode("utf-8")
        sha = hashlib.sha256(f"bench-{seed}-{number}".encode()).hexdigest()
        (text_dir / f"{sha}.txt").write_bytes(text)
        total += len(text)
        document_id = hashlib.sha256(f"bench-document-{number}".encode()).hexdigest()
        court_name = "Kentucky Supreme Court" if court == "SC" else "Kentucky Court of Appeals"
        rows.append((document_id, case_number, court_name,
                     title, hashlib.sha256(f"entry-{number}".encode()).hexdigest(), description,
                     f"{year}-{1 + number % 12:02d}-{1 + number % 28:02d}T00:00:00.000-04:00", "extracted", 1, 200,
                     sha, len(text) // 3, f"pdf_by_hash/{sha}.pdf", 1 + len(text) // 3000, len(text), 0, 1,
                     f"{case_number} opinion.pdf", case_number[:7]))
    with db.transaction():
        db.conn.executemany(
            "INSERT INTO documents(document_id, case_number, court, case_title, docket_entry_id, description, "
            "filed_date, status, attempts, http_status, sha256, size_bytes, local_pdf, pages, extracted_chars, "
            "likely_scanned, extract_attempts, document_name, shard) VALUES "
            f"({', '.join('?' * 19)})", rows)
    db.close()
    (workspace / "corpus-bytes").write_text(str(total))
    return total


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def every_core_busy() -> Iterator[list[multiprocessing.Process]]:
    """One spinning process per CPU, started a second before the block and killed after it."""
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
    for burner in burners:
        burner.start()
    try:
        time.sleep(1.0)
        yield burners
    finally:
        for burner in burners:
            burner.kill()
            burner.join()


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used (0 where /proc cannot say)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy (not idle, not waiting), from /proc/stat."""
    try:
        values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Timings:
    """Per query key, its wall and CPU (the querying thread's) seconds of each run."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def add(self, key: str, wall: float, cpu: float) -> None:
        self.wall.setdefault(key, []).append(wall)
        self.cpu.setdefault(key, []).append(cpu)

    @staticmethod
    def every(values: dict[str, list[float]], skip: int = 0) -> list[float]:
        return [value for runs in values.values() for value in runs[skip:]]

    @staticmethod
    def summary(values: list[float]) -> str:
        return (f"p50 {1000 * statistics.median(values):.1f} ms, p95 {1000 * percentile(values, 0.95):.1f} ms, "
                f"max {1000 * max(values):.1f} ms")


def timed_queries(workspace: Path, sdb, runs: int) -> tuple[Timings, dict[str, int], dict[str, bool]]:
    """Each of QUERIES `runs` times: (its timings, hits, whether its ranking was capped)."""
    timings = Timings()
    hits_of: dict[str, int] = {}
    capped_of: dict[str, bool] = {}
    for _ in range(runs):
        for query, filters in QUERIES:
            key = query + str(filters or "")
            wall, cpu = time.perf_counter(), time.thread_time()
            hits = search_archive(workspace, query, limit=20, sdb=sdb, **filters)
            timings.add(key, time.perf_counter() - wall, time.thread_time() - cpu)
            hits_of[key] = len(hits)
            capped_of[key] = bool(hits and hits[0]["rank_capped"])
    return timings, hits_of, capped_of


def busy_phase(workspace: Path, sdb, runs: int) -> tuple[Timings, dict[str, float]]:
    """timed_queries with one spinning process per CPU beside them; what the machine did meanwhile:
    the load average before, the cores the spinners used, the cores busy in all, the share of a
    core the querying process got."""
    load_before = os.getloadavg()[0]
    with every_core_busy() as burners:
        spun = sum(process_cpu_seconds(burner.pid) for burner in burners)
        machine, own, started = machine_busy_seconds(), time.process_time(), time.perf_counter()
        timings, _, _ = timed_queries(workspace, sdb, runs)
        seconds = time.perf_counter() - started
        spun = sum(process_cpu_seconds(burner.pid) for burner in burners) - spun
        machine = machine_busy_seconds() - machine
        own = time.process_time() - own
    return timings, {"load_before": load_before, "spinners": spun / seconds, "machine": machine / seconds,
                     "queries": own / seconds, "spinning": len(burners)}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_SCALE)
    parser.add_argument("--workspace", default="/tmp/kycourt-bench-search")
    parser.add_argument("--fresh", action="store_true", help="rebuild the corpus")
    args = parser.parse_args()
    root = Path(args.workspace)
    workspace, store = root / "workspace", root / "store"
    if args.fresh and root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    if not (workspace / "corpus-bytes").is_file():
        workspace.mkdir(parents=True, exist_ok=True)
        text_bytes = build_corpus(workspace, args.docs)
        print(f"corpus: {args.docs} documents, {text_bytes / 1e6:.0f} MB of text, made in "
              f"{time.monotonic() - started:.0f} s")
    else:
        text_bytes = int((workspace / "corpus-bytes").read_text())
        print(f"corpus: reused {workspace} ({text_bytes / 1e6:.0f} MB of text)")
    for name in (SEARCH_DB_FILENAME, SEARCH_DB_FILENAME + "-wal", SEARCH_DB_FILENAME + "-shm"):
        (workspace / name).unlink(missing_ok=True)
    shutil.rmtree(store, ignore_errors=True)
    cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(store), "KY_PROGRESS": "0"})
    state = Database.open(workspace / DB_FILENAME)
    docs = WorkQueues(state).document_count()
    record_text_sources(state, cfg.MIN_TEXT_QUALITY)   # as derive, before the index, records them in a run
    state.close()

    before = checkpoint(workspace / DB_FILENAME, root / "snapshot-before.sqlite")
    snapshot_before = os.path.getsize(before["path"])

    read_started = time.monotonic()        # baseline: reading every text once
    read_bytes = sum(len(path.read_bytes()) for path in (workspace / "text").glob("*.txt"))
    read_seconds = time.monotonic() - read_started

    ctx = open_context(cfg)
    build_started = time.monotonic()
    result = index(ctx)
    build_seconds = time.monotonic() - build_started
    ctx.close()
    ctx = open_context(cfg)
    again_started = time.monotonic()
    again = index(ctx)
    again_seconds = time.monotonic() - again_started
    ctx.close()

    after = checkpoint(workspace / DB_FILENAME, root / "snapshot-after.sqlite")
    snapshot_after = os.path.getsize(after["path"])
    index_bytes = os.path.getsize(workspace / SEARCH_DB_FILENAME)

    sdb = SearchDatabase.open(workspace / SEARCH_DB_FILENAME, readonly=True)
    load_quiet = os.getloadavg()[0]
    timings, hits_of, capped_of = timed_queries(workspace, sdb, 6)
    busy_timings, machine = busy_phase(workspace, sdb, 5)
    every_match = {}     # the generic word again, every match ranked; a filtered one; a filtered count
    for label, run in (("commonwealth with every match ranked (--rank-all)",
                        lambda: search_archive(workspace, "commonwealth", limit=20, sdb=sdb, rank_all=True)),
                       ('"double jeopardy" in SC with every match ranked (--rank-all --court SC)',
                        lambda: search_archive(workspace, '"double jeopardy"', court="SC", limit=20, sdb=sdb,
                                               rank_all=True)),
                       ('"persistent felony offender" in SC counted (the CLI\'s total, the web page\'s)',
                        lambda: sdb.match_count('"persistent felony offender"', court_code="SC"))):
        seconds = []
        for _ in range(3):
            query_started = time.perf_counter()
            run()
            seconds.append(time.perf_counter() - query_started)
        every_match[label] = statistics.median(seconds)
    sdb.close()
    first = [values[0] for values in timings.wall.values()]
    warm, warm_cpu = Timings.every(timings.wall, 1), Timings.every(timings.cpu, 1)
    busy, busy_cpu = Timings.every(busy_timings.wall), Timings.every(busy_timings.cpu)

    indexed_word = timings.wall["suppression"][1:]
    grep_started = time.monotonic()        # baseline: what a user had, a scan of every text
    grep_hits = sum(1 for path in (workspace / "text").glob("*.txt") if b"suppression" in path.read_bytes().lower())
    grep_seconds = time.monotonic() - grep_started

    state = Database.open(workspace / DB_FILENAME)
    some = [row[0] for row in state.conn.execute(
        "SELECT document_id FROM documents ORDER BY document_id LIMIT 20 OFFSET ?", (docs // 2,))]
    some_cases = [row[0] for row in state.conn.execute(
        "SELECT DISTINCT case_number FROM documents ORDER BY case_number LIMIT 5 OFFSET ?", (docs // 3,))]
    state.close()
    from notebook_builder.cells.c20_store import LocalStore
    local_store = LocalStore(store)
    show_times = []
    for identifier in some + some_cases:
        show_started = time.perf_counter()
        show_document(cfg, identifier, store=local_store)
        show_times.append(time.perf_counter() - show_started)

    megabytes = result.text_bytes / 1e6
    print(f"documents: {docs}; text {text_bytes / 1e6:.0f} MB (mean {text_bytes / max(docs, 1) / 1e3:.1f} KB)")
    print(f"baseline read of every text: {read_bytes / 1e6 / read_seconds:.0f} MB/s ({read_seconds:.1f} s)")
    print(f"index build: {build_seconds:.1f} s, {megabytes / build_seconds:.1f} MB/s, "
          f"{result.indexed / build_seconds:.0f} docs/s ({read_seconds / build_seconds:.3f}x the baseline read; "
          f"optimized={result.optimized}, pushed={result.pushed})")
    print(f"incremental run with nothing new: {again_seconds:.2f} s (indexed {again.indexed}, "
          f"refreshed {again.refreshed}, pushed {again.pushed})")
    print(f"index size: {index_bytes / 1e6:.0f} MB = {index_bytes / text_bytes:.2f}x the text (goal <= 0.6)")
    print(f"state snapshot: {snapshot_before} bytes before, {snapshot_after} after "
          f"({100 * (snapshot_after - snapshot_before) / snapshot_before:+.2f}%)")
    print(f"queries (20 fixed, 5 warm runs each; load average {load_quiet:.1f} before): {Timings.summary(warm)}; "
          f"CPU {Timings.summary(warm_cpu)}; first run p50 {1000 * statistics.median(first):.1f} ms, "
          f"p95 {1000 * percentile(first, 0.95):.1f} ms")
    print(f"queries with every core busy ({machine['spinning']} spinning processes using {machine['spinners']:.2f} "
          f"cores, {machine['machine']:.2f} of {os.cpu_count()} cores busy in all, the queries got "
          f"{machine['queries']:.2f} of a core; load average {machine['load_before']:.1f} before): "
          f"{Timings.summary(busy)} (goal: p95 < 50 ms); CPU {Timings.summary(busy_cpu)}")
    print("  wall ms, busy wall ms, CPU ms (medians), hits, query")
    for key, values in timings.wall.items():
        print(f"  {1000 * statistics.median(values[1:]):7.1f} {1000 * statistics.median(busy_timings.wall[key]):7.1f} "
              f"{1000 * statistics.median(timings.cpu[key][1:]):7.1f}  {hits_of[key]:>3}  {key}"
              f"{f'  (ranked among the {SEARCH_RANK_CAP:,} most recent matches)' if capped_of[key] else ''}")
    for label, seconds in every_match.items():
        print(f"  {1000 * seconds:7.1f} ms  {label}")
    print(f"grep-style scan of every text for 'suppression': {grep_seconds:.1f} s ({grep_hits} documents); "
          f"the index answers it {grep_seconds / statistics.median(indexed_word):.0f}x faster")
    print(f"show (20 document ids, 5 case numbers): p50 {1000 * statistics.median(show_times):.1f} ms, "
          f"p95 {1000 * percentile(show_times, 0.95):.1f} ms")
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
