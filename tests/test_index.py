"""The search index (ky_search.sqlite): incremental build, filters, ranking, restore, verify."""
from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import unicodedata
from pathlib import Path

import pytest
from archive_fixture import DOCUMENTS, add_text, build_archive, document_id, make_config

from notebook_builder.cells.c00_config import IntegrityError
from notebook_builder.cells.c06_layout import DB_FILENAME, SEARCH_DB_FILENAME
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c17_snapshots import checkpoint
from notebook_builder.cells.c18_search_index import (INDEX_WORD, SEARCH_COMMON_WORDS, SEARCH_KINDS, SearchDatabase,
                                                     SearchQueryError, _search_source, index_behind, index_coverage,
                                                     index_query, index_words, search_kinds)
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c87_index import (IndexMissingError, candidate_words, court_code_of, court_filter, index,
                                              make_snippet, match_places, phrase_keys, plan_index, query_phrases,
                                              search_archive, snippet_html, year_of)
from notebook_builder.cells.c90_verify import format_verify_report, verify
from notebook_builder.cli import main


def run_index(cfg):
    ctx = open_context(cfg)
    try:
        return index(ctx)
    finally:
        ctx.close()


def assert_index_sound(cfg):
    """FTS5's own check of the index against its content: every text's tokens, and no others."""
    sdb = SearchDatabase.open(Path(cfg.WORKSPACE) / SEARCH_DB_FILENAME)
    try:
        sdb.conn.execute("INSERT INTO docs_fts(docs_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        sdb.close()


@pytest.fixture
def archive(tmp_path):
    return build_archive(tmp_path)


# ------------------------------------------------------------- decisions


def test_court_and_year_come_from_the_case_number_then_the_court_name_and_date():
    assert court_code_of("2019-CA-0012", None) == "CA"
    assert court_code_of("2024 CA ADMIN - NON-CONFIDENTIAL OPINION - 002", None) == "CA"
    assert court_code_of(None, "Kentucky Supreme Court") == "SC"
    assert court_code_of("ADMIN 7", "somewhere") is None
    assert year_of("2019-CA-0012", "2020-01-01") == 2019
    assert year_of("ADMIN", "2020-01-01T00:00:00") == 2020
    assert year_of(None, None) is None


def test_court_filter_accepts_codes_and_names():
    assert court_filter("ca") == {"court_code": "CA"}
    assert court_filter("Supreme") == {"court_code": "SC"}
    assert court_filter("Family") == {"court_like": "Family"}
    assert court_filter("  ") == {}


def test_the_kind_filter_accepts_the_derived_kind_else_the_entry_types_or_descriptions_first_word():
    assert search_kinds("order", "OPINION", "OPINION AFFIRMING") == ["order"]       # derived: it alone
    assert search_kinds("motion", None, "ORDER DENYING") == []                      # derived, none of ours
    assert search_kinds(None, "Opinion", "ORDER DENYING REHEARING") == ["opinion", "order"]
    assert search_kinds(None, None, "ordered to pay") == ["order"]                  # as LIKE 'order%'
    assert search_kinds(None, None, "ÖRDER") == [] and search_kinds(None, None, " ORDER") == []
    assert search_kinds(None, None, None) == []


def test_plan_index_separates_new_texts_field_changes_and_removals():
    wanted = {name: {"text_key": f"t{name}", "source_key": f"s{name}"} for name in "abcd"}
    # (doc_rowid, text_name, text_key, source_key): b's fields changed, c's text (or title), d is new.
    indexed = {"a": (1, "x", "ta", "sa"), "b": (2, "x", "tb", "old"), "c": (3, "x", "old", "sc"),
               "gone": (4, "x", "t", "s")}
    assert plan_index(wanted, indexed) == (["c", "d"], ["b"], [4])


def test_a_snippet_marks_the_querys_phrases_not_its_operators_nor_what_not_leaves_out():
    assert query_phrases('"Search warrant" AND suppress* NOT (murder OR theft)') == [
        [("search", False), ("warrant", False)], [("suppress", True)]]
    assert query_phrases("NEAR(summary judgment, 5) case_title:smith") == [
        [("summary", False)], [("judgment", False)], [("smith", False)]]
    assert query_phrases('"a ""quoted"" word"*') == [[("quoted", False), ("word", True)]]   # "a": a common word


def test_a_snippet_is_the_densest_stretch_of_the_querys_words_with_their_stemmed_forms_marked():
    phrases = query_phrases('negligence OR "search warrant" OR suppress*')
    # As the index's porter stemmer has them.
    stems = {"negligence": "neglig", "negligently": "neglig", "search": "search", "warrant": "warrant",
             "suppressed": "suppress", "neglected": "neglect", "searched": "search", "warrants": "warrant"}
    text = ("The negligence claim is addressed first. " + "Unrelated words about the weather. " * 10
            + "Then the search  warrant was negligently executed and the evidence suppressed. "
            + "Unrelated words follow here; the officer neglected nothing and searched, warrants in hand. " * 10)
    matches = match_places(candidate_words(text, phrase_keys(phrases, stems), 2), phrases, stems)
    snippet, marks = make_snippet(text, matches)
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert [snippet[start:end] for start, end in marks] == ["search warrant", "negligently", "suppressed"]
    assert "[search  warrant]" not in snippet       # whitespace is made single
    assert "[search warrant] was [negligently] executed and the evidence [suppressed]" in snippet
    assert "[neglected]" not in make_snippet(text[-200:], match_places(
        candidate_words(text[-200:], phrase_keys(phrases, stems), 2), phrases, stems))[0]   # another stem
    assert make_snippet("Nothing of the query here at all.", []) == ("Nothing of the query here at all.", [])
    assert make_snippet(" ".join(["word"] * 100), [])[0].endswith(" …")


def test_a_bracket_the_text_has_itself_is_no_mark_in_the_snippet_nor_on_the_page():
    text = 'The court found the search "was [sic] unlawful" and \x02[t]he evidence\x03 suppressed.'
    at = text.index("search")
    snippet, marks = make_snippet(text, [(at, at + len("search"), 0)])
    assert snippet == 'The court found the [search] "was [sic] unlawful" and [t]he evidence suppressed.'
    assert [snippet[start:end] for start, end in marks] == ["search"]
    assert snippet_html(snippet, marks) == (
        "The court found the <mark>search</mark> &quot;was [sic] unlawful&quot; and [t]he evidence suppressed.")


# ----------------------------------------------------------------- build


def test_common_words_are_left_out_of_what_is_indexed_and_of_queries_where_the_rest_still_says_what_to_find():
    assert index_words("The abuse OF discretion, in re: X_of y") == "  abuse   discretion,   re: X_  y"
    assert index_query("suppression") == "suppression"                     # untouched when there is none
    assert index_query('"abuse of the discretion"') == '"abuse discretion"'
    assert index_query("abuse of discretion AND warrant") == "abuse discretion AND warrant"
    assert index_query("NEAR(abuse of discretion, 5)") == "NEAR ( abuse discretion , 5 )"
    assert index_query('the* "in re"') == 'the* "re"'                     # a prefix matches other words: kept
    assert index_query('"abuse of discretion') == '"abuse of discretion'    # unterminated: FTS5 says so
    assert index_query('"x ()" the abuse') == '"x ()" abuse'                # parentheses inside a phrase
    assert index_query("NEAR the") == "NEAR"                                 # NEAR without "(" is a word
    assert index_query('warrant "of abuse" *') == 'warrant "abuse"*'        # FTS5 allows a space before *
    assert index_query("{case_title description} : \"commonwealth of kentucky\"") == (
        '{ case_title description } : "commonwealth kentucky"')
    for query, says in (("the", "only common words"), ("of AND the", "only common words"),
                        ("warrant NOT the", "the is a common word"), ("case_title : of", "only common words"),
                        ("warrant AND case_title : of", "of is a common word"), ("(the) warrant", "a group"),
                        ("NEAR(of the, 5) warrant", "a group")):
        with pytest.raises(SearchQueryError, match=says):
            index_query(query)


def test_a_phrase_with_common_words_finds_and_marks_the_text_whichever_common_words_stand_between(archive):
    run_index(archive)
    for query in ('"ineffective assistance of counsel"', '"ineffective assistance the counsel"',
                  '"ineffective assistance counsel"'):
        hits = search_archive(archive.WORKSPACE, query)
        assert [hit["document_id"] for hit in hits] == [document_id(3)], query
        assert "[Ineffective assistance of counsel]" in hits[0]["snippet"], query
    words = search_archive(archive.WORKSPACE, "ineffective assistance of counsel")    # three words, each marked
    assert [hit["document_id"] for hit in words] == [document_id(3)]
    assert "[assistance] of [counsel]" in words[0]["snippet"]
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, '"holdings vs city the louisville"')] == [
        document_id(4)]                                  # the title's "VS. CITY OF LOUISVILLE"
    sdb = SearchDatabase.open(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, readonly=True)
    try:
        sdb.conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab('main', 'docs_fts', 'row')")
        terms = {row[0] for row in sdb.conn.execute("SELECT term FROM temp.terms")}
    finally:
        sdb.close()
    assert {"suppress", "counsel", "louisvil"} <= terms and not terms & {"the", "of", "a", "and"}
    with pytest.raises(SearchQueryError, match="only common words"):
        search_archive(archive.WORKSPACE, '"of the"')
    for spaced, joined in (("suppression of *", "suppression of*"), ('"assistance of" *', '"assistance of"*'),
                           ('counsel "the" *', 'counsel "the"*')):      # a star after a space: the same prefix
        assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, spaced)] == [
            hit["document_id"] for hit in search_archive(archive.WORKSPACE, joined)], spaced


