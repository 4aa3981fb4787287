"""Every knob of the cross-tier search's scoring and selection in one model, with named presets.

``RankingSettings`` is what ``retrieval/search.py`` reads instead of module constants, so an ablation is a
setting, not a code edit (as graphiti-core's ``SearchConfig`` and its recipes). A memory takes one
(``HierarchicalMemory.from_defaults(ranking=...)``) and any search may override it for one call
(``memory.search(query, ranking="unfitted")``). The ``default`` preset carries the signal weights fitted by
``bench/fit_ranking.py --write`` when they are shipped as data beside this module (``fitted_weights.json``, with
the folds and figures they came from). What ships is the graph weight alone, 0, chosen on every held-out fold by
``--grid graph`` (a weighting of all eight signals lost on held-out folds, ``docs/benchmarks.md``), so ``default`` is
``unfitted`` (every signal weight 1) but the graph's, with the relevance floor.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.ranking.pipeline import DEFAULT_RECIPE
from llama_index_memory_hierarchy.ranking.selection import DIVERSITY, MIN_NOVELTY, NEAR_DUPLICATE_SIMILARITY

logger = logging.getLogger(__name__)

#: The columns of a search result's ``explanation`` that a signal weight multiplies (``signal_weights``).
WEIGHTED_SIGNALS = ("dense", "keyword", "cross_modal", "entity", "time", "graph", "recency", "importance")
#: The fitted weights ``bench/fit_ranking.py`` writes (``--write``) and the ``default`` preset reads.
FITTED_WEIGHTS = Path(__file__).with_name("fitted_weights.json")


class RankingSettings(BaseModel):
    """How the cross-tier search scores and selects (see ``retrieval/search.py`` for the formula)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="custom", description="The preset it came from, for explanations and logs.")
    keyword_weight: float = Field(default=1.0, ge=0, description="Weight of the keyword (BM25) signal in relevance.")
    dense_weight: float = Field(default=1.0, ge=0, description="Weight of the calibrated cosine in relevance.")
    entity_weight: float = Field(default=0.3, ge=0, description="Boost for a memory of a person the query names.")
    time_weight: float = Field(default=1.0, ge=0, description="Boost by how well its time fits the query's dates.")
    temporal_weight: float = Field(default=0.5, ge=0, description="Boost for a memory naming a time, for *when*.")
    graph_weight: float = Field(default=1.0, ge=0, description="Multiplier of the semantic tier's graph weight.")
    context_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of a keyword hit's score its neighbours' words alone can earn it (the rest by the "
        "query's terms in its own text); 1 switches the conversation rules off.",
    )
    relevance_weight: float = Field(default=1.0, ge=0, description="Share of relevance in the score.")
    recency_weight: float = Field(default=0.1, ge=0, description="Share of recency (from the event time).")
    importance_weight: float = Field(default=0.1, ge=0, description="Share of the memory's importance.")
    content_free_factor: float = Field(default=0.5, ge=0, le=1, description="Share a content-free memory keeps.")
    history_factor: float = Field(default=0.5, ge=0, le=1, description="Weight of a superseded fact.")
    conversation_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of the recent user turns in the query vector of an input that asks nothing (small "
        "talk: the conversation says what it is about); 0 searches the input alone "
        "(``retrieval.conversation_query``).",
    )
    question_conversation_weight: float = Field(
        default=0.0, ge=0, le=1, description="The same share for an input that asks a question (it names its topic)."
    )
    conversation_turns: int = Field(default=3, ge=0, description="How many recent user turns the query reads.")
    turn_decay: float = Field(
        default=0.5, gt=0, le=1, description="Weight of each recent turn in the query vector against the one after it."
    )
    chat_keyword_weight: float = Field(
        default=0.2,
        ge=0,
        description="Multiplier of keyword_weight for a conversation's turn that asks nothing (``get()``, the "
        "memory blocks; not a search without ``conversation``): small talk shares words with unrelated memories "
        "more often than with the one it is about.",
    )
    candidate_depth: int = Field(
        default=DEFAULT_RECIPE.candidates, ge=1, le=10_000, description="Fewest candidates each signal reads."
    )
    shortlist: int = Field(
        default=20, ge=1, description="Fewest top candidates selection weighs (at least 4 per result asked)."
    )
    diversity: float = Field(
        default=DIVERSITY, ge=0, description="Weight of redundancy with what is chosen (MMR); 0 turns it off."
    )
    near_duplicate_similarity: float = Field(
        default=NEAR_DUPLICATE_SIMILARITY, ge=0, le=1, description="Calibrated similarity at which two are one."
    )
    min_novelty: float = Field(
        default=MIN_NOVELTY, ge=0, le=1, description="Share of new words a related memory needs to add something."
    )
    source_first: bool = Field(
        default=True,
        description="Show a source turn in the place of a derived memory (a fact, a summary) that reproduces less "
        "than min_novelty of its words; the derived memory competes for the next slot.",
    )
    signal_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Multiplier of each explanation column (WEIGHTED_SIGNALS; 1 when absent): the fitted part.",
    )
    relevance_floor: bool = Field(
        default=True,
        description="Show only memories with evidence of relevance: a content word of the query in their own "
        "text, a person, date or graph link the query names, or a cosine that stands out from unrelated texts "
        "(``retrieval.floor``, ``calibration.SimilarityCalibration.relevance``).",
    )
    floor_false_positive_rate: float = Field(
        default=0.002,
        gt=0,
        lt=0.5,
        description="Share of unrelated memories whose cosine alone clears the relevance floor (the bar, in "
        "standard deviations of the model's unrelated calibration pairs, is set from it).",
    )

    @field_validator("signal_weights")
    @classmethod
    def _known_signals(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(WEIGHTED_SIGNALS))
        if unknown:
            raise ValueError(f"unknown signal(s) {unknown}; choose from {', '.join(WEIGHTED_SIGNALS)}")
        if any(w < 0 for w in value.values()):
            raise ValueError("signal weights must be >= 0")
        return value

    def weight(self, signal: str) -> float:
        """The multiplier of one explanation column."""
        return self.signal_weights.get(signal, 1.0)

    def but(self, **changes: Any) -> RankingSettings:
        """A copy with ``changes`` (validated), named after what changed."""
        return RankingSettings.model_validate(self.model_dump() | changes)

    @classmethod
    def preset(cls, name: str) -> RankingSettings:
        """A named preset (:func:`presets`)."""
        try:
            return presets()[name]
        except KeyError:
            raise MemoryValidationError(
                "ranking", f"unknown ranking preset {name!r}; choose from {', '.join(presets())}"
            ) from None


