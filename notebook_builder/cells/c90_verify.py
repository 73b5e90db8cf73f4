"""Sync and verify: prove the archive is whole, mirror the proof, leave a resume point.

Guarantees:
- The store backlog is caught up first and killed writes' temp files (over an hour old) removed;
  then `PRAGMA integrity_check`, counts per status, and the queue sizes the stages take work from.
- `document_inventory.csv` (every document, every column) and `failed_inventory.csv` (failed
  documents and downloaded ones out of extract attempts, with a `reason`) are written atomically
  to the workspace and mirrored to the store when their bytes changed.
- Every `extracted` document carries extracted_chars and pages: one that
  does not is named, back in the extract queue (c13 `TextRecords.back_to_extract`).
- Rows claiming a PDF carry sha256 and `local_pdf == pdf_by_hash/<sha256>.pdf`.
  Every `pdf_by_hash/` and `text/` name they refer to (`text/<sha256>.ocr.txt`
  too once OCR'd) is audited by c21_fixity: the listing every run, the bytes
  of a rolling slice (every name once in 10 runs; AUDIT a larger share,
  VERIFY_HASHES or AUDIT=all every name), damage healed from a good copy (the
  court too, when the run has one); a damage no good copy heals is a reason
  to FAIL, naming the file.
- The search index (ky_search.sqlite) is compared with the extracted
  documents and reported; when PHASES has `index` and a session built the
  index (or one exists), it must cover every extracted document with its
  current text, unless the run stopped early (budget, signal).
- The store's folders are swept for names held twice (Drive lets a folder
  hold a title twice; `Store.sweep_duplicates` heals them) and the report
  says what was found and healed; a content-addressed name held with
  different bytes is a reason to FAIL.
- The checkpoint is pushed (the pages that changed, c39), status.json is
  written with the verdict, and a resume point naming that state is written
  and uploaded (the retention then removes the points it does not keep).
- PASS requires a sound database, consistent rows, every referenced store
  name present and sound (or healed) and no store lag. It does not require
  `done`: a budgeted run that stops mid-way is still a consistent archive.
  Over an archive holding no document there is no verdict to give: the
  report says so in words and status.json's `verify` is null with a
  `verify_note`. A database that fails integrity_check is neither
  checkpointed nor archived, so the store keeps its last good snapshot.
- Nothing is printed: `format_verify_report()` renders the result for the CLI.

Knobs read: VERIFY_HASHES, AUDIT, MAX_ATTEMPTS, MAX_EXTRACT_ATTEMPTS (queues and
failure reasons), PHASES (the index check), DRY_RUN (verify runs anyway: it is local and store only).
"""
from __future__ import annotations

import csv
import io
import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from .c00_config import Config, PipelineError, StoreError, count_noun
from .c05_durable import durable_write
from .c06_layout import (CONTENT_ADDRESSED_PREFIXES, DOCUMENT_INVENTORY, FAILED_INVENTORY, JOURNAL_PREFIX, ocr_text_store_name,
                         pdf_store_name, text_store_name)
from .c10_database import KV_DOWNLOAD_PATH, PERMANENT_HTTP_STATUSES, Database
from .c12_queues import WorkQueues
from .c13_records import DownloadRecords, TextRecords
from .c15_discovery_state import DiscoveryState, coverage_gaps
from .c17_snapshots import StoreState
from .c18_search_index import index_coverage
from .c21_fixity import FixityRecords, FixityResult, audit_fixity, fixity_cycle
from .c35_context import Context, final_states_line, write_status
from .c39_checkpoint import push_checkpoint, snapshot_lock, write_resume_archive

log_verify = logging.getLogger("kycourt.verify")

_VERIFY_SHOWN = 3   # example names in one reason line
# A store temp file this old belongs to no write in progress (a write takes seconds at most).
_VERIFY_STALE_TEMP_SECONDS = 3600.0


