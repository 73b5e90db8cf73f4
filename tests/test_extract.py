"""Extract: text of every downloaded PDF, in worker processes; one PDF's hang or crash fails only itself."""
from __future__ import annotations

import faulthandler
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pypdf
import pytest
from support import put_bytes

from notebook_builder import build
from notebook_builder.cells import c79_extract_engines, c80_extract
from notebook_builder.cells.c00_config import ConfigError, DiskFullError, StoreError
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c17_snapshots import StoreState
from notebook_builder.cells.c78_page_text import (is_likely_scanned, join_page_texts, page_needs_ocr,
                                                  pages_a_kept_text_lacks)
from notebook_builder.cells.c79_extract_engines import ExtractWorkerPool
from notebook_builder.cells.c80_extract import extract
from notebook_builder.simcourt import pdfs

CREATED = "20240101000000Z"


def opinion(number: int, case_number: str | None = None) -> tuple[str, bytes]:
    case_number = case_number or f"2021-SC-{number:06d}"
    return case_number, pdfs.opinion_pdf(seed=number, case_number=case_number, court="Supreme Court",
                                         title=f"Appellant {number} v. Commonwealth", description="Opinion",
                                         filed="2021-05-01", creation_date=CREATED)


@pytest.fixture
def make_ctx(make_context):
    def make(**knobs):
        # One engine unless a test says otherwise: these tests pin the pool and the pass; the chain's
        # own tests are in test_extract_chain.py.
        return make_context(replace={"WORKERS": 2, "EXTRACT_TIMEOUT": 20.0, "EXTRACT_ENGINES": ("pypdf",),
                                     **knobs})
    return make


def add_document(ctx, document_id: str, data: bytes, *, case_number: str = "2021-SC-000000",
                 local: bool = True, in_store: bool = False) -> str:
    """A `downloaded` document whose PDF is in the workspace (and/or the store)."""
    sha = hashlib.sha256(data).hexdigest()
    name = f"pdf_by_hash/{sha}.pdf"
    if local:
        (ctx.workspace / name).write_bytes(data)
    if in_store:
        put_bytes(ctx.store, name, data)
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": document_id, "case_number": case_number}])
    DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=name)
    return sha


def row(ctx, document_id):
    return ctx.db.get_document(document_id)


def log_rows(ctx, document_id):
    return ctx.db.conn.execute("SELECT * FROM extraction_log WHERE document_id = ? ORDER BY log_id",
                               (document_id,)).fetchall()


def text_of(ctx, sha) -> str:
    return (ctx.workspace / "text" / f"{sha}.txt").read_text(encoding="utf-8")


def call_recording_engine(calls_file: Path, behaviour=None):
    """pypdf, but every call appends a line to `calls_file` (works across processes: O_APPEND)."""
    def engine(pdf_path):
        with open(calls_file, "a") as handle:
            handle.write(Path(pdf_path).stem + "\n")
        if behaviour is not None:
            behaviour(pdf_path)
        return c79_extract_engines._extract_pages_pypdf(pdf_path)
    return engine


# ---------------------------------------------------------------- decisions


def test_a_page_needs_ocr_when_it_shows_an_image_and_has_no_text_layer():
    assert page_needs_ocr(0, True, 20) and page_needs_ocr(19, True, 20)
    assert not page_needs_ocr(20, True, 20)          # an image with a text layer: born digital, or OCR'd
    assert not page_needs_ocr(3, False, 20)          # a born-digital page with little text is not a scan
    assert not page_needs_ocr(0, False, 20)          # a blank page
    assert not page_needs_ocr(5, True, 20, image_cover=0.02)   # a seal or a logo on a form
    assert page_needs_ocr(5, True, 20, image_cover=0.9)
    assert page_needs_ocr(0, True, 0)                # threshold 0 still means "no text at all"
    # A court scan under a filing stamp or docketing header: a page-sized image, a few dozen characters.
    assert page_needs_ocr(43, True, 20, image_cover=1.0) and page_needs_ocr(199, True, 20, image_cover=0.95)
    assert not page_needs_ocr(1500, True, 20, image_cover=1.0)    # a scan OCR'd before: its text layer
    assert not page_needs_ocr(150, True, 20, image_cover=0.5)     # a large picture and its caption
    assert is_likely_scanned(1) and not is_likely_scanned(0)


