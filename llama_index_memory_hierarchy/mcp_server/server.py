"""The MCP server: memory tools, the profile resource and a usage prompt, over stdio or streamable HTTP.

One process serves one folder or ``--config`` deployment. :class:`MemoryService` holds the
stores open once and one :class:`~llama_index_memory_hierarchy.hierarchy.HierarchicalMemory`
per user, made on first use; every tool call first settles *whose* memory it acts on (the
stdio server's fixed user, or the owner of the HTTP request's bearer token, see
:mod:`~llama_index_memory_hierarchy.mcp_server.access`) and reaches only that user's
hierarchy, so neither a ``user_id`` nor a memory id of another user gets through.

The memory tools reuse :class:`~llama_index_memory_hierarchy.tools.MemoryToolSpec` and
:class:`~llama_index_memory_hierarchy.tools.RagToolSpec` (the same text, ids and checks an
in-process agent gets); refusals come back as MCP tool errors (``isError``) with the precise
message, never as a crash of the server.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.mcp_server.access import Principal, TokenTable
from llama_index_memory_hierarchy.mcp_server.instructions import register_instruction_tools
from llama_index_memory_hierarchy.types import parse_moment, validate_content, validate_identifier

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.tools import MemoryToolSpec, RagToolSpec

logger = logging.getLogger(__name__)

SERVER_NAME = "llama-index-memory-hierarchy"
INSTRUCTIONS = """\
Long-term memory of the user you are talking with, kept across conversations and assistants.
Call `recall` before answering anything that may depend on what the user said before; call
`remember` when they tell you a lasting fact, preference, goal or decision. Every memory has a
full id: pass it to `update_memory` to correct it or to `forget` to delete it. `timeline` lists
what happened when, `profile` what is known about the user, `related_entities` who and what is
connected in their knowledge graph, and `search_documents` / `ask_documents` read the user's own
documents. You never need to pass `user_id`: the server knows whose memory this is."""

#: The spec's text for an id it could not find (it answers with text, the server with an error).
_NOT_FOUND_PREFIX = "No memory with id="
_MAX_TIMELINE = 200
_MAX_RELATED = 50
#: ``Bearer``, one space, an RFC 6750 token (no spaces).
_BEARER = re.compile(r"Bearer [A-Za-z0-9\-._~+/]+=*")

WritableTier = Literal["semantic", "episodic", "working"]
SearchTier = Literal["all", "working", "episodic", "semantic", "perceptual", "procedural"]
UserArg = Annotated[
    str | None,
    Field(
        description="Leave this out: the server already knows whose memory it serves. Only an admin token "
        "may name another user; any other value is refused."
    ),
]


class MemoryService:
    """The stores of one deployment, and one hierarchy (and tool specs) per user, opened on first use."""

    def __init__(self, config: MemoryConfig, *, llm: Any = None, principal: Principal | None = None) -> None:
        self.config = config
        self.llm = llm
        #: The fixed principal of a stdio server (None: each HTTP request's token says).
        self.principal = principal
        # opened on first use (or by warm_up), then held for the server's life: users come and go
        self._context: StoreContext | None = None
        self._opening = threading.Lock()
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()
        self._memories: dict[str, HierarchicalMemory] = {}
        self._specs: dict[str, MemoryToolSpec] = {}
        self._documents: dict[tuple[str, str], RagToolSpec] = {}
        self._closed = False

    def _stores(self) -> StoreContext:
        """The deployment's stores, opened once (an interrupted erasure is finished first)."""
        from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
        from llama_index_memory_hierarchy.stores.context import StoreContext

        with self._opening:
            if self._context is None:
                self._context = StoreContext.acquire(self.config, on_open=aresume_erasures)
            return self._context

    def warm_up(self) -> None:
        """Open the stores and load the embedding model now, so that the first call does not wait for them."""
        self._stores().embeddings.probe()

    def warm_up_in_background(self) -> None:
        """:meth:`warm_up` in a thread: a stdio client's ``initialize`` is answered meanwhile (the first tool
        call waits only for what is still loading)."""

        def warm() -> None:
            try:
                self.warm_up()
            except Exception:  # the first tool call opens the stores again and reports the error to the client
                logger.exception("opening the stores in the background failed")

        self._warming = threading.Thread(target=warm, name="lmh-mcp-warm-up", daemon=True)
        self._warming.start()

    def memory(self, user_id: str) -> HierarchicalMemory:
        """The hierarchy of ``user_id`` (one per user for the server's life, sharing the stores)."""
        from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

        with self._lock:
            if self._closed:
                raise MemoryHierarchyError("the server is shutting down")
            memory = self._memories.get(user_id)
            if memory is None:
                self._stores()  # shared by every user's hierarchy (from_defaults finds it open)
                memory = HierarchicalMemory.from_defaults(config=self.config, user_id=user_id)
                self._memories[user_id] = memory
            return memory

    def tools(self, user_id: str) -> MemoryToolSpec:
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        memory = self.memory(user_id)
        with self._lock:
            return self._specs.setdefault(user_id, MemoryToolSpec(memory))

    def documents(self, user_id: str, namespace: str) -> RagToolSpec:
        """The document tools of knowledge base ``namespace`` of ``user_id``."""
        from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase, kb_namespace
        from llama_index_memory_hierarchy.tools import RagToolSpec

        kb_namespace(namespace)
        memory = self.memory(user_id)
        with self._lock:
            spec = self._documents.get((user_id, namespace))
            if spec is None:
                kb = KnowledgeBase.from_defaults(
                    namespace=namespace, user_id=user_id, context=memory.context, llm=self.llm
                )
                spec = self._documents[(user_id, namespace)] = RagToolSpec(kb)
            return spec

    def close(self) -> None:
        """Close every hierarchy and knowledge base and release the stores (pending writes are applied)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            documents, memories = list(self._documents.values()), list(self._memories.values())
        for spec in documents:
            spec.knowledge_base.close()
        for memory in memories:
            memory.close()
        if self._warming is not None:
            self._warming.join()
        if self._context is not None:
            self._context.release()


class TokenFileVerifier:
    """The SDK's ``TokenVerifier`` over a :class:`TokenTable`: a bearer token becomes an ``AccessToken``."""

    def __init__(self, table: TokenTable) -> None:
        self.table = table

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self.table.lookup(token)
        if principal is None:
            logger.info("refused a request with an unknown bearer token")
            return None
        return AccessToken(
            token=token,
            client_id="admin" if principal.admin else f"user:{principal.user_id}",
            scopes=["memory"],
            subject=principal.user_id,
            claims={"lmh_user_id": principal.user_id, "lmh_admin": principal.admin},
        )


