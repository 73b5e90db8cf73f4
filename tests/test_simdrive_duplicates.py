"""One copy of every file, whatever Drive answers: DriveStore against the simulated Drive's weather.

The simulated Drive's switches make what users meet: inserts Drive commits and
then answers 500 or never answers (phantom writes), new files that files.list
shows seconds late, a title held twice in one folder (another runtime's copy,
a file put there by hand, a folder made twice). Every test ends by looking at
what the simulated Drive holds, not at what the store believes.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from support import put_bytes

from notebook_builder.cells.c00_config import IntegrityError, StoreError
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c17_snapshots import checkpoint, snapshot_sequence
from notebook_builder.cells.c07_drive_api import connect_drive
from notebook_builder.cells.drive_store import INSERT_JOURNAL, DriveStore, conflict_title, resolve_duplicates
from notebook_builder.simdrive import SimDrive

FOLDER = "ky_court"


def sha_name(number: int) -> str:
    return f"pdf_by_hash/{hashlib.sha256(str(number).encode()).hexdigest()}.pdf"


@pytest.fixture
def sim():
    with SimDrive() as drive:
        yield drive


def drive_store(sim: SimDrive, **options) -> DriveStore:
    options.setdefault("backoff_base", 0.01)
    options.setdefault("backoff_cap", 0.05)
    return DriveStore(connect_drive(sim.api_root, http_timeout=5), FOLDER, sleep=time.sleep, **options)


def held_twice(sim: SimDrive, *folders: str) -> list[str]:
    """Titles (files and folders) the simulated Drive holds more than once in one folder."""
    twice = []
    for folder in ("",) + folders:
        children = sim.folders_in(folder) + (sim.files_in(folder) if folder else [])
        twice += [f"{folder}/{title} x{n}" for title, n in Counter(f["title"] for f in children).items() if n > 1]
    return twice


def entry(id_: str, data: bytes, created: str, modified: str | None = None, version: int = 1) -> dict:
    return {"id": id_, "md5Checksum": hashlib.md5(data).hexdigest(), "createdDate": created,
            "modifiedDate": modified or created, "version": str(version)}


# ------------------------------------------------------------------ the decision, with plain values


def test_identical_copies_keep_the_oldest_and_differing_rewritten_copies_prefer_the_newest():
    old = entry("A", b"v1", "2026-01-01", "2026-01-02")
    twin = entry("B", b"v1", "2026-01-03")
    newest = entry("C", b"v2", "2026-01-01", "2026-01-05")
    same_time = entry("D", b"v3", "2026-01-01", "2026-01-05", version=7)
    keep, trash = resolve_duplicates([twin, newest, old, same_time], content_addressed=False)
    assert [copy["id"] for copy in keep] == ["D", "C", "A"]    # modifiedDate, then version
    assert [copy["id"] for copy in trash] == ["B"]             # identical to the older A, which stays
    assert conflict_title("status.json", "C") == "status.json.conflict-C"


def test_differing_copies_of_a_content_addressed_name_prefer_the_oldest():
    keep, trash = resolve_duplicates([entry("NEW", b"by hand", "2026-02-01"), entry("OLD", b"%PDF", "2026-01-01"),
                                      entry("OLD2", b"%PDF", "2026-01-09")], content_addressed=True)
    assert [copy["id"] for copy in keep] == ["OLD", "NEW"] and [copy["id"] for copy in trash] == ["OLD2"]


# ------------------------------------------------------------------ 1. one copy, whatever Drive answers


def test_phantom_writes_inside_the_listing_delay_leave_one_copy_of_every_title(sim):
    sim.list_delay, sim.phantom_rate, sim.error_rate = 5.0, 0.3, 0.05
    store = drive_store(sim, max_tries=12)
    for number in range(12):
        put_bytes(store, sha_name(number), b"%PDF " + bytes([number]) * 20)
        put_bytes(store, "status.json", b'{"n": %d}' % number)
    assert sim.rejected["phantom"] + sim.rejected["lost"] > 3
    assert sim.answers["insert 409"] > 0                     # repeated inserts were answered, not doubled
    assert held_twice(sim, FOLDER, f"{FOLDER}/pdf_by_hash") == []
    assert len(sim.files_in(f"{FOLDER}/pdf_by_hash")) == 12
    assert [sim.content(f["id"]) for f in sim.files_in(FOLDER)] == [b'{"n": 11}']
    assert store.read_file("status.json") == b'{"n": 11}'


def test_a_run_killed_after_drive_committed_its_insert_is_known_to_the_next_by_the_insert_journal(sim, tmp_path):
    sim.list_delay = 60.0                                    # the next run starts well inside the delay
    journal = tmp_path / INSERT_JOURNAL
    killed = drive_store(sim, insert_journal=journal, max_tries=1)
    put_bytes(killed, "status.json", b'{"run": 1}')
    sim.fail_next("lost", 3, ("insert",))                    # committed; the run dies before an answer
    with pytest.raises(StoreError):
        put_bytes(killed, "failed_inventory.csv", b"a,b\n")
    assert journal.is_file()

    successor = drive_store(sim, insert_journal=journal)
    put_bytes(successor, "failed_inventory.csv", b"a,b\nc,d\n")
    assert [f["title"] for f in sim.files_in(FOLDER)].count("failed_inventory.csv") == 1
    assert successor.read_file("failed_inventory.csv") == b"a,b\nc,d\n"
    assert sim.answers["insert 200"] == 2                    # the root folder and status.json: nothing twice


def test_a_folder_created_by_an_insert_answered_500_is_one_folder(sim):
    sim.list_delay = 30.0
    sim.fail_next("phantom", 2, ("insert",))                 # the root folder and pdf_by_hash, both
    store = drive_store(sim)
    put_bytes(store, sha_name(1), b"%PDF one")
    assert held_twice(sim, FOLDER) == []
    assert [f["title"] for f in sim.folders_in(FOLDER)] == ["pdf_by_hash"]


# ------------------------------------------------------------------ 2. duplicates already there are healed


def test_identical_copies_keep_the_oldest_and_the_others_go_to_the_trash(sim):
    store = drive_store(sim)
    put_bytes(store, sha_name(1), b"%PDF one")
    folder = sim.folder_id(f"{FOLDER}/pdf_by_hash")
    title = sha_name(1).split("/")[1]
    copy = sim.add_file(folder, title, b"%PDF one")              # a second runtime wrote it too
    fresh = drive_store(sim)
    assert fresh.list_dir("pdf_by_hash") == [sha_name(1)]
    held = sim.files_in(f"{FOLDER}/pdf_by_hash")
    assert [f["id"] for f in held] != [copy["id"]] and len(held) == 1
    assert sim._files[copy["id"]]["labels"]["trashed"] and sim.content(copy["id"]) == b"%PDF one"   # trash, kept
    report = fresh.sweep_duplicates([""])
    assert report["found"] == [sha_name(1)] and report["trashed"] == 1 and report["conflicts"] == []


def test_differing_pdf_under_a_content_addressed_name_is_an_integrity_failure_nothing_changed(sim, tmp_path):
    store = drive_store(sim)
    put_bytes(store, sha_name(1), b"%PDF one")
    folder = sim.folder_id(f"{FOLDER}/pdf_by_hash")
    by_hand = sim.add_file(folder, sha_name(1).split("/")[1], b"my notes, not a PDF")
    fresh = drive_store(sim)
    assert fresh.read_file(sha_name(1)) == b"%PDF one"           # the oldest is read
    report = fresh.sweep_duplicates(["", "pdf_by_hash"])
    assert report["conflicts"] == [sha_name(1)] and report["trashed"] == 0 and report["renamed"] == []
    assert len(sim.files_in(f"{FOLDER}/pdf_by_hash")) == 2 and sim.content(by_hand["id"]) == b"my notes, not a PDF"
    local = tmp_path / "other.pdf"
    local.write_bytes(b"%PDF other")
    with pytest.raises(IntegrityError, match="refuses to overwrite"):
        fresh.upload_file(sha_name(1), local)

    from notebook_builder.cells.c90_verify import VerifyResult, _verify_duplicates, format_verify_report
    result = VerifyResult()
    result.duplicates = _verify_duplicates(SimpleNamespace(store=fresh), result)
    assert any("held twice with different bytes" in reason and sha_name(1) in reason for reason in result.reasons)
    assert "1 content-addressed names with different bytes" in format_verify_report(result)


def snapshot(tmp_path, name: str, sequence: int) -> bytes:
    """The bytes of a database snapshot whose checkpoint_seq is `sequence`."""
    db = Database.open(tmp_path / name / "ky_court.sqlite")
    db.kv_set("checkpoint_seq", str(sequence - 1))            # a checkpoint counts itself
    db.close()
    checkpoint(tmp_path / name / "ky_court.sqlite", tmp_path / name / "snapshot.sqlite")
    assert snapshot_sequence(tmp_path / name / "snapshot.sqlite")[0] == sequence
    return (tmp_path / name / "snapshot.sqlite").read_bytes()


def test_differing_database_copies_keep_the_newest_sound_one_and_rename_the_rest(sim, tmp_path):
    older, newer = snapshot(tmp_path, "a", 4), snapshot(tmp_path, "b", 9)
    store = drive_store(sim)
    put_bytes(store, "ky_court.sqlite", older)
    root = sim.folder_id(FOLDER)
    sound = sim.add_file(root, "ky_court.sqlite", newer)
    torn = sim.add_file(root, "ky_court.sqlite", newer[:len(newer) // 2])       # newest, truncated on Drive
    fresh = drive_store(sim)
    assert fresh.read_file("ky_court.sqlite") == newer
    titles = sorted(f["title"] for f in sim.files_in(FOLDER))
    ours = next(f["id"] for f in sim.files_in(FOLDER) if f["id"] not in (sound["id"], torn["id"]))
    assert titles == sorted(["ky_court.sqlite", conflict_title("ky_court.sqlite", ours),
                             conflict_title("ky_court.sqlite", torn["id"])])
    assert sim.file_by_name(f"{FOLDER}/ky_court.sqlite")["id"] == sound["id"]
    assert sim.content(torn["id"]) == newer[:len(newer) // 2]                 # nothing lost, nothing overwritten
    assert sorted(fresh.list_dir("")) == titles


def test_a_restore_reads_the_same_pick_as_every_other_reader(sim, tmp_path):
    from notebook_builder.cells.c00_config import load_config
    from notebook_builder.cells.c35_context import open_context
    from notebook_builder.cells.c40_restore import restore
    older, newer = snapshot(tmp_path, "a", 4), snapshot(tmp_path, "b", 9)
    put_bytes(drive_store(sim), "ky_court.sqlite", newer)
    sim.add_file(sim.folder_id(FOLDER), "ky_court.sqlite", older)           # newer by date, older by content
    cfg = load_config({"KY_STORE": "drive", "KY_DRIVE_API": sim.api_root, "KY_DRIVE_FOLDER": FOLDER,
                       "KY_WORKSPACE": str(tmp_path / "fresh"), "KY_PROGRESS": "0"})
    ctx = open_context(cfg)
    try:
        assert restore(ctx).checkpoint_seq == 4                             # the newest copy, as Drive dates it
    finally:
        ctx.close()
    assert drive_store(sim).read_file("ky_court.sqlite") == older


def test_no_sound_database_copy_leaves_every_copy_as_it_is_and_says_so(sim, tmp_path):
    data = snapshot(tmp_path, "a", 4)
    root = sim.add_folder("root", FOLDER)["id"]
    sim.add_file(root, "ky_court.sqlite", data[:100])
    sim.add_file(root, "ky_court.sqlite", data[:200])
    store = drive_store(sim)
    assert store.read_file("ky_court.sqlite") == data[:200]                 # the newest; restore judges it
    report = store.sweep_duplicates([""])
    assert [f["title"] for f in sim.files_in(FOLDER)] == ["ky_court.sqlite"] * 2
    assert any("none of the 2 copies of ky_court.sqlite opens as a sound database" in note for note in report["notes"])


@pytest.mark.parametrize("first_look", ["a lookup of the folder", "a listing of the top folder"])
def test_a_folder_made_twice_is_merged_into_the_oldest_and_every_text_read(sim, tmp_path, first_look):
    store = drive_store(sim)
    items = []
    for number in range(6):
        path = tmp_path / f"{number}.txt"
        path.write_text(f"opinion {number} " * 30)
        items.append((f"text/{hashlib.sha256(str(number).encode()).hexdigest()}.txt", path))
    store.upload_files(items[:3])
    twin = sim.add_folder(sim.folder_id(FOLDER), "text")                   # a second runtime made its own
    drive_store_in(sim, twin["id"]).upload_files(items[3:])
    assert len(sim.folders_in(FOLDER)) == 2

    fresh = drive_store(sim)
    if first_look == "a listing of the top folder":
        assert fresh.sweep_duplicates([""])["merged"] == 1
    for name, path in items:
        assert fresh.read_file(name) == path.read_bytes()
    assert held_twice(sim, FOLDER) == [] and sim._files[twin["id"]]["labels"]["trashed"]
    assert len(sim.files_in(f"{FOLDER}/text")) == 2                          # both packs, in the oldest
    assert fresh.sweep_duplicates(["", "text"])["merged"] == 1


def drive_store_in(sim: SimDrive, text_folder_id: str) -> DriveStore:
    """A store whose text folder is `text_folder_id` (the second runtime's own copy of it)."""
    store = drive_store(sim)
    store._folder_ids[f"{FOLDER}/text"] = text_folder_id
    store._folder_ids[FOLDER] = sim.folder_id(FOLDER)
    store._listings[text_folder_id] = {}
    return store


def test_a_folder_named_like_the_store_inside_it_is_reported_and_left_alone(sim):
    store = drive_store(sim)
    put_bytes(store, "status.json", b"{}")
    copy = sim.add_folder(sim.folder_id(FOLDER), FOLDER)                   # someone copied the store into itself
    inside = sim.add_file(copy["id"], "status.json", b'{"copy": 1}')
    fresh = drive_store(sim)
    report = fresh.sweep_duplicates(["", "pdf_by_hash"])
    assert any(f"{FOLDER}/{FOLDER} is named like the store's own folder" in note for note in report["notes"])
    assert fresh.read_file("status.json") == b"{}"
    assert sim.content(inside["id"]) == b'{"copy": 1}' and not sim._files[copy["id"]]["labels"]["trashed"]
    assert report["found"] == [] and report["merged"] == 0


# ------------------------------------------------------------------ 3. one writer a name


def test_two_threads_writing_one_new_name_at_once_make_one_file_holding_the_later_bytes(sim):
    sim.list_delay, sim.phantom_rate = 2.0, 0.2
    store = drive_store(sim, max_tries=12)
    start = threading.Barrier(2)
    finished: list[bytes] = []
    lock = threading.Lock()

    def write(label: bytes) -> None:
        start.wait()
        for number in range(5):
            data = label + b"%d" % number
            put_bytes(store, "failed_inventory.csv", data)
            with lock:
                finished.append(data)
    threads = [threading.Thread(target=write, args=(label,)) for label in (b"verify ", b"checkpointer ")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert held_twice(sim, FOLDER) == []
    held = [f for f in sim.files_in(FOLDER) if f["title"] == "failed_inventory.csv"]
    assert len(held) == 1 and sim.content(held[0]["id"]) in {b"verify 4", b"checkpointer 4"}   # a last write
    assert len(finished) == 10
