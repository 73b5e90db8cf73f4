"""kycourt-pipeline serve: Datasette over immutable copies of the state and the index, on 127.0.0.1."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest

from notebook_builder.cells import c98_search as query
from notebook_builder.cli import main

from archive_fixture import build_archive, document_id
from test_index import run_index

pytest.importorskip("datasette")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, json.loads(response.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = build_archive(tmp_path_factory.mktemp("serve"))
    run_index(cfg)
    process, url = query.start_serve(cfg, free_port())
    try:
        yield cfg, url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_answers_json_with_the_projects_metadata(server):
    _, url = server
    assert url.startswith("http://127.0.0.1:")
    status, metadata = get_json(f"{url}/-/metadata.json")
    assert status == 200 and metadata["title"] == "Kentucky appellate courts: public record archive"
    _, rows = get_json(f"{url}/ky_court/documents_of_a_case.json?case_number=2019-CA-0012&_shape=array")
    assert sorted(row["document_id"] for row in rows) == sorted([document_id(0), document_id(1)])
    _, table = get_json(f"{url}/ky_court/documents.json?_facet=court&_size=1")
    courts = {facet["value"]: facet["count"] for facet in table["facet_results"]["court"]["results"]}
    assert courts == {"Kentucky Court of Appeals": 3, "Kentucky Supreme Court": 2}
    _, failures = get_json(f"{url}/ky_court/failures_by_reason.json?_shape=array")
    assert failures == []


def test_serve_search_finds_a_hit_with_its_snippet(server):
    _, url = server
    _, hits = get_json(f"{url}/ky_search/search.json?q=suppression&_shape=array")
    assert [hit["document_id"] for hit in hits] == [document_id(3), document_id(0)]
    assert "[Suppression]" in hits[0]["snippet"] and hits[0]["filed"] == "2021-11-30"
    _, table = get_json(f"{url}/ky_search/docs.json?_search=warrant&_shape=array")
    assert {row["document_id"] for row in table} == {document_id(0), document_id(4)}


def test_serve_refuses_writes(server):
    _, url = server
    sql = urllib.parse.quote("DELETE FROM documents")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/ky_court.json?sql={sql}", timeout=10)
    assert refused.value.code == 400
    request = urllib.request.Request(f"{url}/ky_court/documents/-/insert", method="POST",
                                     data=json.dumps({"row": {"document_id": "x"}}).encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (403, 404, 405)
    _, rows = get_json(f"{url}/ky_court.json?sql=select+count(*)+as+n+from+documents&_shape=array")
    assert rows == [{"n": 5}]


def test_serve_on_a_port_in_use_is_one_clear_error(capsys, tmp_path):
    cfg = build_archive(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status = main(["serve", "--workspace", cfg.WORKSPACE, "--store", cfg.STORE, "--port", str(port)])
    err = capsys.readouterr().err
    assert status == 2 and f"port {port} on 127.0.0.1 is in use" in err and err.count("\n") == 1


def test_serve_binds_loopback_and_opens_every_database_immutable(tmp_path):
    cfg = build_archive(tmp_path)
    run_index(cfg)
    databases, metadata = query.prepare_serve(cfg)
    command = query.serve_command(databases, metadata, 8001)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert [command[i + 1] for i, part in enumerate(command) if part == "--immutable"] == [str(d) for d in databases]
    assert "--reload" not in command and "-i" not in command
    assert [path.name for path in databases] == ["ky_court.sqlite", "ky_search.sqlite"]
