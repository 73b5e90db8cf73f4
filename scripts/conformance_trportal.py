"""Conformance: the simulated TR Portal's answers held against the captured ones, level by level.

    .venv/bin/python scripts/conformance_trportal.py [--fixtures /work/shared/courts/fixtures]

The captures (BSD-licensed FLP test data; their NOTICE.md says where they come from): the Nevada
document search, page 0 of each court (`nev_example.json`, `nevapp_example.json`), and a publication
detail of each Alabama court (`ala_example.json`, `alacivapp_example.json`,
`alacrimapp_example.json`). The same requests are asked of a simulated court of each system (served
on loopback; an Alabama court's newest five release lists taken as one, so that an item key only
some items have shows as such), and each answer is compared with its capture at every level: the
keys (those in every item, those in some), and each value's type and format (an instant `YYYY-MM-
DDTHH:MM:SS.mmm+00:00`, a lowercase or UPPERCASE UUID, an id written as digits in a string, a
number, text, true/false, null). Printed: what differs, per capture, or that nothing does. Exit 0
when nothing differs, 1 otherwise. Only this script reads the captures; the test suite makes its own
small ones.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FIXTURES = Path("/work/shared/courts/fixtures")
PREFIX = "freelawproject__juriscraper__tests__examples__opinions__united_states__"
COURT_DAY = dt.date(2026, 6, 20)      # the day after the captures' newest answer
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def value_form(value) -> str:
    """What kind of value this is, in the words the report prints."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        if INSTANT.fullmatch(value):
            return "instant " + ("+00:00" if value.endswith("+00:00") else "with an offset") + \
                (" .000" if value[20:23] == "000" else " .mmm")
        if UUID.fullmatch(value):
            if value == value.lower():
                return "UUID lowercase"
            return "UUID UPPERCASE" if value == value.upper() else "UUID mixed"
        if value.isdigit():
            return "digits in a string"
        return "text"
    return type(value).__name__


def keys_of(value, path: str = "$", found: dict | None = None) -> dict[str, tuple[int, int]]:
    """path of a key -> (items that had it, items at that level)."""
    found = {} if found is None else found
    if isinstance(value, dict):
        for key, item in value.items():
            keys_of(item, f"{path}.{key}", found)
    elif isinstance(value, list):
        items = [item for item in value if isinstance(item, dict)]
        for key in {key for item in items for key in item}:
            found[f"{path}[].{key}"] = (sum(key in item for item in items), len(items))
        for item in value:
            keys_of(item, f"{path}[]", found)
    return found


def forms_of(value, path: str = "$", found: dict | None = None) -> dict[str, set[str]]:
    found = {} if found is None else found
    if isinstance(value, dict):
        for key, item in value.items():
            forms_of(item, f"{path}.{key}", found)
    elif isinstance(value, list):
        for item in value:
            forms_of(item, f"{path}[]", found)
    else:
        found.setdefault(path, set()).add(value_form(value))
    return found


def compare(captured, simulated) -> list[str]:
    """What differs between a capture and the simulated answer, one line each."""
    differences = []
    captured_keys, simulated_keys = keys_of(captured), keys_of(simulated)
    for path in sorted(set(captured_keys) | set(simulated_keys)):
        if path not in simulated_keys:
            differences.append(f"{path}: captured, never answered")
        elif path not in captured_keys:
            differences.append(f"{path}: answered, never captured")
        else:
            (seen, of), (sim_seen, sim_of) = captured_keys[path], simulated_keys[path]
            if (seen == of) != (sim_seen == sim_of):
                differences.append(f"{path}: in {seen} of {of} captured items, {sim_seen} of {sim_of} answered")
    captured_forms, simulated_forms = forms_of(captured), forms_of(simulated)
    for path in sorted(set(captured_forms) & set(simulated_forms)):
        if captured_forms[path] != simulated_forms[path]:
            differences.append(f"{path}: captured {sorted(captured_forms[path])}, "
                               f"answered {sorted(simulated_forms[path])}")
    return differences


def nevada_pages(court) -> dict[str, dict]:
    headers = {"Accept": "application/json", "Referer": "https://acis.nvcourts.gov/"}
    pages = {}
    for name, index in (("nev", 0), ("nevapp", 1)):
        answer = requests.get(f"{court.base_url}/courts/cms/docketentrydocuments", headers=headers, timeout=30, params={
            "docketEntryHeader.docketEntryTypeID": "1000014",
            "caseHeader.courtID": court.system.courts[index].resource_id,
            "page": 0, "size": 25, "sort": "docketEntryHeader.filedDate,desc"})
        answer.raise_for_status()
        pages[name] = answer.json()
    return pages


def alabama_details(court, lists: int = 5) -> dict[str, dict]:
    """Each court's newest `lists` release lists, as one: the first one's head, all their items (a key that
    only some items have shows as such, however the items fall into lists)."""
    headers = {"Accept": "application/json"}
    details = {}
    for name, index in (("ala", 0), ("alacivapp", 1), ("alacrimapp", 2)):
        guid = court.system.courts[index].resource_id
        listed = requests.get(f"{court.base_url}/courts/cms/publications", headers=headers, timeout=30, params={
            "courtID": guid, "page": 0, "size": lists, "sort": "publicationDate,desc"})
        listed.raise_for_status()
        answers = []
        for row in listed.json()["_embedded"]["results"]:
            answer = requests.get(f"{court.base_url}/courts/{guid}/cms/publication/{row['publicationUUID']}",
                                  headers=headers, timeout=30)
            answer.raise_for_status()
            answers.append(answer.json())
        details[name] = {**answers[0], "publicationItems": [item for answer in answers
                                                           for item in answer["publicationItems"]]}
    return details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help=f"the captures (default {FIXTURES})")
    args = parser.parse_args(argv)
    from notebook_builder.simcourt import SimTRPortal
    answers = {}
    with SimTRPortal("nevada", docs=4000, seed=1, today=COURT_DAY) as court:
        answers.update(nevada_pages(court))
    with SimTRPortal("alabama", docs=3000, seed=1, today=COURT_DAY) as court:
        answers.update(alabama_details(court))
    differing = 0
    for name, answer in answers.items():
        captured = json.loads((args.fixtures / f"{PREFIX}{name}_example.json").read_text(encoding="utf-8"))
        differences = compare(captured, answer)
        differing += bool(differences)
        print(f"{name}: " + ("the same keys at every level, the same value types and formats" if not differences
                             else f"{len(differences)} differences"))
        for line in differences:
            print(f"  {line}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
