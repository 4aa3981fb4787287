"""LlamaIndex retrievers over memory: one tier (``TierRetriever``) or several fused."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.retrieval.fusion import reciprocal_rank_fusion
from llama_index_memory_hierarchy.types import MemoryItem

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.tiers.base import MemoryTier


def item_to_node(item: MemoryItem) -> NodeWithScore:
    """A retrieved memory as a ``NodeWithScore`` carrying its identity in metadata."""
    metadata = {
        **item.metadata,
        "memory_id": item.id,
        "memory_type": item.memory_type.value,
        "user_id": item.user_id,
        "session_id": item.session_id,
        "timestamp": item.timestamp.isoformat(),
        "importance": item.importance,
    }
    node = TextNode(
        id_=item.id,
        text=item.content,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in metadata if k not in {"timestamp", "memory_type"}],
    )
    return NodeWithScore(node=node, score=item.score)


def _top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryValidationError("similarity_top_k", f"must be a positive integer, got {value!r}")
    return value


class TierRetriever(BaseRetriever):
    """Retrieves from one memory tier; filters are fixed at construction."""

    def __init__(self, tier: MemoryTier, similarity_top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.tier = tier
        self.similarity_top_k = _top_k(similarity_top_k)
        self.filters = dict(filters or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = self.tier.retrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        return [item_to_node(item) for item in items]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = await self.tier._runtime.arun(
            self.tier.aretrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        )
        return [item_to_node(item) for item in items]


@traced("retrieve")
async def afuse_tiers(
    tiers: Sequence[MemoryTier], query: str, limit: int, *, rrf_k: int = 60, **filters: Any
) -> list[MemoryItem]:
    """Retrieve from several tiers concurrently and fuse by reciprocal rank."""
    results = await asyncio.gather(*(tier.aretrieve(query, limit, **filters) for tier in tiers))
    fused = reciprocal_rank_fusion([[item.id for item in items] for items in results], k=rrf_k)
    by_id = {item.id: item for items in results for item in items}
    ranked = sorted(fused, key=lambda memory_id: fused[memory_id], reverse=True)[:limit]
    return [by_id[memory_id].model_copy(update={"score": fused[memory_id]}) for memory_id in ranked]


class HierarchyRetriever(BaseRetriever):
    """Retrieves from several tiers at once, fused by reciprocal rank."""

    def __init__(
        self,
        tiers: Sequence[MemoryTier],
        similarity_top_k: int = 5,
        filters: dict[str, Any] | None = None,
        rrf_k: int = 60,
    ) -> None:
        super().__init__()
        if not tiers:
            raise MemoryValidationError("tiers", "at least one tier is needed")
        self.tiers = list(tiers)
        self.similarity_top_k = _top_k(similarity_top_k)
        self.filters = dict(filters or {})
        self.rrf_k = rrf_k
        self._runtime = self.tiers[0]._runtime

    def _fuse(self, query: str) -> Any:
        return afuse_tiers(self.tiers, query, self.similarity_top_k, rrf_k=self.rrf_k, **self.filters)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [item_to_node(item) for item in self._runtime.run(self._fuse(query_bundle.query_str))]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [item_to_node(item) for item in await self._runtime.arun(self._fuse(query_bundle.query_str))]
