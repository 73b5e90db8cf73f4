"""Fixity: every stored file proven against its name on a rolling schedule, damage healed from a
good copy and recorded, verify FAILing only while a damage cannot be healed; and no document
`extracted` without its figures."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support import add_extracted_document, open_test_context

from notebook_builder.cells.c13_records import DownloadRecords
from notebook_builder.cells.c21_fixity import (FIXITY_CYCLE, FixityRecords, audit_fixity, fixity_bucket,
                                               fixity_cycle, fixity_due, self_named_sha256)
from notebook_builder.cells.c90_verify import format_verify_report, referenced_store_names, verify


def archive(tmp_path: Path, documents: int = 4, *, court=None, client=None, store=None, **env: str):
    """`documents` downloaded and extracted documents, each PDF and text in the workspace and the store."""
    ctx = open_test_context(tmp_path, court, name="ws", store=store, client=client, env=env)
    shas = [add_document(ctx, f"D{number:03d}", f"%PDF-1.4 document {number}\n".encode())
            for number in range(documents)]
    return ctx, shas


def add_document(ctx, document_id: str, pdf: bytes, *, text: str | None = None) -> str:
    return add_extracted_document(ctx, document_id, pdf, text if text is not None else f"the text of {document_id}")


def referenced(ctx) -> set[str]:
    return referenced_store_names(DownloadRecords(ctx.db).documents_claiming_files())[0]


def audit(ctx, **options):
    return audit_fixity(ctx.db, ctx.store, ctx.workspace, referenced(ctx), **options)


def stored(tmp_path: Path, name: str) -> Path:
    return tmp_path / "store" / name


# ------------------------------------------------------------------ decisions


def test_the_cycle_is_ten_runs_or_fewer_when_a_larger_share_is_asked():
    assert fixity_cycle(0) == FIXITY_CYCLE == 10
    assert fixity_cycle(0.01) == 10 and fixity_cycle(0.1) == 10
    assert fixity_cycle(0.25) == 4 and fixity_cycle(0.5) == 2 and fixity_cycle(1.0) == 1


def test_a_pdf_and_its_texts_share_a_bucket_and_a_name_is_due_on_its_turn_or_when_overdue():
    sha = "ab" * 32
    bucket = fixity_bucket(f"pdf_by_hash/{sha}.pdf", 10)
    assert bucket == fixity_bucket(f"text/{sha}.txt", 10) == fixity_bucket(f"text/{sha}.ocr.txt", 10)
    assert bucket == int(sha[:8], 16) % 10
    assert fixity_due(bucket, run=20 + bucket, cycle=10, first_run=1, checked_run=10 + bucket)
    assert not fixity_due(bucket, run=21 + bucket, cycle=10, first_run=1, checked_run=20 + bucket)
    assert fixity_due(bucket, run=31 + bucket, cycle=10, first_run=1, checked_run=20 + bucket)   # a missed turn
    assert not fixity_due(bucket, run=6 + bucket, cycle=10, first_run=5 + bucket, checked_run=None)
    assert self_named_sha256(f"pdf_by_hash/{sha}.pdf") == sha and self_named_sha256(f"text/{sha}.txt") is None
    assert self_named_sha256(f"text/pack-{sha}.zip") == sha


def test_ten_runs_prove_every_stored_file_each_once_and_each_run_about_a_tenth(tmp_path):
    ctx, shas = archive(tmp_path, documents=60)
    names = referenced(ctx)
    proven: dict[str, list[int]] = {name: [] for name in names}
    for _ in range(20):
        result = audit(ctx)
        assert result.found == [] and result.unhealed == []
        assert result.read <= 0.3 * len(names)                 # a slice, not the store
        for name, row in FixityRecords(ctx.db).load().items():
            if row["checked_run"] == result.run:
                proven[name].append(result.run)
    assert all(len(runs) == 2 and runs[1] - runs[0] == 10 for runs in proven.values()), proven
    ctx.close()


# ------------------------------------------------------------------ healing


def test_a_damaged_a_truncated_and_a_missing_store_file_are_each_healed_and_named_by_one_verify(tmp_path):
    ctx, shas = archive(tmp_path)
    verify(ctx)
    garbage, truncated, missing = (f"pdf_by_hash/{sha}.pdf" for sha in shas[:3])
    good = {name: ctx.path(name).read_bytes() for name in (garbage, truncated, missing)}
    stored(tmp_path, garbage).write_bytes(b"garbage\n")
    stored(tmp_path, truncated).write_bytes(good[truncated][:7])
    stored(tmp_path, missing).unlink()
    result = verify(ctx)
    assert result.passed, result.reasons
    assert sorted(result.fixity.healed) == sorted(f"{name} (from the workspace)" for name in good)
    found = "\n".join(result.fixity.found)
    assert f"store {garbage}: hashes to " in found and f"store {truncated}: hashes to " in found
    assert f"store {missing}: missing from the store" in found
    assert all(stored(tmp_path, name).read_bytes() == data for name, data in good.items())
    events = {row["name"]: row for row in FixityRecords(ctx.db).events()}
    assert {events[name]["outcome"] for name in good} == {"healed from the workspace"}
    assert "3 damaged, 3 healed, 0 not healed" in format_verify_report(result)
    assert verify(ctx).fixity.found == []
    ctx.close()


def test_rot_that_keeps_the_size_is_found_within_ten_runs_and_healed(tmp_path):
    ctx, shas = archive(tmp_path, documents=6)
    audit(ctx)
    name = f"pdf_by_hash/{shas[4]}.pdf"
    good = stored(tmp_path, name).read_bytes()
    stored(tmp_path, name).write_bytes(good.replace(b"document", b"DOCUMENT"))
    for run in range(1, FIXITY_CYCLE + 1):
        result = audit(ctx)
        if result.found:
            break
    assert result.found[0].startswith(f"store {name}: hashes to ") and result.healed == [f"{name} (from the workspace)"]
    assert stored(tmp_path, name).read_bytes() == good
    ctx.close()


def test_a_damage_with_no_good_copy_fails_naming_it_and_heals_once_a_copy_is_found(tmp_path):
    ctx, shas = archive(tmp_path)
    name = f"pdf_by_hash/{shas[1]}.pdf"
    good = ctx.path(name).read_bytes()
    stored(tmp_path, name).write_bytes(b"not the document at all")
    ctx.path(name).unlink()
    result = verify(ctx)
    assert not result.passed
    [reason] = [reason for reason in result.reasons if "no good copy" in reason]
    assert reason.startswith("1 stored file is damaged") and name in reason and "RUNBOOK" in reason
    assert json.loads(ctx.path("status.json").read_text())["verify"] == "FAIL"
    assert FixityRecords(ctx.db).load()[name]["damage"].startswith("hashes to ")
    backup = ctx.path("pdf_backup/old machine/a copy.pdf")
    backup.parent.mkdir(parents=True)
    backup.write_bytes(good)                      # the user finds a copy
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"{name} (from pdf_backup/)"] and stored(tmp_path, name).read_bytes() == good
    assert FixityRecords(ctx.db).load()[name]["damage"] is None
    ctx.close()


def test_a_damaged_workspace_copy_is_replaced_from_the_store(tmp_path):
    ctx, shas = archive(tmp_path, KY_VERIFY_HASHES="1")
    name = f"pdf_by_hash/{shas[0]}.pdf"
    good = ctx.path(name).read_bytes()
    ctx.path(name).write_bytes(b"rotted on the workspace disk")
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"workspace {name} (from the store)"] and ctx.path(name).read_bytes() == good
    ctx.close()


def test_a_text_is_held_to_its_first_reading(tmp_path):
    ctx, shas = archive(tmp_path, KY_VERIFY_HASHES="1")
    name = f"text/{shas[2]}.txt"
    good = ctx.path(name).read_bytes()
    assert verify(ctx).passed
    assert FixityRecords(ctx.db).load()[name]["sha256"] == hashlib.sha256(good).hexdigest()
    stored(tmp_path, name).write_bytes(good.upper())
    result = verify(ctx)
    assert result.passed and result.fixity.healed == [f"{name} (from the workspace)"]
    assert stored(tmp_path, name).read_bytes() == good
    ctx.close()


def test_a_pdf_no_copy_is_left_of_is_fetched_from_the_court(tmp_path, served_court):
    from notebook_builder.cells.c30_client import CourtClient
    ctx = open_test_context(tmp_path, served_court, name="ws", client=CourtClient)
    document = served_court.documents_with("ok")[0]
    pdf = served_court.pdf_bytes(document.document_id)
    sha = add_document(ctx, document.document_id, pdf)
    name = f"pdf_by_hash/{sha}.pdf"
    stored(tmp_path, name).write_bytes(pdf[: len(pdf) // 2])
    ctx.path(name).unlink()
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"{name} (from the court)"] and stored(tmp_path, name).read_bytes() == pdf
    ctx.close()


def test_a_name_waiting_in_the_store_backlog_is_lag_not_damage(tmp_path):
    from notebook_builder.cells.c17_snapshots import StoreState
    ctx, shas = archive(tmp_path)
    name = f"pdf_by_hash/{shas[0]}.pdf"
    stored(tmp_path, name).unlink()
    result = audit(ctx, pending={name})
    assert result.found == [] and result.missing == [name]
    assert StoreState(ctx.db).store_pending_count() == 0
    ctx.close()


# ------------------------------------------------------------------ figures


def test_a_document_extracted_without_its_figures_fails_verify_and_the_next_run_measures_it(tmp_path):
    from notebook_builder.cells.c80_extract import extract
    from notebook_builder.simcourt.pdfs import opinion_pdf
    pdf = opinion_pdf(seed=3, case_number="2020-CA-0003", court="CA", title="A V. B", description="OPINION",
                      filed="2020-01-01", creation_date="D:20200101")
    ctx = open_test_context(tmp_path, name="ws", env={"KY_WORKERS": "1"})
    sha = add_document(ctx, "D1", pdf, text="the text an older version extracted")
    with ctx.db.transaction():
        ctx.db.conn.execute("UPDATE documents SET extracted_chars = NULL, pages = NULL WHERE document_id = 'D1'")
    result = verify(ctx)
    assert not result.passed and result.without_figures == ["D1"]
    assert any(reason.startswith("1 documents are extracted without their figures") and "D1" in reason
               for reason in result.reasons)
    row = ctx.db.get_document("D1")
    assert row["status"] == "downloaded" and row["extracted_chars"] == len("the text an older version extracted")
    extract(ctx)
    row = ctx.db.get_document("D1")
    assert row["status"] == "extracted" and row["pages"] >= 1 and row["extracted_chars"] is not None
    assert ctx.path(f"text/{sha}.txt").read_text() == "the text an older version extracted"   # kept
    assert verify(ctx).passed
    ctx.close()


# ------------------------------------------------------------------ Drive


@pytest.fixture
def sim():
    from notebook_builder.simdrive import SimDrive
    with SimDrive(seed=3) as drive:
        yield drive


def test_on_drive_a_file_another_client_changed_is_found_from_the_listing_with_no_download(tmp_path, sim):
    ctx, shas = archive(tmp_path, documents=3, KY_STORE="drive", KY_DRIVE_API=sim.api_root,
                        KY_DRIVE_FOLDER="ky_court", KY_DRIVE_WRITES="400")
    first = verify(ctx)
    assert first.passed, first.reasons
    assert first.fixity.read == 0            # every file proven from its workspace copy and Drive's md5
    name = f"pdf_by_hash/{shas[1]}.pdf"
    good = ctx.path(name).read_bytes()
    held = sim.file_by_name(f"ky_court/{name}")
    sim.set_content(held["id"], good.replace(b"document", b"DOCUMENT"))   # same size, other bytes
    downloads = sim.requests["media"]
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.found[0].startswith(f"store {name}: md5 ")
    assert result.fixity.healed == [f"{name} (from the workspace)"]
    assert sim.requests["media"] == downloads
    assert sim.content(sim.file_by_name(f"ky_court/{name}")["id"]) == good
    assert result.fixity.read == 0 and result.fixity.listed == 7    # 3 PDFs, 3 texts and their pack
    ctx.close()


def drive_archive(tmp_path: Path, sim):
    """Three documents in a simulated Drive store, verified once (their texts in one pack)."""
    ctx, shas = archive(tmp_path, documents=3, KY_STORE="drive", KY_DRIVE_API=sim.api_root,
                        KY_DRIVE_FOLDER="ky_court", KY_DRIVE_WRITES="400")
    assert verify(ctx).passed
    [pack] = [entry for entry in sim.files_in("ky_court/text") if entry["title"].startswith("pack-")]
    return ctx, shas, pack


def test_on_drive_a_damaged_text_pack_is_made_again_from_its_texts_in_the_workspace(tmp_path, sim):
    ctx, shas, pack = drive_archive(tmp_path, sim)
    good = sim.content(pack["id"])
    sim.set_content(pack["id"], good[:-10])                 # torn on Drive
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"text/{pack['title']} (from its texts in the workspace)"]
    assert sim.content(pack["id"]) == good
    ctx.close()


def test_on_drive_a_pack_no_copy_heals_leaves_its_texts_failing_by_name(tmp_path, sim):
    ctx, shas, pack = drive_archive(tmp_path, sim)
    sim.set_content(pack["id"], b"not a zip")
    ctx.path(f"text/{shas[0]}.txt").unlink()
    result = verify(ctx)
    assert not result.passed
    assert [line.split(":")[0] for line in result.fixity.unhealed] == [f"text/{shas[0]}.txt"]
    assert sorted(result.fixity.healed) == sorted(f"text/{sha}.txt (from the workspace)" for sha in shas[1:])
    again = verify(ctx)                                     # the two healed texts are files of their own now
    assert [line.split(":")[0] for line in again.fixity.unhealed] == [f"text/{shas[0]}.txt"]
    ctx.close()


def test_on_drive_a_damaged_pdf_is_healed_from_another_file_drive_holds_under_its_name(tmp_path, sim):
    ctx, shas, _ = drive_archive(tmp_path, sim)
    name = f"pdf_by_hash/{shas[2]}.pdf"
    good = ctx.path(name).read_bytes()
    held = sim.file_by_name(f"ky_court/{name}")
    sim.set_content(held["id"], b"rotted")
    sim.add_file(sim.folder_id("ky_court/pdf_by_hash"), held["title"], good)   # another runtime's copy
    ctx.path(name).unlink()
    result = verify(ctx)
    assert result.passed, result.reasons
    assert result.fixity.healed == [f"{name} (from another copy in the store)"]
    assert sim.content(held["id"]) == good
    assert verify(ctx).duplicates["trashed"] == 1       # the copies are one again: the newer one trashed
    assert [entry["title"] for entry in sim.files_in("ky_court/pdf_by_hash")].count(held["title"]) == 1
    ctx.close()


def test_once_every_file_was_proven_a_run_that_finds_nothing_new_writes_no_fixity_row(tmp_path):
    ctx, _ = archive(tmp_path, documents=40)
    written: list[int] = []
    save = FixityRecords.save

    def counting(self, rows):
        written.append(len(rows))
        return save(self, rows)
    FixityRecords.save = counting
    try:
        for _ in range(13):
            audit(ctx)
    finally:
        FixityRecords.save = save
    # The first cycle learns each file's md5 (a row each, once); after it a slice proven whole is one kv row.
    assert sum(written[:10]) > 0 and written[10:] == [0, 0, 0]
    proofs = FixityRecords(ctx.db).bucket_proofs()
    assert proofs["cycle"] == 10 and len(proofs["runs"]) == 10
    ctx.close()


def test_an_interrupted_run_keeps_each_proof_it_made_in_its_files_rows(tmp_path):
    ctx, _ = archive(tmp_path, documents=40)
    for _ in range(10):
        audit(ctx)                                     # every file proven once: the first cycle
    calls = iter(range(1000))
    result = audit(ctx, interrupted=lambda: next(calls) >= 3)   # three proofs, then a stop
    rows = FixityRecords(ctx.db).load()
    proven_now = [name for name, row in rows.items() if row["checked_run"] == result.run]
    assert len(proven_now) == 3                        # kept by their rows: the bucket's proof was not recorded
    assert FixityRecords(ctx.db).bucket_proofs()["runs"][str(result.run % 10)][0] != result.run
    ctx.close()
