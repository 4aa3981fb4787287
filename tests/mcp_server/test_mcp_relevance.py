"""The relevance floor through MCP ``recall``: a real ``lmh mcp`` over stdio, driven by the SDK's own client.

An unrelated query answers "Nothing relevant" with no memories; an explicit ``min_score`` replaces the floor.
Every sentence is invented here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp_helpers import ok, stdio_session

MEMORIES = [
    "The user's cat is called Pepper.",
    "The user switched from tea to black coffee this year.",
    "The user's sister Clara is moving to Lisbon in August.",
    "The user has a dentist appointment next Friday.",
    "用户在杭州的一家银行工作。",
]


async def test_recall_of_an_unrelated_query_says_nothing_relevant(tmp_path: Path) -> None:
    async with stdio_session(tmp_path / "memory", "alice") as session:
        for content in MEMORIES:
            ok(await session.call_tool("remember", {"content": content, "tier": "episodic"}))
        for query in ["zzzz qqq", "bees", "qwrtp xkcdv", "量子力学"]:
            result = await session.call_tool("recall", {"query": query})
            assert ok(result).startswith("Nothing relevant remembered"), (query, ok(result))
            assert result.structured_content["memories"] == [], query
        found = await session.call_tool("recall", {"query": "Where is Clara moving?"})
        assert "Lisbon" in ok(found).splitlines()[2], ok(found)
        # an explicit min_score is the caller's bar in place of the floor; limit is honoured
        shown = await session.call_tool("recall", {"query": "zzzz qqq", "min_score": 0, "limit": 2})
        assert len(shown.structured_content["memories"]) == 2, ok(shown)
        strict = await session.call_tool("recall", {"query": "Where is Clara moving?", "min_score": 5})
        assert strict.structured_content["memories"] == [], ok(strict)
