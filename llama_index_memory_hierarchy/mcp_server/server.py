"""The MCP server: memory tools, the profile resource and a usage prompt, over stdio or streamable HTTP.

One process serves one folder or ``--config`` deployment. :class:`~.service.MemoryService` holds the
stores open once and one :class:`~llama_index_memory_hierarchy.hierarchy.HierarchicalMemory`
per user, made on first use; every tool call first settles *whose* memory it acts on (the
stdio server's fixed user, or the owner of the HTTP request's bearer token, see
:mod:`~llama_index_memory_hierarchy.mcp_server.access` and :mod:`.http_auth`) and reaches only that
user's hierarchy, so neither a ``user_id`` nor a memory id of another user gets through. This module
assembles the server: the memory tools here, the others from the modules beside it.

The memory tools reuse :class:`~llama_index_memory_hierarchy.tools.MemoryToolSpec` and
:class:`~llama_index_memory_hierarchy.tools.RagToolSpec` (the same text, ids and checks an
in-process agent gets); refusals come back as MCP tool errors (``isError``) with the precise
message, never as a crash of the server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.mcp_server.access import TokenTable
from llama_index_memory_hierarchy.mcp_server.arguments import DESTROY, READ, WRITE, UserArg
from llama_index_memory_hierarchy.mcp_server.context_tools import profile_text, register_context_tools
from llama_index_memory_hierarchy.mcp_server.document_tools import register_document_tools
from llama_index_memory_hierarchy.mcp_server.http_auth import auth_options, request_principal
from llama_index_memory_hierarchy.mcp_server.instructions import register_instruction_tools
from llama_index_memory_hierarchy.mcp_server.results import (
    Erased,
    FactHistory,
    FactVersion,
    Forgotten,
    MemoryDetail,
    MemoryPage,
    MemoryRecord,
    RecallResult,
    Remembered,
    Updated,
    tool_result,
)
from llama_index_memory_hierarchy.mcp_server.service import MemoryService
from llama_index_memory_hierarchy.types import (
    MemoryType,
    parse_moment,
    validate_content,
    validate_identifier,
    validate_memory_id,
    validate_metadata,
)

# validate_tags and format_item are imported inside the tools that use them: they bring llama_index.core,
# which a stdio client's initialize must not wait for (bench/mcp_startup.py).

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

logger = logging.getLogger(__name__)

SERVER_NAME = "llama-index-memory-hierarchy"
INSTRUCTIONS = """\
Long-term memory of the user you are talking with, kept across conversations and assistants.
Call `recall` before answering anything that may depend on what the user said before; call
`remember` when they tell you a lasting fact, preference, goal or decision. Every memory has a
full id: pass it to `get_memory` to see where it comes from, to `update_memory` to correct it or
(in a list) to `forget` to delete it. `list_memories` browses what is stored, `timeline` lists
what happened when, `fact_history` how a fact changed, `profile` what is known about the user,
`related_entities` who and what is connected in their knowledge graph, and `search_documents` /
`ask_documents` read the user's own documents (`add_document` / `ingest_documents` add files).
You never need to pass `user_id`: the server knows whose memory this is."""

#: The spec's text for an id it could not find (it answers with text, the server with an error).
_NOT_FOUND_PREFIX = "No memory with id="
_MAX_FORGET = 100
_MAX_PAGE = 100

WritableTier = Literal["semantic", "episodic", "working"]
SearchTier = Literal["all", "working", "episodic", "semantic", "perceptual", "procedural"]
ListTier = Literal["all", "episodic", "semantic", "perceptual"]


async def _call(step: Callable[[], Awaitable[str]]) -> str:
    """Run a tool body; refusals (bad input, unknown ids, another user) become MCP tool errors."""
    try:
        text = await step()
    except MemoryHierarchyError as exc:
        raise ToolError(str(exc)) from None
    if text.startswith("Error: "):  # the specs answer refusals with text an in-process agent reads
        raise ToolError(text.removeprefix("Error: "))
    if text.startswith(_NOT_FOUND_PREFIX):
        raise ToolError(f"memory_id: {text}")
    return text


def _when(value: str | None, field: str, *, end_of_day: bool = False) -> Any:
    if value is None:
        return None
    return parse_moment(value, field, end_of_day=end_of_day)


def _range(since: str | None, until: str | None) -> tuple[Any, Any]:
    start, end = _when(since, "since"), _when(until, "until", end_of_day=True)
    if start and end and start > end:
        raise MemoryValidationError("since", "is after until")
    return start, end


async def _structured(step: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """Run a structured tool body; refusals become MCP tool errors naming the field."""
    try:
        return await step()
    except MemoryHierarchyError as exc:
        raise ToolError(str(exc)) from None


async def afact_history(memory: HierarchicalMemory, entity: str, relation: str | None = None) -> FactHistory:
    """Every fact about ``entity`` (as subject or object), superseded ones too, oldest first; one relation if given."""
    name = validate_content(entity, "entity")
    facts = await memory.semantic.aget_facts(name, include_history=True)
    if relation is not None:
        from llama_index_memory_hierarchy.extraction.relations import normalize_predicate

        wanted = normalize_predicate(validate_content(relation, "relation"))
        facts = [f for f in facts if f.metadata.get("predicate") == wanted]
    return FactHistory(entity=name, facts=[FactVersion.of(f) for f in facts])


def build_server(service: MemoryService, tokens: TokenTable | None = None) -> MCPServer:
    """The ``MCPServer`` with every tool, resource and prompt, acting through ``service``.

    A service without a fixed user (HTTP) needs ``tokens``: each request then acts for the owner
    of its bearer token, and a request without a known token is refused with HTTP 401.
    """
    from llama_index_memory_hierarchy.version import __version__

    if service.principal is None and tokens is None:
        raise MemoryValidationError("tokens", "a server without a fixed user needs a token file")
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, **auth_options(tokens))

    def user_of(ctx: Context | None, requested: str | None) -> str:
        try:
            return request_principal(service, ctx).resolve_user(requested)
        except MemoryValidationError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=WRITE)
    async def remember(
        content: Annotated[str, Field(description="One self-contained statement, third person.")],
        ctx: Context,
        tier: Annotated[
            WritableTier, Field(description="semantic: lasting facts (default), episodic: events, working: notes")
        ] = "semantic",
        importance: Annotated[float, Field(ge=0, le=1, description="0.9 critical, 0.5 ordinary, 0.2 trivia")] = 0.5,
        occurred_at: Annotated[
            str | None, Field(description="When it happened (default now): ISO date/time, 'yesterday' or an age '3d'.")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Labels to find it by with list_memories.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra JSON fields kept with it.")] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Store something worth keeping about the user in long-term memory; returns the new memory's full id.

        Use it when the user tells you a lasting fact, preference, goal or decision ("I'm vegetarian",
        "my deadline is Friday") or asks you to remember something. Keep the id to update or forget it.
        Give occurred_at for an event in the past ("we moved house last March").

        Example: remember(content="The user's daughter is called Mia.", tier="semantic", importance=0.8)
        """
        spec = service.tools(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            from llama_index_memory_hierarchy.lifecycle.browse import validate_tags

            text = validate_content(content)
            when = _when(occurred_at, "occurred_at")
            extra = {**validate_metadata(metadata), "source": "agent_tool"}
            if labels := validate_tags(tags):
                extra["tags"] = labels
            target = spec.resolve_tier(tier)
            memory_id = await target.aadd(text, importance=importance, metadata=extra, timestamp=when)
            kind = target.memory_type.value
            return tool_result(f"Remembered in {kind} memory with id={memory_id}.", Remembered(id=memory_id, tier=kind))

        return await _structured(run)

    @server.tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        ctx: Context,
        tier: Annotated[SearchTier, Field(description="all (default): every tier in one fused search, or one")] = "all",
        limit: Annotated[int, Field(ge=1, le=50, description="How many memories.")] = 5,
        since: Annotated[
            str | None, Field(description="Only what happened from: ISO date/time or an age '7d'.")
        ] = None,
        until: Annotated[str | None, Field(description="Only what happened until (inclusive), same forms.")] = None,
        min_score: Annotated[
            float | None,
            Field(ge=0, description="Show every match scoring at least this, in place of the relevance floor."),
        ] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Search long-term memory across tiers for what is relevant to a question; best first, with full ids.

        Use it before answering anything that may depend on earlier conversations (the user's name,
        preferences, plans, past events) and to find the id of a memory to update or forget. since/until
        bound when the remembered events happened ("what did I decide last week": since="7d").

        Example: recall(query="where does the user work", limit=3)
        """
        spec = service.tools(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            start, end = _range(since, until)
            question = validate_content(query, "query")
            if tier == "all":
                types = [t.memory_type for t in spec.available_tiers()]
            else:
                types = [spec.resolve_tier(tier, writable=False).memory_type]
            bounds: dict[str, object] = {"time_range": (start, end)} if start or end else {}
            if min_score is not None:  # the caller's own bar, in place of the relevance floor
                bounds["min_score"] = min_score
            items = await spec.hierarchy.asearch(question, limit, memory_types=types, **bounds)
            found = RecallResult(query=question, memories=[MemoryRecord.of(item) for item in items])
            if not items:
                return tool_result(f"Nothing relevant remembered for {question!r}.", found)
            from llama_index_memory_hierarchy.tools import format_item

            lines = [format_item(i, item) for i, item in enumerate(items, start=1)]
            return tool_result(f"Found {len(items)} memories (best first):\n" + "\n".join(lines), found)

        return await _structured(run)

    @server.tool(annotations=DESTROY)
    async def update_memory(
        memory_id: Annotated[str, Field(description="The full id from recall or remember.")],
        ctx: Context,
        content: Annotated[str | None, Field(description="The corrected statement (omit to keep).")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="The new importance (omit to keep).")] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Updated]:
        """Correct or re-weight one existing memory, found by its full id; pass only what changes.

        Use it when the user corrects something remembered ("actually I moved to Berlin"). Find the
        id with recall first.

        Example: update_memory(memory_id="3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60", content="The user lives in Berlin.")
        """
        spec = service.tools(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            text = await _call(lambda: spec.aupdate_memory(memory_id, content, importance))
            context = spec.hierarchy.context
            (record,) = await context.records.get(spec.hierarchy.user_id, [validate_memory_id(memory_id)])
            return tool_result(text, Updated(memory=MemoryRecord.of(record.item)))

        return await _structured(run)

    @server.tool(annotations=DESTROY)
    async def forget(
        memory_ids: Annotated[
            list[str], Field(min_length=1, max_length=_MAX_FORGET, description="The full ids from recall or remember.")
        ],
        ctx: Context,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Forgotten]:
        """Delete memories for good, found by their full ids, with what was derived only from them. Cannot be undone.

        Use it when the user asks you to forget something, or a memory is wrong and should go. Ids that
        are not this user's memories are listed as not found; nothing else happens for them.

        Example: forget(memory_ids=["3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60"])
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            ids = list(dict.fromkeys(validate_memory_id(i, "memory_ids") for i in memory_ids))
            report = await memory.manager.aforget_memories(ids)
            result = Forgotten(deleted=report.deleted, derived=report.derived, not_found=report.not_found)
            if not report.deleted:
                raise MemoryValidationError("memory_ids", f"No memory with id={', '.join(ids)}; nothing was deleted.")
            lines = [f"Forgot {tier} memory id={i}." for i, tier in report.deleted.items()]
            if report.derived:
                lines.append(f"Also deleted {len(report.derived)} memories derived only from them.")
            if report.not_found:
                lines.append(f"No memory with id={', '.join(report.not_found)}.")
            return tool_result("\n".join(lines), result)

        return await _structured(run)

    @server.tool(annotations=DESTROY)
    async def forget_all(
        confirm: Annotated[str, Field(description="The user id whose memory is erased, typed out to confirm.")],
        ctx: Context,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Erased]:
        """Erase EVERYTHING remembered about the user: every memory, document, file and index entry. Irreversible.

        Only when the user explicitly asks for all of their memory to be deleted. confirm must be their
        user id exactly (see memory_stats); anything else erases nothing.

        Example: forget_all(confirm="alice")
        """
        user = user_of(ctx, user_id)

        async def run() -> CallToolResult:
            if confirm != user:
                raise MemoryValidationError("confirm", "must be the user id being erased, exactly; nothing was erased")
            report = await service.memory(user).manager.aforget_user()
            erased = Erased(user_id=user, rows=report.total_rows, files=report.files, compacted=report.compacted)
            return tool_result(f"Erased every memory of user {user} ({report.total_rows} rows).", erased)

        return await _structured(run)

    @server.tool(annotations=READ)
    async def list_memories(
        ctx: Context,
        tier: Annotated[ListTier, Field(description="Which tier (default all stored ones).")] = "all",
        kind: Annotated[
            str | None, Field(description="Only this kind (semantic: fact, statement, preference, insight, ...).")
        ] = None,
        since: Annotated[str | None, Field(description="From: ISO date/time, 'today' or an age like '7d'.")] = None,
        until: Annotated[str | None, Field(description="To (inclusive), same forms.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories with all of these tags.")] = None,
        include_history: Annotated[bool, Field(description="Superseded facts too.")] = False,
        limit: Annotated[int, Field(ge=1, le=_MAX_PAGE, description="Memories per page.")] = 20,
        offset: Annotated[int, Field(ge=0, description="Skip this many (next_offset of the previous page).")] = 0,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, MemoryPage]:
        """Browse stored memories, newest first, filtered and paged (no search: every match, in time order).

        Use it to review what is remembered (all facts, a tag, last week's events) or to find ids to
        clean up. Page on with the returned next_offset.

        Example: list_memories(tier="semantic", kind="fact", limit=20)
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            from llama_index_memory_hierarchy.lifecycle.browse import validate_tags
            from llama_index_memory_hierarchy.tools import format_item

            start, end = _range(since, until)
            listed = await memory.manager.alist_memories(
                tier=None if tier == "all" else MemoryType(tier),
                kind=validate_identifier(kind, "kind") if kind is not None else None,
                start=start,
                end=end,
                tags=validate_tags(tags),
                include_history=include_history,
                limit=limit,
                offset=offset,
            )
            page = MemoryPage(
                memories=[MemoryRecord.of(item) for item in listed.items],
                total=listed.total,
                offset=offset,
                next_offset=listed.next_offset,
            )
            lines = [format_item(i, item) for i, item in enumerate(listed.items, start=1 + offset)]
            more = f"; next page: offset={page.next_offset}" if page.next_offset is not None else ""
            head = f"{page.total} memories match; showing {len(page.memories)} from offset {offset}{more}"
            return tool_result("\n".join([head, *lines]), page)

        return await _structured(run)

    @server.tool(annotations=READ)
    async def get_memory(
        memory_id: Annotated[str, Field(description="The full id from recall, list_memories or remember.")],
        ctx: Context,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, MemoryDetail]:
        """One memory in full: its text and fields, the memories it came from, what was derived from it, and
        for a fact every version of it.

        Use it to check where a memory comes from ("why do you think I live in Lyon?").

        Example: get_memory(memory_id="3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60")
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            item = await memory.manager.aget_memory(memory_id)
            if item is None:
                raise MemoryValidationError("memory_id", f"No memory with id={memory_id} of this user.")
            relations = await memory.manager.arelations(item)
            detail = MemoryDetail(
                memory=MemoryRecord.of(item),
                sources=[MemoryRecord.of(s) for s in relations.sources],
                derived=[MemoryRecord.of(d) for d in relations.derived],
                history=[FactVersion.of(v) for v in relations.versions],
            )
            m = detail.memory
            lines = [
                f"{m.tier} memory id={m.id} | {m.occurred_at} | importance {m.importance:.2f}"
                f"{' | pinned' if m.pinned else ''}{' | tags ' + ', '.join(m.tags) if m.tags else ''}",
                m.content,
                *(f"source id={r.id}: {r.content[:300]}" for r in detail.sources),
                *(f"derived id={r.id}: {r.content[:300]}" for r in detail.derived),
                *(
                    f"version id={v.id} ({'current' if v.current else 'until ' + str(v.invalid_at)}): {v.statement}"
                    for v in detail.history
                ),
            ]
            return tool_result("\n".join(lines), detail)

        return await _structured(run)

    @server.tool(annotations=READ)
    async def fact_history(
        entity: Annotated[str, Field(description="A person, place or thing, or 'User' for the user themself.")],
        ctx: Context,
        relation: Annotated[str | None, Field(description="Only this relation (e.g. 'lives in').")] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, FactHistory]:
        """Every fact about an entity over time, current and superseded, oldest first, with when each held.

        Use it for "where did I live before Berlin?" or "when did my job change?".

        Example: fact_history(entity="User", relation="lives in")
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> CallToolResult:
            history = await afact_history(memory, entity, relation)
            if not history.facts:
                return tool_result(f"No facts about {entity!r} in memory.", history)
            lines = [
                f"{i}. id={v.id} | {v.valid_at or '?'} -> {v.invalid_at or 'now'} | {v.statement}"
                for i, v in enumerate(history.facts, start=1)
            ]
            return tool_result(
                f"{len(history.facts)} facts about {entity!r} (oldest first):\n" + "\n".join(lines), history
            )

        return await _structured(run)

    async def read_profile(requested: str | None) -> str:
        try:
            return await profile_text(service.memory(request_principal(service, None).resolve_user(requested)))
        except (MemoryHierarchyError, ToolError) as exc:
            from mcp.server.mcpserver.exceptions import ResourceError

            raise ResourceError(str(exc)) from None

    # named apart from the `profile` tool: clients that list resources as tools (LlamaIndex's
    # McpToolSpec(include_resources=True)) need unique names
    @server.resource("memory://profile", name="user_profile", mime_type="text/plain")
    async def profile_resource() -> str:
        """The user's profile (preferences and facts from memory), to attach as context."""
        return await read_profile(None)

    @server.resource("memory://users/{user_id}/profile", name="named_user_profile", mime_type="text/plain")
    async def named_profile_resource(user_id: str) -> str:
        """The profile of the user named in the address: an admin token's way to read any user's (others: their own)."""
        return await read_profile(user_id)

    register_document_tools(
        server,
        lambda ctx, user, namespace: service.documents(user_of(ctx, user), namespace),
        roots=service.document_roots,
        has_llm=lambda: service.llm is not None,
        structured=_structured,
    )
    register_context_tools(
        server,
        lambda ctx, user: service.memory(user_of(ctx, user)),
        lambda ctx, user: service.tools(user_of(ctx, user)),
        _structured,
    )
    register_instruction_tools(server, lambda ctx, user: service.tools(user_of(ctx, user)), _call, _structured)

    @server.prompt(name="use_memory", description="Instructions for an assistant that has this memory server.")
    def use_memory() -> str:
        return INSTRUCTIONS

    return server


__all__ = ["INSTRUCTIONS", "SERVER_NAME", "build_server"]
