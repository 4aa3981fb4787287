"""The browsing, bulk-delete, document and history tools, over stdio and over HTTP, through the SDK's client.

Every structured result is checked against the output schema the tool lists (``jsonschema``), and
every refusal is a tool error naming the field, with nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp_helpers import (
    ALICE,
    BOB,
    ERIN,
    STRUCTURED,
    HttpServer,
    counts,
    http_session,
    ok,
    output_schemas,
    refused,
    stdio_session,
    structured,
    text,
    write_tokens,
)

UNKNOWN = "3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60"


async def browse_and_forget(session: ClientSession, user: str) -> None:
    """remember with time, tags and metadata; recall by time and score; list and page; get; forget several."""
    schemas = await output_schemas(session)
    assert set(schemas) >= STRUCTURED, sorted(STRUCTURED - set(schemas))

    def remember(content: str, **extra: Any) -> Any:
        return session.call_tool("remember", {"content": content, **extra})

    porto = structured(
        await remember(
            "The user kept bees in Porto.",
            tier="episodic",
            occurred_at="2023-06-01T10:00:00",
            tags=["bees", "hobby"],
            metadata={"hive": 3},
        ),
        schemas,
        "remember",
    )
    assert porto["tier"] == "episodic"
    honey = structured(
        await remember("The user sold honey from the bees at the market.", tier="episodic", tags=["bees"]),
        schemas,
        "remember",
    )
    chess = structured(await remember("The user plays chess on Sundays.", tags=["hobby"]), schemas, "remember")

    old = structured(
        await session.call_tool("recall", {"query": "bees", "until": "2023-12-31", "limit": 10}), schemas, "recall"
    )
    assert [m["id"] for m in old["memories"]] == [porto["id"]]
    (first,) = old["memories"]
    assert first["occurred_at"].startswith("2023-06-01T10:00:00") and first["tags"] == ["bees", "hobby"]
    assert first["metadata"]["hive"] == 3 and first["score"] > 0
    recent = structured(await session.call_tool("recall", {"query": "bees", "since": "1d"}), schemas, "recall")
    assert porto["id"] not in [m["id"] for m in recent["memories"]]
    assert honey["id"] in [m["id"] for m in recent["memories"]]
    strict = structured(await session.call_tool("recall", {"query": "bees", "min_score": 1000}), schemas, "recall")
    assert strict["memories"] == []

    pages, offset = [], 0
    while offset is not None:
        page = structured(
            await session.call_tool("list_memories", {"tags": ["bees"], "limit": 1, "offset": offset}),
            schemas,
            "list_memories",
        )
        assert page["total"] == 2 and len(page["memories"]) == 1
        pages.extend(m["id"] for m in page["memories"])
        offset = page["next_offset"]
    assert pages == [honey["id"], porto["id"]]  # newest first
    hobby = structured(
        await session.call_tool("list_memories", {"tags": ["hobby"], "tier": "semantic"}), schemas, "list_memories"
    )
    assert [m["id"] for m in hobby["memories"]] == [chess["id"]]
    dated = structured(
        await session.call_tool("list_memories", {"since": "2023-05-01", "until": "2023-07-01"}),
        schemas,
        "list_memories",
    )
    assert [m["id"] for m in dated["memories"]] == [porto["id"]]

    detail = structured(await session.call_tool("get_memory", {"memory_id": porto["id"]}), schemas, "get_memory")
    assert detail["memory"]["content"] == "The user kept bees in Porto." and detail["history"] == []
    await context_views(session, schemas, user, porto["id"])
    corrected = structured(
        await session.call_tool("update_memory", {"memory_id": chess["id"], "importance": 0.8}),
        schemas,
        "update_memory",
    )
    assert corrected["memory"]["id"] == chess["id"] and corrected["memory"]["importance"] == 0.8
    assert corrected["memory"]["content"] == "The user plays chess on Sundays."
    assert "memory_id: No memory with id" in refused(
        await session.call_tool("update_memory", {"memory_id": UNKNOWN, "importance": 0.3})
    )

    before = counts(ok(await session.call_tool("memory_stats", {})))
    cases = [
        ("remember", {"content": "x", "occurred_at": "the other day"}, "occurred_at: not a time"),
        ("remember", {"content": "x", "tags": ["ok", " "]}, "tags: each tag is"),
        ("remember", {"content": "x", "tags": ["t"] * 21}, "tags: at most 20 tags"),
        ("remember", {"content": "x", "metadata": "hive"}, "metadata\n  Input should be a valid dictionary"),
        ("recall", {"query": "bees", "since": "2024-02-01", "until": "2024-01-01"}, "since: is after until"),
        ("recall", {"query": "bees", "min_score": -1}, "min_score\n  Input should be greater than or equal to 0"),
        ("list_memories", {"tier": "working"}, "tier\n  Input should be"),
        ("list_memories", {"limit": 0}, "limit\n  Input should be greater than or equal to 1"),
        ("list_memories", {"kind": "../x"}, "kind: must be"),
        ("get_memory", {"memory_id": "nope"}, "memory_id: not a UUID"),
        ("get_memory", {"memory_id": UNKNOWN}, f"memory_id: No memory with id={UNKNOWN}"),
        ("forget", {"memory_ids": []}, "memory_ids\n  List should have at least 1 item"),
        ("forget", {"memory_ids": ["nope"]}, "memory_ids: not a UUID"),
        ("forget", {"memory_ids": [UNKNOWN]}, f"No memory with id={UNKNOWN}"),
        ("forget_all", {}, "confirm\n  Field required"),
        ("forget_all", {"confirm": user.upper()}, "confirm: must be the user id"),
        ("fact_history", {"entity": " "}, "entity: must not be empty"),
    ]
    for name, arguments, message in cases:
        error = refused(await session.call_tool(name, arguments))
        assert message in error, (name, arguments, error)
    assert counts(ok(await session.call_tool("memory_stats", {}))) == before  # nothing half-written or erased

    gone = structured(
        await session.call_tool("forget", {"memory_ids": [porto["id"], honey["id"], UNKNOWN]}), schemas, "forget"
    )
    assert gone["deleted"] == {porto["id"]: "episodic", honey["id"]: "episodic"} and gone["not_found"] == [UNKNOWN]
    left = structured(await session.call_tool("list_memories", {"tags": ["bees"]}), schemas, "list_memories")
    assert left["total"] == 0 and left["next_offset"] is None


async def erase(session: ClientSession, user: str) -> None:
    schemas = await output_schemas(session)
    ok(await session.call_tool("remember", {"content": "The user's locker is number 12."}))
    erased = structured(await session.call_tool("forget_all", {"confirm": user}), schemas, "forget_all")
    assert erased["user_id"] == user and erased["rows"] >= 1
    assert structured(await session.call_tool("list_memories", {}), schemas, "list_memories")["total"] == 0


async def context_views(session: ClientSession, schemas: dict[str, Any], user: str, event: str) -> None:
    """timeline, profile, related_entities and memory_stats answer with structured results under their schemas."""
    events = structured(await session.call_tool("timeline", {"until": "2023-12-31"}), schemas, "timeline")
    assert [e["id"] for e in events["events"]] == [event] and events["events"][0]["tier"] == "episodic"
    none = structured(await session.call_tool("timeline", {"until": "1990-01-01"}), schemas, "timeline")
    assert none["events"] == []
    answer = await session.call_tool("profile", {})
    profile = structured(answer, schemas, "profile")
    entries = profile["preferences"] + profile["facts"] + profile["history"]
    assert profile["user_id"] == user and all(e["memory_id"] in text(answer) for e in entries), profile
    related = structured(
        await session.call_tool("related_entities", {"entity": "User", "depth": 1}), schemas, "related_entities"
    )
    assert related["entity"] == "User" and all(r["hop"] == 1 and r["path"] for r in related["related"])
    stats = structured(await session.call_tool("memory_stats", {}), schemas, "memory_stats")
    assert stats["user_id"] == user and stats["tiers"]["episodic"]["count"] >= 2
    assert stats["tiers"]["semantic"]["count"] >= 1 and "procedural" in stats["tiers"]
    assert "since: is after until" in refused(
        await session.call_tool("timeline", {"since": "2026-02-01", "until": "2026-01-01"})
    )


def _facts(folder: Path) -> dict[str, str]:
    """Alice said where she lives twice; the facts cite her turns, the second supersedes the first."""
    from llama_index.core.base.llms.types import ChatMessage

    from llama_index_memory_hierarchy import HierarchicalMemory

    with HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir=str(folder)) as memory:
        memory.put(ChatMessage(role="user", content="I live in Porto, near the river."))
        memory.put(ChatMessage(role="user", content="I have moved to Berlin now."))
        turns = [item.id for item in memory.episodic.get_session("s1")]
        porto = memory.semantic.add_fact("User", "lives in", "Porto", source_id=turns[0], valid_at="2022-01-01")
        berlin = memory.semantic.add_fact("User", "lives in", "Berlin", source_id=turns[1], valid_at="2024-01-01")
    return {"turn": turns[0], "porto": porto, "berlin": berlin}


def _llm_server_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """A document root with one note, and the CLI tests' scripted stand-in for a hosted LLM (``cli_llms``)."""
    cli_tests = Path(__file__).resolve().parent.parent / "cli"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(cli_tests), os.environ.get("PYTHONPATH")])))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kiln.md").write_text("# Kiln\n\nFire the glaze kiln to cone six, then let it cool overnight.\n", "utf-8")
    return ("--document-root", str(docs), "--llm", "cli_llms:scripted_llm")


