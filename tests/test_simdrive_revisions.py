"""What the simulated Drive keeps, and for how long: revisions, the trash, the quota, its clock,
files kept as metadata only, and what it counts of uploads; through the real pydrive2 +
googleapiclient stack (`connect_drive`), as the pipeline speaks to Drive.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import urllib.request

import pytest
from googleapiclient.errors import HttpError
from googleapiclient.http import MediaIoBaseUpload
from support import put_bytes

from notebook_builder.cells.c00_config import StoreError
from notebook_builder.cells.c07_drive_api import connect_drive
from notebook_builder.cells.drive_store import DriveStore
from notebook_builder.simdrive import SimDrive
from notebook_builder.simdrive.storage import (MAX_PINNED, MAX_UNPINNED, DriveClock, RevisionStore, TooManyPinned,
                                               metadata_only_match)

FOLDER = "ky_court"
DAY = 86_400.0


@pytest.fixture
def sim():
    with SimDrive(quota_bytes=10**9) as drive:       # a limit, so the store's quota() reads it
        yield drive


@pytest.fixture
def service(sim):
    return connect_drive(sim.api_root, http_timeout=5).auth.service


def media(data: bytes, *, resumable: bool = False) -> MediaIoBaseUpload:
    return MediaIoBaseUpload(io.BytesIO(data), "application/octet-stream", resumable=resumable)


def insert(service, title: str, data: bytes, **params) -> dict:
    return service.files().insert(body={"title": title}, media_body=media(data), **params).execute()


def update(service, file_id: str, data: bytes, *, resumable: bool = False, **params) -> dict:
    return service.files().update(fileId=file_id, body={}, media_body=media(data, resumable=resumable),
                                  **params).execute()


def revisions(service, file_id: str) -> list[dict]:
    return service.revisions().list(fileId=file_id).execute()["items"]


def quota_used(service) -> int:
    return int(service.about().get().execute()["quotaBytesUsed"])


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def drive_store(sim: SimDrive) -> DriveStore:
    return DriveStore(connect_drive(sim.api_root, http_timeout=5), FOLDER, backoff_base=0.01, backoff_cap=0.05)


# ------------------------------------------------------------------------------ revisions


def test_an_update_keeps_the_old_head_as_a_revision_and_new_revision_false_keeps_none(sim, service):
    made = insert(service, "status.json", b"one")
    update(service, made["id"], b"second")
    listed = revisions(service, made["id"])
    assert [(r["md5Checksum"], r["fileSize"], r["pinned"]) for r in listed] == [
        (md5(b"one"), "3", False), (md5(b"second"), "6", False)]
    assert all(r["kind"] == "drive#revision" and r["modifiedDate"].endswith("Z") for r in listed)
    head = service.files().get(fileId=made["id"]).execute()
    assert head["headRevisionId"] == listed[-1]["id"] and head["md5Checksum"] == md5(b"second")
    assert service.files().get_media(fileId=made["id"], revisionId=listed[0]["id"]).execute() == b"one"
    assert service.revisions().get(fileId=made["id"], revisionId=listed[0]["id"]).execute() == listed[0]
    assert quota_used(service) == 3 + 6

    update(service, made["id"], b"third!!", newRevision=False)                 # the head's bytes replaced
    update(service, made["id"], b"fourth!", newRevision=False, resumable=True)  # a resumable session's too
    listed = revisions(service, made["id"])
    assert [r["md5Checksum"] for r in listed] == [md5(b"one"), md5(b"fourth!")]
    assert service.files().get_media(fileId=made["id"]).execute() == b"fourth!"
    assert quota_used(service) == 3 + 7 == sim.used_bytes


def test_the_drive_stores_rewrites_of_a_name_replace_its_head_and_leave_no_revision(sim):
    store = drive_store(sim)
    for number in range(3):
        put_bytes(store, "status.json", b'{"run": %d}' % number)
    held = sim.file_by_name(f"{FOLDER}/status.json")
    assert len(sim.revisions(held["id"])) == 1                 # newRevision=false: nothing kept in the quota
    assert store.read_file("status.json") == b'{"run": 2}'
    assert store.quota()["used"] == len(b'{"run": 0}')


def test_earlier_revisions_expire_after_30_days_of_the_drives_clock_and_pinned_ones_stay(sim, service):
    made = insert(service, "ky_court.sqlite", b"a" * 10)
    update(service, made["id"], b"b" * 20)
    update(service, made["id"], b"c" * 30, pinned=True)
    first, second, head = revisions(service, made["id"])
    service.revisions().patch(fileId=made["id"], revisionId=first["id"], body={"pinned": True}).execute()

    sim.advance(days=29)
    assert len(revisions(service, made["id"])) == 3 and quota_used(service) == 60
    sim.advance(days=1)
    assert [r["id"] for r in revisions(service, made["id"])] == [first["id"], head["id"]]
    assert quota_used(service) == 40 and sim.stats()["purged"] == {"30 days": 1}
    sim.advance(days=365)
    assert len(revisions(service, made["id"])) == 2                      # pinned: kept; the head: never purged
    service.revisions().update(fileId=made["id"], revisionId=first["id"], body={"pinned": False}).execute()
    assert [r["id"] for r in revisions(service, made["id"])] == [head["id"]]
    assert quota_used(service) == 30


def test_an_upload_past_100_unpinned_revisions_purges_the_oldest_unpinned(sim, service):
    made = insert(service, "feed.atom", b"r0")
    service.revisions().patch(fileId=made["id"], revisionId=revisions(service, made["id"])[0]["id"],
                              body={"pinned": True}).execute()
    for number in range(1, MAX_UNPINNED + 2):
        update(service, made["id"], b"r%d" % number)
    held = [service.files().get_media(fileId=made["id"], revisionId=r["id"]).execute()
            for r in revisions(service, made["id"])[:3]]
    assert held == [b"r0", b"r2", b"r3"]                                   # r1 went; the pinned r0 stayed
    assert len(revisions(service, made["id"])) == 1 + MAX_UNPINNED
    assert sim.stats()["purged"] == {"100 revisions": 1}


def test_the_last_revision_cannot_be_deleted_and_deleting_the_head_makes_the_one_before_it_head(sim, service):
    made = insert(service, "a.bin", b"old")
    update(service, made["id"], b"newer")
    old, new = revisions(service, made["id"])
    assert service.revisions().delete(fileId=made["id"], revisionId=new["id"]).execute() in ("", {})
    assert service.files().get(fileId=made["id"]).execute()["md5Checksum"] == md5(b"old")
    assert service.files().get_media(fileId=made["id"]).execute() == b"old"
    with pytest.raises(HttpError) as refused:
        service.revisions().delete(fileId=made["id"], revisionId=old["id"]).execute()
    assert refused.value.resp.status == 403
    assert json.loads(refused.value.content)["error"]["errors"][0]["reason"] == "cannotDeleteLastRevision"
    with pytest.raises(HttpError) as missing:
        service.revisions().get(fileId=made["id"], revisionId=new["id"]).execute()
    assert missing.value.resp.status == 404
    assert quota_used(service) == 3


def test_a_file_holds_at_most_200_pinned_revisions_and_pinned_ones_do_not_count_toward_100():
    store = RevisionStore(DriveClock(lambda: 0.0))
    for number in range(MAX_PINNED):
        store.upload("F", b"%d" % number, size=1, md5="m", mime_type="x/y", title="t", pinned=True)
    with pytest.raises(TooManyPinned, match="at most 200 pinned"):
        store.upload("F", b"more", size=1, md5="m", mime_type="x/y", title="t", pinned=True)
    for number in range(MAX_UNPINNED):
        store.upload("F", b"u%d" % number, size=1, md5="m", mime_type="x/y", title="t")
    assert len(store.of("F")) == MAX_PINNED + MAX_UNPINNED and store.purged == {}
    with pytest.raises(TooManyPinned):
        store.set_pinned("F", store.of("F")[-2].id, True)
    store.upload("F", b"one more", size=1, md5="m", mime_type="x/y", title="t")
    assert store.of("F")[MAX_PINNED].data == b"u1" and store.purged == {"100 revisions": 1}
    assert store.bytes_held == MAX_PINNED + MAX_UNPINNED


# ------------------------------------------------------------------------ delete and trash


def test_delete_frees_at_once_and_the_trash_counts_until_it_is_emptied(sim, service):
    kept = insert(service, "kept.bin", b"k" * 5)
    trashed = insert(service, "trashed.bin", b"t" * 100)
    update(service, trashed["id"], b"T" * 100)
    deleted = insert(service, "deleted.bin", b"d" * 1000)
    folder = service.files().insert(body={"title": "journal", "mimeType": "application/vnd.google-apps.folder"}
                                    ).execute()
    inside = service.files().insert(body={"title": "j.jsonl", "parents": [{"id": folder["id"]}]},
                                    media_body=media(b"j" * 10)).execute()
    assert quota_used(service) == 5 + 200 + 1000 + 10

    service.files().delete(fileId=deleted["id"]).execute()
    with pytest.raises(HttpError) as gone:
        service.files().get(fileId=deleted["id"]).execute()
    assert gone.value.resp.status == 404 and quota_used(service) == 5 + 200 + 10

    service.files().trash(fileId=trashed["id"]).execute()
    service.files().trash(fileId=folder["id"]).execute()
    about = service.about().get().execute()
    assert (int(about["quotaBytesUsed"]), int(about["quotaBytesUsedInTrash"])) == (215, 210)
    assert sim.held().trashed_bytes == 210

    service.files().emptyTrash().execute()
    about = service.about().get().execute()
    assert (int(about["quotaBytesUsed"]), int(about["quotaBytesUsedInTrash"])) == (5, 0)
    assert [f["id"] for f in service.files().list().execute()["items"]] == [kept["id"]]
    for file_id in (trashed["id"], inside["id"]):
        with pytest.raises(HttpError):
            service.files().get(fileId=file_id).execute()


def test_untrash_puts_a_file_back_in_listings(sim, service):
    made = insert(service, "a.bin", b"a")
    service.files().trash(fileId=made["id"]).execute()
    assert service.files().list(q="trashed = false").execute()["items"] == []
    service.files().untrash(fileId=made["id"]).execute()
    assert [f["id"] for f in service.files().list(q="trashed = false").execute()["items"]] == [made["id"]]


# --------------------------------------------------------------------------------- the clock


def test_the_clock_is_the_real_one_unless_given_and_advances_for_dates_and_expiry():
    with SimDrive() as drive:
        made = insert(connect_drive(drive.api_root).auth.service, "a.bin", b"a")
        created = _dt.datetime.strptime(made["createdDate"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert abs(created - _dt.datetime.utcnow()) < _dt.timedelta(minutes=1)
    start = _dt.datetime(2027, 3, 1, tzinfo=_dt.timezone.utc).timestamp()
    with SimDrive(clock=lambda: start) as drive:
        service = connect_drive(drive.api_root).auth.service
        first = insert(service, "a.bin", b"a")
        second = insert(service, "b.bin", b"b")                            # a frozen clock: still in order
        assert first["createdDate"] == "2027-03-01T00:00:00.000Z" < second["createdDate"]
        request = urllib.request.Request(f"{drive.api_root}__sim__/advance?days=2&hours=1", method="POST")
        with urllib.request.urlopen(request) as answer:
            assert json.loads(answer.read())["now"] == start + 2 * DAY + 3600
        later = update(service, first["id"], b"aa")
        assert later["modifiedDate"].startswith("2027-03-03T01:00:00")
        with pytest.raises(ValueError, match="only moves on"):
            drive.advance(days=-1)


# ------------------------------------------------------------------ metadata only, accounting


def test_metadata_only_names_keep_size_and_md5_and_reading_them_back_is_refused():
    assert metadata_only_match("ky_court/pdf_by_hash/x.pdf", ("pdf_by_hash/",))
    assert metadata_only_match("ky_court/text/pack-1.zip", ("ky_court/text/",))
    assert not metadata_only_match("ky_court/context/x.txt", ("text/",))
    pdf = b"%PDF " + bytes(range(256)) * 8
    with SimDrive(metadata_only=("pdf_by_hash/",), quota_bytes=10**9) as sim:
        store = drive_store(sim)
        name = f"pdf_by_hash/{hashlib.sha256(pdf).hexdigest()}.pdf"
        put_bytes(store, name, pdf)
        put_bytes(store, "status.json", b"{}")
        held = sim.file_by_name(f"{FOLDER}/{name}")
        assert sim.content(held["id"]) is None
        assert (held["md5Checksum"], held["fileSize"]) == (md5(pdf), str(len(pdf)))
        assert store.exists(name) and store.size(name) == len(pdf) and store.quota()["used"] == len(pdf) + 2
        assert drive_store(sim).read_file("status.json") == b"{}"
        with pytest.raises(StoreError, match="metadata only"):
            drive_store(sim).read_file(name)
        assert sim.rejected["simulatedMetadataOnly"] == 1


def test_without_earlier_bytes_a_superseded_revision_keeps_size_and_md5_and_still_counts():
    with SimDrive(keep_earlier_bytes=False) as sim:
        service = connect_drive(sim.api_root, http_timeout=5).auth.service
        made = insert(service, "ky_court.sqlite", b"a" * 10)
        update(service, made["id"], b"b" * 20)
        earlier, head = revisions(service, made["id"])
        assert service.files().get_media(fileId=made["id"]).execute() == b"b" * 20
        assert (earlier["md5Checksum"], earlier["fileSize"]) == (md5(b"a" * 10), "10")
        with pytest.raises(HttpError) as refused:
            service.files().get_media(fileId=made["id"], revisionId=earlier["id"]).execute()
        assert refused.value.resp.status == 400
        assert quota_used(service) == 30 and sim.held().earlier_bytes == 10


def test_uploads_are_counted_by_stored_name_and_request_kind_and_held_is_grouped(sim):
    store = drive_store(sim)
    pdfs = [b"%%PDF %d " % number * 40 for number in range(3)]
    for data in pdfs:
        put_bytes(store, f"pdf_by_hash/{hashlib.sha256(data).hexdigest()}.pdf", data)
    put_bytes(store, "status.json", b'{"a": 1}')
    put_bytes(store, "status.json", b'{"a": 22}')

    def kind(path: str) -> str:
        inside = path.split("/", 1)[1]
        return inside.split("/")[0] + "/" if "/" in inside else inside
    uploaded = sim.uploaded.by(kind)
    assert uploaded == {"pdf_by_hash/": (3, sum(map(len, pdfs))), "status.json": (2, 8 + 9)}
    assert sim.uploaded.count[f"{FOLDER}/status.json"] == 2
    assert sim.received_bytes["insert"] > sum(map(len, pdfs)) and sim.received_bytes["update"] > 9
    assert sim.received_bytes["list"] == 0

    held = sim.held()
    by_kind = held.by(kind)
    assert by_kind["pdf_by_hash/"].total_bytes == sum(map(len, pdfs))
    assert (by_kind["status.json"].head_bytes, by_kind["status.json"].earlier_bytes) == (9, 0)
    assert held.total_bytes == sim.used_bytes == store.quota()["used"] == sum(map(len, pdfs)) + 9
    assert held.summary().startswith("Drive holds 0.0 MB in 4 files, of it 0.0 MB in 0 earlier revisions")
    with urllib.request.urlopen(f"{sim.api_root}__sim__/stats") as answer:
        stats = json.loads(answer.read())
    assert stats["held"]["total_bytes"] == held.total_bytes and stats["held"]["earlier_revisions"] == 0
    assert stats["uploaded_by_folder"][f"{FOLDER}/pdf_by_hash"] == {"uploads": 3, "bytes": sum(map(len, pdfs))}
    assert stats["requests"] == dict(sim.requests)                        # the stats path is not counted
