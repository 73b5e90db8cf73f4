"""The search box's query syntax, read with plain values (c18_query_syntax): no index."""
from __future__ import annotations

import random

import pytest

from notebook_builder.cells.c18_query_syntax import (AllOf, AnyOf, CaseNumber, Near, Phrase, Word,
                                                     canonical_case_number, parse_query, query_words)


@pytest.mark.parametrize("typed", ["2017-CA-0003", "2017-CA-000003-MR", "2017 CA 3", "17-CA-3", "2017CA0003",
                                   "2017-ca-3", '"2017-CA-0003"', "  2017 - CA - 0003 "])
def test_a_case_number_typed_in_any_usual_form_is_read_as_the_archives_form(typed):
    query = parse_query(typed)
    assert [node.case_number for node in query.required] == ["2017-CA-0003"]
    assert isinstance(query.required[0], CaseNumber)
    assert query.read_as.strip('"').startswith("2017")
    # Said only where the reading differs from what was typed.
    assert bool(query.notes) == (typed.strip().strip('"').upper() not in ("2017-CA-0003",))


def test_a_case_number_beside_words_is_one_node_among_them():
    query = parse_query("restitution 2019 SC 12 hearing")
    assert query.required == (Word("restitution"), CaseNumber("2019-SC-0012", ("2019", "sc", "12")), Word("hearing"))
    assert query.notes == ("2019 SC 12 was read as the case number 2019-SC-0012",)


def test_two_digit_years_are_this_century_below_50():
    assert canonical_case_number("17", "ca", "3") == "2017-CA-0003"
    assert canonical_case_number("98", "SC", "120") == "1998-SC-0120"


def test_a_caption_requires_its_names_not_the_connector():
    for typed in ("Commonwealth v. Ward", "COMMONWEALTH VS. WARD", "Commonwealth versus Ward"):
        query = parse_query(typed)
        assert query.required == (Word("commonwealth"), Word("ward")), typed
        assert [node.word for node in query.optional] in (["v"], ["vs"], ["versus"])
        assert query.sequence[0] == "commonwealth" and query.sequence[-1] == "ward"
        assert not query.notes


@pytest.mark.parametrize("typed, required", [
    ("KRS 532.032", (Word("krs"), Phrase(("532", "032")))),
    ("O'Brien", (Phrase(("o", "brien")),)),
    ("King's", (Phrase(("king", "s")),)),
    ("restitution, hearing", (Word("restitution"), Word("hearing"))),
    ("Ky. R. App.", (Word("ky"), Word("r"), Word("app"))),
    ("and/or", (Phrase(("and", "or")),)),
    ("Peña", (Word("peña"),)),
    ("ﬁnding", (Word("finding"),)),
])
def test_punctuation_inside_a_word_makes_a_phrase_of_its_parts_around_it_a_space(typed, required):
    query = parse_query(typed)
    assert query.required == required
    assert not query.notes


def test_a_quoted_phrase_keeps_every_word_common_ones_included_in_order():
    query = parse_query('"restitution was not owed"')
    assert query.required == (Phrase(("restitution", "was", "not", "owed")),)
    assert query.optional == () and query.excluded == ()
    assert parse_query('"of the"').required == (Phrase(("of", "the")),)


def test_unquoted_common_words_rank_but_are_not_required_unless_alone():
    query = parse_query("the trial court did not abuse its discretion")
    assert [node.word for node in query.required] == ["trial", "court", "did", "not", "abuse", "discretion"]
    assert [node.word for node in query.optional] == ["the", "its"]
    assert query.sequence == ("the", "trial", "court", "did", "not", "abuse", "its", "discretion")
    assert parse_query("of the").required == (Word("of"), Word("the"))


def test_a_leading_minus_or_not_excludes_a_word_or_a_phrase():
    assert parse_query("restitution -remand").excluded == (Word("remand"),)
    assert parse_query("restitution NOT murder").excluded == (Word("murder"),)
    query = parse_query('court -"of the"')
    assert query.required == (Word("court"),) and query.excluded == (Phrase(("of", "the")),)
    assert parse_query("2017-CA-0003").excluded == ()       # a hyphen inside is no exclusion
    assert parse_query("restitution -remand").read_as == "restitution -remand"


def test_or_joins_alternatives_and_binds_tighter_than_and():
    query = parse_query("custody OR visitation support")
    assert query.required == (AnyOf((Word("custody"), Word("visitation"))), Word("support"))
    assert parse_query("custody | visitation").required == (AnyOf((Word("custody"), Word("visitation"))),)
    assert parse_query("warrant AND suppress*").required == (Word("warrant"), Word("suppress", prefix=True))


def test_parentheses_group_and_an_unmatched_one_is_left_out_and_said():
    query = parse_query("(custody visitation) OR adoption")
    assert query.required == (AnyOf((AllOf((Word("custody"), Word("visitation"))), Word("adoption"))),)
    unmatched = parse_query("(custody OR visitation")
    assert unmatched.required == (AnyOf((Word("custody"), Word("visitation"))),)
    assert unmatched.notes == ("an unmatched ( was left out",)
    assert parse_query("custody) visitation").notes == ("an unmatched ) was left out",)


def test_an_unmatched_quote_closes_at_the_end_and_says_so():
    query = parse_query('"restitution hearing')
    assert query.required == (Phrase(("restitution", "hearing")),)
    assert query.read_as == '"restitution hearing"'
    assert query.notes == ("the unmatched quote was closed at the end",)


def test_an_operator_with_nothing_to_act_on_is_read_as_nothing_and_said():
    assert parse_query("restitution OR").required == (Word("restitution"),)
    assert parse_query("restitution OR").notes == ("OR with nothing after it was left out",)
    assert parse_query("OR restitution").required == (Word("restitution"),)
    assert parse_query("restitution -").notes
    assert parse_query("restitution NOT").required == (Word("restitution"),)


def test_a_prefix_needs_three_letters_else_it_is_the_word():
    assert parse_query("neglig*").required == (Word("neglig", prefix=True),)
    short = parse_query("ne*")
    assert short.required == (Word("ne"),)
    assert "too short a prefix" in short.notes[0]


def test_near_is_words_within_a_distance():
    assert parse_query("NEAR(summary judgment, 5)").required == (Near(("summary", "judgment"), 5),)
    assert parse_query("NEAR(summary judgment)").required == (Near(("summary", "judgment"), 10),)


@pytest.mark.parametrize("typed", ["", "   ", '""', "-", "()", "*", "OR", "NOT", '"', "( ) ) ("])
def test_a_query_with_nothing_to_match_is_the_empty_query(typed):
    assert parse_query(typed).empty


def test_whatever_is_typed_is_read_without_an_error():
    pieces = ['"', "(", ")", "-", "*", "OR", "AND", "NOT", "|", "NEAR(", ",", ".", "'", "/", ":", "^", "+", "{", "}",
              "2017", "CA", "0003", "restitution", "the", "of", "Peña", "v.", "\\", "\x00", "\u00ad", "é", " "]
    rng = random.Random(36)
    for _ in range(3000):
        typed = "".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(1, 12)))
        query = parse_query(typed)
        assert isinstance(query.read_as, str)
        for node in query.required + query.excluded:
            assert isinstance(node, (Word, Phrase, CaseNumber, Near, AnyOf, AllOf))


def test_query_words_split_as_the_index_does():
    assert query_words("O'Brien, Jr. KRS 532.032(1)") == ["o", "brien", "jr", "krs", "532", "032", "1"]
