"""``lmh mcp --http``: the real server on a free loopback port (``conftest.server``), driven by the SDK's client.

Every request carries a bearer token from the server's token file; the tests check that a token
reaches only its own user's memories and documents, whatever ``user_id`` or memory id a call
passes, that a missing or wrong token is refused before any tool runs, and that concurrent
clients lose no write.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("mcp")

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_helpers import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    DAVE,
    TOOLS,
    USERS,
    HttpServer,
    counts,
    http_session,
    ids,
    ok,
    refused,
    text,
)


async def call(server: HttpServer, token: str, tool: str, **arguments: object) -> object:
    """One tool call in its own client session (a new MCP session each time)."""
    async with http_session(server.url, token) as session:
        return await session.call_tool(tool, arguments)


async def test_http_tools_remember_recall_update_forget_across_client_sessions(server: HttpServer) -> None:
    async with http_session(server.url, ALICE) as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        (memory_id,) = ids(ok(await session.call_tool("remember", {"content": "Alice's favourite tea is sencha."})))
    found = ok(await call(server, ALICE, "recall", query="which tea does Alice like"))
    assert memory_id in ids(found)
    updated = ok(await call(server, ALICE, "update_memory", memory_id=memory_id, content="Alice drinks matcha."))
    assert memory_id in updated
    found = ok(await call(server, ALICE, "recall", query="which tea does Alice drink"))
    assert memory_id in ids(found) and "matcha" in found and "sencha" not in found
    assert memory_id in ok(await call(server, ALICE, "forget", memory_ids=[memory_id]))
    assert memory_id not in ids(text(await call(server, ALICE, "recall", query="Alice tea")))


async def test_two_tokens_never_reach_each_others_memories(server: HttpServer) -> None:
    (secret,) = ids(ok(await call(server, ALICE, "remember", content="Alice's locker code is 4711.", tier="episodic")))
    async with http_session(server.url, BOB) as bob:
        assert secret not in ids(text(await bob.call_tool("recall", {"query": "locker code"})))
        assert secret not in text(await bob.call_tool("timeline", {}))
        for tool, arguments in [
            ("recall", {"query": "locker code", "user_id": "alice"}),
            ("remember", {"content": "Alice's locker code is 0000.", "user_id": "alice"}),
            ("timeline", {"user_id": "alice"}),
            ("profile", {"user_id": "alice"}),
            ("memory_stats", {"user_id": "alice"}),
            ("search_documents", {"query": "reset the router", "namespace": "manuals", "user_id": "alice"}),
        ]:
            assert "user_id: this token or server may not act for another user" in refused(
                await bob.call_tool(tool, arguments)
            )
        # another user's memory id is absent for bob: nothing is changed or deleted
        for tool, arguments in [
            ("update_memory", {"memory_id": secret, "content": "Alice's locker code is 0000."}),
            ("forget", {"memory_ids": [secret]}),
        ]:
            assert f"No memory with id={secret}" in refused(await bob.call_tool(tool, arguments))
        docs = ok(await bob.call_tool("search_documents", {"query": "reset the router", "namespace": "manuals"}))
        assert docs.startswith("No passages found")
        assert "bob" in (await bob.read_resource("memory://profile")).contents[0].text

    mine = ok(await call(server, ALICE, "recall", query="locker code", tier="episodic"))
    assert secret in ids(mine) and "4711" in mine and "0000" not in mine
    docs = ok(await call(server, ALICE, "search_documents", query="how do I reset the router", namespace="manuals"))
    assert "red reset button" in docs and "chunk id=" in docs
    # an admin token may name the user, and must
    assert secret in ids(ok(await call(server, ADMIN, "recall", query="locker code", user_id="alice")))
    assert "name one" in refused(await call(server, ADMIN, "recall", query="locker code"))


def _mcp_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [found for inner in exc.exceptions for found in _mcp_errors(inner)]
    return [exc] if isinstance(exc, MCPError) else []


async def test_missing_or_wrong_token_is_refused_and_nothing_is_written(server: HttpServer) -> None:
    before = counts(ok(await call(server, ALICE, "memory_stats")))
    for token in (None, "wrong-token-0123456789abcdef", ALICE + "x"):
        with pytest.raises(BaseException) as caught:  # the SDK's MCPError, inside task-group exceptions
            async with http_session(server.url, token) as session:
                await session.call_tool("remember", {"content": "Written without a token.", "user_id": "alice"})
        assert _mcp_errors(caught.value), f"{token!r}: {caught.value!r}"
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx2.AsyncClient() as http:
        for headers in (
            {},
            {"Authorization": "Bearer"},
            {"Authorization": f"Basic {ALICE}"},
            {"Authorization": ADMIN},
            # only the exact scheme: not another spelling, spacing or a token with more after it
            {"Authorization": f"bearer {ALICE}"},
            {"Authorization": f"BEARER {ALICE}"},
            {"Authorization": f"Bearer  {ALICE}"},
            {"Authorization": f"Bearer {ALICE} {ALICE}"},
            {"Authorization": f"bearer:{ALICE}"},
            {"Authorization": f"Bearer:{ALICE}"},
            {"Authorization": f"Bearer\t{ALICE}"},
            {"Authorization": f"Token {ALICE}"},
            {"Authorization": f"Bearer {ALICE},Basic {ALICE}"},
        ):
            answer = await http.post(server.url, json=hello, headers={"Accept": "application/json", **headers})
            assert answer.status_code == 401, (headers, answer.status_code, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer")
    assert counts(ok(await call(server, ALICE, "memory_stats"))) == before


async def test_eight_concurrent_clients_lose_no_writes_and_read_only_their_own(server: HttpServer) -> None:
    writes = 25

    async def client(token: str, number: int) -> tuple[list[str], list[str]]:
        stored = []
        async with http_session(server.url, token) as session:
            for i in range(writes):
                content = f"Concurrent note {number}-{i} of {USERS[token]}."
                result = await session.call_tool("remember", {"content": content, "tier": "episodic"})
                stored.extend(ids(ok(result)))
            seen = ids(ok(await session.call_tool("recall", {"query": "concurrent note", "limit": 50})))
        return stored, seen

    tokens = [CAROL, DAVE] * 4
    results = await asyncio.gather(*(client(token, n) for n, token in enumerate(tokens)))
    written: dict[str, set[str]] = {"carol": set(), "dave": set()}
    for token, (stored, _) in zip(tokens, results, strict=True):
        assert len(stored) == writes
        written[USERS[token]].update(stored)
    assert all(len(stored) == 4 * writes for stored in written.values())
    for token, (_, seen) in zip(tokens, results, strict=True):
        assert seen and set(seen) <= written[USERS[token]]  # reads never cross to the other user
    for token in (CAROL, DAVE):
        listed = ok(await call(server, token, "timeline", limit=200))
        assert set(ids(listed)) == written[USERS[token]]
        assert counts(ok(await call(server, token, "memory_stats")))["episodic"] == 4 * writes


async def test_a_session_opened_with_one_token_is_not_found_with_another(server: HttpServer) -> None:
    version = "2025-11-25"
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }
    recall = {"name": "recall", "arguments": {"query": "x"}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": recall}
    async with httpx2.AsyncClient(timeout=120) as http:
        opened = await http.post(server.url, json=hello, headers={**accept, "Authorization": f"Bearer {ALICE}"})
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
        stolen = await http.post(server.url, json=call, headers={**accept, **session, "Authorization": f"Bearer {BOB}"})
        assert stolen.status_code == 404, stolen.text  # as if alice's session did not exist


async def test_profile_resources_an_admin_names_the_user_others_read_only_their_own(server: HttpServer) -> None:
    ok(await call(server, ALICE, "remember", content="Alice prefers window seats on trains.", importance=0.9))
    async with http_session(server.url, ADMIN) as admin:
        listed = {r.name for r in (await admin.list_resources()).resources}
        templates = {t.name for t in (await admin.list_resource_templates()).resource_templates}
        assert listed == {"user_profile"} and templates == {"named_user_profile"}
        assert "user alice" in (await admin.read_resource("memory://users/alice/profile")).contents[0].text
        with pytest.raises(MCPError, match="name one"):
            await admin.read_resource("memory://profile")
    async with http_session(server.url, BOB) as bob:
        assert "user bob" in (await bob.read_resource("memory://users/bob/profile")).contents[0].text
        with pytest.raises(MCPError, match="another user"):
            await bob.read_resource("memory://users/alice/profile")


def test_a_token_file_others_may_read_is_warned_about(server: HttpServer) -> None:
    assert server.tokens.stat().st_mode & 0o044  # written with the default umask
    assert "other users of this machine may read the tokens" in " ".join(server.log.read_text().split())