def test_index_words_leaves_exactly_the_words_that_are_not_common_as_fts5_splits_them():
    # unicode61's word characters: letters, digits, nonspacing marks, private use; "_" and a spacing
    # mark (U+0903) or an enclosing one (U+20DD) split words. index_words must agree with INDEX_WORD.
    rng = random.Random(7)
    alphabet = list("theofaandisx_ -.,1É") + ["\u0303", "\u0301", "\ue000", "\u0903", "\u20dd"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert INDEX_WORD.findall(index_words(text)) == [
            word for word in INDEX_WORD.findall(text) if word.lower() not in SEARCH_COMMON_WORDS], repr(text)


def test_a_word_with_a_decomposed_accent_is_one_word_as_fts5_reads_it(tmp_path):
    # Text from a PDF may spell "Peña" as "Pen" + U+0303 + "a": unicode61 reads one word (it folds the
    # mark away), so the common-word filter must not take its "a" for a word.
    nfd = unicodedata.normalize("NFD", "Álvarez and Ángel Peña testified.")
    cfg = build_archive(tmp_path, (("2019-CA-0012", "SMITH VS. COMMONWEALTH", "OPINION AFFIRMING",
                                     "2019-05-02T00:00:00.000-04:00", nfd),))
    run_index(cfg)
    for query in ("Álvarez", "Ángel", "Peña", "alvarez", "pena", nfd.split()[-2]):
        assert [hit["document_id"] for hit in search_archive(cfg.WORKSPACE, query)] == [document_id(0)], query


def test_index_covers_every_extracted_text_and_ranks_with_bm25(archive):
    result = run_index(archive)
    assert result.indexed == len(DOCUMENTS) and result.total == len(DOCUMENTS) and result.pushed
    hits = search_archive(archive.WORKSPACE, "suppression")
    # Three mentions in a short text outrank one in a longer text.
    assert [hit["document_id"] for hit in hits] == [document_id(3), document_id(0)]
    assert "[Suppression]" in hits[0]["snippet"] and hits[0]["score"] < hits[1]["score"]
    # A word in the title outranks the same word in the text (title weight 10).
    warrant = search_archive(archive.WORKSPACE, "warrant")
    assert warrant[0]["document_id"] == document_id(4) and warrant[0]["case_number"] == "2021-CA-0450"
    # Porter stemming: "suspend" finds "suspended"; phrases and NEAR work.
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suspend")] == [document_id(2)]
    assert len(search_archive(archive.WORKSPACE, '"search warrant"')) == 1
    assert len(search_archive(archive.WORKSPACE, "NEAR(ineffective counsel, 3)")) == 1
    assert index_coverage(archive.WORKSPACE).behind == 0


def test_filters_by_court_year_and_type(archive):
    run_index(archive)
    assert {hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression OR warrant",
                                                         court="SC")} == {document_id(3)}
    assert {hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression OR warrant",
                                                         year=2019)} == {document_id(0)}
    assert {hit["document_id"] for hit in search_archive(archive.WORKSPACE, "vs", kind="order")} == {
        document_id(1)}
    assert {hit["document_id"] for hit in search_archive(archive.WORKSPACE, "warrant", kind="opinion",
                                                         court="Appeals", year=2021)} == {document_id(4)}
    assert len(search_archive(archive.WORKSPACE, "vs", limit=2)) == 2


