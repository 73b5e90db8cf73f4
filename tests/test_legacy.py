"""Adopting v1.2's database: the schema made whole from MIGRATIONS, nothing of the user's lost,
statuses mapped by evidence, the original kept byte for byte, unadoptable files refused."""
from __future__ import annotations

import json
import sqlite3

import pytest
from legacy_fixture import (FOREIGN_WORKSPACE, discovered_row, downloaded_row, extracted_row, sha256, table_rows,
                            write_legacy_database)
from support import open_test_context, put_bytes

from notebook_builder.cells.c10_database import (SCHEMA_VERSION, ColumnSpec, Database, LegacyDatabaseError, SchemaSpec,
                                                 read_schema, schema_gaps, schema_state, target_schema)
from notebook_builder.cells.c12_queues import WorkQueues
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c38_legacy import (KV_LEGACY_ADOPTION, adopt, adoption_plan, describe_adoption,
                                               judge_database, legacy_original_name, provisional_status)
from notebook_builder.cells.c60_backfill import backfill

NO_COURT = {"KY_API_BASE": "http://127.0.0.1:9/api/api/v1"}


def fold(ctx):
    return backfill(ctx, force=True)


def legacy_context(tmp_path, rows, **database):
    ctx = open_test_context(tmp_path, database=False, env=NO_COURT)
    write_legacy_database(ctx.db_path, rows, **database)
    return ctx


def column(name, type_="TEXT", notnull=False, default=None, pk=False):
    return ColumnSpec(name, type_, notnull, default, pk)


def spec(**tables):
    return SchemaSpec({name: (f"CREATE TABLE {name} (...)", tuple(columns)) for name, columns in tables.items()}, ())


# ------------------------------------------------------------------ decisions


def test_the_plan_adds_missing_columns_keeps_unknown_tables_and_sets_aside_what_it_cannot_fill():
    target = spec(documents=[column("document_id", pk=True), column("status", notnull=True, default="'x'")],
                  kv=[column("key", pk=True), column("value")],
                  runs=[column("run_id", "INTEGER", pk=True), column("sweep", "INTEGER", notnull=True),
                        column("seconds", "REAL", notnull=True, default="0")],
                  shards=[column("shard")])
    present = spec(documents=[column("document_id"), column("notes")],
                   kv=[column("key"), column("value")],
                   runs=[column("run_id", "INTEGER"), column("started")],
                   mine=[column("anything")])
    plan = adoption_plan(present, target)
    assert plan.create == ["runs", "shards"]                 # runs lacks sweep (NOT NULL, no default)
    assert plan.set_aside == [("runs", "legacy_runs")]
    assert plan.add_columns == [] and plan.kept == ["mine"]
    assert [c.name for c in plan.document_extras] == ["notes"]
    present = spec(documents=[column("document_id")], runs=[column("run_id", "INTEGER"), column("sweep", "INTEGER")],
                   legacy_runs=[column("x")])
    plan = adoption_plan(present, target)
    assert [(table, c.name) for table, c in plan.add_columns] == [("runs", "seconds")]
    assert plan.create == ["kv", "shards"] and plan.set_aside == []


def test_a_setting_aside_never_takes_the_name_of_a_table_the_user_has():
    target = spec(documents=[column("document_id", pk=True)], runs=[column("sweep", "INTEGER", notnull=True)])
    present = spec(documents=[column("document_id")], runs=[column("x")], legacy_runs=[column("y")])
    assert adoption_plan(present, target).set_aside == [("runs", "legacy_runs_2")]


@pytest.mark.parametrize("row, expected", [
    (("extracted", None, None, None), "extracted"),
    (("done", "ab" * 32, 120, 200), "extracted"),
    (("done", "ab" * 32, None, 200), "downloaded"),
    (("error", None, None, 404), "failed"),
    (("error", None, None, "503"), "failed"),
    ((None, None, None, None), "discovered"),
    (("pending", None, None, "garbage"), "discovered"),
])
def test_a_status_outside_the_four_is_mapped_by_what_the_row_shows(row, expected):
    assert provisional_status(*row) == expected


