"""Run: one session of work, restore → adopt → the phases in PHASES → sync/verify.

Guarantees:
- After restore and before anything opens the database, an older version's archive (v1.2) is
  adopted (c38; its backups folded by c60 backfill, forced; the `adopt` line says what it brought,
  in that session only); one that cannot be adopted stops the session at once: one line, exit
  status 2, nothing written. After discover and download the adopted ids are checked against what
  discovery found (the `legacy` line, when something changed).
- The stages run in pipeline order and meet only in the database and the store; each is skipped
  once the clock says stop (budget or signal). With both discover and download in PHASES they run
  as one crawl (c75) in download's place, so backfill credits what the workspace holds first.
- SIGINT and SIGTERM stop the stages between documents; sync/verify still runs (a checkpoint and a
  resume archive are pushed) and the exit status is 130. A second signal aborts at once (nothing
  committed is lost). A full workspace disk (DiskFullError) stops the run with one message naming
  the disk, nothing torn promoted, exit 1.
- The court unreachable (the client's circuit breaker: COURT_DOWN_SECONDS without a usable answer
  and COURT_DOWN_FAILURES failures in a row): the stage that met it stops, the others that need the
  court are skipped, the local ones still run, state is saved and verify runs; one line says so and
  what remains; exit status 3.
- PROBE_FIRST: the probe (c55) runs first; when the pipeline cannot run against the court no stage
  runs, verify still does, and the run fails with one line naming the probe.
- `run_pipeline()` returns a `RunReport` whose `exit_status` follows CONTRACT.md (0 PASS, 1 FAIL,
  2 bad input, 3 court unreachable, 130 interrupted); its summary says in words (`count_noun`) what
  each stage did and what remains, the requests this run and the hours left at the current pacing,
  and, from the crawl's evidence, when every opinion, document and detail will be archived.
  A verify-only session never makes a store (c35 open_context).

In the notebook, this cell runs the whole job with the CFG of the first cell.
Knobs read: PHASES, RETRY_HARD, DRY_RUN, PROBE_FIRST (the stages read their own).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .c00_config import Config, CourtUnreachable, DiskFullError, PipelineError, RunClock, count_noun, load_config
from .c10_database import LegacyDatabaseError
from .c12_queues import WorkQueues
from .c20_store import Store
from .c31_court_client import court_client
from .c35_context import Context, crawl_status, crawl_words, open_context, write_status
from .c39_checkpoint import Checkpointer
from .c38_legacy import adopt, describe_adoption, describe_reconcile, reconcile_legacy_ids
from .c40_restore import restore
from .c50_discover import discover
from .c55_probe import probe
from .c60_backfill import backfill
from .c70_download import download, recover
from .c75_schedule import crawl
from .c80_extract import extract
from .c85_ocr import ocr
from .c86_derive import derive
from .c87_index import index
from .c89_feed import publish_changes
from .c90_verify import EMPTY_ARCHIVE, format_verify_report, verify

log_run = logging.getLogger("kycourt.run")

STAGES: dict[str, Callable[[Context], Any]] = {
    "discover": discover,
    "backfill": backfill,
    "download": download,
    "extract": extract,
    "ocr": ocr,
    "derive": derive,
    "index": index,
}
# The stages that ask the court; the others work on what the workspace and the store hold.
COURT_STAGES = frozenset({"discover", "download"})
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_COURT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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

    court_unreachable: str | None = None   # the circuit breaker's message
    bad_input: bool = False                # the error is the input's (a database that cannot be adopted): exit 2
    skipped: list[str] = field(default_factory=list)   # stages not run because the court is unreachable
    court: dict | None = None              # politeness by evidence (CourtClient.pace_figures) at the end
    crawl: dict | None = None              # time to a useful archive (c35 crawl_status) at the end

    def summary(self) -> str:
        lines = [f"config: {warning}" for warning in (self.cfg.warnings if self.cfg else ())]
        for name, result in self.stages.items():
            seconds = self.seconds.get(name, 0.0)
            lines.append(f"{name:>9}  {seconds:7.1f}s  {describe_stage(name, result)}")
        if self.court:
            lines.append(court_line(self.court, self.cfg))
        if self.crawl:
            lines.append(f"  archive  {crawl_words(self.crawl)}")
        if self.court_unreachable:
            remaining = self.verify.remaining if self.verify is not None else None
            skipped = f"; skipped {', '.join(self.skipped)}" if self.skipped else ""
            lines.append(f"court unreachable: {self.court_unreachable}{skipped}; "
                         f"remains: {remaining or 'nothing'}; run again when the court answers")
        if self.stopped and self.stopped != "court unreachable":
            lines.append(f"stopped early: {self.stopped}")
        if self.error:
            lines.append(f"error: {self.error}")
        if self.verify is not None:
            lines.append(format_verify_report(self.verify))
        return "\n".join(lines)


def court_line(figures: dict, cfg: Config | None) -> str:
    """The summary's politeness line: what this run asked of the court and what the rest costs."""
    pacing = f" (KY_PACING={cfg.PACING:g})" if cfg is not None else ""
    return (f"    court  {figures['requests']:,} requests this run, observed latency "
            f"{figures['latency_seconds']:.2f} s; {figures['downloads_left']:,} left to download: projected "
            f"{figures['projected_hours']:.2f} h at the current pacing{pacing}")


