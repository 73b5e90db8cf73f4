"""Verify a copy: what verify checks of a workspace this process cannot write, writing nothing.

Guarantees:
- `verify_copy(cfg)` (`kycourt-pipeline verify` on read-only media or a copy without write
  permission) reads the workspace's database through c10 open_reader and the store without
  making it, and checks what verify (c90) checks that needs no write: `PRAGMA integrity_check`,
  the counts and queues, the rows that claim a PDF, every name they refer to present in the store
  (one listing per folder), and the search index against the extracted documents.
- It writes nothing anywhere: no inventories, status.json, checkpoint, resume archive or store
  backlog, nothing healed; its report says so in its last line. PASS and FAIL mean what they mean
  for verify, over what it checked.
- A store that is not there is StoreMissing (the command refuses, exit 2); Google Drive outside
  Colab (no DRIVE_API) cannot be listed: the report says the store was not checked.

Knobs read: WORKSPACE, STORE, DRIVE_FOLDER, DRIVE_API, MAX_ATTEMPTS and MAX_EXTRACT_ATTEMPTS
(through the queues), PHASES (the index check).
"""
from __future__ import annotations

from pathlib import Path

from .c00_config import Config, StoreError, count_noun, in_colab
from .c06_layout import DB_FILENAME
from .c10_database import Database
from .c13_records import DownloadRecords
from .c17_snapshots import StoreState
from .c18_search_index import index_coverage
from .c35_context import missing_store_message, open_store, status_document
from .c90_verify import VerifyResult, format_verify_report, referenced_store_names

_VERIFY_COPY_SHOWN = 3


def verify_copy(cfg: Config) -> tuple[str, bool]:
    """(the report, passed) of the workspace in `cfg`, read as it is."""
    store, store_note = _verify_copy_store(cfg)
    db = Database.open_readonly(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        result = _verify_copy_checks(cfg, db, store, store_note)
    finally:
        db.close()
    result.passed = not result.reasons
    lines = [format_verify_report(result)]
    if store_note:
        lines.append(f"  store not checked: {store_note}")
    lines.append("  read-only copy: nothing written (no inventories, status.json, checkpoint or resume "
                 "archive; the store was only listed)")
    return "\n".join(lines), result.passed


def _verify_copy_store(cfg: Config):
    """(store, None), or (None, why it is not checked); StoreMissing for a directory not there."""
    if cfg.store_is_drive and not (in_colab() or cfg.DRIVE_API):
        return None, f"Google Drive folder {cfg.DRIVE_FOLDER} is reachable from Colab only"
    try:
        return open_store(cfg), None
    except StoreError as exc:
        if not cfg.store_is_drive:
            raise StoreError(missing_store_message(cfg)) from None
        return None, str(exc)


def _verify_copy_checks(cfg: Config, db: Database, store, store_note: str | None) -> VerifyResult:
    result = VerifyResult()
    result.integrity = db.integrity_check()
    if result.integrity:
        result.reasons.append(f"database integrity_check failed: "
                              f"{'; '.join(result.integrity[:_VERIFY_COPY_SHOWN])}")
        return result
    status = status_document(db, cfg, phase="verify")
    result.counts, result.queues = status["counts"], status["queues"]
    result.done, result.remaining = status["done"], status["remaining"]
    result.final_states = status.get("final_states")
    result.store_pending = StoreState(db).store_pending_count()
    names, result.row_problems = referenced_store_names(DownloadRecords(db).documents_claiming_files())
    result.referenced = len(names)
    if result.row_problems:
        result.reasons.append(f"{count_noun(len(result.row_problems), 'row claims', 'rows claim')} a PDF "
                              f"inconsistently ({'; '.join(result.row_problems[:_VERIFY_COPY_SHOWN])})")
    if store is not None:
        try:
            result.missing_in_store = _verify_copy_missing(store, names)
        except StoreError as exc:
            result.reasons.append(f"store cannot be listed: {exc}")
        if result.missing_in_store:
            result.reasons.append(f"{count_noun(len(result.missing_in_store), 'referenced name')} missing from "
                                  f"the store ({', '.join(result.missing_in_store[:_VERIFY_COPY_SHOWN])})")
    result.index = coverage = index_coverage(cfg.WORKSPACE, db.conn)
    if "index" in cfg.PHASES and coverage.exists and coverage.behind:
        result.reasons.append(f"search index does not cover the archive: {coverage.describe()}")
    return result


def _verify_copy_missing(store, names: set[str]) -> list[str]:
    present: set[str] = set()
    for folder in sorted({name.split("/", 1)[0] for name in names}):
        present.update(store.list_dir(folder))
    return sorted(names - present)