# ------------------------------------------------------------------ recognising


def test_migrate_never_stamps_a_legacy_database_and_opening_it_changes_no_byte(planned_court, tmp_path):
    path = write_legacy_database(tmp_path / "ky_court.sqlite", [discovered_row(planned_court.documents[0])])
    before = path.read_bytes()
    with pytest.raises(LegacyDatabaseError, match="older version.*adopts it"):
        Database.open(path)
    assert path.read_bytes() == before and schema_state(path) == ("legacy", 0)


def test_a_version_stamped_without_its_columns_is_recognised(planned_court, tmp_path):
    path = write_legacy_database(tmp_path / "ky_court.sqlite", [discovered_row(planned_court.documents[0])])
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO kv VALUES ('schema_version', '6')")     # what the first run used to do
    conn.commit()
    conn.close()
    assert schema_state(path) == ("incomplete", 6)
    with pytest.raises(LegacyDatabaseError, match="schema version 6 without its columns"):
        Database.open(path)


# ------------------------------------------------------------------ adopting


@pytest.mark.parametrize("shape", ["fewer columns", "more columns"])
def test_a_legacy_database_is_adopted_whole_and_keeps_everything_it_held(planned_court, tmp_path, shape):
    ok = planned_court.documents_with("ok")
    data = planned_court.pdf_bytes(ok[0].document_id)
    rows = [discovered_row(ok[1]), discovered_row(ok[2], status="done"), discovered_row(ok[3], status=None),
            discovered_row(ok[4], status="error", http_status=404),
            downloaded_row(ok[0], data, f"{FOREIGN_WORKSPACE}/pdf_backup/2019/opinion.pdf")]
    if shape == "fewer columns":
        database = {"drop": ("pages", "extracted_chars", "likely_scanned", "extract_attempts", "attempts")}
    else:
        database = {"extra": {"priority": "INTEGER NOT NULL DEFAULT 3", "reviewer": "TEXT NOT NULL"}}
        for number, row in enumerate(rows):
            row.update(priority=number, reviewer=f"r{number}")
    ctx = legacy_context(tmp_path, rows, **database)
    (ctx.path("pdf_backup") / "2019").mkdir(parents=True)
    (ctx.path("pdf_backup") / "2019" / "opinion.pdf").write_bytes(data)
    result = adopt(ctx, fold)
    assert result.adopted
    db = ctx.db
    assert schema_gaps(read_schema(db.conn), target_schema()) == []
    assert db.kv_get("schema_version") == str(SCHEMA_VERSION)
    assert db.kv_get("legacy:backfill_done") == "2024-03-02" and db.kv_get("backfill_done") != "2024-03-02"
    assert table_rows(ctx.db_path, "reading_notes")[0][1] == "note 0"
    assert {name for name in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            for name in name} >= {"legacy_discovery_runs", "legacy_extraction_log", "reading_notes"}
    statuses = dict(db.conn.execute("SELECT document_id, status FROM documents").fetchall())
    assert statuses == {ok[1].document_id: "discovered", ok[2].document_id: "discovered",
                        ok[3].document_id: "discovered", ok[4].document_id: "failed",
                        ok[0].document_id: "downloaded"}
    assert result.record["statuses_mapped"] == {"done -> discovered": 1, "NULL -> discovered": 1,
                                                "error -> failed": 1}
    downloaded = db.get_document(ok[0].document_id)
    assert (downloaded["sha256"], downloaded["local_pdf"]) == (sha256(data), f"pdf_by_hash/{sha256(data)}.pdf")
    if shape == "more columns":
        assert [tuple(r) for r in db.conn.execute("SELECT priority, reviewer FROM documents ORDER BY priority")] \
            == [(number, f"r{number}") for number in range(5)]
    else:
        assert db.conn.execute("SELECT COUNT(*) FROM documents WHERE attempts = 0 AND extract_attempts = 0"
                               ).fetchone()[0] == 5
    legacy = dict(db.conn.execute("SELECT document_id, legacy_status FROM legacy_documents").fetchall())
    assert legacy[ok[2].document_id] == "done" and legacy[ok[3].document_id] is None


