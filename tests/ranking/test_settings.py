"""RankingSettings: the presets, validation, and settings per memory and per call."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.ranking.settings import (
    FITTED_WEIGHTS,
    WEIGHTED_SIGNALS,
    RankingSettings,
    fitted_signal_weights,
    presets,
    ranking_settings,
)


def test_presets_are_named_settings() -> None:
    assert {"default", "unfitted", "keyword_only", "dense_only", "no_conversation_rules", "no_floor"} <= set(presets())
    assert all(name == settings.name for name, settings in presets().items())
    assert RankingSettings.preset("no_floor").relevance_floor is False
    assert ranking_settings(None) is presets()["default"]
    assert ranking_settings("unfitted").signal_weights == {}


def test_the_default_preset_carries_the_shipped_weights() -> None:
    assert presets()["default"].signal_weights == fitted_signal_weights()
    if FITTED_WEIGHTS.exists():
        assert set(fitted_signal_weights()) <= set(WEIGHTED_SIGNALS)


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(MemoryValidationError) as raised:
        ranking_settings("fastest")
    assert raised.value.field == "ranking"
    with pytest.raises(ValidationError):
        RankingSettings(signal_weights={"vibes": 1.0})
    with pytest.raises(ValidationError):
        RankingSettings(context_share=1.5)
    with pytest.raises(MemoryValidationError):
        ranking_settings(3)


def test_settings_per_memory_and_per_call(make_memory) -> None:
    memory = make_memory("erin", ranking="keyword_only")
    memory.episodic.add("I repaired the blue canoe with my uncle.")
    [item] = memory.search("canoe repair", limit=1)
    assert "dense" not in item.explanation and item.explanation["keyword"] > 0
    [item] = memory.search("canoe repair", limit=1, ranking="dense_only")
    assert "keyword" not in item.explanation and item.explanation["dense"] > 0
    doubled = RankingSettings(name="x", relevance_floor=False, signal_weights={"importance": 2.0})
    [plain] = memory.search("canoe repair", limit=1, ranking="unfitted")
    [heavier] = memory.search("canoe repair", limit=1, ranking=doubled)
    assert heavier.explanation["importance"] == pytest.approx(2 * plain.explanation["importance"], rel=1e-3)
    with pytest.raises(MemoryValidationError):
        make_memory("erin", ranking="nope")


def test_selection_knobs_are_settings(make_memory) -> None:
    memory = make_memory("erin")
    memory.episodic.add_many(
        [
            "We moored the sailing boat at the north pier.",
            "We moored the sailing boat at the north pier, as usual.",
            "The sailing club meets at the pier on Fridays.",
        ]
    )
    default = memory.search("where is the sailing boat moored?", limit=3)
    assert any("duplicate_penalty" in item.explanation for item in default)  # redundancy costs by default
    plain = memory.search("where is the sailing boat moored?", limit=3, ranking=presets()["default"].but(diversity=0))
    assert all("duplicate_penalty" not in item.explanation for item in plain)
    with pytest.raises(ValidationError):
        RankingSettings(near_duplicate_similarity=1.5)
    with pytest.raises(ValidationError):
        RankingSettings(candidate_depth=0)