def test_a_page_a_kept_text_lacks_is_one_this_reading_found_characters_on():
    assert pages_a_kept_text_lacks("", [12, 0]) == [True, False]                # v1.2 read nothing
    assert pages_a_kept_text_lacks("FILED\f ", [5, 30]) == [False, True]       # its pages, one empty
    assert pages_a_kept_text_lacks("FILED stamp", [5, 0, 30]) == [True, False, True]   # not its pages


def test_page_texts_join_with_form_feeds_and_blank_pages_give_an_empty_text():
    assert join_page_texts(["a", "b"]) == "a\fb"
    assert join_page_texts(["", " \n", ""]) == ""
    assert join_page_texts([]) == ""


# -------------------------------------------------------------------- stage


def test_opinion_text_holds_its_case_number_locally_and_in_the_store(make_ctx):
    ctx = make_ctx()
    shas = {}
    for number in range(1, 5):
        case_number, data = opinion(number)
        shas[f"doc{number}"] = (add_document(ctx, f"doc{number}", data, case_number=case_number), case_number, data)

    result = extract(ctx)

    assert (result.attempted, result.extracted, result.failed_attempts) == (4, 4, 0)
    for document_id, (sha, case_number, data) in shas.items():
        document = row(ctx, document_id)
        text = text_of(ctx, sha)
        assert document["status"] == "extracted"
        assert case_number in text
        assert document["pages"] == len(pypdf.PdfReader(ctx.workspace / document["local_pdf"]).pages)
        assert document["extracted_chars"] == len(text) > 0
        assert document["likely_scanned"] == 0
        assert document["extract_attempts"] == 1
        assert ctx.store.read_file(f"text/{sha}.txt") == (ctx.workspace / "text" / f"{sha}.txt").read_bytes()
        [logged] = log_rows(ctx, document_id)
        assert (logged["outcome"], logged["attempt"], logged["engine"]) == ("ok", 1, "pypdf")
    assert result.pages == sum(row(ctx, d)["pages"] for d in shas)
    assert WorkQueues(ctx.db).extract_queue_size(ctx.cfg) == 0
    assert extract(ctx).attempted == 0


def test_pdf_without_text_layer_is_extracted_with_zero_chars_and_only_the_scan_likely_scanned(make_ctx):
    ctx = make_ctx()
    scan = add_document(ctx, "scan", pdfs.image_only_pdf(seed=1, creation_date=CREATED))
    blank = add_document(ctx, "blank", pdfs.blank_pdf(seed=2, creation_date=CREATED))

    result = extract(ctx)

    assert (result.extracted, result.failed_attempts) == (2, 0)
    for document_id, sha in (("scan", scan), ("blank", blank)):
        document = row(ctx, document_id)
        assert document["status"] == "extracted"
        assert document["pages"] >= 1
        assert document["extracted_chars"] == 0
        # The scan's page shows an image and has no text layer; the blank page shows nothing.
        assert (document["likely_scanned"], document["pages_needing_ocr"]) == ((1, 1) if sha == scan else (0, 0))
        assert text_of(ctx, sha) == ""
        assert ctx.store.read_file(f"text/{sha}.txt") == b""