def test_the_original_is_kept_byte_for_byte_in_workspace_and_store(planned_court, tmp_path):
    ctx = legacy_context(tmp_path, [discovered_row(planned_court.documents[0])])
    original = ctx.db_path.read_bytes()
    result = adopt(ctx, fold)
    name = legacy_original_name(sha256(original))
    assert result.original == name
    assert ctx.path(name).read_bytes() == original
    assert LocalStore(ctx.cfg.STORE).read_file(name) == original
    assert json.loads(ctx.db.kv_get(KV_LEGACY_ADOPTION))["state"] == "done"


def test_a_second_adoption_changes_nothing(planned_court, tmp_path):
    ctx = legacy_context(tmp_path, [discovered_row(d) for d in planned_court.documents[:4]])
    adopt(ctx, fold)
    table = table_rows(ctx.db_path, "documents")
    assert not adopt(ctx, fold).acted
    assert table_rows(ctx.db_path, "documents") == table


# ------------------------------------------------------------------ settling


def test_adopted_rows_keep_their_progress_where_the_files_are_and_go_back_where_they_are_not(planned_court, tmp_path):
    ok = planned_court.documents_with("ok")
    pdfs = {document.document_id: planned_court.pdf_bytes(document.document_id) for document in ok[:6]}
    in_store, in_backup, by_sha, no_text, nowhere, unknown = ok[:6]
    rows = [extracted_row(in_store, pdfs[in_store.document_id], f"{FOREIGN_WORKSPACE}/pdf_by_hash/x.pdf"),
            downloaded_row(in_backup, pdfs[in_backup.document_id], "/mnt/old/pdfs/b.pdf"),
            extracted_row(by_sha, pdfs[by_sha.document_id], "/elsewhere/gone.pdf"),
            extracted_row(no_text, pdfs[no_text.document_id], f"pdf_by_hash/{sha256(pdfs[no_text.document_id])}.pdf"),
            extracted_row(nowhere, pdfs[nowhere.document_id], "/nowhere/n.pdf"),
            downloaded_row(unknown, pdfs[unknown.document_id], "/x/u.pdf", status="fetched")]
    ctx = legacy_context(tmp_path, rows)
    store = LocalStore(ctx.cfg.STORE)
    for document in (in_store, no_text):
        put_bytes(store, f"pdf_by_hash/{sha256(pdfs[document.document_id])}.pdf", pdfs[document.document_id])
    for document in (in_store, unknown):
        put_bytes(store, f"text/{sha256(pdfs[document.document_id])}.txt", b"the text v1.2 extracted")
    backups = ctx.path("pdf_backup")
    (backups / "b.pdf").write_bytes(pdfs[in_backup.document_id])
    (backups / "renamed-by-hand.pdf").write_bytes(pdfs[by_sha.document_id])
    (backups / "u.pdf").write_bytes(pdfs[unknown.document_id])
    ctx.path("text").mkdir(exist_ok=True)
    (ctx.path("text") / f"{sha256(pdfs[by_sha.document_id])}.txt").write_text("a text only the workspace holds")
    result = adopt(ctx, fold)
    db = ctx.db
    status = {row["document_id"]: row["status"] for row in db.iter_documents()}
    assert status == {in_store.document_id: "extracted", in_backup.document_id: "downloaded",
                      by_sha.document_id: "extracted", no_text.document_id: "downloaded",
                      nowhere.document_id: "discovered", unknown.document_id: "downloaded"}
    assert result.requeued == [nowhere.document_id] and result.texts_missing == 1 and result.texts_reused == 3
    for row in DownloadRecords(db).documents_claiming_files():
        assert row["local_pdf"] == f"pdf_by_hash/{row['sha256']}.pdf"
        assert store.exists(row["local_pdf"])
    assert store.exists(f"text/{sha256(pdfs[by_sha.document_id])}.txt")
    assert db.conn.execute("SELECT note FROM legacy_documents WHERE document_id = ?",
                           (nowhere.document_id,)).fetchone()[0] == "requeued: PDF nowhere"
    # in_backup (never extracted), no_text, and unknown: its text is held, its figures are to be measured
    assert WorkQueues(db).extract_queue_size(ctx.cfg) == 3
    assert db.get_document(unknown.document_id)["extracted_chars"] == len("the text v1.2 extracted")


