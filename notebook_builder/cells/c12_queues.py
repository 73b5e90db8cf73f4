"""The two work queues, defined once, and the counts of documents by state.

Guarantees:
- The download queue (`DOWNLOAD_QUEUE_SQL`) and the extract queue (`EXTRACT_QUEUE_SQL`) are
  CONTRACT.md's: the stages take work from them and verify counts them with the same text, so
  `done` is true by construction. A permanent failure, a withheld document (document_available 0),
  a document the court does not serve to the public (document_available 0 with its
  `access_state`: `done` means every public document archived) and an adopted row whose id
  discovery has not confirmed (LEGACY_HELD_KINDS) are never queued.
- The download queue hands opinions (`OPINION_SQL`) out first, then in rowid order; paging is a
  keyset over one integer (`queue_key`).
- `final_states` splits the documents no normal run changes so that they add up to the status
  counts: not extractable (with reasons), withheld, failed for good, out of attempts, retrying.
  `not_public_counts` counts apart those not public at the court (by ACCESS_STATE_REASONS' reason);
  `not_public_documents` lists them (those of some case numbers).

Knobs read (passed by the caller): MAX_ATTEMPTS, MAX_EXTRACT_ATTEMPTS.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Callable, Sequence

from .c00_config import Config, utc_now
from .c10_database import PERMANENT_HTTP_STATUSES, STATUSES, Tables, table_columns

_PERMANENT_LIST = ",".join(str(code) for code in PERMANENT_HTTP_STATUSES)

# The one definition of each queue. Parameters: :max_attempts / :max_extract_attempts.
# A document the court withholds (document_available 0) is never requested, whatever its status.
# An adopted legacy row (c38_legacy) whose id discovery has not confirmed yet, or has shown to be a
# docket entry's or a case's, is held: nothing is downloaded under an id that may not be a documentID.
# (NOT IN builds the held ids once per query, through legacy_documents_kind: once none are held it
# costs nothing, where a correlated NOT EXISTS costs a lookup per row, 0.9 s a count at full scale.)
LEGACY_HELD_KINDS = ("unchecked", "docket_entry", "case")
LEGACY_HELD_LIST_SQL = ", ".join(f"'{kind}'" for kind in LEGACY_HELD_KINDS)
DOWNLOAD_QUEUE_SQL = f"""
    status IN ('discovered', 'failed')
    AND attempts < :max_attempts
    AND (http_status IS NULL OR http_status NOT IN ({_PERMANENT_LIST}))
    AND document_available IS NOT 0
    AND document_id NOT IN (SELECT document_id FROM legacy_documents WHERE id_kind IN ({LEGACY_HELD_LIST_SQL}))
"""


# An opinion: a document the court's own listing marks as one (`opinion` 1: a TR Portal court's
# opinion feed or dispositional entry), else one whose docket entry's type or description names one,
# as every entry Kentucky's opinion search lists does ("DISPOSITION - OPINION OF THE COURT BY A
# JUSTICE", "CA - OPINION", "MEMORANDUM OPINION AND ORDER"). The download queue hands opinions out first.
OPINION_SQL = ("(opinion = 1 OR (opinion IS NULL AND (entry_type LIKE '%OPINION%' "
               "OR description LIKE '%OPINION%')))")

# documents.access_state (c10 v14; NULL: public) -> why the document is not public at the court.
ACCESS_STATE_REASONS = {"purchasable": "purchase", "in_cart": "purchase", "unavailable": "registration",
                        "secured": "registration", "wall": "registration or purchase"}


def not_public_reason(state: str | None) -> str | None:
    """Why a document in `state` is not public at the court ("registration", "purchase"); None: public."""
    return None if state is None else ACCESS_STATE_REASONS.get(state, "registration or purchase")

# The download queue's order: opinions first, then rowid; one integer, so paging stays a keyset
# (`after` is the last row's queue_key).
_QUEUE_KEY_SQL = f"((CASE WHEN {OPINION_SQL} THEN 0 ELSE 1 END) << 40 | rowid)"
EXTRACT_QUEUE_SQL = """
    status = 'downloaded'
    AND extract_attempts < :max_extract_attempts
