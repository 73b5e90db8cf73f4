"""Restore: newest recorded state wins; bad candidates are reported; hostile archives refused; nothing destroyed."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest
from support import open_test_context, put_bytes

from notebook_builder.cells.c00_config import IntegrityError, StoreError, load_config
from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import KV_STORE_CHECKPOINT_SEQ, Database
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c17_snapshots import StoreState, checkpoint, record_store_checkpoint, snapshot_sequence
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c22_page_packs import pack_folder, read_pack
from notebook_builder.cells.c35_context import open_context, write_status
from notebook_builder.cells.c06_layout import is_resume_archive_name
from notebook_builder.cells.c39_checkpoint import (Checkpointer, push_checkpoint, push_journal, resume_archive_name,
                                                   write_resume_archive)
from notebook_builder.cells.c40_restore import restore, resume_member_problem, stale_workspace_entries


def make_context(tmp_path: Path, workspace: str = "ws"):
    return open_test_context(tmp_path, name=workspace, database=False)


def add_documents(ctx, count: int) -> None:
    db = ctx.open_database()
    start = WorkQueues(db).document_count()
    DiscoveryState(db).upsert_discovered({"document_id": f"D{i:04d}", "case_number": "2021-CA-0001", "court": "CA"}
                         for i in range(start, start + count))


def document_rows(db_path: Path) -> list[tuple]:
    db = Database.open(db_path)
    try:
        return [tuple(row) for row in db.iter_documents()]
    finally:
        db.close()


def restored_count(ctx) -> int:
    return len(document_rows(ctx.db_path))


def store_path(tmp_path: Path, name: str = "") -> Path:
    return tmp_path / "store" / name


def archive_state(ctx, count: int) -> str:
    """Adds `count` documents, then writes a resume archive of that state (seq goes up)."""
    add_documents(ctx, count)
    write_status(ctx)
    return write_resume_archive(ctx)


def stored_sequence(tmp_path: Path) -> int:
    """The checkpoint sequence of the state the store's page packs hold (its newest manifest)."""
    packs = sorted(store_path(tmp_path, pack_folder(DB_FILENAME)).iterdir())
    return read_pack(packs[-1])[0]["checkpoint_seq"]


def earlier_version_snapshot(ctx, tmp_path: Path) -> None:
    """The whole ky_court.sqlite an earlier version kept in the store (its checkpoint)."""
    checkpoint(ctx.db_path, store_path(tmp_path, DB_FILENAME))


def earlier_version_archive(ctx, tmp_path: Path, count: int) -> str:
    """Adds `count` documents, then writes a resume archive as an earlier version did: the whole
    database and status.json inside."""
    add_documents(ctx, count)
    write_status(ctx)
    snapshot = tmp_path / "earlier.sqlite"
    info = checkpoint(ctx.db_path, snapshot)
    name = resume_archive_name(__import__("datetime").datetime.now(__import__("datetime").timezone.utc),
                               info["checkpoint_seq"])
    store_path(tmp_path).mkdir(exist_ok=True)
    with tarfile.open(store_path(tmp_path, name), "w:gz") as tar:
        tar.add(str(snapshot), arcname=DB_FILENAME)
        tar.add(str(ctx.path("status.json")), arcname="status.json")
    snapshot.unlink()
    time.sleep(1.01)       # the next archive's name (its stamp) differs
    return name


def archive_then_newer_snapshot(tmp_path: Path, more: int) -> str:
    """An earlier version's store: a resume archive of 2 documents, then `more` documents as its
    newer whole ky_court.sqlite; returns the archive's name (what restore falls back to when the
    snapshot is bad)."""
    source = make_context(tmp_path)
    name = earlier_version_archive(source, tmp_path, 2)
    add_documents(source, more)     # 3000: enough pages that half a file is missing real data
    earlier_version_snapshot(source, tmp_path)
    source.close()
    return name


def fresh_runtime(tmp_path: Path, workspace: str = "fresh"):
    return make_context(tmp_path, workspace)


# ------------------------------------------------------ choosing the newest