def test_an_extracted_row_whose_pdf_only_the_store_holds_is_never_asked_of_the_court(planned_court, tmp_path):
    document = planned_court.documents_with("ok")[0]
    data = planned_court.pdf_bytes(document.document_id)
    ctx = legacy_context(tmp_path, [extracted_row(document, data, f"{FOREIGN_WORKSPACE}/pdf_by_hash/{sha256(data)}.pdf",
                                                  sha256=None)])
    put_bytes(LocalStore(ctx.cfg.STORE), f"pdf_by_hash/{sha256(data)}.pdf", data)
    put_bytes(LocalStore(ctx.cfg.STORE), f"text/{sha256(data)}.txt", b"text")
    adopt(ctx, fold)
    row = ctx.db.get_document(document.document_id)
    assert (row["status"], row["sha256"], row["size_bytes"]) == ("extracted", sha256(data), len(data))
    assert WorkQueues(ctx.db).download_queue_size(ctx.cfg) == 0


def test_a_row_v12_extracted_with_no_text_is_extracted_again_so_ocr_can_read_its_scanned_pages(planned_court,
                                                                                                tmp_path):
    # v1.2 had no OCR: a scan it "extracted" holds an empty text and no page measures, so the ocr
    # stage (which works from the pages extract measured) would never read it.
    # So is one it read a stamp from and judged likely scanned: its text is kept, its pages measured.
    ok = planned_court.documents_with("ok")
    scan, read, stamped = ok[:3]
    pdfs = {document.document_id: planned_court.pdf_bytes(document.document_id) for document in (scan, read, stamped)}
    ctx = legacy_context(tmp_path, [
        extracted_row(scan, pdfs[scan.document_id], "/content/w/s.pdf", extracted_chars=0, likely_scanned=1),
        extracted_row(read, pdfs[read.document_id], "/content/w/r.pdf", likely_scanned=0),
        extracted_row(stamped, pdfs[stamped.document_id], "/content/w/t.pdf", extracted_chars=5, likely_scanned=1)])
    store = LocalStore(ctx.cfg.STORE)
    for document, text in ((scan, b""), (read, b"the text v1.2 extracted"), (stamped, b"FILED")):
        put_bytes(store, f"pdf_by_hash/{sha256(pdfs[document.document_id])}.pdf", pdfs[document.document_id])
        put_bytes(store, f"text/{sha256(pdfs[document.document_id])}.txt", text)
    result = adopt(ctx, fold)
    status = {row["document_id"]: row["status"] for row in ctx.db.iter_documents()}
    assert status == {scan.document_id: "downloaded", read.document_id: "extracted",
                      stamped.document_id: "downloaded"}
    assert [row["document_id"] for row in WorkQueues(ctx.db).extract_queue(ctx.cfg, 10)] == [scan.document_id,
                                                                                  stamped.document_id]
    assert (result.texts_reused, result.texts_missing, result.rescanned) == (2, 1, 1)
    assert json.loads(ctx.db.kv_get(KV_LEGACY_ADOPTION))["rescanned"] == 1
    assert store.read_file(f"text/{sha256(pdfs[scan.document_id])}.txt") == b""      # v1.2's, untouched


