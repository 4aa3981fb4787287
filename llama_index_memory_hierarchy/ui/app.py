"""The inspector: a Starlette app with server-rendered Jinja2 pages over ONE user's memory.

Pages: overview, search (with each result's explanation when the search provides one), a
filtered, paged list per tier, the timeline by session and date range, the knowledge graph (the
``graph_export`` page, rendered live), the profile, what ``get()`` would inject for an input, with
token counts, a memory's page with its sources, what was derived from it and a fact's versions,
and the access log (what ``get()`` showed, when, for which input). With ``allow_edits``: create a
memory, edit one (content, importance, pin, tags), forget one (after a confirmation page), erase
the access log, and forget everything (after typing the user id).

Why it is safe to leave running on a developer machine:

- **One user, fixed at start.** The server holds a ``HierarchicalMemory`` of the user named on the
  command line (or in the deployment's config); no URL, form field or header selects another.
  Memory ids are looked up within that user only, and a request that names any other user in
  its query (``?user=``, ``?user_id=``) is refused with 403, so a page can never seem to show
  someone else's memory. To inspect another user, start another server, or:
- **Operator mode** (``lmh ui --operator``): a second secret, the operator's, printed as its own link.
  Only a request carrying it (its cookie or bearer) may choose, on the Users page (a same-origin POST
  with the CSRF token), which stored user's memory the pages show; the choice is a cookie honoured only
  beside the operator's secret, so the ordinary link still sees its one user whatever it sends.
- **A secret per run**, as Jupyter's token: ``lmh ui`` prints a link carrying it (``/?token=...``);
  opening it sets an ``HttpOnly``, ``SameSite=Strict`` cookie and drops the token from the address.
  Every page needs that cookie (or ``Authorization: Bearer <secret>``), so another process or user
  of the machine, or another web site, reads nothing; only ``/healthz`` and the CSS are open.
- **Loopback, and only its own host names.** It binds 127.0.0.1 by default, and answers only
  requests whose ``Host`` is the address it serves (DNS-rebinding pages get 400).
- **Edits are POST forms with a CSRF token**: a random per-process token in a hidden field,
  compared in constant time, plus ``Origin`` / ``Sec-Fetch-Site`` checks when the browser sends
  them. Read-only unless the server was started with ``--allow-edits``.
- **GETs change nothing**: searching and the ``get()`` preview here bump no access counts (a person
  looking is not the agent recalling; see :func:`~llama_index_memory_hierarchy.stores.access.uncounted`).
- **No external resources**: a strict ``Content-Security-Policy``; CSS and icon are served from
  the package; the graph view is self-contained and sandboxed in its own frame.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections import OrderedDict
from contextvars import ContextVar
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.browse import tags_of, validate_tags
from llama_index_memory_hierarchy.stores.access import uncounted
from llama_index_memory_hierarchy.tiers.procedural import is_current
from llama_index_memory_hierarchy.types import (
    MemoryType,
    parse_moment,
    validate_content,
    validate_identifier,
    validate_importance,
    validate_memory_id,
)

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.types import MemoryItem

logger = logging.getLogger(__name__)

#: Query parameters that would name a user: any value but the served user is refused.
USER_PARAMETERS = ("user", "user_id", "userid", "uid")
#: "all" searches the tiers of what happened and what is known; instructions are in every get() anyway.
SEARCH_TIERS = ("all", "episodic", "semantic", "perceptual", "procedural")
#: What the create form may write (perceptions come from files, working notes from a session).
CREATE_TIERS = ("semantic", "episodic")
LIST_PAGE = 50
PAGE_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
#: The graph page carries its own inline script and style (see graph_export): allowed only there.
GRAPH_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
STATIC = {"ui.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}
TIMELINE_LIMIT = 500
#: Paths served without the run's secret: nothing of any memory is in them.
OPEN_PATHS = ("/healthz", "/favicon.ico", "/static/")
#: The memory a request shows: the served user's, or the one an operator chose (see Inspector.memory).
_VIEWING: ContextVar[HierarchicalMemory | None] = ContextVar("lmh_ui_viewing", default=None)


class Inspector:
    """State of one server: the memory it inspects, whether edits are allowed, the CSRF token."""

    def __init__(
        self,
        memory: HierarchicalMemory,
        *,
        allow_edits: bool = False,
        location: str = "",
        access_token: str | None = None,
        operator_token: str | None = None,
    ) -> None:
        self.home = memory
        #: The operator's secret (operator mode only): the one that may choose which user to show.
        self.operator_token = operator_token
        self._others: dict[str, HierarchicalMemory] = {}
        self.allow_edits = allow_edits
        self.location = location
        self.csrf_token = secrets.token_urlsafe(32)
        #: The run's secret (the ``?token=`` of the printed link, then the cookie).
        self.access_token = access_token or secrets.token_urlsafe(32)
        # cookies are not scoped by port: a name of its own per secret keeps two inspectors apart
        self.cookie_name = "lmh_ui_" + hashlib.sha256(self.access_token.encode()).hexdigest()[:12]
        self.operator_cookie, self.view_cookie = self.cookie_name + "_op", self.cookie_name + "_view"
        env = Environment(
            loader=PackageLoader("llama_index_memory_hierarchy.ui", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates = Jinja2Templates(env=env)

    @property
    def memory(self) -> HierarchicalMemory:
        """The memory this request shows: the served user's, or the one its operator chose."""
        return _VIEWING.get() or self.home

    @property
    def user_id(self) -> str:
        return self.memory.user_id

    def is_operator(self, request: Request) -> bool:
        """Whether ``request`` carries the operator's secret (cookie or bearer); never outside operator mode."""
        token = self.operator_token
        if token is None:
            return False
        return any(
            given is not None and hmac.compare_digest(given.encode(), token.encode())
            for given in (request.cookies.get(self.operator_cookie), _bearer(request.headers.get("authorization")))
        )

    def memory_for(self, request: Request) -> HierarchicalMemory:
        """The served user's memory, or for an operator the user its choice cookie names (opened once, on
        the served memory's stores)."""
        chosen = request.cookies.get(self.view_cookie) if self.is_operator(request) else None
        if not chosen or chosen == self.home.user_id:
            return self.home
        try:
            chosen = validate_identifier(chosen, "user")
        except MemoryValidationError:
            return self.home
        if chosen not in self._others:
            from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

            self._others[chosen] = HierarchicalMemory.from_defaults(
                config=self.home.config, user_id=chosen, session_id=self.home.session_id
            )
        return self._others[chosen]

    def close(self) -> None:
        """Close the memories opened for an operator's choices (the served one is its opener's)."""
        for memory in self._others.values():
            memory.close()
        self._others.clear()

    # ------------------------------------------------------------------ rendering helpers
    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        context.update(
            user_id=self.user_id,
            operator=self.is_operator(request),
            home_user=self.home.user_id,
            allow_edits=self.allow_edits,
            csrf_token=self.csrf_token,
            location=self.location,
            current=request.url.path,
            here=_local_target(str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")),
        )
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    # ------------------------------------------------------------------ checks
    def knows(self, secret: str | None, *, operator: bool = False) -> bool:
        """Whether ``secret`` is this run's (or, ``operator``, the operator's), compared in constant time."""
        expected = self.operator_token if operator else self.access_token
        return secret is not None and expected is not None and hmac.compare_digest(secret.encode(), expected.encode())

    def check_user(self, request: Request) -> None:
        for name in USER_PARAMETERS:
            for value in request.query_params.getlist(name):
                if value != self.user_id:
                    raise HTTPException(403, f"this inspector serves one user only, fixed when it started ({name}=)")

    async def check_edit(self, request: Request) -> dict[str, str]:
        """The form of an allowed, same-origin POST carrying this server's CSRF token (else 403)."""
        if not self.allow_edits:
            raise HTTPException(403, "read-only: start the inspector with --allow-edits to change memories")
        return await self.check_form(request)

    async def check_form(self, request: Request) -> dict[str, str]:
        """The form of a same-origin POST carrying this server's CSRF token (else 403)."""
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            raise HTTPException(403, "cross-site request refused")
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, "cross-origin request refused")
        form = await request.form()
        token = form.get("csrf_token")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.csrf_token):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")
        return {k: v for k, v in form.items() if isinstance(v, str)}

    async def find(self, memory_id: str) -> MemoryItem:
        """One memory of the served user (404 for an unknown id or another user's)."""
        try:
            memory_id = validate_memory_id(memory_id)
        except MemoryValidationError:
            raise HTTPException(404, "no such memory") from None
        context = self.memory.context
        records = await context.runtime.arun(context.records.get(self.user_id, [memory_id]))
        if not records:
            raise HTTPException(404, "no such memory")
        return records[0].item


