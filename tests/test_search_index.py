"""The search engine (c18_search_index) on its own: words, exact phrases with common words, ranking
by order and nearness, filters, sorts, pages, a reader beside a writer, the store's copy."""
from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import tarfile
import time
from pathlib import Path

import pytest
from archive_fixture import write_earlier_search_tar

from notebook_builder.cells.c00_config import IntegrityError
from notebook_builder.cells.c06_layout import SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME
from notebook_builder.cells.c18_query_syntax import parse_query
from notebook_builder.cells.c18_search_index import (GRAM_JOINER, SearchFilters, SearchIndex, SearchIndexOutdated,
                                                     SearchQueryError, body_stream, commit_file_names,
                                                     copy_search_index, filed_day, index_file_sound, index_words,
                                                     install_search_index, unpack_search_index, word_stems)

VOCABULARY = ("appellant appellee court circuit judgment statute review record trial motion evidence jury "
              "instruction error harmless abuse discretion standard findings fact law remand").split()


def fields(number: int, **extra) -> dict:
    year = 2010 + number % 10
    values = {"document_id": f"doc-{number:03d}", "case_number": f"{year}-{'SC' if number % 3 == 0 else 'CA'}-{number:04d}",
              "court_code": "SC" if number % 3 == 0 else "CA", "year": year,
              "court": "Kentucky Supreme Court" if number % 3 == 0 else "Kentucky Court of Appeals",
              "case_title": f"PARTY{number} VS. COMMONWEALTH", "description": "OPINION AFFIRMING",
              "filed_date": f"{year + 1}-{1 + number % 12:02d}-{1 + number % 28:02d}", "text_name": f"text/{number}.txt",
              "text_key": "t", "source_key": "s", "sha256": f"{number:064x}"}
    values.update(extra)
    return values


def build(folder: Path, texts: dict[int, str], per_document: dict[int, dict] | None = None) -> SearchIndex:
    search = SearchIndex.open(folder)
    for number, text in texts.items():
        search.add(fields(number, **(per_document or {}).get(number, {})), text)
    search.commit()
    return search


def ids(page) -> list[str]:
    return [hit["document_id"] for hit in page.hits]


def random_texts(count: int, seed: int = 7, words: int = 300) -> dict[int, str]:
    rng = random.Random(seed)
    return {number: " ".join(rng.choice(VOCABULARY) for _ in range(words)) + "." for number in range(count)}


# ------------------------------------------------------------------ words


def test_words_are_letters_and_digits_lowercased_and_folded():
    assert index_words("O'Brien, Peña; KRS 532.032 ﬁnding Ærø") == [
        "o", "brien", "pena", "krs", "532", "032", "finding", "aero"]
    assert word_stems(["suppressed", "suppression", "negligently"]) == ["suppress", "suppress", "neglig"]
    assert filed_day("2019-03-04T00:00:00") == 20190304 and filed_day("") is None and filed_day("March") is None


def test_each_common_word_is_followed_by_its_gram_with_the_next_word():
    assert body_stream("Abuse of the discretion.") == (
        f"abuse of of{GRAM_JOINER}the the the{GRAM_JOINER}discretion discretion")
    assert body_stream("of") == "of"          # nothing after it: no gram


# ------------------------------------------------------------- matching


@pytest.fixture
def phrases(tmp_path):
    texts = {1: "Restitution is not owed until the amount is proven.",
             2: "The court held that restitution was not owed here.",
             3: "Restitution owed, the court said; it was not proven.",
             4: "An abuse of discretion standard of review applies.",
             5: "The abuse of the discretion was plain.",
             6: "Of the many things, none mattered.",
             7: "The suppressed evidence and the suppression hearing.",
             8: "Commonwealth of Kentucky, O'Brien and King's men."}
    search = build(tmp_path, texts)
    yield search
    search.close()


@pytest.mark.parametrize("typed, expected", [
    ('"restitution was not owed"', ["doc-002"]),
    ('"restitution is not owed"', ["doc-001"]),
    ('"abuse of discretion"', ["doc-004"]),
    ('"abuse of the discretion"', ["doc-005"]),
    ('"of the"', ["doc-005", "doc-006"]),
    ('"the court"', ["doc-002", "doc-003"]),
    ('"discretion standard of review"', ["doc-004"]),
    ("O'Brien", ["doc-008"]),
    ("King's", ["doc-008"]),
])
def test_a_quoted_phrase_matches_its_words_in_order_common_words_included(phrases, typed, expected):
    page = phrases.search(parse_query(typed), limit=50)
    assert sorted(ids(page)) == expected and page.total == len(expected)


