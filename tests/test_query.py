"""The query layer's commands: show, search, export (jsonl, csv, parquet), index."""
from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest
from archive_fixture import DOCUMENTS, build_archive, document_id

from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c13_records import TextRecords
from notebook_builder.cli import main


@pytest.fixture
def archive(tmp_path):
    cfg = build_archive(tmp_path, extracted=len(DOCUMENTS) - 1)   # the last one is only downloaded
    return cfg


def cli(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def flags(cfg):
    return ["--workspace", cfg.WORKSPACE, "--store", cfg.STORE]


# ------------------------------------------------------------------ show


def test_show_a_document_id_tells_everything_known(capsys, archive):
    status, out, err = cli(capsys, "show", document_id(0), *flags(archive), "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["matched_by"] == "document_id" and report["count"] == 1
    entry = report["documents"][0]
    assert entry["document"]["case_number"] == "2019-CA-0012" and entry["download"]["http_status"] == 200
    assert [row["outcome"] for row in entry["related"]["extraction_log"]] == ["ok"]
    sha = entry["document"]["sha256"]
    assert entry["files"]["pdf"]["store_bytes"] == entry["document"]["size_bytes"]
    assert entry["files"]["text"]["name"] == f"text/{sha}.txt"
    assert entry["files"]["pdf"]["store_link"].startswith("file://")
    assert entry["text_preview"].startswith("The suppression hearing")
    assert entry["index"] == {"indexed": False, "note": "no search index in the workspace"}


def test_show_by_sha256_and_by_case_number(capsys, archive):
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    sha = db.get_document(document_id(2))["sha256"]
    with db.transaction():   # the case walk's row of the case is shown with its documents
        db.conn.execute("INSERT INTO cases (case_id, case_number, case_type) VALUES (?, '2019-CA-0012', 'Appeal')",
                        (hashlib.sha256(b"2019-CA-0012").hexdigest(),))
    db.close()
    status, out, _ = cli(capsys, "show", sha, *flags(archive), "--json")
    assert status == 0 and json.loads(out)["matched_by"] == "sha256"
    assert json.loads(out)["documents"][0]["document"]["document_id"] == document_id(2)
    status, out, _ = cli(capsys, "show", "2019-ca-0012", *flags(archive))
    assert status == 0
    assert out.startswith("2 document(s) matched by case_number: 2019-ca-0012")
    assert "-- cases (1 row)" in out and "case_type=Appeal" in out
    assert "text preview (text_layer):" in out and "The petition for rehearing is denied." in out


def test_show_an_id_that_matches_nothing_exits_1_with_one_line(capsys, archive):
    status, out, err = cli(capsys, "show", "2099-XX-0000", *flags(archive))
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and "no document id, sha256 or case number matches '2099-XX-0000'" in err


def test_show_without_an_archive_exits_2(capsys, tmp_path):
    status, _, err = cli(capsys, "show", "x", "--workspace", str(tmp_path / "none"), "--store", str(tmp_path / "s"))
    assert status == 2 and "no workspace at" in err and "kycourt-pipeline run" in err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- search


def test_search_prints_ranked_hits_with_snippets_and_json(capsys, archive):
    assert cli(capsys, "index", *flags(archive))[0] == 0
    status, out, err = cli(capsys, "search", "suppression", *flags(archive))
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "2 documents match 'suppression'; all:"
    assert lines[1].startswith("  1. 2021-SC-0007  2021-11-30  BROWN VS. COMMONWEALTH")
    assert document_id(3) in lines[2] and "[Suppression]" in lines[3] and "score" not in out
    status, out, _ = cli(capsys, "search", "suppression", *flags(archive), "--limit", "1", "--page", "2")
    assert out.splitlines()[0] == "2 documents match 'suppression'; 2-2:"
    assert out.splitlines()[1].startswith("  2. 2019-CA-0012")
    status, out, _ = cli(capsys, "search", "suppression", *flags(archive), "--court", "CA", "--year", "2019",
                         "--type", "opinion", "--json", "--limit", "5")
    answer = json.loads(out)
    hits = answer["hits"]
    assert status == 0 and [hit["document_id"] for hit in hits] == [document_id(0)] and answer["total"] == 1
    assert (answer["page"], answer["count"], answer["query"]) == (1, 1, "suppression")
    assert {"case_number", "case_title", "court_code", "kind", "filed_date", "document_id", "snippet",
            "snippet_marks", "score"} <= set(hits[0])


def test_search_takes_dates_sorts_pages_and_an_empty_query(capsys, archive):
    cli(capsys, "index", *flags(archive))
    status, out, _ = cli(capsys, "search", "--court", "CA", "--sort", "oldest", "--json", *flags(archive))
    answer = json.loads(out)
    assert status == 0 and answer["sort"] == "oldest" and answer["total"] == 2
    assert [hit["filed_date"] for hit in answer["hits"]] == ["2019-05-02", "2019-07-11"]
    status, out, _ = cli(capsys, "search", "", "--after", "2019-05-02", "--before", "2020-03-09", *flags(archive))
    assert status == 0 and out.splitlines()[0] == "3 documents match the filters; all, newest first:"
    for flag, value in (("--after", "2019-13-01"), ("--before", "May 2"), ("--sort", "random"), ("--page", "0")):
        with pytest.raises(SystemExit) as exited:
            main(["search", "x", flag, value, *flags(archive)])
        assert exited.value.code == 2 and f"argument {flag}" in capsys.readouterr().err, flag
    status, _, err = cli(capsys, "search", "x", "--limit", "501", *flags(archive))
    assert status == 2 and err == "kycourt-pipeline: limit is 1 to 500, not 501\n"


def test_any_query_is_answered_and_a_reading_that_differs_is_said(capsys, archive):
    cli(capsys, "index", *flags(archive))
    status, out, err = cli(capsys, "search", "2019-CA-000012-MR", *flags(archive))
    assert status == 0 and err == "" and out.startswith("2 documents match '2019-CA-000012-MR'; all:")
    assert "read as: 2019-CA-0012 (2019-CA-000012-MR was read as the case number 2019-CA-0012)" in out
    for typed in ("of the", '"unclosed', "(warrant", "-", "KRS 532.032", "O'Brien"):
        status, out, err = cli(capsys, "search", typed, *flags(archive))
        assert status == 0 and err == "", typed


def test_search_without_an_index_says_how_to_build_it(capsys, archive):
    status, _, err = cli(capsys, "search", "suppression", *flags(archive))
    assert status == 2 and "no search index" in err and "kycourt-pipeline index" in err


def test_search_on_a_stale_index_warns_and_still_answers(capsys, archive):
    cli(capsys, "index", *flags(archive))
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    TextRecords(db).record_extracted([{"document_id": document_id(4), "sha256": db.get_document(document_id(4))["sha256"],
                          "attempt": 1, "engine": "pypdf", "pages": 1, "chars": 10, "seconds": 0.0,
                          "likely_scanned": False}])
    db.close()
    status, out, err = cli(capsys, "search", "suppression", *flags(archive))
    assert status == 0 and "1. 2021-SC-0007" in out
    assert "behind the archive" in err and "1 missing" in err and "kycourt-pipeline index" in err


# ---------------------------------------------------------------- export


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_manifest(out: Path, data_name: str) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["records"] == len(DOCUMENTS)
    assert manifest["counts"]["with_text"] == len(DOCUMENTS) - 1 and manifest["counts"]["without_text"] == 1
    for entry in manifest["files"]:
        path = out / entry["path"]
        assert entry["sha256"] == _sha256(path) and entry["bytes"] == path.stat().st_size
    assert [entry["path"] for entry in manifest["files"]] == [data_name, "schema.json"]
    bagit = (out / "manifest-sha256.txt").read_text().splitlines()
    assert bagit == [f"{_sha256(out / name)}  {name}" for name in (data_name, "schema.json", "manifest.json")]
    schema = json.loads((out / "schema.json").read_text())
    assert schema["fields"][0]["name"] == "document_id" and schema["fields"][-1]["name"] == "text"
    return manifest


def test_export_jsonl_one_record_per_document_in_order_and_deterministic(capsys, tmp_path, archive):
    out = tmp_path / "export"
    status, printed, err = cli(capsys, "export", "--format", "jsonl", "--out", str(out), *flags(archive))
    assert status == 0, err
    assert printed.startswith(f"exported {len(DOCUMENTS)} documents")
    _check_manifest(out, "documents.jsonl")
    records = [json.loads(line) for line in (out / "documents.jsonl").read_text().splitlines()]
    assert [record["document_id"] for record in records] == sorted(document_id(n) for n in range(len(DOCUMENTS)))
    by_id = {record["document_id"]: record for record in records}
    assert by_id[document_id(2)]["text"] == DOCUMENTS[2][4] and by_id[document_id(2)]["court_code"] == "SC"
    assert by_id[document_id(2)]["year"] == 2020 and by_id[document_id(2)]["likely_scanned"] is False
    assert by_id[document_id(4)]["text"] is None and by_id[document_id(4)]["status"] == "downloaded"
    first = {path.name: path.read_bytes() for path in out.iterdir()}
    cli(capsys, "export", "--format", "jsonl", "--out", str(out), *flags(archive))
    assert {path.name: path.read_bytes() for path in out.iterdir()} == first


def test_export_csv_keeps_texts_with_newlines_quotes_and_commas(capsys, tmp_path, archive):
    out = tmp_path / "csv"
    assert cli(capsys, "export", "--format", "csv", "--out", str(out), *flags(archive))[0] == 0
    _check_manifest(out, "documents.csv")
    with open(out / "documents.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(DOCUMENTS)
    by_id = {row["document_id"]: row for row in rows}
    assert by_id[document_id(2)]["text"] == DOCUMENTS[2][4]     # newline, quotes, comma, semicolon
    assert by_id[document_id(4)]["text"] == ""
    assert (out / "documents.csv").read_text().splitlines()[0].startswith('"document_id","case_number"')


def test_export_parquet_reads_back_with_pyarrow(capsys, tmp_path, archive):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "parquet"
    assert cli(capsys, "export", "--format", "parquet", "--out", str(out), *flags(archive))[0] == 0
    _check_manifest(out, "documents.parquet")
    table = pq.read_table(out / "documents.parquet")
    assert table.num_rows == len(DOCUMENTS)
    assert str(table.schema.field("year").type) == "int64" and str(table.schema.field("text").type) == "string"
    rows = {row["document_id"]: row for row in table.to_pylist()}
    assert rows[document_id(0)]["text"] == DOCUMENTS[0][4] and rows[document_id(4)]["text"] is None


def test_export_of_texts_only_the_store_holds(capsys, tmp_path, archive):
    for path in Path(archive.WORKSPACE, "text").glob("*.txt"):
        path.unlink()
    out = tmp_path / "export"
    assert cli(capsys, "export", "--out", str(out), *flags(archive))[0] == 0
    assert json.loads((out / "manifest.json").read_text())["counts"]["with_text"] == len(DOCUMENTS) - 1


def test_export_parquet_without_pyarrow_is_a_clear_error(capsys, tmp_path, archive, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    status, _, err = cli(capsys, "export", "--format", "parquet", "--out", str(tmp_path / "p"), *flags(archive))
    assert status == 2 and "pip install 'kycourt-colab[parquet]'" in err
    assert not (tmp_path / "p").exists()


def test_export_refuses_an_unknown_format(capsys, tmp_path, archive):
    with pytest.raises(SystemExit) as raised:
        main(["export", "--format", "xml", "--out", str(tmp_path / "x"), *flags(archive)])
    assert raised.value.code == 2


def test_export_leaves_the_state_database_untouched(capsys, tmp_path, archive):
    path = Path(archive.WORKSPACE) / DB_FILENAME
    before = sqlite3.connect(path).execute("SELECT COUNT(*), MAX(updated_at) FROM documents").fetchone()
    cli(capsys, "export", "--out", str(tmp_path / "e"), *flags(archive))
    assert sqlite3.connect(path).execute("SELECT COUNT(*), MAX(updated_at) FROM documents").fetchone() == before


def test_index_without_an_archive_exits_2_and_creates_nothing(capsys, tmp_path):
    status, _, err = cli(capsys, "index", "--workspace", str(tmp_path / "none"), "--store", str(tmp_path / "s"))
    assert status == 2 and "no workspace at" in err
    assert list(tmp_path.iterdir()) == []


def test_index_command_builds_then_has_nothing_to_do(capsys, archive):
    status, out, _ = cli(capsys, "index", *flags(archive))
    assert status == 0 and out.startswith(f"index: {len(DOCUMENTS) - 1} texts indexed") and "mirrored" in out
    status, out, _ = cli(capsys, "index", *flags(archive))
    assert status == 0 and out.startswith("index: 0 texts indexed") and "mirrored" not in out


def test_a_state_database_of_an_older_schema_is_read_as_it_is(capsys, tmp_path, archive):
    path = Path(archive.WORKSPACE) / DB_FILENAME
    conn = sqlite3.connect(path)     # schema version 1: no downloaded_at, no download_checkpoint
    conn.execute("ALTER TABLE documents DROP COLUMN downloaded_at")
    conn.execute("ALTER TABLE documents DROP COLUMN download_checkpoint")
    conn.execute("UPDATE kv SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    status, out, _ = cli(capsys, "show", document_id(0), *flags(archive), "--json")
    assert status == 0 and json.loads(out)["documents"][0]["download"]["downloaded_at"] is None
    assert cli(capsys, "export", "--out", str(tmp_path / "old"), *flags(archive))[0] == 0
    status, out, err = cli(capsys, "search", "suppression", *flags(archive))
    assert status == 2 and "no search index" in err
    # Reading never migrates: the file is still version 1 afterwards.
    assert sqlite3.connect(path).execute("SELECT value FROM kv WHERE key = 'schema_version'").fetchone() == ("1",)
