"""Extract: the text of every downloaded PDF, in worker processes, one PDF's fault never stopping the rest.

Guarantees:
- Work comes from the extract queue of CONTRACT.md (`WorkQueues.extract_queue`, EXTRACT_BATCH rows
  at a time, keyset by rowid): one pass attempts each queued document at most once and a failure
  counts one attempt; a failed document is retried in a further pass, so a run ends with the queue
  empty. After MAX_EXTRACT_ATTEMPTS a document leaves the queue (verify lists it).
- Each distinct sha256 is extracted once and its outcome applied to every document holding it; a
  document whose sha256 another `extracted` document holds reuses that text and its figures.
- The engine chain (EXTRACT_ENGINES, default pypdfium2 then pypdf) runs in c79's worker pool; which
  reading is kept, for the document and page by page, is c78's decision (`extraction_step`,
  `choose_page_reading`). Every attempt is a row of `extraction_log`; `pages` holds each page's kept
  reading (chars, images, needs_ocr, engine and why).
- A verdict no engine can change (encrypted, empty, too large, unparseable) fails the document once,
  for good (`documents.extract_failure` names it); only transient failures keep attempts.
- Texts are written to `text/<sha256>.txt` atomically and mirrored to the store in groups before the
  database says `extracted`, so it never says so before the store holds the text (if the store lags,
  the local files are synced instead). Pages are separated by a form feed; a PDF with no text layer is
  `extracted` with an empty file and 0 chars. A committed text is never rewritten: re-extracting a
  document extracted before keeps the text the archive holds and measures its pages again.
- A PDF missing from the workspace is fetched from the store first; a full disk raises DiskFullError;
  the stage stops handing out PDFs once `ctx.clock.should_stop()`, finishing those in flight.
- Where the court's own text is known, the agreement of ours with it is recorded
  (`documents.court_text_agreement`).

Knobs read: WORKERS, EXTRACT_BATCH, EXTRACT_ENGINES, EXTRACT_TIMEOUT, EXTRACT_MEMORY_MB,
MIN_TEXT_QUALITY, MAX_EXTRACT_ATTEMPTS, SCANNED_CHARS_PER_PAGE.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .c05_durable import atomic_write, raise_if_disk_full, sync_files
from .c06_layout import court_text_store_name, pdf_store_name, text_store_name
from .c12_queues import WorkQueues
from .c13_records import TextRecords
from .c14_derived import DerivedRecords
from .c33_best_text import best_text_name, fetch_into_workspace, read_text
from .c34_mirror import progress
from .c35_context import Context
from .c78_page_text import (POOR_TEXT, PageMeasures, PageReading, choose_page_reading, extraction_step,
                            is_likely_scanned, join_page_texts, normalized_words, page_defect, page_needs_ocr,
                            pages_a_kept_text_lacks, pages_to_reread, text_agreement, text_quality, word_like_count)
from .c79_extract_engines import ExtractOutcome, ExtractWorkerPool

log_extract = logging.getLogger("kycourt.extract")


# ---------------------------------------------------------------- engines

# An engine is f(pdf_path) -> one entry per page: (text, has_images[, text objects, characters they
# gave, share of the page its images cover]), or the text alone (no images known). It raises ExtractionFailure with a named verdict when it knows why it cannot read the PDF;
# any other exception is classified by `classify_extract_error`.


# -------------------------------------------------------------- decisions


# ----------------------------------------------------- page readings: garbage text and whole words


# ---------------------------------------------------------------- workers


# ------------------------------------------------------------------ stage


@dataclass
class ExtractResult:
    attempted: int = 0        # documents attempted (reuses included)
    extracted: int = 0        # documents now `extracted`
    failed_attempts: int = 0  # documents whose attempt failed
    exhausted: int = 0        # of those, documents that have now used up their attempts
    pages: int = 0            # pages of the PDFs extracted (each sha256 once)
    chars: int = 0
    seconds: float = 0.0
    engine: str = ""          # the chain, comma-separated
    pdfs: int = 0             # distinct PDFs handed to the workers
    reused: int = 0           # documents that reused an extracted twin's text
    stopped: bool = False     # the clock asked to stop before the queue was done
    permanent: int = 0        # documents failed with a verdict no engine changes (left the queue)
    fallbacks: int = 0        # engine attempts after the first of a PDF (failure, timeout, crash, low quality)
    pages_reread: int = 0     # pages a further engine read because every reading so far was doubtful
    pages_other_engine: int = 0   # pages whose kept text is not the engine's the document kept
    pages_poor_text: int = 0  # pages poor in every engine: they need OCR
    unreadable_pages: int = 0     # in the archive: pages poor in every engine that OCR gave no text (yet)
    kept_by: dict = field(default_factory=dict)     # engine -> PDFs whose text it gave
    pages_needing_ocr: int = 0
    court_text_checked: int = 0   # agreements with the court's own text recorded


def extract(ctx: Context) -> ExtractResult:
    """Runs the extract queue to its end (or until the clock says stop)."""
    cfg, db = ctx.cfg, ctx.open_database()
    started = time.monotonic()
    result = ExtractResult(engine=",".join(cfg.EXTRACT_ENGINES))
    queued = WorkQueues(db).extract_queue_size(cfg)
    if queued == 0 or cfg.DRY_RUN:  # a dry run touches neither the PDFs nor the store
        if not cfg.DRY_RUN:
            result.court_text_checked = court_text_agreements(ctx)   # court texts found since
            result.unreadable_pages = TextRecords(db).unreadable_text_pages(POOR_TEXT)
        return result
    (ctx.workspace / "text").mkdir(parents=True, exist_ok=True)
    bar = progress(cfg, queued, "extract")
    try:
        with ExtractWorkerPool(cfg.WORKERS, cfg.EXTRACT_ENGINES, cfg.EXTRACT_TIMEOUT,
                               memory_mib=cfg.EXTRACT_MEMORY_MB) as pool:
            for number in range(1, cfg.MAX_EXTRACT_ATTEMPTS + 1):
                if number > 1:
                    # A failed document stays queued until its attempts are spent:
                    # retry it in this run, one pass per attempt, so a run ends done.
                    left = WorkQueues(db).extract_queue_size(cfg)
                    if left == 0:
                        break
                    bar.total = (bar.total or 0) + left
                _ExtractPass(ctx, result, bar).run(pool)
                if result.stopped:
                    break
    finally:
        bar.close()
    if not result.stopped:
        result.court_text_checked = court_text_agreements(ctx)
    result.unreadable_pages = TextRecords(db).unreadable_text_pages(POOR_TEXT)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def court_text_agreements(ctx: Context, batch: int = 500) -> int:
    """Records, for each extracted document whose court text (`court_text/<sha256>.txt`, the
    court's own documentText) the workspace holds, the word agreement of our best text
    (c33_best_text, the court's left out of the choice) with it; returns how many were recorded.
    A document whose files are not local is left for a later run."""
    db, recorded, after = ctx.db, 0, 0
    while not ctx.clock.should_stop():
        rows = DerivedRecords(db).court_text_agreement_queue(batch, after)
        if not rows:
            break
        agreements = []
        for row in rows:
            ours = read_text(ctx.workspace, best_text_name(row, ctx.cfg.MIN_TEXT_QUALITY, with_court_text=False))
            theirs = read_text(ctx.workspace, court_text_store_name(row["court_sha256"]))
            if ours is not None and theirs is not None:
                agreements.append((text_agreement(ours.decode("utf-8", "replace"), theirs.decode("utf-8", "replace")),
                                   row["document_id"]))
        DerivedRecords(db).record_court_text_agreement(agreements)
        recorded += len(agreements)
        after = rows[-1]["rowid"]
    if recorded:
        log_extract.info("court text: agreement of %d extracted texts with the court's own recorded", recorded)
    return recorded


def _outcome_page_texts(outcome: ExtractOutcome) -> list[str]:
    text = outcome.data.decode("utf-8", "replace") if outcome.data else ""
    return text.split("\f") if text else [""] * (outcome.pages or 0)


def _attempt_page_measures(attempts: list[ExtractOutcome], pages: int) -> list[list[PageMeasures]]:
    """Per page of the document, the PageMeasures of each ok attempt's reading of it, in the chain's order."""
    measures: list[list[PageMeasures]] = [[] for _ in range(pages)]
    for attempt in attempts:
        if attempt.outcome == "ok":
            read = range(pages) if attempt.page_numbers is None else attempt.page_numbers
            for page, page_measures in zip(read, attempt.page_measures):
                if page < pages:
                    measures[page].append(page_measures)
    return measures


def assemble_kept_text(attempts: list[ExtractOutcome], kept_index: int,
                       min_quality: float) -> tuple[ExtractOutcome, list[tuple[str, str, bool]]]:
    """The document's text, page by page from the reading `choose_page_reading` keeps, and per page
    (engine, why, poor). `attempts[kept_index]` (a reading of every page) is the document-level
    choice; when every page keeps it, it is returned as it is. Otherwise the text's engine names
    the engines that gave pages ('pypdfium2+pypdf'), each page's facts are its kept reading's (its
    images seen by any reading, its image cover as the first that measured it), and its quality is
    the joined text's."""
    kept = attempts[kept_index]
    readers = [attempt for attempt in attempts if attempt.outcome == "ok"]
    if len(readers) == 1:   # one reading of each page: its measures decide, its text is not needed
        choices = []
        for measures in kept.page_measures:
            if page_defect(measures, min_quality) is None:
                choices.append((kept.engine, "good text", False))
            else:
                choice = choose_page_reading([PageReading(kept.engine, "", measures)], 0, min_quality)
                choices.append((kept.engine, choice.reason, choice.poor))
        return kept, choices
    texts = {id(attempt): _outcome_page_texts(attempt) for attempt in readers}
    per_page: list[list[tuple[ExtractOutcome, int]]] = [[] for _ in range(kept.pages or 0)]
    for attempt in readers:
        read = range(attempt.pages or 0) if attempt.page_numbers is None else attempt.page_numbers
        for position, page in enumerate(read):
            if page < len(per_page) and position < len(texts[id(attempt)]):
                per_page[page].append((attempt, position))
    readings = [[PageReading(attempt.engine, texts[id(attempt)][position], attempt.page_measures[position])
                 for attempt, position in page] for page in per_page]
    # The dictionary whole words are judged by: the words every reading of a compared page has.
    vocabulary: set[str] = set()
    for page in readings:
        if len(page) > 1:
            vocabulary |= set.intersection(*(set(normalized_words(reading.text)) for reading in page))
    page_texts, facts, measures, choices = [], [], [], []
    for page, page_readings in zip(per_page, readings):
        kept_position = next(index for index, (attempt, _) in enumerate(page) if attempt is kept)
        choice = choose_page_reading(page_readings, kept_position, min_quality, vocabulary)
        attempt, position = page[choice.index]
        chars, _, _ = attempt.page_facts[position]
        page_facts = [reader.page_facts[at] for reader, at in page]
        covers = [fact[2] for fact in page_facts if fact[2] is not None]
        page_texts.append(page_readings[choice.index].text)
        facts.append((chars, any(fact[1] for fact in page_facts), covers[0] if covers else None))
        measures.append(attempt.page_measures[position])
        choices.append((attempt.engine, choice.reason, choice.poor))
    engines = [engine for engine in dict.fromkeys(attempt.engine for attempt in readers)
               if any(chosen == engine for chosen, _, _ in choices)]
    if engines == [kept.engine]:
        return kept, choices
    text = join_page_texts(page_texts)
    return dataclasses.replace(kept, engine="+".join(engines), data=text.encode("utf-8", "replace"),
                               chars=len(text), page_facts=tuple(facts), page_measures=tuple(measures),
                               quality=text_quality(text, min_tokens=3)), choices


# Outcomes committed per transaction: one commit per PDF costs the supervisor
# CPU the workers need on a 2-core machine; a kill loses at most these
# commits, and their PDFs are extracted again.
_EXTRACT_COMMIT_EVERY = 32


class _ExtractPass:
    """One pass over the extract queue: each queued document attempted at most once.

    The queue is read EXTRACT_BATCH rows at a time (keyset by rowid) as the
    workers make room, so they never wait for a batch boundary. Each distinct
    sha256 goes to the workers once a pass; a document whose sha256 is already
    on its way (sent, or saved and not yet committed) joins that PDF's outcome,
    one whose PDF failed in this pass is given the same failure (its one
    attempt of the pass), and one whose sha256 an `extracted` document holds
    reuses its text.
    """

    def __init__(self, ctx: Context, result: ExtractResult, bar):
        self.ctx, self.result, self.bar = ctx, result, bar
        self.waiting: dict[str, list] = {}     # sha256 -> rows its outcome applies to, until committed
        self.finished: list = []               # (rows, outcome, attempts, page choices) extracted, text not yet saved
        self.handed_out = False                # every queued PDF is with the workers: the pass's tail
        self.committed: set[str] = set()       # sha256 committed `extracted` in this pass
        self.failed: dict[str, _ExtractFailure] = {}   # sha256 whose PDF failed in this pass
        self.text_folder = os.path.join(ctx.workspace, "text")
        self.chains: dict[str, tuple[str, list[ExtractOutcome]]] = {}   # sha256 -> (path, attempts so far)
        self.followups: collections.deque = collections.deque()        # (sha256, path, next engine)

    def run(self, pool: ExtractWorkerPool) -> None:
        ctx, cfg, result = self.ctx, self.ctx.cfg, self.result
        try:
            for outcome in pool.run(self.tasks(), should_stop=ctx.clock.should_stop, followups=self.followups):
                path, attempts = self.chains[outcome.key]
                attempts.append(outcome)
                # The document-level decision weighs the readings of every page; a reading of some
                # pages only (a page reread) is weighed page by page below.
                whole = [a for a in attempts if a.page_numbers is None]
                # With two texts to weigh, how many words each has (counted only then: it is rare).
                step = extraction_step([(a.engine, a.outcome, a.quality) + (
                    (word_like_count(a.data.decode("utf-8", "replace")) if a.outcome == "ok" else None,)
                    if len(whole) > 1 else ()) for a in whole], cfg.EXTRACT_ENGINES,
                                       cfg.MIN_TEXT_QUALITY)
                if step.action == "next":
                    log_extract.info("extract %s: %s gave %s%s; trying %s", outcome.key[:12], outcome.engine,
                                     outcome.outcome, f" (quality {outcome.quality})" if outcome.outcome == "ok"
                                     else f" ({outcome.error})", step.engine)
                    result.fallbacks += 1
                    self.followups.append((outcome.key, path, step.engine))
                    continue
                if step.action == "keep":
                    kept = whole[step.index]
                    reread = pages_to_reread(_attempt_page_measures(attempts, kept.pages or 0),
                                             {a.engine for a in attempts}, cfg.EXTRACT_ENGINES, cfg.MIN_TEXT_QUALITY)
                    if reread is not None:
                        engine, pages = reread
                        log_extract.info("extract %s: %s read pages %s doubtfully; %s reads them too",
                                         outcome.key[:12], kept.engine, ", ".join(str(p + 1) for p in pages), engine)
                        result.pages_reread += len(pages)
                        self.followups.append((outcome.key, path, engine, pages))
                        continue
                del self.chains[outcome.key]
                if step.action == "fail":
                    sha_rows = self.waiting.pop(outcome.key)
                    failure = self.failed[outcome.key] = _ExtractFailure(step.reason, step.permanent, attempts)
                    log_extract.warning("extract %s (%s): %s%s after %s", outcome.key[:12], sha_rows[0]["document_id"],
                                        step.reason, " (permanent)" if step.permanent else "",
                                        "; ".join(f"{a.engine} {a.outcome}: {a.error}" for a in attempts))
                    _extract_record_failure(ctx, sha_rows, failure, result, self.bar)
                    continue
                kept, choices = assemble_kept_text(attempts, attempts.index(whole[step.index]), cfg.MIN_TEXT_QUALITY)
                result.pages_other_engine += sum(engine != whole[step.index].engine for engine, _, _ in choices)
                self.finished.append((self.waiting[outcome.key], kept, attempts, choices))
                # In the tail, each as it comes: the last group's save and commit would otherwise
                # run alone after the last PDF, on idle cores.
                if len(self.finished) >= _EXTRACT_COMMIT_EVERY or self.handed_out:
                    self.save()
        finally:
            self.save()
        if ctx.clock.should_stop():
            result.stopped = True

    def tasks(self) -> Iterator[tuple[str, str]]:
        """(sha256, pdf path) for each PDF the workers must read, batch after batch."""
        ctx, cfg, result, bar = self.ctx, self.ctx.cfg, self.result, self.bar
        after_rowid = 0
        while not ctx.clock.should_stop():
            rows = WorkQueues(ctx.db).extract_queue(cfg, cfg.EXTRACT_BATCH, after_rowid)
            if not rows:
                self.handed_out = True
                return
            after_rowid = rows[-1]["rowid"]
            # One query for the batch; a twin committed since then was in `waiting` at that moment.
            twins = TextRecords(ctx.db).extracted_twins(row["sha256"] for row in rows if row["sha256"])
            for row in rows:
                sha = row["sha256"]
                if not sha:
                    _extract_record_failure(ctx, [row], _ExtractFailure.of(
                        "error", "no sha256 recorded for a downloaded document"), result, bar)
                    continue
                if sha in self.waiting:
                    self.waiting[sha].append(row)
                    continue
                if sha in self.failed:        # the same PDF, one attempt per pass: its outcome again
                    _extract_record_failure(ctx, [row], self.failed[sha], result, bar, again=True)
                    continue
                twin = twins.get(sha) or (TextRecords(ctx.db).extracted_twin(sha) if sha in self.committed else None)
                if twin is not None and _extract_reuse_twin(ctx, sha, row, twin, result, bar):
                    continue
                pdf_path, problem = _extract_local_pdf(ctx, sha, row)
                if problem is not None:
                    _extract_record_failure(ctx, [row], _ExtractFailure.of("error", problem), result, bar)
                    continue
                self.waiting[sha] = [row]
                self.chains[sha] = (pdf_path, [])
                result.pdfs += 1
                yield sha, pdf_path, cfg.EXTRACT_ENGINES[0]
            log_extract.info("extract: a batch of %d documents handed out; so far %d extracted, %d failed "
                             "attempts, %d pages (%s, %d workers)", len(rows), result.extracted,
                             result.failed_attempts, result.pages, ",".join(cfg.EXTRACT_ENGINES), cfg.WORKERS)

    def save(self) -> None:
        """Saves the finished texts and commits them; a save's error (a full disk) is raised, and
        those documents keep their attempt.

        In the stage's own thread: a saver thread used to overlap this with the dispatch of PDFs,
        but each worker holds queued tasks (`depth`), so the workers never wait for it, and on 2
        cores its CPU is the workers' anyway (bench/threads.py: 1.4 ms a document)."""
        finished, self.finished = self.finished, []
        if not finished:
            return
        finished = [(rows, _extract_held_text(self.ctx, rows, outcome), attempts, choices)
                    for rows, outcome, attempts, choices in finished]
        self._save([outcome for _, outcome, _, _ in finished])
        _extract_commit_saved(self.ctx, finished, self.result, self.bar)
        for _, outcome, _, _ in finished:
            self.waiting.pop(outcome.key, None)
            self.committed.add(outcome.key)

    def _save(self, outcomes: list[ExtractOutcome]) -> None:
        """The texts to `text/<sha256>.txt` (a kept one is there already: `_extract_held_text`), then
        to the store as one group."""
        items = []
        for outcome in outcomes:
            text_path = os.path.join(self.text_folder, f"{outcome.key}.txt")
            # Atomic, no fsync: the store's copy is the durable one; when the store lags, the
            # local files are synced below.
            if not outcome.kept_text:
                atomic_write(text_path, outcome.data)
            items.append((text_store_name(outcome.key), text_path))
        held = self.ctx.mirror.put_many(items)
        lagging = [path for name, path in items if not held.get(name)]
        try:
            sync_files(lagging)    # the store lags: until it catches up these files are the only copy
        except OSError as exc:
            raise_if_disk_full(exc, lagging[0])
            raise


def _extract_attempt_entries(rows: list, attempts: list[ExtractOutcome], kept: ExtractOutcome | None,
                             page_engines: Iterable[str] = ()) -> list[dict]:
    """extraction_log rows of a chain's attempts other than the kept one, for each document of the PDF:
    a text that was not kept is `low quality`, one that gave some pages of a text read by several
    engines (`page_engines`: the engine of each kept page) is `pages kept`."""
    entries, page_engines = [], list(page_engines)
    for attempt in attempts:
        if attempt is kept:
            continue
        outcome, error = attempt.outcome, attempt.error
        if attempt.outcome == "ok":
            kept_pages = [number for number, engine in enumerate(page_engines, start=1) if engine == attempt.engine]
            outcome = "pages kept" if kept_pages else "low quality"
            error = f"text quality {attempt.quality}" + (
                f"; read pages {', '.join(str(page + 1) for page in attempt.page_numbers)}"
                if attempt.page_numbers is not None else "") + (
                f"; kept pages {', '.join(map(str, kept_pages))}" if kept_pages else "")
        entries.extend({"document_id": row["document_id"], "sha256": attempt.key,
                        "attempt": row["extract_attempts"] + 1, "engine": attempt.engine, "outcome": outcome,
                        "pages": attempt.pages, "chars": attempt.chars, "seconds": attempt.seconds,
                        "error": error, "quality": attempt.quality} for row in rows)
    return entries


def _extract_commit_saved(ctx: Context, finished: list, result: ExtractResult, bar) -> None:
    if not finished:
        return
    cfg = ctx.cfg
    entries, others, pages = [], [], []
    for sha_rows, outcome, attempts, choices in finished:
        scans = [page_needs_ocr(chars, has_images, cfg.SCANNED_CHARS_PER_PAGE, cover)
                 for chars, has_images, cover in outcome.page_facts]
        # A page poor in every engine needs OCR as a scan does, and so does one whose text a kept
        # text lacks (OCR is then the only way it is found); only scans make a PDF likely scanned.
        lacking = (pages_a_kept_text_lacks(outcome.data.decode("utf-8", "replace"),
                                           [chars for chars, _, _ in outcome.page_facts])
                   if outcome.kept_text else [False] * len(scans))
        flags = [scan or poor or lacks for scan, (_, _, poor), lacks in zip(scans, choices, lacking)]
        needing = sum(flags)
        result.pages_needing_ocr += needing
        result.pages_poor_text += sum(poor for _, _, poor in choices)
        result.kept_by[outcome.engine] = result.kept_by.get(outcome.engine, 0) + 1
        pages.extend((outcome.key, number, chars, int(has_images), cover, int(needs), engine, reason)
                     for number, ((chars, has_images, cover), needs, (engine, reason, _))
                     in enumerate(zip(outcome.page_facts, flags, choices), start=1))
        # Attempts before the kept one first, so the log reads in the order they ran.
        others.extend(_extract_attempt_entries(sha_rows, attempts, outcome,
                                               [engine for engine, _, _ in choices] if "+" in outcome.engine else ()))
        entries.extend(
            {"document_id": row["document_id"], "sha256": outcome.key, "attempt": row["extract_attempts"] + 1,
             "engine": outcome.engine, "pages": outcome.pages, "chars": outcome.chars,
             "seconds": outcome.seconds, "quality": outcome.quality,
             "pages_needing_ocr": needing, "likely_scanned": is_likely_scanned(sum(scans))}
            for row in sha_rows)
    TextRecords(ctx.db).record_extracted(entries, attempts=others, pages=pages)
    documents = sum(len(sha_rows) for sha_rows, _, _, _ in finished)
    result.attempted += documents
    result.extracted += documents
    result.pages += sum(outcome.pages for _, outcome, _, _ in finished)
    result.chars += sum(outcome.chars for _, outcome, _, _ in finished)
    bar.update(documents)


def _extract_held_text(ctx: Context, rows: list, outcome: ExtractOutcome) -> ExtractOutcome:
    """`outcome` with the text the archive already holds under its PDF's name, for a document
    extracted before (an adopted row sent back to have its pages measured: a committed text is
    never rewritten), the workspace's or else the store's. The pages' facts stay this reading's;
    the characters and quality become the kept text's. A document never extracted keeps this
    reading: a file under its name is what an attempt cut short wrote, and is written again."""
    if all(row["extracted_chars"] is None for row in rows):
        return outcome
    held = read_text(ctx.workspace, text_store_name(outcome.key), fetch_into_workspace(ctx))
    if held is None or held == outcome.data:
        return outcome
    text = held.decode("utf-8", "replace")
    log_extract.info("extract %s: the archive holds its text already (%d characters): kept, pages measured",
                     outcome.key[:12], len(text))
    return dataclasses.replace(outcome, data=held, chars=len(text), quality=text_quality(text, min_tokens=3),
                               kept_text=True)


def _extract_reuse_twin(ctx: Context, sha: str, row, twin, result: ExtractResult, bar) -> bool:
    """Applies an extracted twin's figures when its text file is at hand (locally or from the store)."""
    text_path = ctx.workspace / "text" / f"{sha}.txt"
    if not text_path.is_file() and not ctx.mirror.fetch(text_store_name(sha), text_path):
        return False  # nothing to trust: extract again
    ctx.mirror.put(text_store_name(sha), text_path)
    TextRecords(ctx.db).record_extracted([{"document_id": row["document_id"], "sha256": sha, "attempt": row["extract_attempts"] + 1,
                              "engine": f"reused:{twin['document_id']}", "pages": twin["pages"],
                              "chars": twin["extracted_chars"], "seconds": 0.0, "quality": twin["text_quality"],
                              "pages_needing_ocr": twin["pages_needing_ocr"],
                              "extracted_by_ocr": twin["extracted_by_ocr"], "ocr_pages": twin["ocr_pages"],
                              "likely_scanned": bool(twin["likely_scanned"])}])
    result.attempted += 1
    result.extracted += 1
    result.reused += 1
    bar.update(1)
    return True


def _extract_local_pdf(ctx: Context, sha: str, row) -> tuple[str | None, str | None]:
    """The PDF's path in the workspace, fetched from the store if it is missing; or why there is none."""
    relative = row["local_pdf"] or pdf_store_name(sha)
    path = os.path.join(ctx.workspace, relative)
    if os.path.isfile(path):
        return path, None
    # Through the mirror: its lock keeps Drive calls off the checkpointer's thread.
    if not ctx.mirror.fetch(pdf_store_name(sha), path):
        return None, f"PDF missing in the workspace ({relative}) and not in the store"
    log_extract.debug("extract: fetched %s from the store", relative)
    return path, None


@dataclass(frozen=True)
class _ExtractFailure:
    """A PDF's failed chain: its reason (a verdict), whether it is permanent, and the attempts."""
    reason: str
    permanent: bool
    attempts: tuple | list = ()
    message: str = ""

    @classmethod
    def of(cls, reason: str, message: str) -> "_ExtractFailure":
        return cls(reason, False, (), message)

    def error(self) -> str:
        if self.message:
            return self.message
        return "; ".join(f"{attempt.engine} {attempt.outcome}: {attempt.error}" for attempt in self.attempts)


def _extract_record_failure(ctx: Context, rows: list, failure: _ExtractFailure, result: ExtractResult, bar,
                            again: bool = False) -> None:
    """Each engine's attempt to extraction_log, then the documents' failed attempt: a permanent
    verdict spends every attempt (the document leaves the queue with its reason), a transient one
    spends one. `again`: a twin of a PDF that failed earlier in this pass (not parsed again)."""
    db, cfg = ctx.db, ctx.cfg
    if failure.attempts and not again:
        entries = _extract_attempt_entries(rows, list(failure.attempts), None)
    else:
        entries = [{"document_id": row["document_id"], "sha256": row["sha256"], "attempt": row["extract_attempts"] + 1,
                    "engine": ",".join(cfg.EXTRACT_ENGINES), "outcome": failure.reason, "pages": None, "chars": None,
                    "seconds": 0.0, "error": failure.error(), "quality": None} for row in rows]
    with db.transaction():
        TextRecords(db).log_extraction_attempts(entries)
        for row in rows:
            TextRecords(db).mark_extract_failed(row["document_id"], f"extract {failure.reason}: {failure.error()}",
                                   reason=failure.reason if failure.permanent else None,
                                   spend_all=cfg.MAX_EXTRACT_ATTEMPTS if failure.permanent else None)
    result.attempted += len(rows)
    result.failed_attempts += len(rows)
    if failure.permanent:
        result.permanent += len(rows)
        result.exhausted += len(rows)
    else:
        result.exhausted += sum(row["extract_attempts"] + 1 >= cfg.MAX_EXTRACT_ATTEMPTS for row in rows)
    bar.update(len(rows))
