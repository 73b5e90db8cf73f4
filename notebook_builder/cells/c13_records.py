"""What the stages record of a document: its download (`DownloadRecords`) and its text (`TextRecords`).

Guarantees:
- A status only moves forward: `discovered`/`failed` -> `downloaded` -> `extracted`; a download
  attempt is counted before its request is sent, so a kill cannot hide one.
- A row downloaded after checkpoint N carries N or more in `download_checkpoint` (read in the
  write's own transaction, clock-free): the download journal replays what a snapshot lacks.
- Backfill credits a verified backup PDF without overriding a download of other bytes.
- `record_extracted` writes the log rows, the pages' facts and the documents in one transaction;
  a document reusing an extracted twin's text (same sha256) takes its figures from it.
- OCR's outcome is recorded for every document holding the PDF.
- A download the court answered with its wall (`mark_not_public`) is no failure: the document
  keeps its status, is not public (its access state, document_available 0) and leaves the queue.
"""
from __future__ import annotations

import sqlite3
from typing import Iterable, Iterator, Mapping, Sequence

from .c00_config import utc_now
from .c10_database import KV_CHECKPOINT_SEQ, Tables, rows_in

# The response headers that identify a download's bytes (download_events), in its column order.
IDENTIFYING_HEADERS = ("Content-Length", "ETag", "Last-Modified", "Content-Type")

# The database's checkpoint_seq at a write, read in the write's own transaction: a row committed
# after checkpoint N was taken carries N or more, one committed before it less (the bump and the
# row's commit are serialized by SQLite's write lock). Clock-free.
_CURRENT_CHECKPOINT_SQL = f"COALESCE((SELECT CAST(value AS INTEGER) FROM kv WHERE key = '{KV_CHECKPOINT_SEQ}'), 0)"
_DOWNLOAD_CHECKPOINT_SET = f"download_checkpoint = {_CURRENT_CHECKPOINT_SQL}"


