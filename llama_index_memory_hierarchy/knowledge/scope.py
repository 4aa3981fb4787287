"""Where one knowledge base lives in the shared stores: its name, namespace, user and store context.

The retriever, the query engine and the ingestion work on this small bundle rather than on the
:class:`~llama_index_memory_hierarchy.knowledge.base.KnowledgeBase` facade, so they never import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryType

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.runtime import Runtime
    from llama_index_memory_hierarchy.stores.base import Record
    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.stores.worklock import WorkLock

#: Record namespace prefix of knowledge bases (memory tiers use ``memory``).
KB_NAMESPACE_PREFIX = "kb:"
#: Memory type stored on knowledge chunks (the namespace, not the type, isolates them).
KB_MEMORY_TYPE = MemoryType.SEMANTIC
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_PAGE = 2000


def kb_namespace(name: str) -> str:
    """The record namespace of knowledge base ``name`` (letters, digits, ``_.-``; no ``:``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in {".", ".."}:
        raise MemoryValidationError("namespace", f"must be 1-64 characters of letters, digits and _.-, got {name!r}")
    return f"{KB_NAMESPACE_PREFIX}{name}"


@dataclass(frozen=True)
class KnowledgeScope:
    """One user's knowledge base ``name`` in ``context``'s stores.

    ``owner`` (the knowledge base) is kept alive by whatever holds the scope: a knowledge base collected without
    ``close()`` releases its stores, so a retriever made from a temporary one (``KnowledgeBase...as_retriever()``)
    must keep it.
    """

    context: StoreContext
    user_id: str
    name: str
    owner: object = field(default=None, compare=False, repr=False)

    @property
    def namespace(self) -> str:
        """The record namespace of the chunks."""
        return kb_namespace(self.name)

    @property
    def runtime(self) -> Runtime:
        """The package runtime that runs the store coroutines."""
        return self.context.runtime

    def lock(self) -> WorkLock:
        """One writer at a time per (user, knowledge base), in every process of an embedded folder."""
        return self.context.lock(KnowledgeScope, self.user_id, self.namespace)

    async def arecords(self, filters: MemoryFilter | None = None) -> list[Record]:
        """Every chunk record (matching ``filters``), oldest first, read page by page."""
        out: list[Record] = []
        offset = 0
        while True:
            page = await self.context.records.query(
                self.user_id,
                namespace=self.namespace,
                filters=filters,
                order_by="created_at",
                limit=_PAGE,
                offset=offset,
            )
            out.extend(page)
            if len(page) < _PAGE:
                return out
            offset += _PAGE


__all__ = ["KB_MEMORY_TYPE", "KB_NAMESPACE_PREFIX", "KnowledgeScope", "kb_namespace"]
