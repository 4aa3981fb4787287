"""The user profile: preferences and facts about the user, derived from semantic memory.

Semantic memory keeps facts about the speaker under the entity ``User`` (the extractors map
"I", "me", "my" to it). The profile gathers the *current* facts where the user is the
subject or the object, plus first-person statements kept in semantic memory, splits them
into preferences (likes, dislikes, favourites, habits, allergies...) and other facts, ranks
them by importance (reinforced by use) and confidence, and renders a compact text block
within a token budget. A fact is shown by the user's own sentence it came from when that
sentence is short, which reads better than a triplet ("I'm allergic to peanuts" rather
than "User is allergic").

The block is a section of ``HierarchicalMemory.get()``'s system message, and is also
available as a LlamaIndex memory block (:class:`ProfileMemoryBlock`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.language import mentions_event_time
from llama_index_memory_hierarchy.lifecycle.importance import effective_importance
from llama_index_memory_hierarchy.text import count_tokens
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager

#: First line of the profile section of the system message.
PROFILE_HEADER = "About this user (preferences and facts from earlier conversations):"
_PREFERENCE_PREDICATES = re.compile(
    r"^(prefer|like|love|enjoy|dislike|hate|adore|detest|want|wish|favou?rite|allergic|avoid|"
    r"is_allergic|is_vegetarian|is_vegan|usually|always|never)",
)
_PREFERENCE_TEXT = re.compile(
    r"\b(i (?:really |truly |do(?:n't| not) )?(?:like|love|prefer|enjoy|hate|dislike|adore|detest|avoid)|"
    r"i can(?:'t|not) stand|fav(?:ou)?rite|allergic|vegetarian|vegan|i(?:'d| would) rather|"
    r"please (?:always|never)|i (?:usually|always|never))\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|my|me|mine)\b", re.IGNORECASE)
_MAX_SOURCE_WORDS = 40


class ProfileEntry(BaseModel):
    """One line of the profile."""

    text: str
    kind: str = Field(description="'preference' or 'fact'.")
    memory_id: str
    importance: float
    confidence: float = 1.0
    since: datetime | None = None
    source_ids: list[str] = Field(default_factory=list)


class UserProfile(BaseModel):
    """Preferences and facts about one user, best first."""

    user_id: str
    preferences: list[ProfileEntry] = Field(default_factory=list)
    facts: list[ProfileEntry] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.preferences and not self.facts

    def text(self, max_tokens: int | None = None, *, header: bool = True) -> str:
        """The compact block: a header, then ``- preference: ...`` and ``- fact: ...`` lines within ``max_tokens``."""
        if self.empty:
            return ""
        lines: list[str] = [PROFILE_HEADER] if header else []
        used = count_tokens(PROFILE_HEADER) + 1 if header else 0
        added = 0
        # interleave by rank so that a small budget keeps the best of both kinds
        ranked = sorted(
            [*self.preferences, *self.facts], key=lambda e: (-(e.importance * (0.5 + 0.5 * e.confidence)), e.text)
        )
        for entry in ranked:
            line = f"- {entry.kind}: {entry.text}"
            cost = count_tokens(line) + 1
            if max_tokens is not None and used + cost > max_tokens:
                continue
            lines.append(line)
            used += cost
            added += 1
        return "\n".join(lines) if added else ""


class ProfileBuilder:
    """Builds :class:`UserProfile` objects from a manager's semantic memory."""

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    async def abuild(self, limit: int = 40) -> UserProfile:
        """The profile of the manager's user (empty when semantic memory holds nothing yet)."""
        from llama_index_memory_hierarchy.extraction import USER_ENTITY

        manager = self.manager
        profile = UserProfile(user_id=manager.user_id)
        records = manager.context.records
        if not await records.count(manager.user_id, memory_type=MemoryType.SEMANTIC):
            return profile
        semantic: Any = manager.memory.semantic
        facts = await semantic.aget_facts(USER_ENTITY)
        statements = [
            item
            for item in await semantic.aquery(order_by="-importance", limit=limit * 3, metadata={"kind": "statement"})
            if _FIRST_PERSON.search(item.content) and not item.metadata.get("origin")
        ]
        source_ids = sorted({s for fact in facts for s in (fact.metadata.get("source_ids") or [])})
        sources = {r.item.id: r.item for r in await records.get(manager.user_id, source_ids)} if source_ids else {}
        settings = manager.settings
        entries: dict[str, ProfileEntry] = {}
        shown_sources: set[str] = set()
        for item in sorted(
            facts,
            key=lambda i: (
                -effective_importance(i, strength=settings.access_reinforcement, saturation=settings.access_saturation)
            ),
        ):
            meta = item.metadata
            predicate = str(meta.get("predicate", ""))
            text = _fact_text(meta)
            source = _best_source([sources[s] for s in meta.get("source_ids") or [] if s in sources])
            kind = "preference" if _PREFERENCE_PREDICATES.match(predicate) else "fact"
            if source is not None:
                if source.id in shown_sources:
                    continue  # one line per sentence, however many facts it held
                shown_sources.add(source.id)
                text = " ".join(source.content.split())
                if _PREFERENCE_TEXT.search(text):
                    kind = "preference"
                elif mentions_event_time(text):
                    continue  # an event ("yesterday I met Tom"): episodic memory, not the profile
            key = " ".join(text.casefold().split())
            if key in entries:
                continue
            entries[key] = ProfileEntry(
                text=text,
                kind=kind,
                memory_id=item.id,
                importance=_importance(item, manager),
                confidence=float(meta.get("confidence", 1.0)),
                since=_parse_time(meta.get("valid_at")),
                source_ids=list(meta.get("source_ids") or []),
            )
        for item in statements:
            text = " ".join(item.content.split())
            key = " ".join(text.casefold().split())
            if key in entries or len(text.split()) > _MAX_SOURCE_WORDS:
                continue
            entries[key] = ProfileEntry(
                text=text,
                kind="preference" if _PREFERENCE_TEXT.search(text) else "fact",
                memory_id=item.id,
                importance=_importance(item, manager),
                since=item.timestamp,
            )
        ranked = sorted(entries.values(), key=lambda e: (-(e.importance * (0.5 + 0.5 * e.confidence)), e.text))[:limit]
        profile.preferences = [e for e in ranked if e.kind == "preference"]
        profile.facts = [e for e in ranked if e.kind == "fact"]
        return profile


