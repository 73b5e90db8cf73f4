"""Discover against the simulated court: shards, paging, splitting, the trap, sweeps, resume."""
from __future__ import annotations

import pytest
import requests
from requests.adapters import HTTPAdapter
from support import RecordingClock

from notebook_builder.cells import c44_discovery_rules, c47_document_search
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c30_client import CourtClient, CourtTrapError
from notebook_builder.cells.c25_court import KENTUCKY
from notebook_builder.cells.c44_discovery_rules import needs_repage, needs_split
from notebook_builder.cells.c50_discover import discover
from notebook_builder.simcourt import SimCourt


class RecordingClient(CourtClient):
    """Remembers every shard it was asked for; can request a stop after N pages."""

    def __init__(self, *args, stop_after_pages: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[str, int]] = []
        self.stop_after_pages = stop_after_pages

    def search_documents(self, prefix, start_index, max_results):
        page = super().search_documents(prefix, start_index, max_results)
        self.asked.append((prefix, start_index))
        if self.stop_after_pages is not None and len(self.asked) >= self.stop_after_pages:
            self.clock.request_stop("signal")
        return page


class StripSelfLinksHeader(HTTPAdapter):
    """A proxy (or a careless client) that drops x-ctrack-excludeselflinks on the way out."""

    def send(self, request, *args, **kwargs):
        request.headers.pop("x-ctrack-excludeselflinks", None)
        return super().send(request, *args, **kwargs)


@pytest.fixture
def make_context(make_context, monkeypatch):
    """conftest's builder, for a court: its years, the document search, one store for every workspace."""
    monkeypatch.setenv("KY_PROGRESS", "0")

    def build(court, *, client_class=CourtClient, session=None, name="w", client_kwargs=None, **knobs):
        return make_context(court, name=name, env={"KY_DISCOVERY": "documents"}, clock=RecordingClock(),
                            client=lambda cfg, clock: client_class(cfg, clock, session=session,
                                                                   **(client_kwargs or {})),
                            FIRST_YEAR=court.corpus.first_year, LAST_YEAR=court.corpus.last_year, **knobs)

    return build


def document_ids(ctx) -> list[str]:
    return [row["document_id"] for row in ctx.db.iter_documents()]


def shard_rows(ctx, sweep):
    return {row["shard"]: dict(row) for row in ctx.db.conn.execute(
        "SELECT * FROM discovery_shards WHERE sweep = ?", (sweep,))}


def fresh_clock(ctx):
    ctx.clock = RecordingClock()
    ctx.client.clock = ctx.clock


# -------------------------------------------------------------- planning


def test_shards_are_both_courts_for_every_year_in_case_number_order():
    assert KENTUCKY.numbers.shards(2019, 2021) == ["2019-CA", "2019-SC", "2020-CA", "2020-SC", "2021-CA", "2021-SC"]
    assert len(KENTUCKY.numbers.shards(1990, 2026)) == 74


def test_split_shard_goes_one_digit_deeper_until_a_whole_case_number():
    assert KENTUCKY.numbers.split_shard("2019-CA") == [f"2019-CA-{d}" for d in range(10)]
    assert KENTUCKY.numbers.split_shard("2019-CA-0") == [f"2019-CA-0{d}" for d in range(10)]
    assert KENTUCKY.numbers.split_shard("2019-CA-012") == [f"2019-CA-012{d}" for d in range(10)]
    assert KENTUCKY.numbers.split_shard("2019-CA-0123") == []


def test_split_is_decided_by_the_announced_limit():
    assert needs_split(101, 100) and not needs_split(100, 100) and not needs_split(10**6, None)


def test_a_shard_is_paged_again_only_while_its_distinct_rows_fall_short_and_passes_remain():
    assert needs_repage(97, 100, 0, 3) and needs_repage(99, 100, 2, 3)
    assert not needs_repage(100, 100, 0, 3) and not needs_repage(101, 100, 0, 3)
    assert not needs_repage(97, 100, 3, 3)


# ---------------------------------------------------------------- paging