async def ask_round(session: ClientSession) -> None:
    """ask_documents with an LLM: the answer, its sources and chunks; the documents lacking it; bad input."""
    schemas = await output_schemas(session)
    ok(await session.call_tool("add_document", {"path": "kiln.md"}))
    asked = await session.call_tool("ask_documents", {"question": "How hot is the glaze kiln fired?"})
    answer = structured(asked, schemas, "ask_documents")
    assert answer["answer"] == "The sources say so [1]." and not answer["insufficient"]
    assert answer["namespace"] == "docs" and answer["question"] == "How hot is the glaze kiln fired?"
    assert answer["citations"][0]["number"] == 1 and answer["citations"][0]["source"].startswith("kiln.md")
    assert answer["chunk_ids"] and all(chunk in ok(asked) for chunk in answer["chunk_ids"])
    empty = structured(
        await session.call_tool("ask_documents", {"question": "What is in there?", "namespace": "empty"}),
        schemas,
        "ask_documents",
    )
    assert empty["insufficient"] and empty["citations"] == [] and empty["chunk_ids"] == []
    assert "question: " in refused(await session.call_tool("ask_documents", {"question": "  "}))
    assert "namespace: " in refused(await session.call_tool("ask_documents", {"question": "x", "namespace": "a:b"}))


