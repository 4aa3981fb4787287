"""The MCP tools that show the user's context: ``timeline``, ``profile``, ``related_entities``, ``memory_stats``.

The library stack (LlamaIndex, the tiers) loads on the first call, not with the server (see ``bench/mcp_startup.py``).
Each answers with text (what an LLM reads) and the same result as ``structuredContent`` under its published
output schema (:mod:`.results`); registered by :func:`register_context_tools` from ``build_server``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.mcp_server.arguments import READ, UserArg
from llama_index_memory_hierarchy.mcp_server.results import (
    MemoryRecord,
    MemoryStats,
    Profile,
    RelatedEntities,
    RelatedEntity,
    Timeline,
    tool_result,
)
from llama_index_memory_hierarchy.types import parse_moment, validate_content, validate_identifier

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.lifecycle.profile import UserProfile
    from llama_index_memory_hierarchy.tools import MemoryToolSpec

_MAX_TIMELINE = 200
_MAX_RELATED = 50


async def profile_text(memory: HierarchicalMemory, profile: UserProfile | None = None) -> str:
    """The profile as the LLM reads it (the ``profile`` tool and the ``memory://profile`` resource)."""
    profile = profile or await memory.manager.aget_profile()
    if profile.empty:
        return f"No profile of user {memory.user_id} yet: nothing lasting about them is in memory."
    lines = [f"Profile of user {memory.user_id} (best first):"]
    for entry in sorted([*profile.preferences, *profile.facts], key=lambda e: e.rank):
        lines.append(f"- {entry.kind}: {entry.text} (id={entry.memory_id}, importance {entry.importance:.2f})")
    for entry in profile.history:  # what no longer holds, with when it stopped
        until = entry.until.date().isoformat() if entry.until else "?"
        lines.append(f"- no longer ({entry.kind}, until {until}): {entry.text} (id={entry.memory_id})")
    return "\n".join(lines)


def register_context_tools(
    server: MCPServer,
    memory_for: Callable[[Context, str | None], HierarchicalMemory],
    tools_for: Callable[[Context, str | None], MemoryToolSpec],
    structured: Callable[[Callable[[], Awaitable[CallToolResult]]], Awaitable[CallToolResult]],
) -> None:
    """Add the four tools to ``server``; ``memory_for`` and ``tools_for`` give the hierarchy and the tool spec
    a request acts for, ``structured`` runs a tool body as the other structured tools do (refusals become
    tool errors naming the field)."""

    @server.tool(annotations=READ)
    async def timeline(
        ctx: Context,
        since: Annotated[
            str | None, Field(description="From: ISO date/time, 'today', 'yesterday' or an age like '7d', '12h'.")
        ] = None,
        until: Annotated[str | None, Field(description="To (inclusive), same forms; a bare date: its end.")] = None,
        session: Annotated[str | None, Field(description="Only this conversation's session id.")] = None,
        limit: Annotated[int, Field(ge=1, le=_MAX_TIMELINE, description="Most events, oldest first.")] = 50,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Timeline]:
        """What happened when: the user's episodic memory (conversation turns and events) in time order.

        Use it for "what did we talk about last week", "when did I mention X", or to review a session.

        Example: timeline(since="7d", limit=20)
        """
        memory = memory_for(ctx, user_id)

        async def run() -> CallToolResult:
            start = parse_moment(since, "since") if since is not None else None
            end = parse_moment(until, "until", end_of_day=True) if until is not None else None
            if start and end and start > end:
                raise MemoryValidationError("since", "is after until")
            if session is not None:
                validate_identifier(session, "session")
            items = await memory.episodic.aget_timeline(start=start, end=end, session_id=session, limit=limit)
            result = Timeline(events=[MemoryRecord.of(i) for i in items])
            if not items:
                return tool_result("No events in this range.", result)
            lines = [
                f"{i}. id={item.id} | {item.timestamp:%Y-%m-%d %H:%M:%S} UTC | session {item.session_id or '-'}"
                f" | {item.metadata.get('role') or 'event'}\n   {' '.join(item.content.split())[:600]}"
                for i, item in enumerate(items, start=1)
            ]
            return tool_result(f"{len(items)} events (oldest first):\n" + "\n".join(lines), result)

        return await structured(run)

    @server.tool(annotations=READ)
    async def profile(ctx: Context, user_id: UserArg = None) -> Annotated[CallToolResult, Profile]:
        """What is known about the user: their preferences and facts, best first, each with its memory id.

        Use it at the start of a conversation to personalise answers, or when the user asks what you know
        about them.

        Example: profile()
        """
        memory = memory_for(ctx, user_id)

        async def run() -> CallToolResult:
            found = await memory.manager.aget_profile()
            return tool_result(await profile_text(memory, found), Profile.model_validate(found.model_dump(mode="json")))

        return await structured(run)

    @server.tool(annotations=READ)
    async def related_entities(
        entity: Annotated[str, Field(description="A person, place, thing or 'User' (the user themself).")],
        ctx: Context,
        depth: Annotated[int, Field(ge=1, le=3, description="How many hops in the knowledge graph.")] = 1,
        limit: Annotated[int, Field(ge=1, le=_MAX_RELATED, description="Most entities.")] = 20,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, RelatedEntities]:
        """Who and what is connected to an entity in the user's knowledge graph, nearest first, with the path.

        Use it for questions about relationships ("who is Mia's teacher", "what do I know about Acme").
        Each line names the relation and the id of the fact it comes from.

        Example: related_entities(entity="Mia", depth=2)
        """
        memory = memory_for(ctx, user_id)

        async def run() -> CallToolResult:
            semantic: Any = memory.semantic
            name = validate_content(entity, "entity")  # the tier's own check would name its parameter, 'name'
            related = await semantic.aget_related_entities(name, depth=depth, limit=limit)
            shown = [RelatedEntity.model_validate(r.model_dump()) for r in related]
            result = RelatedEntities(entity=entity, related=shown)
            if not related:
                return tool_result(f"No entities connected to {entity!r} in memory.", result)
            lines = [
                f"{i}. {r.name} ({r.type}) | hop {r.hop} | {r.path}" + (f" | fact id={r.fact_id}" if r.fact_id else "")
                for i, r in enumerate(related, start=1)
            ]
            return tool_result(f"{len(related)} entities connected to {entity!r}:\n" + "\n".join(lines), result)

        return await structured(run)

    @server.tool(annotations=READ)
    async def memory_stats(ctx: Context, user_id: UserArg = None) -> Annotated[CallToolResult, MemoryStats]:
        """How much is in memory, per tier, as JSON (counts and each tier's statistics).

        Use it when the user asks how much you remember, or to check that remembering or forgetting worked.

        Example: memory_stats()
        """
        spec = tools_for(ctx, user_id)

        async def run() -> CallToolResult:
            text = await spec.amemory_stats()
            tiers = json.loads(text)
            user, session = tiers.pop("user_id"), tiers.pop("session_id")
            return tool_result(text, MemoryStats(user_id=user, session_id=session, tiers=tiers))

        return await structured(run)