def test_an_unparseable_pdf_is_classified_once_and_leaves_the_queue(make_ctx):
    ctx = make_ctx()
    add_document(ctx, "broken", pdfs.unparseable_pdf(seed=3))
    add_document(ctx, "good", opinion(7)[1])

    result = extract(ctx)

    # No engine will read these bytes on another try: one attempt, and every attempt spent.
    assert (result.failed_attempts, result.permanent, result.exhausted) == (1, 1, 1)
    document = row(ctx, "broken")
    assert (document["status"], document["extract_attempts"]) == ("downloaded", ctx.cfg.MAX_EXTRACT_ATTEMPTS)
    assert document["extract_failure"] == "unparseable"
    assert document["last_error"].startswith("extract unparseable:")
    assert [(r["attempt"], r["outcome"]) for r in log_rows(ctx, "broken")] == [(1, "unparseable")]
    assert WorkQueues(ctx.db).extract_queue_size(ctx.cfg) == 0
    assert [r["document_id"] for r in WorkQueues(ctx.db).extraction_failures(ctx.cfg)] == ["broken"]
    assert extract(ctx).attempted == 0  # a later run does not try it again
    assert row(ctx, "good")["status"] == "extracted"


def test_a_failure_left_by_an_earlier_run_is_retried_once_more_per_pass(make_ctx):
    ctx = make_ctx(MAX_EXTRACT_ATTEMPTS=1)
    add_document(ctx, "broken", pdfs.unparseable_pdf(seed=3))
    assert extract(ctx).failed_attempts == 1
    wider = make_ctx(MAX_EXTRACT_ATTEMPTS=2)
    assert extract(wider).failed_attempts == 1
    assert row(wider, "broken")["extract_attempts"] == 2


def test_a_hanging_pdf_is_killed_at_the_time_limit_and_the_rest_of_the_batch_completes(make_ctx, monkeypatch):
    ctx = make_ctx(EXTRACT_TIMEOUT=1.0, MAX_EXTRACT_ATTEMPTS=1)
    hung_sha = add_document(ctx, "hangs", opinion(100)[1])
    for number in range(1, 7):
        add_document(ctx, f"doc{number}", opinion(number)[1])

    def engine(pdf_path):
        if hung_sha in pdf_path:
            time.sleep(3600)
        return c79_extract_engines._extract_pages_pypdf(pdf_path)
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", engine)

    started = time.monotonic()
    result = extract(ctx)

    assert time.monotonic() - started < 10
    assert (result.extracted, result.failed_attempts) == (6, 1)
    assert row(ctx, "hangs")["status"] == "downloaded"
    assert row(ctx, "hangs")["extract_attempts"] == 1
    [logged] = log_rows(ctx, "hangs")
    assert logged["outcome"] == "timeout"
    assert logged["seconds"] >= 1.0
    assert all(row(ctx, f"doc{n}")["status"] == "extracted" for n in range(1, 7))


def test_a_crashing_worker_fails_only_its_own_pdf(make_ctx, monkeypatch):
    ctx = make_ctx(MAX_EXTRACT_ATTEMPTS=1)
    segfault_sha = add_document(ctx, "segfaults", opinion(200)[1])
    exit_sha = add_document(ctx, "exits", opinion(201)[1])
    for number in range(1, 6):
        add_document(ctx, f"doc{number}", opinion(number)[1])

    def engine(pdf_path):
        if segfault_sha in pdf_path:
            faulthandler.disable()  # pytest's handler would print the worker's stack
            os.kill(os.getpid(), signal.SIGSEGV)
        if exit_sha in pdf_path:
            os._exit(3)
        return c79_extract_engines._extract_pages_pypdf(pdf_path)
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", engine)

    result = extract(ctx)

    assert (result.extracted, result.failed_attempts) == (5, 2)
    [segfault] = log_rows(ctx, "segfaults")
    [exited] = log_rows(ctx, "exits")
    assert segfault["outcome"] == exited["outcome"] == "crash"
    assert "SIGSEGV" in segfault["error"]
    assert "status 3" in exited["error"]
    assert all(row(ctx, f"doc{n}")["status"] == "extracted" for n in range(1, 6))


