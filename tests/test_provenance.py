"""Provenance and fixity: every download response is recorded; an audit re-hashes the store."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support import RecordingClock, discovered_rows, mark_extracted, open_test_context

from notebook_builder import cli
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c70_download import download
from notebook_builder.cells.c86_derive import derive
from notebook_builder.cells.c88_audit import audit_sample, audit_store
from notebook_builder.cells.c90_verify import format_verify_report, verify
from notebook_builder.simcourt import SimCourt


def test_every_download_response_is_an_event_with_its_identifying_headers(tmp_path):
    with SimCourt(docs=40, seed=5) as court:
        chosen = (court.documents_with("ok")[:3] + court.documents_with("http_404")[:1]
                  + court.documents_with("http_503")[:1])
        ctx = open_test_context(tmp_path, court, name="ws", clock=RecordingClock(),
                                env={"KY_BACKOFF_BASE": "0", "KY_BACKOFF_CAP": "0"})
        db = ctx.db
        DiscoveryState(db).upsert_discovered(discovered_rows(chosen))
        result = download(ctx)
        events = [event for d in chosen for event in DownloadRecords(db).download_events(d.document_id)]
        attempts = sum(db.get_document(d.document_id)["attempts"] for d in chosen)
        # A 404 is asked of the other download path too, in the same attempt: one more event.
        assert len(events) == result.requests == attempts + result.other_path_requests
        missing = court.documents_with("http_404")[0].document_id
        assert [event["http_status"] for event in DownloadRecords(db).download_events(missing)] == [404, 404]
        for document in chosen:
            row = db.get_document(document.document_id)
            last = DownloadRecords(db).download_events(document.document_id)[-1]
            assert last["http_status"] == row["http_status"] and last["requested_at"]
            if row["status"] == "downloaded":
                assert (last["content_length"], last["content_type"]) == (str(row["size_bytes"]), "application/pdf")
        assert {e["http_status"] for e in DownloadRecords(db).download_events(court.documents_with("http_503")[0].document_id)} >= {503}
        ctx.close()


# -------------------------------------------------------------------- audit


class Md5Store(LocalStore):
    """A directory store that records an md5 per name, as Drive does."""

    def __init__(self, root):
        super().__init__(root)
        self.recorded: dict[str, str] = {}

    def upload_file(self, name, local_path):
        super().upload_file(name, local_path)
        self.recorded[name] = hashlib.md5(Path(local_path).read_bytes()).hexdigest()

    def md5(self, name):
        return self.recorded.get(name)


def archive(tmp_path: Path, store=None, documents: int = 4, **env: str):
    cfg = load_config(env={"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(tmp_path / "store"),
                           "KY_PACING": "0", "KY_PROGRESS": "0", **env})
    ctx = open_context(cfg, store=store)
    db = ctx.open_database()
    shas = []
    for number in range(documents):
        document_id = f"D{number}"
        pdf = f"%PDF-1.4 document {number}\n".encode()
        text = f"RENDERED: MARCH {number + 1}, 2020\nthe text of document {number}"
        sha = hashlib.sha256(pdf).hexdigest()
        DiscoveryState(db).upsert_discovered([{"document_id": document_id, "case_number": f"2020-CA-{number:04d}"}])
        for name, data in ((f"pdf_by_hash/{sha}.pdf", pdf), (f"text/{sha}.txt", text.encode())):
            ctx.path(name).write_bytes(data)
            ctx.mirror.put(name, ctx.path(name))
        DownloadRecords(db).record_download_attempt(document_id)
        DownloadRecords(db).mark_downloaded(document_id, sha256=sha, size_bytes=len(pdf), local_pdf=f"pdf_by_hash/{sha}.pdf")
        mark_extracted(db, document_id, pages=1, extracted_chars=len(text), likely_scanned=False)
        shas.append(sha)
    return ctx, shas


def test_audit_sample_is_a_share_at_least_one_and_all_means_all():
    candidates = list(range(200))
    assert audit_sample(candidates, 0, 1) == []
    assert len(audit_sample(candidates, 0.05, 1)) == 10
    assert len(audit_sample(candidates, 0.0001, 1)) == 1
    assert audit_sample(candidates, 1.0, 1) == candidates
    assert audit_sample(candidates, 0.05, 1) != audit_sample(candidates, 0.05, 2)   # rotates with the seed


def test_a_sound_store_audits_clean_and_compares_the_store_md5(tmp_path):
    store = Md5Store(tmp_path / "store")
    ctx, shas = archive(tmp_path, store)
    result = audit_store(ctx, 1.0)
    assert (result.sampled, result.pdfs_hashed, result.texts_hashed, result.workspace_hashed) == (4, 4, 4, 4)
    assert result.md5_checked == 8 and result.mismatches == [] and result.errors == []
    ctx.close()


def test_tampered_pdf_text_and_md5_are_each_reported(tmp_path):
    store = Md5Store(tmp_path / "store")
    ctx, shas = archive(tmp_path, store)
    derive(ctx)                                     # records each text's sha256
    (tmp_path / "store" / f"pdf_by_hash/{shas[0]}.pdf").write_bytes(b"%PDF-1.4 other bytes")
    (tmp_path / "store" / f"text/{shas[1]}.txt").write_text("RENDERED: silently changed", encoding="utf-8")
    store.recorded[f"pdf_by_hash/{shas[2]}.pdf"] = "0" * 32
    ctx.path(f"pdf_by_hash/{shas[3]}.pdf").write_bytes(b"rotted on the workspace disk")
    result = audit_store(ctx, 1.0)
    lines = "\n".join(result.mismatches)
    assert f"pdf_by_hash/{shas[0]}.pdf: hashes to" in lines
    assert f"text/{shas[1]}.txt: hashes to" in lines and "derive read" in lines
    assert f"pdf_by_hash/{shas[2]}.pdf: md5" in lines
    assert f"workspace pdf_by_hash/{shas[3]}.pdf: hashes to" in lines
    ctx.close()


def test_before_derive_a_text_is_checked_by_its_length(tmp_path):
    ctx, shas = archive(tmp_path)
    (tmp_path / "store" / f"text/{shas[0]}.txt").write_text("short", encoding="utf-8")
    (tmp_path / "store" / f"text/{shas[1]}.txt").write_bytes(b"\xff\xfe not utf-8")
    result = audit_store(ctx, 1.0)
    assert any(line.startswith(f"text/{shas[0]}.txt: 5 characters") for line in result.mismatches)
    assert any(line.startswith(f"text/{shas[1]}.txt: not UTF-8") for line in result.mismatches)
    assert len(result.mismatches) == 2
    ctx.close()


def test_verify_with_audit_fails_on_a_mismatch_and_says_so(tmp_path):
    ctx, shas = archive(tmp_path, KY_AUDIT="all")
    clean = verify(ctx)
    assert clean.passed, clean.reasons
    assert clean.audit.pdfs_hashed == 4 and "audit: 4 of 4 PDFs sampled" in format_verify_report(clean)
    (tmp_path / "store" / f"pdf_by_hash/{shas[0]}.pdf").write_bytes(b"%PDF-1.4 other bytes")
    tampered = verify(ctx)
    assert not tampered.passed
    assert any(reason.startswith("audit: 1 mismatches") for reason in tampered.reasons)
    ctx.close()


def test_cli_verify_audit_flag_sets_the_share(tmp_path, capsys):
    ctx, _ = archive(tmp_path)
    ctx.close()
    flags = ["--workspace", str(tmp_path / "ws"), "--store", str(tmp_path / "store")]
    assert cli.config_from_args(cli.build_parser().parse_args(["verify", "--audit", *flags]), env={}).AUDIT == 0.01
    assert cli.config_from_args(cli.build_parser().parse_args(["verify", "--audit", *flags]),
                                env={"KY_AUDIT": "0.5"}).AUDIT == 0.5
    assert cli.config_from_args(cli.build_parser().parse_args(["verify", *flags]), env={}).AUDIT == 0
    assert cli.main(["verify", "--audit", "all", *flags]) == 0
    assert "audit: 4 of 4 PDFs sampled (1)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:                      # a share over 1: bad usage
        cli.main(["verify", "--audit", "2", *flags])
    assert refused.value.code == 2 and "argument --audit: '2' is not valid" in capsys.readouterr().err


def test_manifest_lists_each_pdf_and_each_derived_text_with_the_hash_of_its_bytes(tmp_path):
    from notebook_builder.cells.c88_audit import bagit_manifest
    ctx, shas = archive(tmp_path, documents=2)
    assert [name for _, name in DerivedRecords(ctx.db).manifest_rows()] == sorted(f"pdf_by_hash/{sha}.pdf" for sha in shas)
    derive(ctx)
    manifest = bagit_manifest(DerivedRecords(ctx.db).manifest_rows())
    lines = manifest.splitlines()
    assert len(lines) == 4
    for line in lines:
        digest, name = line.split("  ")
        assert hashlib.sha256((tmp_path / "store" / name).read_bytes()).hexdigest() == digest
    ctx.close()
