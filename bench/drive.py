"""Benchmark: Google Drive as the store, at the real scale, against the simulated Drive.

    .venv/bin/python bench/drive.py [--docs 100] [--crawl-docs 60] [--latency 0.15] [--rate 2]
                                    [--full 98724] [--skip-before]

Every Drive request crosses loopback through the real pydrive2 +
googleapiclient stack to notebook_builder.simdrive, which answers each one
`--latency` seconds late and accepts `--rate` writes a second per user
(403 userRateLimitExceeded / 429 past it); DriveStore paces itself to the
same rate (KY_DRIVE_WRITES, default 2).

1. Mirror: `--docs` documents, each a court PDF (simcourt's) and a ~9 KB
   text, handed to StoreMirror as the stages do (put_many per group), then
   drained. `before`: the layout and protocol before this change (one file
   per text, every upload resumable: two requests), at the same pacing;
   `after`: small files in one multipart request, texts in packs, uploads
   behind the crawl. Printed: Drive requests per stored file (goal <= 1.1),
   store files per document (goal <= 1.05 + a constant), files/s, and the
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
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")

from notebook_builder.cells.c00_config import RunClock, load_config  # noqa: E402
from notebook_builder.cells.c10_database import Database, checkpoint  # noqa: E402
from notebook_builder.cells.c20_store import pdf_store_name, text_store_name  # noqa: E402
from notebook_builder.cells.c34_mirror import StoreMirror  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.drive_store import (TEXT_PACK_MEMBERS, DriveStore, connect_drive,  # noqa: E402
                                                text_pack_description)
from notebook_builder.simcourt import SimCourt  # noqa: E402
from notebook_builder.simdrive import SimDrive  # noqa: E402

FOLDER = "ky_court"
GROUP = 10          # documents a put_many hands over at a time (the stages' groups)


def drive_requests(sim: SimDrive) -> int:
    return sum(n for kind, n in sim.requests.items() if kind != "token")


def stored_files(sim: SimDrive) -> int:
    return len(sim.files_in(f"{FOLDER}/pdf_by_hash")) + len(sim.files_in(f"{FOLDER}/text"))


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
    with SimDrive(latency=latency, write_rate=rate, write_burst=3.0) as sim:
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
        db.close()
        files = stored_files(sim)
        return {"kind": kind, "seconds": seconds, "handed_over": handed_over, "left": left,
                "requests": drive_requests(sim), "files": files, "by_kind": dict(sim.requests),
                "rejected": dict(sim.rejected), "limited": store.pacer.limited_count}


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
        ctx.open_database().upsert_discovered({"document_id": d} for d in ids)
        started = time.perf_counter()
        result = download(ctx)
        crawl = time.perf_counter() - started
        backlog = ctx.db.store_pending_count()
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
        queues = db.queue_sizes(cfg)
        counts = db.status_counts()
        ctx.close()
        spent = Counter(sim.requests)
        spent.subtract(before)
        return {"seconds": seconds, "seeding": seeding, "requests": dict(+spent), "restored": restored.restored,
                "store_only": recovered.store_only, "reverted": recovered.reverted, "queues": queues,
                "counts": counts}


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100, help="documents mirrored in part 1")
    parser.add_argument("--crawl-docs", type=int, default=60, help="documents crawled in part 2")
    parser.add_argument("--latency", type=float, default=0.15, help="simulated Drive latency, seconds")
    parser.add_argument("--rate", type=float, default=2.0, help="Drive writes a second per user")
    parser.add_argument("--full", type=int, default=98_724, help="documents of the full corpus")
    parser.add_argument("--skip-before", action="store_true", help="part 1 without the old layout")
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
        for kind in ([] if args.skip_before else ["before"]) + ["after"]:
            result = mirror_round(kind, pairs, folder, args.latency, args.rate)
            per_file = result["requests"] / result["files"]
            per_doc = result["files"] / args.docs
            rate = result["files"] / result["seconds"]
            hours = args.full * per_doc / rate / 3600
            full_hours[kind] = hours
            print(f"  {kind:>6}: {result['files']} files, {result['requests']} requests in {result['seconds']:.1f}s "
                  f"(handed over in {result['handed_over']:.2f}s, {result['left']} left)\n"
                  f"          requests/file {per_file:.3f} (goal <= 1.1), files/document {per_doc:.3f} "
                  f"(goal <= 1.05 + const), {rate:.2f} files/s -> mirror of the full corpus "
                  f"{hours:.1f} h\n"
                  f"          requests {dict(sorted(result['by_kind'].items()))}, rejected {result['rejected']}, "
                  f"pacer slowed {result['limited']}x", flush=True)

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
        if "after" in full_hours:
            verdict = "met" if full_hours["after"] <= args.full * with_latency / 3600 else "NOT met"
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


if __name__ == "__main__":
    main()
