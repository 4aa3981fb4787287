"""Start ``lmh mcp`` as a real subprocess and talk to it with the MCP SDK's own client (stdio or HTTP)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

#: Full memory ids in tool results.
ID = re.compile(r"id=([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
#: Starting a server loads the embedding model: seconds, never minutes.
START_TIMEOUT = 240.0
TOOLS = {
    "remember",
    "recall",
    "list_memories",
    "get_memory",
    "fact_history",
    "update_memory",
    "forget",
    "forget_all",
    "timeline",
    "profile",
    "related_entities",
    "memory_stats",
    "add_document",
    "ingest_documents",
    "search_documents",
    "ask_documents",
    "list_instructions",
    "add_instruction",
    "remove_instruction",
}
#: The tools that answer with ``structuredContent`` (and publish an output schema).
STRUCTURED = {
    "remember",
    "recall",
    "list_memories",
    "get_memory",
    "fact_history",
    "forget",
    "forget_all",
    "add_document",
    "ingest_documents",
    "timeline",
    "profile",
    "related_entities",
    "memory_stats",
    "search_documents",
    "update_memory",
    "list_instructions",
    "add_instruction",
    "remove_instruction",
    "ask_documents",
}

#: Bearer tokens of the shared HTTP server (conftest.server) and the users they map to.
ALICE, BOB, CAROL, DAVE, ERIN, AGENT = (
    f"{name}-token-0123456789abcdef" for name in ("alice", "bob", "carol", "dave", "erin", "zhang_san")
)
ADMIN = "admin-token-0123456789abcdef"
USERS = {ALICE: "alice", BOB: "bob", CAROL: "carol", DAVE: "dave", ERIN: "erin", AGENT: "zhang_san"}


def server_env() -> dict[str, str]:
    """This environment without LMH_* settings, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMH_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    return env


def lmh_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "llama_index_memory_hierarchy", *args]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None) is not None)


def ok(result: Any) -> str:
    assert not result.is_error, text(result)
    return text(result)


def refused(result: Any) -> str:
    assert result.is_error, f"expected a tool error, got: {text(result)}"
    return text(result)


def structured(result: Any, schemas: dict[str, Any], tool: str) -> Any:
    """The ``structuredContent`` of a successful call, checked against the output schema the tool listed."""
    import jsonschema

    ok(result)
    assert result.structured_content is not None, tool
    jsonschema.validate(result.structured_content, schemas[tool])
    return result.structured_content


async def output_schemas(session: ClientSession) -> dict[str, Any]:
    """The output schema of every listed tool that has one."""
    return {t.name: t.output_schema for t in (await session.list_tools()).tools if t.output_schema}


def ids(result_text: str) -> list[str]:
    return ID.findall(result_text)


def counts(stats_text: str) -> dict[str, int]:
    """Memories per tier from a ``memory_stats`` result."""
    stats = json.loads(stats_text)
    return {tier: stats[tier]["count"] for tier in ("working", "episodic", "semantic") if tier in stats}


@contextlib.asynccontextmanager
async def stdio_session(folder: Path, user: str, *extra: str) -> AsyncIterator[ClientSession]:
    """A client session with a fresh ``lmh mcp --user USER --dir FOLDER`` process (closed on exit)."""
    command = lmh_command("mcp", "--user", user, "--dir", str(folder), "--llm", "none", *extra)
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    """A client session with a running HTTP server, sending ``token`` as the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class HttpServer:
    """``lmh mcp --http`` on a free loopback port over ``folder``; output in a log file beside it."""

    def __init__(self, folder: Path, tokens: Path, *extra: str) -> None:
        self.folder, self.tokens, self.extra = folder, tokens, extra
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder.parent / f"mcp-server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        args = ("mcp", "--http", "--port", str(self.port), "--dir", str(self.folder), "--tokens", str(self.tokens))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                lmh_command(*args, "--llm", "none", *self.extra), stdout=log, stderr=log, env=server_env()
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"lmh mcp exited {self.process.returncode}:\n{self.log.read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"lmh mcp did not listen within {START_TIMEOUT} s:\n{self.log.read_text()}")

    def stop(self) -> int | None:
        """Stop it as a service manager would (SIGTERM, then SIGKILL); its exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def restart(self) -> int | None:
        """Stop the server and start a new one on the same folder and port; the old one's exit code."""
        code = self.stop()
        self.start()
        return code

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def write_tokens(path: Path, users: dict[str, str], admin: str | None = None) -> Path:
    """A TOML token file: ``users`` maps token -> user; ``admin`` an admin token."""
    lines = [f'[[tokens]]\ntoken = "{token}"\nuser = "{user}"\n' for token, user in users.items()]
    if admin:
        lines.append(f'[[tokens]]\ntoken = "{admin}"\nadmin = true\n')
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
