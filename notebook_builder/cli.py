"""kycourt-pipeline: the notebook's stages from a shell (CONTRACT.md, "Command line").

Flags override the environment, which overrides the defaults. Each command takes only the flags
it uses (`status` reads the workspace alone; `verify` and `report` the workspace and the store;
`run` everything). A command given no store (no --store, no KY_STORE) uses the store the
workspace's status.json names (`run` too); status, show, search, export and serve given no
workspace where ./ky_court_workspace holds no archive read the demo's, ./demo/workspace, saying
so. A store path that is not there is never made by a command that reads or verifies (c35
open_context): one line naming it, exit 2. A workspace this process cannot write (a read-only copy) is read
as it is: verify checks what needs no write (c91_verify_copy) and nothing is written.
Exit status: 0 verify PASS, 1 verify FAIL (or stdout refused a write: one line, "cannot write
the output"), 2 bad usage or configuration (one line on stderr, nothing written; a bad flag value
prints the command's usage and names the flag), 3 the court could not be reached (state saved,
verify ran), 130 interrupted (state saved), 141 the reader of the output went away
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

from notebook_builder.cells.c00_config import KNOB_BY_NAME, KNOBS, ConfigError, Knob, in_colab, load_config, parse_day

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
DEMO_FOLDER = "demo"


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
    restore = commands.add_parser("restore", help="make a workspace with no database from the store (its newest "
                                                  "state, or --point's); asks no court, writes nothing to the store")
    _workspace_flag(restore)
    _knob_flags(restore, "STORE")
    restore.add_argument("--point", metavar="NAME", help="a resume archive of the store (ky_court-WIP-resume-...), "
                                                         "or db/ky_court for the newest state of its page packs")
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
                         help="only the changes seen on or after this day (in Kentucky)")
    changes.add_argument("--json", action="store_true",
                         help="one JSON object a line: document_id, change, seen_at, run, case_number, "
                              "court_code, kind, filed_date, sha256, fields, how")

    probe = commands.add_parser("probe", help="at most 10 requests to API_BASE: can the pipeline run against it?")
    _knob_flags(probe, "API_BASE")
    _verbose_flag(probe)
    _knob_flags(probe, "DISCOVERY")

    demo = commands.add_parser("demo", help="the whole pipeline against the built-in simulated court")
    demo.add_argument("--workspace", metavar="DIR", default=DEMO_FOLDER,
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
    sim.add_argument("--court-system", metavar="NAME", type=_court_system, default="kentucky",
                     help="kentucky (the default: the C-Track Public Access court) or a TR Portal system: nevada, "
                          "alabama, oregon, north-dakota, wyoming, florida (its API root is printed; --docs, --seed, "
                          "--today, --results-limit and --search-fault-rate apply, the other flags are Kentucky's)")
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
    stdout = sys.stdout
    sys.stdout = _Output(stdout)
    try:
        try:
            return _main(argv)
        finally:
            # Flushed here, not at exit (argparse's --help and usage errors too): with stdout
            # block-buffered (a pipe or a file, no PYTHONUNBUFFERED) a reader that left or a full
            # disk shows only now, and at exit it would be exit status 120 and a traceback.
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`status | head -5`): what it did not read is not wanted. Python
        # would complain once more flushing stdout at exit; point stdout at /dev/null first.
        _stdout_to_devnull(stdout)
        return EXIT_BROKEN_PIPE
    except OutputUnwritable as exc:
        _stdout_to_devnull(stdout)
        print(f"kycourt-pipeline: cannot write the output: {exc}", file=sys.stderr)
        return EXIT_OUTPUT
    finally:
        sys.stdout = stdout


EXIT_OUTPUT = 1


class OutputUnwritable(Exception):
    """stdout refused a write (a full disk, /dev/full, an I/O error): one line, exit 1. Not an
    OSError, so no handler of the command's own files takes it for one of theirs."""


class _Output:
    """sys.stdout as the commands see it: a write or flush that fails for want of room or an I/O
    error is OutputUnwritable (a closed pipe stays BrokenPipeError: exit 141)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputUnwritable(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputUnwritable(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stdout_to_devnull(stream) -> None:
    """What stdout still buffers goes nowhere: Python's flush at exit then has nothing to complain of."""
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError, AttributeError):   # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


