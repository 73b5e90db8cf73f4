"""Provenance and fixity: every download response is recorded; an audit re-hashes the store."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support import RecordingClock, add_extracted_document, discovered_rows, open_test_context

from notebook_builder import cli
from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c14_derived import DerivedRecords
from notebook_builder.cells.c15_discovery_state import DiscoveryState
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c70_download import download
from notebook_builder.cells.c86_derive import derive
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


def archive(tmp_path: Path, store=None, documents: int = 4, **env: str):
    cfg = load_config(env={"KY_WORKSPACE": str(tmp_path / "ws"), "KY_STORE": str(tmp_path / "store"),
                           "KY_PACING": "0", "KY_PROGRESS": "0", **env})
    ctx = open_context(cfg, store=store)
    ctx.open_database()
    shas = [add_extracted_document(ctx, f"D{number}", f"%PDF-1.4 document {number}\n".encode(),
                                   f"RENDERED: MARCH {number + 1}, 2020\nthe text of document {number}",
                                   case_number=f"2020-CA-{number:04d}") for number in range(documents)]
    return ctx, shas


def test_tampered_pdf_and_text_with_no_copy_left_each_fail_verify_by_name(tmp_path):
    ctx, shas = archive(tmp_path, KY_AUDIT="all")
    derive(ctx)                                     # records each text's sha256
    clean = verify(ctx)
    assert clean.passed, clean.reasons
    assert clean.fixity.read == 8 and "every file read" in format_verify_report(clean)
    for name in (f"pdf_by_hash/{shas[0]}.pdf", f"text/{shas[1]}.txt"):
        (tmp_path / "store" / name).write_bytes(b"other bytes")
        ctx.path(name).unlink()
    tampered = verify(ctx)
    assert not tampered.passed
    unhealed = "\n".join(tampered.fixity.unhealed)
    assert f"pdf_by_hash/{shas[0]}.pdf: 11 bytes where its 20 were proven; no good copy" in unhealed
    assert f"text/{shas[1]}.txt: 11 bytes where its" in unhealed
    ctx.close()


def test_a_text_derive_hashed_is_held_to_that_hash_from_the_first_audit_on(tmp_path):
    ctx, shas = archive(tmp_path, KY_VERIFY_HASHES="1")
    derive(ctx)
    name = f"text/{shas[2]}.txt"
    good = ctx.path(name).read_bytes()
    (tmp_path / "store" / name).write_bytes(good.swapcase())     # the same size, before any audit
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"{name} (from the workspace)"]
    assert (tmp_path / "store" / name).read_bytes() == good
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
    assert "fixity: run 1, every file read: 8 files listed, 8 proven" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:                      # a share over 1: bad usage
        cli.main(["verify", "--audit", "2", *flags])
    assert refused.value.code == 2 and "argument --audit: '2' is not valid" in capsys.readouterr().err


def test_manifest_lists_each_pdf_and_each_derived_text_with_the_hash_of_its_bytes(tmp_path):
    from notebook_builder.cells.c21_fixity import bagit_manifest
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