def test_paging_trusts_resultcount_when_the_server_caps_pages(make_context):
    with SimCourt(docs=300, seed=2, max_page=7, unstable=False, faults=False,
                  first_year=2019, last_year=2020) as court:
        ctx = make_context(court, PAGE_SIZE=20, client_class=RecordingClient)
        result = discover(ctx)
        assert sorted(document_ids(ctx)) == sorted(d.document_id for d in court.documents)
        starts = [start for prefix, start in ctx.client.asked if prefix == "2019-CA"][:3]
        assert starts == [1, 8, 15]           # advanced by the 7 rows sent, not the 20 asked
        assert result.converged and result.errors == 0


def test_shard_over_limit_is_split_not_truncated_at_two_digit_levels(make_context):
    with SimCourt(docs=400, seed=4, results_limit=25, max_page=10, first_year=2019, last_year=2020,
                  faults=False) as court:
        ctx = make_context(court, PAGE_SIZE=10)
        result = discover(ctx)
        rows = shard_rows(ctx, 1)
        assert rows["2019-CA"]["state"] == "split" and rows["2019-CA"]["total_count"] > 25
        deeper = [shard for shard, row in rows.items() if row["state"] == "split" and len(shard) >= 10]
        assert deeper, "a second digit level was split too"
        assert all(row["total_count"] <= 25 for row in rows.values() if row["state"] == "done")
        assert sorted(document_ids(ctx)) == sorted(d.document_id for d in court.documents)
        assert result.converged


def test_an_unknown_small_limit_is_learned_not_mistaken_for_a_split(make_context):
    with SimCourt(docs=200, seed=5, results_limit=15, max_page=50, unstable=False, faults=False,
                  first_year=2020, last_year=2020) as court:
        ctx = make_context(court, PAGE_SIZE=500)
        discover(ctx)
        assert sorted(document_ids(ctx)) == sorted(d.document_id for d in court.documents)


# ------------------------------------------------------------------ trap


def test_a_client_without_the_selflinks_header_fails_loudly_not_empty(make_context, served_court):
    session = requests.Session()
    session.mount("http://", StripSelfLinksHeader())
    ctx = make_context(served_court, session=session)
    with pytest.raises(CourtTrapError, match="excludeselflinks"):
        discover(ctx)
    assert ctx.db.kv_get("discovery_converged_at") is None
    assert WorkQueues(ctx.db).document_count() == 0


def test_the_trap_after_a_good_sweep_fails_at_the_first_shard(make_context):
    with SimCourt(docs=300, seed=1, first_year=2019, last_year=2020) as court:
        good = make_context(court, MAX_SWEEPS=1)
        discover(good)
        session = requests.Session()
        session.mount("http://", StripSelfLinksHeader())
        good.client = CourtClient(good.cfg, good.clock, session=session)
        before = WorkQueues(good.db).document_count()
        with pytest.raises(CourtTrapError, match="held documents before"):
            discover(good)
        assert WorkQueues(good.db).document_count() == before


# ---------------------------------------------------------------- faults


def test_search_503s_and_429s_are_retried_and_discovery_still_converges(make_context):
    # The tests' clock records sleeps without sleeping: the court must not insist on Retry-After.
    with SimCourt(docs=300, seed=6, search_fault_rate=0.3, first_year=2000, last_year=2020,
                  enforce_retry_after=False) as court:
        ctx = make_context(court, SEARCH_ATTEMPTS=12)
        result = discover(ctx)
        assert result.converged and result.errors == 0
        assert sorted(document_ids(ctx)) == sorted(d.document_id for d in court.documents)
        assert any(sleep >= 0.9 for sleep in ctx.clock.sleeps)   # a 429's Retry-After was honoured
        assert ctx.client.retries > 0


def test_a_shard_that_keeps_failing_is_an_error_and_blocks_convergence(make_context):
    with SimCourt(docs=100, seed=7, search_fault_rate=1.0, first_year=2020, last_year=2020) as court:
        ctx = make_context(court, SEARCH_ATTEMPTS=2, MAX_SWEEPS=2)
        result = discover(ctx)
        shards = len(KENTUCKY.sweep_shards(2020, 2020))     # 2020-CA, -SC, and ADMIN
        assert shards == 4 and result.errors == 2 * shards and not result.converged
        assert {row["state"] for row in shard_rows(ctx, 1).values()} == {"error"}
        assert [row["errors"] for row in DiscoveryState(ctx.db).discovery_runs()] == [shards, shards]
        assert ctx.db.kv_get("discovery_converged_at") is None


