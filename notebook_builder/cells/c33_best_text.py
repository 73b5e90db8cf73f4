"""Best text: which of a document's texts its readers use, decided in one place, and reading it.

Guarantees:
- A document has up to three texts: its PDF's text layer (`text/<sha256>.txt`,
  extract), the text layer with the scanned pages' OCR merged in
  (`text/<sha256>.ocr.txt`, the ocr stage) and the court's own documentText
  (`court_text/<sha256 of that text>.txt`, kept by discovery).
  `choose_text_source()` (pure) picks one: the OCR merge where OCR gave one
  (it holds every page of the text layer too), else the text layer; and, where
  that is empty or very poor (quality under MIN_TEXT_QUALITY), the court's
  text when discovery kept a non-empty one. Only an extracted document has a
  best text (None otherwise).
- Search (c87), derive (c86), `show` and `export` (query.py), the notebook's
  search cell and the court-text agreement (c80, which leaves the court's own
  text out of the choice: it is what ours is compared with) all read the text
  this module names, nothing else.
- `record_text_sources()` writes the choice to `documents.text_source`
  (`text_layer`, `ocr`, `court_text`; NULL when not extracted) wherever it
  changed, bumping the row's `updated_at` (so the index sees it); the ocr,
  derive and index stages call it before they read, so after a run the column
  says what every reader read.
- `read_text()` gives a text's bytes from the workspace, else from a fetch
  function (the store: `fetch_into_workspace` for a stage, through its
  mirror; `fetch_from_store` for the query layer), else None; never an
  exception for a missing text. A fetched text is kept in the workspace.

Knobs read: MIN_TEXT_QUALITY (passed in by the callers).
"""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any, Callable, Mapping

from .c00_config import StoreError, count_noun
from .c05_durable import atomic_write
from .c06_layout import COURT_TEXT, OCR_MERGE, TEXT_LAYER, text_name
from .c10_database import Database
from .c11_reads import text_source_inputs
from .c13_records import TextRecords

log_best_text = logging.getLogger("kycourt.best_text")


def choose_text_source(*, extracted: bool, layer_chars: int | None, layer_quality: float | None,
                       ocr_merged: bool, ocr_chars: int | None, ocr_quality: float | None,
                       court_chars: int | None, min_quality: float) -> str | None:
    """The source of a document's best text (see the module docstring). Quality None is a text
    too short to judge, not a poor one."""
    if not extracted:
        return None
    if ocr_merged:
        source, empty, quality = OCR_MERGE, not (layer_chars or ocr_chars), ocr_quality
    else:
        source, empty, quality = TEXT_LAYER, not layer_chars, layer_quality
    poor = empty or (quality is not None and quality < min_quality)
    if poor and court_chars:
        return COURT_TEXT
    return source


def text_source_of(row: Mapping[str, Any], min_quality: float, *, with_court_text: bool = True) -> str | None:
    """`choose_text_source` of one row of `text_source_inputs` (the court's text left out when
    `with_court_text` is False)."""
    return choose_text_source(
        extracted=row["status"] == "extracted" and bool(row["sha256"]),
        layer_chars=row["extracted_chars"], layer_quality=row["text_quality"],
        ocr_merged=row["extracted_by_ocr"] == 1, ocr_chars=row["ocr_chars"], ocr_quality=row["ocr_quality"],
        court_chars=row["court_chars"] if with_court_text else None, min_quality=min_quality)


def best_text_name(row: Mapping[str, Any], min_quality: float, *, with_court_text: bool = True) -> str | None:
    """The name of the best text of one row of `text_source_inputs`."""
    source = text_source_of(row, min_quality, with_court_text=with_court_text)
    return text_name(source, row["sha256"], row["court_sha256"])


def empty_text_reason(row: Mapping[str, Any], text: str | None) -> str | None:
    """Why an extracted document's best text (`text`: None when its file is nowhere) says nothing,
    in words a reader of an export understands; None when it has text or is not extracted."""
    if row["status"] != "extracted" or (text is not None and text.strip()):
        return None
    if text is None:
        return "its text file is in neither the workspace nor the store"
    pages = row["pages"] or 0
    scanned = row["pages_needing_ocr"] or 0
    if scanned and row["extracted_by_ocr"] == 1:
        return f"blank scan: OCR found no text on its {count_noun(row['ocr_pages'] or scanned, 'scanned page')}"
    if scanned and row["extracted_by_ocr"] == 0:
        return f"scanned, and OCR could read none of its {count_noun(scanned, 'scanned page')}"
    if scanned:
        return f"{count_noun(scanned, 'scanned page')} not recognised yet (the ocr phase reads them)"
    return f"no text layer on its {count_noun(pages, 'page')}, and no page is a scan"


def record_text_sources(db: Database, min_quality: float, *, sha256: str | None = None) -> int:
    """Brings `documents.text_source` level with the choice, for every document (or those holding
    `sha256`); returns how many changed."""
    where, params = ("d.sha256 = ?", (sha256,)) if sha256 else ("1", ())
    changes = [(source, row["document_id"]) for row in text_source_inputs(db.conn, where, params)
               if (source := text_source_of(row, min_quality)) != row["text_source"]]
    TextRecords(db).set_text_sources(changes)
    return len(changes)


def best_text_sources(conn: sqlite3.Connection, min_quality: float, where: str = "1",
                      params: tuple = ()) -> dict[str, tuple[str | None, str | None]]:
    """document_id -> (source, name) of the best text of each document `where` selects, decided
    now (read-only: the query layer's view of an archive whose column may lag)."""
    chosen = {}
    for row in text_source_inputs(conn, where, params):
        source = text_source_of(row, min_quality)
        chosen[row["document_id"]] = (source, text_name(source, row["sha256"], row["court_sha256"]))
    return chosen


def read_text(workspace: str | Path, name: str | None,
              fetch: Callable[[str], bytes | None] | None = None) -> bytes | None:
    """The bytes of text `name`: the workspace's copy, else `fetch(name)` (the store), else None."""
    if not name:
        return None
    try:
        return (Path(workspace) / name).read_bytes()
    except FileNotFoundError:
        pass
    return fetch(name) if fetch is not None else None


def fetch_into_workspace(ctx) -> Callable[[str], bytes | None]:
    """A `read_text` fetch for a stage: the store's copy, kept in the workspace for the next read."""
    def fetch(name: str) -> bytes | None:
        path = ctx.path(name)
        if not ctx.mirror.fetch(name, path):
            return None
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
    return fetch


def fetch_from_store(workspace: str | Path, store: Any) -> Callable[[str], bytes | None] | None:
    """A `read_text` fetch for the query layer (show, export, search): the store's copy, kept in
    the workspace for the next read; None without a store. A text the store cannot give is None."""
    if store is None:
        return None

    def fetch(name: str) -> bytes | None:
        try:
            data = store.read_file(name)
        except (StoreError, OSError) as exc:
            log_best_text.warning("%s cannot be read from the store: %s", name, exc)
            return None
        target = Path(workspace) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
        return data
    return fetch


def decode_text(data: bytes) -> tuple[str, str | None]:
    """(the text, a warning when its bytes are not UTF-8: the undecodable ones are replaced)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", "replace"), f"undecodable text: {exc.reason} at byte {exc.start}"
