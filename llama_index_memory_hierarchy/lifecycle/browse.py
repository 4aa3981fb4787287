"""Browsing one user's memories: a filtered page in time order, and one memory with where it came from.

Why one home: the MCP tools (``list_memories``, ``get_memory``) and the inspector's pages show the
same lists and the same detail, and must agree on what "current", "tagged" and "derived" mean.
Tags are the list ``metadata["tags"]``; a fact's versions are the facts of the same subject and
relation (the functional relations supersede one another, see ``tiers/semantic/supersession``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.deletion import aderived_from
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType, validate_memory_id

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps


@dataclass
class MemoryPage:
    """One page of a listing, newest first, and how many match over every page."""

    items: list[MemoryItem]
    total: int
    offset: int

    @property
    def next_offset(self) -> int | None:
        after = self.offset + len(self.items)
        return after if after < self.total else None


@dataclass
class MemoryRelations:
    """What a memory was derived from, what was derived from it, and (a fact) every version of it."""

    sources: list[MemoryItem] = field(default_factory=list)
    derived: list[MemoryItem] = field(default_factory=list)
    versions: list[MemoryItem] = field(default_factory=list)


#: At most this many tags per memory, each at most this long.
MAX_TAGS, MAX_TAG_CHARS = 20, 64


def validate_tags(value: list[str] | None, field: str = "tags") -> list[str]:
    """Tags as stored: trimmed, printable, short, each once (a bad one is refused naming ``field``)."""
    if not value:
        return []
    if not isinstance(value, list) or len(value) > MAX_TAGS:
        raise MemoryValidationError(field, f"at most {MAX_TAGS} tags, as a list")
    tags = []
    for tag in value:
        tag = tag.strip() if isinstance(tag, str) else ""
        if not tag or len(tag) > MAX_TAG_CHARS or not tag.isprintable():
            raise MemoryValidationError(field, f"each tag is 1-{MAX_TAG_CHARS} printable characters")
        tags.append(tag)
    return list(dict.fromkeys(tags))


def tags_of(item: MemoryItem) -> list[str]:
    """The tags stored with a memory (``metadata["tags"]``)."""
    tags = item.metadata.get("tags")
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


async def alist_memories(
    deps: LifecycleDeps,
    *,
    tier: MemoryType | None = None,
    kind: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    tags: list[str] | None = None,
    include_history: bool = False,
    limit: int = 20,
    offset: int = 0,
) -> MemoryPage:
    """A page of the user's stored memories (one tier, or all), newest first.

    The tag and history filters run here, over every record the store's filters let through: fine for
    the thousands of memories one user has, the price of not teaching every record store about tags.
    """
    flt = MemoryFilter.from_kwargs(start=start, end=end, metadata={"kind": kind} if kind else None)
    records = await deps.context.records.query(
        deps.user_id, namespace=MEMORY_NAMESPACE, memory_type=tier, filters=flt, order_by="-timestamp"
    )
    wanted = set(tags or ())
    items = [
        r.item
        for r in records
        if (include_history or r.item.metadata.get("invalid_at") is None) and wanted <= set(tags_of(r.item))
    ]
    return MemoryPage(items=items[offset : offset + limit], total=len(items), offset=offset)


async def aget_memory(deps: LifecycleDeps, memory_id: str) -> MemoryItem | None:
    """One memory of the user, stored or in working memory; None for an unknown id (or another user's)."""
    memory_id = validate_memory_id(memory_id)
    found = await deps.context.records.get(deps.user_id, [memory_id])
    if found:
        return found[0].item
    return await deps.tiers.working.aget(memory_id)


async def arelations(deps: LifecycleDeps, item: MemoryItem) -> MemoryRelations:
    """Sources, derived memories and (for a fact) versions of ``item``, each oldest first."""
    cited = [s for s in item.metadata.get("source_ids") or [] if isinstance(s, str)]
    sources = [r.item for r in await deps.context.records.get(deps.user_id, cited)] if cited else []
    relations = MemoryRelations(sources=sources, derived=await aderived_from(deps.context, deps.user_id, item.id))
    subject, predicate = item.metadata.get("subject"), item.metadata.get("predicate")
    if item.memory_type is MemoryType.SEMANTIC and isinstance(subject, str) and isinstance(predicate, str):
        facts = await deps.tiers.semantic.aget_facts(subject, include_history=True)
        relations.versions = [
            f
            for f in facts
            if f.metadata.get("predicate") == predicate
            and f.metadata.get("subject_id") == item.metadata.get("subject_id")
        ]
    return relations


__all__ = ["MemoryPage", "MemoryRelations", "aget_memory", "alist_memories", "arelations", "tags_of"]
