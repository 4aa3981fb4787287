"""The state of one inspector server (the memory it shows, its secrets, its checks) and small helpers of its pages."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import (
    validate_identifier,
    validate_memory_id,
)

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.types import MemoryItem


USER_PARAMETERS = ("user", "user_id", "userid", "uid")
#: A secret given for scripted use (``lmh ui --token-file``, ``LMH_UI_TOKEN``): too long to guess, and of the
#: characters that pass unchanged through a link, a cookie and a bearer header.
GIVEN_SECRET = re.compile(r"[A-Za-z0-9._~-]{16,512}")
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
        if access_token is not None and not GIVEN_SECRET.fullmatch(access_token):
            raise MemoryValidationError(
                "access_token", "must be 16 to 512 characters of A-Z, a-z, 0-9, '.', '_', '~' and '-'"
            )
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
            for given in (request.cookies.get(self.operator_cookie), bearer_token(request.headers.get("authorization")))
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

    @contextmanager
    def showing(self, request: Request) -> Iterator[None]:
        """Within it, :attr:`memory` is the memory ``request`` shows (see :meth:`memory_for`)."""
        viewing = _VIEWING.set(self.memory_for(request))
        try:
            yield
        finally:
            _VIEWING.reset(viewing)

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
            here=local_target(str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")),
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


def int_param(value: str | None, default: int, low: int, high: int) -> int:
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


def local_target(value: str | None, default: str = "/") -> str:
    """A redirect target on this server only (a path, never a scheme, host or protocol-relative URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value


def bearer_token(header: str | None) -> str | None:
    """The token of an exact ``Bearer <token>`` header (one space, that spelling), else None."""
    if header is None or not header.startswith("Bearer ") or " " in header[7:] or not header[7:]:
        return None
    return header[7:]
