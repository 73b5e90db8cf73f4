"""The whole pipeline at full corpus scale against the simulated court (an operator script).

Discovers the full 98,724-document corpus (1990-2026, both courts) from a
SimCourt on 127.0.0.1 with pacing off, then downloads and extracts a sample
of it (KY_DOWNLOAD_LIMIT), then verifies; prints per-stage timings.

    python scripts/smoke_simulated.py                    # 98,724 documents, sample 2,000
    python scripts/smoke_simulated.py --docs 20000 --sample 500 --keep /tmp/smoke

Not a test: it takes minutes. Exit status is the pipeline's (0 PASS). (scripts/smoke_local.py is the
smoke run over a real v1.2 database.)
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c95_run import run_pipeline
from notebook_builder.simcourt import SimCourt

FULL_CORPUS = 98_724


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=FULL_CORPUS, help="documents in the court")
    parser.add_argument("--sample", type=int, default=2000, help="documents to download and extract")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--faults", action="store_true", help="serve the full fault catalogue")
    parser.add_argument("--keep", metavar="DIR", help="keep the workspace and store in DIR")
    args = parser.parse_args(argv)

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ky-smoke-"))
    started = time.monotonic()
    court = SimCourt(args.docs, args.seed, faults=args.faults, first_year=1990, last_year=2026)
    print(f"smoke: court of {args.docs:,} documents built in {time.monotonic() - started:.1f}s")
    with court:
        env = dict(os.environ)
        env.update({
            "KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.05",
            "KY_BACKOFF_CAP": "1", "KY_FIRST_YEAR": "1990", "KY_LAST_YEAR": "2026",
            "KY_DOWNLOAD_LIMIT": str(args.sample), "KY_CHECKPOINT_SECONDS": "60",
            "KY_PROGRESS": env.get("KY_PROGRESS", "1"),
        })
        cfg = load_config(env)
        report = run_pipeline(cfg)
    print(report.summary())
    print("\nsmoke: per-stage seconds")
    for stage, seconds in report.seconds.items():
        print(f"  {stage:>9}  {seconds:8.1f}")
    print(f"smoke: {time.monotonic() - started:.1f}s in all, peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (court and pipeline)")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
