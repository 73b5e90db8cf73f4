#!/usr/bin/env python
"""Torture: SIGKILL `kycourt-pipeline run` at seeded instants in every stage, then prove nothing was lost.

    .venv/bin/python scripts/torture.py --kills 20          # the full version (a few minutes)
    .venv/bin/python scripts/torture.py --kills 5 --docs 160   # what tests/test_torture.py runs

What it does:
- Two simulated courts with the same seed and the full fault catalogue
  (pacing off) run in this process. Against the first, an uninterrupted
  "clean" run goes to completion in the background.
- Against the second, `kycourt-pipeline run` runs as a subprocess in its own
  process group (its extract workers included) and is SIGKILLed (os.killpg)
  at a seeded random instant inside a chosen stage: restore, discover,
  backfill (the workspace's pdf_backup/ holds a few legacy files), download,
  extract, verify. The stage is read from the workspace: a `.restore-*`
  folder, status.json's `phase` (written when a stage starts), and the
  inventories verify rewrites. A restore round first deletes the workspace
  (all but pdf_backup/): a fresh runtime that must restore from the store.
- Then both sides run until status.json says done and verify PASSes, and
  the end states are compared: the same documents with the same status,
  sha256, http_status (and size, pages, chars); the same store files under
  pdf_by_hash/ and text/, byte for byte; no .part files; every PDF named by
  its hash; the same failed inventory; verify PASS on both.

The transient-fault counters live in the court, so the killed side sees
each bad answer once across all its runs, as the clean side does. An
attempt is committed before its request is sent, so a kill may cost the
document in flight one attempt; `attempts` is therefore not compared, only
the verdicts. Exit status 0 when every invariant holds, 1 otherwise.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from notebook_builder.cells.c12_queues import WorkQueues  # noqa: E402
from notebook_builder.cells.c20_store import sha256_file  # noqa: E402
from notebook_builder.simcourt import SimCourt  # noqa: E402

CAP = 2 * 1024 * 1024
STAGES = ("restore", "discover", "backfill", "download", "extract", "verify")
# How long after a stage is first seen the kill may come (seconds): short stages get short windows
# (backfill of the legacy files: 30-70 ms here, measured; a window of 0.08 s missed it once in a suite run;
# discovery: the crawl downloads what each of its units found before the next, so a unit lasts tens of ms).
KILL_WINDOW = {"restore": 0.01, "discover": 0.02, "backfill": 0.02, "download": 1.5, "extract": 1.0,
               "verify": 0.08}
WEIGHTS = {"restore": 2, "discover": 2, "backfill": 1, "download": 4, "extract": 3, "verify": 1}
# Stages whose target makes the child run through download (so aiming at them early would use it up).
CONSUMING = ("extract", "verify")
RUN_TIMEOUT = 600
COMPARED_COLUMNS = ("status", "sha256", "http_status", "size_bytes", "local_pdf", "pages",
                    "extracted_chars", "likely_scanned")


@dataclass
class TortureReport:
    kills: int = 0
    misses: int = 0                       # rounds whose process ended before the kill instant
    stages_hit: Counter = field(default_factory=Counter)
    fresh_runtimes: int = 0               # rounds that deleted the workspace first
    completion_runs: int = 0
    clean_runs: int = 0
    invariants: int = 0                   # individual checks that held
    failures: list[str] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)   # documents per planned fault
    store_temp_leftovers: int = 0         # .tmp-* files a kill left in the store (never listed)
    reader_reads: int = 0                 # counts a concurrent reader made of the killed side's database
    seconds: float = 0.0
    clean_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def figures(self) -> str:
        stages = ", ".join(f"{stage} {self.stages_hit[stage]}" for stage in STAGES)
        faulty = sum(count for fault, count in self.faults.items() if fault != "ok")
        lines = [
            f"kills survived: {self.kills} (rounds that ended before the kill: {self.misses}; "
            f"fresh runtimes: {self.fresh_runtimes})",
            f"stages hit: {stages}",
            f"faults injected: {self.kills} SIGKILLs, {faulty} faulty documents of "
            f"{sum(self.faults.values())} ({len(self.faults) - 1} kinds)",
            f"invariants checked: {self.invariants} held, {len(self.failures)} failed",
            f"runs to completion: {self.completion_runs} after the kills, {self.clean_runs} clean",
            f"store .tmp-* leftovers of killed uploads: {self.store_temp_leftovers}",
            f"concurrent reader: {self.reader_reads} reads of the killed side's database",
            f"total time: {self.seconds:.1f}s (clean run {self.clean_seconds:.1f}s)",
        ]
        lines += [f"FAILED: {failure}" for failure in self.failures[:40]]
        return "\n".join(lines)


class Reader(threading.Thread):
    """A user watching progress from another process: a fresh connection, one count, close, every
    `interval` seconds (as `watch sqlite3 ky_court.sqlite "select ..."` does). Errors other than a
    missing table (before the first run creates it) or a busy database are recorded."""

    def __init__(self, path: Path, interval: float = 0.1):
        super().__init__(daemon=True, name="reader")
        self.path, self.interval = path, interval
        self.stop = threading.Event()
        self.reads = 0
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            if self.path.exists():
                try:
                    conn = sqlite3.connect(str(self.path), timeout=5)
                    try:
                        conn.execute("SELECT status, count(*) FROM documents GROUP BY 1").fetchall()
                        self.reads += 1
                    finally:
                        conn.close()
                except sqlite3.OperationalError as exc:
                    if "no such table" not in str(exc) and "locked" not in str(exc):
                        self.errors.append(str(exc))
                except sqlite3.DatabaseError as exc:
                    self.errors.append(str(exc))
            self.stop.wait(self.interval)

    def __enter__(self) -> "Reader":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.join()


# ------------------------------------------------------------------ setup


def make_court(docs: int, seed: int) -> SimCourt:
    """The test_end_to_end court, scaled: full fault catalogue, late documents, shard splitting."""
    return SimCourt(docs, seed=seed, results_limit=40, max_page=25, late_docs=max(1, docs // 40),
                    first_year=2020, last_year=2026, search_fault_rate=0.03,
                    oversize_bytes=CAP + 1024 * 1024)


def pipeline_env(court: SimCourt, root: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KY_")}
    env.update({
        "KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"),
        "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.01",
        "KY_BACKOFF_CAP": "0.05", "KY_MAX_PDF_BYTES": str(CAP), "KY_FIRST_YEAR": "2020",
        "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "25", "KY_CONVERGENCE_DELTA": "1",
        "KY_CHECKPOINT_SECONDS": "1", "KY_EXTRACT_TIMEOUT": "30", "KY_WORKERS": "2",
        "KY_PROGRESS": "0", "PYTHONPATH": str(REPO_ROOT),
    })
    return env


def legacy_backups(court: SimCourt, seed: int) -> dict[str, bytes]:
    """pdf_backup/ files: three court PDFs under their document id, unmatched PDFs, one non-PDF."""
    rng = random.Random(f"torture:{seed}:backup")
    plain = [doc for doc in court.documents if doc.fault == "ok" and not doc.late]
    files = {f"{doc.document_id}.pdf": court.pdf_bytes(doc.document_id) for doc in rng.sample(plain, 3)}
    for number in range(6):   # ~1 MiB each, so backfill lasts long enough to be hit
        files[f"legacy/scan-{number:02d}.pdf"] = b"%PDF-1.4\n%" + rng.randbytes(1024 * 1024)
    files["legacy/notes.txt"] = b"not a PDF: an operator's note\n"
    return files


def seed_workspace(root: Path, backups: dict[str, bytes]) -> None:
    folder = root / "workspace" / "pdf_backup"
    for name, data in backups.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def pipeline_command() -> list[str]:
    return [sys.executable, "-m", "notebook_builder", "run"]


def run_to_completion(env: dict[str, str], root: Path, label: str, max_runs: int = 6) -> tuple[int, int]:
    """Runs until status.json says done and verify PASSes; returns (runs, last exit status)."""
    status = None
    for number in range(1, max_runs + 1):
        with open(root / f"{label}-{number}.log", "wb") as log:
            status = subprocess.run(pipeline_command(), env=env, cwd=REPO_ROOT, stdout=log,
                                    stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT).returncode
        document = read_status(root / "workspace")
        if status == 0 and document.get("done") and document.get("verify") == "PASS":
            return number, status
    return max_runs, status


# ------------------------------------------------------------ observation


def read_status(workspace: Path) -> dict:
    try:
        return json.loads((workspace / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def observe_stage(workspace: Path, spawned_ns: int) -> str:
    """The stage the child is in, read from the workspace: restore/discover/.../verify, or startup."""
    if not (workspace / "ky_court.sqlite").is_file():
        return "restore" if any(workspace.glob(".restore-*")) else "startup"
    if _mtime_ns(workspace / "status.json") < spawned_ns:
        return "restore" if any(workspace.glob(".restore-*")) else "startup"
    phase = read_status(workspace).get("phase", "startup")
    if phase == "ocr":
        phase = "extract"   # the ocr stage consumes extracted documents: a kill there is one in extract's wake
    if phase == "extract" and (_mtime_ns(workspace / "document_inventory.csv") >= spawned_ns
                               or (workspace / ".document_inventory.csv.tmp").exists()):
        return "verify"   # verify writes no phase until its end; its inventories say it began
    return phase if phase in STAGES else "startup"


def reachable_stages(workspace: Path, store: Path, env: dict[str, str]) -> set[str]:
    """Stages a new run would still pass through with work to do, from the queues of the database."""
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c10_database import Database, is_sqlite_file
    stages = {"discover", "verify"}
    if (store / "db" / "ky_court").is_dir() and any((store / "db" / "ky_court").iterdir()):
        stages.add("restore")
    db_path = workspace / "ky_court.sqlite"
    if not (db_path.is_file() and is_sqlite_file(db_path)):
        return stages | {"backfill", "download", "extract"}
    db = Database.open_readonly(db_path)
    try:
        queues = WorkQueues(db).queue_sizes(load_config(env))
        converged = db.kv_get("discovery_converged_at") is not None
        backfilled = db.kv_get("backfill_done") is not None
    except sqlite3.OperationalError:   # a hot journal of the killed run: only its next run rolls it back
        return stages | {"backfill", "download", "extract"}
    finally:
        db.close()
    if not backfilled:
        stages.add("backfill")
    if not converged or queues["download"]:
        stages.add("download")
    if not converged or queues["download"] or queues["extract"]:
        stages.add("extract")
    return stages


def choose_target(report: TortureReport, reach: set[str], download_quota: int, rng: random.Random) -> str:
    candidates = set(reach)
    if "download" in reach and report.stages_hit["download"] < download_quota:
        candidates -= set(CONSUMING)
    for stage in ("backfill", "discover", "download", "restore", "extract", "verify"):   # a run's order
        if stage in candidates and report.stages_hit[stage] == 0:
            return stage
    ordered = sorted(candidates)
    return rng.choices(ordered, [WEIGHTS[stage] for stage in ordered])[0]


def kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:   # extract workers die with the group; wait until they are gone
        try:
            os.killpg(child.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def killed_round(env: dict[str, str], root: Path, target: str, window: float, rng: random.Random,
                 number: int) -> str | None:
    """Starts a run, waits for `target`, kills it a random instant later; the stage hit, or None."""
    workspace = root / "workspace"
    spawned_ns = time.time_ns()
    with open(root / f"kill-{number:02d}.log", "wb") as log:
        child = subprocess.Popen(pipeline_command(), env=env, cwd=REPO_ROOT, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while child.poll() is None and time.monotonic() < deadline:
            if observe_stage(workspace, spawned_ns) == target:
                break
            time.sleep(0.002)
        else:
            return None
        time.sleep(rng.uniform(0, window))
        stage = observe_stage(workspace, spawned_ns)
        if child.poll() is not None:
            return None
        os.killpg(child.pid, signal.SIGKILL)
        return stage
    finally:
        kill_group(child)


def fresh_runtime(workspace: Path) -> None:
    """A new Colab runtime: the workspace is gone, only the operator's pdf_backup/ is put back."""
    for entry in workspace.iterdir():
        if entry.name == "pdf_backup":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            # missing_ok: the Reader's connection, closing as the last one, may remove the -wal
            # and -shm between the listing and here (it failed so at HEAD too, 3 runs in 5).
            entry.unlink(missing_ok=True)