def test_newest_recorded_checkpoint_wins_whatever_names_and_mtimes_say(tmp_path):
    source = make_context(tmp_path)
    older = archive_state(source, 2)
    newer = archive_state(source, 3)
    source.close()
    # Names and file times lie: the older state gets the later stamp, the bigger seq, the newer mtime.
    disguised_older = "ky_court-WIP-resume-29991231T235959Z-999.tar.gz"
    disguised_newer = "ky_court-WIP-resume-19700101T000000Z-0.tar.gz"
    os.rename(store_path(tmp_path, older), store_path(tmp_path, disguised_older))
    os.rename(store_path(tmp_path, newer), store_path(tmp_path, disguised_newer))
    os.utime(store_path(tmp_path, disguised_newer), (1, 1))
    os.utime(store_path(tmp_path, disguised_older), (4_000_000_000, 4_000_000_000))

    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.restored and result.source == disguised_newer
    assert result.checkpoint_seq == 2 and restored_count(ctx) == 5
    assert result.rejected == []
    assert sorted(result.candidates) == sorted([pack_folder(DB_FILENAME), disguised_older, disguised_newer])


def test_the_page_packs_state_newer_than_every_archive_wins(tmp_path):
    source = make_context(tmp_path)
    archive_state(source, 2)
    add_documents(source, 4)
    info = push_checkpoint(source)
    source.close()
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == pack_folder(DB_FILENAME) and result.checkpoint_seq == info["checkpoint_seq"]
    assert restored_count(ctx) == 6
    assert ctx.path("checkpoint/ky_court.pages").is_file()       # the next checkpoint sends what changed


def test_an_earlier_versions_whole_snapshot_newer_than_every_archive_wins(tmp_path):
    source = make_context(tmp_path)
    earlier_version_archive(source, tmp_path, 2)
    add_documents(source, 4)
    earlier_version_snapshot(source, tmp_path)
    source.close()
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == DB_FILENAME and restored_count(ctx) == 6
    assert not ctx.path("checkpoint/ky_court.pages").exists()    # the first checkpoint sends every page


def test_archive_newer_than_the_store_snapshot_wins_and_brings_status(tmp_path):
    source = make_context(tmp_path)
    add_documents(source, 1)
    earlier_version_snapshot(source, tmp_path)
    name = archive_state(source, 2)
    source.close()
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and restored_count(ctx) == 3
    assert json.loads(ctx.path("status.json").read_text())["counts"]["discovered"] == 3


def test_a_damaged_newest_pack_falls_back_to_the_newest_whole_state(tmp_path):
    source = make_context(tmp_path)
    older = archive_state(source, 2)
    add_documents(source, 3)
    newest = push_checkpoint(source)["pushed"].manifest
    source.close()
    flip_middle_bytes(store_path(tmp_path, newest))
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source in (older, pack_folder(DB_FILENAME)) and restored_count(ctx) == 2
    assert store_path(tmp_path, newest).is_file()        # reported, never deleted by restore


# ------------------------------------------------------ bad candidates


def two_archives_then_damage(tmp_path: Path, damage) -> tuple[str, str]:
    source = make_context(tmp_path)                 # an earlier version's archives: only they compete
    good = earlier_version_archive(source, tmp_path, 2)
    bad = earlier_version_archive(source, tmp_path, 3)
    source.close()
    damage(store_path(tmp_path, bad))
    return good, bad


def flip_middle_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(255 - b for b in data[middle:middle + 64])
    path.write_bytes(bytes(data))


def truncate_to_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


@pytest.mark.parametrize("damage", [flip_middle_bytes, truncate_to_half], ids=["corrupt", "truncated"])
def test_a_damaged_newest_archive_is_reported_and_the_next_one_used(tmp_path, damage):
    good, bad = two_archives_then_damage(tmp_path, damage)
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == good and restored_count(ctx) == 2
    assert [name for name, _reason in result.rejected] == [bad]
    assert store_path(tmp_path, bad).is_file()     # reported, never deleted


def test_a_store_snapshot_that_is_not_sqlite_is_rejected(tmp_path):
    source = make_context(tmp_path)
    name = earlier_version_archive(source, tmp_path, 2)
    source.close()
    store_path(tmp_path, DB_FILENAME).write_bytes(b"this is not a database\n" * 200)
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and restored_count(ctx) == 2
    assert result.rejected[0][0] == DB_FILENAME and "not an SQLite database" in result.rejected[0][1]


def test_a_truncated_store_snapshot_is_rejected(tmp_path):
    name = archive_then_newer_snapshot(tmp_path, 3000)
    truncate_to_half(store_path(tmp_path, DB_FILENAME))
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and restored_count(ctx) == 2
    assert [rejected for rejected, _reason in result.rejected] == [DB_FILENAME]


