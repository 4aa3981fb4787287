"""LlamaIndex retrievers over memory: one tier (``TierRetriever``) or the cross-tier search (``HierarchyRetriever``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_memory_hierarchy.retrieval.search import memory_types_of
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, validate_positive_int

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.tiers.base import MemoryTier


class SearchableMemory(Protocol):
    """What :class:`HierarchyRetriever` needs of a memory (a ``HierarchicalMemory``): its cross-tier search."""

    def search(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]: ...

    async def asearch(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]: ...


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

    def __init__(self, tier: MemoryTier, similarity_top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.tier = tier
        self.similarity_top_k = validate_positive_int(similarity_top_k, "similarity_top_k")
        self.filters = dict(filters or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = self.tier.retrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        return [item_to_node(item) for item in items]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = await self.tier._runtime.arun(
            self.tier.aretrieve(query_bundle.query_str, self.similarity_top_k, **self.filters)
        )
        return [item_to_node(item) for item in items]


class HierarchyRetriever(BaseRetriever):
    """The cross-tier search of a memory (a ``HierarchicalMemory``) as a LlamaIndex retriever.

    Every memory of the chosen tiers competes on one score (``retrieval.search``); each node's
    metadata carries the ``explanation`` of its score.
    """

    def __init__(
        self,
        memory: SearchableMemory,
        similarity_top_k: int = 5,
        memory_types: Sequence[MemoryType | str] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.memory = memory
        self.memory_types = memory_types_of(memory_types)
        self.similarity_top_k = validate_positive_int(similarity_top_k, "similarity_top_k")
        self.filters = dict(filters or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = self.memory.search(
            query_bundle.query_str, self.similarity_top_k, memory_types=self.memory_types, **self.filters
        )
        return [item_to_node(item) for item in items]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        items = await self.memory.asearch(
            query_bundle.query_str, self.similarity_top_k, memory_types=self.memory_types, **self.filters
        )
        return [item_to_node(item) for item in items]
