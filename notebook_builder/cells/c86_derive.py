"""Derive: the researcher's fields and the citations of every document, from the database and the texts alone.

Guarantees:
- Work comes from `DerivedRecords.derive_queue` (no derived row, or one made by an
  older method/version, from another description, before the text was
  extracted, or from another PDF), DERIVE_BATCH rows at a time in rowid
  order; each batch is one transaction. Running it again with nothing new
  changes nothing (idempotent); `redo=True` (`kycourt-pipeline derive --redo`)
  derives every document again.
- A document's fields come from `c84_legal_text.derive_fields`, in the words
  of the court system's state (c83 `legal_words`: its headings, citation
  forms, dates and publication marks; c28: its case numbers), over its
  docket description (and, when issue 13's `docket_entries` table exists, its
  entry type and subtype) and, when it is extracted, its best text
  (c33_best_text: the OCR merge of a scan, the text layer, or the court's
  own text; recorded first, so the queue sees a new one); a text missing
  locally is fetched from the store; one found nowhere leaves the text-borne
  fields NULL with a warning. Nothing is guessed: unknown is NULL.
- Each derived row records the method (the system's rules: `ky-rules` for
  Kentucky, `nevada-rules` ...) and version, the PDF hash and the
  description it was derived from, which text it read (`text_source`) and
  that text's sha256 and length (`text_sha256`: verify's audit re-hashes the
  store's text against it). A document whose best text changes (OCR gave
  one, the court's text replaced a poor one) is derived again.
- Citations (`c84_legal_text.extract_citations`) replace the document's rows
  of `citations` in the same transaction; its own case numbers go to
  `derived_case_numbers`, through which `DerivedRecords.cites`/`cited_by` resolve
  citations to the archive's documents at query time (so the order in which
  documents are derived does not matter).
- Bad input (undecodable bytes, no caption, mojibake, a description without
  "BY", a text eyecite cannot parse) is a warning in the row's `warnings`
  and a count in the result, never an exception. The stage stops between
  batches when the clock says so.

Knobs read: COURT_SYSTEM (its words), DERIVE_BATCH, MIN_TEXT_QUALITY (the best text), DRY_RUN (a dry
run derives nothing).
"""
from __future__ import annotations

import collections
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field

from .c00_config import utc_now
from .c06_layout import TEXT_LAYER, text_name
from .c14_derived import DerivedRecords
from .c28_court_words import words_of_config
from .c34_mirror import progress
from .c35_context import Context
from .c33_best_text import decode_text, fetch_into_workspace, read_text, record_text_sources
from .c83_legal_words import KENTUCKY_WORDS, LegalWords, legal_words
from .c84_legal_text import FIELD_NAMES, LEGAL_TEXT_VERSION, derive_fields, extract_citations, eyecite_version

log_derive = logging.getLogger("kycourt.derive")

DERIVE_VERSION = LEGAL_TEXT_VERSION
_DERIVE_LIST_FIELDS = ("lower_court_numbers", "trial_court_numbers", "case_numbers", "related_case_numbers")


@dataclass
class DeriveResult:
    queued: int = 0
    derived: int = 0
    with_text: int = 0
    texts_missing: int = 0
    citations: int = 0
    unparsed_citations: int = 0
    fields: dict[str, int] = field(default_factory=dict)      # non-NULL values per field
    warnings: dict[str, int] = field(default_factory=dict)    # per kind of warning
    eyecite: str | None = None
    stopped: bool = False
    dry_run: bool = False
    seconds: float = 0.0