def _local_target(value: str | None, default: str = "/") -> str:
    """A redirect target on this server only (a path, never a scheme, host or protocol-relative URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        number = int(value) if value is not None and value != "" else default
    except ValueError:
        raise HTTPException(400, "expected a whole number") from None
    return max(low, min(high, number))


def explanation_rows(item: Any) -> list[dict[str, Any]]:
    """The search's explanation of one result (``signal -> contribution``), largest first; [] if none."""
    explanation = getattr(item, "explanation", None) or item.metadata.get("explanation")
    if not isinstance(explanation, dict):
        return []
    rows = [(str(k), float(v)) for k, v in explanation.items() if isinstance(v, (int, float))]
    rows.sort(key=lambda kv: abs(kv[1]), reverse=True)
    peak = max((abs(v) for _, v in rows), default=0.0) or 1.0
    return [{"signal": k, "value": v, "share": abs(v) / peak} for k, v in rows]


# --------------------------------------------------------------------------------------------------- pages
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
    limit = _int(request.query_params.get("limit"), 10, 1, 50)
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
    limit = _int(params.get("limit"), 200, 1, TIMELINE_LIMIT)
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
    offset = _int(params.get("offset"), 0, 0, 10**9)
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
    app: Inspector = request.app.state.inspector
    parsed = json.loads(await app.memory.semantic.aexport_knowledge_graph("json"))
    return app.page(
        request,
        "graph.html",
        title="Knowledge graph",
        nodes=len(parsed.get("nodes", [])),
        edges=len(parsed.get("edges", [])),
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


async def forget_page(request: Request) -> Response:
    """GET /memory/{id}/forget: what forgetting it removes, and the button that does it (edits only)."""
    app: Inspector = request.app.state.inspector
    if not app.allow_edits:
        raise HTTPException(403, "read-only: start the inspector with --allow-edits to change memories")
    item = await app.find(request.path_params["memory_id"])
    relations = await app.memory.manager.arelations(item)
    back = _local_target(request.query_params.get("next"), f"/memory/{item.id}")
    return app.page(request, "forget.html", title="Forget a memory", item=item, relations=relations, back=back)


async def create(request: Request) -> Response:
    """GET /new: the form; POST /new: store a memory as an agent's ``remember`` would, then show it."""
    app: Inspector = request.app.state.inspector
    if request.method == "GET":
        if not app.allow_edits:
            raise HTTPException(403, "read-only: start the inspector with --allow-edits to change memories")
        return app.page(request, "new.html", title="New memory", tiers=CREATE_TIERS, form={}, error=None)
    form = await app.check_edit(request)
    try:
        tier = form.get("tier") or "semantic"
        if tier not in CREATE_TIERS:
            raise MemoryValidationError("tier", f"must be one of {', '.join(CREATE_TIERS)}")
        when = (form.get("occurred_at") or "").strip()
        metadata: dict[str, Any] = {"source": "inspector"}
        if tags := _form_tags(form):
            metadata["tags"] = tags
        memory_id = await app.memory.tiers([tier])[0].aadd(
            validate_content(form.get("content")),
            importance=_importance(form),
            metadata=metadata,
            timestamp=parse_moment(when, "occurred_at") if when else None,
        )
    except MemoryValidationError as exc:
        return app.page(
            request, "new.html", status_code=400, title="New memory", tiers=CREATE_TIERS, form=form, error=str(exc)
        )
    logger.info("inspector: created %s memory %s", tier, memory_id)
    return RedirectResponse(f"/memory/{memory_id}", status_code=303)


def _importance(form: dict[str, str]) -> float:
    try:
        return validate_importance(float(form.get("importance") or 0.5), "importance")
    except ValueError:
        raise MemoryValidationError("importance", "must be a number from 0 to 1") from None


def _form_tags(form: dict[str, str]) -> list[str]:
    """The comma-separated tags of a form."""
    return validate_tags([t for t in (form.get("tags") or "").split(",") if t.strip()])


# --------------------------------------------------------------------------------------------------- edits
async def edit(request: Request) -> Response:
    """POST /memory/{id}/pin, /unpin or /forget, then back to the page the form was on."""
    app: Inspector = request.app.state.inspector
    action = request.path_params["action"]
    if action not in ("pin", "unpin", "forget", "edit"):
        raise HTTPException(404, "not found")
    form = await app.check_edit(request)
    item = await app.find(request.path_params["memory_id"])
    manager = app.memory.manager
    if action == "edit":
        return await _edit(request, app, item, form)
    if action == "pin":
        await manager.apin(item.id)
    elif action == "unpin":
        await manager.aunpin(item.id)
    else:
        report = await manager.aforget_memories([item.id])  # with what was derived only from it
        logger.info("inspector: forgot %s memory %s (%d derived)", item.memory_type.value, item.id, len(report.derived))
    target = _local_target(form.get("next"), f"/memory/{item.id}" if action != "forget" else "/")
    if action == "forget" and target.startswith(f"/memory/{item.id}"):
        target = "/"
    return RedirectResponse(target, status_code=303)


async def _edit(request: Request, app: Inspector, item: MemoryItem, form: dict[str, str]) -> Response:
    """Apply the edit form: content, importance and tags in one update, then the pin."""
    tier = app.memory.tiers([item.memory_type])[0]
    try:
        content = validate_content(form.get("content"))
        importance, tags = _importance(form), _form_tags(form)
        await tier.aupdate(  # an instruction's new text is read again (see ProceduralMemory.aupdate)
            item.id,
            content=content if content != item.content else None,
            importance=importance if importance != item.importance else None,
            metadata={"tags": tags} if tags != tags_of(item) else None,
        )
    except MemoryValidationError as exc:
        relations = await app.memory.manager.arelations(item)
        return app.page(
            request,
            "memory.html",
            status_code=400,
            title="Memory",
            item=item,
            explanation=[],
            relations=relations,
            tags=tags_of(item),
            error=str(exc),
        )
    pinned = form.get("pinned") == "on"
    if pinned != item.pinned:
        await app.memory.manager.apin(item.id, pinned)
    logger.info("inspector: edited %s memory %s", item.memory_type.value, item.id)
    return RedirectResponse(f"/memory/{item.id}", status_code=303)


async def procedural(request: Request) -> Response:
    """GET: the standing instructions (current, then replaced) and the learned procedures; POST (edits): add
    an instruction as ``add_instruction`` would (a newer rule on the same matter replaces the older)."""
    app: Inspector = request.app.state.inspector
    tier = app.memory.procedural
    form: dict[str, str] = {}
    error = None
    if request.method == "POST":
        form = await app.check_edit(request)
        try:
            condition = (form.get("condition") or "").strip() or None
            memory_id = await tier.aadd_instruction(form.get("text") or "", condition=condition, origin="inspector")
        except MemoryValidationError as exc:
            error = str(exc)
        else:
            logger.info("inspector: added instruction %s", memory_id)
            return RedirectResponse("/procedural", status_code=303)
    rules = await tier.ainstructions(include_history=True)
    return app.page(
        request,
        "procedural.html",
        status_code=400 if error else 200,
        title="Instructions and procedures",
        standing=[r for r in rules if is_current(r)],
        replaced=[r for r in rules if not is_current(r)],
        procedures=await tier.aprocedures(),
        form=form,
        error=error,
    )


async def users(request: Request) -> Response:
    """Operator mode: GET lists the stored users; POST (same origin, CSRF token) chooses whose memory the pages show."""
    app: Inspector = request.app.state.inspector
    if not app.is_operator(request):
        raise HTTPException(403, "choosing the user needs the operator's link (lmh ui --operator)")
    context = app.home.context
    known = sorted(await context.runtime.arun(context.records.users()))
    if request.method == "POST":
        form = await app.check_form(request)
        chosen = form.get("user") or ""
        if chosen not in known and chosen != app.home.user_id:
            raise HTTPException(400, "user: no memory is stored for that user")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(app.view_cookie, chosen, httponly=True, samesite="strict", path="/")
        logger.info("inspector: the operator now views %r", chosen)
        return response
    return app.page(request, "users.html", title="Users", users=sorted({*known, app.home.user_id}))


async def access_log(request: Request) -> Response:
    """GET: what ``get()`` showed, when, for which input, newest first; POST (edits): erase the whole log."""
    app: Inspector = request.app.state.inspector
    manager = app.memory.manager
    if request.method == "POST":
        await app.check_edit(request)
        removed = await manager.aforget_access_log()
        logger.info("inspector: erased the access log (%d rows)", removed)
        return RedirectResponse("/access-log", status_code=303)
    offset = _int(request.query_params.get("offset"), 0, 0, 10**9)
    rows = await manager.aaccess_log(limit=LIST_PAGE, offset=offset)
    context = app.memory.context
    ids = list(dict.fromkeys(i for row in rows for i in row["memory_ids"]))
    found = await context.runtime.arun(context.records.get(app.user_id, ids)) if ids else []
    items = {r.item.id: r.item for r in found}
    entries = [
        {
            "at": datetime.fromtimestamp(row["at"], UTC),
            "session_id": row["session_id"],
            "input": row["input"],
            "memories": [(i, items.get(i)) for i in row["memory_ids"]],
        }
        for row in rows
    ]
    more = f"/access-log?offset={offset + LIST_PAGE}" if len(rows) == LIST_PAGE else None
    return app.page(request, "access_log.html", title="Access log", entries=entries, next=more)


async def forget_everything(request: Request) -> Response:
    app: Inspector = request.app.state.inspector
    if request.method == "GET":
        return app.page(request, "forget_everything.html", title="Forget everything", report=None, error=None)
    form = await app.check_edit(request)
    if form.get("confirm") != app.user_id:
        return app.page(
            request,
            "forget_everything.html",
            status_code=400,
            title="Forget everything",
            report=None,
            error="type the user id exactly to confirm; nothing was erased",
        )
    report = await app.memory.manager.aforget_user()
    return app.page(request, "forget_everything.html", title="Forget everything", report=report, error=None)


# --------------------------------------------------------------------------------------------------- plumbing
async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        raise HTTPException(404, "not found")
    body = resources.files("llama_index_memory_hierarchy.ui").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name], headers={"Cache-Control": "max-age=3600"})


