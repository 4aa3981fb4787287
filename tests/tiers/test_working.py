"""Working memory: capacity, token budget, TTL, priority eviction, retrieval, forgetting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.runtime import get_runtime
from llama_index_memory_hierarchy.text import count_tokens
from llama_index_memory_hierarchy.tiers.working import WorkingMemory
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, utcnow


def working(**settings: object) -> WorkingMemory:
    return WorkingMemory(user_id="alice", session_id="s1", runtime=get_runtime(), config=MemoryConfig(**settings))


def test_add_get_and_item_fields() -> None:
    memory = working()
    memory_id = memory.add("Alice likes green tea", importance=0.8, metadata={"topic": "drinks"})
    item = memory.get(memory_id)
    assert item is not None
    assert item.memory_type is MemoryType.WORKING
    assert (item.user_id, item.session_id, item.importance) == ("alice", "s1", 0.8)
    assert item.metadata == {"topic": "drinks"}
    assert memory.has_memory(memory_id)
    assert memory.get_stats()["count"] == 1


def test_capacity_evicts_lowest_priority_and_reports_it() -> None:
    evicted: list[MemoryItem] = []

    async def on_evict(items: list[MemoryItem]) -> None:
        evicted.extend(items)

    memory = WorkingMemory(
        user_id="alice",
        session_id="s1",
        runtime=get_runtime(),
        config=MemoryConfig(working_capacity=3),
        on_evict=on_evict,
    )
    keep = memory.add("important plan", importance=0.9)
    trivial = memory.add("trivial remark", importance=0.1)
    memory.add("normal note", importance=0.5)
    memory.add("another note", importance=0.5)
    assert memory.get_stats()["count"] == 3
    assert memory.get(trivial) is None
    assert memory.get(keep) is not None
    assert [item.id for item in evicted] == [trivial]


def test_token_budget_uses_a_real_tokenizer() -> None:
    text = "internationalization " * 20
    budget = count_tokens(text) * 2 + 1
    memory = working(working_token_budget=budget, working_capacity=100)
    for _ in range(5):
        memory.add(text)
    stats = memory.get_stats()
    assert stats["tokens"] <= budget
    assert stats["count"] == 2
    assert count_tokens(text) != len(text.split())  # not a whitespace count


def test_item_larger_than_budget_is_rejected() -> None:
    memory = working(working_token_budget=5)
    with pytest.raises(MemoryValidationError, match="content"):
        memory.add("this sentence is certainly longer than five tokens in any tokenizer")
    assert memory.get_stats()["count"] == 0


def test_ttl_expiry_keeps_pinned_items() -> None:
    memory = working(working_ttl_seconds=60)
    old = MemoryItem(content="stale thought", user_id="alice", created_at=utcnow() - timedelta(minutes=5))
    pinned_old = MemoryItem(
        content="pinned thought", user_id="alice", created_at=utcnow() - timedelta(minutes=5), pinned=True
    )
    memory.add_many([old, pinned_old, "fresh thought"])
    remaining = {item.content for item in memory.get_recent(10)}
    assert remaining == {"pinned thought", "fresh thought"}


def test_retrieve_ranks_relevant_items_first(make_memory) -> None:
    memory = make_memory().working  # a tier retrieves through its memory's search (a working tier alone cannot)
    memory.add_many(["The user's cat is called Miso", "Paris is in France", "Meeting moved to Friday"])
    results = memory.retrieve("what is the name of my cat?", limit=2)
    assert results[0].content == "The user's cat is called Miso"
    assert results[0].score is not None
    assert memory.get(results[0].id).access_count == 1


def test_retrieve_filters_and_unknown_filter(make_memory) -> None:
    memory = make_memory().working
    memory.add("note in s1 about tea")
    memory.add("note in s2 about tea", session_id="s2")
    assert [i.content for i in memory.retrieve("tea", session_id="s2")] == ["note in s2 about tea"]
    with pytest.raises(MemoryValidationError, match="colour"):
        memory.retrieve("tea", colour="red")
    with pytest.raises(MemoryHierarchyError, match=r"memory\.working\.retrieve"):
        working().retrieve("tea")


def test_summary_recent_important() -> None:
    memory = working()
    memory.add("low", importance=0.1)
    memory.add("high", importance=0.9)
    assert memory.get_important(1)[0].content == "high"
    assert memory.get_recent(1)[0].content == "high"
    summary = memory.get_context_summary(max_chars=12)
    assert summary.startswith("- high") and len(summary) <= 12


def test_update_remove_clear() -> None:
    memory = working()
    memory_id = memory.add("draft")
    assert memory.update(memory_id, content="final", importance=0.7)
    assert memory.get(memory_id).content == "final"
    assert memory.remove(memory_id)
    assert not memory.remove(memory_id)
    memory.add("x")
    assert memory.clear() == 1


def test_forget_strategies_with_dry_run_and_pins(make_memory) -> None:
    memory = make_memory().working  # a tier forgets through its memory's forgetting (a working tier alone cannot)
    low = memory.add("low", importance=0.1)
    memory.add("high", importance=0.9)
    memory.pin(low)
    assert memory.forget("importance_based", threshold=0.5, dry_run=True) == 0
    memory.add("low two", importance=0.1)
    assert memory.forget("importance_based", threshold=0.5, dry_run=True) == 1
    assert memory.get_stats()["count"] == 3
    assert memory.forget("importance_based", threshold=0.5) == 1
    assert memory.forget("capacity_based", keep=1) == 1  # the pinned one counts toward what is kept
    with pytest.raises(MemoryValidationError, match="strategy"):
        memory.forget("random")
    with pytest.raises(MemoryHierarchyError, match=r"memory\.working\.forget"):
        working().forget("importance_based")


def test_bad_input_names_the_field() -> None:
    memory = working()
    with pytest.raises(MemoryValidationError, match="importance"):
        memory.add("x", importance=1.5)
    with pytest.raises(MemoryValidationError, match="content"):
        memory.add("   ")
    with pytest.raises(MemoryValidationError, match="item_or_text"):
        memory.add(42)  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError, match="memory_id"):
        memory.get("../etc/passwd")