def test_an_unquoted_word_matches_its_stem_family_a_quoted_one_only_itself(phrases):
    assert ids(phrases.search(parse_query("suppress"))) == ["doc-007"]
    assert phrases.search(parse_query('"suppress"')).total == 0
    assert phrases.search(parse_query("suppress*")).total == 1
    assert phrases.count(parse_query("restitution owed")) == 3           # every word, anywhere
    assert phrases.count(parse_query("restitution -proven")) == 1        # doc-002
    assert phrases.count(parse_query('restitution -"not owed"')) == 1    # doc-003 writes "owed, ... was not"
    assert phrases.count(parse_query("discretion OR suppressed")) == 3


def test_whatever_is_typed_is_answered(phrases):
    for typed in ['"', "((", "-", "OR OR", "*", "NEAR(", "2017-CA-", "'''", "a*", "\\", "ﬁ", "\x00", "the", ""]:
        page = phrases.search(parse_query(typed))
        assert page.total >= 0, typed


# --------------------------------------------------------------- ranking


def test_a_pasted_sentence_brings_the_document_that_holds_it_first(tmp_path):
    texts = random_texts(60)
    search = build(tmp_path, texts)
    rng = random.Random(3)
    try:
        for number in rng.sample(sorted(texts), 15):
            words = texts[number].split()
            start = rng.randrange(0, len(words) - 12)
            sentence = " ".join(words[start:start + rng.randint(8, 12)])
            page = search.search(parse_query(sentence), limit=5)
            assert page.hits and page.hits[0]["document_id"] == f"doc-{number:03d}", sentence
            assert page.total > 5            # every word is in many documents: order decided it
    finally:
        search.close()


def test_words_near_each_other_rank_above_the_same_words_apart(tmp_path):
    filler = " ".join(["record"] * 40)
    texts = {1: f"sovereign {filler} immunity {filler}", 2: f"{filler} immunity is sovereign here {filler}",
             3: f"{filler} sovereign immunity {filler}"}
    search = build(tmp_path, texts)
    try:
        assert ids(search.search(parse_query("sovereign immunity"))) == ["doc-003", "doc-002", "doc-001"]
    finally:
        search.close()


def test_a_case_number_brings_its_case_first_and_a_caption_its_title(tmp_path):
    texts = {number: f"The court cites 2015-CA-0004 and Commonwealth v. Party{number + 1} here." for number in range(12)}
    search = build(tmp_path, texts)
    try:
        case = fields(4)["case_number"]
        year, court, sequence = case.split("-")
        for typed in (case, f"{year}-{court}-{int(sequence):06d}-MR", f"{year} {court} {int(sequence)}",
                      f"{year[2:]}-{court}-{int(sequence)}", f"{year}{court}{sequence}"):
            page = search.search(parse_query(typed))
            assert page.hits[0]["case_number"] == case, typed
        page = search.search(parse_query("Party7 v. Commonwealth"))
        assert page.hits[0]["document_id"] == "doc-007" and page.total == 2      # its title, and a text citing it
    finally:
        search.close()


# ------------------------------------------------- filters, sorts, pages


@pytest.fixture
def many(tmp_path):
    texts = {number: f"restitution hearing number {number}" for number in range(45)}
    texts[45] = "nothing of the kind"
    search = build(tmp_path, texts, {7: {"filed_date": None}, 8: {"kind": "order"}})
    yield search
    search.close()


def test_pages_are_disjoint_in_order_and_reach_every_match_with_the_exact_total(many):
    for sort in ("relevance", "newest", "oldest"):
        seen, page_number = [], 1
        while True:
            page = many.search(parse_query("restitution"), sort=sort, page=page_number, limit=7)
            assert page.total == 45
            if not page.hits:
                break
            seen += page.hits
            page_number += 1
        assert page_number == 8 and len({hit["document_id"] for hit in seen}) == 45, sort
        if sort != "relevance":
            days = [hit["filed_date"] for hit in seen if hit["filed_date"]]
            assert days == sorted(days, reverse=sort == "newest")
            assert seen[-1]["filed_date"] is None            # an unknown date comes last either way