def fitted_signal_weights(path: Path = FITTED_WEIGHTS) -> dict[str, float]:
    """The signal weights ``bench/fit_ranking.py`` shipped (empty, so every weight 1, when there are none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {name: float(w) for name, w in data.get("signal_weights", {}).items()}


@functools.cache
def presets() -> dict[str, RankingSettings]:
    """The named presets: ``default`` (fitted weights), ``unfitted``, single-signal and rule ablations."""
    unfitted = RankingSettings(name="unfitted")
    return {
        "default": unfitted.but(name="default", signal_weights=fitted_signal_weights()),
        "unfitted": unfitted,
        "keyword_only": unfitted.but(name="keyword_only", dense_weight=0.0),
        "dense_only": unfitted.but(name="dense_only", keyword_weight=0.0),
        "no_conversation_rules": unfitted.but(name="no_conversation_rules", context_share=1.0),
        "no_floor": unfitted.but(name="no_floor", relevance_floor=False),
        "input_only": unfitted.but(name="input_only", conversation_weight=0.0),
    }


def ranking_settings(value: RankingSettings | str | None, default: RankingSettings | None = None) -> RankingSettings:
    """``value`` as settings: a preset by name, the settings themselves, or ``default`` (the ``default`` preset)."""
    if value is None:
        return default if default is not None else presets()["default"]
    if isinstance(value, RankingSettings):
        return value
    if isinstance(value, str):
        return RankingSettings.preset(value.strip())
    raise MemoryValidationError("ranking", f"expected RankingSettings or a preset name, got {type(value).__name__}")
