"""A court that cannot be reached ends the run in minutes with exit 3, never in hours and PASS.

The circuit breaker (CourtHealth) opens once the court has given no usable answer for
COURT_DOWN_SECONDS and COURT_DOWN_FAILURES requests in a row failed; the run then stops the
stages that need the court, saves state, verifies, says in one line what remains, and exits 3.
"""
from __future__ import annotations

import http.server
import json
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from support import pipeline_env, stored_database

from notebook_builder.cells.c00_config import CourtUnreachable, RunClock, load_config
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c30_client import CourtHealth
from notebook_builder.cells.c95_run import EXIT_COURT_UNREACHABLE, run_pipeline
from notebook_builder.simcourt import SimCourt

BREAKER = {"KY_COURT_DOWN_SECONDS": "1", "KY_COURT_DOWN_FAILURES": "3", "KY_BACKOFF_BASE": "0.1",
           "KY_BACKOFF_CAP": "0.4", "KY_SEARCH_ATTEMPTS": "3", "KY_HTTP_TIMEOUT": "2"}


def test_breaker_needs_both_the_silence_and_the_failures_in_a_row():
    now = [0.0]
    health = CourtHealth(down_seconds=300, down_failures=6, now=lambda: now[0])
    health.usable()                            # the court answered once: today's thresholds
    for _ in range(10):
        health.failure("ConnectionError")
    assert not health.unreachable()            # many quick failures: not yet an outage
    now[0] = 299.0
    assert not health.unreachable()
    now[0] = 300.0
    assert health.unreachable()
    with pytest.raises(CourtUnreachable, match="no usable answer for 300 s .10 failed requests in a row"):
        health.check("http://court")
    health.usable()
    assert not health.unreachable() and health.failures_in_a_row == 0
    now[0] = 1000.0
    health.failure("HTTP 503")
    assert not health.unreachable()            # one slow failure after a quiet spell is no outage


def test_a_court_that_never_answered_opens_the_breaker_after_6_failures_or_60_s_whichever_is_later():
    now = [0.0]
    health = CourtHealth(down_seconds=300, down_failures=6, now=lambda: now[0])
    for _ in range(5):
        health.failure("ConnectionError: Connection refused")
    now[0] = 120.0
    assert not health.unreachable()            # two minutes, but only 5 failures
    health.failure("ConnectionError: Connection refused")
    assert health.unreachable()
    with pytest.raises(CourtUnreachable, match="no usable answer since the run began, 120 s"):
        health.check("http://court")
    later = CourtHealth(down_seconds=300, down_failures=6, now=lambda: now[0])
    for _ in range(6):
        later.failure("ConnectionError")
    now[0] = 179.0
    assert not later.unreachable() and later.seconds_until_open() == 1.0   # 6 failures, 59 s
    now[0] = 180.0
    assert later.unreachable()


def test_outage_attempts_are_counted_per_document_and_forgotten_on_an_answer():
    health = CourtHealth(1, 1)
    health.failure("reset", "a")
    health.failure("reset", "a")
    health.failure("reset", "b")
    assert dict(health.outage_attempts) == {"a": 2, "b": 1}
    health.usable()
    assert not health.outage_attempts


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HtmlEverywhere(http.server.BaseHTTPRequestHandler):
    """A server that is up but is not the API: every path answers 200 with an HTML page."""

    def do_GET(self):
        body = b"<html><body>Service temporarily unavailable</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=["refused", "html"])
def dead_court(request):
    if request.param == "refused":
        yield f"http://127.0.0.1:{free_port()}/api/api/v1"
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HtmlEverywhere)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/api/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_court_stops_the_run_with_exit_3_and_says_what_remains(tmp_path, dead_court):
    env = {"KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
           "KY_API_BASE": dead_court, "KY_PACING": "0", "KY_FIRST_YEAR": "2020", "KY_LAST_YEAR": "2026",
           "KY_PROGRESS": "0", **BREAKER}
    started = time.monotonic()
    report = run_pipeline(load_config(env), handle_signals=False)
    assert time.monotonic() - started < 60
    assert report.exit_status == EXIT_COURT_UNREACHABLE == 3, report.summary()
    summary = report.summary()
    lines = [line for line in summary.splitlines() if line.startswith("court unreachable:")]
    assert len(lines) == 1 and dead_court in lines[0] and "remains:" in lines[0], summary
    assert report.stages["download"].stopped == "court unreachable"    # the crawl stopped; nothing downloaded
    assert report.verify.passed and report.verify.empty
    # No verdict over an archive of nothing: no PASS anywhere, in the stage table or the report.
    assert not re.search(r"\bPASS\b", summary), summary
    assert "verify: nothing to verify: the archive holds no document yet (not done: 0 to download" in summary
    assert re.search(r"^ +verify +[0-9.]+s  nothing to verify: the archive holds no document yet$", summary, re.M)
    status = json.loads((tmp_path / "workspace" / "status.json").read_text())
    assert status["done"] is False and status["verify"] is None
    assert status["verify_note"] == "nothing to verify: the archive holds no document yet"
    assert status["court_unreachable"] and status["remaining"].endswith("discovery not converged")
    assert stored_database(tmp_path / "store") is not None   # state saved


