"""The index stage and the search: incremental build, filters, ranking, snippets, restore, verify."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import unicodedata
from pathlib import Path

import pytest
from archive_fixture import DOCUMENTS, add_text, build_archive, document_id, make_config, write_earlier_search_tar
from support import CountingStore

from notebook_builder.cells.c00_config import IntegrityError, StoreError
from notebook_builder.cells.c06_layout import (DB_FILENAME, SEARCH_DB_FILENAME, SEARCH_INDEX_DIRNAME,
                                               SEARCH_PACK_FILENAME)
from notebook_builder.cells.c10_database import Database
from notebook_builder.cells.c17_snapshots import checkpoint
from notebook_builder.cells.c18_query_syntax import parse_query
from notebook_builder.cells.c18_search_index import (IndexMissingError, SearchIndex, commit_file_names, index_behind,
                                                     index_coverage, search_kinds)
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c28_court_words import system_words
from notebook_builder.cells.c35_context import open_context
from notebook_builder.cells.c87_index import (UnmatchedFilter, catalog_packs, index, make_snippet,
                                              plan_index, push_search_index, query_marks, restore_search_index,
                                              search_archive, snippet_html, text_places, year_of)
from notebook_builder.cells.c90_verify import format_verify_report, verify
from notebook_builder.cli import main
from notebook_builder.simdrive import SimDrive


def run_index(cfg):
    ctx = open_context(cfg)
    try:
        return index(ctx)
    finally:
        ctx.close()


def found(cfg, query, **filters) -> list[str]:
    return [hit["document_id"] for hit in search_archive(cfg.WORKSPACE, query, limit=50, **filters).hits]


@pytest.fixture
def archive(tmp_path):
    return build_archive(tmp_path)


# ------------------------------------------------------------- decisions


def test_court_and_year_come_from_the_case_number_then_the_court_name_and_date():
    kentucky = system_words("kentucky")
    assert kentucky.code_of("2019-CA-0012", None) == "CA"
    assert kentucky.code_of("2024 CA ADMIN - NON-CONFIDENTIAL OPINION - 002", None) == "CA"
    assert kentucky.code_of(None, "Kentucky Supreme Court") == "SC"
    assert kentucky.code_of("ADMIN 7", "somewhere") is None
    assert year_of("2019-CA-0012", "2020-01-01") == 2019
    assert year_of("ADMIN", "2020-01-01T00:00:00") == 2020
    assert year_of(None, None) is None


def test_court_filter_accepts_codes_and_names():
    court_filter = system_words("kentucky").court_filter
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
    # (text_name, text_key, source_key): b's fields changed, c's text, d is new.
    indexed = {"a": ("x", "ta", "sa"), "b": ("x", "tb", "old"), "c": ("x", "old", "sc"), "gone": ("x", "t", "s")}
    assert plan_index(wanted, indexed) == (["c", "d"], ["b"], ["gone"])


def test_a_snippet_marks_what_the_query_matches_not_what_it_leaves_out():
    marks = query_marks(parse_query('"Search warrant" suppress* -murder (theft OR burglary) the 2019-CA-0012'))
    assert marks == [(("search", "exact"), ("warrant", "exact")), (("suppress", "prefix"),), (("theft", "stem"),),
                     (("burglary", "stem"),), (("2019", "exact"), ("ca", "exact"), ("0012", "exact"))]
    assert query_marks(parse_query("the")) == [(("the", "stem"),)]        # a common word alone is marked


def test_a_snippet_is_the_densest_stretch_of_the_querys_words_with_their_stemmed_forms_marked():
    marks = query_marks(parse_query('negligence OR "search warrant" OR suppress*'))
    text = ("The negligence claim is addressed first. " + "Unrelated words about the weather. " * 10
            + "Then the search  warrant was negligently executed and the evidence suppressed. "
            + "Unrelated words follow here; the officer neglected nothing and searched, warrants in hand. " * 10)
    snippet, spans = make_snippet(text, text_places(text, marks))
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert [snippet[start:end] for start, end in spans] == ["search warrant", "negligently",
                                                            "suppressed"]
    assert "[search warrant] was [negligently] executed and the evidence [suppressed]" in snippet
    tail = text[-200:]
    assert "[neglected]" not in make_snippet(tail, text_places(tail, marks))[0]      # another stem
    assert "[searched]" not in make_snippet(tail, text_places(tail, marks))[0]       # a phrase is exact
    assert make_snippet("Nothing of the query here at all.", []) == ("Nothing of the query here at all.", [])
    assert make_snippet(" ".join(["word"] * 100), [])[0].endswith(" …")


def test_a_name_with_an_apostrophe_is_marked_however_far_into_the_text_it_stands():
    # "O'Brien" is the phrase "o brien": its first word is a letter the text holds hundreds of times.
    text = "Of the record, on to the opinion. " * 60 + "Judge O’Brien and Mr. O'Brien agreed."
    places = text_places(text, query_marks(parse_query("O'Brien")))
    assert [text[start:end] for start, end, _ in places] == ["O’Brien", "O'Brien"]


def test_a_phrase_is_marked_with_its_common_words_and_accents_folded():
    marks = query_marks(parse_query('"abuse of discretion" pena'))
    text = "No abuse the discretion here; an abuse of  discretion there, said Peña."
    places = text_places(text, marks)
    assert [text[start:end] for start, end, _ in places] == ["abuse of  discretion", "Peña"]


def test_a_bracket_the_text_has_itself_is_no_mark_in_the_snippet_nor_on_the_page():
    text = 'The court found the search "was [sic] unlawful" and \x02[t]he evidence\x03 suppressed.'
    at = text.index("search")
    snippet, marks = make_snippet(text, [(at, at + len("search"), 0)])
    assert snippet == 'The court found the [search] "was [sic] unlawful" and [t]he evidence suppressed.'
    assert [snippet[start:end] for start, end in marks] == ["search"]
    assert snippet_html(snippet, marks) == (
        "The court found the <mark>search</mark> &quot;was [sic] unlawful&quot; and [t]he evidence suppressed.")


# ----------------------------------------------------------------- build


def test_a_phrase_with_common_words_matches_exactly_and_is_marked_whole(archive):
    run_index(archive)
    hits = search_archive(archive.WORKSPACE, '"ineffective assistance of counsel"').hits
    assert [hit["document_id"] for hit in hits] == [document_id(3)]
    assert "[Ineffective assistance of counsel]" in hits[0]["snippet"]
    for other in ('"ineffective assistance the counsel"', '"ineffective assistance counsel"', '"of counsel at the"'
                  ' "x"'):
        assert found(archive, other) == [], other
    words = search_archive(archive.WORKSPACE, "ineffective assistance of counsel").hits    # each word marked
    assert [hit["document_id"] for hit in words] == [document_id(3)]
    assert "[Ineffective] [assistance] of [counsel]" in words[0]["snippet"]
    assert found(archive, '"holdings vs city of louisville"') == [document_id(4)]          # the title
    assert found(archive, '"of counsel at the"') == [document_id(3)]


def test_a_word_with_a_decomposed_accent_is_one_word(tmp_path):
    # Text from a PDF may spell "Peña" as "Pen" + U+0303 + "a": one word, as the composed spelling.
    nfd = unicodedata.normalize("NFD", "Álvarez and Ángel Peña testified.")
    cfg = build_archive(tmp_path, (("2019-CA-0012", "SMITH VS. COMMONWEALTH", "OPINION AFFIRMING",
                                     "2019-05-02T00:00:00.000-04:00", nfd),))
    run_index(cfg)
    for query in ("Álvarez", "Ángel", "Peña", "alvarez", "pena", nfd.split()[-2], '"angel pena"'):
        assert found(cfg, query) == [document_id(0)], query
    assert "[Peña]" in search_archive(cfg.WORKSPACE, "pena").hits[0]["snippet"]


# ----------------------------------------------------------------- build


def test_index_covers_every_extracted_text_and_ranks_every_match(archive):
    result = run_index(archive)
    assert result.indexed == len(DOCUMENTS) and result.total == len(DOCUMENTS) and result.pushed
    hits = search_archive(archive.WORKSPACE, "suppression").hits
    # Three mentions in a short text outrank one in a longer text; higher scores first.
    assert [hit["document_id"] for hit in hits] == [document_id(3), document_id(0)]
    assert "[Suppression]" in hits[0]["snippet"] and hits[0]["score"] > hits[1]["score"]
    # A word in the title outranks the same word in the text.
    warrant = search_archive(archive.WORKSPACE, "warrant").hits
    assert warrant[0]["document_id"] == document_id(4) and warrant[0]["case_number"] == "2021-CA-0450"
    # Stems: "suspend" finds "suspended"; quoted, only the word itself; NEAR.
    assert found(archive, "suspend") == [document_id(2)] and found(archive, '"suspend"') == []
    assert found(archive, '"search warrant"') == [document_id(0)]
    assert found(archive, "NEAR(ineffective counsel, 3)") == [document_id(3)]
    assert index_coverage(archive.WORKSPACE).behind == 0


def test_case_numbers_in_every_form_and_captions_bring_their_case_first(archive):
    run_index(archive)
    for typed in ("2019-CA-0012", "2019-CA-000012-MR", "2019 CA 12", "19-CA-12", "2019CA0012"):
        result = search_archive(archive.WORKSPACE, typed)
        assert {hit["document_id"] for hit in result.hits[:2]} == {document_id(0), document_id(1)}, typed
        assert "2019-CA-0012" in result.read_as
    assert found(archive, "Smith v. Commonwealth")[:2] in ([document_id(0), document_id(1)],
                                                          [document_id(1), document_id(0)])
    assert found(archive, "JONES VS. KENTUCKY BAR")[0] == document_id(2)


def test_filters_by_court_year_type_and_filed_day(archive):
    run_index(archive)
    assert set(found(archive, "suppression OR warrant", court="SC")) == {document_id(3)}
    assert set(found(archive, "suppression OR warrant", year=2019)) == {document_id(0)}
    assert set(found(archive, "vs", kind="order")) == {document_id(1)}
    assert set(found(archive, "warrant", kind="opinion", court="Appeals", year=2021)) == {document_id(4)}
    assert len(search_archive(archive.WORKSPACE, "vs", limit=2).hits) == 2
    # The filed day is Kentucky's, both ends inclusive.
    assert set(found(archive, "vs", after="2019-05-02", before="2020-03-09")) == {
        document_id(0), document_id(1), document_id(2)}
    assert set(found(archive, "vs", after="2021-01-01")) == {document_id(3), document_id(4)}
    assert found(archive, "vs", before="2019-05-01") == []


def test_a_filter_no_document_answers_is_named_with_the_values_the_archive_holds(archive, capsys):
    run_index(archive)
    with pytest.raises(UnmatchedFilter, match=r"court 'XX' matches no document in the archive \(it holds CA \d+, SC \d+\)"):
        search_archive(archive.WORKSPACE, "vs", court="XX")
    with pytest.raises(UnmatchedFilter, match=r"type 'nonsense' matches no document .*opinion \d+.*order \d+"):
        search_archive(archive.WORKSPACE, "vs", kind="nonsense")
    with pytest.raises(UnmatchedFilter, match=r"year 1999 matches no document .*2019 \d+"):
        search_archive(archive.WORKSPACE, "", year=1999)
    # Filters that each match something, but not together, or a query no document holds: no hits, no error.
    assert found(archive, "vs", court="SC", year=2019) == []
    assert found(archive, "nosuchwordanywhere", court="SC") == []
    assert main(["search", "vs", "--court", "XX", "--workspace", str(archive.WORKSPACE)]) == 2
    assert "court 'XX' matches no document" in capsys.readouterr().err


def test_sorts_pages_and_an_empty_query(archive):
    run_index(archive)
    newest = search_archive(archive.WORKSPACE, "", court="SC")
    assert newest.sort == "newest" and [hit["document_id"] for hit in newest.hits] == [document_id(3), document_id(2)]
    oldest = [hit["filed_date"] for hit in search_archive(archive.WORKSPACE, "vs", sort="oldest").hits]
    assert oldest == sorted(oldest) and len(oldest) == len(DOCUMENTS)
    pages = [search_archive(archive.WORKSPACE, "vs", page=page, limit=2) for page in (1, 2, 3, 4)]
    assert [len(page.hits) for page in pages] == [2, 2, 1, 0] and {page.total for page in pages} == {5}
    assert len({hit["document_id"] for page in pages for hit in page.hits}) == 5
    assert (pages[1].first, pages[1].last, pages[1].pages) == (3, 4, 3)
    as_json = pages[1].as_json()
    assert (as_json["page"], as_json["total"], as_json["count"]) == (2, 5, 2)
    assert {"document_id", "case_number", "case_title", "court_code", "kind", "filed_date", "snippet",
            "snippet_marks", "score"} <= set(as_json["hits"][0])


def test_exclusions_and_alternatives(archive):
    run_index(archive)
    assert found(archive, "suppression -warrant") == [document_id(3)]
    assert found(archive, "suppression NOT warrant") == [document_id(3)]
    assert set(found(archive, "rehearing OR zoning")) == {document_id(1), document_id(4)}
    assert found(archive, 'warrant -"search warrant"') == [document_id(4)]


def test_a_second_run_indexes_only_what_changed(archive):
    run_index(archive)
    again = run_index(archive)
    assert (again.indexed, again.refreshed, again.removed, again.pushed) == (0, 0, 0, False)

    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    store = LocalStore(archive.STORE)
    try:
        add_text(archive, db, store, 1, "A new text: rehearing granted on reconsideration.", revision=1)
        with db.transaction():
            db.conn.execute("UPDATE documents SET court = 'Court of Appeals of Kentucky' WHERE document_id = ?",
                            (document_id(0),))
            db.conn.execute("UPDATE documents SET case_title = 'SMYTHE VS. COMMONWEALTH' WHERE document_id = ?",
                            (document_id(3),))
            db.conn.execute("UPDATE documents SET status = 'downloaded' WHERE document_id = ?", (document_id(2),))
    finally:
        db.close()
    changed = run_index(archive)
    assert (changed.indexed, changed.refreshed, changed.removed, changed.missing_texts) == (1, 2, 1, 0)
    assert changed.pushed and changed.total == len(DOCUMENTS) - 1
    assert found(archive, "reconsideration") == [document_id(1)]
    assert found(archive, "petition") == []               # the old text is gone
    assert found(archive, "smythe") == [document_id(3)]
    assert found(archive, "brown") == []                  # and the old title
    assert found(archive, "suppression", court="of Kentucky") == [document_id(0)]
    assert found(archive, "suspended") == []              # no longer extracted
    assert index_coverage(archive.WORKSPACE).behind == 0


def test_the_index_keeps_no_copy_of_the_texts_and_reads_snippets_from_them(tmp_path, archive, capsys):
    run_index(archive)
    stored = b"".join(path.read_bytes() for path in (Path(archive.WORKSPACE) / SEARCH_INDEX_DIRNAME).iterdir())
    stored += (Path(archive.WORKSPACE) / SEARCH_DB_FILENAME).read_bytes()
    for _, _, _, _, text in DOCUMENTS:
        assert text.split("\n")[0][:40].encode() not in stored
    assert "[Suppression]" in search_archive(archive.WORKSPACE, "suppression").hits[0]["snippet"]
    # A fresh runtime restored the index but not the texts: the hits come, their snippets with a store.
    fresh = make_config(tmp_path / "fresh", KY_STORE=archive.STORE)
    Path(fresh.WORKSPACE).mkdir(parents=True)
    ctx = open_context(fresh)
    try:
        assert restore_search_index(ctx)
    finally:
        ctx.close()
    bare = search_archive(fresh.WORKSPACE, "suppression").hits
    assert [hit["document_id"] for hit in bare] == [document_id(3), document_id(0)]
    assert not any(hit["snippet"] for hit in bare)
    fetched = search_archive(fresh.WORKSPACE, "suppression", store=LocalStore(archive.STORE)).hits
    assert "[Suppression]" in fetched[0]["snippet"] and "[suppression]" in fetched[1]["snippet"]
    # The command line's search reads them from the store its workspace names, as show and export do.
    shutil.rmtree(Path(fresh.WORKSPACE) / "text")
    shutil.copy(Path(archive.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
    assert main(["search", "suppression", "--json", "--workspace", fresh.WORKSPACE, "--store", archive.STORE]) == 0
    assert "[Suppression]" in json.loads(capsys.readouterr().out)["hits"][0]["snippet"]


def test_a_document_leaves_the_index_even_when_its_text_is_gone(archive):
    run_index(archive)
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        sha = db.get_document(document_id(2))["sha256"]
        with db.transaction():
            db.conn.execute("UPDATE documents SET status = 'downloaded', updated_at = 'later' WHERE document_id = ?",
                            (document_id(2),))
    finally:
        db.close()
    (Path(archive.WORKSPACE) / "text" / f"{sha}.txt").unlink()
    (Path(archive.STORE) / "text" / f"{sha}.txt").unlink()
    result = run_index(archive)
    assert (result.removed, result.missing_texts) == (1, 0) and index_coverage(archive.WORKSPACE).behind == 0
    assert found(archive, "suspended") == []


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
    search = SearchIndex.open(archive.WORKSPACE, readonly=True)
    try:
        row = search.get(document_id(3))
        assert (row["case_type"], row["docket_entry_type"], row["publication_status"], row["judge"]) == (
            "Matter of Right Appeal", "Opinion", "TO BE PUBLISHED", "VANMETER")
        assert search.get(document_id(0))["judge"] is None
        facets = search.facets(parse_query(""), search_filters())
        assert ("TO BE PUBLISHED", 1) in facets["publication_status"] and ("opinion", 4) in facets["kinds"]
    finally:
        search.close()
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():   # a better derivation later: the index follows
            db.conn.execute("UPDATE derived SET judge = 'MINTON'")
    finally:
        db.close()
    assert run_index(archive).refreshed == 1
    assert search_archive(archive.WORKSPACE, "suppression", court="SC").hits[0]["judge"] == "MINTON"
    assert search_archive(archive.WORKSPACE, "", publication_status="TO BE PUBLISHED").total == 1
    # A derived kind wins over the description's words; without one, the description's start decides.
    assert set(found(archive, "suppression", kind="OPINION")) == {document_id(0), document_id(3)}
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        with db.transaction():
            db.conn.execute("UPDATE derived SET kind = 'order'")   # "OPINION REVERSING ..." read as an order
    finally:
        db.close()
    run_index(archive)
    assert found(archive, "suppression", kind="opinion") == [document_id(0)]
    assert found(archive, "suppression", kind="order") == [document_id(3)]
    # A type no document answers to is named, with the types the archive holds, not an empty page.
    from notebook_builder.cells.c87_index import UnmatchedFilter
    with pytest.raises(UnmatchedFilter, match="OPINION REV.*opinion"):
        found(archive, "suppression", kind="OPINION REV")


def search_filters():
    from notebook_builder.cells.c18_search_index import SearchFilters
    return SearchFilters()


# ---------------------------------------------------- restore, bad input


def index_counting(cfg, store_class=CountingStore):
    """The index stage over a store that records its uploads: (result, store)."""
    store = store_class(cfg.STORE)
    ctx = open_context(cfg, store=store)
    try:
        return index(ctx), store
    finally:
        ctx.close()


def store_index_files(cfg) -> set[str]:
    return {path.name for path in (Path(cfg.STORE) / SEARCH_INDEX_DIRNAME).iterdir()}


def commit_files(cfg) -> set[str]:
    """The files of the workspace index's latest commit (its meta.json is in the store's catalog)."""
    return set(commit_file_names((Path(cfg.WORKSPACE) / SEARCH_INDEX_DIRNAME / "meta.json").read_text()))


def fresh_runtime(tmp_path, cfg, name: str = "fresh"):
    """A new runtime's workspace over `cfg`'s store: the state database (as restore makes it), no
    index, no texts."""
    fresh = make_config(tmp_path / name, KY_STORE=cfg.STORE)
    Path(fresh.WORKSPACE).mkdir(parents=True)
    shutil.copy(Path(cfg.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
    return fresh


QUERIES = ("suppression", '"search warrant"', "commonwealth", "suspended OR rehearing", "2019-CA-0012")


def test_an_update_sends_the_new_segments_files_and_the_catalogs_changed_pages(tmp_path):
    cfg = build_archive(tmp_path, extracted=3)
    first, _ = index_counting(cfg)
    assert first.pushed and store_index_files(cfg) == commit_files(cfg)
    held = store_index_files(cfg)
    db = Database.open(Path(cfg.WORKSPACE) / DB_FILENAME)
    try:
        for number in (3, 4):
            add_text(cfg, db, None, number, DOCUMENTS[number][4])
    finally:
        db.close()
    update, store = index_counting(cfg)
    assert update.indexed == 2 and update.pushed and store_index_files(cfg) == commit_files(cfg)
    new = store_index_files(cfg) - held
    assert len(new) == 6 and len({name.split(".")[0] for name in new}) == 1      # one new segment
    index_sent = {name.split("/", 1)[1] for name in store.uploads if name.startswith(f"{SEARCH_INDEX_DIRNAME}/")}
    assert index_sent == new                                                    # nothing held is sent again
    packs = [name for name in store.uploads if not name.startswith(f"{SEARCH_INDEX_DIRNAME}/")]
    assert packs and all(name.startswith("db/ky_search/") and name.endswith(".pack") for name in packs)
    assert max(store.uploads.values()) == 1 and update.push_files == len(index_sent)
    assert update.push_bytes == sum(len(data) for sent in store.uploaded_bytes.values() for data in sent)
    # Nothing new: nothing sent.
    again, store = index_counting(cfg)
    assert not again.pushed and not store.uploads


def test_a_merge_removes_the_merged_away_segments_files_from_the_store(archive):
    run_index(archive)
    first = store_index_files(archive)
    search = SearchIndex.open(archive.WORKSPACE)
    try:
        for number in range(8):        # eight more segments of a size: tantivy merges them with the first
            search.add({"document_id": f"extra-{number}", "text_name": "text/none.txt", "text_key": "t",
                        "source_key": "s"}, f"extra text {number}")
            search.commit()
        search.finish()
    finally:
        search.close()
    assert not first <= commit_files(archive)                                   # merged away locally
    stray = Path(archive.STORE) / "db" / "ky_search" / f"00000099-{'0' * 64}.pack"   # a killed push's
    stray.write_bytes(b"KYPAGES1")
    ctx = open_context(archive)
    try:
        pushed = push_search_index(ctx)
    finally:
        ctx.close()
    assert pushed.removed >= 7 and store_index_files(archive) == commit_files(archive) and not stray.exists()


def test_a_fresh_runtime_restores_the_index_from_the_store_and_finds_the_same(tmp_path, archive):
    run_index(archive)
    assert not (Path(archive.STORE) / SEARCH_INDEX_DIRNAME / "meta.json").exists()     # the catalog holds it
    fresh = fresh_runtime(tmp_path, archive)
    restored, store = index_counting(fresh)
    assert restored.restored_from_store and restored.indexed == 0 and restored.total == len(DOCUMENTS)
    assert not restored.pushed and not store.uploads     # nothing changed, and the store has it
    for query in QUERIES:
        assert found(fresh, query) == found(archive, query), query
    assert index_coverage(fresh.WORKSPACE).behind == 0


def test_an_earlier_versions_whole_copy_restores_then_is_replaced_and_removed(tmp_path, archive):
    run_index(archive)
    store = Path(archive.STORE)
    shutil.rmtree(store / SEARCH_INDEX_DIRNAME)         # the store as an earlier version left it
    shutil.rmtree(store / "db" / "ky_search")
    write_earlier_search_tar(Path(archive.WORKSPACE), store / SEARCH_PACK_FILENAME)
    shutil.copy(Path(archive.WORKSPACE) / SEARCH_DB_FILENAME, store / SEARCH_DB_FILENAME)
    fresh = fresh_runtime(tmp_path, archive)
    restored = run_index(fresh)
    assert restored.restored_from_store and restored.indexed == 0 and restored.pushed
    assert not (store / SEARCH_PACK_FILENAME).exists() and not (store / SEARCH_DB_FILENAME).exists()
    assert store_index_files(fresh) == commit_files(fresh) and list((store / "db" / "ky_search").iterdir())
    again = fresh_runtime(tmp_path, archive, "again")
    assert run_index(again).restored_from_store
    for query in QUERIES:
        assert found(again, query) == found(fresh, query) == found(archive, query), query


@pytest.mark.parametrize("harm", ["damaged segment file", "missing segment file", "missing catalog"])
def test_a_damaged_or_missing_file_in_the_store_means_a_rebuild_never_a_wrong_answer(tmp_path, archive, harm):
    run_index(archive)
    store = Path(archive.STORE)
    victim = next((store / SEARCH_INDEX_DIRNAME).glob("*.pos"))     # tantivy would open without it
    if harm == "damaged segment file":
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0x20
        victim.write_bytes(bytes(data))
    elif harm == "missing segment file":
        victim.unlink()
    else:
        shutil.rmtree(store / "db" / "ky_search")
    fresh = fresh_runtime(tmp_path, archive)
    built = run_index(fresh)        # the workspace has no texts: each is fetched from the store
    assert not built.restored_from_store and built.indexed == len(DOCUMENTS) and built.missing_texts == 0
    for query in QUERIES:
        assert found(fresh, query) == found(archive, query), query
    # The store now holds the rebuilt commit, whole; what it held before is gone.
    assert built.pushed and store_index_files(fresh) == commit_files(fresh) and not victim.exists()
    assert run_index(fresh_runtime(tmp_path, fresh, "again")).restored_from_store


def test_on_drive_superseded_files_are_deleted_not_trashed(tmp_path):
    with SimDrive() as sim:
        local = build_archive(tmp_path)
        drive = {"KY_STORE": "drive", "KY_DRIVE_API": sim.api_root, "KY_DRIVE_WRITES": "400"}
        cfg = make_config(tmp_path, **drive)
        assert run_index(cfg).pushed
        folder = f"ky_court/{SEARCH_INDEX_DIRNAME}"
        first = {item["title"] for item in sim.files_in(folder)}
        assert first == commit_files(cfg)
        search = SearchIndex.open(cfg.WORKSPACE)
        try:
            for number in range(8):        # a merge, as in the test above
                search.add({"document_id": f"extra-{number}", "text_name": "text/none.txt", "text_key": "t",
                            "source_key": "s"}, f"extra text {number}")
                search.commit()
            search.finish()
        finally:
            search.close()
        again = run_index(cfg)             # takes the extras out again: one more commit
        assert again.removed == 8 and again.pushed
        titles = [item["title"] for item in sim.files_in(folder)]
        assert sorted(titles) == sorted(commit_files(cfg))                  # each held once
        gone = first - set(titles)
        assert gone and not any(sim.file_by_name(f"{folder}/{title}", include_trashed=True) for title in gone)
        fresh = make_config(tmp_path / "fresh", **drive)
        Path(fresh.WORKSPACE).mkdir(parents=True)
        shutil.copy(Path(local.WORKSPACE) / DB_FILENAME, Path(fresh.WORKSPACE) / DB_FILENAME)
        restored = run_index(fresh)
        assert restored.restored_from_store and restored.indexed == 0 and not restored.pushed
        for query in QUERIES:
            assert found(fresh, query) == found(local, query), query


class RefusesOnce(LocalStore):
    """A store that refuses, once, the first upload whose name starts with `refused_prefix`."""

    refused_prefix = ""
    refused = False

    def upload_file(self, name, local_path):
        if name.startswith(RefusesOnce.refused_prefix) and not RefusesOnce.refused:
            RefusesOnce.refused = True
            raise StoreError("refused for the test")
        super().upload_file(name, local_path)


@pytest.mark.parametrize("refused", [f"{SEARCH_INDEX_DIRNAME}/", "db/ky_search/"])
def test_a_refused_push_leaves_the_stores_commit_whole_and_the_next_session_sends_it(tmp_path, archive, monkeypatch,
                                                                                     refused):
    """A push that fails before its segment files are all sent, or between them and the catalog (the
    commit point): a fresh runtime restores the earlier commit whole, never a rebuild."""
    run_index(archive)
    monkeypatch.setattr(RefusesOnce, "refused_prefix", refused)
    monkeypatch.setattr(RefusesOnce, "refused", False)
    db = Database.open(Path(archive.WORKSPACE) / DB_FILENAME)
    try:
        add_text(archive, db, LocalStore(archive.STORE), 1, "A later text about reconsideration.", revision=1)
    finally:
        db.close()
    refused_push, _ = index_counting(archive, RefusesOnce)
    assert RefusesOnce.refused and refused_push.indexed == 1 and not refused_push.pushed
    earlier = fresh_runtime(tmp_path, archive)
    restored = run_index(earlier)
    assert restored.restored_from_store and not restored.rebuilt          # the earlier commit, whole
    assert restored.indexed == 1                                          # then caught up from its texts
    later = run_index(archive)                          # nothing changed since, but the store is behind
    assert later.indexed == 0 and later.pushed and store_index_files(archive) == commit_files(archive)
    again = fresh_runtime(tmp_path, archive, "again")
    found_again = run_index(again)
    assert found_again.restored_from_store and found_again.indexed == 0
    assert found(again, "reconsideration") == [document_id(1)]


def test_a_store_of_the_earlier_layout_restores_by_its_meta_json_then_is_sealed(tmp_path, archive):
    """A store sent before the catalog recorded its commit: its catalog with `ky_search/meta.json`
    restores (no rebuild), and the next push seals the catalog and removes that meta.json."""
    run_index(archive)
    store, workspace = Path(archive.STORE), Path(archive.WORKSPACE)
    shutil.rmtree(store / "db" / "ky_search")
    ctx = open_context(archive)
    try:
        catalog_packs(ctx).table_path.unlink()
        catalog_packs(ctx).push(workspace / SEARCH_DB_FILENAME)           # the catalog as it was sent, unsealed
    finally:
        ctx.close()
    shutil.copy(workspace / SEARCH_INDEX_DIRNAME / "meta.json", store / SEARCH_INDEX_DIRNAME / "meta.json")
    fresh = fresh_runtime(tmp_path, archive)
    restored = run_index(fresh)
    assert restored.restored_from_store and restored.indexed == 0 and not restored.rebuilt
    assert restored.pushed and not (store / SEARCH_INDEX_DIRNAME / "meta.json").exists()
    again = fresh_runtime(tmp_path, archive, "again")
    assert run_index(again).restored_from_store
    for query in QUERIES:
        assert found(again, query) == found(archive, query), query


def test_a_text_nobody_holds_is_counted_and_left_for_later(tmp_path):
    cfg = build_archive(tmp_path, upload=False)
    victim = next(Path(cfg.WORKSPACE, "text").glob("*.txt"))
    victim.unlink()
    result = run_index(cfg)
    assert result.missing_texts == 1 and result.indexed == len(DOCUMENTS) - 1
    assert index_coverage(cfg.WORKSPACE).missing == 1
    assert index_behind(cfg.WORKSPACE) is not None       # not level: the next run tries again


def test_a_damaged_index_is_set_aside_and_rebuilt(archive):
    run_index(archive)
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    path.write_bytes(b"this is not a database at all")
    result = run_index(archive)
    assert result.rebuilt and result.indexed == len(DOCUMENTS)
    assert (path.parent / f"{SEARCH_DB_FILENAME}.damaged-1").read_bytes() == b"this is not a database at all"
    assert (path.parent / f"{SEARCH_INDEX_DIRNAME}.damaged-1").is_dir()
    assert len(found(archive, "suppression")) == 2


def test_the_fts5_index_of_an_earlier_version_is_built_again_not_kept(archive):
    path = Path(archive.WORKSPACE) / SEARCH_DB_FILENAME
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT); "
                       "INSERT INTO kv VALUES ('search_schema_version', '6'); "
                       "CREATE VIRTUAL TABLE docs_fts USING fts5(case_title, description, body);")
    conn.close()
    with pytest.raises(IndexMissingError, match="kycourt-pipeline index"):
        search_archive(archive.WORKSPACE, "suppression")
    result = run_index(archive)
    assert result.rebuilt and result.indexed == len(DOCUMENTS)
    assert not list(path.parent.glob(f"{SEARCH_DB_FILENAME}.damaged-*"))
    assert len(found(archive, "suppression")) == 2


def test_every_query_is_answered_and_says_how_it_was_read(archive):
    run_index(archive)
    for typed in ('"unterminated', "suppression AND", "(warrant", "2019-CA-0012", "col:x", "a*", "-", '""', "OR",
                  "NEAR(", "KRS 532.032", "Ky. R. App.", "King's", "O'Brien", "restitution, hearing"):
        result = search_archive(archive.WORKSPACE, typed)
        assert result.total >= 0 and isinstance(result.read_as, str), typed
    assert search_archive(archive.WORKSPACE, '"search warrant').notes == ["the unmatched quote was closed at the end"]
    assert found(archive, '"search warrant') == [document_id(0)]


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
    assert store_index_files(archive) == commit_files(archive)
    assert list((Path(archive.STORE) / "db" / "ky_search").glob("*.pack"))


def test_readonly_open_of_a_missing_index_is_an_integrity_error(tmp_path):
    with pytest.raises(IntegrityError):
        SearchIndex.open(tmp_path, readonly=True)


def test_a_new_year_or_court_moves_the_document_under_its_filters(archive):
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
    assert (moved.indexed, moved.refreshed, moved.missing_texts) == (0, 1, 0)
    assert found(archive, "suppression", year=2019) == []
    hits = search_archive(archive.WORKSPACE, "suppression", year=2022, court="SC").hits
    assert [hit["document_id"] for hit in hits] == [document_id(0)] and "[suppression]" in hits[0]["snippet"]
    assert found(archive, "suppression", year=2022, court="CA") == []
    assert index_coverage(archive.WORKSPACE).behind == 0


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
