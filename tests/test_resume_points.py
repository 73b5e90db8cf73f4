"""Resume points over an archive's life: the retention keeps the newest few, one a month and the
newest good one; what they name stays restorable; superseded state leaves the store."""
from __future__ import annotations

import json
import os
import sqlite3
import tarfile
from pathlib import Path

from support import open_test_context, put_bytes

from notebook_builder.cells.c06_layout import DB_FILENAME, is_resume_archive_name
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c17_snapshots import checkpoint
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c22_page_packs import PagePacks, pack_folder
from notebook_builder.cells.c35_context import write_status
from notebook_builder.cells.c39_checkpoint import (RESUME_POINTS, ResumePoint, push_checkpoint, push_journal,
                                                   resume_points_to_keep, write_resume_archive)
from notebook_builder.cells.c40_restore import restore


def point(name: str, taken: str, seq: int, good: bool = False) -> ResumePoint:
    return ResumePoint(name, taken, seq, good)


def test_the_retention_keeps_the_newest_few_one_a_month_and_the_newest_good_one():
    points = [point("a", "20260105T000000Z", 1, good=True), point("b", "20260120T000000Z", 2),
              point("c", "20260210T000000Z", 3), point("d", "20260305T000000Z", 4),
              point("e", "20260401T000000Z", 5), point("f", "20260402T000000Z", 6),
              point("g", "20260403T000000Z", 7), point("h", "20260404T000000Z", 8)]
    keep = resume_points_to_keep(points, last=3, months=3)
    # g, h, f: the newest; h (April), d (March), c (February): one a month; a: the newest good one.
    assert keep == {"h", "g", "f", "d", "c", "a"}
    assert resume_points_to_keep(points[:1]) == {"a"}
    assert resume_points_to_keep([]) == set()


def add_documents(ctx, count: int) -> None:
    start = ctx.open_database().conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    DiscoveryState(ctx.db).upsert_discovered({"document_id": f"D{i:04d}", "case_number": "2021-CA-0001", "court": "CA"}
                                             for i in range(start, start + count))


def store_names(tmp_path: Path) -> list[str]:
    return sorted(str(path.relative_to(tmp_path / "store")) for path in (tmp_path / "store").rglob("*") if path.is_file())


def test_points_the_retention_drops_leave_the_store_with_the_packs_only_they_named(tmp_path):
    ctx = open_test_context(tmp_path, name="ws", database=False)
    archives = []
    for month in range(1, 8):
        add_documents(ctx, 40)
        write_status(ctx, verify="PASS" if month == 2 else "FAIL")
        name = write_resume_archive(ctx)
        # As if each point were a month older than the next: its stamp in its name.
        aged = name.replace(name[len("ky_court-WIP-resume-"):len("ky_court-WIP-resume-") + 8], f"2026{month:02d}01")
        os.rename(tmp_path / "store" / name, tmp_path / "store" / aged)
        ctx.path(RESUME_POINTS).unlink(missing_ok=True)      # read again from the store, by their new names
        archives.append(aged)
    add_documents(ctx, 1)
    write_status(ctx, verify="FAIL")
    newest = write_resume_archive(ctx)
    ctx.close()
    held = [name for name in store_names(tmp_path) if is_resume_archive_name(name)]
    # The newest 3 (newest, month 7, month 6), one a month for the 3 newest months (12/2026 of the
    # newest, 07, 06), the newest good one (month 2): months 1, 3, 4 and 5 are gone.
    assert sorted(held) == sorted([newest, archives[6], archives[5], archives[1]])
    # Every kept point still makes its own state from the packs the store keeps for it.
    counts = {archives[6]: 280, archives[5]: 240, archives[1]: 80, newest: 281}
    for number, name in enumerate(held):
        with tarfile.open(tmp_path / "store" / name) as tar:
            manifest = json.loads(tar.extractfile("resume.json").read())["manifest"]
        made = tmp_path / f"point-{number}.sqlite"
        PagePacks(LocalStore(tmp_path / "store"), DB_FILENAME, tmp_path / f"point-{number}").restore(made, manifest=manifest)
        conn = sqlite3.connect(made)
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == counts[name]
        conn.close()
    result = restore(open_test_context(tmp_path, name="fresh", database=False))
    assert result.restored and result.rejected == [] and result.source == newest


def test_a_checkpoint_removes_the_journals_and_the_whole_snapshot_it_supersedes(tmp_path):
    ctx = open_test_context(tmp_path, name="ws", database=False)
    add_documents(ctx, 3)
    checkpoint(ctx.db_path, tmp_path / "store" / DB_FILENAME)        # what an earlier version kept
    first = push_checkpoint(ctx)
    put_bytes(ctx.store, f"journal/downloads-after-{first['checkpoint_seq']}.jsonl", b"{}\n")
    put_bytes(ctx.store, "journal/downloads-after-1.jsonl", b"{}\n")
    assert not (tmp_path / "store" / DB_FILENAME).exists()
    ctx.close()
    ctx = open_test_context(tmp_path, name="ws")            # a restarted run sweeps what a killed one left
    second = push_checkpoint(ctx)
    journals = sorted(path.name for path in (tmp_path / "store" / "journal").iterdir())
    assert journals == []                                            # both follow older snapshots now
    assert second["pushed"].manifest.startswith(pack_folder(DB_FILENAME))
    assert push_journal(ctx) == 0
    ctx.close()