def describe_stage(name: str, result: Any) -> str:
    """What a stage did, in words (its result's counters, read by name), and why it stopped."""
    if result is None:
        return "not run"
    if isinstance(result, str):
        return result
    if name in _STAGE_DESCRIBED:
        return _STAGE_DESCRIBED[name](result)
    words = _STAGE_WORDS.get(name)
    if words is None:
        return _run_describe(result)
    get = lambda key, default=0: getattr(result, key, default)  # noqa: E731
    if get("skipped", None):
        return f"skipped: {get('skipped')}"
    if get("dry_run", False):
        return f"dry run: {get('queued')} documents queued for {name}, nothing done"
    text = words(get)
    stopped = get("stopped", None)
    if stopped:
        text += f"; stopped: {stopped}" if isinstance(stopped, str) else "; stopped"
    return text


def _words_restore(get) -> str:
    replayed = get("replayed")
    return get("message", "") + (f"; {count_noun(replayed, 'download')} replayed from the journal" if replayed else "")


def _words_recover(get) -> str:
    if not get("parts_removed") and not get("reverted") and not get("spent"):
        noun = "document's PDF" if get("checked") == 1 else "documents' PDFs"
        return f"nothing to heal ({get('checked')} {noun} checked)"
    return (f"healed after a kill: {count_noun(get('parts_removed'), 'unfinished download')} removed, "
            f"{count_noun(get('reverted'), 'document')} queued again (their PDF was nowhere), "
            f"{get('spent')} out of attempts")


def _words_discover(get) -> str:
    text = (f"{count_noun(get('sweeps'), 'sweep')}, {count_noun(get('pages'), 'search page')}, "
            f"{count_noun(get('rows_new'), 'new document')} ({get('documents')} known); "
            f"{'converged' if get('converged', False) else 'not converged'}")
    if get("complete_through", None) and not get("update", None):   # an update's words say it
        text += f", complete through {get('complete_through')}"
    if get("opinion_windows"):
        text += (f"; opinion pass: {count_noun(get('opinion_windows'), get('opinion_unit', 'week'))} swept"
                 + (", complete" if get("opinion_pass_complete", False) else ""))
    if get("details_cases"):
        text += f"; parties and lower courts of {count_noun(get('details_cases'), 'case')}"
    if get("unavailable"):
        text += f"; {count_noun(get('unavailable'), 'file')} withheld by the court"
    if get("not_public"):
        text += f"; {count_noun(get('not_public'), 'document')} not public at the court (kept, never asked for)"
    if get("fallback", None):
        text += f"; fell back from {get('fallback')}"
    if get("update", None):
        text += f"; update: {get('update')}"
    return text + (f"; {count_noun(get('errors'), 'shard')} failed (retried next sweep)" if get("errors") else "")


def _words_backfill(get) -> str:
    return (f"{count_noun(get('files'), 'legacy file')}: {count_noun(get('credited'), 'document')} credited, "
            f"{count_noun(get('written'), 'new PDF')}, {get('unmatched')} matching no document, "
            f"{count_noun(len(get('not_pdf', [])), 'file')} not a PDF")