# Commands that look at an existing archive; those that also read the store take the store the
# workspace names when none is given (`run` too: a run of an existing archive mirrors to its store).
ARCHIVE_COMMANDS = ("status", "verify", "report", "derive", "index", "show", "search", "export", "serve", "changes")
QUERY_COMMANDS = ("index", "show", "search", "export", "serve")
# Commands that write to the store: a store they are given that is not there is refused (a typo
# makes no second archive); all but report refuse the workspace's own store when it is gone too.
STORE_WRITERS = ("verify", "report", "derive", "index")


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
        if args.command in ("status", "show", "search", "export", "serve"):   # they write nothing
            cfg = _the_demos_workspace(args, cfg)
        if args.command in ARCHIVE_COMMANDS or args.command == "run":
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
        refusal = (_not_adopted_yet(cfg) if args.command in ("report", "derive", "index") else None) \
            or _store_refusal(args, cfg)
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
    if args.command == "restore":
        return _cmd_restore(cfg, args.point)
    if args.command == "verify" and _read_only(cfg):
        return _cmd_verify_copy(cfg)
    return _cmd_run(cfg, verify_only=args.command == "verify")


def _read_only(cfg) -> bool:
    from notebook_builder.cells.c35_context import read_only_workspace
    return read_only_workspace(cfg.WORKSPACE)


def _store_given(args: argparse.Namespace, env=None) -> bool:
    return getattr(args, "STORE", None) is not None or (os.environ if env is None else env).get("KY_STORE") is not None


def _store_refusal(args: argparse.Namespace, cfg) -> str | None:
    """Why a command that writes to the store does not go on with this one: a directory that is
    not there (nothing is made of it). None otherwise; the readers say a missing store in their
    output, and report writes its chart to the workspace alone when the workspace's store is gone."""
    from notebook_builder.cells.c35_context import missing_store_message
    if args.command not in STORE_WRITERS or cfg.store_is_drive or Path(cfg.STORE).is_dir():
        return None
    if _store_given(args) or args.command != "report":
        return missing_store_message(cfg)
    return None


def _the_demos_workspace(args: argparse.Namespace, cfg, env=None):
    """cfg reading the demo's archive (./demo/workspace) when the user named no workspace and the
    default one holds none: a query typed where the demo ran finds the demo's archive."""
    environment = os.environ if env is None else env
    if getattr(args, "WORKSPACE", None) is not None or environment.get("KY_WORKSPACE") is not None:
        return cfg
    demo = Path(DEMO_FOLDER) / "workspace"
    if not no_archive(Path(cfg.WORKSPACE), database=True) or no_archive(demo, database=True):
        return cfg
    print(f"kycourt-pipeline: no archive in {shlex.quote(os.path.relpath(cfg.WORKSPACE))}; reading the demo's, "
          f"{demo} (--workspace DIR reads another)", file=sys.stderr)
    return config_from_args(args, env, WORKSPACE=str(demo))


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
    if _store_given(args, environment):
        return cfg
    named = store_of_workspace(cfg.WORKSPACE)
    if not named:
        return cfg
    if environment.get("KY_DRIVE_FOLDER") is not None:
        named.pop("DRIVE_FOLDER", None)
    return config_from_args(args, env, WORKSPACE=cfg.WORKSPACE, **named)


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
    """Reads the database read-only (c10 open_reader); writes nothing. A database it cannot read
    is one line and exit status 1, never a document of zeros."""
    from notebook_builder.cells.c06_layout import DB_FILENAME
    from notebook_builder.cells.c10_database import Database, is_sqlite_file
    from notebook_builder.cells.c35_context import saved_status, status_document
    from notebook_builder.cells.c38_legacy import judge_database
    db_path = Path(cfg.WORKSPACE) / DB_FILENAME
    saved = saved_status(cfg.WORKSPACE)
    db = None
    extra = {"workspace": str(Path(cfg.WORKSPACE).resolve()), "database": False}
    extra.update({key: saved[key] for key in ("store", "store_relative", "drive_folder") if key in saved})
    try:
        if db_path.is_file() and is_sqlite_file(db_path):
            legacy = judge_database(db_path)
            if legacy.legacy:   # an older version's: what it holds, as it is (the next run adopts it)
                print(json.dumps(_legacy_status(cfg, saved, extra, legacy), indent=2, sort_keys=True))
                return 0
            db = Database.open_readonly(db_path)
            extra["database"] = True
        document = status_document(db, cfg, phase=saved.get("phase", "none"), verify=saved.get("verify"),
                                   extra=extra)
    except sqlite3.DatabaseError as exc:
        print(f"kycourt-pipeline: cannot read {db_path}: {exc} (a run recovers what a killed one left; "
              "a damaged file: RUNBOOK.md, 'integrity_check failing')", file=sys.stderr)
        return 1
    finally:
        if db is not None:
            db.close()
    print(json.dumps(document, indent=2, sort_keys=True))
    return 0


