"""DriveStore through pydrive2's real code, offline.

The GoogleDrive is real: pydrive2's GoogleAuth with oauth2client credentials,
`Authorize()` building the Drive v2 service from the discovery document that
googleapiclient ships (static discovery: no network), and every request going
through googleapiclient into an `HttpMockSequence` that replays Drive v2 JSON
answers in order and records what was sent (`request_sequence`). A test that
makes one request too many gets IndexError from the mock; each test also
checks that every scripted answer was consumed.
"""
from __future__ import annotations

import hashlib
import json
import sys
from urllib.parse import parse_qs, urlsplit

import pytest
from googleapiclient.http import HttpMockSequence
from oauth2client.client import AccessTokenCredentials
from pydrive2.auth import GoogleAuth
from pydrive2.drive import GoogleDrive

from notebook_builder.cells.c00_config import (IntegrityError, StoreError, StoreQuotaExceeded, load_config,
                                               retry_delay)
from notebook_builder.cells.c07_drive_api import drive_verdict
from notebook_builder.cells.drive_store import DriveStore, open_drive_store

from support import put_bytes

FOLDER = "application/vnd.google-apps.folder"
SHA = "a" * 64
PDF_NAME = f"pdf_by_hash/{SHA}.pdf"


# ------------------------------------------------------------- scripted Drive


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def answer(body: dict, status: int = 200) -> tuple[dict, str]:
    return {"status": str(status)}, json.dumps(body)


def listing(*items: dict, next_page: str | None = None) -> tuple[dict, str]:
    body = {"kind": "drive#fileList", "items": list(items)}
    if next_page:
        body["nextPageToken"] = next_page
    return answer(body)


def folder(id_: str, title: str, created: str = "2024-01-01T00:00:00.000Z") -> dict:
    return {"id": id_, "title": title, "mimeType": FOLDER, "createdDate": created}


def file(id_: str, title: str, data: bytes, created: str = "2024-01-01T00:00:00.000Z",
         modified: str | None = None, parents: tuple[str, ...] = ()) -> dict:
    return {"id": id_, "title": title, "mimeType": "application/octet-stream",
            "md5Checksum": md5(data), "fileSize": str(len(data)), "createdDate": created,
            "modifiedDate": modified or created, "parents": [{"id": parent} for parent in parents]}


def generated_ids(*ids: str) -> tuple[dict, str]:
    """The answer of files.generateIds: the ids the store creates files under."""
    return answer({"kind": "drive#generatedIds", "space": "drive", "ids": list(ids)})


def error(status: int, reason: str, message: str = "") -> tuple[dict, str]:
    return answer({"error": {"code": status, "message": message or reason,
                             "errors": [{"domain": "usageLimits", "reason": reason, "message": message}]}},
                  status)


def upload(stored: dict) -> list[tuple[dict, str]]:
    """A multipart upload (a small file): one request, answered with the file resource."""
    return [answer(stored)]


def resumable_upload(stored: dict) -> list[tuple[dict, str]]:
    """A resumable upload (a large file): the session URI, then the one chunk's answer."""
    return [({"status": "200", "location": "https://www.googleapis.com/upload/session/1"}, ""),
            answer(stored)]


def multipart_metadata(drive: "ScriptedDrive", index: int) -> dict:
    """The JSON metadata part of the multipart request `index`."""
    import email.parser
    import email.policy
    _uri, _method, body, headers = drive.http.request_sequence[index]
    content_type = headers.get("content-type") or headers.get(b"content-type")
    content_type = content_type.decode() if isinstance(content_type, bytes) else content_type
    body = body.encode("latin-1") if isinstance(body, str) else body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    return json.loads(next(message.iter_parts()).get_content())


def media(data: bytes) -> tuple[dict, bytes]:
    return {"status": "200", "content-length": str(len(data))}, data


ROOT_FOUND = listing(folder("ROOT", "ky_court"))
PDF_FOLDER_FOUND = listing(folder("PDFS", "pdf_by_hash"))