@pytest.mark.slow
def test_a_court_that_dies_mid_download_gives_the_attempts_back_and_the_next_run_finishes(tmp_path):
    court = SimCourt(120, seed=3, faults=False, first_year=2020, last_year=2026)
    court.start()
    env = pipeline_env(court, tmp_path, KY_WORKERS="1", **BREAKER)
    cfg = load_config(env)
    served = {"n": 0}
    original = court._server.RequestHandlerClass.do_GET

    def dies_after_40_downloads(handler):
        if "/download" in handler.path:
            served["n"] += 1
            if served["n"] > 40:
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)   # a reset: the court went away
                return
        original(handler)

    court._server.RequestHandlerClass.do_GET = dies_after_40_downloads
    try:
        report = run_pipeline(cfg, handle_signals=False)
        assert report.exit_status == 3, report.summary()
        download = report.stages["download"]
        assert download.downloaded == 40 and download.refunded > 0
        assert "court unreachable: " in report.summary()
        db = Database.open(Path(cfg.WORKSPACE) / "ky_court.sqlite")
        try:
            spent = db.conn.execute("SELECT count(*) FROM documents WHERE sha256 IS NULL AND attempts > 0"
                                    ).fetchone()[0]
            queued = WorkQueues(db).download_queue_size(cfg)
        finally:
            db.close()
        assert spent == 0, "attempts spent while the court was down were not given back"
        assert queued > 0      # what the crawl had discovered and not downloaded when the court went away
        assert f"not done: {queued} to download" in report.summary()
    finally:
        court._server.RequestHandlerClass.do_GET = original
    report = run_pipeline(cfg, handle_signals=False)   # the court is back
    court.stop()
    assert report.exit_status == 0, report.summary()
    assert report.verify.done and "not done" not in report.summary()


def test_a_long_backoff_says_what_it_waits_for(caplog):
    import logging

    from support import RecordingClock

    from notebook_builder.cells.c30_client import CourtClient
    clock = RecordingClock()
    client = CourtClient(load_config({"KY_BACKOFF_BASE": "5", "KY_BACKOFF_CAP": "60"}), clock)
    with caplog.at_level(logging.INFO, logger="kycourt.client"):
        client.backoff(0, None, "search 2020-CA start 1, try 2 of 6")        # 5 s: said
        client.backoff(2, 45.0, "download abc attempt 3 of 4")               # Retry-After 45 s
    client.close()
    assert clock.sleeps == [5.0, 45.0]
    assert "waiting 5 s before search 2020-CA start 1, try 2 of 6 (backoff)" in caplog.text
    assert "waiting 45 s before download abc attempt 3 of 4 (the court's Retry-After)" in caplog.text


def test_the_notebook_run_cell_raises_when_the_court_is_unreachable(tmp_path, dead_court):
    from notebook_builder.cells.c95_run import SessionNotPassed, run_session
    env = {"KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
           "KY_API_BASE": dead_court, "KY_PACING": "0", "KY_FIRST_YEAR": "2025", "KY_LAST_YEAR": "2026",
           "KY_PROGRESS": "0", **BREAKER}
    with pytest.raises(SessionNotPassed, match="exit status 3: the court could not be reached"):
        run_session(load_config(env))


class FakeTimeClock(RunClock):
    """A run clock on simulated time: every sleep advances it at once (the breaker reads it too)."""

    def __init__(self):
        self.now = 0.0
        super().__init__(36000.0, 0.0, now=lambda: self.now)

    def sleep(self, seconds: float) -> bool:
        self.now += max(0.0, seconds)
        return not self.stop_event.is_set()


def test_a_refused_port_from_the_start_exits_3_in_about_a_minute_with_a_few_short_lines(tmp_path, caplog):
    """Default thresholds (300 s, 6 failures) and default backoff: a court that never answered opens
    the breaker after 6 failures or 60 s, whichever is later, not after five minutes; each failed
    shard is one line, with no HTTPConnectionPool(...) repr."""
    import logging
    env = {"KY_WORKSPACE": str(tmp_path / "workspace"), "KY_STORE": str(tmp_path / "store"),
           "KY_API_BASE": f"http://127.0.0.1:{free_port()}/api/api/v1", "KY_PROGRESS": "0",
           "KY_FIRST_YEAR": "2020", "KY_LAST_YEAR": "2026"}
    clock = FakeTimeClock()
    with caplog.at_level(logging.INFO, logger="kycourt"):
        report = run_pipeline(load_config(env), clock=clock, handle_signals=False)
    assert report.exit_status == EXIT_COURT_UNREACHABLE, report.summary()
    opened = float(re.search(r"no usable answer since the run began, (\d+) s", report.court_unreachable).group(1))
    assert 60 <= opened <= 75, report.court_unreachable
    court_lines = [record.getMessage() for record in caplog.records
                   if record.name in ("kycourt.client", "kycourt.discover") and record.levelno >= logging.INFO]
    assert len(court_lines) <= 12, court_lines
    assert not any("HTTPConnectionPool" in line or " object at 0x" in line for line in court_lines), court_lines
    assert "Connection refused" in report.court_unreachable
