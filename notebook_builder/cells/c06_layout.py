"""The archive's layout: the name of every file of the workspace and the store (CONTRACT.md).

Guarantees:
- One spelling of each name. A PDF is `pdf_by_hash/<sha256>.pdf` and its texts
  `text/<sha256>.txt` (its text layer) and `text/<sha256>.ocr.txt` (with the OCR'd pages merged
  in), the court's own text `court_text/<sha256 of that text>.txt`: content-addressed names that
  can never hold other bytes.
- `text_name(source, sha256, court_sha256)` is the name of a document's text from each source
  (TEXT_LAYER, OCR_MERGE, COURT_TEXT); None when that source has no text.
- `check_store_name` refuses a name that is not relative and normalized inside the store.
- The change log's names: `changes/<run>.jsonl` (`changes_store_name`), `feed.atom`.
- The state the pipeline replaces as it goes (`is_replaceable_state`): the database's page packs
  (`db/`), the search index's files (`ky_search/`), the download journals, the resume archives, and
  the whole-file copies earlier versions kept (`ky_court.sqlite`, `ky_search.tar`,
  `ky_search.sqlite`). Only these may ever be removed from the store; files of record
  (`pdf_by_hash/`, `text/`, `court_text/`, `changes/`, `legacy/`, the feed, the inventories) never are.

Knobs read: none.
"""
from __future__ import annotations

import re

from .c00_config import StoreError

DB_FILENAME = "ky_court.sqlite"           # the state database (workspace; its snapshot in the store)
SEARCH_DB_FILENAME = "ky_search.sqlite"   # the search index's catalog (workspace; page packs in the store)
SEARCH_INDEX_DIRNAME = "ky_search"       # the search index's tantivy files (workspace and store)
SEARCH_PACK_FILENAME = "ky_search.tar"   # the search index and its catalog in one file (earlier versions' store)
STATUS_FILENAME = "status.json"
DOCUMENT_INVENTORY = "document_inventory.csv"
FAILED_INVENTORY = "failed_inventory.csv"
REPORT_PNG_NAME = "status.png"
FEED_FILENAME = "feed.atom"               # the Atom feed of the newest changes (c89)
CHANGES_FOLDER = "changes"                # changes/<run>.jsonl: what each run found (c48)
WORKSPACE_FOLDERS = ("tmp", "pdf_backup", "pdf_by_hash", "text", "checkpoint")
CONTENT_ADDRESSED_PREFIXES = ("pdf_by_hash/", "text/")
JOURNAL_PREFIX = "journal/downloads-after-"
JOURNAL_SUFFIX = ".jsonl"
RESUME_ARCHIVE_PREFIX = "ky_court-WIP-resume-"
RESUME_ARCHIVE_SUFFIX = ".tar.gz"
# Folders of state the pipeline replaces: the database's page packs and the search index's files.
STATE_FOLDERS = ("db/", f"{SEARCH_INDEX_DIRNAME}/", "journal/")
# Whole-file copies of state that earlier versions kept in the store (replaced by db/ and ky_search/).
SUPERSEDED_STATE_FILES = (DB_FILENAME, SEARCH_PACK_FILENAME, SEARCH_DB_FILENAME)

# The sources of a document's text (documents.text_source).
TEXT_LAYER = "text_layer"
OCR_MERGE = "ocr"
COURT_TEXT = "court_text"

_STORE_NAME = re.compile(r"[^/\\]+(?:/[^/\\]+)*")   # relative, no empty part, no backslash


def check_store_name(name: str) -> str:
    """A store name must be relative, normalized and stay inside the store."""
    if not _STORE_NAME.fullmatch(name) or any(part in (".", "..") for part in name.split("/")):
        raise StoreError(f"invalid store name {name!r}: expected a relative path like pdf_by_hash/<sha>.pdf")
    return name


def changes_store_name(run: str) -> str:
    """What run `run` found after the first complete crawl, one JSON record a line (c48)."""
    return f"{CHANGES_FOLDER}/{run}.jsonl"


def pdf_store_name(sha256: str) -> str:
    """The one spelling of a PDF's content-addressed name (store and workspace alike)."""
    return f"pdf_by_hash/{sha256}.pdf"


def text_store_name(sha256: str) -> str:
    """The text extracted from the PDF whose hash is `sha256`."""
    return f"text/{sha256}.txt"


def ocr_text_store_name(sha256: str) -> str:
    """The text of the PDF whose hash is `sha256` with the pages OCR recognised merged in."""
    return f"text/{sha256}.ocr.txt"


def court_text_store_name(sha256: str) -> str:
    """The court's own text of a document (its documentText), named by the hash of that text."""
    return f"court_text/{sha256}.txt"


def journal_store_name(checkpoint_seq: int) -> str:
    """The download journal that follows snapshot `checkpoint_seq`."""
    return f"{JOURNAL_PREFIX}{checkpoint_seq}{JOURNAL_SUFFIX}"


def journal_sequence(name: str) -> int | None:
    """The checkpoint a journal's store name follows, or None if it names no journal."""
    if not (name.startswith(JOURNAL_PREFIX) and name.endswith(JOURNAL_SUFFIX)):
        return None
    number = name[len(JOURNAL_PREFIX):-len(JOURNAL_SUFFIX)]
    return int(number) if number.isdigit() else None


def is_resume_archive_name(name: str) -> bool:
    return (name.startswith(RESUME_ARCHIVE_PREFIX) and name.endswith(RESUME_ARCHIVE_SUFFIX)
            and "/" not in name)


def is_replaceable_state(name: str) -> bool:
    """Whether `name` is state the pipeline replaces (see the module docstring): the only names it
    may remove from the store."""
    return (name in SUPERSEDED_STATE_FILES or is_resume_archive_name(name)
            or (name.startswith(STATE_FOLDERS) and not is_content_addressed(name)))


def is_content_addressed(name: str) -> bool:
    return name.startswith(CONTENT_ADDRESSED_PREFIXES)


def text_name(source: str | None, sha256: str | None, court_sha256: str | None = None) -> str | None:
    """The workspace and store name of a document's text from `source`; None for no text."""
    if source == TEXT_LAYER and sha256:
        return text_store_name(sha256)
    if source == OCR_MERGE and sha256:
        return ocr_text_store_name(sha256)
    if source == COURT_TEXT and court_sha256:
        return court_text_store_name(court_sha256)
    return None