def _words_download(get) -> str:
    text = (f"{get('downloaded')} downloaded ({get('duplicates')} duplicate content), "
            f"{get('permanent_failures')} failed for good, {get('exhausted')} out of attempts, "
            f"{count_noun(get('requests'), 'request')} ({count_noun(get('retries'), 'retry', 'retries')}); "
            f"{get('left')} left to download")
    if get("not_public"):
        text += f"; {count_noun(get('not_public'), 'download')} answered by the court's wall (not public, recorded so)"
    return text + (f"; {count_noun(get('refunded'), 'attempt')} given back (spent while the court was down)"
                   if get("refunded") else "")


def _words_extract(get) -> str:
    text = (f"{get('extracted')} extracted ({get('reused')} reused a twin's text), {count_noun(get('pages'), 'page')}, "
            f"{count_noun(get('failed_attempts'), 'failed attempt')} ({get('exhausted')} out of attempts)")
    if get("pages_poor_text"):
        text += f"; {count_noun(get('pages_poor_text'), 'page')} poor text in every engine, sent to OCR"
    if get("unreadable_pages"):
        text += f"; {count_noun(get('unreadable_pages'), 'page')} unreadable (poor text and no OCR text)"
    return text + (f"; {get('court_text_checked')} compared with the court's own text"
                   if get("court_text_checked") else "")


def _words_ocr(get) -> str:
    text = (f"{count_noun(get('pages'), 'scanned page')} of {count_noun(get('pdfs'), 'PDF')} recognised "
            f"({get('engine')}; {get('rotated_pages')} turned upright, {get('blank_pages')} blank), "
            f"{count_noun(get('chars'), 'character')}: {count_noun(get('documents'), 'document')} now "
            f"{'carries' if get('documents') == 1 else 'carry'} OCR text")
    if get("blank"):
        text += f", {count_noun(get('blank'), 'PDF')} gave no text (blank or unreadable scans)"
    text += f"; {count_noun(get('failed_pages'), 'page')} and {count_noun(get('failed'), 'PDF')} failed"
    orientation = get("orientation", "")
    return text + (f"; orientation not detected: {orientation}" if orientation not in ("", "detected") else "")


def _words_derive(get) -> str:
    text = (f"{count_noun(get('derived'), 'document')} derived ({get('with_text')} with a text), "
            f"{count_noun(get('citations'), 'citation')}, {count_noun(sum(get('warnings', {}).values()), 'warning')}")
    if get("texts_missing"):
        text += f"; {count_noun(get('texts_missing'), 'text')} missing from workspace and store"
    if not get("eyecite", None) and get("with_text"):
        text += "; case-law citations skipped (eyecite is not installed)"
    return text


def _words_index(get) -> str:
    text = (f"{count_noun(get('indexed'), 'text')} indexed, {get('refreshed')} refreshed, {get('removed')} removed; "
            f"{count_noun(get('total'), 'document')} searchable")
    if get("missing_texts"):
        text += f"; {count_noun(get('missing_texts'), 'text')} missing (indexed by a later run)"
    return text + ("; restored from the store" if get("restored_from_store", False) else "")


def _words_probe(get) -> str:
    verdict = "the pipeline can run" if get("ok", False) else "the pipeline cannot run"
    return f"{count_noun(get('requests'), 'request')}, strategy {get('strategy')}: {verdict}"


def _words_verify(get) -> str:
    if get("passed", False):
        return EMPTY_ARCHIVE if get("empty", False) else "PASS"
    return f"FAIL ({count_noun(len(get('reasons', [])), 'problem')})"


_STAGE_WORDS = {"restore": _words_restore, "recover": _words_recover, "discover": _words_discover,
                "backfill": _words_backfill, "download": _words_download, "extract": _words_extract,
                "ocr": _words_ocr, "derive": _words_derive, "index": _words_index, "probe": _words_probe,
                "verify": _words_verify}

