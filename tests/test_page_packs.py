"""The store's copy of a database as page packs (c22): a push sends what changed, a restore makes
the same bytes, packs no state needs go, and damage is passed over."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from notebook_builder.cells.c00_config import IntegrityError
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c22_page_packs import (MAX_PACKS, PackInfo, PagePacks, PageTable, pack_folder,
                                                   pack_sequence, packs_to_fold, page_runs, run_pages)


def make_database(path: Path, rows: int, *, start: int = 0) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"row {i} " * 40) for i in range(start, start + rows)))
    conn.commit()
    conn.close()


def update_rows(path: Path, ids) -> None:
    conn = sqlite3.connect(path)
    conn.executemany("UPDATE t SET body = ? WHERE id = ?", ((f"changed {i} " * 40, i) for i in ids))
    conn.commit()
    conn.close()


@pytest.fixture
def packs(tmp_path):
    store = LocalStore(tmp_path / "store")
    return PagePacks(store, "ky_court.sqlite", tmp_path / "workspace" / "checkpoint"), store


def test_a_push_then_a_restore_makes_the_same_bytes(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 2000)
    result = pages.push(database)
    assert result.uploaded and result.packs_sent == 1 and result.changed_pages == database.stat().st_size // 4096
    restored = tmp_path / "restored.sqlite"
    other = PagePacks(store, "ky_court.sqlite", tmp_path / "fresh" / "checkpoint")
    info = other.restore(restored)
    assert restored.read_bytes() == database.read_bytes()
    assert info.manifest == result.manifest and info.packs == result.packs
    assert other.table_path.is_file()


def test_a_second_push_sends_only_the_pages_that_changed(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 3000)
    first = pages.push(database)
    update_rows(database, [10, 11])
    second = pages.push(database)
    total_pages = database.stat().st_size // 4096
    assert second.uploaded and 1 <= second.changed_pages <= 8 < total_pages
    assert second.bytes_sent < first.bytes_sent / 5
    restored = tmp_path / "restored.sqlite"
    PagePacks(store, "ky_court.sqlite", tmp_path / "fresh").restore(restored)
    assert restored.read_bytes() == database.read_bytes()


def test_a_snapshot_the_store_holds_already_sends_nothing(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 500)
    pages.push(database)
    before = sorted(store.list_dir(pack_folder("ky_court.sqlite")))
    again = pages.push(database)
    assert again.uploaded and again.packs_sent == 0 and again.bytes_sent == 0
    assert sorted(store.list_dir(pack_folder("ky_court.sqlite"))) == before


def test_packs_no_state_needs_are_removed_and_pinned_ones_kept(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 300)
    first = pages.push(database)
    database.unlink()
    make_database(database, 400, start=5000)          # every page other: the first pack is all superseded
    second = pages.push(database, pinned=set(first.packs))
    held = set(store.list_dir(pack_folder("ky_court.sqlite")))
    assert first.manifest in held and first.manifest not in second.packs       # pinned: kept
    update_rows(database, range(5000, 5400, 2))
    third = pages.push(database, pinned=set())        # removes what its own state drops, by name
    assert first.manifest in set(store.list_dir(pack_folder("ky_court.sqlite")))
    assert pages.remove_unneeded(set(third.packs)) >= 1      # the sweep: what no kept state names
    assert set(store.list_dir(pack_folder("ky_court.sqlite"))) == set(third.packs)


def test_a_state_never_grows_past_its_pack_limit(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 200)
    for round_ in range(MAX_PACKS + 10):
        make_database(database, 5, start=10_000 + round_ * 5)
        result = pages.push(database)
        assert len(result.packs) <= MAX_PACKS
    restored = tmp_path / "restored.sqlite"
    PagePacks(store, "ky_court.sqlite", tmp_path / "fresh").restore(restored)
    assert restored.read_bytes() == database.read_bytes()


def test_restore_passes_over_a_state_whose_pack_is_gone_or_damaged(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 400)
    first = pages.push(database)
    kept = tmp_path / "first.sqlite"
    kept.write_bytes(database.read_bytes())
    update_rows(database, [1])
    second = pages.push(database, pinned=set(first.packs))
    damaged = store.root / second.manifest
    damaged.write_bytes(damaged.read_bytes()[:-10] + b"0123456789")
    restored = tmp_path / "restored.sqlite"
    info = PagePacks(store, "ky_court.sqlite", tmp_path / "fresh").restore(restored)
    assert info.manifest == first.manifest and restored.read_bytes() == kept.read_bytes()
    assert info.rejected and "hash" in info.rejected[0][1]
    for name in first.packs:
        (store.root / name).unlink()
    with pytest.raises(IntegrityError, match="no whole database"):
        PagePacks(store, "ky_court.sqlite", tmp_path / "fresh2").restore(tmp_path / "none.sqlite")


def test_without_a_page_table_every_page_goes_under_a_newer_sequence(tmp_path, packs):
    pages, store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 400)
    first = pages.push(database)
    pages.table_path.unlink()
    again = pages.push(database)
    assert again.changed_pages == database.stat().st_size // 4096
    assert pack_sequence(again.manifest) > pack_sequence(first.manifest)
    assert set(store.list_dir(pack_folder("ky_court.sqlite"))) == set(again.packs)


def test_a_damaged_page_table_is_not_believed(tmp_path, packs):
    pages, _store = packs
    database = tmp_path / "db.sqlite"
    make_database(database, 100)
    pages.push(database)
    pages.table_path.write_bytes(pages.table_path.read_bytes()[:-7])
    assert PageTable.load(pages.table_path) is None


def test_folding_takes_mostly_superseded_packs_within_its_credit():
    packs = [PackInfo("a", 1, 100, 0), PackInfo("b", 2, 100, 0), PackInfo("c", 3, 100, 0), PackInfo("d", 4, 10, 0)]
    live = {"a": 10, "b": 45, "c": 90, "d": 0}
    fold, credit = packs_to_fold(packs, live, set(), 50)
    assert fold == ["a"] and credit == 40            # b (45 live) does not fit what is left; c is mostly live
    fold, _ = packs_to_fold(packs, live, {"a"}, 100)
    assert fold == ["b"]                              # a pinned pack is never folded
    many = [PackInfo(str(n), n, 100, 0) for n in range(10)]
    fold, _ = packs_to_fold(many, {str(n): 90 + n for n in range(10)}, set(), 0, max_packs=5)
    assert fold == ["0", "1", "2", "3", "4", "5"]     # past the limit: the fewest live pages first


def test_page_runs_round_trip():
    pages = [1, 2, 3, 7, 9, 10]
    assert page_runs(pages) == [[1, 3], [7, 1], [9, 2]]
    assert run_pages(page_runs(pages)) == pages


def test_the_store_never_removes_a_file_of_record(tmp_path):
    store = LocalStore(tmp_path / "store")
    source = tmp_path / "x"
    source.write_bytes(b"%PDF-1.4 x")
    store.upload_file("pdf_by_hash/" + "a" * 64 + ".pdf", source)
    for name in ("pdf_by_hash/" + "a" * 64 + ".pdf", "text/" + "a" * 64 + ".txt", "changes/run.jsonl",
                 "legacy/ky_court-v1-0123456789abcdef.sqlite", "feed.atom", "document_inventory.csv", "status.json"):
        with pytest.raises(IntegrityError, match="never removes"):
            store.remove(name)
    assert (tmp_path / "store" / "pdf_by_hash" / ("a" * 64 + ".pdf")).is_file()
    store.upload_file("db/ky_court/00000001-" + "b" * 64 + ".pack", source)
    store.remove("db/ky_court/00000001-" + "b" * 64 + ".pack")
    store.remove("db/ky_court/00000001-" + "b" * 64 + ".pack")      # gone already: no error
    assert not (tmp_path / "store" / "db" / "ky_court" / ("00000001-" + "b" * 64 + ".pack")).exists()