async def favicon(request: Request) -> Response:
    return RedirectResponse("/static/favicon.svg", status_code=301)


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


class RunSecret:
    """ASGI middleware: every path but :data:`OPEN_PATHS` needs the run's secret (cookie, link or bearer).

    A GET carrying the right ``?token=`` sets the cookie and redirects to the same address without
    it (so the secret leaves the address bar and the history); anything else without the cookie or
    an exact ``Authorization: Bearer <secret>`` gets 401 and learns nothing, not even the user's name.
    """

    def __init__(self, app: Any, inspector: Inspector) -> None:
        self.app = app
        self.inspector = inspector

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or str(scope["path"]).startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        inspector = self.inspector
        request = Request(scope)
        given = request.query_params.get("token")
        operator = inspector.operator_token is not None and given is not None and inspector.knows(given, operator=True)
        if given is not None and request.method == "GET" and (operator or inspector.knows(given)):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response: Response = RedirectResponse(_local_target(request.url.path + (f"?{rest}" if rest else "")), 303)
            name = inspector.operator_cookie if operator else inspector.cookie_name
            response.set_cookie(name, given, httponly=True, samesite="strict", path="/")
        elif (
            inspector.knows(request.cookies.get(inspector.cookie_name))
            or inspector.knows(_bearer(request.headers.get("authorization")))
            or inspector.is_operator(request)
        ):
            await self.app(scope, receive, send)
            return
        else:
            response = PlainTextResponse(
                "this inspector needs the secret link that `lmh ui` printed when it started (http://.../?token=...)",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="lmh ui"'},
            )
        await response(scope, receive, send)


