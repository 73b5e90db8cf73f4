"""Restoring v1.2's store: states without a checkpoint judged by content, the database found at any
depth of an archive with the archive's workspace files, the older state's own rows kept, the
store's v1.2 snapshot kept before the first checkpoint replaces it."""
from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest
from legacy_fixture import (FOREIGN_WORKSPACE, discovered_row, downloaded_row, extracted_row, legacy_archive, sha256,
                            write_archive, write_legacy_database)
from support import open_test_context, put_bytes

from notebook_builder.cells.c00_config import IntegrityError, StoreError
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c38_legacy import adopt, legacy_original_name
from notebook_builder.cells.c40_restore import archive_layout, archive_workspace_name, restore
from notebook_builder.cells.c60_backfill import backfill
from notebook_builder.cells.c95_run import run_pipeline

NO_COURT = {"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"}
ARCHIVE = "ky_court-WIP-resume-20240301T000000Z.tar.gz"


def fresh(tmp_path, name="workspace"):
    return open_test_context(tmp_path, name=name, database=False, env=NO_COURT)


def fold(ctx):
    return backfill(ctx, force=True)


def test_the_archives_database_is_found_at_any_depth_and_only_there():
    assert archive_layout(["w/ky_court.sqlite", "w/status.json"]) == ("w/ky_court.sqlite", "w")
    assert archive_layout(["a/b/c/ky_court.sqlite"]) == ("a/b/c/ky_court.sqlite", "a/b/c")
    assert archive_layout(["ky_court.sqlite"]) == ("ky_court.sqlite", "")
    with pytest.raises(IntegrityError, match="holds no ky_court.sqlite"):
        archive_layout(["w/status.json"])
    with pytest.raises(IntegrityError, match="2 databases .*a/ky_court.sqlite, b/ky_court.sqlite"):
        archive_layout(["a/ky_court.sqlite", "b/ky_court.sqlite"])
    assert archive_workspace_name("w/pdf_backup/2019/x.pdf", "w") == "pdf_backup/2019/x.pdf"
    assert archive_workspace_name("w/text/a.txt", "w") == "text/a.txt"
    assert archive_workspace_name("w/tmp/x.part", "w") is None
    assert archive_workspace_name("other/pdf_backup/x.pdf", "w") is None
    assert archive_workspace_name("w/pdf_backup", "w") is None


