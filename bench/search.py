"""Benchmark of the search, the old engine (SQLite FTS5) against the new (tantivy), in one run.

On a full-scale synthetic corpus: 98,724 documents by default (the archive's
size), texts drawn like real opinions (log-normal lengths, median 15 KB,
clipped to 5-60 KB; legal prose in a Zipf-like mix; each document has a
topic and uses a few of its phrases; party names and rare words per
document). The old engine is the project's tree at --old-rev (FTS5 with 34
common words left out and the newest 10,000 matches ranked), run from a
`git archive` of it. The corpus is texts and a file of the documents' rows
(`corpus.jsonl`); each engine's workspace has its own state database, written
from those rows by that engine's own code (an older tree refuses a newer
schema), and the same texts; each engine builds its own index and
answers in a process of its own, the driver asking them query by query in
turn (the order alternating each run), quiet and then with every core busy
(one spinning process per CPU beside them).

Prints, old against new: the index build (seconds, MB/s) and its size as a
ratio of the text (goal <= 0.5); a run with nothing new; (new) a day's
documents, 100 and then 1,000, indexed again, in seconds and per document;
(new) the store's one-file copy: its size, the time to pack and to restore
it; the queries (bench's 20 plus phrases of common words, a case number in
five forms, two captions, three sentences pasted from documents): p50, p95
and slowest, quiet and busy, with snippets (what `search` runs) and the search
alone, goals p50 <= 10 ms, p95 <= 50 ms, slowest <= 250 ms busy; per query
the medians side by side, each engine's total and what it answered (an
error is the old engine refusing the query); every match of `commonwealth`
ranked (old: --rank-all).

    .venv/bin/python bench/search.py                      # full scale, corpus in /tmp/kycourt-bench-search
    .venv/bin/python bench/search.py --docs 5000          # a quick run
    .venv/bin/python bench/search.py --workspace DIR      # keep or reuse a corpus and both indexes
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME  # noqa: E402
from notebook_builder.cells.c10_database import Database  # noqa: E402
from notebook_builder.cells.c18_search_index import (SearchIndex, pack_search_index, remove_search_index,  # noqa: E402
                                                     unpack_search_index)
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c87_index import index  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OLD_REV = "385ec54"     # the last commit whose search is SQLite FTS5 (common words left out, 10,000 ranked)

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
    """Writes the texts and the documents' rows (every document extracted: `corpus.jsonl`, which
    `write_state` turns into a state database); returns the text bytes."""
    rng = random.Random(seed)
    pool = make_pool(rng, 3_000_000)
    topic_names = list(TOPICS)
    topic_weights = [TOPICS[name][0] for name in topic_names]
    text_dir = workspace / "text"
    text_dir.mkdir(parents=True, exist_ok=True)
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
    with open(workspace / CORPUS_ROWS, "w", encoding="utf-8") as rows_file:
        for row in rows:
            rows_file.write(json.dumps(dict(zip(CORPUS_COLUMNS, row))) + "\n")
    (workspace / "corpus-bytes").write_text(str(total))
    return total


# The documents' columns the corpus gives (in `documents` since schema 2: every engine's tree has them).
CORPUS_COLUMNS = ("document_id", "case_number", "court", "case_title", "docket_entry_id", "description", "filed_date",
                  "status", "attempts", "http_status", "sha256", "size_bytes", "local_pdf", "pages", "extracted_chars",
                  "likely_scanned", "extract_attempts", "document_name", "shard")
CORPUS_ROWS = "corpus.jsonl"
# A tree's own writer of the state database: its Database creates its schema, the corpus's rows go in.
STATE_WRITER = """
import json, sys
tree, database, rows = sys.argv[1:4]
sys.path.insert(0, tree)
from notebook_builder.cells.c10_database import Database
db = Database.open(database)
with open(rows, encoding="utf-8") as lines, db.transaction():
    for line in lines:
        row = json.loads(line)
        db.conn.execute(f"INSERT INTO documents({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        tuple(row.values()))
db.close()
"""


def write_state(tree: Path, workspace: Path, rows: Path) -> None:
    """The workspace's state database, written from the corpus's rows by `tree`'s own code (in a
    process of its own, as that tree's engine runs); a database already there is replaced."""
    for suffix in ("", "-wal", "-shm"):
        (workspace / (DB_FILENAME + suffix)).unlink(missing_ok=True)
    subprocess.run([sys.executable, "-c", STATE_WRITER, str(tree), str(workspace / DB_FILENAME), str(rows)],
                   check=True, cwd=workspace)


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



def extra_queries(workspace: Path, rng: random.Random) -> list[tuple[str, dict]]:
    """Phrases of common words, a case number in five forms, two captions and three sentences pasted
    from the corpus's texts (8 to 12 words each)."""
    conn = sqlite3.connect(workspace / DB_FILENAME)
    try:
        count = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        pick = lambda number: conn.execute(      # noqa: E731
            "SELECT case_number, case_title, sha256 FROM documents ORDER BY rowid LIMIT 1 OFFSET ?",
            (number,)).fetchone()
        case, title, _ = pick(count // 2)
        pasted = []
        for number in (count // 7, count // 3, 4 * count // 5):
            text = (workspace / "text" / f"{pick(number)[2]}.txt").read_text(encoding="utf-8")
            words = text.split("\n", 4)[4].split()
            start = rng.randrange(50, max(51, len(words) - 20))
            pasted.append(" ".join(words[start:start + rng.randint(8, 12)]))
    finally:
        conn.close()
    year, court, sequence = case.split("-")
    forms = [case, f"{year}-{court}-{int(sequence):06d}-MR", f"{year} {court} {int(sequence)}",
             f"{year[2:]}-{court}-{int(sequence)}", f"{year}{court}{sequence}"]
    first, second = title.split(" VS. ")
    return ([('"abuse of discretion"', {}), ('"of the"', {}), ('"the trial court"', {})]
            + [(form, {}) for form in forms] + [(f"{first.title()} v. {second.title()}", {}), (title, {})]
            + [(sentence, {}) for sentence in pasted])


# A version's process: its tree's search over its own index. Commands on stdin, one JSON line
# each: build (the index stage, timed), query (search_archive: snippets included, and the search
# alone), close.
WORKER = """
import json, sys, time
tree, workspace, store = sys.argv[1:4]
sys.path.insert(0, tree)
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c87_index import index, open_search_index, search_archive
try:
    from notebook_builder.cells.c18_search_index import SearchIndex, SearchFilters
    from notebook_builder.cells.c18_query_syntax import parse_query
    NEW = True
except ImportError:
    NEW = False
cfg = load_config({"KY_WORKSPACE": workspace, "KY_STORE": store, "KY_PROGRESS": "0"})
print(json.dumps({"ready": True, "engine": "tantivy" if NEW else "fts5"}), flush=True)
opened = None
for line in sys.stdin:
    request = json.loads(line)
    if request["do"] == "build":
        ctx = open_context(cfg)
        started = time.perf_counter()
        result = index(ctx)
        ctx.close()
        print(json.dumps({"seconds": time.perf_counter() - started, "indexed": result.indexed}), flush=True)
        continue
    opened = opened or open_search_index(workspace)
    query, filters = request["query"], dict(request["filters"])
    answer = {}
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        if NEW:
            result = search_archive(workspace, query, limit=20, search=opened, **filters)
            hits, total = result.hits, result.total
        else:
            hits = search_archive(workspace, query, limit=20, sdb=opened, rank_all=request.get("rank_all", False),
                                  **filters)
            total = hits[0]["ranked_among"] if hits and not hits[0]["rank_capped"] else None
        answer.update(ids=[hit["document_id"] for hit in hits], total=total)
    except Exception as exc:
        answer.update(ids=[], total=None, error=type(exc).__name__)
    answer.update(wall=time.perf_counter() - wall, cpu=time.thread_time() - cpu)
    alone = time.perf_counter()
    try:
        if NEW:
            from notebook_builder.cells.c18_search_index import court_filter
            court = filters.pop("court", None)
            opened.search(parse_query(query), SearchFilters(**court_filter(court), **filters), limit=20)
        elif "error" not in answer:
            from notebook_builder.cells.c87_index import court_filter
            court = filters.pop("court", None)
            opened.search(query, limit=20, **court_filter(court), **filters)
    except Exception:
        pass
    answer["alone"] = time.perf_counter() - alone
    print(json.dumps(answer), flush=True)
"""


class Version:
    """One engine's process over its own workspace."""

    def __init__(self, name: str, tree: Path, workspace: Path, store: Path):
        self.name = name
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(tree), str(workspace), str(store)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.engine = json.loads(self.process.stdout.readline())["engine"]

    def ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def old_tree(root: Path, rev: str) -> Path:
    """The old engine's source tree (notebook_builder at `rev`), from `git archive`."""
    tree = root / f"tree-{rev}"
    if not (tree / "notebook_builder").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "notebook_builder"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def old_workspace(root: Path, workspace: Path, tree: Path, rev: str) -> Path:
    """A workspace of its own for the old engine (its index file has the new catalog's name): its
    state database written by the old tree from the corpus's rows (once per `rev`: a database
    another tree wrote is written again, its index with it), the same texts."""
    old = root / "old-workspace"
    old.mkdir(parents=True, exist_ok=True)
    written_by = old / "state-written-by"
    if not (old / DB_FILENAME).is_file() or not written_by.is_file() or written_by.read_text() != rev:
        for name in (SEARCH_DB_FILENAME, SEARCH_DB_FILENAME + "-wal", SEARCH_DB_FILENAME + "-shm"):
            (old / name).unlink(missing_ok=True)
        write_state(tree, old, workspace / CORPUS_ROWS)
        written_by.write_text(rev)
    for name in ("text", "pdf_by_hash"):
        if not (old / name).exists():
            (old / name).symlink_to(workspace / name)
    return old


def phase(versions: list[Version], queries: list[tuple[str, dict]], runs: int) -> dict[str, dict[str, list[dict]]]:
    """Every query `runs` times (after a warming run) on each version in turn, the order alternating."""
    answers: dict[str, dict[str, list[dict]]] = {version.name: {} for version in versions}
    for run in range(runs + 1):
        for query, filters in queries:
            for version in (versions if run % 2 else versions[::-1]):
                answer = version.ask(do="query", query=query, filters=filters)
                if run:
                    answers[version.name].setdefault(query + (str(filters) if filters else ""), []).append(answer)
    return answers


def quiet_then_busy(versions: list[Version], queries: list[tuple[str, dict]], runs: int
                    ) -> tuple[dict, dict, dict[str, float], int]:
    """phase() on a quiet machine, then with one spinning process per CPU: (quiet, busy, the load
    average before each, the spinning processes)."""
    loads = {"quiet": os.getloadavg()[0]}
    quiet = phase(versions, queries, runs)
    loads["busy"] = os.getloadavg()[0]
    with every_core_busy() as burners:
        busy = phase(versions, queries, runs)
    return quiet, busy, loads, len(burners)


def folder_bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def summary(runs: dict[str, list[dict]], field: str = "wall") -> str:
    values = [answer[field] for answers in runs.values() for answer in answers]
    return (f"p50 {1000 * statistics.median(values):6.1f} ms, p95 {1000 * percentile(values, 0.95):6.1f} ms, "
            f"slowest {1000 * max(values):6.1f} ms")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def reindex(cfg, documents: int) -> tuple[float, int, float]:
    """Takes `documents` out of the new index, then times the stage putting them back (a day's new
    ones): (seconds, documents indexed, seconds of those spent mirroring the index to the store)."""
    search = SearchIndex.open(cfg.WORKSPACE)
    try:
        for document_id in sorted(search.indexed())[:documents]:
            search.remove(document_id)
        search.commit()
        search.finish()
    finally:
        search.close()
    ctx = open_context(cfg)
    try:
        started = time.perf_counter()
        result = index(ctx)
        return time.perf_counter() - started, result.indexed, result.push_seconds
    finally:
        ctx.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_SCALE)
    parser.add_argument("--workspace", default="/tmp/kycourt-bench-search")
    parser.add_argument("--fresh", action="store_true", help="rebuild the corpus and both indexes")
    parser.add_argument("--old-rev", default=OLD_REV, help=f"the old engine's commit (default {OLD_REV})")
    parser.add_argument("--runs", type=int, default=5, help="runs of every query in each phase (default 5)")
    args = parser.parse_args()
    root = Path(args.workspace)
    workspace, store = root / "workspace", root / "store"
    if args.fresh and root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    if not (workspace / "corpus-bytes").is_file() or not (workspace / CORPUS_ROWS).is_file():
        workspace.mkdir(parents=True, exist_ok=True)
        text_bytes = build_corpus(workspace, args.docs)
        write_state(REPO, workspace, workspace / CORPUS_ROWS)
        remove_search_index(workspace)
        print(f"corpus: {args.docs} documents, {text_bytes / 1e6:.0f} MB of text, made in "
              f"{time.monotonic() - started:.0f} s")
    else:
        text_bytes = int((workspace / "corpus-bytes").read_text())
        print(f"corpus: reused {workspace} ({text_bytes / 1e6:.0f} MB of text)")
    state = Database.open(workspace / DB_FILENAME)
    docs = state.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    state.close()
    tree = old_tree(root, args.old_rev)
    old_ws = old_workspace(root, workspace, tree, args.old_rev)
    cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(store), "KY_PROGRESS": "0"})

    # ---- builds
    builds = {}
    if not SearchIndex.exists(workspace):
        shutil.rmtree(store, ignore_errors=True)
        ctx = open_context(cfg)
        load = os.getloadavg()[0]
        build_started = time.perf_counter()
        index(ctx)
        builds["new"] = (time.perf_counter() - build_started, load)
        ctx.close()
    old = Version("old", tree, old_ws, root / "old-store")
    if not (old_ws / SEARCH_DB_FILENAME).is_file():
        load = os.getloadavg()[0]
        builds["old"] = (old.ask(do="build")["seconds"], load)
    again_new_started = time.perf_counter()
    ctx = open_context(cfg)
    index(ctx)
    ctx.close()
    again_new = time.perf_counter() - again_new_started
    again_old = old.ask(do="build")["seconds"]
    new_bytes = folder_bytes(workspace / SEARCH_INDEX_DIRNAME) + (workspace / SEARCH_DB_FILENAME).stat().st_size
    catalog_bytes = (workspace / SEARCH_DB_FILENAME).stat().st_size
    old_bytes = sum((old_ws / name).stat().st_size for name in (SEARCH_DB_FILENAME, SEARCH_DB_FILENAME + "-wal")
                    if (old_ws / name).is_file())
    print(f"documents: {docs}; text {text_bytes / 1e6:.0f} MB (mean {text_bytes / max(docs, 1) / 1e3:.1f} KB)")
    for name in ("old", "new"):
        if name in builds:
            seconds, load = builds[name]
            print(f"index build, {name}: {seconds:.0f} s, {text_bytes / 1e6 / seconds:.1f} MB/s (load average "
                  f"{load:.1f} before)")
    print(f"index size: old {old_bytes / 1e6:.0f} MB = {old_bytes / text_bytes:.2f}x the text; new "
          f"{new_bytes / 1e6:.0f} MB = {new_bytes / text_bytes:.2f}x (catalog {catalog_bytes / 1e6:.0f} MB of it) "
          f"(goal <= 0.5)")
    print(f"a run with nothing new: old {again_old:.1f} s, new {again_new:.1f} s")

    # ---- a day's documents, and the store's copy (new)
    for documents in (100, 1000):
        seconds, indexed, pushing = reindex(cfg, min(documents, docs))
        print(f"new: {indexed} documents indexed again by the stage in {seconds:.1f} s, of which {pushing:.1f} s "
              f"mirroring the whole index to the store (once a session); {1000 * (seconds - pushing) / max(indexed, 1):.1f} "
              "ms a document without it, the run's fixed part (a run with nothing new) included")
    pack_started = time.perf_counter()
    pack = pack_search_index(workspace, root / "ky_search.tar")
    pack_seconds = time.perf_counter() - pack_started
    restored = root / "restored"
    shutil.rmtree(restored, ignore_errors=True)
    restored.mkdir()
    unpack_started = time.perf_counter()
    unpack_search_index(pack, restored)
    unpack_seconds = time.perf_counter() - unpack_started
    print(f"new: the store's copy (ky_search.tar) {pack.stat().st_size / 1e6:.0f} MB, packed in {pack_seconds:.1f} s, "
          f"restored in {unpack_seconds:.1f} s (checked)")
    shutil.rmtree(restored)
    pack.unlink()

    # ---- queries
    queries = list(QUERIES) + extra_queries(workspace, random.Random(5))
    new = Version("new", REPO, workspace, store)
    versions = [old, new]
    try:
        quiet, busy, loads, spinning = quiet_then_busy(versions, queries, args.runs)
        print(f"queries, quiet ({len(queries)} queries, {args.runs} runs each after a warming one; load average "
              f"{loads['quiet']:.1f} before):")
        for version in versions:
            print(f"  {version.name} ({version.engine}): with snippets {summary(quiet[version.name])}; search alone "
                  f"{summary(quiet[version.name], 'alone')}")
        print(f"queries with every core busy ({spinning} spinning processes; load average {loads['busy']:.1f} before):")
        for version in versions:
            print(f"  {version.name} ({version.engine}): with snippets {summary(busy[version.name])}; search alone "
                  f"{summary(busy[version.name], 'alone')}")
        print("  goals, busy: p50 <= 10 ms, p95 <= 50 ms, slowest <= 250 ms")
        print("  busy wall ms (medians) old, new; search alone new; old total / answer, new total; query")
        for key, old_runs in busy["old"].items():
            new_runs = busy["new"][key]
            answer = old_runs[0].get("error") or (f"{old_runs[0]['total']}" if old_runs[0]["total"] is not None
                                                  else f"{len(old_runs[0]['ids'])} (capped)")
            print(f"  {1000 * statistics.median(a['wall'] for a in old_runs):7.1f} "
                  f"{1000 * statistics.median(a['wall'] for a in new_runs):7.1f} "
                  f"{1000 * statistics.median(a['alone'] for a in new_runs):7.1f}   {answer:>18} "
                  f"{new_runs[0]['total']:>7}  {key[:80]}")
        ranked = {}
        for name, version, extra in (("old --rank-all", old, {"rank_all": True}), ("new", new, {})):
            times = [version.ask(do="query", query="commonwealth", filters={}, **extra)["wall"] for _ in range(3)]
            ranked[name] = statistics.median(times)
        print("every match of 'commonwealth' ranked: " + ", ".join(f"{name} {1000 * seconds:.1f} ms"
                                                                 for name, seconds in ranked.items()))
    finally:
        for version in versions:
            version.close()
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
