"""Benchmark: Google Drive as the store, at the real scale, against the simulated Drive.

    .venv/bin/python bench/drive.py [--docs 240] [--crawl-docs 60] [--latency 0.15] [--rate 3]
                                    [--full 98724] [--pipeline-docs 200] [--kills 4] [--skip-before] [--skip-calm]

Every Drive request crosses loopback through the real pydrive2 +
googleapiclient stack to notebook_builder.simdrive, which answers each one
`--latency` seconds late and accepts `--rate` writes a second per user
(403 userRateLimitExceeded / 429 past it); DriveStore paces itself to the
same rate.

1. Mirror: `--docs` documents, each a court PDF (simcourt's) and a ~9 KB
   text, handed to StoreMirror as the stages do (put_many per group), then
   drained, then the database snapshot and status.json written as verify
   writes them, then a fresh runtime's restore reads the store back.
   `before`: the layout and protocol of an older version (one file per
   text, every upload resumable: two requests), at the same pacing, calm;
   `calm`: today's layout; `faults`: the same with Drive's weather on (the
   simulated Drive's switches: 3% 503s, 1% dropped connections, 3% phantom
   writes committed then answered 500 or not at all, new files listed 2 s
   late, list pages of 100, tokens that expire every 30 s; the write rate
   as in every round: a burst of 3, then 403/429). Printed: Drive requests per stored file for the mirror
   and with the restore (goals <= 1.1 calm, <= 1.3 under faults), where
   the requests went (by endpoint and answer), store files per document
   (goal <= 1.05 + a constant), files/s, every title held once, and the
   projected hours to mirror the full corpus (`--full` documents).
2. Crawl: the Download stage at the default pacing (KY_PACING=1, 0.3-0.5 s
   between downloads) over `--crawl-docs` documents of the simulated court,
   once with a local directory as the store and once with the simulated
   Drive: seconds per document of each (the ratio shows whether the mirror
   holds up the crawl) and the projected hours of the crawl for the full
   corpus, on loopback and with `--latency` added to each court request,
   beside the mirror's.
3. Fresh runtime at full scale: a Drive store holding a snapshot of
   `--full` documents (every one extracted), their PDFs and their text
   packs (metadata only: the simulated Drive holds no bytes for them);
   a blank workspace runs restore and the download stage's recover (what a
   run does before its stages) and is then runnable. Printed: Drive
   requests by kind, PDFs downloaded (goal 0), and seconds (goal < 60).
4. The whole pipeline under Drive's weather (the held-out Drive check's
   shape): `--pipeline-docs` documents of a calm simulated court,
   KY_STORE=drive, part 1's faults on; `--kills` runs SIGKILLed 5-25 s in,
   a run until done, then a fresh runtime (the workspace gone) run until
   done, each `kycourt-pipeline run` in a process of its own. Printed: the
   files Drive holds at the end (every folder), requests and uploads
   (inserts and updates, refused ones too) per stored file (goal <= 1.2
   uploads), writes refused for rate (goal 0), status.json's puts, and
   where the requests went, by endpoint and answer.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")

from notebook_builder.cells.c00_config import RunClock, load_config  # noqa: E402
from notebook_builder.cells.c05_durable import durable_write  # noqa: E402
from notebook_builder.cells.c06_layout import pdf_store_name, text_store_name  # noqa: E402
from notebook_builder.cells.c10_database import Database  # noqa: E402
from notebook_builder.cells.c12_queues import WorkQueues  # noqa: E402
from notebook_builder.cells.c15_discovery_state import DiscoveryState  # noqa: E402
from notebook_builder.cells.c17_snapshots import StoreState, checkpoint  # noqa: E402
from notebook_builder.cells.c34_mirror import StoreMirror  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.drive_store import (TEXT_PACK_MEMBERS, DriveStore, connect_drive,  # noqa: E402
                                                text_pack_description)
from notebook_builder.simcourt import SimCourt  # noqa: E402
from notebook_builder.simdrive import SimDrive  # noqa: E402

FOLDER = "ky_court"
GROUP = 10          # documents a put_many hands over at a time (the stages' groups)
# Drive's weather (part 1's `faults` round): the simulated Drive's switches.
FAULTS = {"error_rate": 0.03, "drop_rate": 0.01, "phantom_rate": 0.03, "list_delay": 2.0,
          "page_limit": 100, "token_seconds": 30.0}


def drive_requests(sim: SimDrive) -> int:
    return sum(n for kind, n in sim.requests.items() if kind != "token")


def stored_files(sim: SimDrive) -> int:
    return len(sim.files_in(f"{FOLDER}/pdf_by_hash")) + len(sim.files_in(f"{FOLDER}/text"))


def titles_held_twice(sim: SimDrive) -> list[str]:
    """Store titles the simulated Drive holds more than once in one folder (folders included)."""
    twice = []
    for folder in ("", FOLDER, f"{FOLDER}/pdf_by_hash", f"{FOLDER}/text"):
        held = Counter(f["title"] for f in sim.files_in(folder) + sim.folders_in(folder)) if folder \
            else Counter(f["title"] for f in sim.folders_in(""))
        twice += [f"{folder}/{title} x{count}" for title, count in held.items() if count > 1]
    return twice


# ------------------------------------------------------------------------------ 1. mirror


def corpus_files(docs: int, folder: Path) -> list[tuple[tuple[str, Path], tuple[str, Path]]]:
    court = SimCourt(docs=docs, seed=3, faults=False)
    rng = random.Random(3)
    words = ["court", "appeal", "opinion", "affirmed", "reversed", "Commonwealth", "Kentucky", "judgment"]
    pairs = []
    for doc in court.documents:
        data = court.pdf_bytes(doc.document_id)
        sha = hashlib.sha256(data).hexdigest()
        pdf = folder / pdf_store_name(sha)
        text = folder / text_store_name(sha)
        pdf.parent.mkdir(parents=True, exist_ok=True)
        text.parent.mkdir(parents=True, exist_ok=True)
        pdf.write_bytes(data)
        text.write_text(" ".join(rng.choice(words) for _ in range(1300)))
        pairs.append(((pdf_store_name(sha), pdf), (text_store_name(sha), text)))
    return pairs


def mirror_round(kind: str, pairs, folder: Path, latency: float, rate: float) -> dict:
    weather = FAULTS if kind == "faults" else {}
    with SimDrive(latency=latency, write_rate=rate, write_burst=3.0, **weather) as sim:
        options = {"multipart_limit": -1, "deferred_uploads": False} if kind == "before" else {}
        store = DriveStore(connect_drive(sim.api_root), FOLDER, writes_per_second=rate, **options)
        if kind == "before":
            store.text_pack_members = 0          # one file per text
        workspace = folder / kind
        workspace.mkdir()
        db = Database.open(workspace / "ky_court.sqlite")
        mirror = StoreMirror(store, clock=RunClock(36000.0))
        mirror.attach(db)
        started = time.perf_counter()
        for start in range(0, len(pairs), GROUP):
            group = pairs[start:start + GROUP]
            mirror.put_many([pdf for pdf, _ in group])
            mirror.put_many([text for _, text in group])
        handed_over = time.perf_counter() - started
        left = mirror.catch_up(workspace)["left"]
        seconds = time.perf_counter() - started
        # verify's writes: the snapshot and status.json, as the store's mutable names
        snapshot = workspace / "checkpoint" / "ky_court.sqlite"
        checkpoint(workspace / "ky_court.sqlite", snapshot)
        status = workspace / "status.json"
        durable_write(status, b'{"done": true}\n')
        held = mirror.put("ky_court.sqlite", snapshot, mutable=True) and mirror.put("status.json", status,
                                                                                   mutable=True)
        db.close()
        mirrored = drive_requests(sim)
        mirror_answers = Counter(sim.answers)
        time.sleep(weather.get("list_delay", 0.0))   # a new runtime takes longer than that to start
        restored = fresh_restore(sim, folder / f"{kind}-fresh")
        files = stored_files(sim) + len(sim.files_in(FOLDER))
        return {"kind": kind, "seconds": seconds, "handed_over": handed_over, "left": left, "held": held,
                "mirror_requests": mirrored, "requests": drive_requests(sim), "files": files,
                "mirror_answers": mirror_answers, "restore_answers": Counter(sim.answers) - mirror_answers,
                "restored": restored, "twice": titles_held_twice(sim), "rejected": dict(sim.rejected),
                "limited": store.pacer.limited_count}


def fresh_restore(sim: SimDrive, workspace: Path) -> bool:
    """A fresh runtime's restore from the mirrored store (what a run does before its stages)."""
    from notebook_builder.cells.c40_restore import restore
    cfg = load_config(env={"KY_PROGRESS": "0", "KY_STORE": "drive", "KY_DRIVE_API": sim.api_root,
                           "KY_BACKOFF_BASE": "0.5", "KY_BACKOFF_CAP": "4"},
                      WORKSPACE=str(workspace), DRIVE_FOLDER=FOLDER)
    ctx = open_context(cfg)
    try:
        return restore(ctx).restored
    finally:
        ctx.close()


