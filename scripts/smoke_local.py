"""The local smoke run over a real v1.2 database (an operator script), as v1.2 had it.

    python scripts/smoke_local.py --database ky_court.sqlite [--backups pdf_backup/] [--keep DIR]

The database is copied into a scratch workspace (its bytes, and its -wal if it has one, read and
never written; the copy then made one file with SQLite's backup API); `--backups` is linked into
the workspace as pdf_backup/, read only. The whole pipeline then runs offline over the copy:
restore (nothing: the workspace has its database), adopt, backfill, extract what it can, ocr,
derive, index and verify, against a scratch store. Offline means the court is never asked:
PHASES leaves out discover and download, and API_BASE is a closed local port. (KY_DRY=1 is not
used: a dry run also skips extract, ocr and derive, which are local.)

It prints a report a user can act on: rows by status as v1.2 left them and after, what this copy
could not find (rows whose PDF neither the backups nor the scratch store hold, texts to extract
again, backups that are not PDFs, pointers at them, ambiguous names), what a real run would still
fetch from the court, and the projected hours for that at the default pacing. Rows whose PDF
only the Drive store holds count as not found here: a real run looks there too.

Exit status: the pipeline's (0 PASS, 1 FAIL), 2 for a path that is not there or a database that
cannot be adopted (one line says why). (scripts/smoke_simulated.py runs the whole pipeline at full
scale against the simulated court.)
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c06_layout import DB_FILENAME  # noqa: E402
from notebook_builder.cells.c10_database import STATUSES, Database  # noqa: E402
from notebook_builder.cells.c12_queues import WorkQueues  # noqa: E402
from notebook_builder.cells.c16_legacy_state import LegacyState  # noqa: E402
from notebook_builder.cells.c17_snapshots import backup_database  # noqa: E402
from notebook_builder.cells.c20_store import sha256_file  # noqa: E402
from notebook_builder.cells.c38_legacy import judge_database  # noqa: E402
from notebook_builder.cells.c95_run import EXIT_USAGE, run_pipeline  # noqa: E402

LOCAL_PHASES = "backfill,extract,ocr,derive,index"
OFFLINE_API = "http://127.0.0.1:9/api/api/v1"     # the discard port: refused, never a court
LATENCY_SECONDS = 0.25           # per request, on top of the pacing pause (bench/discover.py's figure)
CASE_WALK_REQUESTS_PER_DOCUMENT = 2.3   # RUNBOOK.md, "Before the first run against the real court"


def copy_database(original: Path, workspace: Path, scratch: Path) -> None:
    """The original's bytes (and -wal) into `scratch`, then one self-contained file in the workspace."""
    source = scratch / DB_FILENAME
    shutil.copyfile(original, source)
    wal = Path(f"{original}-wal")
    if wal.is_file() and wal.stat().st_size:
        shutil.copyfile(wal, f"{source}-wal")
    backup_database(source, workspace / DB_FILENAME)


def hours(requests: int, pause: tuple[float, float]) -> float:
    return requests * ((pause[0] + pause[1]) / 2 + LATENCY_SECONDS) / 3600


def counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {count:,}" for status, count in counts.items())