class ScriptedDrive:
    """A real pydrive2 GoogleDrive whose HTTP is an HttpMockSequence."""

    def __init__(self, answers: list):
        self.http = HttpMockSequence(list(answers))
        auth = GoogleAuth(settings_file=None)
        auth.credentials = AccessTokenCredentials("test-token", "kycourt-tests")
        auth.http = self.http
        auth.Authorize()                      # real: credentials.authorize + discovery build("drive", "v2")
        auth.thread_local.http = auth.http    # LoadAuth would otherwise build a real httplib2.Http
        self.drive = GoogleDrive(auth)
        self.sleeps: list[float] = []

    def store(self, folder_path: str = "ky_court", **options) -> DriveStore:
        # The scripted answers serve this thread only (pydrive2 gives each thread its own http):
        # uploads stay in the caller's thread, not behind the crawl in the mirror's uploader.
        options.setdefault("deferred_uploads", False)
        return DriveStore(self.drive, folder_path, sleep=self.sleeps.append, **options)

    @property
    def sent(self) -> list[tuple[str, str, dict]]:
        """(method, path, query parameters) of every request, in order."""
        result = []
        for uri, method, _body, _headers in self.http.request_sequence:
            parts = urlsplit(uri)
            result.append((method, parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}))
        return result

    def queries(self) -> list[str]:
        return [params["q"] for method, path, params in self.sent if "q" in params]

    def body(self, index: int) -> dict:
        return json.loads(self.http.request_sequence[index][2])

    def all_answers_used(self) -> bool:
        return not self.http._iterable


# ------------------------------------------------------------ pure decisions


@pytest.mark.parametrize("status, reason, message, verdict", [
    (503, "backendError", "", "retry"),
    (500, "", "", "retry"),
    (429, "", "", "retry"),
    (None, "ConnectionResetError", "", "retry"),
    (403, "rateLimitExceeded", "", "retry"),
    (403, "userRateLimitExceeded", "", "retry"),
    (403, "storageQuotaExceeded", "", "quota"),
    (403, "quotaExceeded", "The user's Drive storage quota has been exceeded.", "quota"),
    (403, "dailyLimitExceeded", "", "fail"),
    (403, "insufficientPermissions", "", "fail"),
    (404, "notFound", "", "fail"),
    (401, "authError", "", "fail"),
])
def test_verdict_of_a_failed_drive_request(status, reason, message, verdict):
    assert drive_verdict(status, reason, message) == verdict


