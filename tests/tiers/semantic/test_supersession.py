"""Supersession on the in-memory state alone: which facts a new fact ends, which a deletion reinstates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llama_index_memory_hierarchy.entity_resolution import Entity
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.tiers.semantic.facts import FactInput
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState
from llama_index_memory_hierarchy.tiers.semantic.supersession import (
    DEFAULT_FUNCTIONAL_PREDICATES,
    FactChanges,
    apply_facts,
    reinstate_superseded,
)

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
ALICE = Entity(id="alice", name="Alice", type="PERSON")
PARIS = Entity(id="paris", name="Paris", type="PLACE")
ROME = Entity(id="rome", name="Rome", type="PLACE")
ACME = Entity(id="acme", name="Acme", type="ORG")


def _state() -> SemanticState:
    state = SemanticState("u1")
    state.reset()
    return state


def _add(
    state: SemanticState, subject: Entity, predicate: str, obj: Entity, valid_at: datetime, **kw: Any
) -> FactChanges:
    fact = FactInput(subject=subject.name, predicate=predicate, object=obj.name, valid_at=valid_at, **kw)
    return apply_facts(
        state, [fact], [subject, obj], named=(), functional=DEFAULT_FUNCTIONAL_PREDICATES, strict=True, now=NOW
    )


def test_a_functional_predicate_ends_the_old_fact_which_stays_as_history() -> None:
    state = _state()
    first = _add(state, ALICE, "lives_in", PARIS, NOW - timedelta(days=10))
    second = _add(state, ALICE, "lives_in", ROME, NOW)
    old, new = state.facts[first.ids[0]], state.facts[second.ids[0]]
    assert not old.current and new.current
    assert old.metadata["superseded_by"] == new.id and old.metadata["invalid_at"] == NOW.isoformat()
    assert second.ended == [old] and old.id in second.changed
    assert state.current == {new.key: new.id}


def test_a_non_functional_predicate_keeps_both_and_a_current_fact_only_gains_sources() -> None:
    state = _state()
    _add(state, ALICE, "likes", PARIS, NOW)
    _add(state, ALICE, "likes", ROME, NOW)
    assert len(state.current) == 2
    again = _add(state, ALICE, "likes", ROME, NOW, source_ids=["turn-1"])
    assert not again.new and state.facts[again.ids[0]].source_ids == ["turn-1"]


def test_a_negation_ends_the_fact_it_negates() -> None:
    state = _state()
    works = _add(state, ALICE, "works_at", ACME, NOW - timedelta(days=1))
    quits = _add(state, ALICE, "does_not_work_at", ACME, NOW)
    assert not state.facts[works.ids[0]].current and state.facts[quits.ids[0]].current


def test_late_news_about_the_past_is_history_at_once() -> None:
    state = _state()
    recent = _add(state, ALICE, "lives_in", ROME, NOW)
    past = _add(state, ALICE, "lives_in", PARIS, NOW - timedelta(days=30))
    old = state.facts[past.ids[0]]
    assert not old.current and old.metadata["superseded_by"] == recent.ids[0]
    assert state.facts[recent.ids[0]].current


def test_the_same_entity_on_both_sides_is_an_error_or_skipped() -> None:
    state = _state()
    with pytest.raises(MemoryValidationError):
        _add(state, ALICE, "knows", ALICE, NOW)
    fact = FactInput(subject="Alice", predicate="knows", object="Alice")
    skipped = apply_facts(state, [fact], [ALICE, ALICE], named=(), functional=(), strict=False, now=NOW)
    assert skipped.ids == [None] and not state.facts


def test_deleting_the_superseding_fact_reinstates_the_old_one() -> None:
    state = _state()
    first = _add(state, ALICE, "lives_in", PARIS, NOW - timedelta(days=10))
    second = _add(state, ALICE, "lives_in", ROME, NOW)
    removed = state.unindex(second.ids[0])
    assert removed is not None
    reinstated = reinstate_superseded(state, [removed])
    old = state.facts[first.ids[0]]
    assert reinstated == [old] and old.current
    assert "superseded_by" not in old.metadata and old.metadata["invalid_at"] is None


def test_detaching_sources_dooms_the_facts_only_they_supported() -> None:
    state = _state()
    only = _add(state, ALICE, "likes", PARIS, NOW, source_ids=["a"])
    shared = _add(state, ALICE, "likes", ROME, NOW, source_ids=["a", "b"])
    doomed, touched = state.detach_sources(["a"])
    assert doomed == only.ids
    assert [f.id for f in touched] == shared.ids and state.facts[shared.ids[0]].source_ids == ["b"]