@dataclass
class VerifyResult:
    passed: bool = False
    reasons: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)       # integrity_check problems
    counts: dict[str, int] = field(default_factory=dict)
    queues: dict[str, int] = field(default_factory=dict)
    done: bool = False
    remaining: str | None = None      # status.json's "remaining": what is left when not done
    final_states: dict[str, Any] | None = None   # status.json's "final_states"
    referenced: int = 0                                       # store names the database refers to
    missing_in_store: list[str] = field(default_factory=list)   # still missing after healing (backlog included)
    fixity: FixityResult | None = None                        # the audit run (c21_fixity)
    row_problems: list[str] = field(default_factory=list)
    without_figures: list[str] = field(default_factory=list)  # extracted documents lacking chars or pages
    empty: bool = False               # the archive holds no document: nothing to verify
    exported: list[str] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None
    archive: str | None = None
    store_pending: int = 0
    backlog_uploaded: int = 0
    stale_temps_removed: int = 0      # temp files of killed writes removed from the store
    coverage_gaps: list[dict] = field(default_factory=list)   # shards holding fewer than announced (a warning)
    index: Any = None                 # IndexCoverage of the search index (ky_search.sqlite)
    duplicates: dict | None = None    # Store.sweep_duplicates: names held twice, found and healed


# ------------------------------------------------------------- decisions


def failure_reason(row: Any, cfg: Config) -> str:
    """Why a document is in failed_inventory.csv."""
    if row["status"] == "downloaded":
        return "extraction failed"
    if row["http_status"] in PERMANENT_HTTP_STATUSES:
        return "permanent http"
    if row["attempts"] >= cfg.MAX_ATTEMPTS:
        return "exhausted attempts"
    return "retrying"   # a transient failure still in the download queue


def referenced_store_names(rows: Any) -> tuple[set[str], list[str]]:
    """Store names that rows claiming files refer to, and the rows that claim inconsistently."""
    names: set[str] = set()
    problems: list[str] = []
    for row in rows:
        sha = row["sha256"]
        if not sha:
            problems.append(f"{row['document_id']}: {row['status']} without sha256")
            continue
        expected = pdf_store_name(sha)
        if row["local_pdf"] != expected:
            problems.append(f"{row['document_id']}: local_pdf {row['local_pdf']!r} is not {expected}")
        names.add(expected)
        if row["status"] == "extracted":
            names.add(text_store_name(sha))
            if row["extracted_by_ocr"]:
                names.add(ocr_text_store_name(sha))
    return names, problems


EMPTY_ARCHIVE = "nothing to verify: the archive holds no document yet"


def verdict_words(result: VerifyResult) -> str:
    """The verdict as the summary says it: PASS, FAIL, or, over an archive of nothing, no verdict."""
    if result.passed and result.empty:
        return EMPTY_ARCHIVE
    return "PASS" if result.passed else "FAIL"