def answers_by_endpoint(answers: Counter) -> str:
    """'insert 240 (409 5, 500 3)': requests by endpoint, the answers other than 200 in brackets."""
    kinds: dict[str, Counter] = {}
    for key, count in answers.items():
        kind, outcome = key.split(" ", 1)
        kinds.setdefault(kind, Counter())[outcome] += count
    parts = []
    for kind, outcomes in sorted(kinds.items()):
        if kind == "token":
            continue
        odd = ", ".join(f"{outcome} {count}" for outcome, count in sorted(outcomes.items())
                        if outcome not in ("200", "308"))
        parts.append(f"{kind} {sum(outcomes.values())}" + (f" ({odd})" if odd else ""))
    return ", ".join(parts)


# ------------------------------------------------------------------------------- 2. crawl


def crawl_round(kind: str, court: SimCourt, ids: list[str], folder: Path, latency: float, rate: float) -> dict:
    from notebook_builder.cells.c70_download import download
    env = {"KY_PROGRESS": "0", "KY_PACING": "1"}
    sim = None
    if kind == "drive":
        sim = SimDrive(latency=latency, write_rate=rate, write_burst=3.0)
        env.update({"KY_STORE": "drive", "KY_DRIVE_API": sim.start(), "KY_DRIVE_WRITES": str(rate)})
    else:
        env["KY_STORE"] = str(folder / kind / "store")
    try:
        cfg = load_config(env=env, WORKSPACE=str(folder / kind / "workspace"), API_BASE=court.base_url)
        ctx = open_context(cfg)
        DiscoveryState(ctx.open_database()).upsert_discovered({"document_id": d} for d in ids)
        started = time.perf_counter()
        result = download(ctx)
        crawl = time.perf_counter() - started
        backlog = StoreState(ctx.db).store_pending_count()
        ctx.mirror.catch_up(ctx.workspace)
        drain = time.perf_counter() - started - crawl
        ctx.close()
        assert result.downloaded == len(ids), result
        return {"kind": kind, "crawl": crawl, "drain": drain, "backlog": backlog,
                "requests_per_doc": result.requests / len(ids)}
    finally:
        if sim is not None:
            sim.stop()