def test_backoff_doubles_from_base_up_to_cap():
    assert [retry_delay(n, base=1.0, cap=32.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 32, 32]


# ---------------------------------------------------- folders and lookups


def test_missing_subfolder_is_created_once_and_cached():
    drive = ScriptedDrive([
        ROOT_FOUND,
        listing(),                                           # no pdf_by_hash yet
        generated_ids("G1", "G2", "G3"),                     # one batch of ids serves all three inserts
        answer(folder("G1", "pdf_by_hash")),                 # folder insert: its listing is known (empty)
        *upload(file("G2", f"{SHA}.pdf", b"one")),           # no title lookup: the listing is complete
        *upload(file("G3", f"{'b' * 64}.pdf", b"two")),      # nor for the second: our writes keep it current
    ])
    store = drive.store()
    put_bytes(store, PDF_NAME, b"one")
    put_bytes(store, f"pdf_by_hash/{'b' * 64}.pdf", b"two")

    assert drive.queries() == [
        "title = 'ky_court' and 'root' in parents and trashed = false",
        "title = 'pdf_by_hash' and 'ROOT' in parents and trashed = false",
    ]
    assert drive.sent[2][:2] == ("GET", "/drive/v2/files/generateIds")
    assert drive.sent[3][:2] == ("POST", "/drive/v2/files")
    assert drive.body(3) == {"id": "G1", "title": "pdf_by_hash", "mimeType": FOLDER, "parents": [{"id": "ROOT"}]}
    assert drive.sent[4][:2] == ("POST", "/upload/drive/v2/files")
    assert drive.sent[4][2]["uploadType"] == "multipart"       # one request for a small file
    assert multipart_metadata(drive, 4)["parents"] == [{"id": "G1"}]
    assert multipart_metadata(drive, 4)["id"] == "G2"          # created under the id chosen first
    assert drive.all_answers_used()


def test_nested_root_folder_path_is_walked_from_my_drive():
    drive = ScriptedDrive([
        listing(folder("ARCH", "archive")),
        listing(folder("KY", "ky_court")),
        listing(file("S", "status.json", b"{}")),
        media(b"{}"),
    ])
    assert drive.store("archive/ky_court").read_file("status.json") == b"{}"
    assert drive.queries() == [
        "title = 'archive' and 'root' in parents and trashed = false",
        "title = 'ky_court' and 'ARCH' in parents and trashed = false",
        "title = 'status.json' and 'KY' in parents and trashed = false",
    ]
    assert drive.sent[3][:2] == ("GET", "/drive/v2/files/S")
    assert drive.sent[3][2]["alt"] == "media"


def test_reading_a_missing_folder_creates_nothing_and_is_remembered():
    drive = ScriptedDrive([ROOT_FOUND, listing()])
    store = drive.store()
    assert store.exists(PDF_NAME) is False
    assert store.size(PDF_NAME) is None
    assert store.list_dir("pdf_by_hash") == []
    assert [method for method, _, _ in drive.sent] == ["GET", "GET"]
    assert drive.all_answers_used()


def test_exists_on_many_names_lists_the_folder_once_across_pages():
    names = [f"{c * 64}.pdf" for c in "abcd"]
    drive = ScriptedDrive([
        ROOT_FOUND, PDF_FOLDER_FOUND,
        listing(file("1", names[0], b"1"), file("2", names[1], b"22"), folder("SUB", "nested"),
                next_page="PAGE2"),
        listing(file("3", names[2], b"333")),
    ])
    store = drive.store()
    assert [store.exists(f"pdf_by_hash/{n}") for n in names] == [True, True, True, False]
    assert store.size(f"pdf_by_hash/{names[2]}") == 3
    assert store.exists("pdf_by_hash/nested") is False        # folders are not files
    assert drive.queries()[2:] == ["'PDFS' in parents and trashed = false"] * 2
    assert drive.sent[3][2]["pageToken"] == "PAGE2"
    assert drive.sent[2][2]["maxResults"] == "1000"
    assert drive.all_answers_used()


def test_list_dir_asks_drive_again_and_refreshes_the_cached_listing():
    drive = ScriptedDrive([
        ROOT_FOUND, PDF_FOLDER_FOUND,
        listing(file("1", f"{SHA}.pdf", b"1")),
        listing(file("1", f"{SHA}.pdf", b"1"), file("2", f"{'b' * 64}.pdf", b"2")),   # another session added one
    ])
    store = drive.store()
    assert store.exists(f"pdf_by_hash/{'b' * 64}.pdf") is False     # the cached listing's trade-off
    assert store.list_dir("pdf_by_hash") == [PDF_NAME, f"pdf_by_hash/{'b' * 64}.pdf"]
    assert store.exists(f"pdf_by_hash/{'b' * 64}.pdf") is True
    assert drive.all_answers_used()


def test_quotes_in_titles_are_escaped_in_the_query():
    drive = ScriptedDrive([ROOT_FOUND, listing()])
    with pytest.raises(StoreError, match="not in the store"):
        drive.store().read_file("it's.json")
    assert drive.queries()[1] == "title = 'it\\'s.json' and 'ROOT' in parents and trashed = false"


def test_requests_carry_the_oauth_token():
    drive = ScriptedDrive([ROOT_FOUND, listing()])
    drive.store().exists("status.json")
    headers = drive.http.request_sequence[0][3]
    assert headers[b"Authorization"] == b"Bearer test-token"


# ------------------------------------------------------ duplicates and writes


def test_copies_of_a_rewritten_name_keep_the_newest_trash_the_identical_and_rename_the_differing():
    older = file("OLD", "status.json", b'{"v": 1}', created="2024-01-01T00:00:00.000Z",
                 modified="2024-01-02T00:00:00.000Z")
    twin = file("TWIN", "status.json", b'{"v": 1}', created="2024-02-01T00:00:00.000Z")    # same bytes, younger
    newest = file("NEW", "status.json", b'{"v": 2}', created="2024-01-01T00:00:00.000Z",
                  modified="2024-03-01T00:00:00.000Z")
    other_case = file("CASE", "STATUS.JSON", b"x", created="2023-01-01T00:00:00.000Z")  # queries ignore case
    renamed = {**older, "title": "status.json.conflict-OLD"}
    drive = ScriptedDrive([
        ROOT_FOUND,
        listing(newest, twin, other_case, older),              # the title query
        answer({**twin, "labels": {"trashed": True}}),         # the identical copy to the trash
        answer(renamed),                                       # the differing one renamed
        media(b'{"v": 2}'),
        listing(newest, other_case, renamed),                  # the write lists the folder
        *upload({**newest, "md5Checksum": md5(b'{"v": 4}'), "fileSize": "8"}),
    ])
    store = drive.store()
    assert store.read_file("status.json") == b'{"v": 2}'
    put_bytes(store, "status.json", b'{"v": 4}')

    assert drive.sent[2][:2] == ("POST", "/drive/v2/files/TWIN/trash")       # moved to the trash, not deleted
    assert drive.sent[3][:2] == ("PATCH", "/drive/v2/files/OLD")
    assert drive.body(3) == {"title": "status.json.conflict-OLD"}
    assert drive.sent[4][1] == "/drive/v2/files/NEW"
    method, path, params = drive.sent[6]
    assert (method, path) == ("PUT", "/upload/drive/v2/files/NEW")     # files.update, not files.insert
    assert params["uploadType"] == "multipart"
    assert not any(m == "POST" and "upload" in p for m, p, _ in drive.sent)
    assert drive.all_answers_used()


def test_content_addressed_name_with_other_bytes_is_refused():
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(file("P", f"{SHA}.pdf", b"old"))])
    store = drive.store()
    with pytest.raises(IntegrityError, match="refuses to overwrite"):
        put_bytes(store, PDF_NAME, b"new")
    assert drive.all_answers_used()                            # no upload was attempted