# ------------------------------------------------------------- comparison


class Checker:
    def __init__(self, report: TortureReport):
        self.report = report

    def check(self, held: bool, what: str) -> bool:
        if held:
            self.report.invariants += 1
        else:
            self.report.failures.append(what)
        return held


def document_rows(root: Path) -> dict[str, dict]:
    conn = sqlite3.connect(f"file:{root / 'workspace' / 'ky_court.sqlite'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {row["document_id"]: dict(row) for row in conn.execute("SELECT * FROM documents")}
    finally:
        conn.close()


def wrong_verdicts(court: SimCourt, root: Path) -> list[tuple[str, str, str]]:
    """Documents whose (status, http_status) in root's workspace is not what the court planned."""
    rows = document_rows(root)
    return [(doc.document_id[:12], doc.fault, rows[doc.document_id]["status"]) for doc in court.documents
            if (rows[doc.document_id]["status"], rows[doc.document_id]["http_status"])
            != (doc.expected_status, doc.expected_http_status)]


def store_files(store: Path, folder: str) -> dict[str, Path]:
    base = store / folder
    if not base.is_dir():
        return {}
    return {entry.name: entry for entry in base.iterdir() if entry.is_file() and not entry.name.startswith(".")}


def failed_ids(store: Path) -> set[str]:
    try:
        text = (store / "failed_inventory.csv").read_text(encoding="utf-8")
    except OSError:
        return set()
    return {row["document_id"] for row in csv.DictReader(io.StringIO(text))}




def extracted_by(root: Path, document_id: str) -> list[tuple[str, str]]:
    """(engine, outcome) of each extraction attempt of a document, from the workspace's log."""
    conn = sqlite3.connect(f"file:{root / 'workspace' / 'ky_court.sqlite'}?mode=ro", uri=True)
    try:
        return [tuple(row) for row in conn.execute(
            "SELECT engine, outcome FROM extraction_log WHERE document_id = ? ORDER BY log_id", (document_id,))]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def compare(report: TortureReport, killed: Path, clean: Path, court: SimCourt, statuses: dict[str, int]) -> None:
    checker = Checker(report)
    check = checker.check
    for side, status in statuses.items():
        check(status == 0, f"{side}: the final run exits 0 (verify PASS), got {status}")
    for side, root in (("killed", killed), ("clean", clean)):
        document = read_status(root / "workspace")
        check(document.get("verify") == "PASS" and document.get("done") is True,
              f"{side}: status.json says done and PASS ({document.get('verify')}, {document.get('done')})")
        parts = list((root / "workspace" / "tmp").glob("*.part"))
        check(not parts, f"{side}: no .part files left ({[p.name for p in parts][:3]})")
    ours, theirs = document_rows(killed), document_rows(clean)
    check(set(ours) == set(theirs), f"same documents: {len(set(ours) ^ set(theirs))} differ")
    check(set(theirs) == {doc.document_id for doc in court.documents}, "every court document is in the table")
    for document_id in sorted(set(ours) & set(theirs)):
        for column in COMPARED_COLUMNS:
            mine, expected = ours[document_id][column], theirs[document_id][column]
            check(mine == expected,
                  f"{document_id[:12]} ({court.document(document_id).fault}): {column} {mine!r} after kills, "
                  f"{expected!r} clean (attempts {ours[document_id]['attempts']} vs "
                  f"{theirs[document_id]['attempts']}, last_error {ours[document_id]['last_error']!r}; "
                  f"extracted by {extracted_by(killed, document_id)} after kills, {extracted_by(clean, document_id)} clean)")
    for folder in ("pdf_by_hash", "text"):
        mine, expected = store_files(killed / "store", folder), store_files(clean / "store", folder)
        check(set(mine) == set(expected), f"store {folder}/: same names ({len(set(mine) ^ set(expected))} differ)")
        for name in sorted(set(mine) & set(expected)):
            check(mine[name].read_bytes() == expected[name].read_bytes(), f"store {folder}/{name}: same bytes")
        if folder == "pdf_by_hash":
            for name, path in mine.items():
                check(sha256_file(path) == name.removesuffix(".pdf"), f"store {folder}/{name} holds its hash")
    for name, path in store_files(killed / "workspace", "pdf_by_hash").items():
        check(sha256_file(path) == name.removesuffix(".pdf"), f"workspace pdf_by_hash/{name} holds its hash")
    check(failed_ids(killed / "store") == failed_ids(clean / "store"), "same failed_inventory.csv documents")
    report.store_temp_leftovers = sum(1 for path in (killed / "store").rglob(".tmp-*"))


# ------------------------------------------------------------------ main


def torture(kills: int = 20, docs: int = 300, seed: int = 11, root: Path | None = None,
            log=print, reader: bool = True) -> TortureReport:
    started = time.monotonic()
    report = TortureReport()
    root = Path(root) if root is not None else Path(f"torture-{seed}")
    if root.exists():
        shutil.rmtree(root)
    killed_root, clean_root = root / "killed", root / "clean"
    rng = random.Random(f"torture:{seed}:kills")
    with make_court(docs, seed) as clean_court, make_court(docs, seed) as court:
        report.faults = Counter(doc.fault for doc in court.documents)
        backups = legacy_backups(court, seed)
        for side in (killed_root, clean_root):
            seed_workspace(side, backups)
        clean_env, env = pipeline_env(clean_court, clean_root), pipeline_env(court, killed_root)
        clean_result: dict = {}

        def clean_side() -> None:
            clean_started = time.monotonic()
            clean_result["runs"], clean_result["status"] = run_to_completion(clean_env, clean_root, "clean")
            clean_result["seconds"] = time.monotonic() - clean_started

        clean_thread = threading.Thread(target=clean_side, name="clean-run", daemon=True)
        clean_thread.start()

        download_quota = max(1, kills // 4)
        windows = dict(KILL_WINDOW)
        rounds = 0
        watcher = Reader(killed_root / "workspace" / "ky_court.sqlite")
        if reader:
            watcher.start()
        while report.kills < kills and rounds < 4 * kills:
            rounds += 1
            reach = reachable_stages(killed_root / "workspace", killed_root / "store", env)
            target = choose_target(report, reach, download_quota, rng)
            if target == "restore":
                fresh_runtime(killed_root / "workspace")
                report.fresh_runtimes += 1
            stage = killed_round(env, killed_root, target, windows[target], rng, rounds)
            if stage is None:
                report.misses += 1
                windows[target] /= 2   # the stage (or the run) ended inside the window: aim closer
                log(f"round {rounds:2d}: aimed at {target:8s} - the run ended first")
                continue
            report.kills += 1
            report.stages_hit[stage] += 1
            if stage != target:   # the stage was shorter than its window here: aim closer next time
                windows[target] /= 2
            log(f"round {rounds:2d}: aimed at {target:8s} - SIGKILL in {stage}")
        report.completion_runs, final_status = run_to_completion(env, killed_root, "finish")
        if reader:
            watcher.stop.set()
            watcher.join()
            report.reader_reads = watcher.reads
            report.failures += [f"concurrent reader: {error}" for error in watcher.errors[:5]]
        clean_thread.join()
        report.clean_runs, report.clean_seconds = clean_result["runs"], clean_result["seconds"]
        compare(report, killed_root, clean_root, clean_court,
                {"killed": final_status, "clean": clean_result["status"]})
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs to survive (default 20)")
    parser.add_argument("--docs", type=int, default=300, help="documents in the simulated court (default 300)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the court and of the kill instants")
    parser.add_argument("--dir", default=None, help="working directory (default ./torture-<seed>; replaced)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory afterwards")
    parser.add_argument("--no-reader", action="store_true",
                        help="no concurrent reader of the killed side's database (on by default)")
    args = parser.parse_args(argv)
    root = Path(args.dir or f"torture-{args.seed}")
    report = torture(args.kills, args.docs, args.seed, root, reader=not args.no_reader)
    print(report.figures())
    print("torture: PASS" if report.ok else "torture: FAIL")
    if report.ok and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