def test_a_snapshot_with_a_damaged_page_is_rejected_even_though_its_sequence_reads(tmp_path):
    name = archive_then_newer_snapshot(tmp_path, 3000)
    snapshot = store_path(tmp_path, DB_FILENAME)
    data = bytearray(snapshot.read_bytes())
    page = 4096
    middle = len(data) // page // 2
    data[middle * page:(middle + 1) * page] = bytes(page)
    snapshot.write_bytes(bytes(data))
    assert snapshot_sequence(snapshot)[0] > 1       # kv is intact: only quick_check can tell
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and restored_count(ctx) == 2
    assert result.rejected[0][0] == DB_FILENAME and "quick_check" in result.rejected[0][1]


def test_a_snapshot_recording_a_garbled_sequence_is_rejected_and_the_next_one_used(tmp_path):
    import sqlite3
    name = archive_then_newer_snapshot(tmp_path, 3)
    with sqlite3.connect(store_path(tmp_path, DB_FILENAME)) as conn:
        conn.execute("UPDATE kv SET value = 'seven' WHERE key = 'checkpoint_seq'")
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and restored_count(ctx) == 2
    assert result.rejected[0][0] == DB_FILENAME and "'seven', not a number" in result.rejected[0][1]


def test_when_no_candidate_is_usable_restore_raises_and_changes_nothing(tmp_path):
    store_path(tmp_path).mkdir()
    store_path(tmp_path, DB_FILENAME).write_bytes(b"garbage" * 100)
    ctx = fresh_runtime(tmp_path)
    ctx.path("pdf_by_hash/old.pdf").write_bytes(b"%PDF old")
    with pytest.raises(IntegrityError, match="none of it is usable"):
        restore(ctx)
    assert ctx.path("pdf_by_hash/old.pdf").read_bytes() == b"%PDF old"
    assert not ctx.db_path.exists()
    assert store_path(tmp_path, DB_FILENAME).read_bytes() == b"garbage" * 100
    assert [p.name for p in ctx.workspace.iterdir() if p.name.startswith(".restore-")] == []


# ------------------------------------------------------ hostile archives


def hostile_archive(tmp_path: Path, snapshot: Path, add_hostile) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(snapshot), arcname=DB_FILENAME)
        add_hostile(tar)
    return buffer.getvalue()


def regular(name: str, data: bytes = b"owned\n"):
    def add(tar):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return add


def link(name: str, target: str, kind: bytes):
    def add(tar):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        tar.addfile(info)
    return add


def device(name: str):
    def add(tar):
        info = tarfile.TarInfo(name)
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
        tar.addfile(info)
    return add


