"""Download: every court fault ends in the right row and the right store, politely and resumably."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from support import (OVERSIZE_BYTES, RecordingClock, discovered_rows, download_context, download_court,
                     expected_download_row, mark_extracted, sha256)

from notebook_builder.cells.c00_config import DiskFullError, RunClock
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c25_court import KENTUCKY
from notebook_builder.cells.c30_client import CourtHealth
from notebook_builder.cells.c39_checkpoint import Checkpointer
from notebook_builder.cells.c70_download import download, recover
from notebook_builder.simcourt import FAULTS, SimCourt


def fault_sample(court: SimCourt, per_fault: int = 2) -> list:
    """A few documents of every fault, the originals of the duplicates included."""
    chosen = {}
    for fault in FAULTS:
        for document in court.documents_with(fault)[:per_fault]:
            chosen[document.document_id] = document
            if document.duplicate_of:
                chosen.setdefault(document.duplicate_of, court.document(document.duplicate_of))
    return list(chosen.values())


@pytest.fixture(scope="module")
def court():
    with download_court() as running:
        yield running


@pytest.fixture
def fresh_court():
    """A court no other test has asked: its per-document fault counters start at zero."""
    with download_court() as running:
        yield running


@pytest.fixture(scope="module")
def faults_run(court, tmp_path_factory):
    """One download over a sample holding every fault; the tests below read its outcome."""
    root = tmp_path_factory.mktemp("faults")
    documents = fault_sample(court)
    ctx = download_context(court, root)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(documents))
    result = download(ctx)
    yield ctx, documents, result
    ctx.close()


# ------------------------------------------------------------- outcomes


def test_every_fault_ends_in_the_expected_row(court, faults_run):
    ctx, documents, result = faults_run
    assert {d.fault for d in documents} == set(FAULTS)
    wrong = {}
    for document in documents:
        row = ctx.db.get_document(document.document_id)
        actual = (row["status"], row["http_status"], row["attempts"])
        expected = expected_download_row(court, document, ctx.cfg.MAX_ATTEMPTS)
        if actual != expected:
            wrong[document.fault] = (actual, expected, row["last_error"])
    assert not wrong
    assert result.left == 0 and WorkQueues(ctx.db).download_queue_size(ctx.cfg) == 0


def test_store_holds_exactly_the_court_pdfs_under_their_hashes(court, faults_run):
    ctx, documents, _ = faults_run
    expected = {}
    for document in documents:
        data = court.pdf_bytes(document.document_id)
        row = ctx.db.get_document(document.document_id)
        if row["status"] == "downloaded":
            assert row["sha256"] == sha256(data) and row["size_bytes"] == len(data)
            assert row["local_pdf"] == f"pdf_by_hash/{row['sha256']}.pdf"
            expected[row["local_pdf"]] = data
    stored = {name: ctx.store.read_file(name) for name in ctx.store.list_dir("pdf_by_hash")}
    assert stored == expected
    local = {f"pdf_by_hash/{p.name}": p.read_bytes() for p in ctx.path("pdf_by_hash").iterdir()}
    assert local == expected


def test_a_torn_body_or_an_html_page_is_never_promoted_or_uploaded(court, faults_run):
    ctx, documents, _ = faults_run
    torn = [d for d in documents if d.fault in ("truncated", "html")]
    assert torn and all(court.requests_for(d.document_id) == d.transient_failures + 1 for d in torn)
    pdf_uploads = {n: b for n, b in ctx.store.uploaded_bytes.items() if n.startswith("pdf_by_hash/")}
    assert pdf_uploads
    for name, blobs in pdf_uploads.items():
        for data in blobs:
            assert data.startswith(b"%PDF-") and name == f"pdf_by_hash/{sha256(data)}.pdf"
    for path in ctx.path("pdf_by_hash").iterdir():
        assert path.name == f"{sha256(path.read_bytes())}.pdf"
    assert list(ctx.path("tmp").iterdir()) == []


def test_an_oversized_body_is_not_read(court, faults_run):
    _, documents, _ = faults_run
    oversized = [d for d in documents if d.fault == "oversized"]
    lying = [d for d in documents if d.fault == "lying_length"]
    assert oversized and lying
    for document in oversized:   # Content-Length said so: the connection is closed unread
        assert court.body_bytes_sent(document.document_id) < OVERSIZE_BYTES // 16
    for document in lying:       # no honest length: reading stops past the cap (kernel buffers take a few MB more)
        assert court.body_bytes_sent(document.document_id) < (OVERSIZE_BYTES + 1024 * 1024) // 2


def test_duplicate_content_is_stored_once_and_uploaded_once(court, faults_run):
    ctx, documents, result = faults_run
    duplicates = [d for d in documents if d.fault == "duplicate"]
    assert duplicates
    for document in duplicates:
        row = ctx.db.get_document(document.document_id)
        original = ctx.db.get_document(document.duplicate_of)
        assert row["sha256"] == original["sha256"] and row["local_pdf"] == original["local_pdf"]
        assert ctx.store.uploads[row["local_pdf"]] == 1
    assert max(ctx.store.uploads[name] for name in ctx.store.list_dir("pdf_by_hash")) == 1
    assert result.duplicates >= len(duplicates)


def test_exactly_one_request_per_successful_attempt_no_head(court, faults_run):
    ctx, documents, result = faults_run
    requests_sent = sum(court.requests_for(d.document_id) for d in documents)
    attempts = sum(ctx.db.get_document(d.document_id)["attempts"] for d in documents)
    assert requests_sent == attempts
    # A 404 is asked of the other download path too (here it is not served: 404), in the same attempt.
    missing = [d for d in documents if d.fault == "http_404"]
    assert missing and result.other_path_requests == court.endpoint_requests["download_site"] == len(missing)
    assert result.requests == attempts + len(missing)
    ok = [d for d in documents if d.fault == "ok"]
    assert ok and all(court.requests_for(d.document_id) == 1 for d in ok)


def test_status_json_carries_the_download_heartbeat(faults_run):
    ctx, _, result = faults_run
    status = json.loads(ctx.path("status.json").read_text())
    assert status["download"]["requests"] == result.requests
    assert status["queues"]["download"] == 0
    assert json.loads(ctx.store.read_file("status.json"))["download"] == status["download"]


# ------------------------------------------------------------ backoff


def _download_alone(court, root, document, **extra):
    clock = RecordingClock()
    ctx = download_context(court, root, clock=clock, **extra)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows([document]))
    download(ctx)
    row = ctx.db.get_document(document.document_id)
    ctx.close()
    return row, clock.sleeps


def test_transient_errors_back_off_exponentially_up_to_the_cap(fresh_court, tmp_path):
    always = fresh_court.documents_with("always_503")[0]
    row, sleeps = _download_alone(fresh_court, tmp_path, always, KY_MAX_ATTEMPTS="5")
    assert (row["status"], row["http_status"], row["attempts"]) == ("failed", 503, 5)
    # retry_delay: base after the first failed attempt, doubling up to the cap; none after the last.
    assert sleeps == pytest.approx([0.01, 0.02, 0.04, 0.05])
    assert fresh_court.requests_for(always.document_id) == 5


def test_retry_after_is_honoured(fresh_court, tmp_path):
    limited = fresh_court.documents_with("rate_limited")[0]
    row, sleeps = _download_alone(fresh_court, tmp_path, limited)
    assert (row["status"], row["attempts"]) == ("downloaded", limited.transient_failures + 1)
    # The court's Retry-After ("1", then an HTTP-date up to a second ahead) wins over our 0.05 s cap.
    assert len(sleeps) == limited.transient_failures and sleeps[0] == 1.0, sleeps
    assert all(0.05 <= sleep <= 1.0 for sleep in sleeps), sleeps


def test_a_permanent_failure_is_not_backed_off(fresh_court, tmp_path):
    restricted = fresh_court.documents_with("http_403")[0]
    row, sleeps = _download_alone(fresh_court, tmp_path, restricted)
    assert (row["status"], row["http_status"], row["attempts"]) == ("failed", 403, 1)
    assert sleeps == []


# ------------------------------------------------------- across runs


def test_a_permanent_failure_is_requested_once_across_runs(fresh_court, tmp_path):
    permanent = [fresh_court.documents_with(fault)[-1] for fault in ("http_401", "http_404", "oversized")]
    for _ in range(3):
        ctx = download_context(fresh_court, tmp_path)
        DiscoveryState(ctx.db).upsert_discovered(discovered_rows(permanent))
        download(ctx)
        ctx.close()
    assert [fresh_court.requests_for(d.document_id) for d in permanent] == [1, 1, 1]


def test_retry_hard_asks_again_for_a_permanent_failure(fresh_court, tmp_path):
    gone = fresh_court.documents_with("http_404")[-2]
    before = fresh_court.requests_for(gone.document_id)
    ctx = download_context(fresh_court, tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows([gone]))
    download(ctx)
    assert WorkQueues(ctx.db).forgive_failures() == 1
    download(ctx)
    row = ctx.db.get_document(gone.document_id)
    assert (row["status"], row["http_status"], row["attempts"]) == ("failed", 404, 1)
    assert fresh_court.requests_for(gone.document_id) == before + 2


def test_dry_run_sends_no_request(fresh_court, tmp_path):
    sample = fresh_court.documents_with("ok")[:5]
    sent = fresh_court.download_requests
    ctx = download_context(fresh_court, tmp_path, KY_DRY="1")
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(sample))
    result = download(ctx)
    assert result.dry_run and result.queued == result.left == 5
    assert fresh_court.download_requests == sent
    assert WorkQueues(ctx.db).status_counts()["discovered"] == 5


def test_a_budget_stop_is_clean_and_the_next_run_finishes(fresh_court, tmp_path):
    # Rate-limited documents sleep the fresh_court's Retry-After (1 s) on the real clock: the budget ends mid-queue.
    sample = fresh_court.documents_with("rate_limited")[:6] + fresh_court.documents_with("ok")[:20]
    clock = RunClock(1.5, 0.0)
    ctx = download_context(fresh_court, tmp_path, clock=clock, KY_CHECKPOINT_SECONDS="0.3")
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(sample))
    with Checkpointer(ctx):  # as run_pipeline wraps every phase
        first = download(ctx)
    assert first.stopped == "budget" and first.left > 0
    assert list(ctx.path("tmp").iterdir()) == []
    for row in DownloadRecords(ctx.db).documents_claiming_files():
        assert ctx.path(row["local_pdf"]).is_file()
    assert ctx.store.list_dir("db/ky_court")   # the background checkpoint ran while downloads committed
    ctx.close()
    ctx = download_context(fresh_court, tmp_path)
    second = download(ctx)
    assert second.left == 0 and WorkQueues(ctx.db).status_counts()["downloaded"] == len(sample)


# ------------------------------------------------------------- recover


def test_recover_removes_parts_and_reverts_rows_whose_pdf_is_nowhere(fresh_court, tmp_path):
    ok = fresh_court.documents_with("ok")[:4]
    ctx = download_context(fresh_court, tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(ok))
    download(ctx)
    rows = [ctx.db.get_document(d.document_id) for d in ok]
    local_only, store_only, nowhere, extracted_nowhere = rows
    ctx.path("tmp", ).joinpath(f"{ok[0].document_id}.part").write_bytes(b"%PDF-torn")
    store_root = tmp_path / "store"
    (store_root / local_only["local_pdf"]).unlink()
    ctx.path(store_only["local_pdf"]).unlink()
    for row in (nowhere, extracted_nowhere):
        ctx.path(row["local_pdf"]).unlink()
        (store_root / row["local_pdf"]).unlink()
    mark_extracted(ctx.db, extracted_nowhere["document_id"], pages=1, extracted_chars=10, likely_scanned=False)
    result = recover(ctx)
    assert (result.parts_removed, result.reverted, result.store_only) == (1, 2, 1)
    statuses = [ctx.db.get_document(d.document_id)["status"] for d in ok]
    assert statuses == ["downloaded", "downloaded", "discovered", "discovered"]
    assert list(ctx.path("tmp").iterdir()) == []
    again = download(ctx)   # the reverted two are fetched again
    assert again.downloaded == 2 and recover(ctx).healed == 0


@pytest.mark.parametrize("count", [1, 20])
def test_a_full_disk_removes_the_parts_and_stops_promptly_with_no_false_claim(fresh_court, tmp_path,
                                                                                monkeypatch, count):
    from notebook_builder.cells.c70_download import _DOWNLOAD_GROUP
    sample = fresh_court.documents_with("ok")[30:30 + count]
    ctx = download_context(fresh_court, tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(sample))

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    from notebook_builder.cells import c05_durable
    monkeypatch.setattr(os, "fsync", no_space)
    monkeypatch.setattr(c05_durable, "_syncfs", no_space)     # a group's one flush fails alike
    with pytest.raises(DiskFullError):
        download(ctx)
    monkeypatch.undo()
    assert list(ctx.path("tmp").iterdir()) == [] and list(ctx.path("pdf_by_hash").iterdir()) == []
    assert WorkQueues(ctx.db).status_counts()["discovered"] == count
    # The error surfaces as the first group is finished: only that group's documents were sent.
    assert sum(fresh_court.requests_for(d.document_id) for d in sample) <= _DOWNLOAD_GROUP
    ctx.close()


class _ShortBodyResponse:
    """A 200 that announces more bytes than it sends, with no read error (urllib3 may not raise)."""
    status_code = 200

    def __init__(self, body: bytes, announced: int):
        from requests.structures import CaseInsensitiveDict
        self.headers = CaseInsensitiveDict({"Content-Type": "application/pdf", "Content-Length": str(announced)})
        self._body = body

    def iter_content(self, chunk_size):
        yield self._body

    def close(self):
        pass


class _ShortBodyClient:
    court = KENTUCKY

    def __init__(self, data: bytes):
        self.data = data
        self.health = CourtHealth(down_seconds=3600, down_failures=100)

    def pace_download(self):
        pass

    def backoff(self, attempts, retry_after, waiting_for):
        pass

    def download_response(self, document_id, *, pace=True, path="api"):
        return _ShortBodyResponse(self.data[:len(self.data) // 2], len(self.data))


def test_a_body_shorter_than_its_content_length_is_transient_and_never_promoted(court, tmp_path):
    document = court.documents_with("ok")[40]
    ctx = download_context(court, tmp_path)
    ctx.client = _ShortBodyClient(court.pdf_bytes(document.document_id))
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows([document]))
    download(ctx)
    row = ctx.db.get_document(document.document_id)
    assert (row["status"], row["attempts"]) == ("failed", ctx.cfg.MAX_ATTEMPTS)
    assert row["last_error"].startswith("transient") and "truncated" in row["last_error"]
    assert list(ctx.path("pdf_by_hash").iterdir()) == [] and list(ctx.path("tmp").iterdir()) == []
    assert ctx.store.list_dir("pdf_by_hash") == []


# ------------------------------------------------- pacing, limit, groups


class StopWhilePacing(RecordingClock):
    """The stop arrives during the first pacing pause."""

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.request_stop("SIGTERM")
        return False


def test_a_stop_during_the_pacing_pause_records_no_attempt_and_sends_nothing(fresh_court, tmp_path):
    document = fresh_court.documents_with("ok")[0]
    clock = StopWhilePacing()
    ctx = download_context(fresh_court, tmp_path, clock=clock, KY_PACING="1")
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows([document]))
    result = download(ctx)
    row = ctx.db.get_document(document.document_id)
    assert clock.sleeps and result.stopped == "SIGTERM"
    assert (row["status"], row["attempts"], result.requests, result.documents) == ("discovered", 0, 0, 0)
    assert fresh_court.requests_for(document.document_id) == 0
    ctx.close()


def test_download_limit_stops_after_that_many_documents_taken(fresh_court, tmp_path):
    sample = fresh_court.documents_with("ok")[:10]
    ctx = download_context(fresh_court, tmp_path, KY_DOWNLOAD_LIMIT="4", KY_DOWNLOAD_BATCH="3")
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(sample))
    result = download(ctx)
    assert (result.stopped, result.documents, result.downloaded, result.left) == ("limit", 4, 4, 6)
    assert sum(fresh_court.requests_for(d.document_id) for d in sample) == 4
    assert WorkQueues(ctx.db).status_counts()["downloaded"] == 4
    ctx.close()


class _InterruptingClient:
    """The real client, until the n-th download raises KeyboardInterrupt (a Ctrl-C mid-request)."""

    def __init__(self, client, interrupt_at: int):
        self.client, self.interrupt_at, self.sent = client, interrupt_at, 0
        self.health, self.court = client.health, client.court

    def pace_download(self):
        self.client.pace_download()

    def download_response(self, document_id, *, pace=True, path="api"):
        self.sent += 1
        if self.sent == self.interrupt_at:
            raise KeyboardInterrupt
        return self.client.download_response(document_id, pace=pace)


def test_an_exception_in_the_main_loop_finishes_what_was_fetched(fresh_court, tmp_path):
    from notebook_builder.cells.c30_client import CourtClient
    sample = fresh_court.documents_with("ok")[70:80]
    ctx = download_context(fresh_court, tmp_path)
    ctx.client = _InterruptingClient(CourtClient(ctx.cfg, ctx.clock), interrupt_at=6)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(sample))
    with pytest.raises(KeyboardInterrupt):
        download(ctx)
    assert list(ctx.path("tmp").iterdir()) == []
    claimed = list(DownloadRecords(ctx.db).documents_claiming_files())
    assert len(claimed) == 5   # fetched before the interrupt: all finished, none lost
    for row in claimed:
        assert ctx.path(row["local_pdf"]).is_file() and ctx.store.exists(row["local_pdf"])
    ctx.close()


def _record_opens(monkeypatch, module) -> list[tuple[str, str]]:
    """(where, file name) of every file the download module opens with open(): where is "fetch"
    while a request's body is read (`_download_fetch`), else "finish"."""
    import builtins
    opened, where = [], ["finish"]
    fetch = module._download_fetch

    def recording_fetch(*args, **kwargs):
        where[0] = "fetch"
        try:
            return fetch(*args, **kwargs)
        finally:
            where[0] = "finish"

    def recording_open(path, *args, **kwargs):
        opened.append((where[0], Path(path).name))
        return builtins.open(path, *args, **kwargs)
    monkeypatch.setattr(module, "open", recording_open, raising=False)
    monkeypatch.setattr(module, "_download_fetch", recording_fetch)
    return opened


