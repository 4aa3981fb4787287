"""What the MCP tools return as ``structuredContent``: pydantic models, so that each tool publishes an output schema.

Each tool also answers with text (what an LLM reads); these models are the same result for
programs, validated by the SDK against the published schema before it is sent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.types import MemoryItem

#: Metadata keys the results leave out: the replayed chat message (large, shown as ``content``) and the tags
#: (a field of their own).
_HIDDEN_METADATA = frozenset({"chat_message", "tags"})


class MemoryRecord(BaseModel):
    """One memory as the tools show it."""

    id: str = Field(description="The full memory id: pass it to get_memory, update_memory or forget.")
    tier: str = Field(description="working, episodic, semantic or perceptual")
    content: str
    occurred_at: str = Field(description="When the remembered event happened (ISO 8601, UTC).")
    stored_at: str = Field(description="When it was stored (ISO 8601, UTC).")
    importance: float
    pinned: bool
    access_count: int
    session_id: str | None = None
    kind: str | None = Field(default=None, description="For semantic memories: fact, statement, preference, ...")
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = Field(default=None, description="Relevance (recall only), higher is better.")

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryRecord:
        shown = {k: v for k, v in item.metadata.items() if k not in _HIDDEN_METADATA}
        tags = item.metadata.get("tags")
        return cls(
            id=item.id,
            tier=item.memory_type.value,
            content=item.content,
            occurred_at=item.timestamp.isoformat(),
            stored_at=item.created_at.isoformat(),
            importance=item.importance,
            pinned=item.pinned,
            access_count=item.access_count,
            session_id=item.session_id,
            kind=item.metadata.get("kind") if isinstance(item.metadata.get("kind"), str) else None,
            tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
            metadata=json.loads(json.dumps(shown, default=str)),  # JSON-safe whatever a writer stored
            score=item.score,
        )


class FactVersion(BaseModel):
    """One version of a fact: what held from when to when, and what replaced it."""

    id: str
    statement: str
    subject: str | None = None
    relation: str | None = None
    object: str | None = None
    valid_at: str | None = Field(default=None, description="Since when it held (ISO 8601).")
    invalid_at: str | None = Field(default=None, description="Until when it held; null while it still holds.")
    superseded_by: str | None = Field(default=None, description="The id of the fact that replaced it.")
    current: bool

    @classmethod
    def of(cls, item: MemoryItem) -> FactVersion:
        meta = item.metadata

        def text(key: str) -> str | None:
            value = meta.get(key)
            return value if isinstance(value, str) else None

        return cls(
            id=item.id,
            statement=item.content,
            subject=text("subject"),
            relation=text("predicate"),
            object=text("object"),
            valid_at=text("valid_at"),
            invalid_at=text("invalid_at"),
            superseded_by=text("superseded_by"),
            current=meta.get("invalid_at") is None,
        )


class Remembered(BaseModel):
    id: str
    tier: str


class Updated(BaseModel):
    memory: MemoryRecord = Field(description="The memory as it now reads.")


class RecallResult(BaseModel):
    query: str
    memories: list[MemoryRecord]


class MemoryPage(BaseModel):
    memories: list[MemoryRecord]
    total: int = Field(description="How many memories match the filters, over every page.")
    offset: int
    next_offset: int | None = Field(description="Pass as offset for the next page; null on the last page.")


class MemoryDetail(BaseModel):
    memory: MemoryRecord
    sources: list[MemoryRecord] = Field(description="The memories it was derived from (a fact's turns, ...).")
    derived: list[MemoryRecord] = Field(description="Memories derived from it (facts, summaries, insights).")
    history: list[FactVersion] = Field(description="For a fact: every version of it, oldest first (else empty).")


class Forgotten(BaseModel):
    deleted: dict[str, str] = Field(description="Deleted memory id -> its tier.")
    derived: dict[str, str] = Field(description="Memories derived only from those, deleted too -> their tier.")
    not_found: list[str] = Field(description="Ids that are not memories of this user (nothing done for them).")


class Erased(BaseModel):
    user_id: str
    rows: int = Field(description="Rows deleted from the record store.")
    files: int
    compacted: bool


class FactHistory(BaseModel):
    entity: str
    facts: list[FactVersion]


class Timeline(BaseModel):
    events: list[MemoryRecord] = Field(description="Episodic memories in time order, oldest first.")


class RelatedEntity(BaseModel):
    """An entity reached through the knowledge graph (the fields of ``graph_search.RelatedEntity``)."""

    id: str
    name: str
    type: str
    hop: int = Field(description="How many relations away from the asked entity.")
    relation: str
    direction: str = Field(description="'out': the path points to it; 'in': it points back.")
    via: str
    fact_id: str | None = Field(description="The fact memory the relation comes from.")
    confidence: float | None
    path: str


class RelatedEntities(BaseModel):
    entity: str
    related: list[RelatedEntity] = Field(description="Connected entities, nearest first, each with its path.")


class ProfileLine(BaseModel):
    """One line of the profile (the fields of ``lifecycle.profile.ProfileEntry``)."""

    text: str
    kind: str
    memory_id: str
    importance: float
    confidence: float
    since: str | None = Field(default=None, description="Since when it holds (ISO 8601).")
    until: str | None = Field(default=None, description="Until when it held (history only).")
    standing: bool = Field(description="Constrains any answer (diet, allergy, language, ...).")
    source_ids: list[str]


class Profile(BaseModel):
    user_id: str
    preferences: list[ProfileLine]
    facts: list[ProfileLine]
    history: list[ProfileLine] = Field(description="What no longer holds, latest first.")


class MemoryStats(BaseModel):
    user_id: str
    session_id: str
    tiers: dict[str, dict[str, Any]] = Field(
        description="Tier name -> its statistics (count, first and last times, ...)."
    )


def tool_result(text: str, data: BaseModel) -> CallToolResult:
    """Text for the LLM and the same result as ``structuredContent`` (checked by the SDK against the schema)."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=data.model_dump(mode="json")
    )