HOSTILE = {
    "absolute path": lambda outside: regular(str(outside / "evil-absolute")),
    "dot-dot": lambda outside: regular("../../outside/evil-dotdot"),
    "symlink to /etc": lambda outside: link("etc-link", "/etc", tarfile.SYMTYPE),
    "symlink climbing out": lambda outside: link("sub/up", "../../../outside", tarfile.SYMTYPE),
    "hardlink outside": lambda outside: link("hard", "../../outside/evil-hard", tarfile.LNKTYPE),
    "device": lambda outside: device("null-device"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_archives_are_refused_and_nothing_is_written_outside(tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    source = make_context(tmp_path)
    good = archive_state(source, 2)
    add_documents(source, 5)
    hostile_snapshot = tmp_path / "hostile.sqlite"
    checkpoint(source.db_path, hostile_snapshot)     # a NEWER state: refusing it is what matters
    source.close()
    hostile_name = "ky_court-WIP-resume-20300101T000000Z-50.tar.gz"
    store_path(tmp_path, hostile_name).write_bytes(
        hostile_archive(tmp_path, hostile_snapshot, HOSTILE[kind](outside)))

    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source in (good, DB_FILENAME) and restored_count(ctx) == 2
    assert [name for name, _ in result.rejected] == [hostile_name]
    assert "hostile archive member" in result.rejected[0][1]
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "hostile.sqlite", "outside", "store", "ws"]


def test_member_checks_are_plain_decisions():
    def member(name, kind=tarfile.REGTYPE, target=""):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        return info
    assert resume_member_problem(member(DB_FILENAME)) is None
    assert resume_member_problem(member("./status.json")) is None
    assert resume_member_problem(member("folder", tarfile.DIRTYPE)) is None
    assert resume_member_problem(member("a/inside", tarfile.SYMTYPE, "../status.json")) is None
    assert resume_member_problem(member("/etc/passwd")) == "absolute path"
    assert resume_member_problem(member("a/../../x")) == "path with '..'"
    assert resume_member_problem(member("x", tarfile.SYMTYPE, "/etc/shadow")).startswith("link to absolute")
    assert "outside" in resume_member_problem(member("a/x", tarfile.SYMTYPE, "../../x"))
    assert "outside" in resume_member_problem(member("x", tarfile.LNKTYPE, "../x"))
    assert resume_member_problem(member("x", tarfile.BLKTYPE)) == "device file"
    assert resume_member_problem(member("x", tarfile.FIFOTYPE)) == "fifo"


# ------------------------------------------------------ the workspace


def test_a_stale_workspace_is_moved_aside_intact_and_pdf_backup_stays(tmp_path):
    source = make_context(tmp_path)
    archive_state(source, 2)
    source.close()
    ctx = fresh_runtime(tmp_path)
    stale_files = {"pdf_by_hash/abc.pdf": b"%PDF old run", "tmp/D1.part": b"torn",
                   DB_FILENAME: b"not sqlite at all", "status.json": b"{}"}
    for name, data in stale_files.items():
        ctx.path(name).write_bytes(data)
    ctx.path("pdf_backup/legacy.pdf").write_bytes(b"%PDF legacy")

    result = restore(ctx)
    aside = tmp_path / "fresh-pre-restore"
    assert result.restored and result.moved_aside == str(aside)
    for name, data in stale_files.items():
        assert (aside / name).read_bytes() == data
    assert ctx.path("pdf_backup/legacy.pdf").read_bytes() == b"%PDF legacy"
    assert not ctx.path("pdf_by_hash/abc.pdf").exists() and ctx.path("pdf_by_hash").is_dir()
    assert restored_count(ctx) == 2

    # Again: the first folder aside is kept, the next one gets -2.
    ctx.db_path.unlink()
    ctx.path("text/again.txt").write_text("second stale run")
    result = restore(ctx)
    assert result.moved_aside == str(tmp_path / "fresh-pre-restore-2")
    assert (aside / "pdf_by_hash/abc.pdf").is_file()
    assert (tmp_path / "fresh-pre-restore-2" / "text/again.txt").read_text() == "second stale run"


def test_empty_layout_folders_and_pdf_backup_are_not_stale(tmp_path):
    ctx = fresh_runtime(tmp_path)
    ctx.path("pdf_backup/legacy.pdf").write_bytes(b"%PDF legacy")
    assert stale_workspace_entries(ctx.workspace) == []
    ctx.path("checkpoint/ky_court.sqlite").write_bytes(b"x")
    assert stale_workspace_entries(ctx.workspace) == [ctx.path("checkpoint")]


def test_a_workspace_with_a_database_is_left_alone(tmp_path):
    source = make_context(tmp_path)
    archive_state(source, 5)
    source.close()
    ctx = fresh_runtime(tmp_path)
    add_documents(ctx, 1)
    ctx.close()
    before = ctx.db_path.read_bytes()
    result = restore(ctx)
    assert not result.restored and result.message == "workspace has a database: nothing to restore"
    assert ctx.db_path.read_bytes() == before and restored_count(ctx) == 1
    assert not (tmp_path / "fresh-pre-restore").exists()


def test_an_empty_store_means_a_fresh_start(tmp_path):
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert not result.restored and result.candidates == []
    assert "no saved state" in result.message and not ctx.db_path.exists()


# ------------------------------------------------------ the writer


def test_resume_archive_round_trip_gives_the_same_rows(tmp_path):
    source = make_context(tmp_path)
    add_documents(source, 7)
    DownloadRecords(source.db).mark_download_failed("D0003", http_status=404, error="not found")
    status = write_status(source, verify="PASS")
    name = write_resume_archive(source)
    rows = document_rows(source.db_path)
    source.close()
    shutil.rmtree(tmp_path / "ws")

    ctx = make_context(tmp_path)
    result = restore(ctx)
    assert result.source == name
    assert document_rows(ctx.db_path) == rows
    assert json.loads(ctx.path("status.json").read_text()) == status
    assert snapshot_sequence(ctx.db_path)[0] == result.checkpoint_seq


def test_each_resume_archive_is_a_new_name_naming_its_state_in_page_packs(tmp_path):
    source = make_context(tmp_path)
    first = archive_state(source, 1)
    first_bytes = store_path(tmp_path, first).read_bytes()
    second = archive_state(source, 1)
    source.close()
    assert first != second and is_resume_archive_name(first) and is_resume_archive_name(second)
    assert store_path(tmp_path, first).read_bytes() == first_bytes
    with tarfile.open(store_path(tmp_path, second)) as tar:
        assert sorted(tar.getnames()) == ["resume.json", "status.json"]
        manifest = json.loads(tar.extractfile("resume.json").read())
    assert manifest["checkpoint_seq"] == 2 and manifest["packs"]
    assert all(store_path(tmp_path, pack).is_file() for pack in manifest["packs"])


def test_equal_recorded_states_prefer_the_archive_which_also_brings_status(tmp_path):
    source = make_context(tmp_path)
    name = archive_state(source, 2)     # the store snapshot records the same checkpoint
    source.close()
    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)
    assert result.source == name and ctx.path("status.json").is_file()


# ------------------------------------------------------------ download journal


def download_into_store(ctx, document_id: str, *, in_store: bool = True) -> str:
    """The document's PDF as the download stage leaves it: in the store (unless not), row downloaded."""
    data = f"%PDF-1.4 {document_id}".encode()
    sha = hashlib.sha256(data).hexdigest()
    if in_store:
        put_bytes(ctx.store, f"pdf_by_hash/{sha}.pdf", data)
    assert DownloadRecords(ctx.db).mark_downloaded(document_id, sha256=sha, size_bytes=len(data), local_pdf=f"pdf_by_hash/{sha}.pdf")
    return sha


def test_a_fresh_runtime_replays_the_downloads_the_journal_lists_after_its_snapshot(tmp_path):
    source = make_context(tmp_path)
    add_documents(source, 4)                                   # D0000 .. D0003
    download_into_store(source, "D0000")
    sequence = push_checkpoint(source)["checkpoint_seq"]      # the snapshot: D0000 downloaded
    sha = download_into_store(source, "D0001")                 # after the snapshot, PDF in the store
    download_into_store(source, "D0002", in_store=False)       # its upload never happened
    assert push_journal(source) == 2
    source.close()
    assert store_path(tmp_path, f"journal/downloads-after-{sequence}.jsonl").is_file()

    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)

    assert result.restored and result.checkpoint_seq == sequence and result.replayed == 1
    db = ctx.open_database()
    states = {row["document_id"]: (row["status"], row["sha256"]) for row in db.iter_documents()}
    assert states["D0001"] == ("downloaded", sha) and db.get_document("D0001")["local_pdf"] == f"pdf_by_hash/{sha}.pdf"
    assert states["D0002"] == ("discovered", None) and states["D0003"] == ("discovered", None)
    assert states["D0000"][0] == "downloaded"
    assert db.kv_get("store_checkpoint_seq") == str(sequence)   # the next journal follows this state