# ------------------------------------------------------- unstable order


def _one_sweep(make_context, court, name):
    ctx = make_context(court, name=name, PAGE_SIZE=20, MAX_SWEEPS=1)
    return ctx, discover(ctx)


def test_one_sweep_over_an_unstable_order_finds_every_visible_document(make_context, monkeypatch):
    with SimCourt(docs=500, seed=3, unstable=True, faults=False, max_page=20,
                  first_year=2019, last_year=2020) as court:
        monkeypatch.setattr(c44_discovery_rules, "DISCOVER_MAX_REPAGES", 0)
        naive, naive_result = _one_sweep(make_context, court, "naive")
        assert naive_result.repages == 0 and len(document_ids(naive)) < len(court.documents), \
            "one naive pass over this court misses rows (else the test pins nothing)"

        monkeypatch.undo()
        ctx, result = _one_sweep(make_context, court, "repaged")
        ids = document_ids(ctx)
        assert result.sweeps == 1 and result.repages > 0
        assert len(ids) == len(set(ids)) and set(ids) == {d.document_id for d in court.documents}
        rows = shard_rows(ctx, 1)
        assert all(row["state"] == "done" for row in rows.values())
        assert sum(row["rows_new"] for row in rows.values()) == len(ids) == DiscoveryState(ctx.db).discovery_runs()[0]["rows_new"]
        assert DiscoveryState(ctx.db).discovery_runs()[0]["pages"] == result.pages > naive_result.pages


# ------------------------------------------------------------ end to end


def test_after_convergence_every_document_ever_served_is_in_the_table_exactly_once(make_context):
    with SimCourt(docs=600, seed=8, late_docs=40, unstable=True, results_limit=60, max_page=25,
                  first_year=2010, last_year=2026) as court:
        ctx = make_context(court, PAGE_SIZE=25, CONVERGENCE_DELTA=1, MAX_SWEEPS=8)
        result = discover(ctx)
        ids = document_ids(ctx)
        assert result.converged and ctx.db.kv_get("discovery_converged_at")
        assert len(ids) == len(set(ids)) == len(court.documents)
        assert set(ids) == {d.document_id for d in court.documents}
        runs = DiscoveryState(ctx.db).discovery_runs()
        assert len(runs) == result.sweeps >= 2 and runs[-1]["rows_new"] == 0
        assert all(run["complete"] for run in runs)
        assert sum(run["rows_new"] for run in runs) == len(ids)


def test_a_stopped_sweep_resumes_at_its_first_pending_shard(make_context):
    with SimCourt(docs=300, seed=9, unstable=False, faults=False, max_page=5,
                  first_year=2018, last_year=2020) as court:
        ctx = make_context(court, PAGE_SIZE=5, client_class=RecordingClient,
                           client_kwargs={"stop_after_pages": 30})
        first = discover(ctx)
        assert first.stopped and not first.converged
        rows = shard_rows(ctx, 1)
        done = {shard for shard, row in rows.items() if row["state"] == "done"}
        pending = sorted(shard for shard, row in rows.items() if row["state"] == "pending")
        assert done and pending and ctx.db.kv_get("discovery_sweep") == "1"
        assert DiscoveryState(ctx.db).discovery_runs()[0]["complete"] == 0

        ctx.client.asked.clear()
        ctx.client.stop_after_pages = None
        fresh_clock(ctx)
        ctx.cfg = ctx.cfg.replace(MAX_SWEEPS=1)       # this run finishes sweep 1 and nothing more
        resumed = discover(ctx)
        asked = [prefix for prefix, _ in ctx.client.asked]
        assert resumed.sweeps == 1 and DiscoveryState(ctx.db).discovery_runs()[0]["complete"] == 1
        assert asked[0] == pending[0]
        assert not done & set(asked), "finished shards were not asked again"
        assert sorted(document_ids(ctx)) == sorted(d.document_id for d in court.documents)
        assert len(DiscoveryState(ctx.db).discovery_runs()) == 1 and DiscoveryState(ctx.db).discovery_runs()[0]["rows_new"] == 300


