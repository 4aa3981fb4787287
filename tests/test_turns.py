"""How a turn is written for the indexes (``turns``): speaker and date, the session context, the keyword text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from llama_index_memory_hierarchy.turns import contextual_text, format_turn, keyword_document


def test_format_turn() -> None:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert format_turn("hi", "Caroline") == "Caroline: hi"
    assert format_turn("hi", "Caroline", when) == "[8 May 2023] Caroline: hi"
    assert format_turn("hi", None, "yesterday") == "[yesterday] hi"


def test_contextual_text_windows_within_a_session() -> None:
    lines = ["A: one", "B: two", "A: three", "B: four"]
    assert contextual_text(lines, 2, before=1, after=1) == "B: two\nA: three\nB: four"
    assert contextual_text(lines, 0, before=2, after=0) == "A: one"
    assert contextual_text(lines, 2, before=2, after=0, groups=[1, 2, 2, 2]) == "B: two\nA: three"
    assert contextual_text(lines, 1, before=0, after=0, separator=" | ") == "B: two"
    with pytest.raises(IndexError):
        contextual_text(lines, 4)
    with pytest.raises(ValueError):
        contextual_text(lines, 1, before=-1)


def test_keyword_document() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    doc = keyword_document("I adopted a dog", speaker="Ann", when=when, previous=["Bob: Any news?"])
    assert doc == "[8 May 2023] Bob: Any news?\nAnn: I adopted a dog"
    assert keyword_document("hi") == "hi"
    assert keyword_document("hi", following=["B: yo"]) == "hi\nB: yo"