def test_filters_applied_by_fts5_select_what_the_docs_columns_say_and_leave_the_scores_unchanged(archive):
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():
            db.conn.execute("INSERT INTO derived (document_id, method, version, kind, publication_status, "
                            "derived_at) VALUES (?, 'test', 1, 'order', 'TO BE PUBLISHED', '2026-01-01')",
                            (document_id(2),))
    finally:
        db.close()
    run_index(archive)
    sdb = SearchDatabase.open(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, readonly=True)
    try:
        every = {hit["doc_rowid"]: hit["score"] for hit in sdb.search("vs", limit=10)}
        assert len(every) == len(DOCUMENTS)
        filters = [{"court_code": "SC"}, {"court_code": "CA"}, {"court_code": "XX"}, {"court_like": "Supreme"},
                   {"publication_status": "TO BE PUBLISHED"}, {"kind": "OPINIO"}, {"kind": "Order", "court_code": "SC"}]
        filters += [{"kind": kind} for kind in SEARCH_KINDS]
        for chosen in filters:
            source, params = _search_source(None, **chosen)     # the docs columns' answer
            expected = {row[0] for row in sdb.conn.execute(source, params)}
            hits = sdb.search("vs", limit=10, **chosen)
            assert {hit["doc_rowid"] for hit in hits} == expected, chosen
            assert all(hit["score"] == every[hit["doc_rowid"]] for hit in hits), chosen
            assert sdb.match_count("vs", **chosen) == len(expected)
        assert len(sdb.search("vs", kind="order", limit=10)) == 2     # the derived order and the ORDER DENYING
    finally:
        sdb.close()