def test_a_journal_older_than_the_snapshot_or_with_bad_lines_replays_nothing_false(tmp_path):
    source = make_context(tmp_path)
    add_documents(source, 3)
    push_checkpoint(source)
    download_into_store(source, "D0000")
    push_journal(source)                                      # follows checkpoint n
    sequence = push_checkpoint(source)["checkpoint_seq"]      # n + 1 holds D0000 itself
    source.close()
    good = {"document_id": "D0001", "sha256": "b" * 64, "size_bytes": 3, "local_pdf": "../../etc/x", "attempts": 1}
    store = LocalStore(tmp_path / "store")
    put_bytes(store, "pdf_by_hash/" + "b" * 64 + ".pdf", b"pdf")
    put_bytes(store, "pdf_by_hash/" + "c" * 64 + ".pdf", b"pdf")
    lines = [json.dumps(good), "{torn", json.dumps({**good, "document_id": "D0002", "sha256": "C" * 64}),
             json.dumps({**good, "document_id": "D0002", "size_bytes": -1})]
    put_bytes(store, f"journal/downloads-after-{sequence}.jsonl", "\n".join(lines).encode())
    put_bytes(store, f"journal/downloads-after-{sequence - 1}.jsonl",
                      json.dumps({**good, "document_id": "D0002", "sha256": "c" * 64}).encode())

    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)

    assert result.replayed == 1
    db = ctx.open_database()
    assert db.get_document("D0001")["local_pdf"] == "pdf_by_hash/" + "b" * 64 + ".pdf"   # never the file's path
    assert db.get_document("D0002")["status"] == "discovered"   # bad lines, and the older journal, ignored
    assert db.get_document("D0000")["status"] == "downloaded"


