"""``HierarchyRetriever``: the cross-tier search as a LlamaIndex retriever (one tier: ``tiers.retriever``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_memory_hierarchy.retrieval.search import memory_types_of
from llama_index_memory_hierarchy.tiers.retriever import item_to_node
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, validate_positive_int


class SearchableMemory(Protocol):
    """What :class:`HierarchyRetriever` needs of a memory (a ``HierarchicalMemory``): its cross-tier search."""

    def search(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]: ...

    async def asearch(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]: ...


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
