"""kycourt-pipeline: the notebook's stages from a shell (CONTRACT.md, "Command line").

Flags override the environment, which overrides the defaults. Each command
takes only the flags it uses (`status` reads the workspace alone; `verify`
and `report` the workspace and the store; `run` everything). A command that
looks at an existing archive and is given no store (no --store, no KY_STORE)
uses the store the workspace's status.json names. Exit status: 0 verify
PASS, 1 verify FAIL, 2 bad usage or configuration (one line on stderr,
nothing written; a bad flag value prints the command's usage and names the
flag), 3 the court could not be reached (state saved, verify ran), 130
interrupted (state saved), 141 the reader of the output went away
(`status | head -5`), as for any tool a closed pipe stops.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import json
import logging
import math
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from notebook_builder.cells.c00_config import KNOB_BY_NAME, KNOBS, ConfigError, Knob, in_colab, load_config

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def _knob_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The flags of these knobs (each declared with its knob in c00_config.KNOBS); a flag's value
    lands under the knob's name, so `config_from_args` passes every flag given to `load_config`."""
    for name in names:
        knob = KNOB_BY_NAME[name]
        flag = knob.flag
        help_text = flag.help
        if knob.env and knob.env not in help_text:
            help_text += f" ({knob.env}=1)" if flag.metavar is None else f" ({knob.env})"
        if flag.metavar is None:   # a switch: given means True, absent leaves the environment's value
            parser.add_argument(flag.name, dest=knob.name, action="store_true", default=None, help=help_text)
        else:
            parser.add_argument(flag.name, dest=knob.name, metavar=flag.metavar, nargs=flag.nargs,
                                const=flag.const, type=_knob_value(knob), help=help_text)