def _principal(service: MemoryService, ctx: Context | None) -> Principal:
    """Who this request acts for: the stdio server's user, or the owner of the HTTP request's token."""
    if service.principal is not None:
        return service.principal
    request = ctx.request_context.request if ctx is not None else None
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    token: AccessToken | None = getattr(user, "access_token", None) or get_access_token()
    if token is None or not token.claims:
        raise ToolError("unauthenticated: this server needs a bearer token on every request")
    return Principal(user_id=token.claims.get("lmh_user_id"), admin=bool(token.claims.get("lmh_admin")))


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


def build_server(service: MemoryService, tokens: TokenTable | None = None) -> MCPServer:
    """The ``MCPServer`` with every tool, resource and prompt, acting through ``service``.

    A service without a fixed user (HTTP) needs ``tokens``: each request then acts for the owner
    of its bearer token, and a request without a known token is refused with HTTP 401.
    """
    from llama_index_memory_hierarchy.version import __version__

    if service.principal is None and tokens is None:
        raise MemoryValidationError("tokens", "a server without a fixed user needs a token file")
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, **_auth_options(tokens))

    def user_of(ctx: Context | None, requested: str | None) -> str:
        try:
            return _principal(service, ctx).resolve_user(requested)
        except MemoryValidationError as exc:
            raise ToolError(str(exc)) from None

    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    destroy = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

    @server.tool(annotations=write, structured_output=False)
    async def remember(
        content: Annotated[str, Field(description="One self-contained statement, third person.")],
        ctx: Context,
        tier: Annotated[
            WritableTier, Field(description="semantic: lasting facts (default), episodic: events, working: notes")
        ] = "semantic",
        importance: Annotated[float, Field(ge=0, le=1, description="0.9 critical, 0.5 ordinary, 0.2 trivia")] = 0.5,
        user_id: UserArg = None,
    ) -> str:
        """Store something worth keeping about the user in long-term memory; returns the new memory's full id.

        Use it when the user tells you a lasting fact, preference, goal or decision ("I'm vegetarian",
        "my deadline is Friday") or asks you to remember something. Keep the id to update or forget it.

        Example: remember(content="The user's daughter is called Mia.", tier="semantic", importance=0.8)
        """
        spec = service.tools(user_of(ctx, user_id))
        return await _call(lambda: spec.aremember(content, tier, importance))

    @server.tool(annotations=read, structured_output=False)
    async def recall(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        ctx: Context,
        tier: Annotated[SearchTier, Field(description="all (default): every tier in one fused search, or one")] = "all",
        limit: Annotated[int, Field(ge=1, le=50, description="How many memories.")] = 5,
        user_id: UserArg = None,
    ) -> str:
        """Search long-term memory across tiers for what is relevant to a question; best first, with full ids.

        Use it before answering anything that may depend on earlier conversations (the user's name,
        preferences, plans, past events) and to find the id of a memory to update or forget.

        Example: recall(query="where does the user work", limit=3)
        """
        spec = service.tools(user_of(ctx, user_id))
        return await _call(lambda: spec.arecall(query, tier, limit))

    @server.tool(annotations=destroy, structured_output=False)
    async def update_memory(
        memory_id: Annotated[str, Field(description="The full id from recall or remember.")],
        ctx: Context,
        content: Annotated[str | None, Field(description="The corrected statement (omit to keep).")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="The new importance (omit to keep).")] = None,
        user_id: UserArg = None,
    ) -> str:
        """Correct or re-weight one existing memory, found by its full id; pass only what changes.

        Use it when the user corrects something remembered ("actually I moved to Berlin"). Find the
        id with recall first.

        Example: update_memory(memory_id="3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60", content="The user lives in Berlin.")
        """
        spec = service.tools(user_of(ctx, user_id))
        return await _call(lambda: spec.aupdate_memory(memory_id, content, importance))

    @server.tool(annotations=destroy, structured_output=False)
    async def forget(
        memory_id: Annotated[str, Field(description="The full id from recall or remember.")],
        ctx: Context,
        user_id: UserArg = None,
    ) -> str:
        """Delete one memory for good, found by its full id. This cannot be undone.

        Use it when the user asks you to forget something, or a memory is wrong and should go.

        Example: forget(memory_id="3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60")
        """
        spec = service.tools(user_of(ctx, user_id))
        return await _call(lambda: spec.aforget(memory_id))

    @server.tool(annotations=read, structured_output=False)
    async def timeline(
        ctx: Context,
        since: Annotated[
            str | None, Field(description="From: ISO date/time, 'today', 'yesterday' or an age like '7d', '12h'.")
        ] = None,
        until: Annotated[str | None, Field(description="To (inclusive), same forms; a bare date: its end.")] = None,
        session: Annotated[str | None, Field(description="Only this conversation's session id.")] = None,
        limit: Annotated[int, Field(ge=1, le=_MAX_TIMELINE, description="Most events, oldest first.")] = 50,
        user_id: UserArg = None,
    ) -> str:
        """What happened when: the user's episodic memory (conversation turns and events) in time order.

        Use it for "what did we talk about last week", "when did I mention X", or to review a session.

        Example: timeline(since="7d", limit=20)
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> str:
            start, end = _when(since, "since"), _when(until, "until", end_of_day=True)
            if start and end and start > end:
                raise MemoryValidationError("since", "is after until")
            if session is not None:
                validate_identifier(session, "session")
            items = await memory.episodic.aget_timeline(start=start, end=end, session_id=session, limit=limit)
            if not items:
                return "No events in this range."
            lines = [
                f"{i}. id={item.id} | {item.timestamp:%Y-%m-%d %H:%M:%S} UTC | session {item.session_id or '-'}"
                f" | {item.metadata.get('role') or 'event'}\n   {' '.join(item.content.split())[:600]}"
                for i, item in enumerate(items, start=1)
            ]
            return f"{len(items)} events (oldest first):\n" + "\n".join(lines)

        return await _call(run)

    @server.tool(annotations=read, structured_output=False)
    async def profile(ctx: Context, user_id: UserArg = None) -> str:
        """What is known about the user: their preferences and facts, best first, each with its memory id.

        Use it at the start of a conversation to personalise answers, or when the user asks what you know
        about them.

        Example: profile()
        """
        return await _call(lambda: _profile_text(service.memory(user_of(ctx, user_id))))

    @server.tool(annotations=read, structured_output=False)
    async def related_entities(
        entity: Annotated[str, Field(description="A person, place, thing or 'User' (the user themself).")],
        ctx: Context,
        depth: Annotated[int, Field(ge=1, le=3, description="How many hops in the knowledge graph.")] = 1,
        limit: Annotated[int, Field(ge=1, le=_MAX_RELATED, description="Most entities.")] = 20,
        user_id: UserArg = None,
    ) -> str:
        """Who and what is connected to an entity in the user's knowledge graph, nearest first, with the path.

        Use it for questions about relationships ("who is Mia's teacher", "what do I know about Acme").
        Each line names the relation and the id of the fact it comes from.

        Example: related_entities(entity="Mia", depth=2)
        """
        memory = service.memory(user_of(ctx, user_id))

        async def run() -> str:
            semantic: Any = memory.semantic
            related = await semantic.aget_related_entities(entity, depth=depth, limit=limit)
            if not related:
                return f"No entities connected to {entity!r} in memory."
            lines = [
                f"{i}. {r.name} ({r.type}) | hop {r.hop} | {r.path}" + (f" | fact id={r.fact_id}" if r.fact_id else "")
                for i, r in enumerate(related, start=1)
            ]
            return f"{len(related)} entities connected to {entity!r}:\n" + "\n".join(lines)

        return await _call(run)

    @server.tool(annotations=read, structured_output=False)
    async def memory_stats(ctx: Context, user_id: UserArg = None) -> str:
        """How much is in memory, per tier, as JSON (counts and each tier's statistics).

        Use it when the user asks how much you remember, or to check that remembering or forgetting worked.

        Example: memory_stats()
        """
        spec = service.tools(user_of(ctx, user_id))
        return await _call(spec.amemory_stats)

    @server.tool(annotations=read, structured_output=False)
    async def search_documents(
        query: Annotated[str, Field(description="What to look for in the user's documents.")],
        ctx: Context,
        namespace: Annotated[str, Field(description="Which knowledge base (default 'docs').")] = "docs",
        limit: Annotated[int, Field(ge=1, le=20, description="How many passages.")] = 5,
        user_id: UserArg = None,
    ) -> str:
        """Find passages in the user's own documents (their knowledge base); each with file, section and chunk id.

        Use it when you need exact wording or several sources. For a direct answer with citations use
        ask_documents.

        Example: search_documents(query="refund policy for damaged items", namespace="manuals", limit=3)
        """
        user = user_of(ctx, user_id)
        return await _call(lambda: service.documents(user, namespace).asearch_documents(query, limit))

    @server.tool(annotations=read, structured_output=False)
    async def ask_documents(
        question: Annotated[str, Field(description="A complete question about the user's documents.")],
        ctx: Context,
        namespace: Annotated[str, Field(description="Which knowledge base (default 'docs').")] = "docs",
        user_id: UserArg = None,
    ) -> str:
        """Answer a question from the user's own documents, with numbered citations; says so when they lack it.

        Use it for questions about the user's files, manuals, notes or policies. Needs the server to run
        with an LLM (``lmh mcp --llm ...``).

        Example: ask_documents(question="Which port does the service listen on?", namespace="manuals")
        """
        user = user_of(ctx, user_id)

        async def run() -> str:
            validate_content(question, "question")
            if service.llm is None:
                raise MemoryValidationError(
                    "ask_documents", "this server runs without an LLM (start it with --llm); use search_documents"
                )
            return await service.documents(user, namespace).aask_documents(question)

        return await _call(run)

    async def read_profile(requested: str | None) -> str:
        try:
            return await _profile_text(service.memory(_principal(service, None).resolve_user(requested)))
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

    register_instruction_tools(server, lambda ctx, user: service.tools(user_of(ctx, user)), _call)

    @server.prompt(name="use_memory", description="Instructions for an assistant that has this memory server.")
    def use_memory() -> str:
        return INSTRUCTIONS

    return server


async def _profile_text(memory: HierarchicalMemory) -> str:
    profile = await memory.manager.aget_profile()
    if profile.empty:
        return f"No profile of user {memory.user_id} yet: nothing lasting about them is in memory."
    lines = [f"Profile of user {memory.user_id} (best first):"]
    for entry in sorted([*profile.preferences, *profile.facts], key=lambda e: e.rank):
        lines.append(f"- {entry.kind}: {entry.text} (id={entry.memory_id}, importance {entry.importance:.2f})")
    for entry in profile.history:  # what no longer holds, with when it stopped
        until = entry.until.date().isoformat() if entry.until else "?"
        lines.append(f"- no longer ({entry.kind}, until {until}): {entry.text} (id={entry.memory_id})")
    return "\n".join(lines)


class ExactBearer:
    """ASGI middleware: an ``Authorization`` header must read exactly ``Bearer <token>`` (else 401).

    The SDK takes any capitalisation of the scheme and everything after it as the token; a header
    in another form is a client bug or a probe, refused before the token is looked at.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            values = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
            if values and (len(values) > 1 or not _BEARER.fullmatch(values[0])):
                from starlette.responses import JSONResponse

                response = JSONResponse(
                    {"error": "invalid_request", "error_description": "use exactly 'Authorization: Bearer <token>'"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer error="invalid_request"'},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, *, host: str, path: str) -> Any:
    """The streamable HTTP app of ``server`` at ``path``, refusing malformed ``Authorization`` headers."""
    return ExactBearer(server.streamable_http_app(host=host, streamable_http_path=path))


def _auth_options(table: TokenTable | None) -> dict[str, Any]:
    """Bearer-token settings for the SDK (HTTP); none for a server with a fixed user."""
    if table is None:
        return {}
    from mcp.server.auth.settings import AuthSettings

    return {
        "token_verifier": TokenFileVerifier(table),
        # the tokens are issued out of band (the token file): no OAuth server, no resource metadata
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
    }


__all__ = [
    "INSTRUCTIONS",
    "SERVER_NAME",
    "ExactBearer",
    "MemoryService",
    "TokenFileVerifier",
    "build_server",
    "http_app",
]