def test_rediscovery_refreshes_metadata_but_never_moves_a_status_back(make_context):
    with SimCourt(docs=200, seed=10, first_year=2020, last_year=2021) as court:
        ctx = make_context(court)
        discover(ctx)
        target = court.documents[3]
        DownloadRecords(ctx.db).mark_downloaded(target.document_id, sha256="0" * 64, size_bytes=10, local_pdf="x.pdf")
        ctx.db.conn.execute("UPDATE documents SET case_title = 'STALE' WHERE document_id = ?",
                            (target.document_id,))
        discover(ctx)
        row = ctx.db.get_document(target.document_id)
        assert row["status"] == "downloaded" and row["sha256"] == "0" * 64
        assert row["case_title"] == target.case_title and row["shard"] == target.shard


def test_dry_run_makes_no_request(make_context):
    with SimCourt(docs=100, seed=11) as court:
        ctx = make_context(court, DRY_RUN=True)
        result = discover(ctx)
        assert court.search_requests == 0 and result.sweeps == 0 and not result.converged


def _writer_batch(shard: str, ids: list[str], state: str | None = "done") -> c47_document_search.DiscoveryBatch:
    rows = [{"document_id": document_id, "shard": shard} for document_id in ids]
    return c47_document_search.DiscoveryBatch(shard, rows=rows, pages=1, rows_seen=len(rows), state=state)


def test_the_writer_commits_in_order_and_an_error_stops_every_later_commit(tmp_path, monkeypatch):
    from notebook_builder.cells.c10_database import Database
    db = Database.open(tmp_path / "db.sqlite")
    DiscoveryState(db).start_sweep(1, ["2019-CA", "2019-SC", "2020-CA"])
    monkeypatch.setattr(c47_document_search, "DISCOVER_COMMIT_ROWS", 1)   # every batch is its own commit
    writer = c47_document_search.DiscoveryWriter(db, 1)
    writer.submit(_writer_batch("2019-CA", ["a1", "a2"]))
    writer.close()
    assert WorkQueues(db).document_count() == 2 and DiscoveryState(db).shard_states(1) == {"done": 1, "pending": 2}
    assert writer.rows_new == 2

    failing = c47_document_search.DiscoveryWriter(db, 1)
    upsert = DiscoveryState.upsert_discovered

    def upsert_or_fail(self, rows, **watch):
        if any(row["document_id"].startswith("b") for row in rows):
            raise OSError("disk I/O error")
        return upsert(self, rows, **watch)
    monkeypatch.setattr(DiscoveryState, "upsert_discovered", upsert_or_fail)
    with pytest.raises(OSError, match="disk I/O"):
        failing.submit(_writer_batch("2019-SC", ["b1"]))   # its commit fails: raised at once
    failing.submit(_writer_batch("2020-CA", ["c1"]))
    failing.close()                                        # commits nothing after the failure
    assert WorkQueues(db).document_count() == 2
    assert DiscoveryState(db).shard_states(1) == {"done": 1, "pending": 2}  # 2019-SC was not marked done without its rows


def test_the_fingerprint_of_a_court_row_is_that_of_the_row_it_normalizes_to():

    from notebook_builder.simcourt.shapes import Corpus
    corpus = Corpus(40, 3)
    items = [corpus.document_row(number) for number in range(40)]
    items.append({"id": "AB" * 32, "rowMap": {"documentID": "AB" * 32, "filedDate": "2020-01-02"}})  # sparse
    for item in items:
        row = {**KENTUCKY.document_row(item), "shard": "2019-CA"}
        assert KENTUCKY.document_row_key(item, "2019-CA") == c44_discovery_rules.metadata_fingerprint(row)
    changed = {**items[0], "rowMap": {**items[0]["rowMap"], "caseHeader.shortTitle": "RENAMED"}}
    assert KENTUCKY.document_row_key(changed, "2019-CA") != KENTUCKY.document_row_key(items[0], "2019-CA")
    assert KENTUCKY.document_row_key(items[0], "2019-SC") != KENTUCKY.document_row_key(items[0], "2019-CA")