def _knob_value(knob: Knob) -> Callable[[str], str]:
    """argparse's check of a knob flag's value: the knob's own parser, so a bad value is refused
    with the command's usage and the flag's name; the text goes on to load_config unchanged."""
    def check(text: str) -> str:
        if text == knob.flag.const:     # the flag given without its value (argparse passes const here)
            return text
        try:
            knob.parse(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: expected {knob.accepted}") from None
        return text
    return check


def _bounded(convert: Callable[[str], Any], low: float, high: float | None = None,
             what: str = "") -> Callable[[str], Any]:
    """argparse type: a finite number (`convert`: int or float) in [low, high]."""
    kind = "an integer" if convert is int else "a number"
    expected = what or (f"{kind} from {low:g} to {high:g}" if high is not None else f"{kind} >= {low:g}")

    def check(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: expected {expected}")
        return value
    return check


TCP_PORT = _bounded(int, 0, 65535, "a TCP port from 0 to 65535 (0: the system picks a free one)")


def _verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def _workspace_flag(parser: argparse.ArgumentParser) -> None:
    _knob_flags(parser, "WORKSPACE")
    _verbose_flag(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kycourt-pipeline",
        description="Archive the Kentucky Supreme Court and Court of Appeals public record from "
                    "C-Track: restore, discover, backfill, download, extract, verify. Resumable; "
                    "every setting also has a KY_* environment variable (see docs/knobs.md).",
        epilog="exit status: 0 verify PASS, 1 verify FAIL, 2 bad usage or configuration, "
               "3 the court could not be reached (state saved), 130 interrupted")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = commands.add_parser("run", help="restore, the phases in PHASES, then sync/verify")
    _workspace_flag(run)
    _knob_flags(run, "STORE", "API_BASE", "PHASES", "BUDGET_SECONDS", "DRY_RUN", "RETRY_HARD")
    verify = commands.add_parser("verify", help="sync/verify alone: integrity, queues, exports, checkpoint")
    _workspace_flag(verify)
    _knob_flags(verify, "STORE", "AUDIT")
    derive = commands.add_parser("derive", help="derived fields and citations of every document, from the "
                                                "database and the texts alone (idempotent)")
    _workspace_flag(derive)
    _knob_flags(derive, "STORE")
    derive.add_argument("--redo", action="store_true", help="derive every document again, not only new ones")
    status = commands.add_parser("status", help="print the workspace's status JSON; changes nothing")
    _workspace_flag(status)
    report = commands.add_parser("report", help="coverage chart (status.png) and a table of counts")
    _workspace_flag(report)
    _knob_flags(report, "STORE")
    report.add_argument("--output", metavar="PNG", help="where to write the chart (default: workspace/status.png)")

    changes = commands.add_parser("changes", help="what the court added, withdrew, restored and changed since the "
                                                  "archive's first complete crawl, oldest first")
    _workspace_flag(changes)
    changes.add_argument("--since", metavar="YYYY-MM-DD", type=_day,
                         help="only the changes seen on or after this day (UTC)")
    changes.add_argument("--json", action="store_true",
                         help="one JSON object a line: document_id, change, seen_at, run, case_number, "
                              "court_code, kind, filed_date, sha256, fields, how")

    probe = commands.add_parser("probe", help="at most 10 requests to API_BASE: can the pipeline run against it?")
    _knob_flags(probe, "API_BASE")
    _verbose_flag(probe)
    _knob_flags(probe, "DISCOVERY")

    demo = commands.add_parser("demo", help="the whole pipeline against the built-in simulated court")
    demo.add_argument("--workspace", metavar="DIR", default="demo",
                      help="demo directory (default ./demo): workspace/ and store/ inside it")
    demo.add_argument("--docs", type=_bounded(int, 1), default=400,
                      help="documents in the simulated court (default 400)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the simulated court (default 7)")
    demo.add_argument("--fresh", action="store_true", help="delete the demo directory first")
    demo.add_argument("--store", choices=("dir", "simdrive"), default="dir",
                      help="dir: store/ inside the demo directory (default); simdrive: the simulated "
                           "Google Drive on 127.0.0.1, through the real pydrive2 stack")
    demo.add_argument("--no-update", action="store_true",
                      help="stop after the first crawl (by default the court then moves a month on and a second "
                           "run shows what an update finds, and the feed it writes)")
    demo.add_argument("-v", "--verbose", action="store_true", help="debug logging")

    sim = commands.add_parser("sim", help="serve the simulated court in the foreground")
    sim.add_argument("--port", type=TCP_PORT, default=8765,
                     help="TCP port on 127.0.0.1 (default 8765; 0: a free one)")
    sim.add_argument("--docs", type=_bounded(int, 0), default=300, help="documents (default 300)")
    sim.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    sim.add_argument("--results-limit", type=_bounded(int, 1), default=10000, help="announced results limit")
    sim.add_argument("--late-docs", type=_bounded(int, 0), default=0,
                     help="documents that appear during a crawl (at most --docs)")
    sim.add_argument("--no-faults", action="store_true", help="serve every document cleanly")
    sim.add_argument("--search-fault-rate", type=_bounded(float, 0.0, 1.0), default=0.0,
                     help="share of JSON answers that misbehave (503, 429, reset, torn body; default 0)")
    sim.add_argument("--stall-seconds", type=_bounded(float, 0.0), default=1.0,
                     help="how long a stalled download body stalls before the court hangs up (default 1)")
    sim.add_argument("--shape", choices=("inferred", "captured"), default="inferred",
                     help="rows as ctrack-api.md infers them, or as real captures show them (default inferred)")
    sim.add_argument("--document-search", choices=("present", "absent", "entries"), default="present",
                     help="the inferred document search: present, absent (404) or answering docket entries")
    sim.add_argument("--today", metavar="YYYY-MM-DD", type=_day,
                     help="the court's day (default: today); POST /__sim__/advance?days=30 moves it on with a "
                          "month of the court's activity (run the pipeline with KY_TODAY at the court's day)")
    _add_query_commands(commands)
    for command in commands.choices.values():   # for errors found after parsing (a knob's value)
        command.set_defaults(command_parser=command)
    return parser


def config_from_args(args: argparse.Namespace, env=None, **extra):
    """CFG from the command's knob flags (those it was not given are None: the environment's)."""
    overrides = {knob.name: getattr(args, knob.name, None) for knob in KNOBS if knob.flag}
    overrides["AUDIT"] = _audit_share(overrides["AUDIT"], env)
    return load_config(env, **{**overrides, **extra})


def _audit_share(flag: str | None, env) -> str | None:
    """`--audit SHARE` wins; a bare `--audit` takes KY_AUDIT when that asks for one, else 0.01."""
    if flag is None:
        return None
    if flag:
        return flag
    configured = (os.environ if env is None else env).get("KY_AUDIT", "").strip()
    return configured if configured not in ("", "0") else "0.01"


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("urllib3", "googleapiclient", "pydrive2", "oauth2client", "uvicorn"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # pypdf warns about every damaged PDF it reads ("EOF marker not found"); extraction_log and
    # failed_inventory.csv already say which documents failed and why.
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _main(argv)
        # Flushed here, not at exit: with stdout block-buffered (a pipe, no PYTHONUNBUFFERED) a
        # reader that left shows only now, and at exit it would be exit status 120 and a traceback.
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader went away (`status | head -5`): what it did not read is not wanted. Python
        # would complain once more flushing stdout at exit; point stdout at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


# Commands that look at an existing archive; those that also read the store take the store the
# workspace names when none is given.
ARCHIVE_COMMANDS = ("status", "verify", "report", "derive", "index", "show", "search", "export", "serve", "changes")
QUERY_COMMANDS = ("index", "show", "search", "export", "serve")


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "sim":
            return _cmd_sim(args)
        if args.command == "demo":
            _setup_logging(args.verbose)
            return _cmd_demo(args)
        cfg = config_from_args(args)
        if args.command in ARCHIVE_COMMANDS:
            cfg = _with_the_workspaces_store(args, cfg)
    except ConfigError as exc:
        return _config_error(args, exc)
    if args.command in ARCHIVE_COMMANDS:
        # These look at an archive; in a folder that holds none they would print zeros or create an
        # empty workspace and store. They say so instead, and write nothing.
        missing = no_archive(Path(cfg.WORKSPACE), database=args.command in QUERY_COMMANDS + ("changes",))
        if missing:
            print(f"kycourt-pipeline: {missing}", file=sys.stderr)
            return EXIT_USAGE
    if args.command in ("report", "derive", "index"):
        refusal = _not_adopted_yet(cfg)
        if refusal:
            print(f"kycourt-pipeline: {refusal}", file=sys.stderr)
            return EXIT_USAGE
    if args.command in QUERY_COMMANDS:
        return _run_query_command(cfg, args)
    if args.command == "status":
        return _cmd_status(cfg)
    if args.command == "changes":
        return _cmd_changes(cfg, since=args.since, as_json=args.json)
    _setup_logging(args.verbose)
    if args.command == "report":
        return _cmd_report(cfg, args.output)
    if args.command == "probe":
        return _cmd_probe(cfg)
    if args.command == "derive":
        return _cmd_derive(cfg, redo=args.redo)
    return _cmd_run(cfg, verify_only=args.command == "verify")


def _config_error(args: argparse.Namespace, exc: ConfigError) -> int:
    """A knob's bad value: named by the flag the user typed (with the command's usage), else by its
    environment variable, in one line; exit 2."""
    for knob in KNOBS:
        if knob.env == exc.variable and knob.flag and getattr(args, knob.name, None) is not None:
            args.command_parser.error(f"argument {knob.flag.name}: {exc.value!r} is not valid: "
                                      f"expected {exc.accepted}")
    print(f"kycourt-pipeline: {exc}", file=sys.stderr)
    return EXIT_USAGE


def _with_the_workspaces_store(args: argparse.Namespace, cfg, env=None):
    """cfg with the store the workspace's status.json names, when the user named none."""
    from notebook_builder.cells.c35_context import store_of_workspace
    environment = os.environ if env is None else env
    if getattr(args, "STORE", None) is not None or environment.get("KY_STORE") is not None:
        return cfg
    named = store_of_workspace(cfg.WORKSPACE)
    if not named:
        return cfg
    if environment.get("KY_DRIVE_FOLDER") is not None:
        named.pop("DRIVE_FOLDER", None)
    return config_from_args(args, env, **named)


def _not_adopted_yet(cfg) -> str | None:
    """Why the workspace's database cannot be read as this version's yet: an older version's (v1.2),
    which only a run adopts. None when it is this version's (or there is none)."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import not_adopted_message
    from notebook_builder.cells.c38_legacy import judge_database
    path = Path(cfg.WORKSPACE) / DB_FILENAME
    judgement = judge_database(path) if path.is_file() else None
    return not_adopted_message(path, judgement.version) if judgement is not None and judgement.legacy else None


def no_archive(workspace: Path, *, database: bool) -> str | None:
    """Why there is no archive to look at in `workspace` (None when there is one); `database`: a
    status.json alone does not do. A demo folder is told where its archive is."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import is_sqlite_file
    if is_sqlite_file(workspace / DB_FILENAME) or (not database and (workspace / "status.json").is_file()):
        return None
    inner = workspace / "workspace"
    if is_sqlite_file(inner / DB_FILENAME):
        return (f"{workspace} holds no archive: it is a demo folder, the archive is in {inner} "
                f"(--workspace {shlex.quote(str(inner))})")
    hint = "give --workspace DIR (or KY_WORKSPACE), or start one with `kycourt-pipeline run`"
    if not workspace.exists():
        return f"no workspace at {workspace}: {hint}"
    return f"{workspace} holds no archive (no {DB_FILENAME}): {hint}"


def _cmd_run(cfg, *, verify_only: bool) -> int:
    from notebook_builder.cells.c00_config import StoreError
    from notebook_builder.cells.c95_run import run_pipeline
    try:
        report = run_pipeline(cfg, verify_only=verify_only)
    except StoreError as exc:  # the store cannot be opened: nothing was written
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(report.summary())
    if report.bad_input:     # a database that cannot be adopted: nothing was written
        print(f"kycourt-pipeline: {report.error}", file=sys.stderr)
    return report.exit_status


def _cmd_status(cfg) -> int:
    """Reads the database read-only; writes nothing."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import Database, is_sqlite_file
    from notebook_builder.cells.c35_context import status_document
    from notebook_builder.cells.c38_legacy import judge_database
    db_path = Path(cfg.WORKSPACE) / DB_FILENAME
    saved_path = Path(cfg.WORKSPACE) / "status.json"
    saved = {}
    if saved_path.is_file():
        try:
            saved = json.loads(saved_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
    db = None
    extra = {"workspace": str(Path(cfg.WORKSPACE).resolve()), "database": False}
    extra.update({key: saved[key] for key in ("store", "drive_folder") if key in saved})
    if db_path.is_file() and is_sqlite_file(db_path):
        legacy = judge_database(db_path)
        if legacy.legacy:   # an older version's: what it holds, as it is (the next run adopts it)
            extra.update(database="an older version's database (v1.2), not adopted yet: the next run adopts it",
                         legacy_database={"rows": legacy.rows, "statuses": legacy.statuses,
                                          "newest_updated_at": legacy.newest_updated_at,
                                          "problems": legacy.problems})
            document = status_document(None, cfg, phase=saved.get("phase", "none"), verify=saved.get("verify"),
                                       extra=extra)
            document["counts"].update((status, count) for status, count in legacy.statuses.items()
                                      if status in document["counts"])
            document["documents"] = legacy.rows
            document["queues"] = {"download": None, "extract": None}
            document["remaining"] = "unknown until the next run adopts the older version's database"
            print(json.dumps(document, indent=2, sort_keys=True))
            return 0
        db = Database.open_readonly(db_path)
        extra["database"] = True
    try:
        document = status_document(db, cfg, phase=saved.get("phase", "none"), verify=saved.get("verify"),
                                   extra=extra)
    except sqlite3.OperationalError as exc:
        # A run killed mid-transaction leaves a hot journal only a writer may roll back; status writes nothing.
        extra["database"] = f"unreadable until the next run recovers it: {exc}"
        document = status_document(None, cfg, phase=saved.get("phase", "none"), verify=saved.get("verify"),
                                   extra=extra)
    finally:
        if db is not None:
            db.close()
    print(json.dumps(document, indent=2, sort_keys=True))
    return 0


def _day(text: str) -> str:
    """A --since day: YYYY-MM-DD."""
    try:
        return datetime.date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day YYYY-MM-DD") from None


def _cmd_changes(cfg, *, since: str | None, as_json: bool) -> int:
    """The workspace's change log (c19), oldest first; nothing to show is no error."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c19_changes import ChangeLog, change_line
    db = Database.open_readonly(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        records = ChangeLog(db).rows(since=since)
    except sqlite3.OperationalError:       # a database from before the change log: no change recorded
        records = []
    finally:
        db.close()
    for record in records:
        print(json.dumps(record) if as_json else change_line(record))
    if not records and not as_json:
        print("no change recorded" + (f" since {since}" if since else "") + " (changes are recorded from the first "
              "run after the archive's first complete crawl)", file=sys.stderr)
    return 0


def _cmd_report(cfg, output: str | None) -> int:
    from notebook_builder.cells.c97_report import ReportError, write_report
    try:
        print(write_report(cfg, output))
    except ReportError as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _cmd_probe(cfg) -> int:
    """The probe's table; 0 when the pipeline can run against API_BASE, 1 otherwise."""
    from notebook_builder.cells.c55_probe import probe
    report = probe(cfg)
    print(f"probe of {cfg.API_BASE}")
    print(report.table())
    return 0 if report.ok else 1
def _cmd_derive(cfg, *, redo: bool) -> int:
    """Restores nothing and asks the court nothing: the workspace's database and texts (a text
    missing locally comes from the store), then a checkpoint to the store."""
    from notebook_builder.cells.c00_config import StoreError
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c39_checkpoint import push_checkpoint
    from notebook_builder.cells.c86_derive import derive
    from notebook_builder.cells.c95_run import describe_stage
    try:
        ctx = open_context(cfg)
    except StoreError as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        ctx.open_database()
        result = derive(ctx, redo=redo)
        if result.derived:
            push_checkpoint(ctx)
    finally:
        ctx.close()
    print(f"   derive  {result.seconds:7.1f}s  {describe_stage('derive', result)}")
    return 0


def _cmd_sim(args: argparse.Namespace) -> int:
    from notebook_builder.simcourt import serve
    if args.late_docs > args.docs:
        args.command_parser.error(f"argument --late-docs: {args.late_docs} is more than --docs {args.docs}")
    try:
        serve(args.port, args.docs, args.seed, results_limit=args.results_limit,
              late_docs=args.late_docs, faults=not args.no_faults,
              search_fault_rate=args.search_fault_rate, stall_seconds=args.stall_seconds,
              shape=args.shape, document_search=args.document_search,
              today=datetime.date.fromisoformat(args.today) if args.today else None)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"kycourt-pipeline: port {args.port} on 127.0.0.1 is in use: choose another with --port "
              "(0 picks a free one)", file=sys.stderr)
        return EXIT_USAGE
    return 0


DEMO_MAX_PDF_BYTES = 4 * 1024 * 1024


DEMO_TODAY = datetime.date(2026, 10, 1)    # the simulated court's day at the demo's first crawl
DEMO_UPDATE_DAYS = 30                       # then the court moves this many days on, and an update follows


def _cmd_demo(args: argparse.Namespace) -> int:
    """The simulated court (full fault catalogue), the whole pipeline, a summary and PASS; then (unless
    --no-update) the court a month on and the update that finds what it did."""
    from notebook_builder.cells.c95_run import run_pipeline
    from notebook_builder.simcourt import SimCourt
    root = Path(args.workspace)
    if args.fresh and root.exists():
        shutil.rmtree(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"kycourt-pipeline: cannot create the demo folder {root}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    started = time.monotonic()
    # A small announced limit forces the shard splitting a real crawl meets;
    # oversized files are a few MiB over a cap of 4 MiB so the demo stays fast.
    # The document search lists no withheld file, so the court keeps none (a month on it restores none).
    court = SimCourt(args.docs, args.seed, results_limit=60, max_page=50, late_docs=max(1, args.docs // 40),
                     first_year=2016, last_year=2026, search_fault_rate=0.02,
                     oversize_bytes=DEMO_MAX_PDF_BYTES + 1024 * 1024, stall_seconds=2.0, today=DEMO_TODAY,
                     unavailable_files=False)
    updated_on = (DEMO_TODAY + datetime.timedelta(days=DEMO_UPDATE_DAYS)).isoformat()
    # A demo folder whose archive had its update already: the court is moved on first, as it was then.
    resumed = _demo_complete_through(root / "workspace") == updated_on
    # The demo is the same every time: a user's exported KY_* (a dry run, another store, some
    # phases) would turn it into something else, so they are set aside and named.
    ignored = sorted(name for name in os.environ if name.startswith("KY_"))
    with court:
        env = {name: value for name, value in os.environ.items() if not name.startswith("KY_")}
        env.update({
            "KY_WORKSPACE": str(root / "workspace"), "KY_STORE": str(root / "store"),
            "KY_API_BASE": court.base_url, "KY_PACING": "0", "KY_BACKOFF_BASE": "0.05",
            "KY_BACKOFF_CAP": "1", "KY_MAX_PDF_BYTES": str(DEMO_MAX_PDF_BYTES),
            "KY_FIRST_YEAR": "2016", "KY_LAST_YEAR": "2026", "KY_PAGE_SIZE": "50",
            "KY_CONVERGENCE_DELTA": "1", "KY_CHECKPOINT_SECONDS": "5", "KY_EXTRACT_TIMEOUT": "30",
            # A stalled body (the court stops sending for 2 s) ends in a read timeout after 1 s.
            "KY_HTTP_TIMEOUT": "1", "KY_TODAY": updated_on if resumed else DEMO_TODAY.isoformat(),
        })
        with contextlib.ExitStack() as stack:
            drive = None
            if args.store == "simdrive":
                from notebook_builder.simdrive import SimDrive

                # Writes limited as Drive does, faster (20 a second) so the demo stays short.
                drive = stack.enter_context(SimDrive(write_rate=20.0, write_burst=5.0, seed=args.seed))
                env.update({"KY_STORE": "drive", "KY_DRIVE_API": drive.api_root, "KY_DRIVE_WRITES": "20",
                            "KY_DRIVE_FOLDER": "ky_court_demo"})
            try:
                cfg = load_config(env)
            except ConfigError as exc:
                print(f"kycourt-pipeline: {exc}", file=sys.stderr)
                return EXIT_USAGE
            if ignored:
                print(f"demo: ignoring {', '.join(ignored)} (the demo sets its own configuration)")
            print(f"demo: simulated court with {args.docs} documents at {court.base_url}")
            store = f"simulated Drive at {drive.api_root}, folder {cfg.DRIVE_FOLDER}" if drive else cfg.STORE
            print(f"demo: workspace {cfg.WORKSPACE}, store {store}")
            print("demo: the simulated court misbehaves on purpose (5xx, 429, resets, stalled and torn bodies, "
                  "HTML pages, 401/403/404, oversized and unreadable PDFs): the WARNING lines below are "
                  "those simulated faults being handled")
            if resumed:
                court.advance(DEMO_UPDATE_DAYS, seed=args.seed)
            report = run_pipeline(cfg)
            if not (args.no_update or resumed) and report.exit_status == 0:
                print(report.summary())
                report = _demo_update(court, env, args.seed, updated_on)
            stats = court.stats()
            if drive is not None:
                counts = ", ".join(f"{kind} {n}" for kind, n in sorted(drive.requests.items()))
                drive_line = (f"demo: simulated Drive answered {sum(drive.requests.values())} requests "
                              f"({counts}); holds {len(drive.files_in(cfg.DRIVE_FOLDER + '/pdf_by_hash'))} PDFs")
    print(report.summary())
    print(f"demo: the simulated court answered {sum(stats['requests'].values())} requests and served "
          f"{stats['faults_served']} simulated faults, {stats['early_requests']} requests came back "
          f"before their Retry-After")
    if args.store == "simdrive":
        print(drive_line)
        print(f"demo: {time.monotonic() - started:.1f}s in all; the simulated Drive lived in memory, "
              f"inspect {root}/workspace")
    else:
        print(f"demo: {time.monotonic() - started:.1f}s in all; inspect {root}/store "
              f"(document_inventory.csv, failed_inventory.csv, pdf_by_hash/, text/)")
    print(demo_next_steps(root / "workspace", _demo_case_number(cfg.WORKSPACE)))
    return report.exit_status


DEMO_SEARCH = ("restitution", "--type", "order")


def _demo_complete_through(workspace: Path) -> str | None:
    try:
        return json.loads((workspace / "status.json").read_text(encoding="utf-8")).get("complete_through")
    except (OSError, ValueError, AttributeError):
        return None


def _demo_update(court, env: dict[str, str], seed: int, today: str):
    """The court a month on (living.py: new cases and filings, opinions, a reopened case, withdrawals, a
    restoration, retitled cases), then the run that updates the archive; what it found is printed."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c19_changes import ChangeLog, change_line
    from notebook_builder.cells.c95_run import run_pipeline
    plan = court.advance(DEMO_UPDATE_DAYS, seed=seed)
    counts = plan["counts"]
    print(f"demo: {DEMO_UPDATE_DAYS} days later ({plan['today']}) the court has filed {counts['added']} documents, "
          f"withdrawn {counts['withdrawn']} and changed the metadata of {counts['changed']} (retitled cases, "
          "corrected descriptions); the update asks it what changed:")
    report = run_pipeline(load_config({**env, "KY_TODAY": today}))
    db = Database.open_readonly(Path(env["KY_WORKSPACE"]) / DB_FILENAME)
    try:
        records = ChangeLog(db).rows()
        update = ChangeLog(db).last_update()
    finally:
        db.close()
    print(f"demo: the update found {update['words'] if update else 'nothing'}; the first changes "
          f"(all {len(records)}: kycourt-pipeline changes --workspace {shlex.quote(env['KY_WORKSPACE'])}):")
    for record in records[:DEMO_CHANGES_SHOWN]:
        print("  " + change_line(record))
    print("demo: the store holds them in changes/ (one JSONL file a run) and feed.atom (their Atom feed); "
          "`serve` answers /changes and /feed.atom?q=WORDS (a search's new documents)")
    return report


DEMO_CHANGES_SHOWN = 8


def demo_next_steps(workspace: Path, case_number: str | None) -> str:
    """The commands that query the demo's archive, as the user can paste them (the workspace
    names its store, so --store is not needed)."""
    flag = f"--workspace {shlex.quote(str(workspace))}"
    lines = [f"demo: the archive is in {workspace}; query it with:",
             f"  kycourt-pipeline status {flag}",
             f"  kycourt-pipeline search {shlex.join(DEMO_SEARCH)} {flag}"]
    if case_number:
        lines.append(f"  kycourt-pipeline show {shlex.quote(case_number)} {flag}")
    lines += [f"  kycourt-pipeline changes {flag}",
              f"  kycourt-pipeline export --format csv --out {shlex.quote(str(workspace.parent / 'export'))} {flag}",
              f"  kycourt-pipeline serve {flag}   # then open the URL it prints"]
    return "\n".join(lines)


def _demo_case_number(workspace: str) -> str | None:
    """The case number of the demo search's best hit (the `show` example)."""
    from notebook_builder.cells.c87_index import IndexMissingError, search_archive
    try:
        hits = search_archive(workspace, DEMO_SEARCH[0], kind=DEMO_SEARCH[2], limit=1)
    except IndexMissingError:
        return None
    return hits[0]["case_number"] if hits else None


# ------------------------------------------------------------ the query layer: index, show,
# search, export, serve (notebook_builder/query.py, cells/c87_index.py, cells/c96_web.py). Exit
# status: 0 done, 1 nothing matched (show), 2 bad usage, a malformed query, a missing index or a
# busy port.


def _query_flags(parser: argparse.ArgumentParser) -> None:
    _knob_flags(parser, "WORKSPACE", "STORE")
    _verbose_flag(parser)


def _add_query_commands(commands) -> None:
    index = commands.add_parser("index", help="build or bring up to date the full-text index (ky_search.sqlite)")
    _query_flags(index)
    show = commands.add_parser("show", help="everything known about a document id, a sha256 or a case number")
    _query_flags(show)
    show.add_argument("id", metavar="ID", help="a document id, a PDF's sha256, or a case number")
    show.add_argument("--json", action="store_true", help="print JSON")
    search = commands.add_parser("search", help="full-text search of the extracted texts (FTS5 syntax, bm25)")
    _query_flags(search)
    search.add_argument("query", metavar="QUERY", help='FTS5 query: words, "a phrase", NEAR(a b), prefix*, OR, NOT')
    search.add_argument("--court", help="CA or SC (or part of the court's name)")
    search.add_argument("--year", type=_bounded(int, 1900, 2100, "a year like 2019"), help="the case number's year")
    search.add_argument("--type", dest="kind", metavar="TYPE",
                        help="the document's kind as derived (opinion, order, brief, other), or a docket "
                             "entry type or description prefix, e.g. OPINION or ORDER")
    search.add_argument("--limit", type=_bounded(int, 1), default=20, help="hits at most (default 20)")
    search.add_argument("--rank-all", action="store_true",
                        help="rank every match (by default a query matching more than 10,000 documents is "
                             "ranked among the 10,000 most recent matches)")
    search.add_argument("--json", action="store_true", help="print JSON")
    export = commands.add_parser("export", help="the archive as a dataset: one record per document, with text")
    _query_flags(export)
    export.add_argument("--format", dest="fmt", choices=("jsonl", "csv", "parquet"), default="jsonl",
                        help="jsonl (default), csv or parquet (needs pyarrow)")
    export.add_argument("--out", metavar="DIR", required=True,
                        help="output folder (its files of an earlier export are replaced)")
    serve = commands.add_parser("serve", help="search the archive in a browser (and its tables, through "
                                              "Datasette), read-only, on 127.0.0.1")
    _query_flags(serve)
    serve.add_argument("--port", type=TCP_PORT, default=8001,
                       help="TCP port on 127.0.0.1 (default 8001; 0: a free one)")


def _run_query_command(cfg, args: argparse.Namespace) -> int:
    from notebook_builder import query
    from notebook_builder.cells.c18_search_index import SearchQueryError
    from notebook_builder.cells.c87_index import IndexMissingError
    from notebook_builder.cells.c98_search import ServeError
    _setup_logging(args.verbose)
    try:
        if args.command == "index":
            return _cmd_index(cfg)
        if args.command == "show":
            store, note = query_store(cfg)
            report = query.show_document(cfg, args.id, store=store)
            print(json.dumps(report, indent=2, default=str) if args.json else query.format_show(report))
            if note and not args.json:
                print(f"({note})")
            return 0
        if args.command == "search":
            return _cmd_search(cfg, args)
        if args.command == "export":
            manifest = query.export_archive(cfg, args.out, args.fmt, store=query_store(cfg)[0])
            print(f"exported {manifest['records']} documents to {args.out} "
                  f"({', '.join(entry['path'] for entry in manifest['files'])}, manifest.json, manifest-sha256.txt)")
            return 0
        return _cmd_serve(cfg, args.port)
    except query.NotFound as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return 1
    except (query.QueryError, SearchQueryError, IndexMissingError, ServeError) as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE


def query_store(cfg) -> tuple[Any, str | None]:
    """The store for reads (file sizes, texts the workspace lacks), never created: (store, None), or
    (None, why there is none)."""
    from notebook_builder.cells.c00_config import StoreError
    from notebook_builder.cells.c35_context import open_store
    if cfg.store_is_drive and not (in_colab() or cfg.DRIVE_API):
        return None, f"the store is Google Drive folder {cfg.DRIVE_FOLDER}, reachable from Colab only: " \
                     "files were looked for in the workspace"
    if not cfg.store_is_drive and not Path(cfg.STORE).is_dir():
        return None, f"no store at {cfg.STORE}: files were looked for in the workspace (--store DIR names one)"
    try:
        return open_store(cfg), None
    except (StoreError, OSError) as exc:
        return None, f"store {cfg.STORE} unavailable ({exc}): files were looked for in the workspace"


def _cmd_index(cfg) -> int:
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c87_index import index
    ctx = open_context(cfg)
    try:
        result = index(ctx)
    finally:
        ctx.close()
    print(f"index: {result.indexed} texts indexed, {result.refreshed} refreshed, {result.removed} removed, "
          f"{result.missing_texts} texts missing; {result.total} documents in the index"
          f"{'; mirrored to the store' if result.pushed else ''}")
    return 0


def _cmd_search(cfg, args: argparse.Namespace) -> int:
    from notebook_builder.cells.c18_search_index import CommonWordsQuery, SearchQueryError, index_behind
    from notebook_builder.cells.c87_index import (court_filter, format_hits, open_search_index, query_hint,
                                                  search_archive)
    sdb = open_search_index(cfg.WORKSPACE)
    try:
        hits = search_archive(cfg.WORKSPACE, args.query, court=args.court, year=args.year, kind=args.kind,
                              limit=args.limit, rank_all=args.rank_all, sdb=sdb, store=query_store(cfg)[0])
        # An uncapped ranking counted every match already; a capped one (or none) asks the index.
        total = hits[0]["ranked_among"] if hits and not hits[0]["rank_capped"] else sdb.match_count(
            args.query, year=args.year, kind=args.kind, **court_filter(args.court))
    except CommonWordsQuery as exc:
        raise SearchQueryError(f"query {args.query!r}: {exc}") from None
    except SearchQueryError as exc:
        raise SearchQueryError(f"malformed query {args.query!r}: {exc}; {query_hint(args.query)}") from None
    finally:
        sdb.close()
    coverage = index_behind(cfg.WORKSPACE)
    if coverage is not None:
        print(f"kycourt-pipeline: the search index is behind the archive ({coverage.describe()}): "
              f"run `kycourt-pipeline index` to bring it up to date", file=sys.stderr)
    if hits and hits[0]["rank_capped"]:
        print(f"kycourt-pipeline: more than {hits[0]['ranked_among']} documents match; ranked among the "
              f"{hits[0]['ranked_among']} most recent (--rank-all ranks every match, or narrow the query)",
              file=sys.stderr)
    if args.json:
        print(json.dumps({"query": args.query, "total": total, "count": len(hits), "hits": hits},
                         indent=2, default=str))
    elif hits:
        print(f"{total} documents match {args.query!r}; the best {len(hits)}:" if total > len(hits)
              else f"{total} documents match {args.query!r}:")
        print(format_hits(hits))
    else:
        print(f"no hits for {args.query!r}")
    return 0


def _cmd_serve(cfg, port: int) -> int:
    """Serves until SIGINT, SIGTERM or SIGHUP (a closed terminal); each stops the server, and with
    it everything serve started."""
    from notebook_builder.cells.c98_search import start_serve
    served = start_serve(cfg, port, store=query_store(cfg)[0])
    print(f"serving the archive read-only at {served.url}/ (Ctrl-C stops it; requests are logged to "
          f"{served.log})", flush=True)
    stop = threading.Event()
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in handled}
    try:
        while not stop.wait(0.5):
            if not served.alive():
                print(f"kycourt-pipeline: the server stopped on its own (see {served.log})", file=sys.stderr)
                return 1
    finally:
        served.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