def test_content_addressed_name_with_same_bytes_is_a_noop_from_the_listing():
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(file("P", f"{SHA}.pdf", b"same"))])
    store = drive.store()
    assert store.exists(PDF_NAME)
    put_bytes(store, PDF_NAME, b"same")
    put_bytes(store, PDF_NAME, b"same")
    assert len(drive.sent) == 3                                # the listing only
    assert drive.all_answers_used()


def test_upload_file_checks_content_addressed_name_against_a_fresh_lookup(tmp_path):
    local = tmp_path / "doc.pdf"
    local.write_bytes(b"%PDF local")
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(file("P", f"{SHA}.pdf", b"%PDF other"))])
    with pytest.raises(IntegrityError):
        drive.store().upload_file(PDF_NAME, local)
    assert drive.all_answers_used()


def test_insert_that_failed_after_drive_stored_it_is_answered_409_and_checked_not_repeated(tmp_path):
    local = tmp_path / "doc.pdf"
    local.write_bytes(b"%PDF bytes")
    drive = ScriptedDrive([
        ROOT_FOUND, PDF_FOLDER_FOUND,
        listing(),
        generated_ids("G1"),
        error(500, "backendError"),                            # Drive kept the bytes, then answered 500
        error(409, "duplicate", "A file already exists with the provided ID."),   # the same insert again
        answer(file("G1", f"{SHA}.pdf", b"%PDF bytes", parents=("PDFS",))),       # checked by md5 and size
    ])
    store = drive.store()
    store.upload_file(PDF_NAME, local)
    inserts = [index for index, (m, _, _) in enumerate(drive.sent) if m == "POST"]
    assert len(inserts) == 2 and {multipart_metadata(drive, index)["id"] for index in inserts} == {"G1"}
    assert len(drive.queries()) == 3                           # no lookup by title after the failure
    assert drive.sent[-1][:2] == ("GET", "/drive/v2/files/G1")
    assert drive.sleeps == [1.0]
    assert store.exists(PDF_NAME) and drive.all_answers_used()


def test_a_409_holding_other_bytes_is_an_integrity_error_for_a_content_addressed_name(tmp_path):
    local = tmp_path / "doc.pdf"
    local.write_bytes(b"%PDF bytes")
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(), generated_ids("G1"),
                           error(409, "duplicate"), answer(file("G1", f"{SHA}.pdf", b"%PDF other"))])
    with pytest.raises(IntegrityError, match="refuses to overwrite"):
        drive.store().upload_file(PDF_NAME, local)
    assert drive.all_answers_used()


