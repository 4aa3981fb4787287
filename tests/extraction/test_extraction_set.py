"""Floors of the offline extractor on the fact-extraction test set (precision first)."""

from __future__ import annotations

import pytest
from extraction_set import HERE, load, score

from llama_index_memory_hierarchy.extraction import OfflineExtractor, load_spacy

PRECISION_FLOOR = 0.95  # a wrong fact is worse than none
RECALL_FLOOR = {"en": 0.85, "zh": 0.80}


def test_the_set_is_large_and_varied() -> None:
    english, chinese = load("en"), load("zh")
    assert len(english) >= 150 and len(chinese) >= 100
    for examples, own in ((english, "habit"), (chinese, "occupation")):
        kinds = {e.kind for e in examples}
        assert {"negation", "nolonger", "delegation", "people", "pronoun", "date", "preference", "smalltalk"} <= kinds
        assert {"thirdperson", "byname", "compound", "family", own} <= kinds
        assert sum(not e.facts for e in examples) >= 15  # small talk and unresolvable pronouns yield nothing


@pytest.mark.parametrize("part", ["dev", "holdout"])
@pytest.mark.parametrize("language", ["en", "zh"])
async def test_offline_precision_and_recall_floors(language: str, part: str) -> None:
    if language == "en" and load_spacy() is None:
        pytest.skip("the English floors are those of the spaCy path")
    examples = load(language, HERE if part == "dev" else HERE / "holdout")
    result = score(examples, await OfflineExtractor().aextract_many([e.text for e in examples]))
    assert result.precision >= PRECISION_FLOOR, result.wrong
    assert result.recall >= RECALL_FLOOR[language], result.missed
    small_talk = [e for e in examples if e.kind == "smalltalk"]
    extracted = await OfflineExtractor().aextract_many([e.text for e in small_talk])
    assert {e.text: x.facts for e, x in zip(small_talk, extracted, strict=True) if x.facts} == {}


ISSUE32 = HERE.parent / "data" / "extraction"  # the set of issue 32: forms of naming the user, two halves
FORMS = {"first", "third", "byname", "compound", "negative", "others", "nofact"}


def test_the_issue32_set_has_both_halves_every_form_and_sentences_without_facts() -> None:
    english = load("en", ISSUE32 / "dev") + load("en", ISSUE32 / "holdout")
    chinese = load("zh", ISSUE32 / "dev") + load("zh", ISSUE32 / "holdout")
    assert len(english) >= 150 and len(chinese) >= 100
    for examples in (english, chinese):
        assert {e.kind for e in examples} == FORMS
        assert all(not e.facts for e in examples if e.kind == "nofact")
        assert sum(e.kind == "nofact" for e in examples) >= 15


@pytest.mark.parametrize("part", ["dev", "holdout"])
@pytest.mark.parametrize("language", ["en", "zh"])
async def test_offline_floors_on_the_issue32_set(language: str, part: str) -> None:
    if language == "en" and load_spacy() is None:
        pytest.skip("the English floors are those of the spaCy path")
    examples = load(language, ISSUE32 / part)
    extracted = await OfflineExtractor().aextract_many([e.text for e in examples])
    result = score(examples, extracted)
    assert result.precision >= PRECISION_FLOOR, result.wrong
    assert result.recall >= RECALL_FLOOR[language], result.missed
    silent = {e.text: x.facts for e, x in zip(examples, extracted, strict=True) if e.kind == "nofact" and x.facts}
    assert silent == {}  # questions, hypotheticals, jokes, claims of authority


#: The fresh part was first run once, clean (2026-12-04: en P 0.918 R 0.691, zh P 1.000 R 0.933); its error
#: classes were then fixed (issue 32, extract32c), after which it gives en P 1.000 R 0.926, zh P 1.000 R 0.950:
#: no longer a clean held-out figure. Floors are those figures less a small margin, a regression guard.
FRESH_FLOORS = {"en": (0.97, 0.90), "zh": (0.97, 0.92)}


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_offline_floors_on_the_fresh_part(language: str) -> None:
    if language == "en" and load_spacy() is None:
        pytest.skip("the English floors are those of the spaCy path")
    examples = load(language, ISSUE32 / "fresh")
    result = score(examples, await OfflineExtractor().aextract_many([e.text for e in examples]))
    precision, recall = FRESH_FLOORS[language]
    assert result.precision >= precision, result.wrong
    assert result.recall >= recall, result.missed
