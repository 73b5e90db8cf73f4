"""Benchmark: what a session that updated the search index sends the store, whole file against segments.

    .venv/bin/python bench/index_store.py [--docs 20000] [--more 0.01] [--drive-docs 3000]
                                          [--latency 0.15] [--rate 3] [--workspace DIR]

1. Bytes, in a directory store that counts what it is sent: `--docs` documents of bench/search.py's
   synthetic corpus (texts drawn like real opinions) indexed by the index stage, which pushes the
   index; then `--more` as many again (1%: the newest, as an update brings) extracted, indexed and
   pushed. Printed for the second push: the bytes sent against the whole index (the commit's files
   and its catalog), before (main's code: `ky_search.tar`, the commit's files and a copy of the
   catalog in one tar, and the catalog alone as `ky_search.sqlite`, both sent whole) and after (the
   commit's files the store lacks, then the catalog's changed pages as page packs, sealed); the files
   sent and removed, the catalog's pages changed.
2. Drive, on the simulated Drive (`--latency` seconds an answer, `--rate` writes a second, the
   Drive store's own pacing): `--drive-docs` documents and 1% more, the index's two states pushed in
   turn and then restored by a fresh runtime, in the two layouts the store could hold: each file of
   a segment a Drive file (`ky_search/<segment>.<ext>`, what the pipeline does) and one tar a
   segment (`ky_search/<segment>.tar`, its delete files apart). Printed: Drive requests and seconds
   of each push and of the restore, per layout.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")

from bench.search import CORPUS_ROWS, build_corpus, write_state  # noqa: E402
from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c06_layout import DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME  # noqa: E402
from notebook_builder.cells.c18_search_index import (commit_file_names, copy_search_index,  # noqa: E402
                                                     install_search_index)
from notebook_builder.cells.c20_store import LocalStore  # noqa: E402
from notebook_builder.cells.c35_context import open_context  # noqa: E402
from notebook_builder.cells.c87_index import catalog_packs, index, push_search_index, restore_search_index  # noqa: E402
from notebook_builder.simdrive import SimDrive  # noqa: E402

DRIVE_FOLDER = "ky_court"


class CountingStore(LocalStore):
    """A directory store that counts the files and bytes it is sent."""

    def __init__(self, root):
        super().__init__(root)
        self.sent: Counter = Counter()

    def upload_file(self, name, local_path):
        self.sent[name] += Path(local_path).stat().st_size
        super().upload_file(name, local_path)


def make_corpus(workspace: Path, docs: int, more: int) -> None:
    """`docs + more` documents of bench/search.py's corpus, the newest `more` not extracted yet."""
    build_corpus(workspace, docs + more)
    write_state(REPO, workspace, workspace / CORPUS_ROWS)
    with sqlite3.connect(workspace / DB_FILENAME) as conn:
        conn.execute("UPDATE documents SET status = 'downloaded' WHERE rowid > ?", (docs,))


def extract_the_rest(workspace: Path) -> None:
    with sqlite3.connect(workspace / DB_FILENAME) as conn:
        conn.execute("UPDATE documents SET status = 'extracted' WHERE status = 'downloaded'")


def whole_index_bytes(workspace: Path) -> tuple[int, int]:
    """(the commit's files and meta.json, the catalog): the index's size."""
    index_path = workspace / SEARCH_INDEX_DIRNAME
    meta = (index_path / "meta.json").read_text()
    files = sum((index_path / name).stat().st_size for name in commit_file_names(meta)) + len(meta)
    with tempfile.TemporaryDirectory() as temp:
        copy_search_index(workspace, temp)
        return files, (Path(temp) / SEARCH_DB_FILENAME).stat().st_size


def main_push_bytes(workspace: Path) -> int:
    """What main's code sent each session the index changed: ky_search.tar (a copy of the catalog
    and the commit's files, as its pack_search_index wrote it) and the catalog alone."""
    with tempfile.TemporaryDirectory() as temp:
        copy_search_index(workspace, temp)
        tar_path = Path(temp) / "ky_search.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(Path(temp) / SEARCH_DB_FILENAME, arcname=SEARCH_DB_FILENAME)
            for path in sorted((Path(temp) / SEARCH_INDEX_DIRNAME).iterdir()):
                tar.add(path, arcname=f"{SEARCH_INDEX_DIRNAME}/{path.name}")
        return tar_path.stat().st_size + (Path(temp) / SEARCH_DB_FILENAME).stat().st_size


def index_session(cfg, store: CountingStore):
    store.sent.clear()
    ctx = open_context(cfg, store=store)
    try:
        started = time.perf_counter()
        result = index(ctx)
        return result, time.perf_counter() - started
    finally:
        ctx.close()


# ------------------------------------------------------------------ 1. bytes


