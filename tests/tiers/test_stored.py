"""``StoredTier`` built alone: it deletes its own records and runs the cascades registered on it."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory


def test_a_tier_built_alone_deletes_its_records_and_runs_its_cascades(make_memory) -> None:
    memory = make_memory()
    tier = EpisodicMemory(user_id="alice", session_id="s1", context=memory.context)
    cascaded: list[list[str]] = []

    async def cascade(ids: Sequence[str]) -> int:
        cascaded.append(list(ids))
        return 0

    tier.on_delete(cascade)
    first, second = tier.add_many(["We met at the harbour.", "The ferry left at noon."])
    assert tier.remove(first) and cascaded == [[first]]
    assert tier.get(first) is None and tier.get(second) is not None
    assert tier.remove(first) is False and cascaded == [[first]]  # nothing deleted: nothing to cascade
    assert memory.episodic.get(second) is not None  # the same stores, seen through the memory's own tier
