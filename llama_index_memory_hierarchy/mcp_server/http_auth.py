"""Who an MCP request acts for, and the HTTP transport's checks: the bearer token of the token file (the SDK's
``TokenVerifier``), an ``Authorization`` header of exactly ``Bearer <token>``, and the principal a tool call
resolves its user with (the stdio server's fixed user, or the owner of the request's token)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from llama_index_memory_hierarchy.mcp_server.access import Principal, TokenTable

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.mcp_server.service import MemoryService

logger = logging.getLogger(__name__)

#: ``Bearer``, one space, an RFC 6750 token (no spaces).
_BEARER = re.compile(r"Bearer [A-Za-z0-9\-._~+/]+=*")


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


def request_principal(service: MemoryService, ctx: Context | None) -> Principal:
    """Who this request acts for: the stdio server's user, or the owner of the HTTP request's token."""
    if service.principal is not None:
        return service.principal
    request = ctx.request_context.request if ctx is not None else None
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    token: AccessToken | None = getattr(user, "access_token", None) or get_access_token()
    if token is None or not token.claims:
        raise ToolError("unauthenticated: this server needs a bearer token on every request")
    return Principal(user_id=token.claims.get("lmh_user_id"), admin=bool(token.claims.get("lmh_admin")))


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


def auth_options(table: TokenTable | None) -> dict[str, Any]:
    """Bearer-token settings for the SDK (HTTP); none for a server with a fixed user."""
    if table is None:
        return {}
    from mcp.server.auth.settings import AuthSettings

    return {
        "token_verifier": TokenFileVerifier(table),
        # the tokens are issued out of band (the token file): no OAuth server, no resource metadata
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
    }


__all__ = ["ExactBearer", "TokenFileVerifier", "auth_options", "http_app", "request_principal"]
