"""``TierRetriever``: one memory tier as a LlamaIndex retriever, and the node a retrieved memory becomes."""

from __future__ import annotations

from typing import Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_memory_hierarchy.types import MemoryItem, validate_positive_int


class RetrievableTier(Protocol):
    """What :class:`TierRetriever` needs of a tier (a ``MemoryTier``): its retrieval."""

    def retrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]: ...

    async def aretrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]: ...


def item_to_node(item: MemoryItem) -> NodeWithScore:
    """A retrieved memory as a ``NodeWithScore`` carrying its identity (and why it ranked) in metadata.

    ``explanation`` (signal -> contribution to the score) is for people and tools, never embedded
    nor shown to the LLM.
    """
    metadata: dict[str, Any] = {
        **item.metadata,
        "memory_id": item.id,
        "memory_type": item.memory_type.value,
        "user_id": item.user_id,
        "session_id": item.session_id,
        "timestamp": item.timestamp.isoformat(),
        "importance": item.importance,
    }
    if item.explanation is not None:
        metadata["explanation"] = dict(item.explanation)
    node = TextNode(
        id_=item.id,
        text=item.content,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in metadata if k not in {"timestamp", "memory_type"}],
    )
    return NodeWithScore(node=node, score=item.score)


class TierRetriever(BaseRetriever):
    """Retrieves from one memory tier; filters are fixed at construction."""

    def __init__(self, tier: RetrievableTier, similarity_top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.tier = tier
        self.similarity_top_k = validate_positive_int(similarity_top_k, "similarity_top_k")
        self.filters = dict(filters or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = self.tier.retrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        return [item_to_node(item) for item in items]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = await self.tier.aretrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        return [item_to_node(item) for item in items]
