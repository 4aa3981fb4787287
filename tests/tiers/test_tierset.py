"""The tier set: each tier built once with the caller's options, and the delete and edit cascades wired through them."""

from __future__ import annotations

from pathlib import Path

from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME, SQLitePropertyGraphStore


def test_delete_cascade_updates_the_callers_graph_store(make_memory, persist_dir: Path, tmp_path: Path) -> None:
    custom = SQLitePropertyGraphStore(tmp_path / "custom" / GRAPH_DB_NAME)
    memory = make_memory(graph_store=custom)
    turn = memory.episodic.add("I moved to Lisbon last spring.")
    fact = memory.semantic.add_fact("Alice", "lives_in", "Lisbon", source_id=turn)
    assert custom.relation_keys("alice") != set()

    assert memory.episodic.remove(turn)
    assert memory.semantic.get(fact) is None  # the fact only this turn supported went with it
    assert custom.relation_keys("alice") == set()  # ... from the caller's graph store
    assert not (persist_dir / GRAPH_DB_NAME).exists()  # no other graph store was opened to do it


def test_each_tier_is_built_once(make_memory) -> None:
    memory = make_memory()
    assert memory.semantic is memory.semantic and memory.perceptual is memory.perceptual
    assert memory.procedural is memory.procedural
    assert memory.tiers() == [memory.working, memory.episodic, memory.semantic, memory.perceptual, memory.procedural]


def test_an_edited_turn_corrects_its_facts_and_keeps_their_history(make_memory) -> None:
    memory = make_memory()
    turn = memory.episodic.add("I work at Initech.")
    old = memory.semantic.add_fact("User", "works_at", "Initech", source_id=turn)
    untouched = memory.episodic.add("I live in Lyon.")  # cites nothing: an edit extracts nothing from it
    assert memory.episodic.update(turn, content="I work at Globex.")
    assert memory.episodic.update(untouched, content="I live in Nantes.")
    facts = memory.semantic.get_facts("User", include_history=True)
    by_object = {f.metadata["object"]: f for f in facts}
    assert set(by_object) == {"Initech", "Globex"}
    assert by_object["Initech"].id == old and by_object["Initech"].metadata["invalid_at"] is not None
    assert by_object["Globex"].metadata["invalid_at"] is None and by_object["Globex"].metadata["source_ids"] == [turn]
    assert memory.episodic.remove(turn)
    assert memory.semantic.get_facts("User", include_history=True) == []  # the history goes with its source