def test_restore_makes_a_workspace_from_the_store_and_a_chosen_point_without_writing_to_it(tmp_path, capsys):
    from notebook_builder.cli import main
    ctx = open_test_context(tmp_path, name="ws", database=False)
    add_documents(ctx, 3)
    write_status(ctx, verify="PASS")
    first = write_resume_archive(ctx)
    add_documents(ctx, 4)
    write_status(ctx, verify="PASS")
    write_resume_archive(ctx)
    ctx.close()
    before = store_names(tmp_path)
    store = str(tmp_path / "store")
    assert main(["restore", "--workspace", str(tmp_path / "newest"), "--store", store]) == 0
    assert sqlite3.connect(tmp_path / "newest" / DB_FILENAME).execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 7
    assert main(["restore", "--workspace", str(tmp_path / "older"), "--store", store, "--point", first]) == 0
    assert sqlite3.connect(tmp_path / "older" / DB_FILENAME).execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 3
    assert store_names(tmp_path) == before                                  # nothing written to the store
    capsys.readouterr()
    assert main(["restore", "--workspace", str(tmp_path / "older"), "--store", store]) == 2      # has a database
    assert "has a database already" in capsys.readouterr().err
    assert main(["restore", "--workspace", str(tmp_path / "x"), "--store", store, "--point", "nope.tar.gz"]) == 1
    assert "no resume point 'nope.tar.gz'" in capsys.readouterr().err
    assert main(["restore", "--workspace", str(tmp_path / "y"), "--store", str(tmp_path / "typo")]) == 2
    assert not (tmp_path / "typo").exists()


def test_a_stale_workspace_never_puts_its_older_state_over_the_stores_newer_one(tmp_path):
    """Two workspaces on one store (a laptop's and a Colab runtime's): the one left behind is refused,
    names why, and removes nothing; moved aside, the next run restores the store's newest state."""
    from notebook_builder.cells.c90_verify import verify
    first = open_test_context(tmp_path, name="laptop", database=False)
    add_documents(first, 3)
    assert verify(first).passed
    first.close()
    second = open_test_context(tmp_path, name="colab", database=False)
    assert restore(second).restored
    add_documents(second, 5)
    assert verify(second).passed
    second.close()
    before = store_names(tmp_path)
    stale = open_test_context(tmp_path, name="laptop")
    add_documents(stale, 1)
    result = verify(stale)
    assert not result.passed and not result.checkpoint["uploaded"]
    assert any("newer state of its database" in reason and "move this workspace aside" in reason
               for reason in result.reasons)
    assert [name for name in store_names(tmp_path) if name.startswith("db/")] == \
        [name for name in before if name.startswith("db/")]                      # nothing sent, nothing removed
    stale.close()


def test_a_page_table_of_another_store_is_not_believed(tmp_path):
    """A store moved to a new folder (created empty, as command-line.md says) gets every page, so its
    packs make the whole database."""
    ctx = open_test_context(tmp_path, name="ws", database=False)
    add_documents(ctx, 30)
    push_checkpoint(ctx)
    ctx.close()
    moved = open_test_context(tmp_path, name="ws", store_name="new-store")
    add_documents(moved, 1)
    pushed = push_checkpoint(moved)["pushed"]
    assert pushed.changed_pages == (moved.path("checkpoint") / DB_FILENAME).stat().st_size // 4096
    made = tmp_path / "made.sqlite"
    PagePacks(LocalStore(tmp_path / "new-store"), DB_FILENAME, tmp_path / "made").restore(made)
    assert sqlite3.connect(made).execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 31
    moved.close()


def test_a_point_restored_by_hand_goes_on_as_the_newest_state(tmp_path):
    from notebook_builder.cells.c90_verify import verify
    from notebook_builder.cli import main
    ctx = open_test_context(tmp_path, name="ws", database=False)
    add_documents(ctx, 2)
    write_status(ctx, verify="PASS")
    older = write_resume_archive(ctx)
    add_documents(ctx, 6)
    write_status(ctx, verify="PASS")
    write_resume_archive(ctx)
    ctx.close()
    assert main(["restore", "--workspace", str(tmp_path / "back"), "--store", str(tmp_path / "store"),
                 "--point", older]) == 0
    back = open_test_context(tmp_path, name="back")
    assert back.db.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 2
    result = verify(back)
    assert result.passed, result.reasons                                        # not refused as stale
    back.close()
    again = open_test_context(tmp_path, name="again", database=False)
    assert restore(again).restored
    assert again.open_database().conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 2
    again.close()