def format_verify_report(result: VerifyResult) -> str:
    counts = ", ".join(f"{status} {count}" for status, count in result.counts.items())
    queues = ", ".join(f"{queue} {size}" for queue, size in result.queues.items())
    remaining = result.remaining if not result.done else None
    # PASS is the archive's integrity; it must never read as "done" while work remains.
    verdict = f"verify: {EMPTY_ARCHIVE}" if result.passed and result.empty else f"verify {verdict_words(result)}"
    lines = [verdict + (f" (not done: {remaining})" if remaining else "")]
    lines += [f"  - {reason}" for reason in result.reasons]
    lines.append(f"  documents: {sum(result.counts.values())} ({counts or 'none'})")
    if result.final_states:
        lines.append(f"  for good: {final_states_line(result.final_states)}")
    lines.append(f"  queues: {queues or 'unknown'}; done: {'yes' if result.done else 'no'}")
    lines.append(f"  store: {result.referenced} referenced names, {len(result.missing_in_store)} missing, "
                 f"{result.store_pending} pending")
    if result.fixity is not None:
        lines.append(f"  fixity: {result.fixity.describe()}")
    if result.duplicates and (result.duplicates["found"] or result.duplicates["notes"]):
        found = result.duplicates
        lines.append(f"  store duplicates: {len(found['found'])} names held twice; healed: {found['trashed']} "
                     f"identical copies moved to the trash, {len(found['renamed'])} differing copies renamed "
                     f"<name>.conflict-<id>, {found['merged']} folder copies merged; {len(found['conflicts'])} "
                     "content-addressed names with different bytes")
        lines += [f"  warning: {note}" for note in found["notes"]]
    if result.coverage_gaps:
        shown = ", ".join(f"{gap['shard']} {gap['held']}/{gap['announced']} {gap['unit']}"
                          for gap in result.coverage_gaps[:_VERIFY_SHOWN])
        lines.append(f"  warning: {len(result.coverage_gaps)} shards hold fewer than the court announced ({shown})")
    if result.index is not None:
        lines.append(f"  search index: {result.index.describe()}")
    if result.archive:
        lines.append(f"  resume archive: {result.archive}")
    return "\n".join(lines)


# ----------------------------------------------------------------- stage


def verify(ctx: Context, *, index_built: bool = False) -> VerifyResult:
    """Sync the store and check the archive; returns PASS/FAIL with one reason per problem.
    `index_built`: this session's index phase ran to its end (an index is then expected)."""
    ctx.phase = "verify"
    db = ctx.open_database()
    result = VerifyResult()
    result.backlog_uploaded = ctx.mirror.catch_up(ctx.workspace)["uploaded"]
    result.stale_temps_removed = _verify_remove_stale_temps(ctx)
    result.integrity = db.integrity_check()
    if result.integrity:
        result.reasons.append(f"database integrity_check failed: {'; '.join(result.integrity[:_VERIFY_SHOWN])} "
                              "(not checkpointed: the store keeps its last good snapshot)")
        _verify_write_status(ctx, result)
        return result
    result.without_figures = _verify_figures(ctx, db)
    if result.without_figures:
        shown = ", ".join(result.without_figures[:_VERIFY_SHOWN])
        result.reasons.append(f"{len(result.without_figures)} documents are extracted without their figures "
                              f"(extracted_chars or pages unknown: {shown}); they are back in the extract queue: "
                              "the next run measures them")
    result.counts = WorkQueues(db).status_counts()
    result.empty = sum(result.counts.values()) == 0
    result.queues = WorkQueues(db).queue_sizes(ctx.cfg)
    result.coverage_gaps = coverage_gaps(DiscoveryState(db).coverage_audit())
    for gap in result.coverage_gaps[:_VERIFY_SHOWN]:
        log_verify.warning("shard %s holds %d %s; the court announced %d", gap["shard"], gap["held"],
                           gap["unit"], gap["announced"])
    result.exported = _verify_export_inventories(ctx, db)

    names, result.row_problems = referenced_store_names(DownloadRecords(db).documents_claiming_files())
    result.referenced = len(names)
    if result.row_problems:
        result.reasons.append(f"{len(result.row_problems)} rows claim a PDF inconsistently "
                              f"({'; '.join(result.row_problems[:_VERIFY_SHOWN])})")
    try:
        result.fixity = audit_fixity(
            db, ctx.store, ctx.workspace, names, cycle=fixity_cycle(ctx.cfg.AUDIT),
            read_all=ctx.cfg.VERIFY_HASHES or ctx.cfg.AUDIT >= 1,
            pending={row["name"] for row in StoreState(db).store_pending()},
            fetch_from_court=_verify_court_copy(ctx), interrupted=lambda: ctx.clock.interrupted)
    except StoreError as exc:
        result.reasons.append(f"store cannot be listed: {exc}")
    else:
        result.missing_in_store = result.fixity.missing
        unhealed = result.fixity.unhealed
        if unhealed:
            result.reasons.append(f"{count_noun(len(unhealed), 'stored file is', 'stored files are')} damaged and no "
                                  f"good copy was found "
                                  f"({'; '.join(unhealed[:_VERIFY_SHOWN])}): see RUNBOOK, \"A stored file does "
                                  "not hash to its name\"")

    result.duplicates = _verify_duplicates(ctx, result)
    _verify_index(ctx, db, result, index_built)

    # From the push to the resume point's retention no other push (a run beside this verify) drops a
    # pack the point names.
    with snapshot_lock(ctx):
        result.checkpoint = push_checkpoint(ctx)
        ctx.refresh_quota()                       # the session's last word on the quota: asked now
        if not result.checkpoint["uploaded"]:
            why = result.checkpoint.get("stale") or ctx.mirror.lagging or "the store refused it"
            result.reasons.append(f"checkpoint not in the store ({why}): no resume point was written")
        _verify_note_lag(ctx, result)
        status = _verify_write_status(ctx, result)
        result.done = bool(status.get("done"))
        result.final_states = status.get("final_states")
        result.remaining = status.get("remaining")

        if result.checkpoint["uploaded"]:
            result.archive = write_resume_archive(ctx, result.checkpoint)
            if not ctx.mirror.has(result.archive):
                result.reasons.append(f"resume archive {result.archive} not in the store")
    _verify_note_lag(ctx, result)
    if result.passed and result.reasons:
        _verify_write_status(ctx, result)   # the archive upload itself lagged: status says FAIL
    return result


