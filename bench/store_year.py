"""Benchmark: an archive's first crawl and a year of weekly updates against the simulated Drive, before
(9b705af, main before issue 41's work) and after (this tree), side by side in one run.

    .venv/bin/python bench/store_year.py [--docs 98724] [--weeks 52] [--crawl-sessions 7] [--only before|after]
                                         [--parallel] [--keep DIR] [--prose record|plain] [--rate 200]
    .venv/bin/python bench/store_year.py --docs 600 --weeks 3 --parallel      # a quick run: ~15 minutes
    .venv/bin/python bench/store_year.py --report DIR                         # a run kept in DIR, again

Needs time-machine (pip install -e '.[bench]'). Each tree's year runs in a process of its own, which
serves a simulated court of the captured shape (real_counts: 98,724 documents and 122,619 cases at full
scale; document search absent, no faults, its day 2026-06-01; --prose record: texts as long as the
record's, ~20 KB a document, so the search index has its real size) and a simulated Drive on a clock the
bench moves (earlier revisions kept 30 days or until 100 and counted in the quota; the files of record,
pdf_by_hash/, text/ and court_text/, and every superseded revision kept as size and md5 only, so a
year fits in memory). Each session is `run` from the tree, in a process of its own whose clock is the
Drive's (time-machine), with KY_STORE=drive, pacing off, phases discover,download,extract,derive,index
(OCR left out: no fault is served, so no scan needs it).
- The first crawl: sessions a day apart, each stopped by its budget (KY_BUDGET) and checkpointing as
  often as a 10-hour session does every 10 minutes: KY_CHECKPOINT_SECONDS = budget / 60 (the journal
  budget / 600, KY_SHUTDOWN budget / 40). The first budget is foreseen from the court's size, each next
  one from the share of the crawl's work done so far, so the crawl takes about --crawl-sessions
  sessions. A session its budget stops skips the stages left, as a real one does: the index may first
  be built by the first update.
- Then --weeks weekly updates: the court moved 7 days on (a week of the real court's activity, a seed a
  week) and the Drive's clock to that day; each runs to its end and checkpoints as often as it would at
  the default pacing, every 600 s of the time it would take (its court requests at the mean pacing plus
  0.25 s each, its local stages as measured), scaled by the last session's wall seconds a real second.
- The files of record are the simulated court's PDFs (~12 KB each; the real court's are larger) and its
  texts: against a floor of smaller files of record, held / floor is harsher than the real record's.
Printed per session: its day, wall seconds (the hours a real session would take), checkpoints made;
bytes uploaded by kind (files of record; database: snapshots or page packs; index; resume archives;
journal; feeds and exports: status.json, inventories, feed.atom, changes/, status.png; other); Drive
requests (writes refused for rate); what Drive holds (heads + earlier revisions + trash) against the
floor (the files of record held + the workspace's database + its index, ky_search/ and the catalog +
the store's newest resume archive) and their ratio; for an update, its upload against its new files of
record + the database's pages that differ from before the session + the index's new or changed files
and catalog pages. Then before and after side by side (the crawl's uploads by kind, an update's mean
and max, held / floor at its worst, the update ratio, requests a stored file, a fresh runtime's restore
against the store at the end: restore, recover and the index stage, seconds and Drive requests) and
each of the issue's goals this bench can judge.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BEFORE_COMMIT = "9b705af"             # main before issue 41's work
FULL_CORPUS = 98_724
DAY = _dt.date(2026, 6, 1)            # the court's day at the first crawl
SESSION_HOUR = 14                     # sessions start at 14:00 UTC of their day
FOLDER = "ky_court"
RECORD_PREFIXES = ("pdf_by_hash/", "text/", "court_text/")
PHASES = "discover,download,extract,derive,index"
CHECKPOINTS_A_SESSION = 60            # a 10-hour session checkpoints every 10 minutes
JOURNALS_A_SESSION = 600              # ... and pushes its download journal every minute
REAL_CHECKPOINT_SECONDS = 600.0       # CHECKPOINT_SECONDS's default
REAL_JOURNAL_SECONDS = 60.0           # JOURNAL_SECONDS's default
LATENCY_SECONDS = 0.25                # a court request's latency, beside the pacing (bench/update.py)
KINDS = ("record", "database", "index", "resume", "journal", "feeds", "other")
KIND_WORDS = {"record": "files of record", "database": "database", "index": "index", "resume": "resume archives",
              "journal": "journal", "feeds": "feeds and exports", "other": "other"}
FEEDS = ("status.json", "document_inventory.csv", "failed_inventory.csv", "feed.atom", "status.png")
MB = 1_000_000
HELD_GOAL = 1.2                       # what Drive holds against the floor, at most, at every point
UPDATE_UPLOAD_GOAL = 2.0              # an update's upload against its new files and changed state
REQUESTS_GOAL = 1.1                   # Drive requests a stored file, calm


def projected_seconds(court_requests: Counter) -> float:
    """The seconds the court's requests take at the default pacing, plus LATENCY_SECONDS each."""
    from notebook_builder.cells.c00_config import load_config
    cfg = load_config(env={})
    downloads = sum(count for endpoint, count in court_requests.items() if endpoint.startswith("download"))
    others = sum(court_requests.values()) - downloads
    return (others * (sum(cfg.PACING_SEARCH) / 2 + LATENCY_SECONDS)
            + downloads * (sum(cfg.PACING_DL) / 2 + LATENCY_SECONDS))


