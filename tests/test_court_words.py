"""Each court system's words: `courts` as a user reads it, the case numbers a search box reads, a
number's court and year, what --court names; Kentucky's answers as they always were."""
from __future__ import annotations

import json

import pytest

from notebook_builder import cli
from notebook_builder.cells.c18_query_syntax import CaseNumber, parse_query
from notebook_builder.cells.c27_court_systems import DESCRIBE_KEYS, form_segments, number_form
from notebook_builder.cells.c28_court_words import system_words

NAMES = ["kentucky", "delaware-county-pa", "nevada", "alabama", "oregon", "north-dakota", "wyoming", "florida"]


def test_courts_json_has_the_same_keys_in_the_same_order_for_every_system(capsys):
    assert cli.main(["courts", "--json"]) == 0
    systems = json.loads(capsys.readouterr().out)
    assert [list(system) for system in systems] == [list(DESCRIBE_KEYS)] * len(NAMES)
    delaware = systems[NAMES.index("delaware-county-pa")]
    assert any("x-ctrack-excludeselflinks" in unknown and "probe" in unknown for unknown in delaware["unknown"])
    assert any("download anonymously" in unknown for unknown in delaware["unknown"])
    assert delaware["api_base"].endswith("/api/v1") and delaware["case_number_forms"] == ["CV: CV-YYYY-NNNNNN"]
    alabama = systems[NAMES.index("alabama")]
    assert alabama["case_number_forms"][0] == "SC: SC-YYYY-NNNN (like SC-2024-0492)"
    assert all(isinstance(system["unknown"], list) for system in systems)


def test_courts_prints_one_labelled_block_a_system_within_a_hundred_columns(capsys):
    assert cli.main(["courts"]) == 0
    text = capsys.readouterr().out
    blocks = text.strip().split("\n\n")
    assert [block.split(":", 1)[0] for block in blocks] == NAMES
    assert blocks[0].splitlines()[0] == "kentucky: Kentucky Court of Justice (the default)"
    assert all(len(line) <= 100 for line in text.splitlines())
    delaware = blocks[1]
    assert "\n  unknown       whether documents download anonymously (probe: the download rows)" in delaware
    assert "\n  court CV      Delaware County Court of Common Pleas\n" in delaware
    nevada = blocks[2]
    assert "\n  case numbers  SC: N... (like 90509)\n                COA: N...-COA (like 90082-COA)\n" in nevada
    assert "court id 2" in nevada and "\n  verified      " in nevada
    assert "\n  verified      nothing against captured responses\n" in blocks[NAMES.index("oregon")]


def test_a_number_form_is_read_from_the_configuration_with_its_year():
    assert number_form(form_segments(r"SC-(?P<year>\d{4})-\d{4}")) == "SC-YYYY-NNNN"
    assert number_form(form_segments(r"S-(?P<yy>\d{2})-\d{4}")) == "S-YY-NNNN"
    assert number_form(form_segments(r"\d+-COA")) == "N...-COA"
    with pytest.raises(ValueError):
        form_segments(r"[A-Z]{2}\d+")
    years = {name: system_words(name).year_of(number) for name, number in [
        ("alabama", "CR-2023-0911"), ("florida", "1D2024-1234"), ("wyoming", "S-24-0123"),
        ("north-dakota", "20240123"), ("delaware-county-pa", "CV-2019-000012"), ("kentucky", "2024 CA ADMIN - 002"),
        ("nevada", "90509"), ("oregon", "A190411")]}
    assert years == {"alabama": 2023, "florida": 2024, "wyoming": 2024, "north-dakota": 2024,
                     "delaware-county-pa": 2019, "kentucky": 2024, "nevada": None, "oregon": None}


@pytest.mark.parametrize("system, typed, number", [
    ("nevada", "90509", "90509"), ("nevada", "90082-COA", "90082-COA"), ("nevada", "90082 coa", "90082-COA"),
    ("alabama", "SC-2024-0492", "SC-2024-0492"), ("alabama", "sc 2024 492", "SC-2024-0492"),
    ("oregon", "S072851", "S072851"), ("oregon", "s72851", "S072851"), ("florida", "1D2024-1234", "1D2024-1234"),
    ("florida", "SC2026-0899", "SC2026-0899"), ("wyoming", "S-24-0123", "S-24-0123"),
    ("north-dakota", "20240123", "20240123"), ("delaware-county-pa", "CV-2024-123", "CV-2024-000123")])
def test_a_search_box_reads_a_systems_case_numbers_as_people_type_them(system, typed, number):
    query = parse_query(typed, system_words(system).typed_numbers)
    assert [node.case_number for node in query.required if isinstance(node, CaseNumber)] == [number]
    assert bool(query.notes) == (typed != number)


def test_kentuckys_search_box_is_as_it_was_and_years_stay_words_elsewhere():
    kentucky = system_words("kentucky").typed_numbers
    assert parse_query("2017 CA 3 burglary", kentucky) == parse_query("2017 CA 3 burglary")
    assert not isinstance(parse_query("SC-2024-0492").required[0], CaseNumber)      # not Kentucky's form
    nevada = parse_query("custody 2019 NRS 200.010", system_words("nevada").typed_numbers)
    assert not any(isinstance(node, CaseNumber) for node in nevada.required)


def test_a_documents_court_code_and_what_court_names_in_each_system():
    kentucky, alabama, nevada = system_words("kentucky"), system_words("alabama"), system_words("nevada")
    assert kentucky.code_of("2019-CA-0012", None) == "CA" and kentucky.code_of(None, "Kentucky Supreme Court") == "SC"
    assert list(kentucky.courts) == ["SC", "CA"] and kentucky.court_title("SC") == "Kentucky Supreme Court (SC)"
    assert kentucky.court_filter("appeals") == {"court_code": "CA"} and kentucky.court_filter("ca") == {"court_code": "CA"}
    assert alabama.code_of("CL-2025-0191", None) == "CL"
    assert alabama.code_of(None, "Alabama Court of Criminal Appeals") == "CR"
    assert alabama.court_filter("criminal") == {"court_code": "CR"} and alabama.court_filter("cl") == {"court_code": "CL"}
    assert alabama.court_filter("appeals") == {"court_like": "appeals"}       # two courts' names hold it
    assert nevada.court_filter("appeals") == {"court_code": "COA"} and nevada.code_of("90082-COA", None) == "COA"
    assert nevada.text_numbers("No. 90509\nC/W No. 85175; 90082-COA; 2019 and 200.010") == [
        (4, 9, "90509"), (18, 23, "85175"), (25, 34, "90082-COA")]


def test_a_case_numbers_year_is_read_without_building_its_form_again(monkeypatch):
    from notebook_builder.cells.c28_court_words import CourtNumbers
    words = system_words("alabama")
    built = []
    original = CourtNumbers.regex
    monkeypatch.setattr(CourtNumbers, "regex", lambda self, **kwargs: built.append(self.code) or original(self, **kwargs))
    years = [words.year_of(number) for number in ["SC-2024-0492", "CL-2025-0191", "CR-2023-0911"] * 50]
    assert years[:3] == [2024, 2025, 2023] and set(years) == {2023, 2024, 2025}
    assert len(built) <= len(words.numbers)          # each court's form built once at most