def test_a_rewritten_name_whose_failed_insert_drive_kept_is_asked_for_by_id_and_updated():
    drive = ScriptedDrive([
        ROOT_FOUND, listing(), generated_ids("G1", "G2"),
        error(503, "backendError"),                            # the only try: the write fails...
        answer(file("G1", "status.json", b'{"v": 1}', parents=("ROOT",))),   # ...but Drive had kept it
        *upload(file("G1", "status.json", b'{"v": 2}')),        # the next write updates it: the later wins
    ])
    store = drive.store(max_tries=1)
    with pytest.raises(StoreError, match="after 1 tries"):
        put_bytes(store, "status.json", b'{"v": 1}')
    put_bytes(store, "status.json", b'{"v": 2}')
    assert multipart_metadata(drive, 3)["id"] == "G1"
    assert drive.sent[4][:2] == ("GET", "/drive/v2/files/G1")             # no second insert
    assert drive.sent[-1][:2] == ("PUT", "/upload/drive/v2/files/G1")
    assert drive.all_answers_used()


def test_empty_text_is_uploaded_in_one_multipart_request():
    drive = ScriptedDrive([ROOT_FOUND, listing(folder("TEXT", "text")), listing(), generated_ids("T"),
                           *upload(file("T", f"{SHA}.txt", b""))])
    put_bytes(drive.store(), f"text/{SHA}.txt", b"")
    assert drive.sent[-1][:2] == ("POST", "/upload/drive/v2/files")
    assert drive.sent[-1][2]["uploadType"] == "multipart"
    assert multipart_metadata(drive, 4)["mimeType"] == "text/plain"
    assert drive.all_answers_used()


def test_empty_file_over_the_multipart_limit_is_resumable_without_a_content_range():
    # With the limit at 0 every file is resumable: an empty one must not send "bytes 0--1/0".
    drive = ScriptedDrive([ROOT_FOUND, listing(folder("TEXT", "text")), listing(), generated_ids("T"),
                           *resumable_upload(file("T", f"{SHA}.txt", b""))])
    put_bytes(drive.store(multipart_limit=-1), f"text/{SHA}.txt", b"")
    uri, method, _body, headers = drive.http.request_sequence[-1]
    assert drive.sent[4][2]["uploadType"] == "resumable"
    assert method == "PUT" and headers[b"Content-Length"] == b"0"
    assert b"Content-Range" not in headers
    assert drive.body(4)["mimeType"] == "text/plain" and drive.body(4)["id"] == "T"
    assert drive.all_answers_used()


def test_upload_whose_stored_md5_differs_is_an_integrity_error():
    drive = ScriptedDrive([ROOT_FOUND, listing(), generated_ids("S"), *upload(file("S", "status.json", b"torn"))])
    with pytest.raises(IntegrityError, match="md5"):
        put_bytes(drive.store(), "status.json", b"{}")


def test_download_is_checked_a_torn_one_retried_and_the_target_replaced(tmp_path):
    target = tmp_path / "restore" / "ky_court.sqlite"
    good = b"SQLite format 3\x00"
    drive = ScriptedDrive([
        ROOT_FOUND, listing(file("DB", "ky_court.sqlite", good)), media(b"SQLite"), media(good),
        listing(file("DB", "ky_court.sqlite", good)), media(b"torn"), media(b"torn again"),
    ])
    store = drive.store(max_tries=2)
    store.download_file("ky_court.sqlite", target)                 # the torn first answer is retried
    assert target.read_bytes() == good and drive.sleeps == [1.0]
    with pytest.raises(IntegrityError, match="md5"):               # torn on every try
        store.download_file("ky_court.sqlite", target)
    assert target.read_bytes() == good                             # the good copy is untouched
    assert sorted(p.name for p in target.parent.iterdir()) == ["ky_court.sqlite"]
    assert drive.all_answers_used()


# ------------------------------------------------------------------ retries


