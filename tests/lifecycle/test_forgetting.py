"""Forgetting across tiers: each strategy with a dry run that reports what would go; pinned items stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import MemoryType, utcnow


def query(tier) -> list:
    return tier.runtime.run(tier.aquery())


@pytest.fixture
def stocked(memory_factory):
    """Strong, weak and old memories in every tier; one weak old memory of each durable tier pinned."""
    memory = memory_factory()
    m = memory.manager
    now = utcnow()
    old = now - timedelta(days=90)
    ids = {
        "w_strong": m.add_memory("Current task: migrate the billing service.", "working", 0.9),
        "w_weak": m.add_memory("Scratch: maybe rename the variable.", "working", 0.1),
        "e_strong": m.add_memory("The user got promoted to team lead.", "episodic", 0.9, timestamp=now),
        "e_weak": m.add_memory("The user had a sandwich for lunch.", "episodic", 0.1, timestamp=now),
        "e_old": m.add_memory("The user visited the dentist.", "episodic", 0.5, timestamp=old),
        "e_pinned": m.add_memory("The user's first day at the company.", "episodic", 0.1, timestamp=old),
        "s_strong": m.add_memory("The user is allergic to penicillin.", "semantic", 0.95),
        "s_weak": m.add_memory("The user once mentioned liking beige.", "semantic", 0.1),
        "s_pinned": m.add_memory("The user's employee number is 4471.", "semantic", 0.1),
        "p_weak": m.add_memory("A blurry photo of a parking lot.", "perceptual", 0.1, timestamp=old),
    }
    assert m.pin(ids["e_pinned"]) and m.pin(ids["s_pinned"])
    return memory, ids


def everything(memory) -> set[str]:
    ids = {i.id for i in memory.working.get_recent(1000)}
    for tier in (memory.episodic, memory.semantic, memory.perceptual):
        ids |= {i.id for i in query(tier)}
    return ids


def test_importance_based_dry_run_then_for_real(stocked) -> None:
    memory, ids = stocked
    before = everything(memory)
    dry = memory.manager.forget("importance_based", dry_run=True, threshold=0.3)
    assert dry.dry_run and dry.strategy == "importance_based" and dry.params == {"threshold": 0.3}
    expected = {ids["w_weak"], ids["e_weak"], ids["s_weak"], ids["p_weak"]}
    assert expected <= set(dry.ids())
    assert ids["e_pinned"] not in dry.ids() and ids["s_pinned"] not in dry.ids()
    by_tier = dry.tiers
    assert set(by_tier) == {"working", "episodic", "semantic", "perceptual", "procedural"}
    assert by_tier["episodic"].pinned_kept == 1 and by_tier["semantic"].pinned_kept == 1
    weak = next(i for i in by_tier["episodic"].items if i.id == ids["e_weak"])
    assert weak.content == "The user had a sandwich for lunch." and "< 0.3" in weak.reason
    assert everything(memory) == before  # a dry run changes nothing

    real = memory.manager.forget("importance_based", threshold=0.3)
    assert set(real.ids()) == set(dry.ids())
    left = everything(memory)
    assert not (set(real.ids()) & left)
    assert {ids["e_pinned"], ids["s_pinned"], ids["w_strong"], ids["e_strong"], ids["s_strong"]} <= left
    assert memory.manager.events()[-1]["detail"]["counts"]["episodic"] == real.tiers["episodic"].count


def test_time_based(stocked) -> None:
    memory, ids = stocked
    dry = memory.manager.forget("time_based", ["episodic", "perceptual"], dry_run=True, older_than=30 * 86400)
    assert set(dry.ids()) == {ids["e_old"], ids["p_weak"]}
    assert set(dry.tiers) == {"episodic", "perceptual"}
    cutoff = datetime.now(UTC) - timedelta(days=30)
    real = memory.manager.forget("time_based", memory_types=["episodic", "perceptual"], before=cutoff)
    assert set(real.ids()) == {ids["e_old"], ids["p_weak"]}
    assert memory.perceptual.get(ids["p_weak"]) is None
    assert memory.episodic.get(ids["e_pinned"]) is not None  # old, but pinned


def test_capacity_based(stocked) -> None:
    memory, ids = stocked
    dry = memory.manager.forget("capacity_based", ["episodic"], dry_run=True, keep=2)
    # four episodic memories (one pinned): keep the pinned one and the strongest other
    assert [i.id for i in dry.tiers["episodic"].items] == [ids["e_old"], ids["e_weak"]]
    real = memory.manager.forget("capacity_based", ["episodic"], keep=2)
    assert {i.id for i in query(memory.episodic)} == {ids["e_pinned"], ids["e_strong"]}
    assert real.tiers["episodic"].count == 2


def test_decay(stocked) -> None:
    memory, ids = stocked
    dry = memory.manager.forget("decay", dry_run=True, threshold=0.05, half_life_hours=24 * 7)
    # 90-day-old memories have decayed to nothing; recent strong ones have not
    assert {ids["e_old"], ids["p_weak"]} <= set(dry.ids())
    assert not ({ids["e_strong"], ids["s_strong"], ids["w_strong"], ids["e_pinned"]} & set(dry.ids()))
    memory.manager.forget("decay", threshold=0.05, half_life_hours=24 * 7)
    assert memory.episodic.get(ids["e_old"]) is None and memory.episodic.get(ids["e_pinned"]) is not None


def test_access_protects_from_forgetting(memory_factory) -> None:
    memory = memory_factory()
    m = memory.manager
    used = m.add_memory("The wifi password is on the fridge.", "episodic", 0.25)
    unused = m.add_memory("The wifi router is white.", "episodic", 0.25)
    for _ in range(10):
        memory.context.runtime.run(memory.context.records.touch("alice", [used]))
    report = m.forget("importance_based", ["episodic"], dry_run=True, threshold=0.3)
    assert report.ids() == [unused]


def test_unpinned_items_become_forgettable(stocked) -> None:
    memory, ids = stocked
    memory.manager.unpin(ids["s_pinned"])
    assert ids["s_pinned"] in memory.manager.forget("importance_based", ["semantic"], dry_run=True).ids()


def test_invalid_strategies_and_parameters(stocked) -> None:
    manager = stocked[0].manager
    with pytest.raises(MemoryValidationError, match="strategy"):
        manager.forget("random")
    with pytest.raises(MemoryValidationError, match="older_than"):
        manager.forget("importance_based", older_than=5)
    with pytest.raises(MemoryValidationError, match="threshold"):
        manager.forget("importance_based", threshold=7)
    with pytest.raises(MemoryValidationError, match="keep"):
        manager.forget("capacity_based", keep=-1)
    with pytest.raises(MemoryValidationError, match="memory_types"):
        manager.forget("decay", ["long_term"])
    report = manager.forget("importance_based", [MemoryType.WORKING], dry_run=True)
    assert list(report.tiers) == ["working"]