def test_a_v12_archive_brings_its_database_and_workspace_files_and_adoption_credits_them(planned_court, tmp_path):
    ok = planned_court.documents_with("ok")
    data = {d.document_id: planned_court.pdf_bytes(d.document_id) for d in ok[:4]}
    backup, hashed, lying, extracted = ok[:4]
    rows = [downloaded_row(backup, data[backup.document_id], f"{FOREIGN_WORKSPACE}/pdf_backup/2019/a.pdf"),
            downloaded_row(hashed, data[hashed.document_id], f"{FOREIGN_WORKSPACE}/pdf_by_hash/h.pdf"),
            downloaded_row(lying, data[lying.document_id], f"{FOREIGN_WORKSPACE}/pdf_by_hash/l.pdf"),
            extracted_row(extracted, data[extracted.document_id], "pdf_by_hash/e.pdf")]
    database = write_legacy_database(tmp_path / "v12" / "ky_court.sqlite", rows)
    sha = {document_id: sha256(pdf) for document_id, pdf in data.items()}
    files = {"pdf_backup/2019/a.pdf": data[backup.document_id],
             "pdf_backup/2019/not-a-pdf.pdf": b"<html>503</html>",
             f"pdf_by_hash/{sha[hashed.document_id]}.pdf": data[hashed.document_id],
             f"pdf_by_hash/{'0' * 64}.pdf": data[lying.document_id],          # a name that lies
             f"pdf_backup/pdf_by_hash/{'0' * 64}.pdf": b"%PDF-1.4 another backup of that name",
             f"pdf_by_hash/{sha[extracted.document_id]}.pdf": data[extracted.document_id],
             f"text/{sha[extracted.document_id]}.txt": b"v1.2's text"}
    store = LocalStore(tmp_path / "store")
    put_bytes(store, ARCHIVE, legacy_archive(tmp_path / "a.tar.gz", database, files=files).read_bytes())
    archive_bytes = (tmp_path / "store" / ARCHIVE).read_bytes()
    ctx = fresh(tmp_path)
    restored = restore(ctx)
    assert restored.restored and restored.legacy and restored.source == ARCHIVE and restored.files == 7
    # Both files of that name are kept: neither is put over the other.
    assert {(ctx.path("pdf_backup") / "pdf_by_hash" / f"{'0' * 64}.pdf").read_bytes(),
            (ctx.path("pdf_backup") / ARCHIVE[:-7] / "pdf_by_hash" / f"{'0' * 64}.pdf").read_bytes()} \
        == {data[lying.document_id], b"%PDF-1.4 another backup of that name"}
    assert json.loads(ctx.path("status.json").read_text()) == {"phase": "download"}
    result = adopt(ctx, fold)
    rows = {row["document_id"]: row for row in ctx.db.iter_documents()}
    for document in (backup, hashed, lying):
        assert rows[document.document_id]["status"] == "downloaded"
        assert rows[document.document_id]["local_pdf"] == f"pdf_by_hash/{sha[document.document_id]}.pdf"
    assert rows[extracted.document_id]["status"] == "extracted" and result.texts_reused == 1
    assert result.requeued == [] and result.backfill.not_pdf == ["2019/not-a-pdf.pdf"]
    for document_id in sha:
        assert store.exists(f"pdf_by_hash/{sha[document_id]}.pdf")
    assert store.exists(f"text/{sha[extracted.document_id]}.txt")
    assert (tmp_path / "store" / ARCHIVE).read_bytes() == archive_bytes     # legacy archives stay untouched


def store_legacy_states(planned_court, tmp_path, *, archive_newer: bool):
    """The store's ky_court.sqlite and an archive, both v1.2's; each has rows the other lacks."""
    documents = planned_court.documents[:6]
    old = "2024-01-05T00:00:00Z"
    new = "2024-03-09T00:00:00Z"
    snapshot_rows = [discovered_row(d, updated_at=old) for d in documents[:4]]        # 0-3
    archive_rows = [discovered_row(d, updated_at=new if archive_newer else old) for d in documents[1:6]]   # 1-5
    archive_rows[0].update(status="failed", http_status=503)       # row 1: newer news in the archive
    snapshot = write_legacy_database(tmp_path / "v12" / "snapshot.sqlite", snapshot_rows, extra={"shelf": "TEXT"})
    conn = sqlite3.connect(snapshot)
    conn.execute("UPDATE documents SET shelf = 'B' || rowid")
    conn.commit()
    conn.close()
    archived = write_legacy_database(tmp_path / "v12" / "archived.sqlite", archive_rows)
    store = LocalStore(tmp_path / "store")
    put_bytes(store, "ky_court.sqlite", snapshot.read_bytes())
    # The archive's name and file time say "older"; only its content says which state is newer.
    name = "ky_court-WIP-resume-20200101T000000Z.tar.gz"
    put_bytes(store, name, legacy_archive(tmp_path / "a.tar.gz", archived).read_bytes())
    os.utime(tmp_path / "store" / name, (time.time() - 10 ** 7,) * 2)
    return documents, snapshot.read_bytes(), name


@pytest.mark.parametrize("archive_newer", [True, False])
def test_the_newer_legacy_state_wins_by_content_and_the_older_ones_rows_are_kept(planned_court, tmp_path,
                                                                                   archive_newer):
    documents, snapshot_bytes, name = store_legacy_states(planned_court, tmp_path, archive_newer=archive_newer)
    ctx = fresh(tmp_path)
    restored = restore(ctx)
    # Same newest update: the row count decides (the archive's 5 rows against the snapshot's 4).
    assert restored.source == name
    assert restored.merged == [("ky_court.sqlite", 1)]
    adopt(ctx, fold)
    rows = {row["document_id"]: row for row in ctx.db.iter_documents()}
    assert sorted(rows) == sorted(d.document_id for d in documents)
    assert rows[documents[1].document_id]["status"] == "failed"      # the newer state's news
    assert rows[documents[0].document_id]["shelf"] == "B1"           # a column only the older state had