def derive(ctx: Context, *, redo: bool = False) -> DeriveResult:
    """Derives every queued document; see the module docstring."""
    started = time.monotonic()
    cfg, db = ctx.cfg, ctx.open_database()
    result = DeriveResult(eyecite=eyecite_version())
    words = legal_words(cfg.COURT_SYSTEM)
    numbers = None if words is KENTUCKY_WORDS else words_of_config(cfg).text_numbers
    if not cfg.DRY_RUN:
        record_text_sources(db, cfg.MIN_TEXT_QUALITY)
    result.queued = DerivedRecords(db).derive_queue_size(words.method, DERIVE_VERSION, redo=redo)
    if cfg.DRY_RUN or result.queued == 0:
        result.dry_run = cfg.DRY_RUN
        return result
    fields_seen: collections.Counter = collections.Counter()
    warnings_seen: collections.Counter = collections.Counter()
    after = 0
    with progress(cfg, result.queued, "derive") as bar:
        while True:
            if ctx.clock.should_stop():
                result.stopped = True
                break
            batch = DerivedRecords(db).derive_queue(words.method, DERIVE_VERSION, cfg.DERIVE_BATCH, after, redo=redo)
            if not batch:
                break
            entries = []
            for row in batch:
                entry = _derive_document(ctx, row, result, words, numbers)
                for name in FIELD_NAMES:
                    if entry["row"][name] is not None:
                        fields_seen[name] += 1
                for warning in json.loads(entry["row"]["warnings"]):
                    warnings_seen[str(warning).split(":", 1)[0]] += 1
                entries.append(entry)
            DerivedRecords(db).save_derived(entries)
            result.derived += len(entries)
            after = batch[-1]["rowid"]
            bar.update(len(entries))
    result.fields = dict(sorted(fields_seen.items()))
    result.warnings = dict(sorted(warnings_seen.items()))
    result.seconds = round(time.monotonic() - started, 3)
    log_derive.info("derive: %d documents (%d with text, %d texts missing), %d citations, %d unparsed; "
                    "warnings %s", result.derived, result.with_text, result.texts_missing, result.citations,
                    result.unparsed_citations, result.warnings or "none")
    return result


def _derive_document(ctx: Context, row, result: DeriveResult, words: LegalWords, numbers) -> dict:
    text, text_sha256, warnings = _derive_read_text(ctx, row, result)
    fields = derive_fields(text, description=row["description"], entry_type=row["entry_type"],
                           entry_subtype=row["entry_subtype"], document_name=row["document_name"],
                           case_number=row["case_number"], words=words, numbers=numbers)
    warnings += fields.warnings
    citations = extract_citations(text, own_case_numbers=fields.case_numbers or (), body_start=fields.caption_end,
                                  words=words, numbers=numbers)
    warnings += citations.warnings
    if citations.unparsed:
        warnings.append(f"unparsed citations: {citations.unparsed}")
    result.citations += len(citations.citations)
    result.unparsed_citations += citations.unparsed
    values = {name: getattr(fields, name) for name in FIELD_NAMES}
    for name in _DERIVE_LIST_FIELDS:
        if values[name] is not None:
            values[name] = json.dumps(values[name])
    document_id = row["document_id"]
    return {
        "row": {"document_id": document_id, "method": words.method, "version": DERIVE_VERSION,
                "source_sha256": row["sha256"] if text is not None else None,
                "source_description": row["description"], "text_sha256": text_sha256,
                "text_source": (row["text_source"] or TEXT_LAYER) if text is not None else None,
                "text_chars": None if text is None else len(text), **values,
                "citation_count": len(citations.citations) if text is not None else None,
                "warnings": json.dumps(warnings), "derived_at": utc_now()},
        "citations": [{"document_id": document_id, "start": c.start, "end": c.end, "kind": c.kind,
                       "form": c.form, "matched_text": c.matched_text, "normalized": c.normalized,
                       "case_number": c.case_number, "year": c.year, "court": c.court,
                       "extractor": citations.extractor} for c in citations.citations],
        "case_numbers": fields.case_numbers or [],
    }


def _derive_read_text(ctx: Context, row, result: DeriveResult) -> tuple[str | None, str | None, list[str]]:
    """(the best text, the sha256 of its bytes, warnings) of an extracted document; (None, None, [])
    for one not extracted."""
    if row["status"] != "extracted" or not row["sha256"]:
        return None, None, []
    name = text_name(row["text_source"] or TEXT_LAYER, row["sha256"], row["court_sha256"])
    data = read_text(ctx.workspace, name, fetch_into_workspace(ctx))
    if data is None:
        result.texts_missing += 1
        return None, None, [f"text missing: {name} is neither in the workspace nor in the store"]
    text, undecodable = decode_text(data)
    result.with_text += 1
    return text, hashlib.sha256(data).hexdigest(), [undecodable] if undecodable else []