def test_documents_sharing_a_sha256_are_extracted_once(make_ctx, monkeypatch, tmp_path):
    ctx = make_ctx()
    _, shared = opinion(1)
    shared_sha = add_document(ctx, "copy1", shared)
    add_document(ctx, "copy2", shared)
    add_document(ctx, "copy3", shared)
    other_sha = add_document(ctx, "other", opinion(2)[1])
    calls = tmp_path / "calls.txt"
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", call_recording_engine(calls))

    result = extract(ctx)

    assert sorted(calls.read_text().split()) == sorted([shared_sha, other_sha])
    assert (result.pdfs, result.extracted) == (2, 4)
    copies = [row(ctx, f"copy{n}") for n in (1, 2, 3)]
    assert {(c["status"], c["pages"], c["extracted_chars"]) for c in copies} == {
        ("extracted", copies[0]["pages"], copies[0]["extracted_chars"])}
    assert result.pages == copies[0]["pages"] + row(ctx, "other")["pages"]


def test_a_sha256_in_several_batches_is_extracted_once_and_batches_follow_without_a_pause(
        make_ctx, monkeypatch, tmp_path):
    ctx = make_ctx(EXTRACT_BATCH=2, WORKERS=1)
    _, shared = opinion(1)
    shared_sha = add_document(ctx, "copy1", shared)
    others = [add_document(ctx, f"other{n}", opinion(10 + n)[1]) for n in range(3)]
    add_document(ctx, "copy2", shared)           # a later batch, while copy1's PDF may still be out
    calls = tmp_path / "calls.txt"
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", call_recording_engine(calls))
    in_flight = []      # at each outcome: that PDF and those still out with the worker
    original_run = c80_extract.ExtractWorkerPool.run

    def run(pool, tasks, should_stop=lambda: False, followups=None):
        for outcome in original_run(pool, tasks, should_stop, followups):
            in_flight.append({outcome.key} | {key for slot in pool._slots for key, *_ in slot.tasks})
            yield outcome
    monkeypatch.setattr(c80_extract.ExtractWorkerPool, "run", run)

    result = extract(ctx)

    assert sorted(calls.read_text().split()) == sorted([shared_sha, *others])
    assert (result.pdfs, result.extracted, result.reused) == (4, 5, 0)
    assert row(ctx, "copy1")["pages"] == row(ctx, "copy2")["pages"] > 0
    assert [r["outcome"] for r in log_rows(ctx, "copy2")] == ["ok"]
    # the worker got the second batch's PDF while the first batch's last one was still out
    assert any({others[0], others[1]} <= keys for keys in in_flight)


def test_a_later_document_with_an_extracted_sha256_reuses_its_text(make_ctx, monkeypatch, tmp_path):
    ctx = make_ctx()
    _, data = opinion(5)
    sha = add_document(ctx, "first", data)
    extract(ctx)
    add_document(ctx, "later", data)
    (ctx.workspace / "text" / f"{sha}.txt").unlink()  # a fresh runtime: only the store has it
    calls = tmp_path / "calls.txt"
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", call_recording_engine(calls))

    result = extract(ctx)

    assert not calls.exists()
    assert (result.extracted, result.reused, result.pdfs) == (1, 1, 0)
    first, later = row(ctx, "first"), row(ctx, "later")
    assert (later["status"], later["pages"], later["extracted_chars"]) == (
        "extracted", first["pages"], first["extracted_chars"])
    assert text_of(ctx, sha).encode() == ctx.store.read_file(f"text/{sha}.txt")
    assert log_rows(ctx, "later")[0]["engine"] == "reused:first"


def test_a_pdf_missing_locally_is_fetched_from_the_store(make_ctx):
    ctx = make_ctx()
    case_number, data = opinion(9)
    sha = add_document(ctx, "remote", data, case_number=case_number, local=False, in_store=True)

    assert extract(ctx).extracted == 1
    assert case_number in text_of(ctx, sha)
    assert (ctx.workspace / f"pdf_by_hash/{sha}.pdf").read_bytes() == data


def test_a_pdf_missing_locally_and_in_the_store_is_a_failed_attempt(make_ctx):
    ctx = make_ctx(MAX_EXTRACT_ATTEMPTS=1)
    add_document(ctx, "lost", opinion(10)[1], local=False)

    result = extract(ctx)

    assert (result.extracted, result.failed_attempts) == (0, 1)
    [logged] = log_rows(ctx, "lost")
    assert logged["outcome"] == "error" and "missing" in logged["error"]


