"""Benchmark: the Download stage against a bare streaming loop, over the same simulated court.

    .venv/bin/python bench/download.py [--docs 2000] [--rounds 3] [--store-root DIR] [--profile]

The court (faults off, pacing off) runs in its own process, so its PDF
generation and HTTP threads do not share a GIL with the measured loops.
Rounds alternate, each in a fresh workspace:
- `bare`: one requests.Session; per document a streamed GET, SHA-256 while
  writing a temp file, os.replace to `<sha>.pdf`; no database, no fsync;
- `bare+fsync`: the same with an fsync of every file (what the issue requires
  of the stage), to show what fsync alone costs;
- `download`: the Download stage on a workspace whose rows were inserted
  beforehand (not timed): attempts and outcomes committed, .part fsynced,
  promoted, mirrored to a LocalStore (those three by the stage's finisher
  thread, overlapping the next GET), status.json heartbeats. The store is a
  folder on the workspace's disk unless `--store-root` puts it elsewhere
  (`/dev/shm` separates the mirror's copy+fsync from the stage's own work; in
  Colab the store is Drive and its cost is the network).
Printed: documents/s (median of the rounds), the ratio download/bare of the
medians, and requests per successful document as the court counted them.
Goal (issue 4): ratio >= 0.8 and exactly 1.0 request per document.
`--profile` adds a cProfile of one more stage run (top functions by own time).
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import multiprocessing
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from notebook_builder.cells.c15_discovery_state import DiscoveryState

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("KY_PROGRESS", "0")


def _serve(docs: int, seed: int, ready, commands, answers) -> None:
    from notebook_builder.simcourt import SimCourt
    court = SimCourt(docs=docs, seed=seed, faults=False)
    ready.put((court.start(), [d.document_id for d in court.documents]))
    while (command := commands.get()) != "stop":
        if command == "requests":
            answers.put(court.download_requests)
    court.stop()


class Court:
    """The simulated court in a child process; `requests()` asks it for its download count."""

    def __init__(self, docs: int, seed: int):
        context = multiprocessing.get_context("spawn")
        ready, self._commands, self._answers = context.Queue(), context.Queue(), context.Queue()
        self._process = context.Process(target=_serve, args=(docs, seed, ready, self._commands, self._answers),
                                        daemon=True)
        self._process.start()
        self.base_url, self.document_ids = ready.get(timeout=120)

    def requests(self) -> int:
        self._commands.put("requests")
        return self._answers.get(timeout=30)

    def stop(self) -> None:
        self._commands.put("stop")
        self._process.join(timeout=10)


def bare_loop(base_url: str, document_ids: list[str], folder: Path, *, fsync: bool) -> int:
    import requests
    headers = {"Accept": "application/json", "x-ctrack-excludeselflinks": "true"}
    done = 0
    with requests.Session() as session:
        for document_id in document_ids:
            url = f"{base_url}/publicaccessdocuments/{document_id}/download"
            with session.get(url, headers=headers, stream=True, timeout=60) as response:
                response.raise_for_status()
                digest = hashlib.sha256()
                temp = folder / f"{document_id}.part"
                with open(temp, "wb") as handle:
                    for chunk in response.iter_content(256 * 1024):
                        digest.update(chunk)
                        handle.write(chunk)
                    if fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
                os.replace(temp, folder / f"{digest.hexdigest()}.pdf")
                done += 1
    return done


def stage_run(base_url: str, document_ids: list[str], folder: Path, profile: cProfile.Profile | None = None,
              store_root: str | None = None):
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c70_download import download
    store = tempfile.mkdtemp(dir=store_root) if store_root else str(folder / "s")
    cfg = load_config(env={"KY_PACING": "0", "KY_PROGRESS": "0"}, WORKSPACE=str(folder / "w"), STORE=store, API_BASE=base_url)
    ctx = open_context(cfg)
    DiscoveryState(ctx.open_database()).upsert_discovered({"document_id": d} for d in document_ids)
    started = time.perf_counter()
    if profile:
        profile.enable()
    result = download(ctx)
    if profile:
        profile.disable()
    seconds = time.perf_counter() - started
    ctx.close()
    if store_root:
        shutil.rmtree(store)
    return seconds, result


def fsync_cost(folder: Path, sizes: int, size: int) -> float:
    """Seconds per fsync of a freshly written file of `size` bytes on this disk."""
    data = os.urandom(size)
    spent = 0.0
    for number in range(sizes):
        with open(folder / f"f{number}", "wb") as handle:
            handle.write(data)
            handle.flush()
            started = time.perf_counter()
            os.fsync(handle.fileno())
            spent += time.perf_counter() - started
    return spent / sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store-root", help="put the stage's store under this folder (e.g. /dev/shm)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"{args.docs} documents, {args.rounds} rounds, store "
          f"{'under ' + args.store_root if args.store_root else 'on the workspace disk'}", flush=True)
    court = Court(args.docs, args.seed)
    ids = court.document_ids
    rates: dict[str, list[float]] = {"bare": [], "bare+fsync": [], "download": []}
    per_document: list[float] = []
    try:
        for round_number in range(1, args.rounds + 1):
            for kind in ("bare", "bare+fsync", "download"):
                with tempfile.TemporaryDirectory() as name:
                    folder = Path(name)
                    before = court.requests()
                    if kind == "download":
                        seconds, result = stage_run(court.base_url, ids, folder, store_root=args.store_root)
                        done = result.downloaded
                        assert done == len(ids) and result.left == 0, result
                        per_document.append((court.requests() - before) / done)
                        mean_size = result.bytes / done
                    else:
                        started = time.perf_counter()
                        done = bare_loop(court.base_url, ids, folder, fsync=kind == "bare+fsync")
                        seconds = time.perf_counter() - started
                    rates[kind].append(done / seconds)
                    print(f"round {round_number} {kind:>10}: {done} docs in {seconds:6.2f}s = "
                          f"{done / seconds:7.1f} docs/s", flush=True)
        medians = {kind: statistics.median(values) for kind, values in rates.items()}
        print(f"\nmedian docs/s: bare {medians['bare']:.1f}, bare+fsync {medians['bare+fsync']:.1f}, "
              f"download {medians['download']:.1f}")
        print(f"ratio download/bare = {medians['download'] / medians['bare']:.3f} (goal >= 0.8); "
              f"download/(bare+fsync) = {medians['download'] / medians['bare+fsync']:.3f}")
        print(f"requests per successful document: {', '.join(f'{v:.3f}' for v in per_document)} (goal 1.0)")
        with tempfile.TemporaryDirectory() as name:
            print(f"fsync of one {mean_size / 1024:.1f} KiB file: {1000 * fsync_cost(Path(name), 200, int(mean_size)):.3f} ms")
        if args.profile:
            profile = cProfile.Profile()
            with tempfile.TemporaryDirectory() as name:
                stage_run(court.base_url, ids, Path(name), profile, args.store_root)
            pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    finally:
        court.stop()


if __name__ == "__main__":
    main()