def _day(text: str) -> str:
    """argparse type: a day YYYY-MM-DD, Kentucky's (--since, --today, --after, --before)."""
    try:
        return parse_day(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def _legacy_status(cfg, saved: dict, extra: dict, legacy) -> dict:
    """status of an older version's database (v1.2), not adopted yet: what it holds, as it is."""
    from notebook_builder.cells.c35_context import status_document
    extra = {**extra, "database": "an older version's database (v1.2), not adopted yet: the next run adopts it",
             "legacy_database": {"rows": legacy.rows, "statuses": legacy.statuses,
                                 "newest_updated_at": legacy.newest_updated_at, "problems": legacy.problems}}
    document = status_document(None, cfg, phase=saved.get("phase", "none"), verify=saved.get("verify"), extra=extra)
    document["counts"].update((status, count) for status, count in legacy.statuses.items()
                              if status in document["counts"])
    document["documents"] = legacy.rows
    document["queues"] = {"download": None, "extract": None}
    document["remaining"] = "unknown until the next run adopts the older version's database"
    return document


def _cmd_verify_copy(cfg) -> int:
    """verify of a workspace this process cannot write (c91_verify_copy): checks, writes nothing."""
    from notebook_builder.cells.c00_config import StoreError
    from notebook_builder.cells.c91_verify_copy import verify_copy
    try:
        text, passed = verify_copy(cfg)
    except StoreError as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return 0 if passed else 1


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
def _cmd_restore(cfg, point: str | None) -> int:
    """restore: the store's state into a workspace without a database; exit 2 when it has one or the
    store is not there, 1 when the store holds nothing to restore."""
    from notebook_builder.cells.c00_config import PipelineError, StoreError
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c40_restore import restore, workspace_has_database
    workspace = Path(cfg.WORKSPACE)
    if workspace_has_database(workspace):
        print(f"kycourt-pipeline: {workspace} has a database already: restore fills only a workspace "
              "without one (use a new --workspace)", file=sys.stderr)
        return EXIT_USAGE
    try:
        ctx = open_context(cfg, create_store=False)
    except StoreError as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = restore(ctx, point=point)
    except PipelineError as exc:
        print(f"kycourt-pipeline: restore: {exc}", file=sys.stderr)
        return 1
    finally:
        ctx.close()
    for name, reason in result.rejected:
        print(f"rejected {name}: {reason}")
    print(result.message)
    return 0 if result.restored else 1


def _cmd_derive(cfg, *, redo: bool) -> int:
    """Restores nothing and asks the court nothing: the workspace's database and texts (a text
    missing locally comes from the store), then a checkpoint to the store."""
    from notebook_builder.cells.c39_checkpoint import push_checkpoint
    from notebook_builder.cells.c86_derive import derive
    from notebook_builder.cells.c95_run import describe_stage
    ctx = _existing_archive_context(cfg)
    if ctx is None:
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


def _court_system(text: str) -> str:
    """A --court-system: kentucky, or the name of a simulated TR Portal system."""
    if text.strip().lower() == "kentucky":
        return "kentucky"
    from notebook_builder.simcourt.trportal import system_named
    try:
        return system_named(text).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# sim's flags that only the Kentucky court takes, and their defaults
KENTUCKY_SIM_FLAGS = {"late_docs": 0, "no_faults": False, "stall_seconds": 1.0, "shape": "inferred",
                      "document_search": "present"}


def _cmd_sim(args: argparse.Namespace) -> int:
    if args.court_system != "kentucky":
        return _cmd_sim_trportal(args)
    from notebook_builder.simcourt import serve
    if args.late_docs > args.docs:
        args.command_parser.error(f"argument --late-docs: {args.late_docs} is more than --docs {args.docs}")
    return _serve_sim(args.port, lambda: serve(
        args.port, args.docs, args.seed, results_limit=args.results_limit,
        late_docs=args.late_docs, faults=not args.no_faults,
        search_fault_rate=args.search_fault_rate, stall_seconds=args.stall_seconds,
        shape=args.shape, document_search=args.document_search,
        today=datetime.date.fromisoformat(args.today) if args.today else None))


def _cmd_sim_trportal(args: argparse.Namespace) -> int:
    """`sim --court-system NAME`: the simulated TR Portal court of that system, in the foreground."""
    from notebook_builder.simcourt.trportal import serve
    for name, default in KENTUCKY_SIM_FLAGS.items():
        if getattr(args, name) != default:
            args.command_parser.error(f"argument --{name.replace('_', '-')}: only for --court-system kentucky")
    return _serve_sim(args.port, lambda: serve(
        args.port, args.court_system, args.docs, args.seed, window=args.results_limit,
        fault_rate=args.search_fault_rate, today=datetime.date.fromisoformat(args.today) if args.today else None))


def _serve_sim(port: int, serve: Callable[[], None]) -> int:
    """Runs a simulated court's `serve` in the foreground; exit 2 with one line when its port is taken."""
    try:
        serve()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"kycourt-pipeline: port {port} on 127.0.0.1 is in use: choose another with --port "
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
            with demo_court_carried_on(court, root, args.docs, args.seed):
                if resumed:
                    court.advance(DEMO_UPDATE_DAYS, seed=args.seed)
                report = run_pipeline(cfg)
                if not (args.no_update or resumed) and report.exit_status == 0:
                    print(report.summary())
                    report = _demo_update(court, env, args.seed, updated_on, typed_program())
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
    print(demo_next_steps(root / "workspace", _demo_case_number(cfg.WORKSPACE), typed_program()))
    return report.exit_status


DEMO_SEARCH = ("restitution", "--type", "order")
DEMO_COURT_STATE = ".simcourt-state.json"


def _demo_complete_through(workspace: Path) -> str | None:
    from notebook_builder.cells.c35_context import saved_status
    return saved_status(workspace).get("complete_through")


def _demo_update(court, env: dict[str, str], seed: int, today: str, program: str = "kycourt-pipeline"):
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
          f"(all {len(records)}: {program} changes --workspace {shlex.quote(env['KY_WORKSPACE'])}):")
    for record in records[:DEMO_CHANGES_SHOWN]:
        print("  " + change_line(record))
    print("demo: the store holds them in changes/ (one JSONL file a run) and feed.atom (their Atom feed); "
          "`serve` answers /changes and /feed.atom?q=WORDS (a search's new documents)")
    return report