"""


class WorkQueues(Tables):
    """The two work queues and the counts of documents by state."""

    @staticmethod
    def _queue_params(cfg: Config) -> dict[str, int]:
        return {"max_attempts": cfg.MAX_ATTEMPTS, "max_extract_attempts": cfg.MAX_EXTRACT_ATTEMPTS}

    def _queue(self, where: str, cfg: Config, limit: int, after_rowid: int) -> list[sqlite3.Row]:
        return self.conn.execute(
            f"SELECT rowid, * FROM documents WHERE ({where}) AND rowid > :after ORDER BY rowid LIMIT :limit",
            {**self._queue_params(cfg), "after": after_rowid, "limit": limit}).fetchall()

    def _queue_size(self, where: str, cfg: Config) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}",
                                 self._queue_params(cfg)).fetchone()[0]

    def download_queue(self, cfg: Config, limit: int, after: int = -1, *, opinions_only: bool = False
                       ) -> list[sqlite3.Row]:
        """The next `limit` documents to fetch after the row whose `queue_key` is `after`: opinions
        first, then in rowid order (`opinions_only`: the opinions alone)."""
        only = f"AND {OPINION_SQL} " if opinions_only else ""
        return self.conn.execute(
            f"SELECT rowid, {_QUEUE_KEY_SQL} AS queue_key, * FROM documents WHERE ({DOWNLOAD_QUEUE_SQL}) "
            f"{only}AND {_QUEUE_KEY_SQL} > :after ORDER BY queue_key LIMIT :limit",
            {**self._queue_params(cfg), "after": after, "limit": limit}).fetchall()

    def download_queue_size(self, cfg: Config) -> int:
        return self._queue_size(DOWNLOAD_QUEUE_SQL, cfg)

    def opinions_to_download(self, cfg: Config) -> int:
        """Opinions (OPINION_SQL) in the download queue."""
        return self._queue_size(f"({DOWNLOAD_QUEUE_SQL}) AND {OPINION_SQL}", cfg)

    def extract_queue(self, cfg: Config, limit: int, after_rowid: int = 0) -> list[sqlite3.Row]:
        """The next `limit` documents to extract, in rowid order after `after_rowid`."""
        return self._queue(EXTRACT_QUEUE_SQL, cfg, limit, after_rowid)

    def extract_queue_size(self, cfg: Config) -> int:
        return self._queue_size(EXTRACT_QUEUE_SQL, cfg)

    def queue_sizes(self, cfg: Config) -> dict[str, int]:
        return {"download": self.download_queue_size(cfg), "extract": self.extract_queue_size(cfg)}

    def forgive_failures(self) -> int:
        """RETRY_HARD: put every failed document back in the download queue, once per run (but a
        withheld one: the court does not serve it; a sweep that sees it available queues it)."""
        with self.transaction():
            cursor = self.conn.execute(
                "UPDATE documents SET attempts = 0, http_status = NULL, "
                "last_error = 'retry-hard; was: ' || COALESCE(http_status, '') || ' ' || COALESCE(last_error, ''), "
                "updated_at = ? WHERE status = 'failed' AND document_available IS NOT 0", (utc_now(),))
            return cursor.rowcount

    def fail_spent_attempts(self, cfg: Config) -> int:
        """Documents whose attempts were all spent by killed runs (never answered) become
        `failed`, so they are listed in failed_inventory.csv and RETRY_HARD can forgive them."""
        with self.transaction():
            return self.conn.execute(
                "UPDATE documents SET status = 'failed', "
                "last_error = 'attempts spent by interrupted runs', updated_at = ? "
                "WHERE status = 'discovered' AND attempts >= ?", (utc_now(), cfg.MAX_ATTEMPTS)).rowcount

    def status_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for status, count in self.conn.execute(
                "SELECT status, COUNT(*) FROM documents GROUP BY status"):
            counts[status] = count
        return counts

    def document_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def permanent_failure_count(self) -> int:
        return self.conn.execute(
            f"SELECT COUNT(*) FROM documents WHERE status = 'failed' "
            f"AND http_status IN ({_PERMANENT_LIST})").fetchone()[0]

    def final_states(self, cfg: Config) -> dict[str, Any]:
        """Documents no normal run changes, by the state they are in for good, and the failed ones
        still retrying: `not_extractable` (downloaded PDFs out of extract attempts) with its
        reasons (extract_failure; 'attempts spent' when none was named), and the failed documents
        split so that they add up to the `failed` count: `withheld` (the court lists the document
        but offers no file: document_available 0), `failed_for_good` (a permanent HTTP answer),
        `out_of_attempts` (transient failures, attempts spent) and `retrying` (still queued)."""
        columns = set(table_columns(self.conn, "documents"))
        available = "COALESCE(document_available, 1)" if "document_available" in columns else "1"
        reason = "COALESCE(extract_failure, 'attempts spent')" if "extract_failure" in columns else "'attempts spent'"
        params = self._queue_params(cfg)
        not_extractable = dict(self.conn.execute(
            f"SELECT {reason} AS reason, COUNT(*) FROM documents WHERE status = 'downloaded' "
            f"AND NOT ({EXTRACT_QUEUE_SQL}) GROUP BY reason ORDER BY COUNT(*) DESC, reason", params).fetchall())
        failed = self.conn.execute(
            f"SELECT COALESCE(SUM({available} = 0), 0), "
            f"COALESCE(SUM({available} != 0 AND http_status IN ({_PERMANENT_LIST})), 0), "
            f"COALESCE(SUM({available} != 0 AND NOT ({DOWNLOAD_QUEUE_SQL}) "
            f"AND (http_status IS NULL OR http_status NOT IN ({_PERMANENT_LIST}))), 0), "
            f"COALESCE(SUM({available} != 0 AND {DOWNLOAD_QUEUE_SQL}), 0) "
            f"FROM documents WHERE status = 'failed'", params).fetchone()
        return {"not_extractable": sum(not_extractable.values()), "not_extractable_reasons": not_extractable,
                "withheld": failed[0], "failed_for_good": failed[1], "out_of_attempts": failed[2],
                "retrying": failed[3]}

    def not_public_counts(self) -> dict[str, Any]:
        """Documents the court lists and does not serve to the public (access_state set): how many, and
        by reason (`not_public_reason`). They are kept as records, never requested, never failures (a
        database from before access states has none)."""
        reasons: dict[str, int] = {}
        if "access_state" not in table_columns(self.conn, "documents"):
            return {"not_public": 0, "not_public_reasons": reasons}
        for state, count in self.conn.execute(
                "SELECT access_state, COUNT(*) FROM documents WHERE access_state IS NOT NULL GROUP BY access_state"):
            reason = not_public_reason(state)
            reasons[reason] = reasons.get(reason, 0) + count
        return {"not_public": sum(reasons.values()), "not_public_reasons": reasons}

    def not_public_documents(self, case_numbers: Sequence[str] | None = None, limit: int = 200) -> list[sqlite3.Row]:
        """The documents the court does not serve to the public (of these case numbers; None: any),
        the first `limit` by case number and filed date: document_id, case_number, description,
        access_state."""
        if case_numbers == [] or "access_state" not in table_columns(self.conn, "documents"):
            return []
        where, params = "", ()
        if case_numbers is not None:
            where, params = f" AND case_number IN ({', '.join('?' * len(case_numbers))})", tuple(case_numbers)
        return self.conn.execute(
            "SELECT document_id, case_number, COALESCE(description, document_name) AS description, access_state "
            f"FROM documents WHERE access_state IS NOT NULL{where} "
            "ORDER BY case_number, filed_date, document_id LIMIT ?", (*params, limit)).fetchall()

    def coverage_by_year_court(self, cfg: Config, case_year: Callable[[Any, Any], Any] | None = None
                               ) -> list[sqlite3.Row]:
        """Per case-number year and court: documents in each status (for reports), and the
        downloaded ones out of extract attempts (`not_extractable`: never extracted by a run).
        `case_year(case_number, filed_date)` reads a document's year (None: the case number's first
        four characters, Kentucky's form)."""
        year = "substr(case_number, 1, 4)"
        if case_year is not None:
            self.conn.create_function("case_year", 2, case_year, deterministic=True)
            year = "case_year(case_number, filed_date)"
        return self.conn.execute(
            f"SELECT {year} AS year, court, "
            "COUNT(*) AS discovered, "
            "SUM(status IN ('downloaded', 'extracted')) AS downloaded, "
            "SUM(status = 'extracted') AS extracted, "
            "SUM(status = 'failed') AS failed, "
            f"SUM(status = 'downloaded' AND NOT ({EXTRACT_QUEUE_SQL})) AS not_extractable "
            "FROM documents GROUP BY year, court ORDER BY year, court", self._queue_params(cfg)).fetchall()

    def extraction_failures(self, cfg: Config) -> list[sqlite3.Row]:
        """Downloaded documents whose extraction attempts are used up."""
        return self.conn.execute(
            "SELECT * FROM documents WHERE status = 'downloaded' AND extract_attempts >= ? "
            "ORDER BY document_id", (cfg.MAX_EXTRACT_ATTEMPTS,)).fetchall()

    def failed_documents(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT * FROM documents WHERE status = 'failed' ORDER BY document_id").fetchall()
