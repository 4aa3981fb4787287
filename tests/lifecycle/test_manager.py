"""MemoryManager: fused retrieval across tiers with every filter, pins, async twins from any loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

T0 = datetime(2025, 1, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def stocked(memory_factory):
    """One memory per tier about bicycles, plus unrelated ones, at known times and importances."""
    memory = memory_factory()
    manager = memory.manager
    ids = {
        "working": manager.add_memory("Right now the user is fixing the chain of their bicycle.", "working", 0.8),
        "episodic": manager.add_memory(
            "The user rode the new bicycle to Potsdam.", "episodic", 0.7, timestamp=T0 - timedelta(days=3)
        ),
        "old": manager.add_memory(
            "The user sold their old bicycle at the flea market.", "episodic", 0.2, timestamp=T0 - timedelta(days=300)
        ),
        "semantic": manager.add_memory("The user's bicycle is a green Brompton.", "semantic", 0.9),
        "perceptual": manager.add_memory("A photo of a green folding bicycle by a canal.", "perceptual", 0.6),
        "procedural": manager.add_memory("Always check the tyres of my bicycle before a ride.", "procedural", 0.8),
        "noise": manager.add_memory("The user likes strong black coffee.", "semantic", 0.5),
    }
    memory.put_messages([ChatMessage(role="user", content="Which tyres fit a Brompton bicycle?")])
    return memory, ids


def test_fuses_every_tier_and_keeps_relevant_items_first(stocked) -> None:
    memory, ids = stocked
    results = memory.manager.retrieve_memories("my bicycle", limit=10)
    found = {item.id for item in results}
    assert {ids["working"], ids["episodic"], ids["semantic"], ids["perceptual"], ids["procedural"]} <= found
    assert {item.memory_type for item in results} == set(MemoryType)
    scores = [item.score for item in results]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert results[-1].id == ids["noise"] or ids["noise"] not in found  # coffee comes last if at all
    top = memory.manager.retrieve_memories("Brompton", limit=2)
    assert ids["semantic"] in {i.id for i in top}


def test_put_turns_count_once_although_working_and_episodic_hold_them(stocked) -> None:
    memory, _ = stocked
    results = memory.manager.retrieve_memories("Brompton tyres", limit=10)
    turns = [i for i in results if i.content == "Which tyres fit a Brompton bicycle?"]
    assert len(turns) == 1 and turns[0].memory_type is MemoryType.EPISODIC


def test_filters_are_honoured(stocked) -> None:
    memory, ids = stocked
    manager = memory.manager
    only = manager.retrieve_memories("bicycle", memory_types=["semantic", "perceptual"], limit=10)
    assert {i.memory_type for i in only} <= {MemoryType.SEMANTIC, MemoryType.PERCEPTUAL} and only
    important = manager.retrieve_memories("bicycle", limit=10, min_importance=0.65)
    assert important and all(i.importance >= 0.65 for i in important)
    assert ids["old"] not in {i.id for i in important}
    window = manager.retrieve_memories("bicycle", limit=10, time_range=(T0 - timedelta(days=10), T0))
    assert [i.id for i in window] == [ids["episodic"]]
    past = manager.retrieve_memories("bicycle", memory_types=["episodic"], limit=10, time_range=(None, T0))
    assert {i.id for i in past} == {ids["episodic"], ids["old"]}
    session = manager.retrieve_memories("bicycle", limit=10, session_id="elsewhere")
    assert session == []
    tagged = manager.retrieve_memories("bicycle", limit=10, metadata={"role": "user"})
    assert [i.content for i in tagged] == ["Which tyres fit a Brompton bicycle?"]
    assert len(manager.retrieve_memories("bicycle", limit=2)) == 2


def test_bad_arguments_name_the_field(stocked) -> None:
    manager = stocked[0].manager
    for kwargs, field in [
        ({"memory_types": ["long_term"]}, "memory_types"),
        ({"limit": 0}, "limit"),
        ({"min_importance": 2}, "min_importance"),
        ({"time_range": (1, 2, 3)}, "time_range"),
    ]:
        with pytest.raises(MemoryValidationError, match=field):
            manager.retrieve_memories("bicycle", **kwargs)
    with pytest.raises(MemoryValidationError, match="query"):
        manager.retrieve_memories("  ")


def test_access_reinforces_the_ranking(memory_factory) -> None:
    memory = memory_factory()
    manager = memory.manager
    a = manager.add_memory("Note alpha about the garden shed.", "episodic", 0.5)
    b = manager.add_memory("Note beta about the garden shed.", "episodic", 0.5)
    for _ in range(7):
        memory.context.runtime.run(memory.context.records.touch("alice", [b]))
    item_b = memory.episodic.get(b)
    assert item_b.access_count == 7
    assert manager.effective_importance(item_b) > manager.effective_importance(memory.episodic.get(a))


def test_pin_and_unpin_in_every_tier(stocked) -> None:
    memory, ids = stocked
    manager = memory.manager
    for key in ("working", "episodic", "semantic", "perceptual"):
        assert manager.pin(ids[key])
    assert memory.working.get(ids["working"]).pinned
    assert memory.semantic.get(ids["semantic"]).pinned
    assert manager.unpin(ids["semantic"]) and not memory.semantic.get(ids["semantic"]).pinned
    assert not manager.pin("00000000-0000-4000-8000-000000000000")
    with pytest.raises(MemoryValidationError, match="memory_id"):
        manager.pin("not-an-id")


async def test_async_twins_from_the_callers_loop(memory_factory) -> None:
    memory = memory_factory()
    manager: MemoryManager = memory.manager
    assert isinstance(manager, MemoryManager) and manager is memory.manager
    first, second = await asyncio.gather(
        manager.aadd_memory("I keep my passport in the blue drawer.", "semantic"),
        manager.aadd_memory("On Friday I renewed my passport.", "episodic"),
    )
    found = await manager.aretrieve_memories("passport", limit=5)
    assert {first, second} <= {i.id for i in found}
    assert await manager.aclassify("Remind me in 5 minutes") is not None
    assert await manager.apin(first) and (await manager.aunpin(first))
    item = MemoryItem(content="x")
    assert manager.effective_importance(item) == item.importance


def test_update_memory_corrects_a_turn_in_every_tier_and_its_facts_keep_history(memory_factory) -> None:
    """A put turn is working and episodic memory under one id; correcting it corrects its facts, dated."""
    memory = memory_factory()
    memory.put_messages(
        [ChatMessage(role="user", content="I work at Initech."), ChatMessage(role="assistant", content="Noted.")]
    )
    memory.manager.consolidate()
    (turn,) = [i for i in memory.episodic.get_session() if "Initech" in i.content]
    assert memory.working.get(turn.id) is not None  # the session's copy, same id
    (initech,) = memory.semantic.get_facts("Initech")

    updated = memory.manager.update_memory(turn.id, content="I work at Globex.")
    assert updated is not None and updated.memory_type == MemoryType.EPISODIC and "Globex" in updated.content
    assert memory.working.get(turn.id).content == memory.episodic.get(turn.id).content == "I work at Globex."
    history = {i.content: i.metadata for i in memory.semantic.get_facts("User", include_history=True)}
    assert history["User works at Globex"]["invalid_at"] is None
    assert history["User works at Initech"]["invalid_at"] >= history["User works at Initech"]["valid_at"]
    assert memory.semantic.get_stats()["historical_facts"] == 1
    assert memory.manager.update_memory("3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60", importance=0.3) is None

    # a later turn that contradicts supersedes in turn; deleting the corrected turn leaves none of its facts
    later = memory_factory(session_id="s2")
    later.put_messages(
        [ChatMessage(role="user", content="I work at Umbrella now."), ChatMessage(role="assistant", content="OK.")]
    )
    later.manager.consolidate()
    assert {i.content for i in later.semantic.get_facts("User")} == {"User works at Umbrella"}
    assert later.semantic.get_stats()["historical_facts"] == 2
    later.manager.forget_memories([turn.id])
    left = {i.id: i.content for i in later.semantic.get_facts("User", include_history=True)}
    assert initech.id not in left and set(left.values()) == {"User works at Umbrella"}
