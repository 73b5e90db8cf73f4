"""The simulated TR Portal court answers as /work/shared/courts/README.md says the real ones do, traps included."""
from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import signal
import subprocess
import sys
import time

import pypdf
import pytest
import requests

from notebook_builder.simcourt import SimTRPortal
from notebook_builder.simcourt.trportal import STATE_GUIDS, SYSTEMS, system_named
from notebook_builder.simcourt.trportal.systems import IN_CART

DAY = dt.date(2026, 10, 1)
JSON = {"Accept": "application/json", "Referer": "https://acis.nvcourts.gov/"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000\+00:00")
# A document search row of the captured shape (README §2.4; values made up here).
CAPTURED_ROW = {"documentLinkUUID": "", "documentName": "",
                "docketEntryHeader": {"filedDate": "", "docketEntryType": "", "docketEntryTypeID": "",
                                      "docketEntrySubTypeID": "", "docketEntryDescription": "", "official": True,
                                      "outcomeStatus": "", "outcomeStatusID": "", "securedDocument": False},
                "caseHeader": {"caseInstanceUUID": "", "caseNumber": "", "caseTitle": "", "caseCategory": "",
                               "courtID": "", "courtAbbreviation": ""}}
OPTIONAL = {"outcomeStatus", "outcomeStatusID"}     # in some captured rows, not in others


def court(system="nevada", **options) -> SimTRPortal:
    return SimTRPortal(system, **{"docs": 150, "seed": 3, "today": DAY, **options})


def get(portal, path, headers=JSON, **params):
    return requests.get(portal.base_url + path, params=params, headers=headers, timeout=10, allow_redirects=False)


def results(answer) -> list:
    return answer.json().get("_embedded", {}).get("results", [])


def walk_pages(portal, path, size=50, **params) -> list:
    rows, page = [], 0
    while True:
        answer = get(portal, path, page=page, size=size, **params)
        assert answer.status_code == 200, answer.text
        rows += results(answer)
        if page + 1 >= answer.json()["page"]["totalPages"]:
            return rows
        page += 1


# ------------------------------------------------------------------ presets


def test_every_system_has_its_courts_and_case_number_forms():
    forms = {"nev": r"\d{5}", "nevapp": r"\d{5}-COA", "ala": r"SC-\d{4}-\d{4}", "alacivapp": r"CL-\d{4}-\d{4}",
             "alacrimapp": r"CR-\d{4}-\d{4}", "or": r"S\d{6}", "orctapp": r"A\d{6}", "nd": r"\d{8}",
             "wyo": r"S-\d\d-\d{4}", "fla": r"SC\d{4}-\d{4}",
             **{f"fladistctapp{n}": rf"{n}D\d{{4}}-\d{{4}}" for n in range(1, 7)}}
    assert set(SYSTEMS) == {"nevada", "alabama", "oregon", "north-dakota", "wyoming", "florida"}
    assert system_named("North_Dakota") is SYSTEMS["north-dakota"]
    assert SYSTEMS["nevada"].court("nev").resource_id == "dc01122c-a19d-4eb7-bfe9-5b96e93c26fd"
    assert [c.external_identifier for c in SYSTEMS["alabama"].courts] == ["1", "3", "2"]
    for name in SYSTEMS:
        portal = court(name, docs=60)
        for case in range(portal.corpus.case_count):
            code = portal.corpus.court_of_case(case).code
            assert re.fullmatch(forms[code], portal.corpus.case_numbers[case]), (code, portal.corpus.case_numbers[case])
        assert {portal.corpus.court_of_case(case).code for case in range(portal.corpus.case_count)} == \
            {c.code for c in SYSTEMS[name].courts}


def test_local_midnight_takes_the_offset_before_the_clocks_change_at_two():
    nevada = SYSTEMS["nevada"]
    assert nevada.local_midnight(dt.date(2026, 3, 8).toordinal()) == "2026-03-08T00:00:00.000-08:00"
    assert nevada.utc_instant(dt.date(2026, 3, 8).toordinal(), 10 * 3600) == "2026-03-08T17:00:00.000+00:00"
    assert nevada.local_midnight(dt.date(2026, 11, 1).toordinal()) == "2026-11-01T00:00:00.000-07:00"
    assert SYSTEMS["alabama"].local_midnight(dt.date(2006, 4, 2).toordinal()) == "2006-04-02T00:00:00.000-06:00"
    assert SYSTEMS["alabama"].local_midnight(dt.date(2006, 4, 3).toordinal()) == "2006-04-03T00:00:00.000-05:00"


def test_a_court_given_its_day_has_filed_nothing_on_or_after_it():
    portal = court("florida", docs=150)
    corpus = portal.corpus
    assert max(corpus.case_filed) < DAY.toordinal() and max(corpus.entry_day) < DAY.toordinal()
    assert court("florida", docs=150).truth() == portal.truth()      # the same arguments, the same corpus
    assert court("florida", docs=150, seed=4).truth(hashes=False) != portal.truth(hashes=False)


def test_real_counts_plans_nevada_at_the_real_records_order_in_seconds():
    started = time.monotonic()
    portal = SimTRPortal("nevada", real_counts=True, today=DAY)
    corpus = portal.corpus
    assert time.monotonic() - started < 15
    assert corpus.case_count > 50_000 and corpus.doc_count == 42_000
    assert int(corpus.case_numbers[-1].split("-")[0]) > 90_000
    last_year = sum(1 for day in corpus.case_filed if DAY.toordinal() - 365 <= day < DAY.toordinal())
    assert 2_200 <= last_year <= 2_800


# ------------------------------------------------------------------- paging


def test_the_envelope_pages_from_zero_and_has_no_embedded_past_the_end():
    with court() as portal:
        total = portal.corpus.case_count
        first = get(portal, "/courts/cms/cases", page=0, size=7)
        assert first.status_code == 200 and list(first.json()) == ["_embedded", "page"]
        assert first.json()["page"] == {"size": 7, "totalElements": total, "totalPages": -(-total // 7), "number": 0}
        rows = walk_pages(portal, "/courts/cms/cases", size=7)
        assert [row["caseHeader"]["caseNumber"] for row in rows] == \
            [portal.corpus.case_numbers[case] for case in portal.corpus.cases_by_filing(None)]
        past = get(portal, "/courts/cms/cases", page=total, size=7)
        assert past.status_code == 200 and "_embedded" not in past.json()
        assert past.json()["page"]["totalElements"] == total
        empty = get(portal, "/courts/cms/cases", **{"caseHeader.caseNumber": "NO-SUCH"})
        assert empty.json() == {"page": {"size": 20, "totalElements": 0, "totalPages": 0, "number": 0}}


def test_size_is_capped_and_the_page_size_switch_answers_its_own():
    with court(max_size=5) as portal:
        assert len(results(get(portal, "/courts/cms/cases", size=50))) == 5
    with court(page_size=3) as portal:
        answer = get(portal, "/courts/cms/cases", page=1, size=10)
        assert answer.json()["page"]["size"] == 3 and answer.json()["page"]["number"] == 1
        expected = [portal.corpus.case_numbers[case] for case in portal.corpus.cases_by_filing(None)[3:6]]
        assert [row["caseHeader"]["caseNumber"] for row in results(answer)] == expected


@pytest.mark.parametrize("answer_past", ["400", "500", "empty"])
def test_past_the_results_window_the_answer_is_the_switchs(answer_past):
    with court(window=10, window_answer=answer_past) as portal:
        assert len(results(get(portal, "/courts/cms/cases", page=1, size=5))) == 5
        assert len(results(get(portal, "/courts/cms/cases", page=2, size=4))) == 2      # cut at the window
        past = get(portal, "/courts/cms/cases", page=2, size=5)
        if answer_past == "empty":
            assert past.status_code == 200 and "_embedded" not in past.json()
            assert past.json()["page"]["totalElements"] == portal.corpus.case_count
        else:
            assert past.status_code == int(answer_past) and "window" in past.json()["message"]


# ------------------------------------------------------------------- shapes


def keys(value) -> object:
    if isinstance(value, dict):
        return {key: keys(item) for key, item in value.items() if key not in OPTIONAL}
    return type(value).__name__


def test_document_search_rows_have_the_captured_shape_and_filter_by_type_and_court():
    with court(docs=1500) as portal:
        nev = portal.system.court("nevapp").resource_id
        rows = results(get(portal, "/courts/cms/docketentrydocuments", size=100,
                           sort="docketEntryHeader.filedDate,desc",
                           **{"docketEntryHeader.docketEntryTypeID": "1000014", "caseHeader.courtID": nev}))
        assert rows and all(keys(row) == keys(CAPTURED_ROW) for row in rows)
        assert {row["docketEntryHeader"]["docketEntryTypeID"] for row in rows} == {"1000014"}
        assert {row["caseHeader"]["courtID"] for row in rows} == {"2"}
        assert all(row["caseHeader"]["caseNumber"].endswith("-COA") for row in rows)
        filed = [row["docketEntryHeader"]["filedDate"] for row in rows]
        assert filed == sorted(filed, reverse=True) and all(INSTANT.fullmatch(stamp) for stamp in filed)
        assert all(UUID.fullmatch(row["documentLinkUUID"]) for row in rows)
        assert any("Nev. Adv. Opn. No." in row["docketEntryHeader"]["docketEntryDescription"] for row in rows)


def test_the_document_search_ignores_date_filters_unless_switched_to_honour_them():
    window = {"docketEntryHeader.docketEntryTypeID": "1000018",
              "docketEntryHeader.docketEntryFiledDateFrom": "2026-01-01T00:00:00.000-08:00",
              "docketEntryHeader.docketEntryFiledDateTo": "2026-06-30T23:59:59.999-07:00"}
    with court(docs=600) as portal:
        ignored = get(portal, "/courts/cms/docketentrydocuments", **window)
        assert ignored.json()["page"]["totalElements"] == len(portal.corpus.docs_by_filing(1000018))
    with court(docs=600, date_filters=True) as portal:
        honoured = walk_pages(portal, "/courts/cms/docketentrydocuments", **window)
        assert 0 < len(honoured) < len(portal.corpus.docs_by_filing(1000018))
        assert all("2026-01-01" <= row["docketEntryHeader"]["filedDate"][:10] <= "2026-07-01" for row in honoured)


def test_ids_are_strings_or_numbers_as_switched():
    with court(numeric_ids=True) as portal:
        row = results(get(portal, "/courts/cms/cases"))[0]["caseHeader"]
        assert isinstance(row["courtID"], int)
    with court() as portal:
        assert results(get(portal, "/courts"))[0]["externalIdentifier"] == "1"


def test_publications_list_and_detail_in_alabama_and_none_in_nevada():
    with court("alabama", docs=500) as portal:
        guid = portal.system.court("alacivapp").resource_id
        listed = walk_pages(portal, "/courts/cms/publications", courtID=guid, sort="publicationDate,desc")
        dates = [row["publicationDate"] for row in listed]
        assert listed and dates == sorted(dates, reverse=True)
        detail = get(portal, f"/courts/{guid}/cms/publication/{listed[0]['publicationUUID']}").json()
        assert detail["publicationNumber"].startswith("CL-RELEASE-")
        assert detail["publicationNote"].startswith("Decisions")
        item = detail["publicationItems"][0]
        assert item["caseInstanceUUID"] == item["caseInstanceUUID"].upper() and item["caseNumber"].startswith("CL-")
        assert set(item) >= {"publicationItemUUID", "groupName", "groupOrderBy", "title", "decision", "orderBy"}
        other = portal.system.court("ala").resource_id
        assert get(portal, f"/courts/{other}/cms/publication/{listed[0]['publicationUUID']}").status_code == 404
    with court("nevada") as portal:
        none = get(portal, "/courts/cms/publications", courtID=portal.system.courts[0].resource_id)
        assert none.status_code == 200 and none.json()["page"]["totalElements"] == 0 and "_embedded" not in none.json()


# ---------------------------------------------------------- the real traps


def test_uppercase_uuids_are_answered_at_alabama_and_any_case_is_accepted():
    with court("alabama") as portal:
        row = results(get(portal, "/courts/cms/cases"))[0]["caseHeader"]
        case = row["caseInstanceUUID"]
        assert case == case.upper() and UUID.fullmatch(case.lower())
        guid = portal.corpus.court_guid(portal.corpus.case_court[portal.corpus.find("case", case)])
        assert guid == guid.upper()
        for court_text, case_text in ((guid, case), (guid.lower(), case.lower())):
            assert get(portal, f"/courts/{court_text}/cms/cases/{case_text}").json()["caseHeader"]["caseNumber"] == \
                row["caseNumber"]
        access = "/courts/cms/docketentrydocumentsaccess"
        by_lower = get(portal, access, **{"caseHeader.caseInstanceUUID": case.lower()})
        by_upper = get(portal, access, **{"caseHeader.caseInstanceUUID": case})
        assert by_lower.json() == by_upper.json()
        item = results(by_upper)[0]
        by_entry = get(portal, access, **{"docketEntryHeader.docketEntryUUID": item["docketEntryUUID"].lower()})
        by_document = get(portal, access, **{"documentLinkUUID": item["documentLinkUUID"].lower(),
                                             "caseHeader.caseInstanceUUID": case})
        assert item in results(by_entry) and results(by_document) == [item]
    with court("nevada") as portal:
        case = results(get(portal, "/courts/cms/cases"))[0]["caseHeader"]["caseInstanceUUID"]
        assert case == case.lower()
        guid = portal.system.courts[portal.corpus.case_court[portal.corpus.find("case", case)]].resource_id
        assert get(portal, f"/courts/{guid.upper()}/cms/cases/{case.upper()}/docketentries").status_code == 200


def test_cases_are_filed_at_local_midnight_so_a_window_opening_at_001_loses_them():
    with court() as portal:
        row = results(get(portal, "/courts/cms/cases"))[0]["caseHeader"]
        day, offset = row["filedDate"][:10], row["filedDate"][-6:]
        assert row["filedDate"] == f"{day}T00:00:00.000{offset}" and offset in ("-08:00", "-07:00")

        def found(low, high):
            rows = walk_pages(portal, "/courts/cms/cases",
                              **{"caseHeader.filedDateFrom": low, "caseHeader.filedDateTo": high})
            return row["caseInstanceUUID"] in {r["caseHeader"]["caseInstanceUUID"] for r in rows}

        assert found(f"{day}T00:00:00.000{offset}", f"{day}T23:59:59.999{offset}")
        assert not found(f"{day}T00:00:00.001{offset}", f"{day}T23:59:59.999{offset}")
        hours = -int(offset[1:3])
        utc = dt.datetime.fromisoformat(f"{day}T00:00:00") - dt.timedelta(hours=hours)
        assert found(utc.isoformat() + ".000+00:00", utc.isoformat() + ".000+00:00")    # the same instant, in UTC
    with court(case_instants="utc") as portal:
        stamp = results(get(portal, "/courts/cms/cases"))[0]["caseHeader"]["filedDate"]
        assert stamp.endswith("+00:00") and stamp[11:13] in ("07", "08")


def test_json_needs_accept_and_nevada_needs_a_referer():
    with court() as portal:
        assert get(portal, "/courts", headers={"Referer": "x"}).status_code == 406
        assert get(portal, "/courts", headers={"Accept": "application/json"}).status_code == 403
        assert get(portal, "/courts").status_code == 200
    with court("wyoming") as portal:
        assert get(portal, "/courts", headers={"Accept": "application/json"}).status_code == 200
    with court(referer_required=False) as portal:
        assert get(portal, "/courts", headers={"Accept": "application/json"}).status_code == 200


def test_the_api_root_may_have_a_path_of_its_own():
    with court(api_path="/api/v2") as portal:
        assert portal.base_url.endswith("/api/v2") and get(portal, "/courts").status_code == 200
        assert requests.get(portal.root_url + "/courts", headers=JSON, timeout=10).status_code == 404
        assert requests.get(portal.root_url + "/__sim__/stats", timeout=10).json()["requests"]["json"] == 1


def test_anything_else_is_404_and_a_case_of_another_court_is_not_found():
    with court() as portal:
        case = portal.corpus.cases_by_filing(0)[0]
        case_uuid, other = portal.corpus.uuid("case", case), portal.system.courts[1].resource_id
        assert get(portal, f"/courts/{other}/cms/cases/{case_uuid}").status_code == 404
        assert get(portal, "/courts/cms/events").status_code == 404
        assert get(portal, "/cases/search").status_code == 404
        missing = get(portal, f"/courts/{other}/cms/cases/{case_uuid[:-1]}0")
        assert missing.status_code == 404 and missing.json()["status"] == 404
        assert get(portal, "/courts/cms/docketentrydocumentsaccess").status_code == 400


# ------------------------------------------------------------------ documents


def test_a_viewable_document_is_a_pdf_and_any_other_a_302_to_the_portals_wall():
    with court("oregon", docs=200) as portal:
        truth = portal.truth()
        viewable = next(doc for doc in truth if doc.viewable)
        walled = {doc.state: doc for doc in truth if not doc.viewable}
        assert set(walled) == {"PURCHASABLE", "UNAVAILABLE"}
        carted = next(doc for doc in truth if doc.viewable and doc is not viewable)
        portal.corpus.doc_state[portal.document_index(carted.document_id)] = IN_CART   # a session with a cart
        walled["IN_CART"] = carted
        path = "/courts/{0.court_id}/cms/case/{0.case_id}/docketentrydocuments/{0.document_id}"
        pdf = get(portal, path.format(viewable), headers={})
        assert pdf.status_code == 200 and pdf.headers["Content-Type"] == "application/pdf"
        assert int(pdf.headers["Content-Length"]) == len(pdf.content) and pdf.content.startswith(b"%PDF-")
        assert hashlib.sha256(pdf.content).hexdigest() == viewable.sha256
        for state, doc in walled.items():
            wall = get(portal, path.format(doc), headers={})
            assert wall.status_code == 302 and wall.headers["Location"].startswith(portal.portal_url)
            assert ("purchase" in wall.headers["Location"]) == (state == "PURCHASABLE")
            assert wall.headers["Location"].endswith("/cart") == (state == "IN_CART")
            followed = requests.get(portal.base_url + path.format(doc), timeout=10)
            assert followed.status_code == 200 and followed.headers["Content-Type"].startswith("text/html")
            assert followed.content.startswith(b"<!DOCTYPE html>")
        assert sum(portal.stats()["walls"].values()) == len(walled)


def test_pdfs_speak_each_systems_words():
    words = {"nevada": ("IN THE SUPREME COURT OF THE STATE OF NEVADA", "Nev. Adv. Op. No.", "NRS 200.010"),
             "alabama": ("Ala. Code § 13A-5-40",), "oregon": ("ORS 137.700",), "north-dakota": (" ND ", "N.D.C.C."),
             "wyoming": (" WY ", "Wyo. Stat. Ann."), "florida": ("Fla. Stat.",)}
    for name, expected in words.items():
        portal = court(name, docs=400)
        corpus = portal.corpus
        cited = [doc for doc in range(corpus.doc_count) if corpus.kind(corpus.doc_entry[doc]).opinion
                 and (name != "nevada" or corpus.kind(corpus.doc_entry[doc]).type_id == 1000014)]
        text = "\n".join(pypdf.PdfReader(io.BytesIO(portal.pdf(doc))).pages[0].extract_text() for doc in cited[-3:])
        for word in expected:
            assert word in text, (name, word)
        assert corpus.case_numbers[corpus.entry_case[corpus.doc_entry[cited[-1]]]] in text


# ---------------------------------------------------------------- misbehaviour


def test_faults_at_the_fault_rate_and_a_court_that_is_down():
    seen = set()
    with court(fault_rate=1.0, enforce_retry_after=False) as portal:
        doc = next(doc for doc in portal.truth(hashes=False) if doc.viewable)
        download = "/courts/{0.court_id}/cms/case/{0.case_id}/docketentrydocuments/{0.document_id}".format(doc)
        for number in range(60):
            try:
                answer = get(portal, download if number % 2 else "/courts/cms/cases")
                body = answer.content
                if answer.status_code == 429:
                    assert answer.headers["Retry-After"]
                if answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html"):
                    seen.add("html")
                else:
                    seen.add(str(answer.status_code))
                    assert answer.status_code != 200 or len(body) < int(answer.headers["Content-Length"])
            except requests.exceptions.ChunkedEncodingError:
                seen.add("truncated")
            except requests.exceptions.ConnectionError:
                seen.add("reset")
        assert seen >= {"500", "503", "429", "reset", "truncated", "html"}
        assert portal.stats()["faults_served"] == 60
    with court(down="503") as portal:
        assert get(portal, "/courts").status_code == 503
        portal.down = "403"
        assert get(portal, "/courts").status_code == 403
        portal.down = "reset"
        with pytest.raises(requests.exceptions.ConnectionError):
            get(portal, "/courts")
        portal.down = None
        assert get(portal, "/courts").status_code == 200


def test_a_request_back_before_its_retry_after_is_refused_and_counted():
    with court(fault_rate=0.0) as portal:
        portal._retry_after("json")
        assert get(portal, "/courts").status_code == 429
        assert portal.stats()["early_requests"] == 1


# ---------------------------------------------------------------- the walk


def walk(portal) -> tuple[dict[str, tuple[str, str | None]], int]:
    """Every case's lists, every viewable document fetched: document id -> (state GUID, sha256 or None)."""
    requests_made = 0
    found = {}
    for row in walk_pages(portal, "/courts/cms/cases", size=500):
        header = row["caseHeader"]
        guid = portal.corpus.court_guid(next(i for i, c in enumerate(portal.system.courts)
                                             if c.display_name == header["courtAbbreviation"]))
        case = header["caseInstanceUUID"]
        entries = walk_pages(portal, f"/courts/{guid}/cms/cases/{case}/docketentries", size=500)
        listed = walk_pages(portal, "/courts/cms/docketentrydocumentsaccess", size=500,
                            **{"caseHeader.caseInstanceUUID": case})
        requests_made += 2
        assert sum(entry["docketEntryHeader"]["documentCount"] for entry in entries) == len(listed)
        for item in listed:
            digest = None
            if item["userDocumentState"] == STATE_GUIDS[0]:
                answer = get(portal, f"/courts/{guid}/cms/case/{case}/docketentrydocuments/{item['documentLinkUUID']}",
                             headers={"Referer": "x"})
                assert answer.status_code == 200
                digest = hashlib.sha256(answer.content).hexdigest()
                requests_made += 1
            found[item["documentLinkUUID"]] = (item["userDocumentState"], digest)
    return found, requests_made + 1


@pytest.mark.parametrize("system", ["nevada", "alabama", "oregon"])
def test_a_full_walk_of_every_cases_lists_holds_exactly_the_corpus_truth(system):
    with court(system, docs=120) as portal:
        archive, made = walk(portal)
        truth = portal.truth()
        states = dict(zip(("VIEWABLE", "PURCHASABLE", "IN_CART", "UNAVAILABLE"), STATE_GUIDS))
        assert archive == {doc.document_id: (states[doc.state], doc.sha256 if doc.viewable else None) for doc in truth}
        floor = portal.floor()
        assert made == sum(floor[name] for name in ("case search pages", "docket entry lists", "access lists",
                                                    "downloads"))


# ------------------------------------------------------------------ living


def test_advance_files_cases_opinions_and_changes_access_and_its_plan_says_what_the_court_serves():
    with court(docs=300) as portal:
        before = {doc.document_id: doc for doc in portal.truth(hashes=False)}
        titles = {portal.corpus.uuid("case", case): portal.corpus.case_title(case)
                  for case in range(portal.corpus.case_count)}
        plan = portal.advance(days=30, seed=5)
        after = {doc.document_id: doc for doc in portal.truth(hashes=False)}
        assert plan["today"] == (DAY + dt.timedelta(days=30)).isoformat()
        assert {item["document_id"] for item in plan["added"]} == set(after) - set(before)
        assert plan["counts"]["new_cases"] >= 2 and plan["counts"]["opinions"] >= 2
        assert all(plan["filed_from"] <= item["filed_date"][:10] <= plan["filed_through"] for item in plan["added"])
        new_opinions = {item["document_id"] for item in plan["added"] if item["opinion"]}
        listed = {row["documentLinkUUID"] for type_id in ("1000014", "1000018") for row in walk_pages(
            portal, "/courts/cms/docketentrydocuments", **{"docketEntryHeader.docketEntryTypeID": type_id})}
        assert new_opinions <= listed
        (public,), (gone,) = plan["made_public"], plan["withdrawn"]
        assert not before[public["document_id"]].viewable and after[public["document_id"]].viewable
        assert before[gone["document_id"]].viewable and not after[gone["document_id"]].viewable
        path = "/courts/{court_id}/cms/case/{case_id}/docketentrydocuments/{document_id}"
        assert get(portal, path.format(**public)).status_code == 200
        assert get(portal, path.format(**gone)).status_code == 302
        retitled = next(case for case in plan["cases"] if "retitled" in case["why"])
        assert retitled["fields"] == ["caseTitle"]
        row = results(get(portal, "/courts/cms/cases", **{"caseHeader.caseNumber": retitled["case_number"]}))[0]
        assert row["caseHeader"]["caseTitle"] != titles[retitled["case_id"]]
        new_case = next(case for case in plan["cases"] if case["new"])
        assert results(get(portal, "/courts/cms/cases", **{"caseHeader.caseNumber": new_case["case_number"]}))
        answered = requests.post(portal.root_url + "/__sim__/advance?days=7&seed=1&new_cases=3", timeout=10).json()
        assert answered["counts"]["new_cases"] == 3 and len(portal.plans) == 2


def test_an_alabama_advance_releases_new_lists_of_its_new_opinions():
    with court("alabama", docs=300) as portal:
        plan = portal.advance(days=14, seed=2)
        assert plan["publications"]
        released = {doc for publication in plan["publications"] for doc in publication["documents"]}
        assert {item["document_id"] for item in plan["added"] if item["opinion"]} <= released
        newest = results(get(portal, "/courts/cms/publications", sort="publicationDate,desc", size=len(SYSTEMS)))
        assert {row["publicationUUID"] for row in newest} & {p["publication_id"] for p in plan["publications"]}


# ---------------------------------------------------------------- counters


def test_stats_and_the_request_log_count_every_request_in_order():
    with court(record_requests=True) as portal:
        case = portal.corpus.cases_by_filing(None)[0]
        guid, case_uuid = portal.corpus.court_guid(portal.corpus.case_court[case]), portal.corpus.uuid("case", case)
        get(portal, "/courts")
        get(portal, f"/courts/{guid}/cms/cases/{case_uuid}/docketentries")
        get(portal, "/courts/cms/docketentrydocumentsaccess", **{"caseHeader.caseInstanceUUID": case_uuid})
        stats = requests.get(portal.root_url + "/__sim__/stats", timeout=10).json()
        assert stats["endpoints"] == {"courts": 1, "docket_entries": 1, "documents_access": 1}
        assert list(portal.request_log) == [("courts", -1), ("docket_entries", case), ("documents_access", case)]
        times = portal.request_log.times
        assert len(times) == 3 and times[0] <= times[1] <= times[2] <= time.monotonic()


def test_sim_serves_a_court_system_in_the_foreground_and_prints_its_totals():
    command = [sys.executable, "-m", "notebook_builder", "sim", "--court-system", "alabama", "--port", "0",
               "--docs", "20", "--today", "2026-10-01"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        base = child.stdout.readline().strip()
        answer = requests.get(base + "/courts", headers={"Accept": "application/json"}, timeout=10)
        assert answer.status_code == 200 and len(results(answer)) == 3
    finally:
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=20)
    totals = json.loads(out.strip().splitlines()[-1].removeprefix("totals: "))
    assert totals["system"] == "alabama" and totals["endpoints"] == {"courts": 1}
