"""`kycourt-pipeline export`: what the pipeline worked out is in the dataset, CSV tells null from
empty, a new export replaces the old one's files, a failed write leaves the folder as it was,
and docs/searching.md's Parquet example runs."""
from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest
from archive_fixture import DOCUMENTS, build_archive, document_id

from notebook_builder.cells.c06_layout import DB_FILENAME
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def archive(tmp_path):
    """The fixture archive (the last document only downloaded), with what derive and extract
    would have recorded for some documents: derived fields, citations, a failure reason, a text
    source, and an empty title next to an unknown one."""
    cfg = build_archive(tmp_path, extracted=len(DOCUMENTS) - 1)
    db = Database.open(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        DerivedRecords(db).save_derived([{
            "row": {"document_id": document_id(0), "method": "test", "version": 1, "kind": "opinion",
                    "publication_status": "TO BE PUBLISHED", "rendered_date": "2019-05-02",
                    "judge": "SMITH", "disposition": "AFFIRMING", "lower_court": "FAYETTE CIRCUIT COURT",
                    "derived_at": "2026-01-01T00:00:00Z"},
            "citations": [
                {"document_id": document_id(0), "start": 40, "end": 52, "kind": "statute", "form": "full",
                 "matched_text": "KRS 500.080", "normalized": "KRS 500.080", "extractor": "test"},
                {"document_id": document_id(0), "start": 5, "end": 20, "kind": "case", "form": "full",
                 "matched_text": "1 S.W.3d 2", "normalized": "1 S.W.3d 2", "extractor": "test"},
                {"document_id": document_id(0), "start": 60, "end": 70, "kind": "case", "form": "short",
                 "matched_text": "1 S.W.3d 2", "normalized": "1 S.W.3d 2", "extractor": "test"}],
        }])
        db.conn.execute("UPDATE documents SET extract_failure = 'unparseable' WHERE document_id = ?",
                        (document_id(4),))
        db.conn.execute("UPDATE documents SET case_title = '' WHERE document_id = ?", (document_id(1),))
        db.conn.execute("UPDATE documents SET case_title = NULL WHERE document_id = ?", (document_id(2),))
    finally:
        db.close()
    return cfg


def flags(cfg):
    return ["--workspace", cfg.WORKSPACE, "--store", cfg.STORE]


def export(capsys, cfg, out: Path, fmt: str) -> tuple[int, str]:
    status = main(["export", "--format", fmt, "--out", str(out), *flags(cfg)])
    return status, capsys.readouterr().err


def folder(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(out.iterdir())}


def test_records_carry_the_derived_fields_the_failure_and_the_text_source(capsys, tmp_path, archive):
    out = tmp_path / "export"
    assert export(capsys, archive, out, "jsonl") == (0, "")
    records = {record["document_id"]: record for record in map(json.loads, (out / "documents.jsonl").open())}
    first = records[document_id(0)]
    assert (first["rendered_date"], first["disposition"], first["publication_status"], first["judge"],
            first["lower_court"]) == ("2019-05-02", "AFFIRMING", "TO BE PUBLISHED", "SMITH", "FAYETTE CIRCUIT COURT")
    assert first["citations"] == ["1 S.W.3d 2", "KRS 500.080"]        # distinct, in text order
    assert records[document_id(1)]["citations"] == [] and records[document_id(1)]["rendered_date"] is None
    assert records[document_id(4)]["extract_failure"] == "unparseable" and first["extract_failure"] is None
    assert first["text_source"] == "text_layer" and records[document_id(4)]["text_source"] is None
    schema = json.loads((out / "schema.json").read_text())
    names = [field["name"] for field in schema["fields"]]
    assert {"rendered_date", "disposition", "lower_court", "citations", "extract_failure", "text_source"} <= set(names)


def test_a_withheld_document_is_told_from_one_the_court_answered_404(capsys, tmp_path, archive):
    # Both are `failed` with http_status 404; only document_available says the court lists the
    # withheld one and never served it (it was never asked for), where the other is gone.
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        db.conn.execute("UPDATE documents SET status = 'failed', http_status = 404, document_available = ? "
                        "WHERE document_id = ?", (0, document_id(1)))
        db.conn.execute("UPDATE documents SET status = 'failed', http_status = 404, document_available = ? "
                        "WHERE document_id = ?", (1, document_id(2)))
    finally:
        db.close()
    out = tmp_path / "export"
    assert export(capsys, archive, out, "jsonl") == (0, "")
    records = {record["document_id"]: record for record in map(json.loads, (out / "documents.jsonl").open())}
    assert [records[document_id(n)]["document_available"] for n in (1, 2)] == [False, True]
    assert "withheld" in {field["name"]: field for field in json.loads((out / "schema.json").read_text())[
        "fields"]}["document_available"]["description"]


def test_a_failure_exports_its_last_error_and_an_empty_text_says_why(capsys, tmp_path, archive):
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        db.conn.execute("UPDATE documents SET status = 'failed', http_status = 403, last_error = 'permanent: HTTP 403' "
                        "WHERE document_id = ?", (document_id(1),))
        # A blank scan: its one page was recognised and gave nothing.
        db.conn.execute("UPDATE documents SET extracted_chars = 0, pages = 1, pages_needing_ocr = 1, likely_scanned = 1, "
                        "extracted_by_ocr = 1, ocr_pages = 1 WHERE document_id = ?", (document_id(2),))
        sha = db.conn.execute("SELECT sha256 FROM documents WHERE document_id = ?", (document_id(2),)).fetchone()[0]
    finally:
        db.close()
    for root in (archive.WORKSPACE, archive.STORE):      # its text layer, and OCR's merge of it: empty
        for name in (f"{sha}.txt", f"{sha}.ocr.txt"):
            (Path(root) / "text" / name).write_text("\f \n")
    out = tmp_path / "export"
    assert export(capsys, archive, out, "jsonl") == (0, "")
    records = {record["document_id"]: record for record in map(json.loads, (out / "documents.jsonl").open())}
    assert records[document_id(1)]["last_error"] == "permanent: HTTP 403"
    assert records[document_id(2)]["text_note"] == "blank scan: OCR found no text on its 1 scanned page"
    assert records[document_id(0)]["text_note"] is None and records[document_id(0)]["last_error"] is None


def test_csv_tells_null_from_empty_and_writes_lists_as_json(capsys, tmp_path, archive):
    out = tmp_path / "csv"
    assert export(capsys, archive, out, "csv")[0] == 0
    lines = (out / "documents.csv").read_text(encoding="utf-8").split("\n")
    header = lines[0].split(",")
    title = header.index('"case_title"')

    def fields_of(number: int) -> list[str]:
        line = next(line for line in lines if line.startswith(f'"{document_id(number)}"'))
        return re.findall(r'(?:^|,)("(?:[^"]|"")*"|[^,"]*)', line)

    assert fields_of(1)[title] == '""'           # an empty title
    assert fields_of(2)[title] == ""             # an unknown title: null
    assert fields_of(0)[header.index('"citations"')] == '"[""1 S.W.3d 2"", ""KRS 500.080""]"'
    assert fields_of(0)[header.index('"likely_scanned"')] == '"false"'
    assert "null" in json.loads((out / "schema.json").read_text())["csv"]


def test_a_new_export_replaces_the_old_files_and_the_manifest_lists_what_is_there(capsys, tmp_path, archive):
    out = tmp_path / "export"
    assert export(capsys, archive, out, "jsonl")[0] == 0
    assert export(capsys, archive, out, "csv")[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [entry["path"] for entry in manifest["files"]] + ["manifest.json", "manifest-sha256.txt"])
    assert [entry["path"] for entry in manifest["files"]] == ["documents.csv", "schema.json"]
    listed = (out / "manifest-sha256.txt").read_text().split()[1::2]
    assert listed == ["documents.csv", "schema.json", "manifest.json"]


def test_a_folder_holding_other_files_is_refused_and_left_alone(capsys, tmp_path, archive):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "my-notes.txt").write_text("mine")
    (out / "documents.jsonl").write_text("an older export")
    before = folder(out)
    status, err = export(capsys, archive, out, "jsonl")
    assert status == 2 and err.count("\n") == 1 and "holds other files than an export's (my-notes.txt)" in err
    assert folder(out) == before


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_disk_is_one_line_and_leaves_the_folder_as_it_was(capsys, tmp_path, archive,
                                                                              monkeypatch, code):
    out = tmp_path / "export"
    assert export(capsys, archive, out, "jsonl")[0] == 0
    before = folder(out)
    real_write = Path.write_text

    def failing_write(self, *args, **kwargs):
        if self.name == ".manifest.json.tmp":            # the dataset is written, then the disk fails
            raise OSError(code, os.strerror(code))
        return real_write(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", failing_write)

    status, err = export(capsys, archive, out, "csv")
    assert status == 2 and err.count("\n") == 1 and f"cannot write the export to {out}: {os.strerror(code)}" in err
    assert folder(out) == before                        # the earlier export, whole; no temp files
    fresh = tmp_path / "fresh"
    status, err = export(capsys, archive, fresh, "csv")
    assert status == 2 and not fresh.exists()


def test_export_in_an_empty_folder_without_an_archive_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KY_WORKSPACE", raising=False)
    monkeypatch.delenv("KY_STORE", raising=False)
    assert main(["export", "--out", "out"]) == 2
    assert main(["show", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("no workspace at" in line for line in err)
    assert list(tmp_path.iterdir()) == []


def test_the_documented_parquet_example_runs(capsys, tmp_path, archive, monkeypatch):
    pytest.importorskip("pyarrow")
    page = (REPO_ROOT / "docs" / "searching.md").read_text(encoding="utf-8")
    command = next(line for line in page.splitlines() if line.startswith("kycourt-pipeline export --format parquet"))
    out = command.split("--out ", 1)[1].split()[0]
    example = re.search(r"```python\n(.*?read_table.*?)```", page, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    assert main([*command.split("#")[0].split()[1:], *flags(archive)]) == 0
    namespace: dict = {}
    exec(compile(example, "docs/searching.md", "exec"), namespace)      # noqa: S102 (the page's own lines)
    assert out.rstrip("/") == "dataset" and namespace["table"].num_rows == len(DOCUMENTS)