class Instruction(BaseModel):
    """One standing instruction of the user (procedural memory)."""

    id: str = Field(description="The full id: pass it to remove_instruction.")
    instruction: str
    since: str = Field(description="When the user gave it (ISO 8601, UTC).")
    condition: str | None = Field(default=None, description="When it applies, if the user said.")
    current: bool = Field(description="False once a newer rule on the same matter replaced it.")
    ended_at: str | None = Field(default=None, description="When it was replaced; null while it holds.")
    superseded_by: str | None = Field(default=None, description="The id of the rule that replaced it.")

    @classmethod
    def of(cls, item: MemoryItem) -> Instruction:
        meta = item.metadata

        def text(key: str) -> str | None:
            value = meta.get(key)
            return str(value) if value else None

        return cls(
            id=item.id,
            instruction=item.content,
            since=item.timestamp.isoformat(),
            condition=text("condition"),
            current=not meta.get("invalid_at"),
            ended_at=text("invalid_at"),
            superseded_by=text("superseded_by"),
        )


class Instructions(BaseModel):
    instructions: list[Instruction] = Field(description="Oldest first; replaced ones only with include_history.")


class InstructionAdded(BaseModel):
    instruction: Instruction
    replaced: list[Instruction] = Field(description="The older rules on the same matter that it ended.")


class InstructionRemoved(BaseModel):
    instruction: Instruction = Field(description="The deleted rule, as it read.")


class Passage(BaseModel):
    chunk_id: str = Field(description="The chunk's id in the knowledge base.")
    source: str = Field(description="File, section and page, as cited.")
    file: str | None = None
    section: str | None = Field(default=None, description="The heading path of the chunk.")
    score: float
    text: str


class Passages(BaseModel):
    query: str
    namespace: str
    passages: list[Passage] = Field(description="Best first.")


class Citation(BaseModel):
    number: int = Field(description="The [n] the answer cites it by.")
    source: str = Field(description="File, section and page.")


class Answer(BaseModel):
    question: str
    namespace: str
    answer: str
    insufficient: bool = Field(description="True when the documents do not contain the answer.")
    citations: list[Citation]
    chunk_ids: list[str] = Field(description="The chunks the answer was grounded in.")


class DocumentsAdded(BaseModel):
    namespace: str
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    failed: dict[str, str] = Field(description="File -> why it was not ingested.")
    chunks_written: int


__all__ = [
    "Answer",
    "Citation",
    "DocumentsAdded",
    "Erased",
    "FactHistory",
    "FactVersion",
    "Forgotten",
    "Instruction",
    "InstructionAdded",
    "InstructionRemoved",
    "Instructions",
    "MemoryDetail",
    "MemoryPage",
    "MemoryRecord",
    "MemoryStats",
    "Passage",
    "Passages",
    "Profile",
    "ProfileLine",
    "RecallResult",
    "RelatedEntities",
    "RelatedEntity",
    "Remembered",
    "Timeline",
    "Updated",
    "tool_result",
]
