"""What the run says of each stage reads as English for any count: '1 sweep', '2 sweeps'."""
from __future__ import annotations

import re

import pytest

from notebook_builder.cells.c00_config import count_noun
from notebook_builder.cells.c95_run import _STAGE_WORDS

# A count of one before a plural ('1 sweeps', '1 search pages', '1 not PDFs').
ONE_AND_A_PLURAL = re.compile(r"\b1 (?:[A-Za-z]+ )?[A-Za-z]+s\b")


def _counters(value: int):
    """A stage result's getter with every counter at `value` (flags set, texts and lists filled)."""
    def get(key: str, default=0):
        if isinstance(default, bool):
            return True
        if isinstance(default, str):
            return default or "text"
        if isinstance(default, dict):
            return {"kind": value}
        if isinstance(default, list):
            return ["name"] * value
        return None if default is None else value
    return get


@pytest.mark.parametrize("stage", sorted(_STAGE_WORDS))
def test_a_stage_that_counted_one_of_everything_says_it_in_the_singular(stage):
    words = _STAGE_WORDS[stage](_counters(1))
    assert not ONE_AND_A_PLURAL.search(words), words


@pytest.mark.parametrize("stage", sorted(_STAGE_WORDS))
def test_a_stage_that_counted_two_of_everything_says_it_in_the_plural(stage):
    words = _STAGE_WORDS[stage](_counters(2))
    assert not re.search(r"\b2 (?:sweep|page|document|request|file|PDF|text|citation|warning)\b", words), words


def test_count_noun_says_one_in_the_singular_and_every_other_count_in_the_plural():
    assert [count_noun(n, "sweep") for n in (0, 1, 2)] == ["0 sweeps", "1 sweep", "2 sweeps"]
    assert count_noun(3, "retry", "retries") == "3 retries" and count_noun(1, "retry", "retries") == "1 retry"
