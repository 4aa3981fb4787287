"""Serving over stdio so that every line gets an answer.

The MCP SDK's stdio transport hands a line it cannot parse (a JSON string with a lone ``\\ud800``
escape, nesting past its parser's limit, a line that is no JSON-RPC message) to the session as an
exception, which drops it: the client that sent it waits for ever. Here such a line is answered with
a JSON-RPC error, under the request's own id when one can be read from the line (``null`` otherwise,
as JSON-RPC 2.0 says for a parse error), so the client fails at once and the server reads on.
"""

from __future__ import annotations

import json
import logging
import re
from types import TracebackType
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

logger = logging.getLogger(__name__)

#: JSON-RPC 2.0 error codes: the line is no JSON; it is JSON but no valid message.
PARSE_ERROR, INVALID_REQUEST = -32700, -32600
#: The first ``"id"`` member of a line, when the stdlib parser cannot read the whole line (too deep).
_ID_MEMBER = re.compile(r'^\s*\{(?:[^{}\[\]"]|"(?:[^"\\]|\\.)*")*?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


async def aserve_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()``, answering the lines the SDK's transport drops."""
    async with stdio_server() as (read_stream, write_stream):
        lowlevel = server._lowlevel_server  # what the SDK's own run_stdio_async runs, over the guarded stream
        await lowlevel.run(
            AnsweringReadStream(read_stream, write_stream), write_stream, lowlevel.create_initialization_options()
        )


class AnsweringReadStream:
    """A transport's read stream that answers each unreadable message itself instead of passing it on."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (what the SDK reads off its own streams)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._write.send(SessionMessage(unreadable_reply(item)))

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


def unreadable_reply(error: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read as a message."""
    line, code, reason = None, INVALID_REQUEST, str(error)
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        line = first.get("input") if isinstance(first.get("input"), str) else None
        code = PARSE_ERROR if first.get("type") == "json_invalid" else INVALID_REQUEST
        reason = first.get("msg", reason)
    request_id = request_id_of(line) if line is not None else None
    logger.warning("answered an unreadable message (id %r) with error %d: %s", request_id, code, reason[:200])
    message = "Parse error" if code == PARSE_ERROR else "Invalid request"
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=f"{message}: {reason[:200]}")
    )


def request_id_of(line: str) -> int | str | None:
    """The ``id`` of a JSON-RPC line that failed validation, if it can be read (else None)."""
    try:
        data = json.loads(line)  # the stdlib reads lone surrogates and mistyped members alike
    except (ValueError, RecursionError):
        match = _ID_MEMBER.match(line)
        if match is None:
            return None
        try:
            data = {"id": json.loads(match.group(1))}
        except ValueError:
            return None
    value = data.get("id") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    if isinstance(value, str) and (len(value) > 200 or not value.isprintable()):
        return None
    return value