def test_a_downloaded_row_whose_text_the_archive_holds_is_measured_and_keeps_that_text(planned_court, tmp_path):
    # v1.2 wrote the text and was killed before it marked the row: extraction measures the PDF (its
    # pages, its scans) and keeps v1.2's text; a second text under one name is never written.
    from notebook_builder.cells.c80_extract import extract
    document = planned_court.documents_with("ok")[0]
    data = planned_court.pdf_bytes(document.document_id)
    ctx = legacy_context(tmp_path, [downloaded_row(document, data, "/content/w/d.pdf")])
    store = LocalStore(ctx.cfg.STORE)
    put_bytes(store, f"pdf_by_hash/{sha256(data)}.pdf", data)
    put_bytes(store, f"text/{sha256(data)}.txt", b"the text v1.2 extracted")
    result = adopt(ctx, fold)
    assert result.texts_reused == 1 and result.measured == 1 and "1 of them measured" in describe_adoption(result)
    row = ctx.db.get_document(document.document_id)
    assert (row["status"], row["extracted_chars"]) == ("downloaded", len("the text v1.2 extracted"))
    extract(ctx)
    row = ctx.db.get_document(document.document_id)
    assert row["status"] == "extracted" and row["pages"] >= 1
    assert row["extracted_chars"] == len("the text v1.2 extracted")
    assert store.read_file(f"text/{sha256(data)}.txt") == b"the text v1.2 extracted"
    assert ctx.path(f"text/{sha256(data)}.txt").read_bytes() == b"the text v1.2 extracted"


def test_a_twin_of_an_extracted_row_is_extracted_with_the_twins_figures_and_verify_passes(planned_court, tmp_path):
    # Issue 38 item 5: v1.2 had downloaded B, and A (the same bytes) had a text: B must not end extracted
    # with no figures.
    from notebook_builder.cells.c80_extract import extract
    from notebook_builder.cells.c90_verify import verify
    a, b = planned_court.documents_with("ok")[:2]
    data = planned_court.pdf_bytes(a.document_id)
    local = f"pdf_by_hash/{sha256(data)}.pdf"
    ctx = legacy_context(tmp_path, [extracted_row(a, data, local, pages=3, extracted_chars=23),
                                    downloaded_row(b, data, local)])
    store = LocalStore(ctx.cfg.STORE)
    put_bytes(store, local, data)
    put_bytes(store, f"text/{sha256(data)}.txt", b"the text v1.2 extracted")
    adopt(ctx, fold)
    assert ctx.db.get_document(b.document_id)["status"] == "downloaded"
    extract(ctx)
    rows = {document.document_id: ctx.db.get_document(document.document_id) for document in (a, b)}
    assert rows[b.document_id]["status"] == "extracted"
    assert (rows[b.document_id]["extracted_chars"], rows[b.document_id]["pages"]) == (23, 3)   # A's
    result = verify(ctx)
    assert result.passed and result.without_figures == [], result.reasons
    assert store.read_file(f"text/{sha256(data)}.txt") == b"the text v1.2 extracted"


# ------------------------------------------------------------------ refusing


def duplicated(path, rows):
    write_legacy_database(path, rows + rows[:1], primary_key=False)


def with_null_id(path, rows):
    write_legacy_database(path, rows + [dict(rows[0], document_id=None)], primary_key=False)


def without_documents(path, rows):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()


def without_document_id(path, rows):
    write_legacy_database(path, [{k: v for k, v in row.items() if k != "document_id"} for row in rows],
                          drop=("document_id",))