@pytest.mark.parametrize("in_memory", ["default", 100])
def test_small_bodies_wait_in_memory_large_ones_stream_to_their_part_same_outcome(fresh_court, tmp_path,
                                                                                 monkeypatch, in_memory):
    from notebook_builder.cells import c70_download
    if in_memory != "default":
        monkeypatch.setattr(c70_download, "_DOWNLOAD_IN_MEMORY", in_memory)
    opened = _record_opens(monkeypatch, c70_download)
    documents = fault_sample(fresh_court, per_fault=1)
    ctx = download_context(fresh_court, tmp_path)
    DiscoveryState(ctx.db).upsert_discovered(discovered_rows(documents))
    download(ctx)
    for document in documents:
        row = ctx.db.get_document(document.document_id)
        assert (row["status"], row["http_status"], row["attempts"]) == \
            expected_download_row(fresh_court, document, ctx.cfg.MAX_ATTEMPTS), document.fault
        if row["status"] == "downloaded":
            assert ctx.path(row["local_pdf"]).read_bytes() == fresh_court.pdf_bytes(document.document_id)
            assert ctx.store.read_file(row["local_pdf"]) == fresh_court.pdf_bytes(document.document_id)
    assert list(ctx.path("tmp").iterdir()) == []
    fetch_parts = {name for where, name in opened if where == "fetch" and name.endswith(".part")}
    if in_memory == "default":
        assert fetch_parts == set()     # the request path created no file
    else:
        downloaded = {d.document_id for d in documents
                      if ctx.db.get_document(d.document_id)["status"] == "downloaded"}
        assert {f"{d}.part" for d in downloaded} <= fetch_parts
    ctx.close()


@pytest.mark.parametrize("paths, kept", [("site", "site"), ("both", "api")])
def test_the_download_path_that_answers_a_pdf_is_kept_and_a_404_on_both_is_the_documents(tmp_path, paths, kept):
    from notebook_builder.cells.c70_download import download_path_order
    assert download_path_order(None) == ("api", "site") and download_path_order("site") == ("site", "api")
    with SimCourt(docs=60, seed=2, download_paths=paths, enforce_retry_after=False) as court:
        chosen = court.documents_with("ok")[:5] + court.documents_with("http_404")[:1]
        ctx = download_context(court, tmp_path)
        DiscoveryState(ctx.db).upsert_discovered(discovered_rows(chosen))
        result = download(ctx)
        assert result.downloaded == 5 and result.permanent_failures == 1
        assert ctx.db.kv_get("download_path") == kept
        missing = ctx.db.get_document(court.documents_with("http_404")[0].document_id)
        assert (missing["status"], missing["http_status"]) == ("failed", 404)
        # The kept path is asked first; the other only after a 404 (here, the missing document's).
        other = "download" if kept == "site" else "download_site"
        assert court.endpoint_requests[other] == (1 if kept == "api" else 1 + 1)
        ctx.close()