def test_filters_narrow_and_the_total_counts_under_them(many):
    query = parse_query("restitution")
    everything = many.search(query, limit=100).hits
    for filters, keep in [
        (SearchFilters(court_code="SC"), lambda hit: hit["court_code"] == "SC"),
        (SearchFilters(court_like="Supreme"), lambda hit: hit["court_code"] == "SC"),
        (SearchFilters(year=2013), lambda hit: hit["year"] == 2013),
        (SearchFilters(after="2015-03-01", before="2016-06-30"),
         lambda hit: hit["filed_date"] and "2015-03-01" <= hit["filed_date"] <= "2016-06-30"),
        (SearchFilters(after="2015-03-04"), lambda hit: hit["filed_date"] and hit["filed_date"] >= "2015-03-04"),
        (SearchFilters(kind="order"), lambda hit: hit["document_id"] == "doc-008"),
        (SearchFilters(kind="opinion"), lambda hit: hit["document_id"] != "doc-008"),
        (SearchFilters(kind="OPINION AFF"), lambda hit: hit["document_id"] != "doc-008"),
    ]:
        page = many.search(query, filters, limit=100)
        assert sorted(ids(page)) == sorted(hit["document_id"] for hit in everything if keep(hit)), filters
        assert page.total == len(page.hits)
    day = next(hit["filed_date"] for hit in everything if hit["filed_date"])
    on_the_day = [hit for hit in everything if hit["filed_date"] == day]
    assert on_the_day and many.count(query, SearchFilters(after=day, before=day)) == len(on_the_day)   # inclusive


def test_matching_says_which_of_some_documents_match(many):
    among = [f"doc-{number:03d}" for number in (3, 4, 5, 45, 99)]
    assert many.matching(parse_query("restitution"), SearchFilters(), among) == {"doc-003", "doc-004", "doc-005"}
    assert many.matching(parse_query("restitution"), SearchFilters(court_code="SC"), among) == {"doc-003"}


def test_an_empty_query_lists_the_documents_under_the_filters_newest_first(many):
    page = many.search(parse_query(""), SearchFilters(court_code="CA"), limit=100)
    assert page.total == 30 and all(hit["court_code"] == "CA" for hit in page.hits)
    days = [hit["filed_date"] for hit in page.hits if hit["filed_date"]]
    assert days == sorted(days, reverse=True) and page.hits[0]["score"] is None


def test_facets_count_each_value_under_the_other_filters(many):
    facets = many.facets(parse_query("restitution"), SearchFilters(court_code="SC", year=2013))
    assert dict(facets["court_code"]) == {"CA": 3, "SC": 2}            # the court filter left out
    assert sum(count for _, count in facets["year"]) == 15              # the year's left out, the court's kept
    assert dict(facets["kinds"]) == {"opinion": 2}


def test_a_bad_page_limit_or_sort_is_a_search_query_error(many):
    for arguments in ({"page": 0}, {"limit": 0}, {"sort": "random"}):
        with pytest.raises(SearchQueryError):
            many.search(parse_query("x"), **arguments)


# ------------------------------------------------ readers beside a writer


def _writer(folder: str, rounds: int, batch: int) -> None:
    search = SearchIndex.open(folder)
    for round_number in range(rounds):
        for number in range(batch):
            search.add(fields(round_number * batch + number), "marker words for the reader")
        search.commit()
        if round_number % 3 == 2:       # deletes too: the count goes down and up
            for number in range(batch):
                search.remove(fields(round_number * batch + number)["document_id"])
            search.commit()
    search.finish()
    search.close()


def test_a_reader_never_sees_a_half_written_commit_of_a_writer_in_another_process(tmp_path):
    build(tmp_path, {}).close()
    batch = 25
    writer = multiprocessing.get_context("spawn").Process(target=_writer, args=(str(tmp_path), 30, batch))
    writer.start()
    reader = SearchIndex.open(tmp_path, readonly=True)
    seen = set()
    try:
        deadline = time.monotonic() + 120
        while writer.is_alive() and time.monotonic() < deadline:
            reader.index.reload()
            total = reader.search(parse_query("marker"), limit=5).total
            assert total % batch == 0, total
            seen.add(total)
    finally:
        writer.join(60)
        reader.close()
    assert writer.exitcode == 0 and len(seen) > 1
    after = SearchIndex.open(tmp_path, readonly=True)
    try:
        assert after.count(parse_query("marker")) == after.indexed_count() == 20 * batch
    finally:
        after.close()


# ------------------------------------------------------- the store's copy


def test_a_commit_is_its_segments_files_and_the_delete_file_of_its_opstamp(tmp_path):
    search = build(tmp_path, random_texts(12))
    search.remove("doc-003")
    search.commit()
    search.finish()
    search.close()
    index_path = tmp_path / SEARCH_INDEX_DIRNAME
    meta = (index_path / "meta.json").read_text()
    names = commit_file_names(meta)
    segments = json.loads(meta)["segments"]
    deleted = [segment for segment in segments if segment["deletes"]]
    assert len(names) == 6 * len(segments) + len(deleted) == 7
    assert f"{deleted[0]['segment_id'].replace('-', '')}.{deleted[0]['deletes']['opstamp']}.del" in names
    assert all((index_path / name).is_file() and index_file_sound(index_path / name) for name in names)
    with pytest.raises(IntegrityError):
        commit_file_names('{"segments": [{"segment_id": "../x"}]}')
    with pytest.raises(IntegrityError):
        commit_file_names("not json")