def test_after_a_snapshot_fails_to_upload_the_journal_still_covers_every_later_download(tmp_path):
    class RefusesLaterSnapshots(LocalStore):
        snapshots = 0

        def upload_file(self, name, local_path):
            if name.startswith("db/"):
                self.snapshots += 1
                if self.snapshots > 1:
                    raise StoreError(f"HTTP 503 uploading {name}")
            super().upload_file(name, local_path)

    cfg = load_config(env={"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(tmp_path / "store")})
    source = open_context(cfg, store=RefusesLaterSnapshots(tmp_path / "store"))
    add_documents(source, 3)
    stored = push_checkpoint(source)["checkpoint_seq"]        # in the store
    download_into_store(source, "D0000")
    assert not push_checkpoint(source)["uploaded"]            # this one never reaches the store
    download_into_store(source, "D0001")
    assert push_journal(source) == 2
    source.close()
    assert [path.name for path in store_path(tmp_path, "journal").iterdir()] == [f"downloads-after-{stored}.jsonl"]

    ctx = fresh_runtime(tmp_path)
    result = restore(ctx)

    assert result.checkpoint_seq == stored and result.replayed == 2


def test_a_journal_that_cannot_be_read_never_stops_the_restore(tmp_path):
    class GarblesJournals(LocalStore):
        listings = []

        def list_dir(self, prefix=""):
            self.listings.append(prefix)
            return super().list_dir(prefix)

        def download_file(self, name, local_path):
            if name.startswith("journal/"):
                raise IntegrityError(f"Drive stored {name} with another md5")
            super().download_file(name, local_path)

    source = make_context(tmp_path)
    add_documents(source, 2)
    push_checkpoint(source)
    for number in range(2):
        download_into_store(source, f"D000{number}")
    push_journal(source)
    source.close()
    store = GarblesJournals(tmp_path / "store")
    ctx = open_context(make_context(tmp_path, "fresh").cfg, store=store)

    result = restore(ctx)

    assert result.restored and result.replayed == 0 and restored_count(ctx) == 2
    assert ctx.open_database().get_document("D0000")["status"] == "discovered"   # fetched again, nothing lost
    assert store.listings.count("pdf_by_hash") <= 1                          # one listing, not one per entry


def test_a_backup_credited_after_the_snapshot_is_in_the_journal(tmp_path):
    source = make_context(tmp_path)
    add_documents(source, 2)
    push_checkpoint(source)
    data = b"%PDF-1.4 a legacy backup"
    sha = hashlib.sha256(data).hexdigest()
    put_bytes(source.store, f"pdf_by_hash/{sha}.pdf", data)
    assert DownloadRecords(source.db).credit_backup("D0001", sha256=sha, size_bytes=len(data), local_pdf=f"pdf_by_hash/{sha}.pdf")
    assert push_journal(source) == 1
    source.close()
    ctx = fresh_runtime(tmp_path)
    assert restore(ctx).replayed == 1
    assert ctx.open_database().get_document("D0001")["sha256"] == sha


def test_between_snapshots_the_checkpointer_keeps_the_journal_current(tmp_path):
    cfg = load_config(env={"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(tmp_path / "store"),
                           "KY_CHECKPOINT_SECONDS": "3600", "KY_JOURNAL_SECONDS": "0.05"})
    ctx = open_context(cfg)
    add_documents(ctx, 2)
    sequence = push_checkpoint(ctx)["checkpoint_seq"]
    journal = store_path(tmp_path, f"journal/downloads-after-{sequence}.jsonl")
    with Checkpointer(ctx):
        sha = download_into_store(ctx, "D0001")
        deadline = time.monotonic() + 10
        while not journal.is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert [json.loads(line)["sha256"] for line in journal.read_text().splitlines()] == [sha]
    assert stored_sequence(tmp_path) == sequence   # no snapshot meanwhile
    ctx.close()


def test_the_store_checkpoint_note_never_moves_backwards_whoever_writes_it(tmp_path):
    # Restore (StoreState.record_store_checkpoint) and the checkpointer (record_store_checkpoint on a
    # path) share one guarded write: an older snapshot's number never replaces a newer one.
    db = Database.open(tmp_path / DB_FILENAME)
    StoreState(db).record_store_checkpoint(7)
    StoreState(db).record_store_checkpoint(5)
    assert db.kv_get(KV_STORE_CHECKPOINT_SEQ) == "7"
    record_store_checkpoint(tmp_path / DB_FILENAME, 6)
    assert db.kv_get(KV_STORE_CHECKPOINT_SEQ) == "7"
    StoreState(db).record_store_checkpoint(9)
    assert db.kv_get(KV_STORE_CHECKPOINT_SEQ) == "9"
    db.close()
