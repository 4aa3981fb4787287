"""Tunables of semantic memory (defaults suit conversational agents)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from llama_index_memory_hierarchy.tiers.semantic.supersession import DEFAULT_FUNCTIONAL_PREDICATES


class SemanticSettings(BaseModel):
    """Tunables of semantic memory (defaults suit conversational agents)."""

    model_config = ConfigDict(extra="forbid")

    functional_predicates: frozenset[str] = Field(default=DEFAULT_FUNCTIONAL_PREDICATES)
    similarity_threshold: float = Field(
        default=0.85, gt=0, le=1, description="Entity name similarity to merge (calibrated: 0 unrelated, 1 identical)."
    )
    containment_threshold: float = Field(default=0.45, gt=0, le=1, description="Same, with token containment.")
    expansion_depth: int = Field(default=2, ge=0, le=3, description="Graph hops from query entities in retrieval.")
    graph_weight: float = Field(default=1.0, ge=0, description="Graph signal weight in the search.")
    min_confidence: float = Field(default=0.0, ge=0, le=1, description="Extracted facts below this are dropped.")
    extract_on_add: bool = Field(default=True, description="Extract facts from text given to add().")
    max_concurrency: int = Field(default=4, ge=1, description="Concurrent LLM extraction calls.")
