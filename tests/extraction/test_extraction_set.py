"""Floors of the offline extractor on the fact-extraction test set (precision first)."""

from __future__ import annotations

import pytest
from extraction_set import load, score

from llama_index_memory_hierarchy.extraction import OfflineExtractor

PRECISION_FLOOR = 0.9
RECALL_FLOOR = 0.6


def test_the_set_is_large_and_varied() -> None:
    english, chinese = load("en"), load("zh")
    assert len(english) >= 150 and len(chinese) >= 100
    for examples in (english, chinese):
        kinds = {e.kind for e in examples}
        assert {"negation", "nolonger", "delegation", "people", "pronoun", "date", "preference", "smalltalk"} <= kinds
        assert sum(not e.facts for e in examples) >= 15  # small talk and unresolvable pronouns yield nothing


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_offline_precision_and_recall_floors(language: str) -> None:
    if language == "en":
        pytest.importorskip("spacy")
    examples = load(language)
    result = score(examples, await OfflineExtractor().aextract_many([e.text for e in examples]))
    assert result.precision >= PRECISION_FLOOR, result.wrong
    assert result.recall >= RECALL_FLOOR, result.missed
    small_talk = [e for e in examples if e.kind == "smalltalk"]
    extracted = await OfflineExtractor().aextract_many([e.text for e in small_talk])
    assert {e.text: x.facts for e, x in zip(small_talk, extracted, strict=True) if x.facts} == {}