def test_pypdfium2_engine_gives_the_same_case_number_text(make_ctx, tmp_path):
    ctx = make_ctx(EXTRACT_ENGINES=("pypdfium2",))
    documents = {}
    for number in range(1, 4):
        case_number, data = opinion(number)
        documents[add_document(ctx, f"doc{number}", data, case_number=case_number)] = (case_number, data)

    result = extract(ctx)

    assert (result.extracted, result.engine) == (3, "pypdfium2")
    for sha, (case_number, data) in documents.items():
        text = text_of(ctx, sha)
        assert case_number in text
        pypdf_text = join_page_texts([text for text, _ in c79_extract_engines._extract_pages_pypdf(
            str(ctx.workspace / f"pdf_by_hash/{sha}.pdf"))])
        assert text.split() == pypdf_text.split()
        assert "\r" not in text


def test_a_full_disk_stops_the_stage_without_counting_an_attempt(make_ctx, monkeypatch):
    ctx = make_ctx()
    add_document(ctx, "doc", opinion(1)[1])

    def disk_full(path, text):
        raise DiskFullError(f"workspace disk is full writing {path}")
    monkeypatch.setattr(c80_extract, "atomic_write", disk_full)

    with pytest.raises(DiskFullError):
        extract(ctx)
    assert row(ctx, "doc")["extract_attempts"] == 0


def test_a_stop_request_stops_before_the_next_batch(make_ctx, monkeypatch):
    ctx = make_ctx(EXTRACT_BATCH=2, WORKERS=1)
    for number in range(1, 6):
        add_document(ctx, f"doc{number}", opinion(number)[1])
    original = WorkQueues.extract_queue
    batches = []

    def extract_queue(self, cfg, limit, after_rowid=0):
        if batches:
            ctx.clock.request_stop("signal")
        rows = original(self, cfg, limit, after_rowid)
        batches.append(len(rows))
        return rows
    monkeypatch.setattr(WorkQueues, "extract_queue", extract_queue)

    result = extract(ctx)

    assert result.stopped
    assert 2 <= result.extracted < 5
    assert WorkQueues(ctx.db).extract_queue_size(ctx.cfg) == 5 - result.extracted


def test_the_pool_survives_a_stream_of_faults_and_keeps_its_size(tmp_path, monkeypatch):
    paths = []
    for number in range(6):
        path = tmp_path / f"{number}.pdf"
        path.write_bytes(opinion(number)[1])
        paths.append(path)

    def engine(pdf_path):
        if pdf_path.endswith(("1.pdf", "3.pdf")):
            os._exit(1)
        return ["x"]
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "faulty", engine)

    with ExtractWorkerPool(2, "faulty", timeout=10) as pool:
        tasks = [(str(n), str(p)) for n, p in enumerate(paths)]
        outcomes = [(o.key, o.outcome) for o in pool.run(tasks)]
        assert pool.replaced == 2
        assert sum(slot.process.is_alive() for slot in pool._slots) == 2
    # one outcome per task: the tasks queued behind a crashed worker ran again elsewhere
    assert sorted(outcomes) == [("0", "ok"), ("1", "crash"), ("2", "ok"), ("3", "crash"), ("4", "ok"), ("5", "ok")]