def bytes_round(root: Path, docs: int, more: int) -> Path:
    workspace, store_root = root / "workspace", root / "store"
    cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(store_root), "KY_PROGRESS": "0"})
    started = time.perf_counter()
    make_corpus(workspace, docs, more)
    print(f"corpus: {docs} + {more} documents in {time.perf_counter() - started:.0f} s")
    store = CountingStore(store_root)
    first, seconds = index_session(cfg, store)
    print(f"first session: {first.indexed} documents indexed and the index sent in {seconds:.0f} s "
          f"({first.push_files} files, {first.push_bytes / 1e6:.1f} MB; push {first.push_seconds:.1f} s)")
    extract_the_rest(workspace)
    update, seconds = index_session(cfg, store)
    files, catalog = whole_index_bytes(workspace)
    whole = files + catalog
    before = main_push_bytes(workspace)
    after = sum(store.sent.values())
    segment_files = [name for name in store.sent if name.startswith(f"{SEARCH_INDEX_DIRNAME}/")]
    packs = [name for name in store.sent if name.startswith("db/")]
    print(f"update: {update.indexed} documents indexed in {seconds:.1f} s (push {update.push_seconds:.2f} s)")
    print(f"  the whole index: {whole / 1e6:.1f} MB ({files / 1e6:.1f} MB of tantivy's files, catalog "
          f"{catalog / 1e6:.1f} MB)")
    print(f"  before (main: ky_search.tar + ky_search.sqlite, whole): {before / 1e6:.2f} MB sent = "
          f"{before / whole:.2f} of the index")
    print(f"  after (the files the store lacks, the catalog's changed pages): {after / 1e6:.2f} MB "
          f"sent = {after / whole:.4f} of the index, {after / before:.4f} of before ({before / max(after, 1):.0f}x less)")
    print(f"    {len(segment_files)} index files ({sum(store.sent[name] for name in segment_files) / 1e6:.2f} MB: "
          f"{', '.join(sorted(Path(name).suffix or name for name in segment_files))}), "
          f"{len(packs)} catalog pack(s) ({sum(store.sent[name] for name in packs) / 1e6:.2f} MB)")
    held = sorted(path.name for path in (store_root / SEARCH_INDEX_DIRNAME).iterdir())
    print(f"  the store holds {len(held)} files under {SEARCH_INDEX_DIRNAME}/ "
          f"({len({name.split('.')[0] for name in held if name != 'meta.json'})} segments) and "
          f"{len(list((store_root / 'db' / 'ky_search').iterdir()))} catalog packs")
    return workspace


# ------------------------------------------------------------------ 2. Drive


def drive_requests(sim: SimDrive) -> int:
    return sum(count for kind, count in sim.requests.items() if kind != "token")


def drive_config(sim: SimDrive, workspace: Path):
    return load_config(env={"KY_PROGRESS": "0", "KY_STORE": "drive", "KY_DRIVE_API": sim.api_root,
                            "KY_BACKOFF_BASE": "0.5", "KY_BACKOFF_CAP": "4"},
                       WORKSPACE=str(workspace), DRIVE_FOLDER=DRIVE_FOLDER)


def put_state(state: Path, workspace: Path) -> None:
    """The index of `state` (a copy_search_index folder) as `workspace`'s, its page table kept."""
    shutil.rmtree(workspace / SEARCH_INDEX_DIRNAME, ignore_errors=True)
    workspace.mkdir(parents=True, exist_ok=True)
    shutil.copytree(state / SEARCH_INDEX_DIRNAME, workspace / SEARCH_INDEX_DIRNAME)
    shutil.copy(state / SEARCH_DB_FILENAME, workspace / SEARCH_DB_FILENAME)


def push_segment_tars(ctx) -> None:
    """The alternative layout: one tar a segment, delete files and meta.json apart, the catalog's packs."""
    staging = ctx.path("checkpoint") / "tar-push"
    shutil.rmtree(staging, ignore_errors=True)
    copy_search_index(ctx.workspace, staging)
    index_path = staging / SEARCH_INDEX_DIRNAME
    names = commit_file_names((index_path / "meta.json").read_text())
    listed = ctx.store.list_files(SEARCH_INDEX_DIRNAME)
    kept = {f"{SEARCH_INDEX_DIRNAME}/meta.json"}
    for segment in sorted({name.split(".")[0] for name in names}):
        store_name = f"{SEARCH_INDEX_DIRNAME}/{segment}.tar"
        kept.add(store_name)
        if store_name in listed:
            continue
        tar_path = staging / f"{segment}.tar"
        with tarfile.open(tar_path, "w") as tar:
            for name in names:
                if name.startswith(segment) and not name.endswith(".del"):
                    tar.add(index_path / name, arcname=name)
        ctx.store.upload_file(store_name, tar_path)
    for name in [name for name in names if name.endswith(".del")]:
        kept.add(f"{SEARCH_INDEX_DIRNAME}/{name}")
        if f"{SEARCH_INDEX_DIRNAME}/{name}" not in listed:
            ctx.store.upload_file(f"{SEARCH_INDEX_DIRNAME}/{name}", index_path / name)
    ctx.store.upload_file(f"{SEARCH_INDEX_DIRNAME}/meta.json", index_path / "meta.json")
    catalog = catalog_packs(ctx).push(staging / SEARCH_DB_FILENAME)
    catalog_packs(ctx).remove_unneeded(set(catalog.packs))
    for name in sorted(set(listed) - kept):
        ctx.store.remove(name)
    shutil.rmtree(staging)