def kind_of(path: str) -> str | None:
    """The kind of a stored file by its path from My Drive ('ky_court/pdf_by_hash/x.pdf')."""
    head, _, name = path.partition("/")
    if head != FOLDER or not name:
        return None
    if name.startswith(RECORD_PREFIXES):
        return "record"
    if name == "ky_court.sqlite" or name.startswith("db/ky_court/"):
        return "database"
    if name in ("ky_search.tar", "ky_search.sqlite") or name.startswith(("ky_search/", "db/ky_search/")):
        return "index"
    if name.startswith("ky_court-WIP-resume-") and "/" not in name:
        return "resume"
    if name.startswith("journal/"):
        return "journal"
    if name in FEEDS or name.startswith("changes/"):
        return "feeds"
    return "other"


# ------------------------------------------------------------------ a session, in a process of its own


def session_worker(tree: str, mode: str, env_json: str, now: str) -> dict:
    """A `run` (mode 'run') or a fresh runtime's restore (mode 'restore') from the package in `tree`,
    the process's clock at `now` (the simulated Drive's), ticking."""
    sys.path.insert(0, tree)
    try:
        import time_machine
    except ImportError:
        raise SystemExit("bench/store_year.py needs time-machine: pip install -e '.[bench]'") from None
    import notebook_builder
    assert Path(notebook_builder.__file__).resolve().is_relative_to(Path(tree).resolve()), notebook_builder.__file__
    env = json.loads(env_json)
    with time_machine.travel(float(now), tick=True):
        from notebook_builder.cells.c00_config import load_config
        cfg = load_config(env=env)
        started = time.perf_counter()
        if mode == "run":
            from notebook_builder.cells.c95_run import run_pipeline
            report = run_pipeline(cfg, handle_signals=False)
            return {"exit_status": report.exit_status, "seconds": time.perf_counter() - started,
                    "stages": {name: round(seconds, 1) for name, seconds in report.seconds.items()},
                    "summary": report.summary()}
        from notebook_builder.cells.c35_context import open_context
        from notebook_builder.cells.c40_restore import restore
        from notebook_builder.cells.c70_download import recover
        from notebook_builder.cells.c87_index import index
        ctx = open_context(cfg)
        try:
            restored = restore(ctx).restored
            ctx.open_database()
            recover(ctx)
            restore_seconds = time.perf_counter() - started
            indexed = index(ctx)
        finally:
            ctx.close()
        return {"restored": bool(restored), "restore_seconds": restore_seconds,
                "index_seconds": time.perf_counter() - started - restore_seconds,
                "index_restored": bool(indexed.restored_from_store), "index_rebuilt": bool(indexed.rebuilt),
                "indexed": indexed.indexed}


# ------------------------------------------------------------------ what changed, what is held


def page_size(path: Path) -> int:
    with open(path, "rb") as handle:
        header = handle.read(100)
    size = int.from_bytes(header[16:18], "big") if len(header) >= 18 else 4096
    return 65536 if size == 1 else (size or 4096)


def settle(path: Path) -> None:
    """The database's WAL folded into its file (a closed workspace's database, between sessions)."""
    if path.is_file():
        conn = sqlite3.connect(str(path))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


