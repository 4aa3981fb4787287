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

import logging
import secrets
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from llama_index_memory_hierarchy.stores.access import uncounted
from llama_index_memory_hierarchy.ui import edits, pages, procedural, users
from llama_index_memory_hierarchy.ui.inspector import Inspector
from llama_index_memory_hierarchy.ui.security import RunSecret, SecurityHeaders

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

logger = logging.getLogger(__name__)


STATIC = {"ui.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}


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
        with inspector.showing(request):
            inspector.check_user(request)
            if request.method != "GET":
                return await endpoint(request)
            with uncounted():  # a GET changes nothing, not even access counts
                return await endpoint(request)

    return run


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
    routes_of = [
        ("/", pages.overview, ["GET"]),
        ("/search", pages.search, ["GET"]),
        ("/timeline", pages.timeline, ["GET"]),
        ("/graph", pages.graph, ["GET"]),
        ("/graph/view", pages.graph_view, ["GET"]),
        ("/profile", pages.profile, ["GET"]),
        ("/context", pages.context, ["GET"]),
        ("/memories", pages.memories, ["GET"]),
        ("/new", edits.create, ["GET", "POST"]),
        ("/memory/{memory_id}", pages.memory_page, ["GET"]),
        ("/memory/{memory_id}/forget", edits.forget_page, ["GET"]),
        ("/memory/{memory_id}/{action}", edits.edit, ["POST"]),
        ("/procedural", procedural.procedural, ["GET", "POST"]),
        ("/users", users.users, ["GET", "POST"]),
        ("/access-log", pages.access_log, ["GET", "POST"]),
        ("/forget-everything", edits.forget_everything, ["GET", "POST"]),
    ]
    routes = [Route(path, _guarded(endpoint), methods=methods) for path, endpoint, methods in routes_of]
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
