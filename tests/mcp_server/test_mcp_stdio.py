"""``lmh mcp`` over stdio, driven by the MCP SDK's client: the form an MCP client's config file starts.

Each session is a new server process (stdio serves one client), so "recall in a new client
session" is also recall after a restart of the server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp_helpers import TOOLS, counts, ids, ok, refused, stdio_session, text


async def test_stdio_tools_bad_input_then_recall_and_forget_in_a_new_session(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    async with stdio_session(folder, "alice") as session:
        listed = (await session.list_tools()).tools
        assert {tool.name for tool in listed} == TOOLS
        for tool in listed:
            assert "Example:" in (tool.description or ""), tool.name
            assert tool.input_schema["type"] == "object"
        remember = next(tool for tool in listed if tool.name == "remember")
        assert remember.input_schema["required"] == ["content"]
        assert remember.input_schema["properties"]["tier"]["enum"] == ["semantic", "episodic", "working"]

        stored = ok(await session.call_tool("remember", {"content": "The user lives in Porto.", "importance": 0.8}))
        (memory_id,) = ids(stored)
        updated = ok(
            await session.call_tool("update_memory", {"memory_id": memory_id, "content": "The user lives in Berlin."})
        )
        assert memory_id in updated and "Berlin" in updated

        # the stdio user is fixed by --user: naming another one is refused, and nothing is written
        other = refused(await session.call_tool("remember", {"content": "Bob's secret.", "user_id": "bob"}))
        assert "user_id" in other and "another user" in other
        assert "Porto" not in text(await session.call_tool("recall", {"query": "where does the user live"}))

        before = counts(ok(await session.call_tool("memory_stats", {})))
        cases = [
            ("remember", {"content": "x", "tier": "perceptual"}, "tier"),
            ("remember", {"content": "x" * 100_001}, "content: longer than 100000 characters"),
            ("remember", {"content": "   "}, "content: must not be empty"),
            ("remember", {"content": 42}, "content\n  Input should be a valid string"),
            ("remember", {"content": "x", "importance": 3}, "importance\n  Input should be less than or equal to 1"),
            ("recall", {"query": "x", "limit": "many"}, "limit\n  Input should be a valid integer"),
            ("recall", {"query": "x", "tier": "dreams"}, "tier\n  Input should be"),
            ("forget", {"memory_ids": ["not-a-uuid"]}, "memory_ids: not a UUID"),
            ("update_memory", {"memory_id": "3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60"}, "give the new content"),
            ("timeline", {"since": "last tuesday"}, "since: not a time"),
            ("timeline", {"since": "2026-02-01", "until": "2026-01-01"}, "since: is after until"),
            ("timeline", {"session": "../x"}, "session: must be"),
            ("related_entities", {"entity": "Mia", "depth": 9}, "depth\n  Input should be less than or equal to 3"),
            ("search_documents", {"query": "x", "namespace": "a:b"}, "namespace: must be"),
            ("ask_documents", {"question": "What port?"}, "without an LLM"),
            ("no_such_tool", {}, "Unknown tool"),
        ]
        for name, arguments, message in cases:
            error = refused(await session.call_tool(name, arguments))
            assert message in error, (name, arguments, error)
        assert counts(ok(await session.call_tool("memory_stats", {}))) == before  # nothing half-written
        resource = await session.read_resource("memory://profile")
        assert "alice" in resource.contents[0].text
        prompts = (await session.list_prompts()).prompts
        assert [p.name for p in prompts] == ["use_memory"]

    async with stdio_session(folder, "alice") as session:
        found = ok(await session.call_tool("recall", {"query": "which city does the user live in", "limit": 3}))
        assert memory_id in ids(found) and "Berlin" in found
        related = ok(await session.call_tool("related_entities", {"entity": "User", "depth": 2}))
        assert "connected to 'User'" in related  # the entities, or "No entities connected to 'User' ..."
        assert "of user alice" in ok(await session.call_tool("profile", {})).splitlines()[0]
        assert memory_id in ok(await session.call_tool("forget", {"memory_ids": [memory_id]}))
        assert memory_id not in ids(text(await session.call_tool("recall", {"query": "city the user lives in"})))
        gone = refused(await session.call_tool("forget", {"memory_ids": [memory_id]}))
        assert f"No memory with id={memory_id}" in gone


async def test_stdio_remember_in_the_third_person_fills_the_profile_and_the_graph(tmp_path: Path) -> None:
    """What a client writes as asked ("The user ...") is about the user; a correction keeps the history."""
    async with stdio_session(tmp_path / "memory", "alice") as session:
        for content in ["The user is vegetarian.", "The user's daughter is called Mia.", "I'm Alice."]:
            ok(await session.call_tool("remember", {"content": content}))
        ok(await session.call_tool("remember", {"content": "Alice is allergic to peanuts."}))  # the name, given once
        (job,) = ids(ok(await session.call_tool("remember", {"content": "The user works at Initech."})))
        ok(await session.call_tool("update_memory", {"memory_id": job, "content": "The user works at Globex."}))
        profile = ok(await session.call_tool("profile", {}))
        for statement in ["is vegetarian", "Mia is the user's daughter", "is allergic to peanuts", "works at Globex"]:
            assert statement in profile, (statement, profile)
        assert "no longer (identity, until" in profile and "works at Initech" in profile
        related = ok(await session.call_tool("related_entities", {"entity": "User", "depth": 1}))
        assert "Mia" in related and "Globex" in related, related
        assert json.loads(ok(await session.call_tool("memory_stats", {})))["semantic"]["historical_facts"] >= 1


async def test_stdio_remember_terse_notes_about_bare_user_fill_the_profile(tmp_path: Path) -> None:
    """The terse notes MCP clients write ("User prefers ...", "User's name: X.") are about the user, and a name
    given that way merges the facts said by it."""
    async with stdio_session(tmp_path / "memory", "alice") as session:
        notes = ["User prefers green tea.", "User's sister: Noor.", "User's name: Odile.", "Odile is allergic to kiwi."]
        for content in notes:
            ok(await session.call_tool("remember", {"content": content}))
        profile = ok(await session.call_tool("profile", {}))
        for statement in ["prefers green tea", "Noor is the user's sister", "is allergic to kiwi"]:
            assert statement in profile, (statement, profile)
        related = ok(await session.call_tool("related_entities", {"entity": "User", "depth": 1}))
        assert "Noor" in related and "kiwi" in related, related


async def test_stdio_update_memory_on_a_recalled_fact_keeps_it_as_history(tmp_path: Path) -> None:
    """An agent corrects the fact it found (not the statement it came from): the old one ends, dated, and stays."""
    async with stdio_session(tmp_path / "memory", "alice") as session:
        ok(await session.call_tool("remember", {"content": "The user works at Initech."}))
        before = ok(await session.call_tool("fact_history", {"entity": "User", "relation": "works at"}))
        (fact,) = ids(before)
        corrected = ok(
            await session.call_tool("update_memory", {"memory_id": fact, "content": "The user works at Globex."})
        )
        assert "no longer holds" in corrected and "Globex" in corrected, corrected
        after = json.loads(ok(await session.call_tool("memory_stats", {})))["semantic"]
        assert after["historical_facts"] == 1 and after["current_facts"] == 1
        history = ok(await session.call_tool("fact_history", {"entity": "User", "relation": "works at"}))
        old, new = history.splitlines()[1:]
        assert fact in old and "Initech" in old and "-> now" not in old  # ended, with its end time
        assert "Globex" in new and new.endswith("works at Globex") and "-> now" in new
        profile = ok(await session.call_tool("profile", {}))
        assert "works at Globex" in profile and "no longer" in profile and "works at Initech" in profile
        unreadable = refused(await session.call_tool("update_memory", {"memory_id": fact, "content": "Hmm, okay."}))
        assert "content" in unreadable