async def test_ask_documents_over_stdio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with stdio_session(tmp_path / "memory", "alice", *_llm_server_args(tmp_path, monkeypatch)) as session:
        await ask_round(session)


async def test_ask_documents_over_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = _llm_server_args(tmp_path, monkeypatch)
    tokens = write_tokens(tmp_path / "tokens.toml", {ALICE: "alice", BOB: "bob"})
    with HttpServer(tmp_path / "memory", tokens, *extra) as server:
        async with http_session(server.url, ALICE) as alice:
            await ask_round(alice)
        async with http_session(server.url, BOB) as bob:  # alice's documents are not bob's
            assert structured(
                await bob.call_tool("ask_documents", {"question": "How hot is the glaze kiln fired?"}),
                await output_schemas(bob),
                "ask_documents",
            )["insufficient"]


async def test_stdio_browse_history_documents_and_forget(tmp_path: Path) -> None:
    folder, docs = tmp_path / "memory", tmp_path / "docs"
    docs.mkdir()
    (docs / "bees.md").write_text("# Bees\n\nA hive needs a sunny spot sheltered from wind.\n", "utf-8")
    (tmp_path / "private.md").write_text("# Private\n\nNot for the server.\n", "utf-8")
    (docs / "link.md").symlink_to(tmp_path / "private.md")
    facts = _facts(folder)
    async with stdio_session(folder, "alice", "--document-root", str(docs)) as session:
        schemas = await output_schemas(session)
        history = structured(
            await session.call_tool("fact_history", {"entity": "User", "relation": "lives in"}),
            schemas,
            "fact_history",
        )
        versions = {f["object"]: f for f in history["facts"]}
        assert list(versions) == ["Porto", "Berlin"]  # oldest first
        assert versions["Porto"]["superseded_by"] == facts["berlin"] and not versions["Porto"]["current"]
        assert versions["Berlin"]["current"] and versions["Berlin"]["invalid_at"] is None
        current = structured(
            await session.call_tool("list_memories", {"tier": "semantic", "kind": "fact"}), schemas, "list_memories"
        )
        assert [m["id"] for m in current["memories"]] == [facts["berlin"]]
        everything = structured(
            await session.call_tool("list_memories", {"tier": "semantic", "kind": "fact", "include_history": True}),
            schemas,
            "list_memories",
        )
        assert {m["id"] for m in everything["memories"]} == {facts["porto"], facts["berlin"]}

        fact = structured(await session.call_tool("get_memory", {"memory_id": facts["porto"]}), schemas, "get_memory")
        assert [s["id"] for s in fact["sources"]] == [facts["turn"]]
        assert [v["id"] for v in fact["history"]] == [facts["porto"], facts["berlin"]]
        turn = structured(await session.call_tool("get_memory", {"memory_id": facts["turn"]}), schemas, "get_memory")
        assert facts["porto"] in [d["id"] for d in turn["derived"]]

        added = structured(await session.call_tool("add_document", {"path": "bees.md"}), schemas, "add_document")
        assert len(added["added"]) == 1 and added["chunks_written"] >= 1
        again = structured(
            await session.call_tool("ingest_documents", {"paths": [str(docs / "bees.md")]}), schemas, "ingest_documents"
        )
        assert len(again["unchanged"]) == 1
        found = structured(
            await session.call_tool("search_documents", {"query": "where to put a hive"}), schemas, "search_documents"
        )
        (best, *_) = found["passages"]
        assert "sunny spot" in best["text"] and best["file"] == "bees.md" and found["namespace"] == "docs"
        assert best["chunk_id"] and best["source"].startswith("bees.md")
        nothing = structured(
            await session.call_tool("search_documents", {"query": "hive", "namespace": "empty"}),
            schemas,
            "search_documents",
        )
        assert nothing["passages"] == []
        for name, arguments in [
            ("add_document", {"path": str(tmp_path / "private.md")}),
            ("add_document", {"path": "../private.md"}),
            ("add_document", {"path": "link.md"}),  # a link inside the root to a file outside it
            ("ingest_documents", {"paths": ["."]}),  # the folder holds that link
            ("ingest_documents", {"paths": ["/etc"]}),
        ]:
            field = "path" if name == "add_document" else "paths"
            assert f"{field}: " in (error := refused(await session.call_tool(name, arguments))), error
            assert "outside the folders this server may read" in error, error
        assert "Not for the server" not in text(await session.call_tool("search_documents", {"query": "private"}))

        await browse_and_forget(session, "alice")
    async with stdio_session(tmp_path / "other", "zoe") as session:  # no --document-root: no file at all
        assert "start it with --document-root" in refused(await session.call_tool("add_document", {"path": "x.md"}))
        await erase(session, "zoe")


