"""DriveStore against the simulated Drive, through the real pydrive2 + googleapiclient HTTP stack.

No mock objects: `connect_drive` builds pydrive2's GoogleDrive from the discovery
document googleapiclient ships (root URL replaced) with dummy OAuth2 credentials,
and every request crosses loopback to notebook_builder.simdrive. The faults of the
issue are made by the simulated Drive (rate limits, quota, 5xx, dropped and lost
answers, torn downloads, expiring tokens) or by another client (duplicate titles,
a file trashed by hand, a folder of more than 1,000 files).
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import io
import threading
import time

import pytest
from googleapiclient.http import MediaIoBaseUpload
from support import put_bytes

from notebook_builder.cells.c00_config import IntegrityError, RunClock, StoreError, StoreQuotaExceeded, load_config
from notebook_builder.cells.c17_snapshots import StoreState
from notebook_builder.cells.c35_context import open_context, store_sleep
from notebook_builder.cells.c07_drive_api import DriveWritePacer, connect_drive, shared_pacer
from notebook_builder.cells.drive_store import DriveStore
from notebook_builder.simdrive import SimDrive, parse_query
from notebook_builder.simdrive.server import multipart_parts

FOLDER = "ky_court"


def sha_name(number: int, suffix: str = "pdf") -> str:
    digest = hashlib.sha256(str(number).encode()).hexdigest()
    return f"pdf_by_hash/{digest}.pdf" if suffix == "pdf" else f"text/{digest}.txt"


@pytest.fixture
def sim():
    with SimDrive() as drive:
        yield drive


def drive_store(sim: SimDrive, sleeps: list | None = None, **options) -> DriveStore:
    options.setdefault("backoff_base", 0.01)
    options.setdefault("backoff_cap", 0.05)
    sleep = (lambda seconds: sleeps.append(seconds)) if sleeps is not None else time.sleep
    return DriveStore(connect_drive(sim.api_root, http_timeout=5), FOLDER, sleep=sleep, **options)


def titles(sim: SimDrive, folder: str) -> list[str]:
    return sorted(f["title"] for f in sim.files_in(f"{FOLDER}/{folder}" if folder else FOLDER))


# ---------------------------------------------------------------- the simulated Drive itself


def test_query_subset_matches_title_case_insensitively_parents_and_trash():
    record = {"title": "Status.JSON", "parents": [{"id": "P1"}], "labels": {"trashed": False},
              "mimeType": "application/json"}
    assert parse_query("title = 'status.json' and 'P1' in parents and trashed = false")(record)
    assert not parse_query("'P2' in parents")(record)
    assert not parse_query("trashed = true")(record)
    assert parse_query("mimeType != 'application/vnd.google-apps.folder'")(record)
    assert parse_query("title = 'it\\'s'")({**record, "title": "it's"})
    with pytest.raises(ValueError, match="Invalid query clause"):
        parse_query("fullText contains 'x'")


def test_pacer_halves_on_rate_limits_and_climbs_back_additively_below_the_rate_refused():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
    pacer = DriveWritePacer(2.0, now=lambda: now[0], sleep=sleep)
    assert [pacer.wait() for _ in range(3)] == [0.0, 0.5, 0.5]      # 2 a second, no burst
    pacer.limited()
    assert pacer.rate == 1.0 and pacer.ceiling == pytest.approx(1.8)
    for _ in range(5):
        pacer.passed()
    assert pacer.rate == pytest.approx(1.5)                         # +0.1 a write that passes
    for _ in range(10):
        pacer.passed()
    assert pacer.rate == pacer.ceiling < 2.0                        # not straight back into the limit
    for _ in range(200):
        pacer.passed()
    assert pacer.rate == 2.0                                        # the ceiling is probed again, slowly
    pacer.limited()
    pacer.limited()                                                 # refused again at half: a burst
    assert pacer.rate == 0.5 and pacer.ceiling == pytest.approx(1.8) and pacer.limited_count == 3


def test_processes_of_one_workspace_take_their_turns_from_one_bucket_that_outlives_them(tmp_path):
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
    state = tmp_path / "checkpoint" / "drive-pacer.json"
    run, beside = (DriveWritePacer(2.0, now=lambda: now[0], sleep=sleep, state=state) for _ in range(2))
    waits = [pacer.wait() for pacer in (run, beside, run, beside)]
    assert waits == [0.0, 0.5, 0.5, 0.5]                 # 2 a second between them, not 2 each
    beside.limited()
    assert run.wait() == pytest.approx(1.0) and run.rate == 1.0     # what one learns the other obeys
    restarted = DriveWritePacer(2.0, now=lambda: now[0], sleep=sleep, state=state)
    assert restarted.wait() == pytest.approx(1.0) and restarted.rate == 1.0   # not a fresh burst at 2
    state.write_text("{torn")
    assert DriveWritePacer(2.0, now=lambda: now[0], sleep=sleep, state=state).wait() >= 0   # unreadable: starts afresh
    assert shared_pacer(2.0, state) is shared_pacer(2.0, state)


def test_a_multipart_upload_keeps_every_byte_of_its_content_whatever_the_line_breaks(sim):
    lf = b'--B\nContent-Type: application/json\n\n{"title": "a"}\n--B\nContent-Type: x/y\n\ndata\r\n--B--'
    assert multipart_parts('multipart/related; boundary="B"', lf) == [b'{"title": "a"}', b"data\r"]
    crlf = b'--B\r\n\r\n{}\r\n--B\r\nContent-Transfer-Encoding: base64\r\n\r\nZGF0YQ0=\r\n--B--\r\n'
    assert multipart_parts("multipart/related; boundary=B", crlf) == [b"{}", b"data\r"]
    service = connect_drive(sim.api_root).auth.service
    for data in (b"ends in CR\r", b"ends in LF\n", b"\r\n--B"):
        made = service.files().insert(body={"title": "x"}, media_body=MediaIoBaseUpload(
            io.BytesIO(data), "application/octet-stream")).execute()
        assert sim.content(made["id"]) == data and made["md5Checksum"] == hashlib.md5(data).hexdigest()


def test_generated_ids_make_an_insert_409_on_a_repeat_and_400_when_never_generated(sim):
    service = connect_drive(sim.api_root).auth.service
    ids = service.files().generateIds(maxResults=3, space="drive").execute()["ids"]
    assert len(set(ids)) == 3
    made = service.files().insert(body={"id": ids[0], "title": "a.json"}).execute()
    assert made["id"] == ids[0]
    for body, status in (({"id": ids[0], "title": "a.json"}, 409), ({"id": "made-up", "title": "b"}, 400)):
        with pytest.raises(Exception) as raised:
            service.files().insert(body=body).execute()
        assert raised.value.resp.status == status
    assert sim.answers["insert 409"] == 1 and sim.answers["insert 400"] == 1
    assert sim.answers["generate_ids 200"] == 1


def test_list_delay_hides_a_new_file_from_listings_but_not_from_get(sim):
    sim.list_delay = 0.5
    service = connect_drive(sim.api_root).auth.service
    made = service.files().insert(body={"title": "late.json"}).execute()
    query = {"q": "title = 'late.json'"}
    assert service.files().list(**query).execute()["items"] == []
    assert service.files().get(fileId=made["id"]).execute()["title"] == "late.json"
    time.sleep(0.6)
    assert [f["id"] for f in service.files().list(**query).execute()["items"]] == [made["id"]]


def test_phantom_writes_act_then_fail_and_twins_are_another_copy(sim):
    service = connect_drive(sim.api_root).auth.service
    sim.fail_next("phantom", 1, ("insert",))
    with pytest.raises(Exception) as raised:
        service.files().insert(body={"title": "once.json"}).execute()
    assert raised.value.resp.status == 500
    assert [f["title"] for f in sim.files_in("")] == ["once.json"]           # Drive acted all the same
    sim.twin_rate = 1.0
    service.files().insert(body={"title": "twice.json"}).execute()
    assert sorted(f["title"] for f in sim.files_in("")) == ["once.json", "twice.json", "twice.json"]
    assert sim.twins_made == 1 and sim.rejected["phantom"] == 1


# ------------------------------------------------------------------------ requests per file


def test_a_small_file_is_one_request_a_large_one_resumable_in_chunks(sim):
    store = drive_store(sim, multipart_limit=1000)
    put_bytes(store, "status.json", b"{}")                           # makes the root folder
    before = sum(sim.requests.values())
    for number in range(10):
        put_bytes(store, sha_name(number), b"%PDF small " + bytes([number]))
    # one folder lookup (absent) and its creation, then exactly one request per PDF
    assert sum(sim.requests.values()) - before == 2 + 10
    big = bytes(range(256)) * 20
    put_bytes(store, "ky_court.sqlite", big)
    assert sim.requests["upload_chunk"] == 1                          # the resumable session's chunk
    assert store.read_file("ky_court.sqlite") == big
    assert len(titles(sim, "pdf_by_hash")) == 10


def test_folder_of_more_than_1000_files_is_listed_across_pages(sim):
    store = drive_store(sim)
    put_bytes(store, "status.json", b"{}")
    folder = sim.add_folder(sim.folder_id(FOLDER), "pdf_by_hash")
    names = [sha_name(number) for number in range(1234)]
    for name in names:
        sim.add_file(folder["id"], name.split("/")[1], None, size=10, md5="0" * 32)
    lists_before = sim.requests["list"]
    assert store.list_dir("pdf_by_hash") == sorted(names)
    assert sim.requests["list"] - lists_before == 1 + 2               # the folder's lookup, two pages
    assert store.exists(names[1200]) and store.size(names[7]) == 10
    assert sim.requests["list"] - lists_before == 3                   # answered from the listing


# ---------------------------------------------------------------------------------- faults


def test_rate_limit_storm_slows_the_pacer_and_loses_nothing(sim):
    sim.write_rate, sim._bucket.burst = 40.0, 1.0
    store = drive_store(sim, writes_per_second=200.0, max_tries=12)
    names = [sha_name(number) for number in range(20)]
    for name in names:
        put_bytes(store, name, name.encode())
    assert sim.rejected["userRateLimitExceeded"] > 0 and sim.rejected["429"] > 0
    assert store.pacer.limited_count > 0 and store.pacer.rate < 200.0
    assert titles(sim, "pdf_by_hash") == sorted(name.split("/")[1] for name in names)   # each once


def test_5xx_dropped_and_lost_answers_leave_exactly_one_copy(sim):
    store = drive_store(sim)
    put_bytes(store, "status.json", b"{}")
    sim.fail_next("error", 1, ("insert",))
    sim.fail_next("drop", 1, ("insert",))
    sim.fail_next("lost", 1, ("insert",))            # Drive stored it; the answer never came
    put_bytes(store, sha_name(1), b"%PDF one")
    assert sim.rejected["backendError"] == 1 and sim.rejected["dropped"] == 1 and sim.rejected["lost"] == 1
    assert titles(sim, "pdf_by_hash") == [sha_name(1).split("/")[1]]
    sim.fail_next("lost", 1, ("update",))
    put_bytes(store, "status.json", b'{"v": 2}')     # an update whose answer is lost is still one file
    assert titles(sim, "") == ["status.json"]
    assert store.read_file("status.json") == b'{"v": 2}'


def test_truncated_media_download_is_retried_and_checked(sim, tmp_path):
    store = drive_store(sim)
    data = b"%PDF " + bytes(range(256)) * 40
    put_bytes(store, sha_name(2), data)
    sim.fail_next("truncate", 2)
    target = tmp_path / "copy.pdf"
    store.download_file(sha_name(2), target)
    assert target.read_bytes() == data and sim.rejected["truncated"] == 2
    sim.fail_next("truncate", 10)
    with pytest.raises((IntegrityError, StoreError)):
        drive_store(sim, max_tries=2).download_file(sha_name(2), tmp_path / "never.pdf")
    assert not (tmp_path / "never.pdf").exists() and target.read_bytes() == data


def test_quota_full_is_quota_exceeded_at_once_and_about_reports_it(sim):
    store = drive_store(sim)
    put_bytes(store, sha_name(1), b"x" * 100)
    sim.quota_bytes = 150
    with pytest.raises(StoreQuotaExceeded, match="storageQuotaExceeded"):
        put_bytes(store, sha_name(2), b"y" * 100)
    assert store.quota() == {"used": 100, "total": 150}
    assert titles(sim, "pdf_by_hash") == [sha_name(1).split("/")[1]]
    sim.quota_bytes = None
    put_bytes(store, sha_name(2), b"y" * 100)                        # freed: the same store goes on
    assert len(titles(sim, "pdf_by_hash")) == 2


def test_token_expiring_mid_run_is_refreshed_without_a_login(sim):
    sim.token_seconds = 0.2
    store = drive_store(sim)
    for number in range(6):
        put_bytes(store, sha_name(number), b"%PDF " + bytes([number]))
        time.sleep(0.1)
    assert sim.requests["token"] >= 2                                 # refreshed at the token endpoint
    assert len(titles(sim, "pdf_by_hash")) == 6


def test_a_differing_copy_from_another_client_is_renamed_and_the_newest_read_and_updated(sim):
    store = drive_store(sim)
    put_bytes(store, "status.json", b'{"ours": 1}')
    root = sim.folder_id(FOLDER)
    theirs = sim.add_file(root, "status.json", b'{"theirs": 1}')     # newer: another session wrote it
    fresh = drive_store(sim)
    assert fresh.read_file("status.json") == b'{"theirs": 1}'
    put_bytes(fresh, "status.json", b'{"ours": 2}')
    held = {f["title"]: sim.content(f["id"]) for f in sim.files_in(FOLDER)}
    ours = next(f for f in sim._files.values() if f["title"].startswith("status.json.conflict-"))
    assert held == {"status.json": b'{"ours": 2}', f"status.json.conflict-{ours['id']}": b'{"ours": 1}'}
    assert sim.file_by_name(f"{FOLDER}/status.json")["id"] == theirs["id"]


def test_file_trashed_by_hand_is_absent_from_a_fresh_listing_and_stored_again(sim):
    store = drive_store(sim)
    put_bytes(store, sha_name(3), b"%PDF three")
    sim.trash(sim.file_by_name(f"{FOLDER}/{sha_name(3)}")["id"])
    assert store.list_dir("pdf_by_hash") == []                        # list_dir always asks Drive
    put_bytes(store, sha_name(3), b"%PDF three")
    assert titles(sim, "pdf_by_hash") == [sha_name(3).split("/")[1]]


def test_a_signal_during_a_drive_outage_ends_the_retry_wait(sim):
    clock = RunClock(3600.0)
    store = DriveStore(connect_drive(sim.api_root, http_timeout=5), FOLDER, backoff_base=60.0,
                       backoff_cap=60.0, sleep=store_sleep(clock))
    sim.error_rate = 1.0
    outcome: list[BaseException] = []

    def write():
        try:
            put_bytes(store, "status.json", b"{}")
        except StoreError as exc:
            outcome.append(exc)
    writer = threading.Thread(target=write)
    writer.start()
    while sim.requests["list"] == 0:
        time.sleep(0.01)
    clock.request_stop("SIGTERM")
    writer.join(timeout=30)
    assert not writer.is_alive()
    assert outcome and "stopped while waiting to retry" in str(outcome[0])
    assert sim.requests["list"] == 1                                  # no retry after the signal


def test_a_sigterm_during_a_drive_outage_stops_a_run_contexts_store_within_seconds(sim, tmp_path):
    # The wiring a run uses: open_context gives the DriveStore the run clock's sleep, so a
    # 60 s backoff (BACKOFF_BASE) ends within a second or two of the signal.
    cfg = load_config({"KY_STORE": "drive", "KY_DRIVE_API": sim.api_root, "KY_DRIVE_FOLDER": FOLDER,
                       "KY_WORKSPACE": str(tmp_path / "ws"), "KY_BACKOFF_BASE": "60",
                       "KY_BACKOFF_CAP": "60", "KY_PROGRESS": "0"})
    ctx = open_context(cfg, clock=RunClock(3600.0))
    sim.error_rate = 1.0
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        write = pool.submit(put_bytes, ctx.store, "status.json", b"{}")
        while sim.requests["list"] == 0:
            time.sleep(0.01)
        time.sleep(0.2)                                               # into the 60 s wait
        signalled = time.monotonic()
        ctx.clock.request_stop("SIGTERM")
        with pytest.raises(StoreError, match="stopped while waiting to retry"):
            write.result(timeout=30)
        stopped_after = time.monotonic() - signalled
    ctx.close()
    assert stopped_after < 2.0, stopped_after


def test_store_sleep_outlives_the_budget_but_not_a_signal():
    clock = RunClock(3600.0)
    clock.request_stop("budget")
    assert store_sleep(clock)(0.01) is True                           # verify still syncs patiently
    signalled = RunClock(3600.0)
    signalled.request_stop("SIGINT")
    assert store_sleep(signalled)(10.0) is False


# ------------------------------------------------------------------------------ text packs


def write_texts(tmp_path, count: int, start: int = 0) -> list[tuple[str, object]]:
    items = []
    for number in range(start, start + count):
        path = tmp_path / f"{number}.txt"
        path.write_text(f"opinion text {number} " * 20)
        items.append((sha_name(number, "txt"), path))
    return items


def test_texts_go_in_one_pack_that_a_fresh_store_reads_by_name(sim, tmp_path):
    store = drive_store(sim)
    texts = write_texts(tmp_path, 5)
    pdf = tmp_path / "one.pdf"
    pdf.write_bytes(b"%PDF one")
    inserts_before = sim.requests["insert"]
    store.upload_files(texts + [(sha_name(1), pdf)])
    assert [f["title"][:5] for f in sim.files_in(f"{FOLDER}/text")] == ["pack-"]
    assert len(titles(sim, "pdf_by_hash")) == 1
    assert sim.requests["insert"] - inserts_before == 3 + 2          # three folders, the PDF, the pack

    fresh = drive_store(sim)
    names = [name for name, _ in texts]
    assert all(fresh.exists(name) for name in names)
    assert set(names) <= set(fresh.list_dir("text"))
    media_before = sim.requests["media"]
    for name, path in texts:
        assert fresh.read_file(name) == path.read_bytes()
    assert sim.requests["media"] - media_before == 1                 # one pack download serves all
    assert fresh.size(names[0]) == texts[0][1].stat().st_size

    fresh.upload_files(texts)                                         # already held: nothing sent
    assert len(sim.files_in(f"{FOLDER}/text")) == 1
    texts[0][1].write_text("other bytes")
    with pytest.raises(IntegrityError, match="refuses to overwrite"):
        fresh.upload_files(texts[:2])


def test_pack_whose_index_was_edited_away_is_read_for_its_index(sim, tmp_path):
    store = drive_store(sim)
    texts = write_texts(tmp_path, 3)
    store.upload_files(texts)
    pack = sim.files_in(f"{FOLDER}/text")[0]
    sim._files[pack["id"]].pop("description")                         # another client cleared it
    fresh = drive_store(sim)
    assert fresh.read_file(texts[2][0]) == texts[2][1].read_bytes()


def test_a_store_of_loose_texts_still_reads_and_mixes_with_packs(sim, tmp_path):
    store = drive_store(sim)
    loose = write_texts(tmp_path, 1)
    store.upload_file(*loose[0])                                       # the old form: one file a text
    assert [f["title"] for f in sim.files_in(f"{FOLDER}/text")] == [loose[0][0].split("/")[1]]
    packed = write_texts(tmp_path, 3, start=10)
    store.upload_files(loose + packed)                                # the loose one is not packed again
    fresh = drive_store(sim)
    for name, path in loose + packed:
        assert fresh.read_file(name) == path.read_bytes()
    assert len(sim.files_in(f"{FOLDER}/text")) == 2


# ------------------------------------------------------------------ the mirror behind the crawl


def test_uploads_behind_the_crawl_are_durable_rows_a_later_mirror_finishes_after_a_kill(sim, tmp_path):
    from notebook_builder.cells.c10_database import Database
    from notebook_builder.cells.c34_mirror import StoreMirror
    workspace = tmp_path / "workspace"
    items = []
    for number in range(8):
        path = workspace / sha_name(number)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"%PDF " + bytes([number]) * 50)
        items.append((sha_name(number), path))
    db = Database.open(workspace / "ky_court.sqlite")
    mirror = StoreMirror(drive_store(sim, writes_per_second=20.0), clock=RunClock(3600.0))
    mirror.attach(db)
    with mirror._lock:                     # the uploader cannot reach Drive until the puts returned
        assert mirror.put_many(items) == {name: False for name, _ in items}
        assert StoreState(db).store_pending_count() == 8 and sim.requests["insert"] == 0
        mirror._uploader_stop.set()        # the runtime dies with the backlog in the database
    mirror.stop_uploader()
    db.close()
    assert len(sim.files_in(f"{FOLDER}/pdf_by_hash")) < 8

    db = Database.open(workspace / "ky_court.sqlite")
    later = StoreMirror(drive_store(sim, writes_per_second=20.0), clock=RunClock(3600.0))
    later.attach(db)
    assert later.catch_up(workspace, wait=False)["left"] > 0        # a run's start: behind the crawl
    assert later.catch_up(workspace)["left"] == 0                     # sync: waits for the rest
    assert StoreState(db).store_pending_count() == 0 and later.eta_seconds() == 0.0
    assert titles(sim, "pdf_by_hash") == sorted(name.split("/")[1] for name, _ in items)
    db.close()