DEMO_CHANGES_SHOWN = 8


@contextlib.contextmanager
def demo_court_carried_on(court, root: Path, docs: int, seed: int):
    """The simulated court carries on from where the demo's last one stopped (its per-document
    fault counters, searches served: root/.simcourt-state.json, for the same docs and seed), and
    leaves its own for the next demo, however this one ends: a demo interrupted and run again
    ends in the same final states as one never interrupted."""
    path = root / DEMO_COURT_STATE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, dict) and saved.get("docs") == docs and saved.get("seed") == seed:
        court.resume(saved.get("court") or {})
    try:
        yield
    finally:
        from notebook_builder.cells.c05_durable import durable_write
        durable_write(path, json.dumps({"docs": docs, "seed": seed, "court": court.progress()}).encode("utf-8"))


def demo_next_steps(workspace: Path, case_number: str | None, program: str = "kycourt-pipeline") -> str:
    """The commands that query the demo's archive, as the user can paste them in the shell the
    demo ran in (`program` as it can be typed there; the workspace names its store, so --store is
    not needed)."""
    flag = f"--workspace {shlex.quote(str(workspace))}"
    lines = [f"demo: the archive is in {workspace}; query it with:",
             f"  {program} status {flag}",
             f"  {program} search {shlex.join(DEMO_SEARCH)} {flag}"]
    if case_number:
        lines.append(f"  {program} show {shlex.quote(case_number)} {flag}")
    lines += [f"  {program} changes {flag}",
              f"  {program} export --format csv --out {shlex.quote(str(workspace.parent / 'export'))} {flag}",
              f"  {program} serve {flag}   # then open the URL it prints"]
    return "\n".join(lines)