def test_a_damaged_file_of_a_commit_fails_its_checksum(tmp_path):
    build(tmp_path, random_texts(5)).close()
    path = next((tmp_path / SEARCH_INDEX_DIRNAME).glob("*.store"))
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    assert not index_file_sound(path)
    path.write_bytes(b"")
    assert not index_file_sound(path) and not index_file_sound(tmp_path / "nowhere.idx")


def staged_copy(source: Path, staging: Path) -> Path:
    """`source`'s index as a restore stages it: the commit's files, meta.json and the catalog."""
    copy_search_index(source, staging)
    return staging


@pytest.mark.parametrize("form", ["its commit's files", "an earlier version's tar"])
def test_the_stores_copy_restores_the_same_index_elsewhere(tmp_path, form):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    build(source, random_texts(20)).close()
    if form == "its commit's files":
        install_search_index(staged_copy(source, tmp_path / "staging"), target)
    else:
        unpack_search_index(write_earlier_search_tar(source, tmp_path / "ky_search.tar"), target)
        assert not (target / "tmp" / "search-restore").exists()
    copy, original = SearchIndex.open(target, readonly=True), SearchIndex.open(source, readonly=True)
    try:
        query = parse_query("abuse discretion")
        assert ids(copy.search(query)) == ids(original.search(query)) and copy.indexed_count() == 20
    finally:
        copy.close()
        original.close()


@pytest.mark.parametrize("harm", ["missing", "damaged", "other commit"])
def test_a_copy_missing_a_file_damaged_or_of_another_commit_is_refused_and_nothing_put_in_place(tmp_path, harm):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    search = build(source, random_texts(8))
    staging = staged_copy(source, tmp_path / "staging")
    victim = next((staging / SEARCH_INDEX_DIRNAME).glob("*.pos"))   # tantivy opens without it
    if harm == "missing":
        victim.unlink()
    elif harm == "damaged":
        data = bytearray(victim.read_bytes())
        data[0] ^= 0x01
        victim.write_bytes(bytes(data))
    else:        # the commit after, as many documents, beside the catalog of the one before
        search.add(fields(3), "another text for the third")
        search.commit()
        later = staged_copy(source, tmp_path / "later")
        shutil.copy(staging / SEARCH_DB_FILENAME, later / SEARCH_DB_FILENAME)
        staging = later
    search.close()
    with pytest.raises(IntegrityError, match={"missing": "lacks", "damaged": "damaged",
                                              "other commit": "records commit"}[harm]):
        install_search_index(staging, target)
    assert not (target / SEARCH_DB_FILENAME).exists() and not (target / SEARCH_INDEX_DIRNAME).exists()


def test_a_pack_that_is_not_an_index_is_refused_and_nothing_put_in_place(tmp_path):
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        (tmp_path / "evil").write_text("x")
        tar.add(tmp_path / "evil", arcname="../evil")
    with pytest.raises(IntegrityError):
        unpack_search_index(bad, tmp_path / "w")
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all")
    with pytest.raises(IntegrityError):
        unpack_search_index(tmp_path / "junk.tar", tmp_path / "w")
    assert not (tmp_path / "w" / SEARCH_DB_FILENAME).exists()


def test_a_copy_is_a_consistent_snapshot_the_writer_can_go_on_from(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    search = build(source, random_texts(10))
    copy_search_index(source, tmp_path / "served")
    search.add(fields(99), "a later text")
    search.commit()
    search.finish()
    search.close()
    served = SearchIndex.open(tmp_path / "served", readonly=True)
    try:
        assert served.indexed_count() == 10 and served.index.searcher().num_docs == 10
    finally:
        served.close()


def test_an_index_of_another_version_or_without_its_files_is_refused(tmp_path):
    build(tmp_path, {1: "x"}).close()
    import sqlite3
    with sqlite3.connect(tmp_path / SEARCH_DB_FILENAME) as conn:
        conn.execute("UPDATE kv SET value = '6' WHERE key = 'search_schema_version'")
    with pytest.raises(SearchIndexOutdated):
        SearchIndex.open(tmp_path, readonly=True)
    with pytest.raises(SearchIndexOutdated):
        SearchIndex.open(tmp_path)
    with pytest.raises(IntegrityError):
        SearchIndex.open(tmp_path / "nowhere", readonly=True)
    other = tmp_path / "other"
    other.mkdir()
    build(other, {1: "x"}).close()
    import shutil
    shutil.rmtree(other / SEARCH_INDEX_DIRNAME)
    with pytest.raises(IntegrityError):
        SearchIndex.open(other)