@pytest.mark.parametrize("archive_newer", [True, False])
def test_two_legacy_states_merged_are_each_kept_byte_for_byte(planned_court, tmp_path, archive_newer):
    _, snapshot_bytes, _ = store_legacy_states(planned_court, tmp_path, archive_newer=archive_newer)
    archived_bytes = (tmp_path / "v12" / "archived.sqlite").read_bytes()
    ctx = fresh(tmp_path)
    ctx.close()
    report = run_pipeline(ctx.cfg.replace(PHASES=("backfill",)), handle_signals=False)
    assert report.exit_status == 0, report.summary()
    for original in (snapshot_bytes, archived_bytes):   # as v1.2 wrote each, whichever was merged into
        assert (tmp_path / "store" / legacy_original_name(sha256(original))).read_bytes() == original


def test_the_store_snapshot_wins_when_its_content_is_newer(planned_court, tmp_path):
    documents, _, _ = store_legacy_states(planned_court, tmp_path, archive_newer=False)
    conn = sqlite3.connect(tmp_path / "store" / "ky_court.sqlite")
    conn.execute("UPDATE documents SET updated_at = '2024-06-01T00:00:00Z' WHERE rowid = 1")
    conn.commit()
    conn.close()
    restored = restore(fresh(tmp_path))
    assert restored.source == "ky_court.sqlite"
    assert restored.merged[0][0].startswith("ky_court-WIP-resume-") and restored.merged[0][1] == 2


def test_when_the_store_snapshot_wins_the_newest_archives_backups_still_come_back(planned_court, tmp_path):
    """v1.2 uploaded its snapshot more often than its archives, and kept pdf_backup/ only in them: the
    snapshot holds every row, the older archive nothing more but the PDFs of rows both hold."""
    ok = planned_court.documents_with("ok")[:3]
    data = {d.document_id: planned_court.pdf_bytes(d.document_id) for d in ok}
    rows = [downloaded_row(d, data[d.document_id], f"{FOREIGN_WORKSPACE}/pdf_backup/{n}.pdf")
            for n, d in enumerate(ok)]
    store = LocalStore(tmp_path / "store")
    newer = [dict(row, updated_at="2024-06-01T00:00:00Z") for row in rows]
    put_bytes(store, "ky_court.sqlite", write_legacy_database(tmp_path / "v12" / "s.sqlite", newer).read_bytes())
    files = {f"pdf_backup/{n}.pdf": data[d.document_id] for n, d in enumerate(ok)}
    older = write_legacy_database(tmp_path / "v12" / "a.sqlite", rows)
    put_bytes(store, ARCHIVE, legacy_archive(tmp_path / "a.tar.gz", older, files=files).read_bytes())
    ctx = fresh(tmp_path)
    restored = restore(ctx)
    assert restored.source == "ky_court.sqlite" and restored.merged == [(ARCHIVE, 0)]
    assert restored.files == 3
    adopt(ctx, fold)
    rows = {row["document_id"]: row for row in ctx.db.iter_documents()}
    assert all(rows[d.document_id]["status"] == "downloaded" and rows[d.document_id]["sha256"]
               == sha256(data[d.document_id]) for d in ok)
    assert not list(WorkQueues(ctx.db).download_queue(ctx.cfg, 10))

def test_the_first_checkpoint_keeps_the_stores_v12_snapshot_before_replacing_it(planned_court, tmp_path):
    documents, snapshot_bytes, _ = store_legacy_states(planned_court, tmp_path, archive_newer=True)
    ctx = fresh(tmp_path)
    ctx.close()
    report = run_pipeline(ctx.cfg.replace(PHASES=("backfill",)), handle_signals=False)
    assert report.exit_status == 0, report.summary()
    store = tmp_path / "store"
    assert (store / legacy_original_name(sha256(snapshot_bytes))).read_bytes() == snapshot_bytes
    # Kept under legacy/, the v1.2 snapshot made way for the page packs of the adopted state.
    assert not (store / "ky_court.sqlite").exists() and list((store / "db" / "ky_court").iterdir())


