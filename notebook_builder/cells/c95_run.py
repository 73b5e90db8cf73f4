"""Run: one session of work, restore → the phases in PHASES → sync/verify.

Guarantees:
- The stages run in pipeline order and meet only in the database and the
  store; each is skipped once the clock says stop (budget or signal).
- SIGINT and SIGTERM (Colab's interrupt, a killed job) ask the stages to stop
  between documents; sync/verify still runs, so a checkpoint and a resume
  archive are pushed, and the exit status is 130. A second signal aborts at
  once (nothing committed is lost; the next run resumes).
- A full workspace disk (DiskFullError) stops the run with one message that
  names the disk; nothing torn is promoted, and the run exits 1.
- `run_pipeline()` returns a `RunReport` whose `exit_status` follows
  CONTRACT.md: 0 PASS, 1 FAIL, 130 interrupted.

In the notebook, this cell runs the whole job with the CFG of the first cell.
Knobs read: PHASES, RETRY_HARD, DRY_RUN (the stages read their own).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .c00_config import Config, DiskFullError, PipelineError, RunClock, load_config
from .c20_store import Store
from .c30_client import CourtClient
from .c35_context import Checkpointer, Context, open_context, write_status
from .c40_restore import restore
from .c50_discover import discover
from .c60_backfill import backfill
from .c70_download import download, recover
from .c80_extract import extract
from .c87_index import index
from .c90_verify import format_verify_report, verify

log_run = logging.getLogger("kycourt.run")

STAGES: dict[str, Callable[[Context], Any]] = {
    "discover": discover,
    "backfill": backfill,
    "download": download,
    "extract": extract,
    "index": index,
}
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass
class RunReport:
    stages: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    verify: Any = None
    stopped: str | None = None      # why the run stopped early: SIGINT, SIGTERM, budget, disk full
    error: str | None = None
    exit_status: int = EXIT_FAIL
    # The store the run used (open, and authenticated when it is Drive): the notebook's status
    # cell reuses it rather than opening, and asking Drive for, a second one.
    store: Store | None = field(default=None, repr=False, compare=False)
    cfg: Config | None = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        lines = []
        for name, result in self.stages.items():
            seconds = self.seconds.get(name, 0.0)
            lines.append(f"{name:>9}  {seconds:7.1f}s  {_run_describe(result)}")
        if self.stopped:
            lines.append(f"stopped early: {self.stopped}")
        if self.error:
            lines.append(f"error: {self.error}")
        if self.verify is not None:
            lines.append(format_verify_report(self.verify))
        return "\n".join(lines)


def _run_describe(result: Any) -> str:
    if dataclasses.is_dataclass(result):
        values = dataclasses.asdict(result)
    elif isinstance(result, dict):
        values = result
    else:
        return str(result)
    shown = []
    for key, value in values.items():
        if isinstance(value, (list, dict, tuple)):
            value = len(value)
        if isinstance(value, float):
            value = round(value, 2)
        shown.append(f"{key}={value}")
    return " ".join(shown)


@contextlib.contextmanager
def stop_on_signals(clock: RunClock) -> Iterator[None]:
    """SIGINT/SIGTERM set the stop flag; a second signal raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if clock.stop_event.is_set() and clock.interrupted:
            raise KeyboardInterrupt(f"second {name}: aborting")
        log_run.warning("%s received: finishing the document in flight, then saving state", name)
        clock.request_stop(name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_pipeline(cfg: Config, *, store: Store | None = None, clock: RunClock | None = None,
                 handle_signals: bool = True, verify_only: bool = False) -> RunReport:
    """One session: restore, the configured phases, then sync/verify."""
    report = RunReport(cfg=cfg)
    ctx = open_context(cfg, store=store, clock=clock)
    report.store = ctx.store
    guard = stop_on_signals(ctx.clock) if handle_signals else contextlib.nullcontext()
    try:
        with guard:
            _run_session(ctx, report, verify_only=verify_only)
    finally:
        ctx.close()
    if report.error:
        report.exit_status = EXIT_FAIL
    elif ctx.clock.interrupted:
        report.exit_status = EXIT_INTERRUPTED
    else:
        passed = report.verify is not None and report.verify.passed
        report.exit_status = EXIT_PASS if passed else EXIT_FAIL
    return report


def _run_session(ctx: Context, report: RunReport, *, verify_only: bool) -> None:
    cfg = ctx.cfg
    try:
        _run_timed(report, "restore", lambda: restore(ctx))
        ctx.open_database()
        ctx.refresh_quota()
        backlog = ctx.mirror.catch_up(ctx.workspace)
        if backlog["uploaded"]:
            log_run.info("store caught up: %d names uploaded, %d left", backlog["uploaded"], backlog["left"])
        if not verify_only:
            if cfg.RETRY_HARD:
                forgiven = ctx.db.forgive_failures()
                log_run.info("RETRY_HARD: %d failed documents back in the queue", forgiven)
            ctx.client = None if cfg.DRY_RUN else CourtClient(cfg, ctx.clock)
            if not cfg.DRY_RUN:
                _run_timed(report, "recover", lambda: recover(ctx))
            # Every phase commits work worth keeping if the runtime dies: checkpoint throughout.
            with Checkpointer(ctx):
                for phase in cfg.PHASES:
                    if ctx.clock.should_stop():
                        break
                    ctx.phase = phase
                    write_status(ctx)
                    _run_timed(report, phase, lambda: STAGES[phase](ctx))
        if ctx.clock.stop_reason:
            report.stopped = ctx.clock.stop_reason
    except DiskFullError as exc:
        report.stopped = report.error = str(exc)
        log_run.error("%s", exc)
        return
    except PipelineError as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        log_run.error("%s", report.error)
        if ctx.db is None:
            return
    ctx.phase = "verify"
    try:
        report.verify = _run_timed(report, "verify", lambda: verify(ctx))
    except DiskFullError as exc:
        report.stopped = report.error = str(exc)
        log_run.error("%s", exc)


def _run_timed(report: RunReport, name: str, action: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        result = action()
    finally:
        report.seconds[name] = report.seconds.get(name, 0.0) + time.monotonic() - started
    report.stages[name] = result
    return result


if __name__ == "__main__":  # the notebook's "Run all": one session with the first cell's CFG
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    RUN_REPORT = run_pipeline(globals().get("CFG") or load_config())
    print(RUN_REPORT.summary())