def test_a_filtered_search_is_driven_by_the_full_text_index_not_by_docs(archive):
    run_index(archive)
    sdb = SearchDatabase.open(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, readonly=True)
    try:
        for chosen in ({"court_like": "Supreme"}, {"kind": "OPINION AFF"}, {"court_code": "SC"}):
            source, params = _search_source("suppression", **chosen)
            # As match_count counts, and as search ranks every match: driven from docs' court index,
            # SQLite would run the FTS5 query once for each document of the court.
            for statement in (f"SELECT COUNT(*) FROM ({source})", f"SELECT * FROM ({source}) ORDER BY score"):
                plan = [row[3] for row in sdb.conn.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
                assert "docs_fts" in next(step for step in plan if step.startswith(("SCAN", "SEARCH"))), (chosen, plan)
    finally:
        sdb.close()


def test_a_second_run_indexes_only_what_changed(archive):
    run_index(archive)
    again = run_index(archive)
    assert (again.indexed, again.refreshed, again.removed, again.pushed) == (0, 0, 0, False)

    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    store = LocalStore(archive.STORE)
    try:
        add_text(archive, db, store, 1, "A new text: rehearing granted on reconsideration.", revision=1)
        with db.transaction():
            # The court's name only: not in the full-text index, so its text is not read again.
            db.conn.execute("UPDATE documents SET court = 'Court of Appeals of Kentucky' WHERE document_id = ?",
                            (document_id(0),))
            # A new title: indexed again with the same text.
            db.conn.execute("UPDATE documents SET case_title = 'SMYTHE VS. COMMONWEALTH' WHERE document_id = ?",
                            (document_id(3),))
            db.conn.execute("UPDATE documents SET status = 'downloaded' WHERE document_id = ?", (document_id(2),))
    finally:
        db.close()
    sha0 = Database.open(Path(archive.WORKSPACE) / DB_FILENAME).get_document(document_id(0))["sha256"]
    text0 = (Path(archive.WORKSPACE) / "text" / f"{sha0}.txt").read_bytes()
    (Path(archive.WORKSPACE) / "text" / f"{sha0}.txt").unlink()     # the field change must not need it
    (Path(archive.STORE) / "text" / f"{sha0}.txt").unlink()
    changed = run_index(archive)
    assert (changed.indexed, changed.refreshed, changed.removed, changed.missing_texts) == (2, 1, 1, 0)
    assert changed.pushed and changed.total == len(DOCUMENTS) - 1
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, "reconsideration")] == [document_id(1)]
    assert search_archive(archive.WORKSPACE, "petition") == []          # the old text is gone
    assert search_archive(archive.WORKSPACE, "smythe")[0]["document_id"] == document_id(3)
    assert search_archive(archive.WORKSPACE, "brown") == []             # and the old title
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression", court="of Kentucky")] == [
        document_id(0)]
    assert search_archive(archive.WORKSPACE, "suspended") == []         # no longer extracted
    assert index_coverage(archive.WORKSPACE).behind == 0
    (Path(archive.WORKSPACE) / "text" / f"{sha0}.txt").write_bytes(text0)
    assert_index_sound(archive)


