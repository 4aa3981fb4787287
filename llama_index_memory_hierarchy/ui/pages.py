"""The inspector's read-only pages: overview, search, timeline, the filtered list, graph, profile, get() preview,
a memory's page, and the access log (erasable with edits allowed)."""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.browse import tags_of, validate_tags
from llama_index_memory_hierarchy.stores.record_sql.rows import stored_time
from llama_index_memory_hierarchy.types import (
    MemoryType,
    parse_moment,
    validate_identifier,
)
from llama_index_memory_hierarchy.ui.inspector import Inspector, explanation_rows, int_param

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.types import MemoryItem

logger = logging.getLogger(__name__)


#: "all" searches the tiers of what happened and what is known; instructions are in every get() anyway.
SEARCH_TIERS = ("all", "episodic", "semantic", "perceptual", "procedural")
LIST_PAGE = 50
#: The graph page carries its own inline script and style (see graph_export): allowed only there.
GRAPH_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
TIMELINE_LIMIT = 500


async def overview(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    memory = app.memory
    stats = {}
    for tier in memory.tiers([MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PERCEPTUAL, MemoryType.PROCEDURAL]):
        stats[tier.memory_type.value] = await tier.aget_stats()
    return app.page(request, "overview.html", title="Overview", stats=stats)


async def search(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    query = (request.query_params.get("q") or "").strip()
    tier = request.query_params.get("tier") or "all"
    if tier not in SEARCH_TIERS:
        raise HTTPException(400, f"tier must be one of {', '.join(SEARCH_TIERS)}")
    limit = int_param(request.query_params.get("limit"), 10, 1, 50)
    results: list[dict[str, Any]] = []
    error = None
    if query:
        tiers = list(SEARCH_TIERS[1:4]) if tier == "all" else [tier]
        try:
            items = await app.memory.manager.aretrieve_memories(query, tiers, limit=limit)
        except MemoryValidationError as exc:
            items, error = [], str(exc)
        results = [{"item": item, "explanation": explanation_rows(item)} for item in items]
    return app.page(
        request,
        "search.html",
        title="Search",
        query=query,
        tier=tier,
        tiers=SEARCH_TIERS,
        limit=limit,
        results=results,
        error=error,
    )


async def timeline(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    params = request.query_params
    session = params.get("session") or None
    since, until = (params.get("since") or "").strip(), (params.get("until") or "").strip()
    limit = int_param(params.get("limit"), 200, 1, TIMELINE_LIMIT)
    episodic = app.memory.episodic
    try:
        start, end = _range(since, until)
        filters = {"session_id": session} if session else {}
        items = await episodic.aquery(order_by="-timestamp", limit=limit, start=start, end=end, **filters)
    except MemoryValidationError as exc:
        raise HTTPException(400, str(exc)) from None
    sessions: OrderedDict[str, list[MemoryItem]] = OrderedDict()
    for item in reversed(items):  # oldest first within a session; sessions by first event shown
        sessions.setdefault(item.session_id or "(no session)", []).append(item)
    return app.page(
        request,
        "timeline.html",
        title="Timeline",
        sessions=sessions,
        session=session,
        since=since,
        until=until,
        limit=limit,
    )


def _range(since: str, until: str) -> tuple[datetime | None, datetime | None]:
    """The bounds a form gives (a date, a time, 'today', an age like '7d'); an empty field is no bound."""
    start = parse_moment(since, "since") if since else None
    end = parse_moment(until, "until", end_of_day=True) if until else None
    if start and end and start > end:
        raise MemoryValidationError("since", "is after until")
    return start, end


async def memories(request: Request) -> Response:
    """Every stored memory matching the filters (tier, kind, tag, dates, history), newest first, paged."""
    app: Inspector = request.app.state.inspector
    params = request.query_params
    tier = params.get("tier") or "all"
    if tier not in SEARCH_TIERS:
        raise HTTPException(400, f"tier must be one of {', '.join(SEARCH_TIERS)}")
    kind, tag = (params.get("kind") or "").strip(), (params.get("tag") or "").strip()
    since, until = (params.get("since") or "").strip(), (params.get("until") or "").strip()
    history = params.get("history") == "1"
    offset = int_param(params.get("offset"), 0, 0, 10**9)
    try:
        start, end = _range(since, until)
        page = await app.memory.manager.alist_memories(
            tier=None if tier == "all" else MemoryType(tier),
            kind=validate_identifier(kind, "kind") if kind else None,
            start=start,
            end=end,
            tags=validate_tags([tag]) if tag else None,
            include_history=history,
            limit=LIST_PAGE,
            offset=offset,
        )
    except MemoryValidationError as exc:
        raise HTTPException(400, str(exc)) from None
    filters = {k: v for k, v in (("tier", tier), ("kind", kind), ("tag", tag), ("since", since), ("until", until)) if v}
    if history:
        filters["history"] = "1"

    def link(at: int) -> str:
        return "/memories?" + urlencode({**filters, "offset": str(at)})

    return app.page(
        request,
        "memories.html",
        title="Memories",
        page=page,
        tiers=SEARCH_TIERS,
        tier=tier,
        kind=kind,
        tag=tag,
        since=since,
        until=until,
        history=history,
        previous=link(max(0, offset - LIST_PAGE)) if offset else None,
        next=link(page.next_offset) if page.next_offset is not None else None,
        tags_of=tags_of,
    )


async def graph(request: Request) -> Response:
    """The current graph (drawn by ``/graph/view``) and, below it, the facts that no longer hold, with when."""
    app: Inspector = request.app.state.inspector
    semantic = app.memory.semantic
    parsed = json.loads(await semantic.aexport_knowledge_graph("json"))
    everything = json.loads(await semantic.aexport_knowledge_graph("json", include_history=True))
    names = {node["id"]: node["label"] for node in everything["nodes"]}
    superseded = [
        {
            "subject": names.get(edge["source"], edge["source"]),
            "relation": edge["label"].replace("_", " "),
            "object": names.get(edge["target"], edge["target"]),
            **{key: edge["properties"].get(key) for key in ("fact_id", "valid_at", "invalid_at")},
        }
        for edge in everything["edges"]
        if edge["properties"].get("status") != "current"
    ]
    return app.page(
        request,
        "graph.html",
        title="Knowledge graph",
        nodes=len(parsed.get("nodes", [])),
        edges=len(parsed.get("edges", [])),
        superseded=sorted(superseded, key=lambda fact: fact["invalid_at"] or "", reverse=True),
    )


async def graph_view(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    html = await app.memory.semantic.aexport_knowledge_graph("html")
    return HTMLResponse(html, headers={"Content-Security-Policy": GRAPH_POLICY})


async def profile(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    manager = app.memory.manager
    user_profile = await manager.aget_profile()
    text = await manager.aprofile_text()
    from llama_index_memory_hierarchy.text import count_tokens

    return app.page(
        request, "profile.html", title="Profile", profile=user_profile, text=text, tokens=count_tokens(text)
    )


async def context(request: Request) -> Response:
    """What ``get(input=...)`` would put before the chat history, with its token counts."""
    app: Inspector = request.app.state.inspector
    text = (request.query_params.get("input") or "").strip()
    messages: list[dict[str, Any]] = []
    error = None
    if text:
        from llama_index_memory_hierarchy.messages import message_text
        from llama_index_memory_hierarchy.text import count_tokens

        try:
            # the server's session has no turns of its own: get() returns only what memory injects
            for message in await app.memory.aget(input=text):
                body = message_text(message)
                sections = [
                    {
                        "tokens": count_tokens(part),
                        "lines": [{"text": line, "tokens": count_tokens(line)} for line in part.splitlines()],
                    }
                    for part in body.split("\n\n")
                    if part.strip()
                ]
                messages.append(
                    {"role": message.role.value, "text": body, "tokens": count_tokens(body), "sections": sections}
                )
        except MemoryValidationError as exc:
            error = str(exc)
    config = app.memory.config
    return app.page(
        request,
        "context.html",
        title="What get() injects",
        input=text,
        messages=messages,
        error=error,
        budget=config.memory_context_token_limit,
        total=sum(m["tokens"] for m in messages),
    )


async def memory_page(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    item = await app.find(request.path_params["memory_id"])
    relations = await app.memory.manager.arelations(item)
    return app.page(
        request,
        "memory.html",
        title="Memory",
        item=item,
        explanation=explanation_rows(item),
        relations=relations,
        tags=tags_of(item),
    )


async def access_log(request: Request) -> Response:
    """GET: what ``get()`` showed, when, for which input, newest first; POST (edits): erase the whole log."""
    app: Inspector = request.app.state.inspector
    manager = app.memory.manager
    if request.method == "POST":
        await app.check_edit(request)
        removed = await manager.aforget_access_log()
        logger.info("inspector: erased the access log (%d rows)", removed)
        return RedirectResponse("/access-log", status_code=303)
    offset = int_param(request.query_params.get("offset"), 0, 0, 10**9)
    rows = await manager.aaccess_log(limit=LIST_PAGE, offset=offset)
    context = app.memory.context
    ids = list(dict.fromkeys(i for row in rows for i in row["memory_ids"]))
    found = await context.runtime.arun(context.records.get(app.user_id, ids)) if ids else []
    items = {r.item.id: r.item for r in found}
    entries = [
        {
            "at": stored_time(row["at"]),  # a bad stored time is clamped, not a failed page
            "session_id": row["session_id"],
            "input": row["input"],
            "memories": [(i, items.get(i)) for i in row["memory_ids"]],
        }
        for row in rows
    ]
    more = f"/access-log?offset={offset + LIST_PAGE}" if len(rows) == LIST_PAGE else None
    return app.page(request, "access_log.html", title="Access log", entries=entries, next=more)