def restore_segment_tars(ctx) -> bool:
    staging = ctx.path("tmp") / "tar-restore"
    index_path = staging / SEARCH_INDEX_DIRNAME
    index_path.mkdir(parents=True)
    ctx.store.download_file(f"{SEARCH_INDEX_DIRNAME}/meta.json", index_path / "meta.json")
    names = commit_file_names((index_path / "meta.json").read_text())
    for segment in sorted({name.split(".")[0] for name in names}):
        ctx.store.download_file(f"{SEARCH_INDEX_DIRNAME}/{segment}.tar", staging / f"{segment}.tar")
        with tarfile.open(staging / f"{segment}.tar") as tar:
            tar.extractall(index_path, filter="data")
        (staging / f"{segment}.tar").unlink()
    for name in [name for name in names if name.endswith(".del")]:
        ctx.store.download_file(f"{SEARCH_INDEX_DIRNAME}/{name}", index_path / name)
    catalog_packs(ctx).restore(staging / SEARCH_DB_FILENAME)
    install_search_index(staging, ctx.workspace)
    shutil.rmtree(staging)
    return True


LAYOUTS = {"one Drive file a tantivy file": (push_search_index, restore_search_index),
           "one tar a segment": (push_segment_tars, restore_segment_tars)}


def drive_round(root: Path, states: list[Path], latency: float, rate: float) -> None:
    for layout, (push, restore) in LAYOUTS.items():
        figures = []
        with SimDrive(latency=latency, write_rate=rate, write_burst=3.0) as sim:
            workspace = root / f"drive-{layout.replace(' ', '-')}"
            for state in states:
                put_state(state, workspace)
                ctx = open_context(drive_config(sim, workspace))
                try:
                    asked, started = drive_requests(sim), time.perf_counter()
                    push(ctx)
                    figures.append((drive_requests(sim) - asked, time.perf_counter() - started))
                finally:
                    ctx.close()
            fresh = root / f"drive-fresh-{layout.replace(' ', '-')}"
            ctx = open_context(drive_config(sim, fresh))
            try:
                asked, started = drive_requests(sim), time.perf_counter()
                assert restore(ctx), f"{layout}: the index did not restore"
                figures.append((drive_requests(sim) - asked, time.perf_counter() - started))
            finally:
                ctx.close()
            files = len(sim.files_in(f"{DRIVE_FOLDER}/{SEARCH_INDEX_DIRNAME}"))
        (first, first_s), (update, update_s), (restored, restored_s) = figures
        print(f"  {layout}: first push {first} requests {first_s:.1f} s; update {update} requests {update_s:.1f} s; "
              f"fresh runtime's restore {restored} requests {restored_s:.1f} s; {files} Drive files under "
              f"{SEARCH_INDEX_DIRNAME}/")


def drive_states(root: Path, docs: int, more: int) -> list[Path]:
    """The index after `docs` documents and after `more` more, each as a copy_search_index folder."""
    workspace = root / "drive-corpus"
    cfg = load_config({"KY_WORKSPACE": str(workspace), "KY_STORE": str(root / "drive-corpus-store"),
                       "KY_PROGRESS": "0"})
    make_corpus(workspace, docs, more)
    states = []
    for number in range(2):
        if number:
            extract_the_rest(workspace)
        index_session(cfg, CountingStore(root / "drive-corpus-store"))
        copy_search_index(workspace, root / f"drive-state-{number}")
        states.append(root / f"drive-state-{number}")
    meta = (states[-1] / SEARCH_INDEX_DIRNAME / "meta.json").read_text()
    print(f"  ({docs} + {more} documents; {len({n.split('.')[0] for n in commit_file_names(meta)})} segments, "
          f"{sum(p.stat().st_size for p in (states[-1] / SEARCH_INDEX_DIRNAME).iterdir()) / 1e6:.1f} MB)")
    return states


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--more", type=float, default=0.01, help="the update, as a share of --docs (default 0.01)")
    parser.add_argument("--drive-docs", type=int, default=3000)
    parser.add_argument("--latency", type=float, default=0.15)
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--workspace", help="a folder to work in (default: a temporary one, removed)")
    args = parser.parse_args()
    root = Path(args.workspace or tempfile.mkdtemp(prefix="kycourt-bench-index-store-"))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    try:
        print("1. bytes a session sends after an update")
        bytes_round(root, args.docs, max(1, round(args.docs * args.more)))
        print(f"2. Drive: requests and seconds, two layouts (latency {args.latency} s, {args.rate} writes/s)")
        drive_round(root, drive_states(root, args.drive_docs, max(1, round(args.drive_docs * args.more))),
                    args.latency, args.rate)
    finally:
        if not args.workspace:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