# Steps whose own module words what they did (the adoption of an older archive and its ids).
_STAGE_DESCRIBED = {"adopt": describe_adoption, "legacy": describe_reconcile}


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
    ctx = open_context(cfg, store=store, clock=clock, create_store=False if verify_only else None)
    report.store = ctx.store
    guard = stop_on_signals(ctx.clock) if handle_signals else contextlib.nullcontext()
    try:
        with guard:
            _run_session(ctx, report, verify_only=verify_only)
    finally:
        ctx.close()
    passed = report.verify is not None and report.verify.passed
    if report.bad_input:
        report.exit_status = EXIT_USAGE
    elif report.error:
        report.exit_status = EXIT_FAIL
    elif ctx.clock.interrupted:
        report.exit_status = EXIT_INTERRUPTED
    elif not passed:
        report.exit_status = EXIT_FAIL     # the archive's integrity comes first
    elif report.court_unreachable:
        report.exit_status = EXIT_COURT_UNREACHABLE
    else:
        report.exit_status = EXIT_PASS
    return report


def _run_session(ctx: Context, report: RunReport, *, verify_only: bool) -> None:
    cfg = ctx.cfg
    try:
        _run_timed(report, "restore", lambda: restore(ctx))
        # An older version's database is adopted (and its backups folded) before anything opens it.
        adopted = _run_timed(report, "adopt", lambda: adopt(ctx, fold=lambda ctx: backfill(ctx, force=True)))
        if not adopted.acted:
            del report.stages["adopt"], report.seconds["adopt"]
        ctx.open_database()
        ctx.refresh_quota()
        backlog = ctx.mirror.catch_up(ctx.workspace, wait=False)   # a slow store catches up behind the crawl
        if backlog["uploaded"]:
            log_run.info("store caught up: %d names uploaded, %d left", backlog["uploaded"], backlog["left"])
        if not verify_only:
            if cfg.RETRY_HARD:
                forgiven = WorkQueues(ctx.db).forgive_failures()
                log_run.info("RETRY_HARD: %d failed documents back in the queue", forgiven)
            ctx.client = None if cfg.DRY_RUN else court_client(cfg, ctx.clock)
            if cfg.PROBE_FIRST and not cfg.DRY_RUN:
                probed = _run_timed(report, "probe", lambda: probe(cfg))
                log_run.info("probe:\n%s", probed.table())
                if not probed.ok:
                    raise PipelineError(f"the probe of {cfg.API_BASE} says the pipeline cannot run against "
                                        "this court (see its table); no stage ran")
            if not cfg.DRY_RUN:
                _run_timed(report, "recover", lambda: recover(ctx))
            # A session killed between discovery and its check of the ids finishes the check here.
            _run_check_legacy_ids(ctx, report)
            crawling = COURT_STAGES <= set(cfg.PHASES)
            # Every phase commits work worth keeping if the runtime dies: checkpoint throughout.
            with Checkpointer(ctx):
                for phase in cfg.PHASES:
                    if ctx.clock.should_stop():
                        break
                    if crawling and phase == "discover":
                        continue           # the crawl runs in download's place
                    if report.court_unreachable and phase in COURT_STAGES:
                        report.skipped.append(phase)
                        continue
                    ctx.phase = phase
                    write_status(ctx)
                    if crawling and phase == "download":
                        _run_crawl(ctx, report)
                    else:
                        _run_court_stage(ctx, report, phase)
        if ctx.clock.stop_reason:
            report.stopped = ctx.clock.stop_reason
        queued = WorkQueues(ctx.db).download_queue_size(cfg)
        if ctx.client is not None and ctx.client.requests_sent:
            report.court = ctx.client.pace_figures(queued)
        if COURT_STAGES & set(report.stages):
            report.crawl = crawl_status(ctx.db, cfg, queued=queued)
    except DiskFullError as exc:
        report.stopped = report.error = str(exc)
        log_run.error("%s", exc)
        return
    except LegacyDatabaseError as exc:   # nothing was changed: no verify, no checkpoint
        report.error, report.bad_input = str(exc), True
        log_run.error("%s", exc)
        return
    except PipelineError as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        log_run.error("%s", report.error)
        if ctx.db is None:
            return
    ctx.phase = "verify"
    try:
        indexed = report.stages.get("index")
        index_built = indexed is not None and not isinstance(indexed, str) and not indexed.stopped
        report.verify = _run_timed(report, "verify", lambda: verify(ctx, index_built=index_built))
        # After verify's checkpoint: what an update found joins the store (changes/, feed.atom), c89.
        publish_changes(ctx, getattr(report.stages.get("discover"), "run", None))
    except DiskFullError as exc:
        report.stopped = report.error = str(exc)
        log_run.error("%s", exc)