def damaged(path, rows):
    write_legacy_database(path, rows * 1 + [discovered_row(rows[0]["_document"], document_id=f"{n:064x}")
                                            for n in range(3000)])
    data = bytearray(path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 4096] = b"\xff" * 4096      # a page of garbage mid-file
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("make, named", [
    (duplicated, "occur more than once"), (with_null_id, "NULL or empty document_id"),
    (without_documents, "no documents table"), (without_document_id, "no document_id column"),
    (damaged, "quick_check"),
])
def test_a_database_that_cannot_be_adopted_is_one_clear_error_exit_2_and_nothing_changes(
        planned_court, tmp_path, make, named):
    from notebook_builder.cells.c95_run import run_pipeline
    ctx = open_test_context(tmp_path, database=False, env=NO_COURT)
    rows = [dict(discovered_row(d), _document=d) for d in planned_court.documents[:3]]
    make(ctx.db_path, [{k: v for k, v in row.items() if k != "_document"} for row in rows]
         if make is not damaged else rows)
    before = ctx.db_path.read_bytes()
    ctx.close()
    report = run_pipeline(ctx.cfg, handle_signals=False)
    assert report.exit_status == 2 and report.bad_input
    assert named in report.error and "cannot be adopted" in report.error and str(ctx.db_path) in report.error
    assert ctx.db_path.read_bytes() == before
    assert sorted(p.name for p in ctx.workspace.iterdir() if p.is_file()) == ["ky_court.sqlite"]
    assert not ctx.path("legacy").exists()
    assert [p for p in (tmp_path / "store").rglob("*") if p.is_file()] == []


def test_an_adopted_columns_declarations_do_not_bind_the_pipeline(planned_court, tmp_path):
    """A legacy column NOT NULL without default would fail every insert the pipeline makes."""
    ctx = legacy_context(tmp_path, [dict(discovered_row(planned_court.documents[0]), reviewer="x")],
                         extra={"reviewer": "TEXT NOT NULL"})
    adopt(ctx, fold)
    DiscoveryState(ctx.db).upsert_discovered([{"document_id": "f" * 64, "case_number": "2024-CA-0001"}])
    assert WorkQueues(ctx.db).document_count() == 2


# ------------------------------------------------------------------ the command line before adoption


def test_commands_before_adoption_show_the_v12_rows_or_say_a_run_adopts_them_and_write_nothing(planned_court,
                                                                                               tmp_path, capsys):
    from notebook_builder.cli import main
    rows = [discovered_row(d) for d in planned_court.documents[:4]] + [
        discovered_row(planned_court.documents[4], status="done")]
    workspace = tmp_path / "workspace"
    write_legacy_database(workspace / "ky_court.sqlite", rows)
    before = {path: path.read_bytes() for path in workspace.rglob("*")}
    assert main(["status", "--workspace", str(workspace)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["documents"] == 5 and status["counts"]["discovered"] == 4
    assert status["legacy_database"]["statuses"] == {"discovered": 4, "done": 1}
    for command in (["report"], ["derive"], ["index"]):
        assert main([*command, "--workspace", str(workspace), "--store", str(tmp_path / "store")]) == 2
        assert "older version of the pipeline (v1.2)" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in workspace.rglob("*")} == before


def test_a_v12_database_a_kill_left_mid_transaction_is_rolled_back_and_adopted(planned_court, tmp_path):
    """v1.2 killed in a write leaves a hot journal: a read-only judge reads what was committed."""
    ctx = legacy_context(tmp_path, [discovered_row(d) for d in planned_court.documents[:3]])
    conn = sqlite3.connect(ctx.db_path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA cache_size = 1")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO documents(document_id, status) VALUES (?, 'discovered')",
                     [(f"{n:064x}",) for n in range(2000)])       # spills to the file: the journal is hot
    journal = ctx.db_path.with_name("ky_court.sqlite-journal").read_bytes()
    data = ctx.db_path.read_bytes()
    conn.close()                                                   # (rolls back; put the kill's files back)
    ctx.db_path.write_bytes(data)
    ctx.db_path.with_name("ky_court.sqlite-journal").write_bytes(journal)
    judged = judge_database(ctx.db_path)       # read-only: the journal rolled back in a private copy
    assert judged.kind == "legacy" and judged.rows == 3
    assert ctx.db_path.with_name("ky_court.sqlite-journal").read_bytes() == journal
    result = adopt(ctx, fold)
    assert result.adopted and WorkQueues(ctx.db).document_count() == 3
