"""kycourt-pipeline serve: a search page first, document pages and the archive's files, Datasette's
tables behind them, all read-only on 127.0.0.1; it keeps answering, and whatever stops it stops
everything it started."""
from __future__ import annotations

import hashlib
import html
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from archive_fixture import DOCUMENTS, build_archive, document_id, pdf_bytes
from support import REPO_ROOT
from test_index import run_index

from notebook_builder.cells import c98_search
from notebook_builder.cells.c06_layout import pdf_store_name
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c96_web import WebSearch, web_route
from notebook_builder.cli import main

pytest.importorskip("datasette")


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers.get("content-type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("content-type", ""), error.read()


def get_json(url: str):
    status, _, body = get(url)
    return status, json.loads(body)


def raw_get(port: int, target: str, redirects: int = 3) -> tuple[int, bytes]:
    """A GET of `target` exactly as written (no client-side normalisation of `..` or escapes),
    following redirects (Datasette's own, to its ~-escaped spelling of a path)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode("latin-1"))
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    location = re.search(rb"(?im)^location: *(\S+)", head)
    if status in (301, 302, 307, 308) and location and redirects:
        return raw_get(port, location.group(1).decode("latin-1"), redirects - 1)
    return status, body


def hits_of(page: str) -> list[tuple[str, str]]:
    """(document page link, PDF link) of each hit on a search page."""
    return re.findall(r'<div class="hit"><h2><a href="([^"]+)">.*?<a href="([^"]+)">PDF</a>', page, re.S)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = build_archive(tmp_path_factory.mktemp("serve"))
    run_index(cfg)
    served = c98_search.start_serve(cfg, 0, store=LocalStore(cfg.STORE))
    try:
        yield cfg, served
    finally:
        served.stop()


# ----------------------------------------------------------- the pages


def test_a_word_typed_into_the_box_finds_the_document_and_its_pdf_link_answers_a_pdf(server):
    cfg, served = server
    status, _, landing = get(f"{served.url}/")
    assert status == 200 and b'<input type="search" name="q"' in landing and b'action="/"' in landing
    assert b"<strong>1\xe2\x80\x935 of 5</strong> documents, newest first" in landing    # the newest documents

    status, content_type, body = get(f"{served.url}/?q=suppression")      # the box's form: GET /?q=...
    page = body.decode()
    assert status == 200 and content_type.startswith("text/html")
    assert "<strong>1–2 of 2</strong> documents match" in page
    hits = hits_of(page)
    assert [link.split("?")[0] for link, _ in hits] == [f"/document/{document_id(3)}", f"/document/{document_id(0)}"]
    assert "<mark>Suppression</mark>" in page and "2021-SC-0007 · BROWN VS. COMMONWEALTH" in page
    assert "score" not in page and "bm25" not in page                    # no raw score
    status, content_type, pdf = get(served.url + hits[0][1])
    assert status == 200 and content_type == "application/pdf" and pdf == pdf_bytes(3)


def test_the_form_keeps_every_filter_and_the_pages_go_back_and_forth(server):
    _, served = server
    url = f"{served.url}/?q=vs&court=CA&type=opinion&year=2019&after=2019-01-01&before=2021-12-31&sort=oldest"
    page = html.unescape(get(url)[2].decode())
    assert 'name="q" value="vs"' in page and '<option value="CA" selected>' in page
    assert '<option value="opinion" selected>' in page and 'name="year" min="1900" max="2100" step="1"\n value="2019"' in page
    assert 'name="after" value="2019-01-01"' in page and 'name="before" value="2021-12-31"' in page
    assert '<option value="oldest" selected>' in page and "Case year (the case number's)" in page
    assert "<strong>1–1 of 1</strong> documents match, oldest first" in page
    assert ("Filters and order: court CA, type opinion, case year 2019, filed from 2019-01-01, filed to 2021-12-31, "
            "oldest first") in page
    first = html.unescape(get(f"{served.url}/?q=vs&sort=newest&limit=2")[2].decode())
    assert "<strong>1–2 of 5</strong>" in first and "page 1 of 3" in first and 'rel="prev"' not in first
    following = re.search(r'<a rel="next" href="([^"]+)">', first).group(1)
    assert following == "/?q=vs&sort=newest&page=2&limit=2"
    second = html.unescape(get(served.url + following)[2].decode())
    assert "<strong>3–4 of 5</strong>" in second and 'href="/?q=vs&sort=newest&limit=2">← previous' in second
    seen = [link for page_number in (1, 2, 3) for link, _ in hits_of(get(f"{served.url}/?q=vs&sort=newest&limit=2"
                                                                          f"&page={page_number}")[2].decode())]
    assert len(seen) == len(set(seen)) == 5


def test_search_json_answers_the_clis_json_object(server, capsys):
    cfg, served = server
    status, answer = get_json(f"{served.url}/search.json?q=suppression&court=SC")
    assert status == 200 and answer["total"] == 1 and answer["page"] == 1 and answer["filters"] == {"court_code": "SC"}
    assert main(["search", "suppression", "--court", "SC", "--json", "--workspace", cfg.WORKSPACE,
                 "--store", cfg.STORE]) == 0
    assert json.loads(capsys.readouterr().out) == answer
    status, answer = get_json(f"{served.url}/search.json?after=2019-13-45&page=x")
    assert status == 200 and answer["total"] == 5 and answer["sort"] == "newest"
    assert answer["notes"] == ["after '2019-13-45' is not a day like 2019-03-31: left out",
                               "page 'x' is not a number from 1 to 1000000: left out"]


def test_a_page_past_the_last_says_so_in_one_sentence_everywhere_never_page_2_of_1(server, capsys):
    cfg, served = server
    said = "page 2 is past the last page, 1, of the results"
    page = html.unescape(get(f"{served.url}/?q=suppression&court=SC&page=2")[2].decode())
    assert said in page and "page 2 of 1" not in page
    assert '<a rel="prev" href="/?q=suppression&court=SC">← the last page, 1</a>' in page
    status, answer = get_json(f"{served.url}/search.json?q=suppression&court=SC&page=2")
    assert status == 200 and answer["total"] == 1 and answer["count"] == 0 and answer["notes"] == [said]
    flags = ["--court", "SC", "--page", "2", "--workspace", cfg.WORKSPACE, "--store", cfg.STORE]
    assert main(["search", "suppression", *flags]) == 0
    assert capsys.readouterr().out.strip() == f"1 document matches 'suppression'; {said}"
    assert main(["search", "suppression", "--json", *flags]) == 0
    assert json.loads(capsys.readouterr().out) == answer
    assert c98_search.search_cell(cfg, "suppression", "SC", page=2) == (
        f"1 document matches 'suppression', court SC; {said}")
    nothing = get_json(f"{served.url}/search.json?q=zzyzx&page=3")[1]
    assert nothing["total"] == 0 and nothing["notes"] == ["page 3 is past the last page: there are no results"]


def test_facets_count_the_matches_and_narrow_the_search(server):
    _, served = server
    page = get(f"{served.url}/?q=suppression")[2].decode()
    assert '<a href="/?q=suppression&amp;court=CA">Kentucky Court of Appeals</a> (1)' in page
    assert '<a href="/?q=suppression&amp;year=2021">2021</a> (1)' in page
    narrowed = get(f"{served.url}/?q=suppression&court=CA")[2].decode()
    assert "<strong>1–1 of 1</strong> documents match" in narrowed
    assert [link.split("?")[0] for link, _ in hits_of(narrowed)] == [f"/document/{document_id(0)}"]
    assert 'title="remove this filter"' in narrowed
    for heading in ("court", "case year", "kind", "publication status"):
        assert f"<h3>{heading}</h3>" in page


def test_any_query_is_answered_and_the_page_says_how_it_was_read(server):
    _, served = server
    for query in ("2019-CA-0012", "*", "NEAR(", '"', "(((", "-", "KRS 532.032", "O'Brien", "<script>"):
        status, _, body = get(f"{served.url}/?q={urllib.parse.quote(query)}")
        assert status == 200 and b"Traceback" not in body and b"<script>alert" not in body, query
    page = html.unescape(get(f"{served.url}/?q={urllib.parse.quote('2019-CA-000012-MR')}")[2].decode())
    assert "Read as: <code>2019-CA-0012</code> — 2019-CA-000012-MR was read as the case number 2019-CA-0012." in page
    assert [link.split("?")[0] for link, _ in hits_of(page)][:2] in (
        [f"/document/{document_id(0)}", f"/document/{document_id(1)}"],
        [f"/document/{document_id(1)}", f"/document/{document_id(0)}"])
    assert "Read as" not in get(f"{served.url}/?q=suppression")[2].decode()   # read as typed: nothing said


def test_at_a_phones_width_the_page_is_one_column_with_its_filters_folded(server):
    _, served = server
    page = get(f"{served.url}/?q=suppression")[2].decode()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "@media (max-width: 700px)" in page and ".layout { flex-direction: column" in page
    # Folded unless the screen is wide: <details> without `open`, opened by a script on a wide screen.
    assert re.search(r'<details class="filters unfold">', page) and "min-width: 701px" in page
    assert not re.search(r"<details[^>]* open", page)


def test_the_document_page_shows_metadata_case_text_and_files(server):
    _, served = server
    status, _, body = get(f"{served.url}/document/{document_id(0)}")
    page = html.unescape(body.decode())
    assert status == 200 and "back to the results" not in page
    assert "2019-CA-0012 · SMITH VS. COMMONWEALTH" in page and "OPINION AFFIRMING" in page
    assert DOCUMENTS[0][4].split("\n")[0] in page                           # its text
    assert f'href="/document/{document_id(1)}"' in page                     # the other document of its case
    assert page.index("2019-05-02 · ") < page.index("2019-07-11 · ")          # in filed order
    assert "<h2>Citations</h2>" in page
    sha = hashlib.sha256(pdf_bytes(0)).hexdigest()
    assert f'href="/pdf_by_hash/{sha}.pdf"' in page and f'href="/text/{sha}.txt"' in page
    status, content_type, text = get(f"{served.url}/text/{sha}.txt")
    assert status == 200 and content_type.startswith("text/plain") and text.decode() == DOCUMENTS[0][4]
    assert f'href="/ky_court/documents/{document_id(0)}"' in page         # the row in Datasette
    assert get(f"{served.url}/document/{'0' * 64}")[0] == 404


def test_a_document_reached_from_a_search_keeps_it_marks_its_words_and_links_back(server):
    _, served = server
    results = html.unescape(get(f"{served.url}/?q=suppression&court=SC")[2].decode())
    link = hits_of(results)[0][0]
    assert link == f"/document/{document_id(3)}?q=suppression&court=SC"
    page = html.unescape(get(served.url + link)[2].decode())
    assert '<a href="/?q=suppression&court=SC">← back to the results</a> for <strong>suppression</strong>' in page
    assert page.count("<mark") == 3 and '<mark id="mark-2">Suppression</mark> <mark id="mark-3">suppression</mark>' in page
    assert "3 places of the search's words marked" in page
    phrase = html.unescape(get(f"{served.url}/document/{document_id(3)}?q=%22assistance+of+counsel%22")[2].decode())
    assert '<mark id="mark-1">assistance of counsel</mark>' in phrase


def test_datasettes_tables_are_one_click_away_and_answer_json(server):
    _, served = server
    page = get(f"{served.url}/")[2].decode()
    assert '<a href="/ky_court">archive tables</a>' in page and '<a href="/ky_search">index tables</a>' in page
    status, metadata = get_json(f"{served.url}/-/metadata.json")
    assert status == 200 and metadata["title"] == "Kentucky appellate courts: public record archive"
    _, rows = get_json(f"{served.url}/ky_court/documents_of_a_case.json?case_number=2019-CA-0012&_shape=array")
    assert sorted(row["document_id"] for row in rows) == sorted([document_id(0), document_id(1)])
    _, table = get_json(f"{served.url}/ky_court/documents.json?_facet=court&_size=1")
    courts = {facet["value"]: facet["count"] for facet in table["facet_results"]["court"]["results"]}
    assert courts == {"Kentucky Court of Appeals": 3, "Kentucky Supreme Court": 2}
    _, databases = get_json(f"{served.url}/-/databases.json")
    assert {database["name"]: database["is_mutable"] for database in databases} == {
        "ky_court": False, "ky_search": False}


def test_the_index_tables_list_what_the_index_holds(server):
    _, served = server
    status, rows = get_json(f"{served.url}/ky_search/docs.json?_shape=array&_sort=document_id")
    assert status == 200 and sorted(row["document_id"] for row in rows) == sorted(document_id(n) for n in range(5))
    assert {"text_name", "case_number", "filed_date", "kind"} <= set(rows[0])


def test_serve_refuses_writes(server):
    _, served = server
    sql = urllib.parse.quote("DELETE FROM documents")
    assert get(f"{served.url}/ky_court.json?sql={sql}")[0] == 400
    request = urllib.request.Request(f"{served.url}/ky_court/documents/-/insert", method="POST",
                                     data=json.dumps({"row": {"document_id": "x"}}).encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (403, 404, 405)
    posted = urllib.request.Request(f"{served.url}/?q=x", method="POST", data=b"q=x")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(posted, timeout=10)
    assert refused.value.code == 405
    _, rows = get_json(f"{served.url}/ky_court.json?sql=select+count(*)+as+n+from+documents&_shape=array")
    assert rows == [{"n": 5}]


def test_no_path_outside_the_archive_is_ever_served(server):
    cfg, served = server
    workspace = Path(cfg.WORKSPACE)
    secret = workspace.parent / "secret.txt"
    secret.write_text("the operator's own file")
    stray = hashlib.sha256(b"stray").hexdigest()                # a file the archive does not refer to
    (workspace / pdf_store_name(stray)).write_bytes(b"%PDF-1.4 not of this archive")
    database = (workspace / "ky_court.sqlite").read_bytes()[:16]
    for target in ("/pdf_by_hash/../../secret.txt", "/pdf_by_hash/%2e%2e/%2e%2e/secret.txt",
                   "/pdf_by_hash/..%2f..%2fsecret.txt", "/text/..%2F..%2Fky_court.sqlite",
                   "/pdf_by_hash/../ky_court.sqlite", "/-/static/../../../../etc/passwd",
                   "/-/static/..%2f..%2f..%2f..%2fetc%2fpasswd", "//etc/passwd", "/ky_court.sqlite/../../secret.txt",
                   f"/pdf_by_hash/{stray}.pdf", f"/pdf_by_hash/{stray.upper()}.pdf", "/text/../serve/requests.log"):
        status, body = raw_get(served.port, target)
        assert status in (400, 404), (target, status)
        assert b"operator's own file" not in body and b"root:" not in body and database not in body, target
        assert b"not of this archive" not in body, target


def test_a_pdf_only_the_store_holds_is_served_from_the_store(server):
    cfg, served = server
    sha = hashlib.sha256(pdf_bytes(2)).hexdigest()
    local = Path(cfg.WORKSPACE) / pdf_store_name(sha)
    data = local.read_bytes()
    local.unlink()
    try:
        assert get(f"{served.url}/pdf_by_hash/{sha}.pdf")[1:] == ("application/pdf", data)
    finally:
        local.write_bytes(data)


def test_routes_are_decided_from_the_raw_path_only():
    sha = "a" * 64
    assert web_route("/") == ("search", {})
    assert web_route(f"/pdf_by_hash/{sha}.pdf") == ("pdf", {"sha": sha})
    assert web_route(f"/text/{sha}.ocr.txt") == ("ocr_text", {"sha": sha})
    for path in (f"/pdf_by_hash/{sha}.pdf/..", f"/pdf_by_hash/../{sha}.pdf", f"/pdf_by_hash/{sha.upper()}.pdf",
                 f"/pdf_by_hash/%61{sha[1:]}.pdf", "/document/../x", "/index.html", "/ky_court"):
        assert web_route(path) is None, path
    request = WebSearch.from_query_string("q=due+process&court=ca&year=2019&limit=9999&type=&page=3")
    assert (request.q, request.court, request.year, request.limit, request.kind) == ("due process", "CA", 2019, 20, "")
    assert request.notes == ("limit '9999' is not a number from 1 to 100: left out",)
    assert request.link(year=None) == "/?q=due+process&court=CA"              # another filter: page 1 again
    assert request.link(page=4) == "/?q=due+process&court=CA&year=2019&page=4"
    assert WebSearch.from_query_string("year=nineteen").year is None
    assert web_route("/search.json") == ("search_json", {})


# ------------------------------------------------------- bad input, start


def test_serve_on_a_port_in_use_is_one_clear_error(capsys, tmp_path):
    cfg = build_archive(tmp_path)
    run_index(cfg)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status = main(["serve", "--workspace", cfg.WORKSPACE, "--store", cfg.STORE, "--port", str(port)])
    err = capsys.readouterr().err
    assert status == 2 and f"port {port} on 127.0.0.1 is in use" in err and err.count("\n") == 1
    assert not (Path(cfg.WORKSPACE) / "serve").exists()


def test_serve_without_an_index_is_one_line_and_writes_nothing(capsys, tmp_path):
    cfg = build_archive(tmp_path)

    def files() -> list[str]:   # (SQLite's own -wal and -shm of a reader aside)
        return sorted(path.name for path in Path(cfg.WORKSPACE).iterdir() if not path.name.endswith(("-wal", "-shm")))
    before = files()
    assert main(["serve", "--workspace", cfg.WORKSPACE, "--store", cfg.STORE, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no search index in" in err and "kycourt-pipeline index" in err
    assert files() == before


def test_the_notebooks_serve_box_starts_keeps_and_stops_the_server(tmp_path, capsys, monkeypatch):
    cfg = build_archive(tmp_path)
    run_index(cfg)
    monkeypatch.setattr(c98_search, "SERVE_DEFAULT_PORT", 0)
    served = c98_search.serve_box(cfg, True, None)
    try:
        assert served is not None and get(f"{served.url}/?q=warrant")[0] == 200
        assert c98_search.serve_box(cfg, True, served) is served           # the cell run again: kept
        assert c98_search.serve_box(cfg, False, served) is None            # unticked: stopped
        assert not served.alive()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", served.port), timeout=2)
    finally:
        served.stop()
    assert "serve: stopped" in capsys.readouterr().out


# -------------------------------------------- a server that stays up, and stops


def start_serve_process(cfg) -> tuple[subprocess.Popen, str]:
    """`kycourt-pipeline serve` as a user starts it, its output going to pipes nobody reads after
    the first line (as a script or a notebook cell that starts it would)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KY_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    process = subprocess.Popen([sys.executable, "-m", "notebook_builder", "serve", "--workspace", cfg.WORKSPACE,
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               cwd=REPO_ROOT, start_new_session=True)
    line = process.stdout.readline().decode()
    match = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not match:
        process.kill()
        raise AssertionError(f"serve printed {line!r}; {process.stderr.read().decode()[-2000:]}")
    process.request_log = Path(re.search(r"requests are logged to (.+)\)$", line.strip()).group(1))
    return process, match.group(0)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def served_archive(tmp_path_factory):
    cfg = build_archive(tmp_path_factory.mktemp("served"))
    run_index(cfg)
    return cfg


FREEZE_REQUESTS = 3000   # the pipe of the old child filled after about 720


@pytest.mark.slow
def test_serve_keeps_answering_thousands_of_requests_while_nobody_reads_its_output(served_archive):
    process, url = start_serve_process(served_archive)
    port = int(url.rsplit(":", 1)[1])
    answered = 0
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        targets = ["/?q=suppression", "/-/versions.json", f"/document/{document_id(1)}",
                   f"/pdf_by_hash/{hashlib.sha256(pdf_bytes(0)).hexdigest()}.pdf", "/missing"]
        for number in range(FREEZE_REQUESTS):
            connection.request("GET", targets[number % len(targets)])
            response = connection.getresponse()
            response.read()
            assert response.status in (200, 404)
            answered += 1
        connection.close()
        assert process.poll() is None
        assert Path(served_archive.WORKSPACE) not in process.request_log.parents
        deadline = time.monotonic() + 30     # a request's line is written once its answer is sent
        while len(log := process.request_log.read_text().splitlines()) < FREEZE_REQUESTS \
                and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    assert answered == FREEZE_REQUESTS and len(log) >= FREEZE_REQUESTS
    assert not process.request_log.parent.exists()          # serve leaves nothing behind
    print(f"served {answered} requests")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_whatever_stops_serve_stops_everything_it_started(served_archive, stop):
    process, url = start_serve_process(served_archive)
    port = int(url.rsplit(":", 1)[1])
    assert get(f"{url}/?q=warrant")[0] == 200
    started = children_of(process.pid)

    process.send_signal(stop)

    assert process.wait(timeout=30) == 0
    assert started == []                                            # it starts no child process
    assert all(not Path(f"/proc/{pid}").exists() for pid in started)
    with pytest.raises(OSError):                                    # nothing answers on its port
        socket.create_connection(("127.0.0.1", port), timeout=2)
    leftovers = [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()
                 and _session_of(entry) == process.pid]
    assert leftovers == []                                          # nothing left of its session


def _session_of(entry: Path) -> int | None:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[4])
    except (OSError, ValueError, IndexError):
        return None
