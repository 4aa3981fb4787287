"""What ``get()``'s memory message shows: the standing instructions, the profile and the best memories.

Why a module of its own: choosing the sections (the budget arithmetic, what the session was already shown,
the standing-facts fallback) is one concept with its own cache, while the facade only places the message in
the history. It gets a small typed bundle of what it reads (:class:`MemoryMessageSources`), not the facade.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager
from llama_index_memory_hierarchy.lifecycle.shown import SessionShown
from llama_index_memory_hierarchy.messages import (
    MEMORIES_TAG,
    MEMORY_HEADER,
    PROFILE_TAG,
    RULES_TAG,
    format_memory,
    frame_tokens,
    tagged,
)
from llama_index_memory_hierarchy.ranking.context import fill_budget
from llama_index_memory_hierarchy.session_history import SessionHistory
from llama_index_memory_hierarchy.text import count_tokens
from llama_index_memory_hierarchy.tiers.procedural import (
    ProceduralMemory,
    instructions_section,
    is_current,
    rule_sources,
)
from llama_index_memory_hierarchy.types import MemoryItem

#: The memory's traced cross-tier search: ``(query, limit, conversation=turns) -> best items``.
Search = Callable[..., Awaitable[list[MemoryItem]]]


@dataclass(frozen=True)
class MemoryMessageSources:
    """What the memory message is assembled from, for one user and session."""

    config: MemoryConfig
    procedural: ProceduralMemory
    history: SessionHistory
    shown: SessionShown
    manager: MemoryManager
    search: Search


class MemoryMessage:
    """The sections of one session's memory message, cached until the history, the memories or the rules change."""

    def __init__(self, sources: MemoryMessageSources) -> None:
        self._sources = sources
        self._cache: tuple[tuple[Any, ...], tuple[tuple[str, ...], list[str]]] | None = None

    def invalidate(self) -> None:
        """Forget the cached sections: what they were built from changed in a way the cache key does not see."""
        self._cache = None

    async def asections(
        self, query: str | None, exclude: set[str], turns: Sequence[str] = ()
    ) -> tuple[list[str], list[str]]:
        """The tagged sections of the memory message: the standing instructions, the user profile and the best
        memories for ``query`` within ``memory_context_token_limit`` (the frame of the message included), and
        the ids of the memories it shows.

        The instructions come first and take the budget first (memories never displace them; of two that
        conflict only the newer stands, see ``tiers.procedural``). One line per memory (time, tier, text),
        best first, none twice; the history window (``exclude``) is shown anyway, so it is left out, and so is
        what an earlier input of the session showed, by any object on it (``lifecycle.shown``). The search reads
        the recent user ``turns`` for what the conversation is about (``retrieval.conversation_query``). A line
        that does not fit is dropped whole. The profile's standing facts (diet, allergies, language, ...) lead it
        and are shown whatever the query, since they bear on requests that share no word with them ("what should
        I cook tonight?"); for a query no memory clears the relevance floor for, they are the whole profile shown
        (none: no memory message).
        """
        src = self._sources
        every_rule = await src.procedural.ainstructions(include_history=True)
        rules = [rule for rule in every_rule if is_current(rule)]
        if query:  # what an earlier input of the session showed, by this object or another (``lifecycle.shown``)
            exclude = exclude | (await src.shown.aearlier(src.history.floor)).held_back(query)
        key = (query, src.history.version, src.manager.deps.revision.value, frozenset(exclude), tuple(every_rule))
        if self._cache is not None and self._cache[0] == key:
            return list(self._cache[1][0]), self._cache[1][1]
        room = src.config.memory_context_token_limit - frame_tokens()
        rules_text = instructions_section(rules, room, count_tokens)
        rules_section = [tagged(RULES_TAG, rules_text)] if rules_text else []
        if query is None:
            self._cache = (key, (tuple(rules_section), []))
            return rules_section, []
        # the rules are shown above; the turns that gave them (an ended rule's too) are not shown as memories
        exclude = exclude | {rule.id for rule in every_rule} | {s for rule in every_rule for s in rule_sources(rule)}
        limit = src.config.retrieval_top_k
        room -= count_tokens(rules_text) + 2 if rules_text else 0
        # the profile's share is of the budget before the frame: the frame takes the memories' room
        profile_limit = max(min(src.manager.settings.profile_token_limit, (room + frame_tokens()) // 2), 0)
        # spare candidates: the history window is ranked too (so that what repeats it collapses into it) and
        # dropped, and a line too long for what is left of the budget leaves room to the next
        recall = src.search(query, 2 * limit + min(len(exclude), 2 * limit), conversation=list(turns[-8:]))
        try:
            items, profile = await asyncio.gather(recall, src.manager.aprofile_text(profile_limit))
        except MemoryValidationError:
            items, profile = [], await src.manager.aprofile_text(profile_limit)
        items = [item for item in items if item.id not in exclude]
        if not items:  # nothing beyond the conversation clears the floor: only what constrains any answer (diet...)
            profile = await src.manager.aprofile_text(profile_limit, standing_only=True)
        budget = room - count_tokens(MEMORY_HEADER) - 1
        if profile:
            budget -= count_tokens(profile) + 2
        formatted = [(item.id, format_memory(item)) for item in items]
        lines = fill_budget((line for _, line in formatted), budget, limit, count_tokens)
        kept = set(lines)
        shown = [memory_id for memory_id, line in formatted if line in kept]
        sections = [
            *rules_section,
            *([tagged(PROFILE_TAG, profile)] if profile else []),
            *([tagged(MEMORIES_TAG, "\n".join([MEMORY_HEADER, *lines]))] if lines else []),
        ]
        self._cache = (key, (tuple(sections), shown))
        return sections, shown