def test_503_then_success_is_retried_with_backoff():
    drive = ScriptedDrive([error(503, "backendError"), error(502, "badGateway"), error(500, "internalError"),
                           error(503, "backendError"), ROOT_FOUND, listing()])
    store = drive.store(backoff_base=1.0, backoff_cap=4.0)
    assert store.exists("status.json") is False
    assert drive.sleeps == [1.0, 2.0, 4.0, 4.0]
    assert len(drive.sent) == 6
    assert drive.all_answers_used()


def test_error_page_that_is_not_json_is_retried():
    # pydrive2's ApiRequestError parses the body as JSON; an HTML 502 from a proxy makes it raise JSONDecodeError.
    drive = ScriptedDrive([({"status": "502"}, "<html>Bad Gateway</html>"), ROOT_FOUND, listing()])
    assert drive.store().exists("status.json") is False
    assert drive.sleeps == [1.0]


def test_403_rate_limit_is_retried():
    drive = ScriptedDrive([error(403, "rateLimitExceeded"), error(403, "userRateLimitExceeded"),
                           ROOT_FOUND, listing()])
    assert drive.store(backoff_base=0.5).exists("status.json") is False
    assert drive.sleeps == [0.5, 1.0]
    assert drive.all_answers_used()


def test_transient_failures_give_up_after_max_tries():
    drive = ScriptedDrive([error(503, "backendError")] * 3)
    with pytest.raises(StoreError, match="after 3 tries: 503 backendError"):
        drive.store(max_tries=3).exists("status.json")
    assert drive.sleeps == [1.0, 2.0]
    assert drive.all_answers_used()


def test_403_storage_quota_raises_quota_exceeded_without_retry():
    drive = ScriptedDrive([ROOT_FOUND, listing(), generated_ids("S"),
                           error(403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded."),
                           *upload(file("never", "status.json", b"{}"))])
    with pytest.raises(StoreQuotaExceeded, match="storageQuotaExceeded"):
        put_bytes(drive.store(), "status.json", b"{}")
    assert drive.sleeps == []
    assert len(drive.sent) == 4                                  # the upload start, and nothing after


def test_other_refusals_are_store_errors_without_retry():
    drive = ScriptedDrive([error(404, "notFound", "File not found: ROOT")])
    with pytest.raises(StoreError, match="refused to find Drive folder ky_court: 404 notFound") as raised:
        drive.store().exists("status.json")
    assert not isinstance(raised.value, StoreQuotaExceeded)
    assert drive.sleeps == []


# -------------------------------------------------------------------- quota


def about(used: int, total: int, quota_type: str = "LIMITED") -> tuple[dict, str]:
    return answer({"kind": "drive#about", "quotaType": quota_type, "quotaBytesTotal": str(total),
                   "quotaBytesUsed": str(used // 2), "quotaBytesUsedAggregate": str(used)})


def test_quota_near_full_and_full():
    gib = 1024 ** 3
    drive = ScriptedDrive([about(int(14.25 * gib), 15 * gib), about(15 * gib, 15 * gib)])
    store = drive.store()
    near = store.quota()
    assert near == {"used": int(14.25 * gib), "total": 15 * gib}
    assert near["used"] / near["total"] == pytest.approx(0.95)
    assert store.quota() == {"used": 15 * gib, "total": 15 * gib}
    assert [path for _, path, _ in drive.sent] == ["/drive/v2/about"] * 2


def test_quota_unlimited_is_none_and_about_errors_are_retried():
    drive = ScriptedDrive([error(503, "backendError"), about(5, 0, quota_type="UNLIMITED")])
    assert drive.store().quota() is None
    assert drive.sleeps == [1.0]


# --------------------------------------------------------------- Colab auth


def test_open_drive_store_outside_colab_is_a_clear_store_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", None)     # import google.colab -> ImportError
    with pytest.raises(StoreError, match="only inside Google Colab"):
        open_drive_store(load_config(env={}))


def test_web_link_is_the_drive_viewer_page_of_the_listed_file():
    drive = ScriptedDrive([ROOT_FOUND, PDF_FOLDER_FOUND, listing(file("FILE1", f"{SHA}.pdf", b"x"))])
    store = drive.store()
    assert store.web_link(PDF_NAME) == "https://drive.google.com/file/d/FILE1/view"
    assert store.web_link(f"pdf_by_hash/{'b' * 64}.pdf") is None     # the cached listing: no request
    assert drive.all_answers_used()