def test_a_workspace_already_on_the_new_version_still_keeps_a_v12_snapshot_it_would_replace(planned_court,
                                                                                          tmp_path):
    snapshot = write_legacy_database(tmp_path / "v12.sqlite", [discovered_row(planned_court.documents[0])])
    put_bytes(LocalStore(tmp_path / "store"), "ky_court.sqlite", snapshot.read_bytes())
    ctx = open_test_context(tmp_path, env=NO_COURT)            # a new database, never checkpointed
    ctx.close()
    assert run_pipeline(ctx.cfg.replace(PHASES=("backfill",)), handle_signals=False).exit_status == 0
    kept = tmp_path / "store" / legacy_original_name(sha256(snapshot.read_bytes()))
    assert kept.read_bytes() == snapshot.read_bytes()


class RefusingLegacyStore(LocalStore):
    """A store that cannot take anything under legacy/ (full, say)."""

    def upload_file(self, name, local_path):
        if name.startswith("legacy/"):
            raise StoreError("quota exceeded (test)")
        super().upload_file(name, local_path)


def test_while_the_store_cannot_take_the_original_its_v12_snapshot_is_not_replaced(planned_court, tmp_path):
    snapshot = write_legacy_database(tmp_path / "v12.sqlite", [discovered_row(planned_court.documents[0])])
    put_bytes(LocalStore(tmp_path / "store"), "ky_court.sqlite", snapshot.read_bytes())
    ctx = fresh(tmp_path)
    ctx.close()
    cfg = ctx.cfg.replace(PHASES=("backfill",))
    report = run_pipeline(cfg, store=RefusingLegacyStore(tmp_path / "store"), handle_signals=False)
    assert report.exit_status == 1 and "checkpoint not in the store" in report.summary()
    assert (tmp_path / "store" / "ky_court.sqlite").read_bytes() == snapshot.read_bytes()
    assert ctx.path(legacy_original_name(sha256(snapshot.read_bytes()))).read_bytes() == snapshot.read_bytes()
    report = run_pipeline(cfg, handle_signals=False)           # the store has room again
    assert report.exit_status == 0, report.summary()
    assert (tmp_path / "store" / legacy_original_name(sha256(snapshot.read_bytes()))).read_bytes() \
        == snapshot.read_bytes()


@pytest.mark.parametrize("bad", ["two databases", "not sqlite", "truncated sqlite"])
def test_a_bad_legacy_archive_is_rejected_with_its_reason_and_the_good_state_used(planned_court, tmp_path, bad):
    good = write_legacy_database(tmp_path / "good.sqlite", [discovered_row(planned_court.documents[0])])
    store = LocalStore(tmp_path / "store")
    put_bytes(store, "ky_court.sqlite", good.read_bytes())
    other = write_legacy_database(tmp_path / "other.sqlite", [discovered_row(d, updated_at="2025-01-01T00:00:00Z")
                                                              for d in planned_court.documents[:50]])
    members = {"two databases": {"w/ky_court.sqlite": other.read_bytes(), "w/old/ky_court.sqlite": good.read_bytes()},
               "not sqlite": {"w/ky_court.sqlite": b"<html>not a database</html>" * 50},
               "truncated sqlite": {"w/ky_court.sqlite": other.read_bytes()[:len(other.read_bytes()) // 2]}}[bad]
    put_bytes(store, ARCHIVE, write_archive(tmp_path / "bad.tar.gz", members).read_bytes())
    restored = restore(fresh(tmp_path))
    assert restored.source == "ky_court.sqlite"
    (name, reason), = restored.rejected
    assert name == ARCHIVE
    assert {"two databases": "2 databases (w/ky_court.sqlite, w/old/ky_court.sqlite)",
            "not sqlite": "not an SQLite database",
            "truncated sqlite": "malformed"}[bad] in reason
    assert (tmp_path / "store" / ARCHIVE).is_file()