def changed_page_bytes(old: Path | None, new: Path) -> int:
    """The bytes of the pages of `new` that differ from `old`'s (or are beyond its end)."""
    if not new.is_file():
        return 0
    size = page_size(new)
    changed = 0
    with open(new, "rb") as after, (open(old, "rb") if old and old.is_file() else open(os.devnull, "rb")) as before:
        while page := after.read(size):
            if page != before.read(size):
                changed += len(page)
    return changed


def file_digests(folder: Path) -> dict[str, tuple[int, str]]:
    """{relative name: (size, sha256)} of every file under `folder`."""
    digests = {}
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                digests[str(path.relative_to(folder))] = (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    return digests


def kv_value(path: Path, key: str) -> str | None:
    if not path.is_file():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    except sqlite3.Error:
        return None
    finally:
        conn.close()


class WorkspaceState:
    """What the floor and "what changed" are measured from: the database's file, the index's files
    and catalog, copied or hashed between sessions."""

    def __init__(self, workspace: Path, scratch: Path):
        self.workspace, self.scratch = workspace, scratch
        scratch.mkdir(parents=True, exist_ok=True)

    def database(self) -> Path:
        return self.workspace / "ky_court.sqlite"

    def catalog(self) -> Path:
        return self.workspace / "ky_search.sqlite"

    def take(self) -> dict:
        """Copies of the database and the catalog, the index's digests (before a session)."""
        for path in (self.database(), self.catalog()):
            settle(path)
            copy = self.scratch / path.name
            if path.is_file():
                shutil.copyfile(path, copy)
            else:
                copy.unlink(missing_ok=True)
        return {"index": file_digests(self.workspace / "ky_search"),
                "seq": int(kv_value(self.database(), "checkpoint_seq") or 0)}

    def compare(self, taken: dict) -> dict:
        """What the session changed, and the workspace's sizes after it."""
        for path in (self.database(), self.catalog()):
            settle(path)
        digests = file_digests(self.workspace / "ky_search")
        new_index = sum(size for name, (size, digest) in digests.items() if taken["index"].get(name, (0, ""))[1] != digest)
        catalog = self.catalog()
        return {"database_changed": changed_page_bytes(self.scratch / "ky_court.sqlite", self.database()),
                "index_changed": new_index + changed_page_bytes(self.scratch / catalog.name, catalog),
                "database_bytes": self.database().stat().st_size if self.database().is_file() else 0,
                "index_bytes": sum(size for size, _ in digests.values())
                + (catalog.stat().st_size if catalog.is_file() else 0),
                "checkpoints": int(kv_value(self.database(), "checkpoint_seq") or 0) - taken["seq"]}


# ------------------------------------------------------------------ one tree's year


def worker(tree: Path, mode: str, env: dict, now: float) -> dict:
    """`session_worker` in a process of its own; its answer (the last line it prints)."""
    done = subprocess.run([sys.executable, __file__, "--worker", str(tree), mode, json.dumps(env), repr(now)],
                          capture_output=True, text=True, cwd=tree, env={**os.environ, "KY_PROGRESS": "0"})
    if done.returncode != 0:
        raise RuntimeError(f"{mode} worker failed ({done.returncode}): {done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Year:
    """One tree's year: the court and the Drive served in this process, each session a process of its own."""

    def __init__(self, label: str, tree: Path, args, folder: Path, emit):
        from notebook_builder.simcourt import SimCourt
        from notebook_builder.simdrive import SimDrive
        self.label, self.tree, self.args, self.folder, self.emit = label, tree, args, folder, emit
        self.court = SimCourt(docs=args.docs, seed=args.seed, real_counts=True, shape="captured",
                              document_search="absent", faults=False, today=DAY, prose=args.prose)
        real_start = time.time()
        first = _dt.datetime.combine(DAY, _dt.time(SESSION_HOUR), _dt.timezone.utc)
        self.drive = SimDrive(clock=lambda: first.timestamp() + time.time() - real_start,
                              metadata_only=RECORD_PREFIXES, keep_earlier_bytes=False, write_rate=args.rate,
                              write_burst=max(3.0, args.rate))
        self.workspace = folder / "workspace"
        self.state = WorkspaceState(self.workspace, folder / "scratch")
        self.sessions: list[dict] = []
        cases = len(self.court.corpus.case_keys)
        self.budget = args.crawl_seconds or max(60.0, (0.02 * cases + 0.1 * args.docs) / args.crawl_sessions)
        self.time_scale = 1.0     # wall seconds a second of a real session, from the last session

    def __enter__(self):
        self.court.start()
        self.drive.start()
        return self

    def __exit__(self, *exc):
        self.drive.stop()
        self.court.stop()

    # ------------------------------------------------------------ the scenario

    def run(self) -> dict:
        for number in range(1, self.args.crawl_sessions + 6):
            if number > 1:
                self.move_to(self.drive.clock.now() + 86_400)
            line = self.session("crawl", number)
            if line["done"]:
                break
            self.budget = self.next_budget(sessions_left=self.args.crawl_sessions - number)
        for week in range(1, self.args.weeks + 1):
            plan = self.court.advance(7, seed=self.args.seed * 1000 + week)
            today = _dt.date.fromisoformat(plan["today"])
            self.move_to(max(_dt.datetime.combine(today, _dt.time(SESSION_HOUR), _dt.timezone.utc).timestamp(),
                             self.drive.clock.now() + 7 * 86_400))
            self.session("update", week, added=len(plan["added"]))
        return {"label": self.label, "sessions": self.sessions, "restore": self.fresh_runtime()}

    def next_budget(self, sessions_left: int) -> float:
        """The next crawl session's budget: the crawl's seconds still to come, foreseen from the share
        of its work done so far (each of the court's documents downloaded and extracted), shared by
        the sessions left (the rest at once when none is)."""
        crawl = [line for line in self.sessions if line["kind"] == "crawl"]
        total = 2 * len(self.court.documents)
        left = crawl[-1]["work_left"] + max(0, total - crawl[-1]["work_found"])
        share = 1 - left / total
        if share < 0.02:
            return 2 * self.budget
        to_come = sum(line["seconds"] for line in crawl) * (1 - share) / share
        return max(60.0, to_come / sessions_left if sessions_left > 0 else 1.5 * to_come)

    def move_to(self, epoch: float) -> None:
        self.drive.advance(seconds=max(0.0, epoch - self.drive.clock.now()))

    def env(self, workspace: Path, kind: str) -> dict:
        """A session's settings. A crawl session runs for its budget and checkpoints as often as a
        10-hour session does every 10 minutes (BUDGET / 60; the journal every BUDGET / 600); an update
        runs to its end and checkpoints as often as it would at the default pacing, every 10 minutes of
        the time it would take (600 s and 60 s times the last session's wall seconds a real second)."""
        env = {"KY_WORKSPACE": str(workspace), "KY_STORE": "drive", "KY_DRIVE_API": self.drive.api_root,
               "KY_DRIVE_FOLDER": FOLDER, "KY_DRIVE_WRITES": str(self.args.rate), "KY_API_BASE": self.court.base_url,
               "KY_PACING": "0", "KY_PROGRESS": "0", "KY_PHASES": PHASES, "KY_FIRST_YEAR": "1990",
               "KY_TODAY": _dt.date.fromordinal(self.court.corpus.today).isoformat(),
               "KY_BACKOFF_BASE": "0.5", "KY_BACKOFF_CAP": "4"}
        if kind == "crawl":
            env.update({"KY_BUDGET": f"{self.budget:.1f}", "KY_SHUTDOWN": f"{self.budget / 40:.1f}",
                        "KY_CHECKPOINT_SECONDS": f"{self.budget / CHECKPOINTS_A_SESSION:.3f}",
                        "KY_JOURNAL_SECONDS": f"{self.budget / JOURNALS_A_SESSION:.3f}"})
        else:
            env.update({"KY_CHECKPOINT_SECONDS": f"{REAL_CHECKPOINT_SECONDS * self.time_scale:.3f}",
                        "KY_JOURNAL_SECONDS": f"{REAL_JOURNAL_SECONDS * self.time_scale:.3f}"})
        return env

    def uploads(self) -> dict[str, tuple[int, int]]:
        return self.drive.uploaded.by(kind_of)

    def requests(self) -> int:
        return sum(count for kind, count in self.drive.requests.items() if kind != "token")

    def rate_refusals(self) -> int:
        return self.drive.rate_refusals()

    def session(self, kind: str, number: int, added: int = 0) -> dict:
        taken = self.state.take()
        work_before = work_counts(self.workspace)
        uploads, requests, refused = self.uploads(), self.requests(), self.rate_refusals()
        answers = Counter(self.drive.answers)
        records = {held.path for held in self.drive.held().files if kind_of(held.path) == "record"}
        day = _dt.datetime.fromtimestamp(self.drive.clock.now(), _dt.timezone.utc).date()
        court = Counter(self.court.endpoint_requests)
        env = self.env(self.workspace, kind)
        result = worker(self.tree, "run", env, self.drive.clock.now())
        court = Counter(self.court.endpoint_requests) - court
        stages = result["stages"]
        crawling = stages.get("discover", 0.0) + stages.get("download", 0.0)
        real = projected_seconds(court) + result["seconds"] - crawling
        self.time_scale = result["seconds"] / real
        changed = self.state.compare(taken)
        work_after = work_counts(self.workspace)
        after = self.uploads()
        sent = {name: (after.get(name, (0, 0))[0] - uploads.get(name, (0, 0))[0],
                       after.get(name, (0, 0))[1] - uploads.get(name, (0, 0))[1]) for name in KINDS}
        held = self.drive.held()
        by_kind = held.by(kind_of)
        record_files = [f for f in held.files if kind_of(f.path) == "record" and not f.trashed]
        resume = max((f for f in self.drive.files_in(FOLDER) if kind_of(f"{FOLDER}/{f['title']}") == "resume"),
                     key=lambda f: f["createdDate"], default=None)
        floor = {"record": sum(f.head_bytes for f in record_files), "database": changed["database_bytes"],
                 "index": changed["index_bytes"], "resume": int(resume["fileSize"]) if resume else 0}
        status = json.loads((self.workspace / "status.json").read_text())
        line = {"kind": kind, "number": number, "day": day.isoformat(), "exit": result["exit_status"],
                "seconds": round(result["seconds"], 1), "stages": stages, "real_hours": real / 3600,
                "budget": float(env.get("KY_BUDGET", 0)), "checkpoint_seconds": float(env["KY_CHECKPOINT_SECONDS"]),
                "court_requests": sum(court.values()), "done": bool(status.get("done")),
                "documents": status.get("documents"), "added": added,
                "work_done": max(0, work_before["left"] - work_after["left"] + work_after["found"] - work_before["found"]),
                "work_left": work_after["left"], "work_found": work_after["found"],
                "sent": sent, "requests": self.requests() - requests,
                "answers": dict(Counter(self.drive.answers) - answers), "rate_refused": self.rate_refusals() - refused,
                "held": {"total": held.total_bytes, "heads": held.head_bytes, "earlier": held.earlier_bytes,
                         "earlier_revisions": held.earlier_revisions, "trash": held.trashed_bytes,
                         "by_kind": {name: part.total_bytes for name, part in by_kind.items()},
                         "files": len(held.files), "record_files": len(record_files)},
                "floor": floor, "new_records": sum(f.head_bytes for f in record_files if f.path not in records),
                **changed}
        self.sessions.append(line)
        self.emit(line)
        return line

    def fresh_runtime(self) -> dict:
        """A blank workspace against the store at the end: restore, recover, the index stage."""
        requests = self.requests()
        env = self.env(self.folder / "fresh", "update")
        result = worker(self.tree, "restore", env, self.drive.clock.now())
        return {**result, "requests": self.requests() - requests}


def work_counts(workspace: Path) -> dict[str, int]:
    """The crawl's work in documents: 'found' (a download and an extraction each), 'left' (queued)."""
    path = workspace / "status.json"
    status = json.loads(path.read_text()) if path.is_file() else {}
    queues = status.get("queues") or {}
    return {"found": 2 * int(status.get("documents") or 0),
            "left": int(queues.get("download") or 0) + int(queues.get("extract") or 0)}


# ------------------------------------------------------------------ printing


def megabytes(size: float) -> str:
    return f"{size / MB:.1f}" if size >= 10 * MB else f"{size / MB:.2f}"


def update_base(line: dict) -> int:
    """An update's new files of record plus what changed in the database and the index."""
    return line["new_records"] + line["database_changed"] + line["index_changed"]


def session_text(label: str, line: dict) -> str:
    sent = line["sent"]
    total = sum(size for _, size in sent.values())
    held, floor = line["held"], sum(line["floor"].values())
    text = (f"{label:>6} {line['kind']:>6} {line['number']:>2} {line['day']} {line['seconds']:>6.0f}s "
            f"({line['real_hours']:.1f} h real) {line['checkpoints']:>3} ckpt | sent " + " ".join(f"{KIND_WORDS[name].split()[0][:6]} {megabytes(sent[name][1])}"
                                                               for name in KINDS)
            + f" = {megabytes(total)} MB | {line['requests']} requests ({line['rate_refused']} refused) | held "
            f"{megabytes(held['total'])} = heads {megabytes(held['heads'])} + earlier {megabytes(held['earlier'])} "
            f"({held['earlier_revisions']}) + trash {megabytes(held['trash'])} | floor {megabytes(floor)} | "
            f"held/floor {held['total'] / max(1, floor):.2f}")
    if line["kind"] == "update":
        base = update_base(line)
        text += (f" | new {megabytes(line['new_records'])} + db {megabytes(line['database_changed'])} + index "
                 f"{megabytes(line['index_changed'])} = {megabytes(base)}: sent/that {total / max(1, base):.2f}")
    return text


def figures(final: dict) -> dict:
    """One tree's year summed up: the crawl's uploads, an update's (mean, max), held against the
    floor, the update ratio, requests a stored file, refusals, the fresh runtime."""
    sessions = final["sessions"]
    crawl = [line for line in sessions if line["kind"] == "crawl"]
    updates = [line for line in sessions if line["kind"] == "update"]

    def sent(line: dict, name: str | None = None) -> int:
        return sum(size for kind, (_, size) in line["sent"].items() if name in (None, kind))

    ratios = [(line["held"]["total"] / max(1, sum(line["floor"].values())), line) for line in sessions]
    worst = max(ratios, key=lambda pair: pair[0])
    update_ratios = [(sent(line) / max(1, update_base(line)), line) for line in updates]
    last, crawled = sessions[-1], crawl[-1]
    return {
        "crawl_sessions": len(crawl), "crawl_seconds": sum(line["seconds"] for line in crawl),
        "crawl_checkpoints": sum(line["checkpoints"] for line in crawl),
        "crawl_sent": {name: sum(sent(line, name) for line in crawl) for name in KINDS},
        "crawl_requests": sum(line["requests"] for line in crawl),
        "crawl_files": crawled["held"]["files"],
        "update_sent_mean": {name: statistics.mean(sent(line, name) for line in updates) if updates else 0
                             for name in KINDS},
        "update_sent_max": {name: max((sent(line, name) for line in updates), default=0) for name in KINDS},
        "update_total_mean": statistics.mean(sent(line) for line in updates) if updates else 0,
        "update_total_max": max((sent(line) for line in updates), default=0),
        "update_requests_mean": statistics.mean(line["requests"] for line in updates) if updates else 0,
        "update_checkpoints_mean": statistics.mean(line["checkpoints"] for line in updates) if updates else 0,
        "update_hours_mean": statistics.mean(line["real_hours"] for line in updates) if updates else 0,
        "update_base_mean": statistics.mean(update_base(line) for line in updates) if updates else 0,
        "held_floor_max": worst[0], "held_floor_max_at": f"{worst[1]['kind']} {worst[1]['number']}",
        "held_end": last["held"], "floor_end": sum(last["floor"].values()),
        "update_ratio_mean": statistics.mean(ratio for ratio, _ in update_ratios) if updates else math.nan,
        "update_ratio_max": max((ratio for ratio, _ in update_ratios), default=math.nan),
        "update_ratio_max_at": max(update_ratios, key=lambda pair: pair[0])[1]["number"] if updates else None,
        "requests": sum(line["requests"] for line in sessions), "files_end": last["held"]["files"],
        "refused": sum(line["rate_refused"] for line in sessions),
        "exits": sorted({line["exit"] for line in sessions}), "restore": final["restore"]}


def report(finals: dict[str, dict], args) -> list[str]:
    """Before and after side by side, and the issue's goals this bench can judge."""
    labels = [label for label in ("before", "after") if label in finals]
    summed = {label: figures(finals[label]) for label in labels}
    lines = [f"\nsummary, {args.docs:,} documents, {args.weeks} weekly updates ({' | '.join(labels)}):"]

    def row(title: str, value) -> None:
        lines.append(f"  {title:<44} " + " | ".join(f"{value(summed[label]):>20}" for label in labels))

    row("first crawl: sessions, seconds, checkpoints",
        lambda f: f"{f['crawl_sessions']}, {f['crawl_seconds']:.0f} s, {f['crawl_checkpoints']}")
    for name in KINDS:
        row(f"  sent, {KIND_WORDS[name]} (MB)", lambda f, name=name: megabytes(f["crawl_sent"][name]))
    row("  sent in all (MB)", lambda f: megabytes(sum(f["crawl_sent"].values())))
    row("  Drive requests / files held after it", lambda f: f"{f['crawl_requests']} / {f['crawl_files']} = "
        f"{f['crawl_requests'] / max(1, f['crawl_files']):.2f}")
    row("an update: hours at the default pacing", lambda f: f"{f['update_hours_mean']:.2f}")
    row("  checkpoints (mean)", lambda f: f"{f['update_checkpoints_mean']:.1f}")
    for name in KINDS:
        row(f"  sent, {KIND_WORDS[name]} (MB, mean / max)",
            lambda f, name=name: f"{megabytes(f['update_sent_mean'][name])} / {megabytes(f['update_sent_max'][name])}")
    row("  sent in all (MB, mean / max)",
        lambda f: f"{megabytes(f['update_total_mean'])} / {megabytes(f['update_total_max'])}")
    row("  new files + changed database and index (MB)", lambda f: megabytes(f["update_base_mean"]))
    row("  sent / that (mean / max, at week)",
        lambda f: f"{f['update_ratio_mean']:.2f} / {f['update_ratio_max']:.2f} ({f['update_ratio_max_at']})")
    row("  Drive requests (mean)", lambda f: f"{f['update_requests_mean']:.0f}")
    row("held / floor, the year's maximum (at)", lambda f: f"{f['held_floor_max']:.2f} ({f['held_floor_max_at']})")
    row("held at the end (MB)", lambda f: megabytes(f["held_end"]["total"]))
    row("  of it earlier revisions (MB, count)",
        lambda f: f"{megabytes(f['held_end']['earlier'])} ({f['held_end']['earlier_revisions']})")
    row("  floor at the end (MB)", lambda f: megabytes(f["floor_end"]))
    row("Drive requests a stored file, the year", lambda f: f"{f['requests']} / {f['files_end']} = "
        f"{f['requests'] / max(1, f['files_end']):.2f}")
    row(f"writes refused for rate ({args.rate:g}/s granted)", lambda f: f"{f['refused']}")
    if all(summed[label]["restore"] for label in labels):
        row("fresh runtime: restore s, index s, requests",
            lambda f: f"{f['restore']['restore_seconds']:.1f}, {f['restore']['index_seconds']:.1f}, "
            f"{f['restore']['requests']}")
        row("  restored, index from the store",
            lambda f: f"{f['restore']['restored']}, {f['restore']['index_restored']}")
    row("sessions' exit statuses", lambda f: ",".join(map(str, f["exits"])))

    checks = [
        (f"what Drive holds <= {HELD_GOAL}x the floor at every point",
         lambda f: f["held_floor_max"] <= HELD_GOAL, lambda f: f"{f['held_floor_max']:.2f}"),
        (f"an update uploads <= {UPDATE_UPLOAD_GOAL}x its new files and changed database and index",
         lambda f: f["update_ratio_max"] <= UPDATE_UPLOAD_GOAL, lambda f: f"max {f['update_ratio_max']:.2f}"),
        (f"Drive requests <= {REQUESTS_GOAL} a stored file (calm)",
         lambda f: f["requests"] / max(1, f["files_end"]) <= REQUESTS_GOAL,
         lambda f: f"{f['requests'] / max(1, f['files_end']):.2f}"),
        ("no write refused for rate when Drive grants the configured rate",
         lambda f: f["refused"] == 0, lambda f: f"{f['refused']}"),
        ("a fresh runtime restores (the database and the index from the store)",
         lambda f: bool(f["restore"] and f["restore"]["restored"] and f["restore"]["index_restored"]),
         lambda f: f"{f['restore']['restore_seconds'] + f['restore']['index_seconds']:.1f} s" if f["restore"]
         else "not yet"),
    ]
    for name, held, shown in checks:
        lines.append(f"goal: {name}: " + " | ".join(
            f"{label} {'met' if held(summed[label]) else 'NOT met'} ({shown(summed[label])})" for label in labels))
    lines.append("not judged here: the mirror's files a second against Drive's write rate, and uploads under "
                 "Drive's faults (bench/drive.py); the resume guarantees (the test suite)")
    return lines


# ------------------------------------------------------------------ main


def before_tree(folder: Path) -> Path:
    """BEFORE_COMMIT's tree, from git, under `folder`."""
    archive = folder / "before.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), BEFORE_COMMIT],
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "before-tree", filter="data")
    archive.unlink()
    return folder / "before-tree"


def variant_main(args) -> None:
    """One tree's year in this process, each session's line and the end printed as JSON."""
    folder = Path(args.variant_folder)
    folder.mkdir(parents=True, exist_ok=True)

    def emit(line: dict) -> None:
        with open(folder / "sessions.jsonl", "a") as handle:     # a run stopped early can still be read
            handle.write(json.dumps(line) + "\n")
        print(json.dumps({"session": line}), flush=True)

    with Year(args.variant, Path(args.tree), args, folder, emit) as year:
        print(json.dumps({"final": year.run()}), flush=True)


def read_results(folder: Path, args) -> dict:
    """A kept run's results: results.json, or the sessions each tree's year printed so far."""
    if (folder / "results.json").is_file():
        return json.loads((folder / "results.json").read_text())
    finals: dict = {"args": vars(args)}
    for label in ("before", "after"):
        path = folder / label / "sessions.jsonl"
        if path.is_file():
            sessions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            finals[label] = {"label": label, "sessions": sessions, "restore": None}
    return finals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS, help="documents of the simulated court")
    parser.add_argument("--weeks", type=int, default=52, help="weekly updates after the first crawl")
    parser.add_argument("--crawl-sessions", type=int, default=7, help="sessions the first crawl takes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=200.0, help="Drive writes a second, granted and configured")
    parser.add_argument("--crawl-seconds", type=float, default=0.0,
                        help="the first crawl session's seconds foreseen (0: from the court's size)")
    parser.add_argument("--prose", choices=("record", "plain"), default="record",
                        help="the court's texts: as long as the record's, or the short plain ones")
    parser.add_argument("--only", choices=("before", "after"))
    parser.add_argument("--parallel", action="store_true", help="before and after at once")
    parser.add_argument("--keep", metavar="DIR", help="keep the workspaces in DIR")
    parser.add_argument("--before-tree", metavar="DIR", help=f"{BEFORE_COMMIT}'s tree already taken from git")
    parser.add_argument("--report", metavar="DIR", help="print the lines and summary of a run kept in DIR")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--variant-folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        tree, mode, env_json, now = args.worker
        print(json.dumps(session_worker(tree, mode, env_json, now)), flush=True)
        return
    if args.variant:
        variant_main(args)
        return
    if args.report:
        finals = read_results(Path(args.report), args)
        args = argparse.Namespace(**finals.pop("args"))
        for label in ("before", "after"):
            for line in finals.get(label, {}).get("sessions", ()):
                print(session_text(label, line))
        print("\n".join(report(finals, args)))
        return

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kycourt-store-year-"))
    root.mkdir(parents=True, exist_ok=True)
    labels = [label for label in ("before", "after") if args.only in (None, label)]
    trees = {"after": REPO}
    if "before" in labels:
        trees["before"] = Path(args.before_tree) if args.before_tree else before_tree(root)
    finals: dict[str, dict] = {}
    lock = threading.Lock()

    def run_variant(label: str) -> None:
        command = [sys.executable, __file__, "--variant", label, "--tree", str(trees[label]),
                   "--variant-folder", str(root / label)] + [
            f"--{name.replace('_', '-')}={value}" for name, value in vars(args).items()
            if name in ("docs", "weeks", "crawl_sessions", "seed", "rate", "crawl_seconds", "prose")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
        for raw in process.stdout:
            message = json.loads(raw)
            with lock:
                if "session" in message:
                    print(session_text(label, message["session"]), flush=True)
                else:
                    finals[label] = message["final"]
        if process.wait() != 0:
            print(f"{label}: the year stopped (exit {process.returncode})", flush=True)

    try:
        if args.parallel:
            threads = [threading.Thread(target=run_variant, args=(label,)) for label in labels]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            for label in labels:
                run_variant(label)
        (root / "results.json").write_text(json.dumps({"args": vars(args), **finals}, indent=1))
        if finals:
            print("\n".join(report(finals, args)), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
