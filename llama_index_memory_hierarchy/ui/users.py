"""Operator mode's Users page: the stored users, and the choice of whose memory the pages show."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from llama_index_memory_hierarchy.ui.inspector import Inspector

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


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