def shown(items: list[str], limit: int = 5) -> str:
    return ", ".join(items[:limit]) + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def report_lines(cfg, report, before: dict[str, int]) -> list[str]:
    defaults = load_config(env={})
    adopted = report.stages.get("adopt")
    db = Database.open(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        after = WorkQueues(db).status_counts()
        queued = WorkQueues(db).download_queue_size(cfg)
        held = LegacyState(db).legacy_held_count()
        extract_left = WorkQueues(db).extract_queue_size(cfg)
        documents = WorkQueues(db).document_count()
        converged = db.kv_get("discovery_converged_at") is not None
    finally:
        db.close()
    lines = ["", "smoke report",
             f"  rows as v1.2 left them: {sum(before.values()):,} ({counts_line(before)})",
             f"  rows after adoption and the local stages: {documents:,} ({counts_line(after)})",
             "  not found in this copy:"]
    missing = []
    if adopted is not None:
        backfill = adopted.backfill
        if adopted.requeued:
            missing.append(f"{len(adopted.requeued):,} rows claim a PDF that neither the backups nor this scratch "
                           f"store hold (back in the download queue; a real run looks in the Drive store too): "
                           f"{shown(adopted.requeued)}")
        if adopted.texts_missing:
            missing.append(f"{adopted.texts_missing:,} extracted rows have no text here (extracted again)")
        if backfill is not None and backfill.not_pdf:
            missing.append(f"{len(backfill.not_pdf):,} backups are not PDFs (skipped, left where they are): "
                           f"{shown(backfill.not_pdf)}")
        if backfill is not None and backfill.pointing_at_non_pdf:
            missing.append(f"{len(backfill.pointing_at_non_pdf):,} rows point at a backup that is not a PDF: "
                           f"{shown(backfill.pointing_at_non_pdf)}")
        if backfill is not None and backfill.conflicts:
            missing.append(f"{backfill.conflicts:,} rows name a backup ambiguously or hold another hash (left "
                           "alone; see the log)")
    if extract_left:
        missing.append(f"{extract_left:,} downloaded rows are not extracted yet (the extract stage did not finish)")
    lines += [f"    {line}" for line in missing] or ["    nothing"]
    fetch = queued + held
    lines.append("  a real run would still fetch from the court:")
    lines.append(f"    {fetch:,} PDFs ({queued:,} in the download queue, {held:,} once discovery has confirmed their "
                 f"ids): about {fetch:,} requests, {hours(fetch, defaults.PACING_DL):.1f} h at the default pacing "
                 f"({sum(defaults.PACING_DL) / 2:.2f} s pause + {LATENCY_SECONDS} s a request)")
    if not converged:
        walk = int(documents * CASE_WALK_REQUESTS_PER_DOCUMENT)
        lines.append(f"    before those, discovery sweeps once (it has not converged in this archive): the case walk "
                     f"asks about {CASE_WALK_REQUESTS_PER_DOCUMENT} requests a document ({walk:,} requests, "
                     f"{hours(walk, defaults.PACING_SEARCH):.1f} h at the default pacing); the document search, "
                     "where the court has it, far fewer")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, type=Path, help="v1.2's ky_court.sqlite (read, never written)")
    parser.add_argument("--backups", type=Path, help="v1.2's pdf_backup/ folder (read, never written)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="keep the scratch workspace and store in DIR")
    args = parser.parse_args(argv)
    for label, path in (("--database", args.database), ("--backups", args.backups)):
        if path is not None and not path.exists():
            print(f"smoke_local: {label} {path} does not exist", file=sys.stderr)
            return EXIT_USAGE
    original = args.database.resolve()
    judgement = judge_database(original)
    if judgement.problems or not judgement.legacy and judgement.kind != "current":
        why = "; ".join(judgement.problems) or f"it is not a pipeline database ({judgement.kind})"
        print(f"smoke_local: {original} cannot be adopted: {why}; nothing was changed", file=sys.stderr)
        return EXIT_USAGE
    root = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="ky-smoke-"))
    workspace, scratch = root / "workspace", root / "original-copy"
    workspace.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    if (workspace / DB_FILENAME).exists():
        print(f"smoke_local: {workspace} already holds a database: give --keep an empty folder", file=sys.stderr)
        return EXIT_USAGE
    fingerprint = sha256_file(original)
    started = time.monotonic()
    copy_database(original, workspace, scratch)
    if args.backups is not None:
        os.symlink(args.backups.resolve(), workspace / "pdf_backup", target_is_directory=True)
    print(f"smoke: {original} ({original.stat().st_size / 2 ** 20:.1f} MiB, {judgement.kind}, "
          f"{judgement.rows:,} rows) copied into {workspace}")
    env = dict(os.environ)
    env.update({"KY_WORKSPACE": str(workspace), "KY_STORE": str(root / "store"), "KY_API_BASE": OFFLINE_API,
                "KY_PHASES": LOCAL_PHASES, "KY_DRY": "0", "KY_PROBE_FIRST": "0",
                "KY_PROGRESS": env.get("KY_PROGRESS", "1")})
    cfg = load_config(env)
    report = run_pipeline(cfg)
    print(report.summary())
    before = {status: judgement.statuses.get(status, 0) for status in STATUSES}
    before.update((status, count) for status, count in judgement.statuses.items() if status not in STATUSES)
    if report.bad_input:
        print(f"smoke_local: {report.error}", file=sys.stderr)
    else:
        print("\n".join(report_lines(cfg, report, before)))
    unchanged = sha256_file(original) == fingerprint
    print(f"smoke: {time.monotonic() - started:.1f}s; the original {'is unchanged' if unchanged else 'CHANGED'} "
          f"(sha256 {fingerprint[:16]}...); scratch {'kept in ' + str(root) if args.keep else 'removed'}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return report.exit_status if unchanged else 1


if __name__ == "__main__":
    sys.exit(main())
