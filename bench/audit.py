"""Benchmark: what the fixity audit (c21_fixity, run by every verify) costs a run, at full scale.

    .venv/bin/python bench/audit.py [--docs 98724] [--size-scale 0.1] [--runs 10]
                                    [--drive-docs 98724] [--drive-real 2000] [--latency 0.0]
                                    [--skip-local] [--skip-drive] [--keep DIR]

1. Directory store: --docs PDFs (sizes drawn as bench/drive.py's, 20-900 KB, times --size-scale
   so that the store fits a test machine's disk) and as many texts (~9 KB), the database saying
   each document extracted, no workspace copies (a fresh runtime's, or a store read by `verify`
   alone). --runs audit runs as verify makes them; per run: the files compared with the listing,
   the files proven, the bytes read, the seconds; then whether every file was proven once in the
   first ten runs, and the bytes a run reads at the real sizes (the slice's bytes / --size-scale).
2. Simulated Drive, steady state: --drive-docs PDFs and their text packs (64 texts a pack),
   metadata only (no bytes held), each file's md5 proven by an earlier run. Per run: the Drive
   requests by kind (media: downloads), the files proven by Drive's md5, the seconds.
3. Simulated Drive, first cycle: --drive-real PDFs and texts holding bytes, never proven, no
   workspace copies (an older store, a fresh runtime): per run the downloads, bytes and seconds,
   and what the first cycle costs at --drive-docs (a run after it is part 2's).

The machine's load is printed with the figures (/proc/loadavg): 2 cores are shared.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")

from notebook_builder.cells.c06_layout import DB_FILENAME, pdf_store_name, text_store_name  # noqa: E402
from notebook_builder.cells.c10_database import Database  # noqa: E402
from notebook_builder.cells.c13_records import DownloadRecords  # noqa: E402
from notebook_builder.cells.c07_drive_api import connect_drive  # noqa: E402
from notebook_builder.cells.c20_store import LocalStore  # noqa: E402
from notebook_builder.cells.c21_fixity import FIXITY_CYCLE, FixityRecords, audit_fixity  # noqa: E402
from notebook_builder.cells.c90_verify import referenced_store_names  # noqa: E402
from notebook_builder.cells.drive_store import (TEXT_PACK_MEMBERS, DriveStore, build_text_pack,  # noqa: E402
                                                text_pack_description)
from notebook_builder.simdrive import SimDrive  # noqa: E402

FOLDER = "ky_court"
TEXT_BYTES = 9000


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def megabytes(count: int) -> str:
    return f"{count / 1e6:,.0f} MB" if count >= 1e6 else f"{count / 1e3:,.1f} KB"


def archive_database(path: Path, rows: list[tuple[str, int]]) -> Database:
    """A database whose documents (one per (sha256, size)) are extracted, as verify reads them."""
    db = Database.open(path)
    with db.transaction():
        db.conn.executemany(
            "INSERT INTO documents(document_id, status, sha256, size_bytes, local_pdf, pages, extracted_chars, "
            "attempts, extract_attempts) VALUES (?, 'extracted', ?, ?, ?, 1, ?, 1, 1)",
            [(f"D{number:08d}", sha, size, pdf_store_name(sha), TEXT_BYTES)
             for number, (sha, size) in enumerate(rows)])
    return db


def names_of(db: Database) -> set[str]:
    return referenced_store_names(DownloadRecords(db).documents_claiming_files())[0]


def run_line(number: int, result, seconds: float, extra: str = "") -> str:
    return (f"  run {number:>2}: {result.listed:>7} files compared with the listing, {result.due:>6} proven "
            f"({result.proven_unread} by the store's md5, {result.read} read, {megabytes(result.bytes_read)}), "
            f"{len(result.found)} damaged, {seconds:6.2f} s{extra}")


# ------------------------------------------------------------------ 1. directory store


def local_store(docs: int, scale: float, runs: int, folder: Path) -> None:
    rng = random.Random(7)
    store_root = folder / "store"
    (store_root / "pdf_by_hash").mkdir(parents=True)
    (store_root / "text").mkdir()
    rows, real_sizes = [], {}
    started = time.perf_counter()
    for number in range(docs):
        real = rng.randint(20_000, 900_000)
        data = os.urandom(max(64, int(real * scale)))
        sha = hashlib.sha256(data).hexdigest()
        (store_root / pdf_store_name(sha)).write_bytes(data)
        (store_root / text_store_name(sha)).write_bytes(os.urandom(TEXT_BYTES // 2).hex().encode())
        rows.append((sha, len(data)))
        real_sizes[pdf_store_name(sha)] = real
    db = archive_database(folder / "workspace" / DB_FILENAME, rows)
    stored = sum(size for _, size in rows) + docs * TEXT_BYTES
    print(f"  built in {time.perf_counter() - started:.0f} s: {docs} PDFs and {docs} texts, {megabytes(stored)} "
          f"(the real sizes would be {megabytes(sum(real_sizes.values()) + docs * TEXT_BYTES)})", flush=True)
    store, names = LocalStore(store_root), names_of(db)
    proven_in: dict[str, list[int]] = {}
    totals = Counter()
    for number in range(1, runs + 1):
        before = {name: row["checked_run"] for name, row in FixityRecords(db).load().items()}
        started = time.perf_counter()
        result = audit_fixity(db, store, folder / "workspace", names, cycle=FIXITY_CYCLE)
        seconds = time.perf_counter() - started
        rows_now = FixityRecords(db).load()
        proven = [name for name, row in rows_now.items() if row["checked_run"] == result.run != before.get(name)]
        for name in proven:
            proven_in.setdefault(name, []).append(number)
        real_bytes = sum(real_sizes.get(name, TEXT_BYTES) for name in proven)
        totals.update(files=result.due, bytes=result.bytes_read, real=real_bytes, seconds=seconds)
        print(run_line(number, result, seconds, f"; at the real sizes {megabytes(real_bytes)}"), flush=True)
    first_ten = [name for name in names if not any(run <= FIXITY_CYCLE for run in proven_in.get(name, []))]
    print(f"  every one of {len(names)} files proven within the first {FIXITY_CYCLE} runs: "
          f"{'yes' if not first_ten else f'NO, {len(first_ten)} not'}; per run on average "
          f"{totals['files'] / runs:,.0f} files, {megabytes(totals['bytes'] / runs)} read "
          f"({megabytes(totals['real'] / runs)} at the real sizes), {totals['seconds'] / runs:.2f} s", flush=True)
    db.close()


# ------------------------------------------------------------------ 2. Drive, steady state


def drive_store(sim: SimDrive, workspace: Path) -> DriveStore:
    return DriveStore(connect_drive(sim.api_root, http_timeout=60), FOLDER, backoff_base=0.01, backoff_cap=0.05,
                      insert_journal=workspace / "checkpoint" / "drive-inserts.json")


def drive_run(sim: SimDrive, db: Database, store: DriveStore, workspace: Path, names: set[str]):
    """One audit run: (its result, seconds, the Drive requests it made by kind)."""
    before = Counter(sim.requests)
    started = time.perf_counter()
    result = audit_fixity(db, store, workspace, names, cycle=FIXITY_CYCLE)
    seconds = time.perf_counter() - started
    spent = Counter(sim.requests)
    spent.subtract(before)
    return result, seconds, Counter({kind: count for kind, count in spent.items() if count})


def drive_steady(docs: int, runs: int, latency: float, folder: Path) -> None:
    rng = random.Random(7)
    with SimDrive(latency=0.0) as sim:
        started = time.perf_counter()
        root = sim.add_folder("root", FOLDER)["id"]
        pdfs, texts = sim.add_folder(root, "pdf_by_hash")["id"], sim.add_folder(root, "text")["id"]
        rows, proofs = [], []
        for number in range(docs):
            sha = hashlib.sha256(f"document {number}".encode()).hexdigest()
            size, md5 = rng.randint(20_000, 900_000), hashlib.md5(sha.encode()).hexdigest()
            sim.add_file(pdfs, f"{sha}.pdf", None, size=size, md5=md5, mime_type="application/pdf")
            rows.append((sha, size))
            proofs.append((pdf_store_name(sha), sha, md5, size))
        for start in range(0, docs, TEXT_PACK_MEMBERS):
            members = {}
            for sha, _ in rows[start:start + TEXT_PACK_MEMBERS]:
                md5 = hashlib.md5(f"text {sha}".encode()).hexdigest()
                members[f"{sha}.txt"] = (TEXT_BYTES, md5)
                proofs.append((text_store_name(sha), hashlib.sha256(f"text {sha}".encode()).hexdigest(), md5, TEXT_BYTES))
            pack_sha = hashlib.sha256(f"pack {start}".encode()).hexdigest()
            pack_md5, pack_size = hashlib.md5(pack_sha.encode()).hexdigest(), TEXT_BYTES * len(members) // 3
            sim.add_file(texts, f"pack-{pack_sha}.zip", None, size=pack_size, md5=pack_md5,
                         description=text_pack_description(members))
            proofs.append((f"text/pack-{pack_sha}.zip", pack_sha, pack_md5, pack_size))
        workspace = folder / "workspace"
        db = archive_database(workspace / DB_FILENAME, rows)
        FixityRecords(db).save([{"name": name, "sha256": sha, "md5": md5, "size": size, "first_run": 0,
                                 "checked_run": 0, "checked_at": None, "damage": None}
                                for name, sha, md5, size in proofs])
        print(f"  built in {time.perf_counter() - started:.0f} s: {docs} PDFs, {docs} texts in "
              f"{-(-docs // TEXT_PACK_MEMBERS)} packs, every md5 proven before", flush=True)
        sim.latency = latency
        store, names = drive_store(sim, workspace), names_of(db)
        for number in range(1, runs + 1):
            result, seconds, spent = drive_run(sim, db, store, workspace, names)
            print(run_line(number, result, seconds, f"; Drive requests {sum(spent.values())} "
                                                    f"{dict(sorted(spent.items()))}"), flush=True)
        db.close()


# ------------------------------------------------------------------ 3. Drive, the first cycle


def drive_first_cycle(docs: int, full: int, latency: float, folder: Path) -> None:
    rng = random.Random(11)
    with SimDrive(latency=0.0) as sim:
        root = sim.add_folder("root", FOLDER)["id"]
        pdfs, texts = sim.add_folder(root, "pdf_by_hash")["id"], sim.add_folder(root, "text")["id"]
        rows, text_data = [], []
        for number in range(docs):
            data = os.urandom(rng.randint(20_000, 900_000) // 10)
            sha = hashlib.sha256(data).hexdigest()
            sim.add_file(pdfs, f"{sha}.pdf", data, mime_type="application/pdf")
            rows.append((sha, len(data)))
            text_data.append((f"{sha}.txt", os.urandom(TEXT_BYTES // 2).hex().encode()))
        for start in range(0, docs, TEXT_PACK_MEMBERS):
            data, members = build_text_pack(text_data[start:start + TEXT_PACK_MEMBERS])
            sim.add_file(texts, f"pack-{hashlib.sha256(data).hexdigest()}.zip", data,
                         description=text_pack_description(members))
        workspace = folder / "workspace"
        db = archive_database(workspace / DB_FILENAME, rows)
        sim.latency = latency
        store, names = drive_store(sim, workspace), names_of(db)
        totals = Counter()
        for number in range(1, FIXITY_CYCLE + 1):
            result, seconds, spent = drive_run(sim, db, store, workspace, names)
            totals.update(media=spent["media"], requests=sum(spent.values()), bytes=result.bytes_read, seconds=seconds)
            print(run_line(number, result, seconds, f"; downloads {spent['media']}, Drive requests "
                                                    f"{sum(spent.values())}"), flush=True)
        unproven = sum(row["checked_run"] is None for row in FixityRecords(db).load().values())
        factor = full / docs
        print(f"  first cycle: {totals['media']} downloads ({megabytes(totals['bytes'])}), {totals['requests']} "
              f"requests, {totals['seconds']:.1f} s over {FIXITY_CYCLE} runs; {unproven} files never proven. "
              f"At {full} documents: about {totals['media'] * factor / FIXITY_CYCLE:,.0f} downloads a run "
              f"for {FIXITY_CYCLE} runs (once), then none", flush=True)
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=98_724, help="documents of part 1's directory store")
    parser.add_argument("--size-scale", type=float, default=0.1, help="part 1's PDF sizes, times this")
    parser.add_argument("--runs", type=int, default=10, help="audit runs of parts 1 and 2")
    parser.add_argument("--drive-docs", type=int, default=98_724, help="documents of part 2's Drive store")
    parser.add_argument("--drive-real", type=int, default=2000, help="documents of part 3 (bytes held)")
    parser.add_argument("--latency", type=float, default=0.0, help="simulated Drive latency, seconds")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-drive", action="store_true")
    parser.add_argument("--keep", type=Path, help="build under this folder and keep it (default: a temp folder)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-audit-"))
    print(f"load {load()}", flush=True)
    try:
        if not args.skip_local:
            print(f"\n1. directory store, {args.docs} documents, PDF sizes x{args.size_scale:g}", flush=True)
            local_store(args.docs, args.size_scale, args.runs, folder / "local")
        if not args.skip_drive:
            print(f"\n2. simulated Drive, steady state, {args.drive_docs} documents, "
                  f"{args.latency * 1000:.0f} ms a request", flush=True)
            drive_steady(args.drive_docs, args.runs, args.latency, folder / "steady")
            print(f"\n3. simulated Drive, the first cycle over a store never proven, {args.drive_real} documents "
                  f"(PDF sizes x0.1), no workspace", flush=True)
            drive_first_cycle(args.drive_real, args.drive_docs, args.latency, folder / "first")
        print(f"\nload {load()}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