NOTEBOOK_DRIVER = textwrap.dedent("""
    import json, sys, hashlib
    from pathlib import Path
    for name, code in json.load(open(sys.argv[1])):
        exec(compile(code, name, "exec"), globals())

    def notebook_engine(pdf_path):  # defined in __main__, as a notebook cell would define it
        if "crash" in Path(pdf_path).read_bytes().decode("latin-1"):
            import os; os._exit(7)
        return ["from __main__: " + Path(pdf_path).read_bytes().decode("latin-1")]
    EXTRACT_ENGINE_FUNCTIONS["notebook"] = notebook_engine

    cfg = load_config(env={"KY_WORKSPACE": sys.argv[2] + "/ws", "KY_STORE": sys.argv[2] + "/store",
                           "KY_PROGRESS": "0"}).replace(EXTRACT_ENGINES=("notebook",), WORKERS=2)
    ctx = open_context(cfg)
    db = ctx.open_database()
    for document_id in ("a", "b", "crash"):
        data = ("%PDF- " + document_id).encode()
        sha = hashlib.sha256(data).hexdigest()
        (ctx.workspace / "pdf_by_hash" / (sha + ".pdf")).write_bytes(data)
        DiscoveryState(db).upsert_discovered([{"document_id": document_id}])
        DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=f"pdf_by_hash/{sha}.pdf")
    result = extract(ctx)
    print(json.dumps({"worker_module": _extract_worker_main.__module__,
                      "extracted": result.extracted, "failed": result.failed_attempts}))
""")


def test_workers_run_functions_defined_in_a_notebooks_main_namespace(tmp_path):
    # The cells up to the extract stage, the order the notebook runs them in (drive_store is not needed).
    cells = [(module.name, module.code) for module in build.load_cell_modules()
             if module.name[:1] == "c" and module.name[1:3].isdigit() and module.name <= "c80_extract"]
    assert cells[-1][0] == "c80_extract"
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    (tmp_path / "driver.py").write_text(NOTEBOOK_DRIVER)

    completed = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "cells.json"),
                                str(tmp_path)], capture_output=True, text=True, timeout=120,
                               cwd=tmp_path)

    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {"worker_module": "__main__", "extracted": 2, "failed": 3}


def test_a_store_outage_leaves_the_text_queued_for_the_store_and_the_document_extracted(make_ctx, monkeypatch):
    ctx = make_ctx()
    sha = add_document(ctx, "doc", opinion(3)[1])

    def outage(name, local_path):
        raise StoreError("store unreachable")
    monkeypatch.setattr(ctx.store, "upload_file", outage)

    assert extract(ctx).extracted == 1
    assert row(ctx, "doc")["status"] == "extracted"
    assert [r["name"] for r in StoreState(ctx.db).store_pending()] == [f"text/{sha}.txt"]
    assert ctx.mirror.lagging


def test_an_engine_that_is_not_installed_is_a_config_error_before_any_attempt(make_ctx, monkeypatch):
    ctx = make_ctx(EXTRACT_ENGINES=("pypdfium2",))
    add_document(ctx, "doc", opinion(1)[1])
    monkeypatch.setitem(c79_extract_engines._EXTRACT_ENGINE_PACKAGES, "pypdfium2", "pypdfium2_not_installed")

    with pytest.raises(ConfigError, match="pip install"):
        extract(ctx)
    assert row(ctx, "doc")["extract_attempts"] == 0


def test_a_saved_group_is_committed_once_even_when_saved_again(make_ctx):
    ctx = make_ctx()
    sha = add_document(ctx, "doc", opinion(5)[1])
    data = b"2021-SC-000000 opinion"
    outcome = c80_extract.ExtractOutcome(sha, "ok", pages=1, chars=len(data), data=data)
    result = c80_extract.ExtractResult()
    with c80_extract.progress(ctx.cfg, 1, "test") as bar:
        extract_pass = c80_extract._ExtractPass(ctx, result, bar)
        extract_pass.waiting[sha] = [row(ctx, "doc")]
        extract_pass.finished.append((extract_pass.waiting[sha], outcome, [outcome], []))
        extract_pass.save()
        extract_pass.save()       # as the pass's `finally` would
    assert len(log_rows(ctx, "doc")) == 1 and result.extracted == 1
    assert row(ctx, "doc")["status"] == "extracted"
    assert ctx.store.read_file(f"text/{sha}.txt") == data
    assert extract_pass.waiting == {}


def _sleepy_engine(pdf_path):
    """'<seconds>.pdf' sleeps that long and answers its name."""
    time.sleep(float(Path(pdf_path).stem))
    return [Path(pdf_path).stem]


