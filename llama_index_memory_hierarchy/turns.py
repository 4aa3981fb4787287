"""A chat turn as text and as a memory: how it is written for the indexes, who said it, whose account it is.

One home for what the tiers index (``tiers.episodic``), the search reads (``retrieval.search``), consolidation
summarises and the hierarchy stores, so that a turn is written one way wherever it is read.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime

from llama_index_memory_hierarchy.extraction import USER_ENTITY
from llama_index_memory_hierarchy.types import MemoryItem

#: Importance given to a message by its role when the caller gives none.
ROLE_IMPORTANCE = {"user": 0.6, "assistant": 0.4, "tool": 0.3, "system": 0.3}


def speaker_of(item: MemoryItem) -> str | None:
    """Who said it: ``speaker`` metadata, else the chat role."""
    speaker = item.metadata.get("speaker") or item.metadata.get("role")
    return speaker if isinstance(speaker, str) else None


def in_conversation(item: MemoryItem) -> bool:
    """Whether a memory is part of the conversation (a turn, an event), not derived from it (a summary citing
    its ``source_ids``): only those are each other's keyword context (``EpisodicMemory.abuild_records``)."""
    return not item.metadata.get("source_ids")


def chat_party_of(item: MemoryItem) -> str | None:
    """Whose account a memory is in a chat: ``"user"`` for a turn the user said, a fact about them or a summary
    of their turns (``party`` metadata), ``"assistant"`` for its replies, None otherwise (a turn between people)."""
    meta = item.metadata
    if meta.get("kind") == "fact" and meta.get("subject") == USER_ENTITY:
        return "user"
    party = meta.get("role") or meta.get("party")
    return party if party in ("user", "assistant") else None


def format_turn(text: str, speaker: str | None = None, when: datetime | str | None = None) -> str:
    """One turn as indexed: ``"[8 May 2023] Caroline: text"`` (date and speaker when known)."""
    line = f"{speaker}: {text}" if speaker else text
    if when is None:
        return line
    stamp = when if isinstance(when, str) else f"{when.day} {when:%B %Y}"
    return f"[{stamp}] {line}"


def contextual_text(
    turns: Sequence[str],
    index: int,
    *,
    before: int = 1,
    after: int = 1,
    groups: Sequence[Hashable] | None = None,
    separator: str = "\n",
) -> str:
    """Turn ``index`` with up to ``before`` previous and ``after`` next turns, joined in order.

    ``turns`` are already formatted lines (see :func:`format_turn`). With ``groups``
    (for example session ids), only neighbours of the same group are included: a new
    session does not explain the last turn of the previous one.
    """
    if not 0 <= index < len(turns):
        raise IndexError(f"turn index {index} out of range for {len(turns)} turns")
    if before < 0 or after < 0:
        raise ValueError("before and after must be >= 0")
    group = groups[index] if groups is not None else None
    lines = []
    for j in range(max(0, index - before), min(len(turns), index + after + 1)):
        if groups is not None and groups[j] != group:
            continue
        lines.append(turns[j])
    return separator.join(lines)


#: Longest head of a neighbouring turn that goes into a turn's keyword document. Context names the topic;
#: a whole long neighbour would be tokenized again with each following turn (a 100,000-character memory
#: made the next turns of its session as slow to add as itself).
CONTEXT_TURN_CHARS = 1_000


def context_line(turn: str) -> str:
    """A neighbouring turn (formatted by :func:`format_turn`) as a turn's keyword document holds it."""
    return turn[:CONTEXT_TURN_CHARS]


def keyword_document(
    text: str,
    *,
    speaker: str | None = None,
    when: datetime | str | None = None,
    previous: Sequence[str] = (),
    following: Sequence[str] = (),
) -> str:
    """The text a keyword index should hold for one turn: its date, the turns around it, and the turn.

    ``previous`` and ``following`` are neighbouring turns of the same session, already
    formatted with :func:`format_turn`, oldest first; the recipe uses the two previous
    turns and none after, so a turn's document is final when it is written. Each neighbour
    contributes at most :data:`CONTEXT_TURN_CHARS` characters.
    """
    lines = [*map(context_line, previous), format_turn(text, speaker), *map(context_line, following)]
    return format_turn("\n".join(lines), None, when)