class DownloadRecords(Tables):
    """What the download and backfill stages record of a document."""

    def record_download_attempt(self, document_id: str) -> int:
        """Counts an attempt before the request is sent, so a kill cannot hide one."""
        with self.transaction():
            self.conn.execute("UPDATE documents SET attempts = attempts + 1, updated_at = ? "
                              "WHERE document_id = ?", (utc_now(), document_id))
        return self.conn.execute("SELECT attempts FROM documents WHERE document_id = ?",
                                 (document_id,)).fetchone()[0]

    def mark_downloaded(self, document_id: str, *, sha256: str, size_bytes: int, local_pdf: str,
                        http_status: int | None = 200) -> bool:
        """A `discovered`/`failed` row becomes `downloaded`; True if it did."""
        now = utc_now()
        with self.transaction():
            return self.conn.execute(
                "UPDATE documents SET status = 'downloaded', sha256 = ?, size_bytes = ?, local_pdf = ?, "
                f"http_status = ?, last_error = NULL, updated_at = ?, downloaded_at = ?, {_DOWNLOAD_CHECKPOINT_SET} "
                "WHERE document_id = ? AND status IN ('discovered', 'failed')",
                (sha256, size_bytes, local_pdf, http_status, now, now, document_id)).rowcount > 0

    def refund_download_attempts(self, attempts: Mapping[str, int], note: str) -> int:
        """Gives back download attempts that an outage of the court spent (document id -> attempts),
        so documents it exhausted are queued again; returns the attempts given back."""
        given = 0
        with self.transaction() as conn:
            for document_id, count in attempts.items():
                row = conn.execute("SELECT attempts FROM documents WHERE document_id = ? AND status = 'failed'",
                                   (document_id,)).fetchone()
                if row is None:
                    continue
                back = min(count, row["attempts"] or 0)
                conn.execute("UPDATE documents SET attempts = attempts - ?, last_error = ?, updated_at = ? "
                             "WHERE document_id = ?", (back, note[:500], utc_now(), document_id))
                given += back
        return given

    def mark_download_failed(self, document_id: str, *, http_status: int | None, error: str) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET status = 'failed', http_status = ?, last_error = ?, updated_at = ? "
                "WHERE document_id = ? AND status IN ('discovered', 'failed')",
                (http_status, error[:500], utc_now(), document_id))

    def mark_not_public(self, document_id: str, *, state: str, http_status: int, error: str) -> None:
        """The court answered the document's download with its wall: not public (see the docstring)."""
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET access_state = ?, document_available = 0, http_status = ?, last_error = ?, "
                "updated_at = ? WHERE document_id = ?", (state, http_status, error, utc_now(), document_id))

    def documents_claiming_files(self) -> Iterator[sqlite3.Row]:
        """Rows whose status says a PDF is on disk (for recover() and verify)."""
        yield from self.conn.execute(
            "SELECT document_id, status, sha256, local_pdf, size_bytes, extracted_by_ocr FROM documents "
            "WHERE status IN ('downloaded', 'extracted')")

    def revert_to_discovered(self, document_ids: Sequence[str], reason: str) -> int:
        with self.transaction():
            cursor = self.conn.executemany(
                "UPDATE documents SET status = 'discovered', sha256 = NULL, size_bytes = NULL, "
                "local_pdf = NULL, pages = NULL, extracted_chars = NULL, likely_scanned = NULL, "
                "pages_needing_ocr = NULL, text_quality = NULL, extract_failure = NULL, extracted_by_ocr = NULL, "
                "ocr_pages = NULL, "
                "attempts = 0, extract_attempts = 0, http_status = NULL, downloaded_at = NULL, "
                "download_checkpoint = NULL, "
                "last_error = ?, updated_at = ? WHERE document_id = ?",
                ((reason, utc_now(), doc_id) for doc_id in document_ids))
            return cursor.rowcount

    def documents_with_local_pdf(self) -> list[sqlite3.Row]:
        """Rows whose local_pdf names a file (backfill matches legacy paths against pdf_backup/)."""
        return self.conn.execute(
            "SELECT document_id, status, sha256, local_pdf FROM documents "
            "WHERE local_pdf IS NOT NULL AND local_pdf != ''").fetchall()

    def existing_document_ids(self, candidates: Iterable[str]) -> list[str]:
        """Which of these strings are document ids of the table (one query per 500)."""
        return [row[0] for row in rows_in(
            self.conn, "SELECT document_id FROM documents WHERE document_id IN ({ids})", candidates)]

    def document_ids_with_sha256(self, sha256s: Iterable[str]) -> list[tuple[str, str]]:
        """(document_id, sha256) of the rows recording one of these hashes (one query per 500)."""
        return [(row[0], row[1]) for row in rows_in(
            self.conn, "SELECT document_id, sha256 FROM documents WHERE sha256 IN ({ids})", sha256s)]

    def credit_backup(self, document_id: str, *, sha256: str, size_bytes: int, local_pdf: str) -> bool:
        """Backfill: a verified backup PDF is this document's. Returns True if the row changed.

        `discovered`/`failed` rows become `downloaded`; a `downloaded`/`extracted` row keeps
        its status and only takes the hash, size and normalized path when it has no hash
        or the same one (a different hash is left alone: the download is authoritative).
        """
        with self.transaction():
            cursor = self.conn.execute(
                "UPDATE documents SET "
                "downloaded_at = CASE WHEN status IN ('discovered', 'failed') THEN :now ELSE downloaded_at END, "
                "download_checkpoint = CASE WHEN status IN ('discovered', 'failed') "
                f"THEN {_CURRENT_CHECKPOINT_SQL} ELSE download_checkpoint END, "
                "status = CASE WHEN status IN ('discovered', 'failed') THEN 'downloaded' ELSE status END, "
                "http_status = CASE WHEN status IN ('discovered', 'failed') THEN NULL ELSE http_status END, "
                "last_error = CASE WHEN status IN ('discovered', 'failed') THEN NULL ELSE last_error END, "
                "sha256 = :sha, size_bytes = :size, local_pdf = :local, updated_at = :now "
                "WHERE document_id = :id "
                "AND (status IN ('discovered', 'failed') OR sha256 IS NULL OR sha256 = :sha) "
                "AND NOT (status IN ('downloaded', 'extracted') AND sha256 IS :sha "
                "         AND size_bytes IS :size AND local_pdf IS :local)",
                {"id": document_id, "sha": sha256, "size": size_bytes, "local": local_pdf, "now": utc_now()})
            return cursor.rowcount > 0

    def record_download_event(self, document_id: str, *, requested_at: str, http_status: int | None,
                              headers: Mapping[str, str] | None) -> None:
        """One download response: when it was asked for, its status, the headers naming its bytes."""
        headers = headers or {}
        with self.transaction():
            self.conn.execute(
                "INSERT INTO download_events(document_id, requested_at, http_status, content_length, etag, "
                "last_modified, content_type) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (document_id, requested_at, http_status, *(headers.get(name) for name in IDENTIFYING_HEADERS)))

    def download_events(self, document_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM download_events WHERE document_id = ? ORDER BY event_id",
                                 (document_id,)).fetchall()
# What a document reusing an extracted twin's text takes from it.
_TWIN_COLUMNS = ("document_id, pages, extracted_chars, likely_scanned, pages_needing_ocr, text_quality, "
                 "extracted_by_ocr, ocr_pages")


class TextRecords(Tables):
    """What extraction and OCR record of a document's text and pages."""

    def back_to_extract(self, figures: Sequence[tuple[str, int | None]], reason: str) -> int:
        """(document_id, characters of the text the archive holds, or None) of `extracted` or
        `downloaded` documents: back in the extract queue, attempts reset, `reason` their last word;
        a known character count is kept (the held text's where none was recorded), so extraction
        keeps that text (c80). Returns the rows changed."""
        with self.transaction():
            return self.conn.executemany(
                "UPDATE documents SET status = 'downloaded', extract_attempts = 0, extract_failure = NULL, "
                "extracted_chars = COALESCE(extracted_chars, ?), last_error = ?, updated_at = ? "
                "WHERE document_id = ? AND status IN ('extracted', 'downloaded')",
                [(chars, reason, utc_now(), document_id) for document_id, chars in figures]).rowcount

    def mark_extract_failed(self, document_id: str, error: str, *, reason: str | None = None,
                            spend_all: int | None = None) -> None:
        """One failed extraction attempt; a permanent one (`reason`) spends them all (`spend_all`:
        MAX_EXTRACT_ATTEMPTS), so the document leaves the queue of CONTRACT.md with its reason."""
        with self.transaction():
            self.conn.execute(
                "UPDATE documents SET extract_attempts = MAX(extract_attempts + 1, COALESCE(?, 0)), "
                "last_error = ?, extract_failure = ?, updated_at = ? WHERE document_id = ? AND status = 'downloaded'",
                (spend_all, error[:500], reason, utc_now(), document_id))

    def log_extraction_attempts(self, entries: list[dict]) -> None:
        """Many extraction_log rows: document_id, sha256, attempt, engine, outcome, pages, chars,
        seconds, error, quality."""
        now = utc_now()
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO extraction_log(document_id, sha256, attempt, engine, outcome, pages, chars, "
                "seconds, error, quality, logged_at) VALUES (:document_id, :sha256, :attempt, :engine, :outcome, "
                ":pages, :chars, :seconds, :error, :quality, :now)",
                [{**entry, "error": None if entry.get("error") is None else str(entry["error"])[:500],
                  "quality": entry.get("quality"), "now": now} for entry in entries])

    def record_extracted(self, entries: list[dict], *, attempts: Sequence[dict] = (),
                         pages: Sequence[tuple] = ()) -> None:
        """In one transaction: the chains' other `attempts` (`log_extraction_attempts`), the facts of
        `pages` ((sha256, page, chars, has_images, image_cover, needs_ocr, engine, engine_reason)), and for each
        entry (document_id, sha256,
        attempt, engine, pages, chars, seconds, likely_scanned; optional quality, pages_needing_ocr,
        extracted_by_ocr, ocr_pages) its `ok` log row and the document `extracted`."""
        now = utc_now()
        with self.transaction():
            self.log_extraction_attempts(list(attempts))
            self.conn.executemany(
                "INSERT INTO pages(sha256, page, chars, has_images, image_cover, needs_ocr, engine, engine_reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256, page) DO UPDATE SET chars = excluded.chars, "
                "has_images = excluded.has_images, image_cover = excluded.image_cover, "
                "needs_ocr = excluded.needs_ocr, engine = excluded.engine, engine_reason = excluded.engine_reason",
                pages)
            self.log_extraction_attempts([{**entry, "outcome": "ok", "error": None} for entry in entries])
            self.conn.executemany(
                "UPDATE documents SET status = 'extracted', pages = :pages, extracted_chars = :chars, "
                "likely_scanned = :likely_scanned, pages_needing_ocr = :pages_needing_ocr, "
                "text_quality = :quality, extracted_by_ocr = :extracted_by_ocr, ocr_pages = :ocr_pages, "
                "ocr_quality = NULL, extract_failure = NULL, extract_attempts = extract_attempts + 1, "
                "updated_at = :now "
                "WHERE document_id = :document_id AND status = 'downloaded'",
                [{"document_id": entry["document_id"], "pages": entry["pages"], "chars": entry["chars"],
                  "likely_scanned": int(entry["likely_scanned"]), "quality": entry.get("quality"),
                  "pages_needing_ocr": entry.get("pages_needing_ocr"),
                  "extracted_by_ocr": entry.get("extracted_by_ocr"), "ocr_pages": entry.get("ocr_pages"),
                  "now": now} for entry in entries])

    def extracted_twin(self, sha256: str) -> sqlite3.Row | None:
        """An `extracted` document holding this sha256 (pages, extracted_chars, likely_scanned), if any.

        Its commit came after its text file was written, so that file can be trusted.
        """
        return self.conn.execute(
            f"SELECT {_TWIN_COLUMNS} FROM documents "
            "WHERE sha256 = ? AND status = 'extracted' AND pages IS NOT NULL LIMIT 1",
            (sha256,)).fetchone()

    def extracted_twins(self, sha256s: Iterable[str]) -> dict[str, sqlite3.Row]:
        """`extracted_twin` of many sha256 at once (one query per 500): sha256 -> its row, for those
        an `extracted` document holds."""
        twins: dict[str, sqlite3.Row] = {}
        for row in rows_in(self.conn, f"SELECT sha256, {_TWIN_COLUMNS} FROM documents WHERE sha256 IN ({{ids}}) "
                           "AND status = 'extracted' AND pages IS NOT NULL", sha256s):
            twins.setdefault(row["sha256"], row)
        return twins

    def ocr_queue(self) -> list[tuple[str, list[int]]]:
        """(sha256, its page numbers needing OCR) of each PDF an `extracted` document holds that OCR
        has not handled yet, in the order the documents were discovered."""
        shas = [row[0] for row in self.conn.execute(
            "SELECT sha256 FROM documents WHERE status = 'extracted' AND pages_needing_ocr > 0 "
            "AND extracted_by_ocr IS NULL AND sha256 IS NOT NULL GROUP BY sha256 ORDER BY MIN(rowid)")]
        queue = []
        for sha in shas:
            pages = [row[0] for row in self.conn.execute(
                "SELECT page FROM pages WHERE sha256 = ? AND needs_ocr = 1 ORDER BY page", (sha,))]
            queue.append((sha, pages))
        return queue

    def unreadable_text_pages(self, poor_reason: str) -> int:
        """Pages of extracted documents whose kept text was poor in every engine (`engine_reason`
        begins with `poor_reason`) and that OCR gave no text (not run yet, failed, or empty)."""
        return self.conn.execute(
            "SELECT COUNT(*) FROM pages WHERE substr(engine_reason, 1, length(:reason)) = :reason "
            "AND COALESCE(ocr_chars, 0) = 0 AND sha256 IN (SELECT sha256 FROM documents WHERE status = 'extracted')",
            {"reason": poor_reason}).fetchone()[0]

    def page_count(self, sha256: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM pages WHERE sha256 = ?", (sha256,)).fetchone()[0]

    def record_ocr(self, sha256: str, recognised: Mapping[int, tuple[int, int | None]], *,
                   quality: float | None = None, failed: bool = False) -> int:
        """OCR's outcome for every document holding `sha256`: per recognised page (chars it gave,
        rotation applied), and `extracted_by_ocr` 1 with `ocr_pages` and the merged text's
        `ocr_quality` (or 0 when it failed). Their court-text agreement is measured again (it
        compares the best text, which OCR may have changed). Returns the documents changed."""
        with self.transaction():
            self.conn.executemany("UPDATE pages SET ocr_chars = ?, rotation = ? WHERE sha256 = ? AND page = ?",
                                  [(chars, rotation, sha256, page) for page, (chars, rotation) in recognised.items()])
            return self.conn.execute(
                "UPDATE documents SET extracted_by_ocr = ?, ocr_pages = ?, ocr_quality = ?, "
                "court_text_agreement = NULL, updated_at = ? WHERE sha256 = ? AND status = 'extracted'",
                (0 if failed else 1, 0 if failed else len(recognised), None if failed else quality, utc_now(),
                 sha256)).rowcount

    def set_text_sources(self, changes: Sequence[tuple[str | None, str]]) -> None:
        """(text_source, document_id) pairs: the best text each document's readers use now."""
        if not changes:
            return
        now = utc_now()
        with self.transaction():
            self.conn.executemany("UPDATE documents SET text_source = ?, updated_at = ? WHERE document_id = ?",
                                  [(source, now, document_id) for source, document_id in changes])