def test_an_answer_in_time_is_kept_though_the_consumer_was_slow_to_come_back(monkeypatch):
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "sleepy", _sleepy_engine)
    outcomes = {}
    with ExtractWorkerPool(2, "sleepy", timeout=1.5, depth=1) as pool:
        for outcome in pool.run([("fast", "/x/0.05.pdf"), ("mid", "/x/1.0.pdf")]):
            outcomes[outcome.key] = outcome.outcome
            if outcome.key == "fast":
                time.sleep(2.0)          # a slow commit: "mid" answers meanwhile, within its limit
    assert outcomes == {"fast": "ok", "mid": "ok"} and pool.replaced == 0


def test_a_time_limit_runs_from_the_send_when_the_worker_waited_for_work(monkeypatch):
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "sleepy", _sleepy_engine)

    def tasks():
        yield "first", "/x/0.05.pdf"
        time.sleep(1.5)                  # the supervisor is busy making the next task (a store fetch)
        yield "second", "/x/0.8.pdf"
    with ExtractWorkerPool(1, "sleepy", timeout=1.2) as pool:
        outcomes = [(outcome.key, outcome.outcome) for outcome in pool.run(tasks())]
    assert outcomes == [("first", "ok"), ("second", "ok")]


def test_a_worker_killed_while_idle_is_replaced_and_no_pdf_is_blamed(monkeypatch):
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "sleepy", _sleepy_engine)
    with ExtractWorkerPool(2, "sleepy", timeout=10, depth=1) as pool:
        selects = []
        real_select = pool._selector.select
        monkeypatch.setattr(pool._selector, "select", lambda timeout: selects.append(timeout) or real_select(timeout))
        idle = pool._slots[1].process

        def tasks():
            yield "long", "/x/1.0.pdf"
            idle.kill()                  # the OOM killer takes the other worker while it waits for work
            idle.join()
            yield "after", "/x/0.05.pdf"
        outcomes = [(outcome.key, outcome.outcome) for outcome in pool.run(tasks())]
        assert sorted(outcomes) == [("after", "ok"), ("long", "ok")]
        assert pool.replaced == 1 and all(slot.process.is_alive() for slot in pool._slots)
        assert len(selects) < 20         # no busy loop on the dead worker's ready sentinel


def test_a_failed_pdf_held_by_several_documents_is_attempted_once_per_pass(make_ctx, monkeypatch, tmp_path):
    ctx = make_ctx(EXTRACT_TIMEOUT=1.0, MAX_EXTRACT_ATTEMPTS=1, WORKERS=1)
    _, shared = opinion(300)
    hung_sha = add_document(ctx, "hangs1", shared)
    for number in range(1, 4):
        add_document(ctx, f"doc{number}", opinion(number)[1])
    add_document(ctx, "hangs2", shared)          # same PDF, later in the batch
    calls = tmp_path / "calls.txt"

    def hang(pdf_path):
        if hung_sha in pdf_path:
            time.sleep(3600)
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "pypdf", call_recording_engine(calls, hang))

    result = extract(ctx)

    assert calls.read_text().split().count(hung_sha) == 1
    assert (result.extracted, result.failed_attempts) == (3, 2)
    for document_id in ("hangs1", "hangs2"):
        assert [r["outcome"] for r in log_rows(ctx, document_id)] == ["timeout"]
        assert row(ctx, document_id)["extract_attempts"] == 1


def test_after_a_stop_the_pool_takes_no_more_tasks(monkeypatch):
    monkeypatch.setitem(c79_extract_engines.EXTRACT_ENGINE_FUNCTIONS, "sleepy", _sleepy_engine)
    taken, stop = [], []

    def tasks():
        for number in range(20):
            taken.append(number)
            yield str(number), "/x/0.05.pdf"
    with ExtractWorkerPool(2, "sleepy", timeout=10) as pool:
        outcomes = []
        for outcome in pool.run(tasks(), should_stop=lambda: bool(stop)):
            outcomes.append(outcome.key)
            stop.append(True)
    assert len(taken) == 4 and sorted(outcomes) == ["0", "1", "2", "3"]   # what the two workers held