def _verify_index(ctx: Context, db: Database, result: VerifyResult, index_built: bool) -> None:
    """The search index must cover every extracted document once a session built it (the index
    phase ran, or an index exists and PHASES has index), unless the run stopped early."""
    result.index = coverage = index_coverage(ctx.workspace, db.conn)
    expected = "index" in ctx.cfg.PHASES and (coverage.exists or index_built)
    if not expected or ctx.clock.stop_reason:
        return
    if not coverage.exists:
        result.reasons.append(f"search index missing: {coverage.problem}")
    elif coverage.behind:
        result.reasons.append(f"search index does not cover the archive: {coverage.describe()} "
                              "(kycourt-pipeline index brings it up to date)")


def _verify_remove_stale_temps(ctx: Context) -> int:
    try:
        removed = ctx.store.remove_stale_temps(_VERIFY_STALE_TEMP_SECONDS)
    except OSError as exc:
        log_verify.warning("cannot sweep the store's stale temp files: %s", exc)
        return 0
    if removed:
        log_verify.info("removed %d temp files that killed writes left in the store", removed)
    return removed


def _verify_note_lag(ctx: Context, result: VerifyResult) -> None:
    result.store_pending = StoreState(ctx.db).store_pending_count()
    if result.store_pending == 0 and not ctx.mirror.lagging:
        return
    lag = f"store lags: {result.store_pending} names pending ({ctx.mirror.lagging or 'not uploaded yet'})"
    result.reasons[:] = [reason for reason in result.reasons if not reason.startswith("store lags:")]
    result.reasons.append(lag + "; nothing is lost, a later run catches up")


def _verify_write_status(ctx: Context, result: VerifyResult) -> dict[str, Any]:
    result.passed = not result.reasons
    extra: dict[str, Any] = {"verify_reasons": result.reasons}
    if result.passed and result.empty:
        extra["verify_note"] = EMPTY_ARCHIVE      # no verdict over an archive of nothing
    try:
        return write_status(ctx, verify=None if "verify_note" in extra else "PASS" if result.passed else "FAIL",
                            mirror_now=True, **extra)
    except sqlite3.DatabaseError as exc:   # a damaged database cannot be counted
        log_verify.warning("status.json not rewritten: %s", exc)
        return {}


