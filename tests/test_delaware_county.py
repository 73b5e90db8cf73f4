"""Delaware County, Pennsylvania by configuration of the Kentucky family: its API under /api/v1, its case
numbers, its parties as nested lists; `probe` answers what is unknown there, and a run archives it end to end."""
from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from delaware_front import COURT_NAME, DelawareFront, kentucky_prefix, nested
from support import pipeline_env

from notebook_builder import cli
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c25_court import KENTUCKY, list_elements
from notebook_builder.cells.c27_court_systems import court_system
from notebook_builder.simcourt import SimCourt

DELAWARE = court_system("delaware-county-pa")


def delaware_court(docs: int = 40) -> SimCourt:
    """The simulated C-Track court under /api/v1 with Delaware County's court name (DelawareFront's upstream)."""
    return SimCourt(docs, seed=5, faults=False, first_year=2024, last_year=2026, document_search="absent",
                    api_path="/api/v1", court_names={"CA": COURT_NAME, "SC": COURT_NAME}, today=dt.date(2026, 6, 1))


def test_a_list_of_lists_is_read_element_by_element_as_party_rows():
    first, second, third = ({"partyName": {"displayName": name, "role": "PLAINTIFF"},
                             "address": {"formattedAddress": f"{name} HOUSE,\n MEDIA, PA 19063"}}
                            for name in ("A", "B", "C"))
    elements = list_elements([[first, second], third, [[]]])
    assert elements == [first, second, third]
    rows = [KENTUCKY.party(element, "case", position) for position, element in enumerate(elements)]
    assert [(row["name"], row["position"], row["address"]) for row in rows] == [
        ("A", 0, "A HOUSE, MEDIA, PA 19063"), ("B", 1, "B HOUSE, MEDIA, PA 19063"), ("C", 2, "C HOUSE, MEDIA, PA 19063")]
    assert nested([first, second, third]) == [[first, second], third]


def test_delaware_countys_configuration_is_the_kentucky_family_at_its_own_root_with_its_numbers():
    assert (DELAWARE.family, DELAWARE.api_base) == ("ctrack", "https://delcopublicaccessapi.co.delaware.pa.us/api/v1")
    assert DELAWARE.url(DELAWARE.api_base, "case_search", prefix="CV-2024").startswith(
        "https://delcopublicaccessapi.co.delaware.pa.us/api/v1/cases/search?")
    assert DELAWARE.sweep_shards(2024, 2025) == ["CV-2024", "CV-2025"] and DELAWARE.opinion_courts() == []
    assert DELAWARE.court_of("CV-2024-000123") == COURT_NAME and DELAWARE.code_of("2024-CA-0001") is None
    assert set(DELAWARE.unknowns) == {"selflinks_header", "public_documents", "case_numbers"} and not KENTUCKY.unknowns
    assert [kentucky_prefix(prefix) for prefix in ("CV-2024", "CV-2024-0", "CV-2024-00", "CV-2024-0112", "CV-2024-1")] \
        == ["2024-", "2024-", "2024-CA-", "2024-SC-12", "2024-XX"]


def test_probe_answers_what_is_unknown_at_delaware_county(monkeypatch, capsys):
    with delaware_court(20) as court, DelawareFront(court) as front:
        for name, value in {"KY_PACING": "0", "KY_FIRST_YEAR": "2024", "KY_LAST_YEAR": "2026",
                            "KY_TODAY": "2026-06-01"}.items():
            monkeypatch.setenv(name, value)
        code = cli.main(["probe", "--court-system", "delaware-county-pa", "--api-base", front.base_url])
    out = capsys.readouterr().out
    assert code == 0 and f"probe of {front.base_url} (delaware-county-pa)" in out
    assert "case_search      200" in out and "opinion_search" not in out      # it has no opinion search
    assert "nested lists, read element by element" in out
    answers = out.split("unknown at this court, as the probe found it:\n", 1)[1].splitlines()
    assert answers[0].startswith("  x-ctrack-excludeselflinks: not required (the case search answered rows without it)")
    assert answers[1].startswith("  case numbers: the configured form (the case search for CV-2026 listed CV-2026-")
    assert answers[2] == "  documents public: yes (a PDF downloaded anonymously by the api path)"
    assert front.requests <= 10


def test_probe_of_another_api_family_is_that_familys_and_a_dead_court_is_a_failed_table(capsys, monkeypatch):
    for name, value in {"KY_COURT_DOWN_SECONDS": "0.01", "KY_PACING": "0", "KY_BACKOFF_BASE": "0",
                        "KY_BACKOFF_CAP": "0"}.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["probe", "--court-system", "nevada", "--api-base", "http://127.0.0.1:9/"]) == 1
    table = capsys.readouterr().out
    assert "courts" in table and "FAIL" in table and "the pipeline cannot run" in table
    assert re.search(r"; ([0-9]+) requests;", table) and int(re.search(r"; ([0-9]+) requests;", table)[1]) <= 10


@pytest.mark.slow
def test_a_run_archives_delaware_county_end_to_end(tmp_path, monkeypatch, capsys):
    with delaware_court() as court, DelawareFront(court) as front:
        env = pipeline_env(front, tmp_path, KY_FIRST_YEAR="2024", KY_LAST_YEAR="2026", KY_TODAY="2026-06-01",
                           KY_DISCOVERY="cases")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code = cli.main(["run", "--court-system", "delaware-county-pa"])
        assert code == 0, capsys.readouterr().err
        expected = {document.document_id for document in court.documents}
    status = json.loads((tmp_path / "workspace" / "status.json").read_text())
    assert status["court_system"] == "delaware-county-pa" and status["done"] and status["verify"] == "PASS"
    db = Database.open_readonly(tmp_path / "workspace" / "ky_court.sqlite")
    try:
        documents = {row["document_id"]: row for row in db.iter_documents()}
        parties = db.conn.execute("SELECT case_id, COUNT(*), GROUP_CONCAT(role) FROM parties GROUP BY case_id").fetchall()
        cases = db.conn.execute("SELECT COUNT(*) FROM cases WHERE details_sweep IS NOT NULL").fetchone()[0]
    finally:
        db.close()
    assert expected <= set(documents) and front.nested_lists > 0
    assert all(DELAWARE.code_of(row["case_number"]) == "CV" and row["court"] == COURT_NAME for row in documents.values())
    assert cases and len(parties) == cases and all(count == 2 for _, count, _ in parties)   # both parties of each
    number = next(row["case_number"] for row in documents.values() if row["case_number"][8:10] == "00")
    capsys.readouterr()
    typed = number[:8] + number[10:]             # CV-2024-0012 for CV-2024-000012
    assert cli.main(["search", typed, "--workspace", str(tmp_path / "workspace"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["hits"][0]["case_number"] == number and found["notes"]          # typed short, read in full