def _run_court_stage(ctx: Context, report: RunReport, phase: str) -> None:
    """Runs one phase; the circuit breaker opening inside it (raised, or said by the client's
    health afterwards) marks the court unreachable for the rest of the run."""
    try:
        if phase == "download":   # the recovery this session ran before the phases (none in a dry run)
            _run_timed(report, phase, lambda: download(ctx, report.stages.get("recover")))
        else:
            _run_timed(report, phase, lambda: STAGES[phase](ctx))
    except CourtUnreachable as exc:
        report.stages[phase] = f"stopped: {exc}"
        _court_unreachable(ctx, report, str(exc))
        return
    if phase in COURT_STAGES:
        _run_check_legacy_ids(ctx, report)
    _breaker_opened(ctx, report, getattr(report.stages.get(phase), "court_unreachable", None))


def _run_crawl(ctx: Context, report: RunReport) -> None:
    """The crawl (discover and download as one); its stages' results under their names. Adopted ids
    discovery confirmed are checked as soon as discovery is done, so the same crawl downloads them."""
    crawled = crawl(ctx, report.stages.get("recover"), discovered=lambda: _run_check_legacy_ids(ctx, report))
    _run_check_legacy_ids(ctx, report)
    report.stages["discover"], report.stages["download"] = crawled.discover, crawled.download
    for name, seconds in crawled.seconds.items():
        report.seconds[name] = report.seconds.get(name, 0.0) + seconds
    if crawled.court_unreachable:
        _court_unreachable(ctx, report, crawled.court_unreachable)
        return
    _breaker_opened(ctx, report, crawled.download.court_unreachable)


def _breaker_opened(ctx: Context, report: RunReport, message: str | None) -> None:
    """The breaker opened inside a stage that ended by itself (its health says so): the court is
    unreachable for the rest of the run."""
    health = getattr(ctx.client, "health", None)
    if health is not None and health.unreachable() and not report.court_unreachable:
        _court_unreachable(ctx, report, message or f"no usable answer for {health.silent_seconds():.0f} s")


def _run_check_legacy_ids(ctx: Context, report: RunReport) -> None:
    """Adopted ids discovery has now confirmed, or shown to be docket entries' or cases' (c38); the
    summary's `legacy` line adds up the session's checks that changed something."""
    reconciled = reconcile_legacy_ids(ctx)
    if reconciled.changed:
        earlier = report.stages.get("legacy")
        report.stages["legacy"] = reconciled if earlier is None else earlier.add(reconciled)


def _court_unreachable(ctx: Context, report: RunReport, message: str) -> None:
    if report.court_unreachable:
        return
    report.court_unreachable = ctx.court_unreachable = message
    report.stopped = report.stopped or "court unreachable"
    log_run.error("court unreachable: %s; the stages that need it stop, the rest of the run goes on", message)


def _run_timed(report: RunReport, name: str, action: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        result = action()
    finally:
        report.seconds[name] = report.seconds.get(name, 0.0) + time.monotonic() - started
    report.stages[name] = result
    return result


class SessionNotPassed(PipelineError):
    """The notebook's run cell raises it when the session did not end in PASS, so that
    "Run all" stops visibly there instead of drawing a chart of a failed run."""


def run_session(cfg: Config) -> RunReport:
    """The notebook's run cell: logging as the CLI sets it, but to stdout (Jupyter and Colab show
    stderr as a red box, as if every line were an error), one session, its summary; raises
    SessionNotPassed on verify FAIL (exit 1), an unreachable court (exit 3) or an interrupt (130)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stdout)
    # pypdf warns about every damaged PDF it reads; extraction_log and failed_inventory.csv say it.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    report = run_pipeline(cfg)
    print(report.summary())
    if report.exit_status != EXIT_PASS:
        reason = {EXIT_COURT_UNREACHABLE: "the court could not be reached (state saved; run again later)",
                  EXIT_INTERRUPTED: "interrupted (state saved; run again to resume)"}.get(
                      report.exit_status, "verify FAIL or an error: see the summary above")
        raise SessionNotPassed(f"exit status {report.exit_status}: {reason}")
    return report


if __name__ == "__main__":  # Run the session: restore, the phases, sync and verify
    RUN_REPORT = run_session(globals().get("CFG") or load_config())