def _verify_export_inventories(ctx: Context, db: Database) -> list[str]:
    columns = db.document_columns()
    documents = _verify_csv(columns, (tuple(row) for row in db.iter_documents()))
    failed_rows = sorted(list(WorkQueues(db).failed_documents()) + list(WorkQueues(db).extraction_failures(ctx.cfg)),
                         key=lambda row: row["document_id"])
    failed = _verify_csv(["reason"] + columns,
                         ((failure_reason(row, ctx.cfg),) + tuple(row) for row in failed_rows))
    exported = []
    for name, text in ((DOCUMENT_INVENTORY, documents), (FAILED_INVENTORY, failed)):
        path, data = ctx.path(name), text.encode("utf-8")
        # The workspace's copy is the one the store holds (removed when its upload failed): the same
        # bytes again are not sent again.
        if path.is_file() and path.read_bytes() == data and ctx.mirror.has(name):
            continue
        durable_write(path, data)
        if ctx.mirror.put(name, path, mutable=True):
            exported.append(name)
        else:
            path.unlink(missing_ok=True)
    return exported


def _verify_csv(header: list[str], rows: Any) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _verify_duplicates(ctx: Context, result: VerifyResult) -> dict | None:
    folders = [""] + [prefix.rstrip("/") for prefix in CONTENT_ADDRESSED_PREFIXES] + [JOURNAL_PREFIX.split("/")[0]]
    try:
        report = ctx.store.sweep_duplicates(folders)
    except StoreError as exc:
        result.reasons.append(f"store cannot be swept for names held twice: {exc}")
        return None
    # A copy fixity put the right bytes back into holds what the other holds now: no conflict left.
    conflicts = [name for name in (report or {}).get("conflicts", [])
                 if result.fixity is None or name not in result.fixity.healed_names]
    if conflicts:
        result.reasons.append(f"{len(conflicts)} content-addressed names are held twice with different "
                              f"bytes ({', '.join(conflicts[:_VERIFY_SHOWN])}); none was changed: keep "
                              "the copy whose bytes the name describes and move the other out of the store")
    return report


def _verify_figures(ctx: Context, db: Database) -> list[str]:
    """Extracted documents lacking extracted_chars or pages go back to the extract queue, with the
    character count of the text the archive holds (extraction then keeps that text); their ids."""
    lacking = FixityRecords(db).extracted_without_figures()
    figures = []
    for row in lacking:
        chars = row["extracted_chars"]
        if chars is None and row["sha256"]:
            chars = ctx.held_characters(text_store_name(row["sha256"]))
        figures.append((row["document_id"], chars))
    if figures:
        TextRecords(db).back_to_extract(figures, "extracted without its figures (characters, pages): "
                                               "back in the extract queue to be measured")
        log_verify.warning("%d documents were extracted without their figures: back in the extract queue (%s)",
                           len(figures), ", ".join(document_id for document_id, _ in figures[:_VERIFY_SHOWN]))
    return [document_id for document_id, _ in figures]


def _verify_court_copy(ctx: Context):
    """`fetch_from_court(sha256, path)` for healing a PDF from the court, or None when this run has no
    court to ask (a dry run, `verify` alone, the court unreachable)."""
    client = ctx.client
    if client is None or ctx.court_unreachable or not hasattr(client, "download_response"):
        return None
    path = ctx.db.kv_get(KV_DOWNLOAD_PATH) or "api"

    def fetch(sha256: str, target: Path) -> bool:
        for document_id in FixityRecords(ctx.db).documents_holding(sha256)[:_VERIFY_SHOWN]:
            try:
                response = client.download_response(document_id, path=path)
                try:
                    if response.status_code != 200:
                        continue
                    with open(target, "wb") as handle:
                        for chunk in response.iter_content(1024 * 1024):
                            handle.write(chunk)
                finally:
                    response.close()
            except (PipelineError, requests.RequestException, OSError) as exc:
                log_verify.warning("the court could not give %s to heal its PDF: %s", document_id, exc)
                return False
            return True
        return False
    return fetch