def _bearer(header: str | None) -> str | None:
    """The token of an exact ``Bearer <token>`` header (one space, that spelling), else None."""
    if header is None or not header.startswith("Bearer ") or " " in header[7:] or not header[7:]:
        return None
    return header[7:]


async def error_page(request: Request, exc: Exception) -> Response:
    app: Inspector = request.app.state.inspector
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error (see the server log)"
    if status == 500:
        logger.exception("inspector: %s %s failed", request.method, request.url.path, exc_info=exc)
    return app.page(request, "error.html", status_code=status, title=f"Error {status}", status=status, detail=detail)


def _guarded(endpoint: Any) -> Any:
    """An endpoint that first refuses requests naming another user (see :meth:`Inspector.check_user`)."""

    async def run(request: Request) -> Response:
        inspector: Inspector = request.app.state.inspector
        viewing = _VIEWING.set(inspector.memory_for(request))
        try:
            inspector.check_user(request)
            if request.method != "GET":
                return await endpoint(request)
            with uncounted():  # a GET changes nothing, not even access counts
                return await endpoint(request)
        finally:
            _VIEWING.reset(viewing)

    return run


class SecurityHeaders:
    """ASGI middleware: the content security policy and related headers on every response."""

    HEADERS: ClassVar[dict[bytes, bytes]] = {
        b"content-security-policy": PAGE_POLICY.encode(),
        b"x-content-type-options": b"nosniff",
        b"referrer-policy": b"same-origin",
        b"cache-control": b"no-store",
    }

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                names = {name.lower() for name, _ in headers}
                headers.extend((k, v) for k, v in self.HEADERS.items() if k not in names)
            await send(message)

        await self.app(scope, receive, send_with_headers if scope["type"] == "http" else send)


