"""The notebook's "Search the archive" cell: the form's query and filters, hits as a table."""
from __future__ import annotations

import pytest
from archive_fixture import build_archive, document_id
from test_index import run_index

from notebook_builder.cells.c18_search_index import SearchQueryError
from notebook_builder.cells.c20_store import LocalStore
from notebook_builder.cells.c87_index import search_archive
from notebook_builder.cells.c98_search import hits_html, parse_year, search_cell


def test_parse_year_takes_empty_as_any_and_refuses_a_non_year():
    assert parse_year("") is None and parse_year(" 2019 ") == 2019 and parse_year(2020) == 2020
    with pytest.raises(SearchQueryError, match="not a year"):
        parse_year("19x")


def test_hits_table_links_each_pdf_in_the_store_and_marks_the_snippet(tmp_path):
    cfg = build_archive(tmp_path)
    run_index(cfg)
    hits = search_archive(cfg.WORKSPACE, "suppression").hits
    table = hits_html(hits, LocalStore(cfg.STORE))
    assert table.count("<tr>") == 1 + len(hits)
    assert f'href="file://{tmp_path}/store/pdf_by_hash/{hits[0]["sha256"]}.pdf"' in table
    assert "<mark>Suppression</mark>" in table and "BROWN VS. COMMONWEALTH" in table
    plain = hits_html(hits, None)        # no store: the store name, no link
    assert "href" not in plain and f"pdf_by_hash/{hits[0]['sha256']}.pdf" in plain


def test_search_cell_prints_the_count_or_one_line_of_what_to_do(tmp_path, capsys):
    cfg = build_archive(tmp_path)
    assert search_cell(cfg, "suppression").startswith("search: no search index")
    run_index(cfg)
    assert search_cell(cfg, "suppression", "SC", "2021") == "1 document matches 'suppression', court SC, year 2021"
    assert search_cell(cfg, "", limit=2, sort="oldest", page=2, after="2019-06-01") == (
        "4 documents match the filters, filed from 2019-06-01, oldest first; 3-4 shown")
    assert search_cell(cfg, '"unbalanced') == (
        "0 documents match '\"unbalanced'\nread as: \"unbalanced\" (the unmatched quote was closed at the end)")
    assert search_cell(cfg, "warrant", year="twenty").startswith("search: year 'twenty' is not a year")
    assert search_cell(cfg, "warrant", before="June").startswith("search: filed to 'June' is not a day")
    assert document_id(3)[:12] not in capsys.readouterr().out     # the table is HTML, displayed, not printed
