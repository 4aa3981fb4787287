"""What keeps the inspector private: the run's secret (and the operator's) on every path, and the security headers."""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from llama_index_memory_hierarchy.ui.inspector import Inspector, bearer_token, local_target

PAGE_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
#: Paths served without the run's secret: nothing of any memory is in them. Exact paths, not prefixes: any
#: other path (``/static/nothing`` too) needs the secret, so even its error page shows no user's name.
OPEN_PATHS = frozenset({"/healthz", "/favicon.ico", "/static/ui.css", "/static/favicon.svg"})


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
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        inspector = self.inspector
        request = Request(scope)
        given = request.query_params.get("token")
        operator = inspector.operator_token is not None and given is not None and inspector.knows(given, operator=True)
        if given is not None and request.method == "GET" and (operator or inspector.knows(given)):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response: Response = RedirectResponse(local_target(request.url.path + (f"?{rest}" if rest else "")), 303)
            name = inspector.operator_cookie if operator else inspector.cookie_name
            response.set_cookie(name, given, httponly=True, samesite="strict", path="/")
        elif (
            inspector.knows(request.cookies.get(inspector.cookie_name))
            or inspector.knows(bearer_token(request.headers.get("authorization")))
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