async def test_http_browse_documents_and_forget_per_token(server: HttpServer) -> None:
    async with http_session(server.url, BOB) as bob:
        await browse_and_forget(bob, "bob")
        schemas = await output_schemas(bob)
        added = structured(
            await bob.call_tool("ingest_documents", {"paths": ["garden"], "namespace": "garden"}),
            schemas,
            "ingest_documents",
        )
        assert len(added["added"]) == 2
        roses = structured(
            await bob.call_tool("search_documents", {"query": "prune roses", "namespace": "garden"}),
            schemas,
            "search_documents",
        )
        assert "late winter" in roses["passages"][0]["text"] and roses["namespace"] == "garden"
        for arguments in ({"paths": ["."]}, {"paths": ["escape.md"]}, {"paths": [str(server.folder.parent)]}):
            assert "outside the folders" in refused(await bob.call_tool("ingest_documents", arguments))
        secret = structured(
            await bob.call_tool("remember", {"content": "Bob's bike lock code is 5521."}), schemas, "remember"
        )["id"]
    async with http_session(server.url, ALICE) as alice:
        # another user's id: not found, not shown, not deleted; another user named: refused
        assert "No memory with id" in refused(await alice.call_tool("get_memory", {"memory_id": secret}))
        assert "No memory with id" in refused(await alice.call_tool("forget", {"memory_ids": [secret]}))
        listed = ok(await alice.call_tool("list_memories", {"limit": 100}))
        assert secret not in listed and "5521" not in listed
        for name, arguments in [
            ("list_memories", {"user_id": "bob"}),
            ("get_memory", {"memory_id": secret, "user_id": "bob"}),
            ("forget_all", {"confirm": "bob", "user_id": "bob"}),
        ]:
            assert "user_id: this token or server may not act for another user" in refused(
                await alice.call_tool(name, arguments)
            )
    async with http_session(server.url, BOB) as bob:
        assert "5521" in ok(await bob.call_tool("get_memory", {"memory_id": secret}))
    async with http_session(server.url, ERIN) as erin:
        await erase(erin, "erin")