def test_the_index_keeps_no_copy_of_the_texts_and_reads_snippets_from_them(tmp_path, archive, capsys):
    run_index(archive)
    index_bytes = (Path(archive.WORKSPACE) / SEARCH_DB_FILENAME).read_bytes()
    for _, _, _, _, text in DOCUMENTS:
        assert text.split("\n")[0][:40].encode() not in index_bytes
    assert "[Suppression]" in search_archive(archive.WORKSPACE, "suppression")[0]["snippet"]
    # A fresh runtime restored the index but not the texts: the hits come, their snippets with a store.
    fresh = make_config(tmp_path / "fresh", KY_STORE=archive.STORE)
    Path(fresh.WORKSPACE).mkdir(parents=True)
    shutil.copy(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, Path(fresh.WORKSPACE) / SEARCH_DB_FILENAME)
    bare = search_archive(fresh.WORKSPACE, "suppression")
    assert [hit["document_id"] for hit in bare] == [document_id(3), document_id(0)]
    assert not any(hit["snippet"] for hit in bare)
    fetched = search_archive(fresh.WORKSPACE, "suppression", store=LocalStore(archive.STORE))
    assert "[Suppression]" in fetched[0]["snippet"] and "[suppression]" in fetched[1]["snippet"]
    # The command line's search reads them from the store its workspace names, as show and export do.
    shutil.rmtree(Path(fresh.WORKSPACE) / "text")
    shutil.copy(Path(archive.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
    assert main(["search", "suppression", "--json", "--workspace", fresh.WORKSPACE, "--store", archive.STORE]) == 0
    assert "[Suppression]" in json.loads(capsys.readouterr().out)["hits"][0]["snippet"]


def test_a_text_that_cannot_be_read_again_keeps_its_document_indexed_as_it_was(archive):
    run_index(archive)
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        sha = db.get_document(document_id(2))["sha256"]
        with db.transaction():
            db.conn.execute("UPDATE documents SET status = 'downloaded', updated_at = 'later' WHERE document_id = ?",
                            (document_id(2),))
    finally:
        db.close()
    text = (Path(archive.WORKSPACE) / "text" / f"{sha}.txt").read_bytes()
    (Path(archive.WORKSPACE) / "text" / f"{sha}.txt").unlink()
    (Path(archive.STORE) / "text" / f"{sha}.txt").unlink()
    result = run_index(archive)
    # Its tokens can only be removed by reading them back: it stays, counted, and the index sound.
    assert (result.removed, result.missing_texts) == (0, 1) and index_coverage(archive.WORKSPACE).extra == 1
    (Path(archive.STORE) / "text" / f"{sha}.txt").write_bytes(text)
    result = run_index(archive)
    assert (result.removed, result.missing_texts) == (1, 0) and index_coverage(archive.WORKSPACE).behind == 0
    assert search_archive(archive.WORKSPACE, "suspended") == []
    assert_index_sound(archive)


def test_optional_tables_fill_case_type_entry_type_publication_and_judge(archive):
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        row = db.get_document(document_id(3))
        case_id, entry_id = row["case_id"], row["docket_entry_id"]
        with db.transaction():
            # The case walk's tables (v3) and derive's (v5), as those stages fill them.
            db.conn.execute("INSERT INTO cases (case_id, case_type) VALUES (?, 'Matter of Right Appeal')",
                            (case_id,))
            db.conn.execute("INSERT INTO docket_entries (docket_entry_id, entry_type) VALUES (?, 'Opinion')",
                            (entry_id,))
            db.conn.execute("INSERT INTO derived (document_id, method, version, kind, publication_status, judge, "
                            "derived_at) VALUES (?, 'test', 1, 'opinion', 'TO BE PUBLISHED', 'VANMETER', '2026-01-01')",
                            (document_id(3),))
    finally:
        db.close()
    run_index(archive)
    sdb = SearchDatabase.open(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, readonly=True)
    try:
        row = sdb.get(document_id(3))
        assert (row["case_type"], row["docket_entry_type"], row["publication_status"], row["judge"]) == (
            "Matter of Right Appeal", "Opinion", "TO BE PUBLISHED", "VANMETER")
        assert sdb.get(document_id(0))["judge"] is None
        assert ("TO BE PUBLISHED", 1) in sdb.facet("publication_status")
        assert sdb.get(document_id(3))["kind"] == "opinion" and ("opinion", 1) in sdb.facet("kind")
    finally:
        sdb.close()
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():   # a better derivation later: the index follows, without re-reading texts
            db.conn.execute("UPDATE derived SET judge = 'MINTON'")
    finally:
        db.close()
    assert run_index(archive).refreshed == 1
    assert search_archive(archive.WORKSPACE, "suppression", court="SC")[0]["judge"] == "MINTON"
    # A derived kind wins over the description's words; without one, the description's prefix decides.
    assert {hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression", kind="OPINION")} == {
        document_id(0), document_id(3)}
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():
            db.conn.execute("UPDATE derived SET kind = 'order'")   # "OPINION REVERSING ..." read as an order
    finally:
        db.close()
    run_index(archive)
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression", kind="opinion")] == [
        document_id(0)]
    assert [hit["document_id"] for hit in search_archive(archive.WORKSPACE, "suppression", kind="order")] == [
        document_id(3)]
    assert_index_sound(archive)     # the former kind's filter token went out with it


# ---------------------------------------------------- restore, bad input


def test_a_fresh_runtime_restores_the_index_from_the_store(tmp_path, archive):
    run_index(archive)
    fresh = make_config(tmp_path / "fresh", KY_STORE=archive.STORE)
    Path(fresh.WORKSPACE).mkdir(parents=True)
    shutil.copy(Path(archive.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
    restored = run_index(fresh)
    assert restored.restored_from_store and restored.indexed == 0 and restored.total == len(DOCUMENTS)
    assert len(search_archive(fresh.WORKSPACE, "suppression")) == 2


def test_without_a_store_copy_the_index_is_built_from_the_stores_texts(tmp_path, archive):
    fresh = make_config(tmp_path / "fresh", KY_STORE=archive.STORE)
    Path(fresh.WORKSPACE).mkdir(parents=True)
    shutil.copy(Path(archive.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
    built = run_index(fresh)        # the workspace has no texts: each is fetched from the store
    assert not built.restored_from_store and built.indexed == len(DOCUMENTS) and built.missing_texts == 0


def test_a_text_nobody_holds_is_counted_and_left_for_later(tmp_path):
    cfg = build_archive(tmp_path, upload=False)
    victim = next(Path(cfg.WORKSPACE, "text").glob("*.txt"))
    victim.unlink()
    result = run_index(cfg)
    assert result.missing_texts == 1 and result.indexed == len(DOCUMENTS) - 1
    assert index_coverage(cfg.WORKSPACE).missing == 1


def test_a_damaged_index_is_set_aside_and_rebuilt(archive):
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    path.write_bytes(b"this is not a database at all")
    result = run_index(archive)
    assert result.rebuilt and result.indexed == len(DOCUMENTS)
    assert (path.parent / f"{SEARCH_DB_FILENAME}.damaged-1").read_bytes() == b"this is not a database at all"


@pytest.mark.parametrize("key, value, says", [
    ("search_schema_version", "99", "version 99, newer"),
    # kycourt_words' word breaks under other Unicode tables could differ at deletes from the inserts'
    ("search_unicode_version", "1.0.0", "Unicode 1.0.0")])
def test_an_index_another_version_made_is_refused_by_readers_and_rebuilt_by_the_stage(archive, key, value, says):
    run_index(archive)
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    conn = sqlite3.connect(path)
    conn.execute("UPDATE kv SET value = ? WHERE key = ?", (value, key))
    conn.commit()
    conn.close()
    with pytest.raises(IndexMissingError, match=says):
        search_archive(archive.WORKSPACE, "suppression")
    assert run_index(archive).rebuilt
    assert len(search_archive(archive.WORKSPACE, "suppression")) == 2


def test_an_index_of_an_older_version_is_built_again_not_kept(archive):
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    conn = sqlite3.connect(path)     # version 2 kept a copy of every text in the index
    conn.executescript("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT); "
                       "INSERT INTO kv VALUES ('search_schema_version', '2'); "
                       "CREATE VIRTUAL TABLE docs_fts USING fts5(case_title, description, body);")
    conn.close()
    with pytest.raises(IndexMissingError, match="version 2, older"):
        search_archive(archive.WORKSPACE, "suppression")
    result = run_index(archive)
    assert result.rebuilt and result.indexed == len(DOCUMENTS)
    assert not list(path.parent.glob(f"{SEARCH_DB_FILENAME}.damaged-*"))
    assert len(search_archive(archive.WORKSPACE, "suppression")) == 2


def test_an_index_from_before_the_schema_is_migrated(archive):
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT)")   # version 0: no tables yet
    conn.commit()
    conn.close()
    with pytest.raises(IndexMissingError, match="older"):
        search_archive(archive.WORKSPACE, "suppression")
    result = run_index(archive)
    assert not result.rebuilt and result.indexed == len(DOCUMENTS)


@pytest.mark.parametrize("query", ['"unterminated', "suppression AND", "(warrant", "2019-CA-0012", "col:x"])
def test_a_malformed_query_is_a_search_query_error(archive, query):
    run_index(archive)
    with pytest.raises(SearchQueryError):
        search_archive(archive.WORKSPACE, query)


def test_a_missing_index_says_how_to_build_it(archive):
    with pytest.raises(IndexMissingError, match="kycourt-pipeline index"):
        search_archive(archive.WORKSPACE, "anything")


# ------------------------------------------------ verify, state snapshot


def index_then_add_a_later_text(cfg):
    """The index is built, then document 1 gets a new text it does not cover."""
    run_index(cfg)
    db = Database.open(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        add_text(cfg, db, LocalStore(cfg.STORE), 1, "A later text.", revision=1)
    finally:
        db.close()


def verify_archive(cfg):
    ctx = open_context(cfg)
    try:
        return verify(ctx)
    finally:
        ctx.close()


def test_verify_requires_the_index_to_cover_every_extracted_document(archive):
    index_then_add_a_later_text(archive)
    result = verify_archive(archive)
    assert not result.passed and result.index.outdated == 1
    assert any(reason.startswith("search index does not cover the archive") for reason in result.reasons)
    assert "search index: 5 documents indexed of 5 extracted; behind by 1" in format_verify_report(result)
    run_index(archive)
    result = verify_archive(archive)
    assert result.passed, result.reasons


def test_without_the_index_phase_verify_only_reports_the_index(archive):
    cfg = archive.replace(PHASES=("download", "extract"))
    index_then_add_a_later_text(cfg)
    result = verify_archive(cfg)
    assert result.passed and result.index.behind == 1


def test_the_index_does_not_grow_the_state_snapshot(tmp_path, archive):
    before = checkpoint(Path(archive.WORKSPACE) / DB_FILENAME, tmp_path / "before.sqlite")
    run_index(archive)
    after = checkpoint(Path(archive.WORKSPACE) / DB_FILENAME, tmp_path / "after.sqlite")
    assert os.path.getsize(after["path"]) == os.path.getsize(before["path"])
    assert (Path(archive.STORE) / SEARCH_DB_FILENAME).is_file()


def test_readonly_open_of_a_missing_file_is_an_integrity_error(tmp_path):
    with pytest.raises(IntegrityError):
        SearchDatabase.open(tmp_path / "nothing.sqlite", readonly=True)


def test_a_new_year_or_court_moves_the_document_to_its_rowid_range_keeping_its_text(archive):
    run_index(archive)
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():   # the court corrected a case number: another year and court
            db.conn.execute("UPDATE documents SET case_number = '2022-SC-0999', court = 'Kentucky Supreme Court' "
                            "WHERE document_id = ?", (document_id(0),))
    finally:
        db.close()
    for path in Path(archive.WORKSPACE, "text").glob("*.txt"):
        path.unlink()      # a fresh runtime: the store has the texts
    moved = run_index(archive)
    assert (moved.indexed, moved.refreshed, moved.missing_texts) == (1, 0, 0)
    assert search_archive(archive.WORKSPACE, "suppression", year=2019) == []
    hits = search_archive(archive.WORKSPACE, "suppression", year=2022, court="SC")
    assert [hit["document_id"] for hit in hits] == [document_id(0)] and "[suppression]" in hits[0]["snippet"]
    assert search_archive(archive.WORKSPACE, "suppression", year=2022, court="CA") == []
    assert index_coverage(archive.WORKSPACE).behind == 0


def test_a_query_matching_more_than_the_cap_is_ranked_among_the_most_recent_matches(archive):
    run_index(archive)
    sdb = SearchDatabase.open(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, readonly=True)
    try:
        every = sdb.search("vs", rank_cap=None)
        capped = sdb.search("vs", rank_cap=2)
        narrow = sdb.search("suppression", rank_cap=2)
    finally:
        sdb.close()
    assert len(every) == 5 and not every[0]["rank_capped"] and every[0]["ranked_among"] == 5
    # The two most recent (2021) documents only, and the hits say so.
    assert {hit["document_id"] for hit in capped} == {document_id(3), document_id(4)}
    assert all(hit["rank_capped"] and hit["ranked_among"] == 2 for hit in capped)
    assert len(narrow) == 2 and narrow[0]["rank_capped"]        # exactly the cap: said to be capped


def test_index_behind_is_none_when_level_and_the_coverage_when_not(archive):
    run_index(archive)
    assert index_behind(archive.WORKSPACE) is None
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():
            db.conn.execute("UPDATE documents SET status = 'downloaded', updated_at = 'later' WHERE document_id = ?",
                            (document_id(1),))
    finally:
        db.close()
    behind = index_behind(archive.WORKSPACE)
    assert behind is not None and behind.extra == 1
    run_index(archive)
    assert index_behind(archive.WORKSPACE) is None