def _importance(item: MemoryItem, manager: MemoryManager) -> float:
    settings = manager.settings
    return effective_importance(item, strength=settings.access_reinforcement, saturation=settings.access_saturation)


def _fact_text(meta: dict[str, Any]) -> str:
    from llama_index_memory_hierarchy.extraction import USER_ENTITY

    predicate = str(meta.get("predicate", "")).replace("_", " ")
    subject, obj = str(meta.get("subject", "")), str(meta.get("object", ""))
    if subject == USER_ENTITY:
        return f"{predicate} {obj}".strip()
    if obj == USER_ENTITY:
        return f"{subject} {predicate} the user".strip()
    return f"{subject} {predicate} {obj}".strip()


def _best_source(items: list[MemoryItem]) -> MemoryItem | None:
    """The user's own short first-person sentence a fact came from, if any."""
    for item in sorted(items, key=lambda i: i.timestamp):
        role = item.metadata.get("role")
        if role not in (None, "user") or item.metadata.get("origin"):  # not the user's words (an insight)
            continue
        if len(item.content.split()) <= _MAX_SOURCE_WORDS and _FIRST_PERSON.search(item.content):
            return item
    return None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


class ProfileMemoryBlock(BaseMemoryBlock[str]):
    """The user profile as a LlamaIndex memory block (``Memory(memory_blocks=[...])``)."""

    manager: Any = Field(description="The MemoryManager whose user this is.", exclude=True)
    max_tokens: int = Field(default=150, ge=1)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        profile = await self.manager.aget_profile()
        return profile.text(self.max_tokens, header=False)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        return None  # the profile is derived from semantic memory, not written to
