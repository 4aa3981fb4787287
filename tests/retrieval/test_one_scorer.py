"""One scorer: a tier's ``retrieve``, its ``as_retriever`` and the cross-tier search restricted to it give the
same memories with the same scores and explanations, and with one tier holding every candidate, the search
over all tiers scores them as that tier does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from llama_index_memory_hierarchy.errors import MemoryHierarchyError
from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
from llama_index_memory_hierarchy.types import MemoryItem

START = datetime(2025, 3, 1, 9, tzinfo=UTC)
TURNS = [
    ("Ines", "I adopted a grey kitten from the shelter on Saturday."),
    ("Tomas", "What did you name the kitten?"),
    ("Ines", "We called her Pebble, after the beach where we met."),
    ("Tomas", "I repaired the old sailing boat with my uncle last month."),
    ("Ines", "Did the boat survive the storm in April?"),
    ("Tomas", "Barely, the mast cracked and we replaced it."),
    ("Ines", "My sister starts a pottery class in the autumn."),
]
FACTS = [("Ines", "owns", "a kitten named Pebble"), ("Tomas", "repaired", "a sailing boat")]
QUERIES = ["What is the kitten called?", "Who fixed the boat?", "pottery class", "When did the mast crack?"]


def scored(items: list[MemoryItem]) -> list[tuple[str, float, dict[str, float]]]:
    return [(item.id, item.score or 0.0, dict(item.explanation or {})) for item in items]


def same(left: list[tuple[str, float, dict[str, float]]], right: list[tuple[str, float, dict[str, float]]]) -> None:
    """Equal ids in order, equal scores and explanations (recency moves with the clock between two calls)."""
    assert [i for i, _, _ in left] == [i for i, _, _ in right]
    for (_, a, parts_a), (_, b, parts_b) in zip(left, right, strict=True):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-9)
        assert parts_a.keys() == parts_b.keys()
        assert all(parts_a[k] == pytest.approx(parts_b[k], rel=1e-5, abs=1e-6) for k in parts_a)


def turns(session: str) -> list[MemoryItem]:
    return [
        MemoryItem(
            content=text,
            user_id="alice",
            session_id=session,
            timestamp=START + timedelta(minutes=i),
            metadata={"speaker": speaker},
        )
        for i, (speaker, text) in enumerate(TURNS)
    ]


def test_tier_retrieval_is_the_search_restricted_to_the_tier(make_memory) -> None:
    memory = make_memory()
    memory.episodic.add_many(turns("s1"))
    memory.semantic.add_facts(FACTS)
    memory.working.add("Ines asked to be reminded about the vet appointment for the kitten.")
    for query in QUERIES:
        for kind in ("episodic", "semantic", "working"):
            tier = memory.tiers([kind])[0]
            searched = scored(memory.search(query, 4, memory_types=[kind]))
            same(scored(tier.retrieve(query, 4)), searched)
            nodes = tier.as_retriever(similarity_top_k=4).retrieve(query)
            same([(n.node.node_id, n.score or 0.0, n.node.metadata.get("explanation", {})) for n in nodes], searched)


def test_one_tier_scores_its_candidates_as_the_whole_hierarchy_does(make_memory) -> None:
    memory = make_memory()
    memory.episodic.add_many(turns("s1"))  # the only tier with memories: every candidate is a turn
    for query in QUERIES:
        whole = scored(memory.search(query, 5))
        assert whole, query
        same(scored(memory.episodic.retrieve(query, 5)), whole)


def test_a_tier_built_alone_says_it_has_no_search(make_memory) -> None:
    memory = make_memory()
    alone = EpisodicMemory(user_id="alice", session_id="s1", context=memory.context)
    alone.add("The ferry leaves at noon.")
    with pytest.raises(MemoryHierarchyError, match=r"memory\.episodic\.retrieve"):
        alone.retrieve("ferry")
