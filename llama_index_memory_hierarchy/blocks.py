"""The hierarchy as ``BaseMemoryBlock``s for LlamaIndex's own ``Memory``.

``Memory(memory_blocks=memory.memory_blocks())`` keeps LlamaIndex's short-term buffer
and adds one block per tier: on each turn a block retrieves what its tiers know about
the latest user message; the episodic block records the messages that the buffer flushes
when it outgrows its token limit. Messages still in the buffer live only in ``Memory``'s own
chat store (in-process SQLite by default) until then: call :func:`aflush_memory` (or
:func:`flush_memory`) before the process ends, or they are not recorded by the hierarchy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import Field, field_serializer, field_validator

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.messages import BLOCK_HEADER, format_memory, message_text
from llama_index_memory_hierarchy.ranking.context import fill_budget
from llama_index_memory_hierarchy.text import count_tokens
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType


class BlockMemory(Protocol):
    """What a block needs of the memory it serves (a ``HierarchicalMemory``): its settings, search, record."""

    config: MemoryConfig

    async def asearch(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]: ...

    async def aput_messages(self, messages: list[ChatMessage]) -> None: ...

    def to_dict(self) -> dict[str, Any]: ...


#: Reopens a memory from its reference (``HierarchicalMemory.from_dict``); the hierarchy, above this layer, sets it.
_openers: list[Callable[[dict[str, Any]], BlockMemory]] = []


def set_memory_opener(opener: Callable[[dict[str, Any]], BlockMemory]) -> None:
    """How a serialised block reopens its memory (called once by the hierarchy module)."""
    _openers[:] = [opener]


class HierarchyMemoryBlock(BaseMemoryBlock[str]):
    """Memories of some tiers of a ``HierarchicalMemory``, retrieved for the latest user message."""

    memory: Any = Field(description="The BlockMemory (a HierarchicalMemory) this block reads.")
    memory_types: list[MemoryType] = Field(description="Tiers this block retrieves from.")
    top_k: int = Field(default=5, ge=1, description="Memories returned per turn.")
    token_limit: int | None = Field(
        default=None, ge=1, description="Tokens the block's lines may take (default: memory_context_token_limit)."
    )

    @field_serializer("memory")
    def _memory_reference(self, memory: BlockMemory) -> dict[str, Any]:
        """A block is serialised (a saved workflow ``Context``, pickle) with its memory's reference, no secret."""
        return memory.to_dict()

    @field_validator("memory", mode="before")
    @classmethod
    def _reopen_memory(cls, value: Any) -> Any:
        if isinstance(value, dict) and _openers:
            return _openers[0](value)
        return value

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        turns = [message_text(m) for m in messages or [] if m.role == MessageRole.USER]
        query = turns[-1] if turns else None
        if not query:
            return ""
        memory: BlockMemory = self.memory
        # the cross-tier search restricted to this block's tiers, reading what the recent turns are about
        # (``retrieval.conversation_query``); lines fill the budget best first, whole
        items = await memory.asearch(query, 2 * self.top_k, memory_types=self.memory_types, conversation=turns[-8:])
        # LlamaIndex's Memory puts the text between <memory> and <this block's name> tags: quoted lines (no text
        # can close a tag) under a line that says they are data
        budget = (self.token_limit or memory.config.memory_context_token_limit) - count_tokens(BLOCK_HEADER) - 1
        lines = fill_budget((format_memory(item) for item in items), budget, self.top_k, count_tokens)
        return "\n".join([BLOCK_HEADER, *lines]) if lines else ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        if MemoryType.EPISODIC in self.memory_types and messages:
            await self.memory.aput_messages(messages)


#: (name, description, tier, priority, records flushed short-term messages) of each block.
_BLOCKS = (
    ("episodic_memory", "Earlier conversations and events of this user.", MemoryType.EPISODIC, 1, True),
    ("semantic_memory", "Facts about this user and the world.", MemoryType.SEMANTIC, 2, False),
    ("working_memory", "What matters right now in this session.", MemoryType.WORKING, 3, False),
    ("perceptual_memory", "Images, recordings and files this user shared.", MemoryType.PERCEPTUAL, 3, False),
)


async def aflush_memory(memory: Any) -> int:
    """Hand every message still in a LlamaIndex ``Memory``'s short-term buffer to its blocks; how many.

    The messages are archived in ``Memory``'s chat store, as its own flush does, so a later
    flush does not hand them over twice. Call it when a session ends (at exit).
    """
    from llama_index.core.storage.chat_store.base_db import MessageStatus

    active = await memory.sql_store.get_messages(memory.session_id, status=MessageStatus.ACTIVE)
    if not active:
        return 0
    await memory.sql_store.archive_oldest_messages(memory.session_id, n=len(active))
    for block in memory.memory_blocks:
        await block.aput(active, from_short_term_memory=True, session_id=memory.session_id)
    return len(active)


def flush_memory(memory: Any) -> int:
    """Sync twin of :func:`aflush_memory`."""
    from llama_index.core.async_utils import asyncio_run

    return asyncio_run(aflush_memory(memory))


def memory_blocks(memory: BlockMemory, top_k: int) -> list[HierarchyMemoryBlock]:
    """One block per tier, most useful first; each ranks with the cross-tier search over its tier."""
    return [
        HierarchyMemoryBlock(
            name=name,
            description=description,
            memory=memory,
            memory_types=[tier],
            top_k=top_k,
            priority=priority,
            accept_short_term_memory=accepts,
        )
        for name, description, tier, priority, accepts in _BLOCKS
    ]
