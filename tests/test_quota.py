"""Drive quota: read, recorded in status.json, warned about, and survived.

The store is a real DriveStore over pydrive2 whose HTTP is an HttpMockSequence
(the scripted Drive of test_drive_store.py): Drive About answers near full and
full, and 403 storageQuotaExceeded on upload. The run keeps working on local
state, queues what it could not upload in `store_pending`, says so in
status.json, and a later catch_up with a working Drive brings the store level.
"""
from __future__ import annotations

import hashlib
import json
import logging

import pytest
from test_drive_store import (PDF_FOLDER_FOUND, ROOT_FOUND, ScriptedDrive, answer, error, file, generated_ids, listing,
                              multipart_metadata, upload)

from notebook_builder.cells.c00_config import load_config
from notebook_builder.cells.c17_snapshots import StoreState
from notebook_builder.cells.c35_context import open_context, write_status

GIB = 1024 ** 3
QUOTA_FULL = error(403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded.")
PDF = b"%PDF-1.4 quota test\n"
SHA = hashlib.sha256(PDF).hexdigest()
PDF_NAME = f"pdf_by_hash/{SHA}.pdf"


def about(used: int, total: int) -> tuple[dict, str]:
    return answer({"kind": "drive#about", "quotaType": "LIMITED", "quotaBytesTotal": str(total),
                   "quotaBytesUsed": str(used // 2), "quotaBytesUsedAggregate": str(used)})


def stored_without_md5(id_: str, title: str) -> dict:
    """A Drive file resource for a mutable name whose bytes (timestamps) the test cannot know."""
    return {"id": id_, "title": title, "mimeType": "application/json"}


@pytest.fixture
def make_context(tmp_path):
    contexts = []

    def make(drive: ScriptedDrive):
        cfg = load_config({}, WORKSPACE=str(tmp_path / "workspace"), STORE="drive")
        ctx = open_context(cfg, store=drive.store())
        ctx.open_database()
        contexts.append(ctx)
        return ctx
    yield make
    for ctx in contexts:
        ctx.close()


def local_pdf(ctx) -> str:
    path = ctx.path(PDF_NAME)
    path.write_bytes(PDF)
    return str(path)


def test_quota_below_the_warning_line_is_recorded_quietly(make_context, caplog):
    drive = ScriptedDrive([about(5 * GIB, 15 * GIB)])
    ctx = make_context(drive)
    with caplog.at_level(logging.WARNING, logger="kycourt.context"):
        assert ctx.refresh_quota() == {"used": 5 * GIB, "total": 15 * GIB, "fraction": 0.3333}
    assert not [record for record in caplog.records if "quota" in record.getMessage()]
    assert drive.all_answers_used()


def test_a_checkpoint_takes_a_quota_asked_within_ten_minutes_as_known(make_context):
    drive = ScriptedDrive([about(5 * GIB, 15 * GIB), about(6 * GIB, 15 * GIB)])
    ctx = make_context(drive)
    assert ctx.refresh_quota()["used"] == 5 * GIB
    assert ctx.refresh_quota(max_age=600)["used"] == 5 * GIB     # no request: one answer left unused
    assert not drive.all_answers_used()
    assert ctx.refresh_quota()["used"] == 6 * GIB                # asked afresh (verify's)
    assert drive.all_answers_used()


def test_quota_near_full_and_full_is_recorded_and_warned(make_context, caplog):
    drive = ScriptedDrive([about(int(14.25 * GIB), 15 * GIB), about(15 * GIB, 15 * GIB)])
    ctx = make_context(drive)
    with caplog.at_level(logging.WARNING, logger="kycourt.context"):
        near = ctx.refresh_quota()
        assert near == {"used": int(14.25 * GIB), "total": 15 * GIB, "fraction": 0.95}
        assert ctx.refresh_quota()["fraction"] == 1.0
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("quota 95% used" in message for message in warnings)
    assert any("quota 100% used" in message for message in warnings)
    assert ctx.quota == {"used": 15 * GIB, "total": 15 * GIB, "fraction": 1.0}
    assert [path for _, path, _ in drive.sent] == ["/drive/v2/about"] * 2


def test_warning_line_is_the_quota_warn_knob(make_context, caplog, tmp_path):
    drive = ScriptedDrive([about(8 * GIB, 10 * GIB)])
    ctx = make_context(drive)
    ctx.cfg = ctx.cfg.replace(QUOTA_WARN_FRACTION=0.8)
    with caplog.at_level(logging.WARNING, logger="kycourt.context"):
        ctx.refresh_quota()
    assert any("quota 80% used" in record.getMessage() for record in caplog.records)


def test_quota_exhaustion_keeps_the_run_on_local_state_and_a_later_run_catches_up(make_context, tmp_path):
    full = ScriptedDrive([
        about(int(14.5 * GIB), 15 * GIB),                  # the run starts: 97% full
        ROOT_FOUND, PDF_FOLDER_FOUND, listing(),           # put: is the PDF in the store? no
        generated_ids("G1", "G2"),                         # the ids the files are created under
        QUOTA_FULL,                                        # upload (listing known complete): refused
        about(15 * GIB, 15 * GIB),                         # the checkpoint's quota read: full
        listing(), QUOTA_FULL,                             # write_status mirrors status.json: refused too
    ])
    ctx = make_context(full)
    ctx.refresh_quota()

    assert ctx.mirror.put(PDF_NAME, local_pdf(ctx)) is False
    assert ctx.mirror.lagging.startswith("quota exceeded")
    assert [row["name"] for row in StoreState(ctx.db).store_pending()] == [PDF_NAME]
    assert ctx.path(PDF_NAME).read_bytes() == PDF                  # local state is untouched

    ctx.refresh_quota()
    document = write_status(ctx, verify=None)
    assert full.all_answers_used()
    saved = json.loads(ctx.path("status.json").read_text())
    assert saved == document
    assert saved["store_lagging"].startswith("quota exceeded") and "storageQuotaExceeded" in saved["store_lagging"]
    assert saved["store_quota"] == {"used": 15 * GIB, "total": 15 * GIB, "fraction": 1.0}
    assert saved["store_pending"] == 1

    # A later run: the user freed space. catch_up uploads the backlog; status.json is level again.
    working = ScriptedDrive([
        ROOT_FOUND, PDF_FOLDER_FOUND, listing(),           # catch_up: is the PDF there? no
        generated_ids("F1", "S1"),
        *upload(file("F1", f"{SHA}.pdf", PDF)),            # upload it (the listing is known complete)
        listing(), *upload(stored_without_md5("S1", "status.json")),
    ])
    later = make_context(working)
    assert StoreState(later.db).store_pending_count() == 1                     # the backlog survived in the database
    assert later.mirror.catch_up(later.workspace) == {"uploaded": 1, "left": 0}
    assert later.mirror.lagging is None
    caught_up = write_status(later)
    assert caught_up["store_lagging"] is None and caught_up["store_pending"] == 0
    assert working.all_answers_used()
    assert multipart_metadata(working, 4)["parents"] == [{"id": "PDFS"}]   # the PDF went to pdf_by_hash/


def test_once_the_quota_is_exhausted_later_uploads_are_queued_without_asking_drive(make_context):
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(), generated_ids("G1"),
                           QUOTA_FULL])                                   # the one multipart upload: refused
    ctx = make_context(drive)
    assert ctx.mirror.put(PDF_NAME, local_pdf(ctx)) is False
    other = ctx.path(f"text/{SHA}.txt")
    other.write_text("text")
    assert ctx.mirror.put(f"text/{SHA}.txt", other) is False      # must not reach Drive: no answers left
    assert StoreState(ctx.db).store_pending_count() == 2