def create_app(
    memory: HierarchicalMemory,
    *,
    allow_edits: bool = False,
    hosts: list[str] | None = None,
    location: str = "",
    access_token: str | None = None,
    operator: bool = False,
) -> Starlette:
    """The inspector over ``memory`` (one user). ``hosts``: the Host names it answers (default: loopback);
    ``access_token``: the run's secret (default: a random one, ``app.state.inspector.access_token``);
    ``operator``: also an operator's secret (``app.state.inspector.operator_token``) that may choose the user."""
    inspector = Inspector(
        memory,
        allow_edits=allow_edits,
        location=location,
        access_token=access_token,
        operator_token=secrets.token_urlsafe(32) if operator else None,
    )
    pages = [
        ("/", overview, ["GET"]),
        ("/search", search, ["GET"]),
        ("/timeline", timeline, ["GET"]),
        ("/graph", graph, ["GET"]),
        ("/graph/view", graph_view, ["GET"]),
        ("/profile", profile, ["GET"]),
        ("/context", context, ["GET"]),
        ("/memories", memories, ["GET"]),
        ("/new", create, ["GET", "POST"]),
        ("/memory/{memory_id}", memory_page, ["GET"]),
        ("/memory/{memory_id}/forget", forget_page, ["GET"]),
        ("/memory/{memory_id}/{action}", edit, ["POST"]),
        ("/procedural", procedural, ["GET", "POST"]),
        ("/users", users, ["GET", "POST"]),
        ("/access-log", access_log, ["GET", "POST"]),
        ("/forget-everything", forget_everything, ["GET", "POST"]),
    ]
    routes = [Route(path, _guarded(endpoint), methods=methods) for path, endpoint, methods in pages]
    routes += [Route("/static/{name}", static), Route("/favicon.ico", favicon), Route("/healthz", health)]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts or ["127.0.0.1", "localhost"]),
            Middleware(RunSecret, inspector=inspector),
        ],
        exception_handlers={HTTPException: error_page, Exception: error_page},
    )
    app.state.inspector = inspector
    return app