def typed_program(argv0: str | None = None) -> str:
    """This program as the user can type it again in this shell: `kycourt-pipeline` when that is
    what PATH finds, else the path that was run (relative to the current folder when under it,
    so `.venv/bin/kycourt-pipeline`), and `<python> -m notebook_builder` when run as a module."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if Path(argv0).name == "__main__.py":
        return f"{_typed_path(sys.executable)} -m notebook_builder"
    found = shutil.which("kycourt-pipeline")
    if found and Path(argv0).name == "kycourt-pipeline" and Path(argv0).exists() and os.path.samefile(found, argv0):
        return "kycourt-pipeline"
    return _typed_path(argv0)


def _typed_path(path: str) -> str:
    absolute = Path(path).absolute()
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(absolute))
    return shlex.quote(str(relative) if relative.parent != Path(".") else f"./{relative}")


def _demo_case_number(workspace: str) -> str | None:
    """The case number of the demo search's best hit (the `show` example)."""
    from notebook_builder.cells.c18_search_index import IndexMissingError
    from notebook_builder.cells.c87_index import search_archive
    try:
        hits = search_archive(workspace, DEMO_SEARCH[0], kind=DEMO_SEARCH[2], limit=1).hits
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
    search = commands.add_parser("search", help="full-text search of the extracted texts, every match ranked")
    _query_flags(search)
    search.add_argument("query", metavar="QUERY", nargs="?", default="",
                        help='words (all must match), "an exact phrase", -word to leave out, OR, prefix*, a case '
                             "number; empty: every document under the filters, newest first")
    search.add_argument("--court", help="CA or SC (or part of the court's name)")
    search.add_argument("--year", type=_bounded(int, 1900, 2100, "a year like 2019"), help="the case number's year")
    search.add_argument("--type", dest="kind", metavar="TYPE",
                        help="the document's kind as derived (opinion, order, brief, other), or a docket "
                             "entry type or description prefix, e.g. OPINION or ORDER")
    search.add_argument("--after", type=_day, metavar="YYYY-MM-DD", help="filed on or after this day")
    search.add_argument("--before", type=_day, metavar="YYYY-MM-DD", help="filed on or before this day")
    search.add_argument("--sort", choices=("relevance", "newest", "oldest"), default="relevance",
                        help="relevance (default), or the filed date, newest or oldest first")
    search.add_argument("--page", type=_bounded(int, 1), default=1, help="the page of hits, from 1 (default 1)")
    search.add_argument("--limit", type=_bounded(int, 1), default=20, help="hits on a page (default 20, at most 500)")
    search.add_argument("--rank-all", action="store_true",
                        help="kept for scripts that pass it: every match is always ranked")
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
    from notebook_builder.cells.c18_search_index import IndexMissingError, SearchQueryError
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
            print(f"exported {manifest['records']} document{'' if manifest['records'] == 1 else 's'} to {args.out} "
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


def _existing_archive_context(cfg):
    """The context of an existing archive for a command that writes to its store (derive, index), or
    None when the store is not there (said in one line: a typo makes no second archive)."""
    from notebook_builder.cells.c00_config import StoreError
    from notebook_builder.cells.c35_context import open_context
    try:
        return open_context(cfg, create_store=False)
    except StoreError as exc:
        print(f"kycourt-pipeline: {exc}", file=sys.stderr)
        return None


def _cmd_index(cfg) -> int:
    from notebook_builder.cells.c87_index import index
    ctx = _existing_archive_context(cfg)
    if ctx is None:
        return EXIT_USAGE
    try:
        result = index(ctx)
    finally:
        ctx.close()
    from notebook_builder.cells.c00_config import count_noun
    print(f"index: {count_noun(result.indexed, 'text')} indexed, {result.refreshed} refreshed, {result.removed} "
          f"removed, {count_noun(result.missing_texts, 'text')} missing; {count_noun(result.total, 'document')} in "
          f"the index"
          f"{'; mirrored to the store' if result.pushed else ''}")
    return 0


def _cmd_search(cfg, args: argparse.Namespace) -> int:
    from notebook_builder.cells.c18_search_index import index_behind
    from notebook_builder.cells.c87_index import format_hits, page_past_last, result_heading, search_archive
    result = search_archive(cfg.WORKSPACE, args.query, court=args.court, year=args.year, kind=args.kind,
                            after=args.after, before=args.before, sort=args.sort, page=args.page,
                            limit=args.limit, store=query_store(cfg)[0])
    coverage = index_behind(cfg.WORKSPACE)
    if coverage is not None:
        print(f"kycourt-pipeline: the search index is behind the archive ({coverage.describe()}): "
              f"run `kycourt-pipeline index` to bring it up to date", file=sys.stderr)
    if args.json:
        print(json.dumps(result.as_json(), indent=2, default=str))
        return 0
    order = {"relevance": "", "newest": ", newest first", "oldest": ", oldest first"}[result.sort]
    if result.hits:
        shown = f"{result.first}-{result.last}" if result.total > len(result.hits) else "all"
        print(f"{result_heading(result)}; {shown}{order}:")
    elif result.total:
        print(f"{result_heading(result)}; {page_past_last(result)}")
    elif args.query.strip():
        print(f"no hits for {args.query!r}")
    else:
        print("no documents match the filters" if result.filters else "no documents in the index")
    if result.notes:
        print(f"read as: {result.read_as} ({'; '.join(result.notes)})")
    if result.hits:
        print(format_hits(result))
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