# ------------------------------------------------------------------- 3. fresh runtime, full


def full_store(sim: SimDrive, docs: int, folder: Path) -> None:
    """A Drive store of `docs` extracted documents: the snapshot's bytes, metadata for the rest."""
    db_path = folder / "seed" / "ky_court.sqlite"
    db = Database.open(db_path)
    rng = random.Random(7)
    rows, shas = [], []
    for number in range(docs):
        sha = hashlib.sha256(f"doc {number}".encode()).hexdigest()
        shas.append(sha)
        rows.append((f"D{number:08d}", f"20{10 + number % 16}-CA-{number:06d}", "extracted", 1, 200, sha,
                     rng.randint(20_000, 900_000), pdf_store_name(sha), 5, 9000, 0,
                     "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
    with db.transaction():
        db.conn.executemany(
            "INSERT INTO documents(document_id, case_number, status, attempts, http_status, sha256, size_bytes,"
            " local_pdf, pages, extracted_chars, likely_scanned, discovered_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()
    snapshot = folder / "seed" / "snapshot.sqlite"
    checkpoint(db_path, snapshot)
    root = sim.add_folder("root", FOLDER)["id"]
    sim.add_file(root, "ky_court.sqlite", snapshot.read_bytes())
    pdfs = sim.add_folder(root, "pdf_by_hash")["id"]
    for sha, row in zip(shas, rows):
        sim.add_file(pdfs, f"{sha}.pdf", None, size=row[6], md5="0" * 32, mime_type="application/pdf")
    texts = sim.add_folder(root, "text")["id"]
    for start in range(0, docs, TEXT_PACK_MEMBERS):
        members = {f"{sha}.txt": (9000, "0" * 32) for sha in shas[start:start + TEXT_PACK_MEMBERS]}
        sim.add_file(texts, f"pack-{hashlib.sha256(str(start).encode()).hexdigest()}.zip", None,
                     size=9000 * len(members) // 3, md5="0" * 32, description=text_pack_description(members))


def fresh_runtime(docs: int, folder: Path, latency: float, rate: float) -> dict:
    from notebook_builder.cells.c40_restore import restore
    from notebook_builder.cells.c70_download import recover
    with SimDrive(latency=0.0, write_rate=rate) as sim:
        seeding = time.perf_counter()
        full_store(sim, docs, folder)
        seeding = time.perf_counter() - seeding
        sim.latency = latency
        before = Counter(sim.requests)
        cfg = load_config(env={"KY_PROGRESS": "0", "KY_STORE": "drive", "KY_DRIVE_API": sim.api_root},
                          WORKSPACE=str(folder / "fresh"), DRIVE_FOLDER=FOLDER)
        started = time.perf_counter()
        ctx = open_context(cfg)
        restored = restore(ctx)
        db = ctx.open_database()
        recovered = recover(ctx)
        seconds = time.perf_counter() - started
        queues = WorkQueues(db).queue_sizes(cfg)
        counts = WorkQueues(db).status_counts()
        ctx.close()
        spent = Counter(sim.requests)
        spent.subtract(before)
        return {"seconds": seconds, "seeding": seeding, "requests": dict(+spent), "restored": restored.restored,
                "store_only": recovered.store_only, "reverted": recovered.reverted, "queues": queues,
                "counts": counts}


# ---------------------------------------------------------------------- 4. the whole pipeline


def pipeline_round(docs: int, folder: Path, latency: float, rate: float, kills: int) -> dict:
    """`kills` runs SIGKILLed 5-25 s in, a run until done, then a fresh runtime until done: each run
    `kycourt-pipeline run` in a process of its own, with the Drive store under FAULTS."""
    court = SimCourt(docs, seed=9, faults=False, first_year=2020, last_year=2026)
    draw = random.Random(5)
    with court, SimDrive(latency=latency, write_rate=rate, write_burst=3.0, **FAULTS) as sim:
        env = {**os.environ, "KY_PROGRESS": "0", "KY_PACING": "0", "KY_STORE": "drive",
               "KY_DRIVE_API": sim.api_root, "KY_DRIVE_FOLDER": FOLDER, "KY_BACKOFF_BASE": "1",
               "KY_BACKOFF_CAP": "8", "KY_FIRST_YEAR": "2020", "KY_LAST_YEAR": "2026",
               "KY_CONVERGENCE_DELTA": "1", "KY_API_BASE": court.base_url,
               "KY_WORKSPACE": str(folder / "workspace")}
        command = [sys.executable, "-m", "notebook_builder.cli", "run"]
        quiet = {"env": env, "cwd": REPO, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        statuses = []
        started = time.perf_counter()
        for _ in range(kills):
            process = subprocess.Popen(command, **quiet)
            try:
                statuses.append(process.wait(draw.uniform(5, 25)))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                statuses.append("killed")
        for fresh in (False, True):
            if fresh:
                shutil.rmtree(folder / "workspace")
                time.sleep(FAULTS["list_delay"])      # a new runtime takes longer than that to start
            for _ in range(3):
                status = subprocess.run(command, **quiet).returncode
                if status == 0:
                    break
            statuses.append(status)
        held = [file for file in sim.held().files if not file.trashed]
        answers = Counter(sim.answers)
        return {"seconds": time.perf_counter() - started, "statuses": statuses, "files": len(held),
                "requests": drive_requests(sim), "answers": answers, "twice": titles_held_twice(sim),
                "uploads": sum(n for key, n in answers.items() if key.startswith(("insert", "update", "upload_chunk"))),
                "status_puts": sim.uploaded.count.get(f"{FOLDER}/status.json", 0), "refused": sim.rate_refusals()}


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=240, help="documents mirrored in part 1")
    parser.add_argument("--crawl-docs", type=int, default=60, help="documents crawled in part 2")
    parser.add_argument("--latency", type=float, default=0.15, help="simulated Drive latency, seconds")
    parser.add_argument("--rate", type=float, default=3.0, help="Drive writes a second per user")
    parser.add_argument("--full", type=int, default=98_724, help="documents of the full corpus")
    parser.add_argument("--skip-before", action="store_true", help="part 1 without the old layout")
    parser.add_argument("--skip-calm", action="store_true", help="part 1 under faults only")
    parser.add_argument("--pipeline-docs", type=int, default=200, help="documents of part 4's whole pipeline")
    parser.add_argument("--kills", type=int, default=4, help="part 4's runs SIGKILLed before the one run to done")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    full_hours = {}
    print(f"simulated Drive: {args.latency * 1000:.0f} ms a request, {args.rate:g} writes/s; "
          f"full corpus {args.full} documents", flush=True)

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        pairs = corpus_files(args.docs, folder / "files")
        print(f"\n1. mirror: {args.docs} documents (a PDF, mean {sum(p.stat().st_size for (_, p), _ in pairs) / len(pairs) / 1024:.0f} KiB, "
              f"and a text, mean {sum(t.stat().st_size for _, (_, t) in pairs) / len(pairs) / 1024:.1f} KiB, each)", flush=True)
        kinds = ([] if args.skip_before else ["before"]) + ([] if args.skip_calm else ["calm"]) + ["faults"]
        for kind in kinds:
            result = mirror_round(kind, pairs, folder, args.latency, args.rate)
            goal = 1.3 if kind == "faults" else 1.1
            per_file = result["mirror_requests"] / result["files"]
            with_restore = result["requests"] / result["files"]
            per_doc = result["files"] / args.docs
            rate = result["files"] / result["seconds"]
            hours = args.full * per_doc / rate / 3600
            full_hours[kind] = hours
            faulted = sum(count for key, count in (result["mirror_answers"] + result["restore_answers"]).items()
                          if not key.endswith((" 200", " 308")) and not key.startswith("token"))
            print(f"  {kind:>6}: {result['files']} files, {result['requests']} requests ({faulted} answered with "
                  f"a fault) in {result['seconds']:.1f}s (handed over in {result['handed_over']:.2f}s, "
                  f"{result['left']} left, snapshot and status held: {result['held']}, restored: "
                  f"{result['restored']})\n"
                  f"          requests/file {per_file:.3f}, with the restore {with_restore:.3f} (goal <= {goal}), "
                  f"files/document {per_doc:.3f} (goal <= 1.05 + const), {rate:.2f} files/s -> mirror of "
                  f"the full corpus {hours:.1f} h\n"
                  f"          mirror: {answers_by_endpoint(result['mirror_answers'])}\n"
                  f"          restore: {answers_by_endpoint(result['restore_answers'])}\n"
                  f"          rejected {result['rejected']}, pacer slowed {result['limited']}x; titles held twice: "
                  f"{result['twice'] or 'none'}", flush=True)

        court = SimCourt(docs=args.crawl_docs, seed=5, faults=False)
        court.start()
        try:
            ids = [doc.document_id for doc in court.documents]
            print(f"\n2. crawl: the Download stage at the default pacing, {len(ids)} documents", flush=True)
            crawl = {}
            for kind in ("local", "drive"):
                crawl[kind] = crawl_round(kind, court, ids, folder / "crawl", args.latency, args.rate)
                result = crawl[kind]
                print(f"  {kind:>6} store: {result['crawl'] / len(ids):.3f} s/document "
                      f"({result['requests_per_doc']:.2f} court requests each); backlog at the end "
                      f"{result['backlog']} files, drained in {result['drain']:.1f}s", flush=True)
        finally:
            court.stop()
        ratio = crawl["drive"]["crawl"] / crawl["local"]["crawl"]
        loopback = crawl["drive"]["crawl"] / len(ids)
        with_latency = loopback + args.latency * crawl["drive"]["requests_per_doc"]
        print(f"  crawl with the Drive mirror / with a local store = {ratio:.3f} (1.0: the mirror does not "
              f"hold up the crawl)")
        print(f"\nprojected hours for {args.full} documents at the default pacing:")
        print(f"  crawl (downloads): {args.full * loopback / 3600:.1f} h on loopback, "
              f"{args.full * with_latency / 3600:.1f} h with {args.latency * 1000:.0f} ms a court request "
              f"(discovery's searches come on top)")
        for kind, hours in full_hours.items():
            print(f"  mirror {kind:>6}: {hours:.1f} h")
        if "faults" in full_hours:
            verdict = "met" if max(full_hours.get("calm", 0), full_hours["faults"]) <= args.full * with_latency / 3600 \
            else "NOT met"
            print(f"  goal mirror <= crawl: {verdict}")

        print(f"\n3. fresh runtime over a Drive store of {args.full} documents", flush=True)
        result = fresh_runtime(args.full, folder / "full", args.latency, args.rate)
        requests = result["requests"]
        print(f"  runnable in {result['seconds']:.1f}s (goal < 60 s) with {sum(requests.values())} Drive "
              f"requests {dict(sorted(requests.items()))}; restored={result['restored']}, "
              f"{result['store_only']} PDFs left in the store (fetched when a stage needs one), "
              f"{requests.get('media', 0) - 1} PDFs downloaded (goal 0), {result['reverted']} reverted; "
              f"queues {result['queues']}; (seeding the simulated Drive took {result['seeding']:.1f}s, "
              f"not counted)")

        print(f"\n4. the whole pipeline under Drive's weather: {args.pipeline_docs} documents, {args.kills} runs "
              f"killed, a run until done, then a fresh runtime", flush=True)
        result = pipeline_round(args.pipeline_docs, folder / "pipeline", args.latency, args.rate, args.kills)
        files = result["files"]
        print(f"  exit statuses {result['statuses']} in {result['seconds']:.0f}s: {files} files held, "
              f"{result['requests']} requests = {result['requests'] / files:.2f} a stored file, "
              f"{result['uploads']} uploads = {result['uploads'] / files:.3f} a stored file (goal <= 1.2), "
              f"{result['refused']} refused for rate (goal 0), status.json put {result['status_puts']} times\n"
              f"  {answers_by_endpoint(result['answers'])}\n"
              f"  titles held twice: {result['twice'] or 'none'}", flush=True)

if __name__ == "__main__":
    main()
