"""Bi-temporal supersession (as in Graphiti): which facts a new fact ends, and which a deletion reinstates.

A new fact with a *functional* predicate (one object at a time: ``lives_in``, ``works_at``,
``spouse``, ...) and a different object ends the old fact's validity (``invalid_at``,
``superseded_by``, ``expired_at``); the old fact stays as history. A fact and its negation
(``works_at`` / ``does_not_work_at``, see :func:`~.extraction.negate_predicate`) end each
other the same way. Late news about the past is history at once, ended by the next known
fact. Removing the fact that superseded another reinstates it.

Everything here changes the in-memory :class:`~.state.SemanticState` only; the tier writes
the records and brings the graph in step.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llama_index_memory_hierarchy.entity_resolution import Entity
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction import NAME_PREDICATE, negate_predicate
from llama_index_memory_hierarchy.tiers.semantic.facts import FACT, Fact, FactInput, fact_content
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState

#: Predicates that hold one object at a time: a new object supersedes the old fact. ``is``, ``likes``,
#: ``has`` and ``prefers`` are not among them: "Carol is left-handed" does not end "Carol is a pilot".
DEFAULT_FUNCTIONAL_PREDICATES = frozenset(
    {
        "lives_in", "works_at", "works_as", "works_in", "age", "spouse", "married_to", "job", "job_title", "title",
        "role", "nationality", "born_in", "born_on", "birthday", "email", "phone", "status", "favorite_color",
        "hometown", NAME_PREDICATE,
    }
)  # fmt: skip


@dataclass
class FactChanges:
    """What adding a batch of facts did to the state, for the tier to write and mirror."""

    ids: list[str | None] = field(default_factory=list)  # one per input: the fact id, None when skipped
    new: list[Fact] = field(default_factory=list)  # facts to write as new records
    texts: dict[str, str] = field(default_factory=dict)  # the content of each new fact
    changed: dict[str, Fact] = field(default_factory=dict)  # existing facts whose record must be rewritten
    ended: list[Fact] = field(default_factory=list)  # facts leaving the graph


def _positives(old: str, new: str) -> list[str]:
    """``[new]`` when ``old`` is the negation of ``new`` ("does_not_work_at" of "works_at"), else ``[]``."""
    return [new] if negate_predicate(new) == old else []


def apply_facts(
    state: SemanticState,
    inputs: Sequence[FactInput],
    resolved: Sequence[Entity],
    *,
    named: Collection[int],
    functional: Collection[str],
    strict: bool,
    now: datetime,
) -> FactChanges:
    """Index ``inputs`` (subject and object of input ``i`` at ``resolved[2i]``, ``resolved[2i+1]``).

    The same current fact only gains provenance (no duplicate); a fact whose subject and object
    are one entity is an error with ``strict``, else skipped, unless it names the user (``named``).
    """
    out = FactChanges()
    for position, fact in enumerate(inputs):
        subject, obj = resolved[2 * position], resolved[2 * position + 1]
        key = (subject.id, fact.predicate, obj.id)
        if subject.id == obj.id and position not in named:
            if strict:
                raise MemoryValidationError(
                    f"facts[{position}]", f"subject and object are the same entity {subject.name!r}"
                )
            out.ids.append(None)
            continue
        existing_id = state.current.get(key)
        if existing_id is not None:  # the same current fact: add provenance, no duplicate
            existing = state.facts[existing_id]
            merged = sorted({*existing.source_ids, *fact.source_ids})
            confidence = max(existing.confidence, fact.confidence)
            if merged != existing.source_ids or confidence != existing.confidence:
                state.unindex(existing_id)
                existing.metadata = {**existing.metadata, "source_ids": merged, "confidence": confidence}
                state.index(existing)
                out.changed[existing_id] = existing
            out.ids.append(existing_id)
            continue
        valid_at = fact.valid_at or now
        fact_id = str(uuid.uuid4())
        metadata: dict[str, Any] = {
            "kind": FACT,
            "subject": fact.subject,
            "subject_id": subject.id,
            "subject_type": subject.type,
            "predicate": fact.predicate,
            "object": fact.object,
            "object_id": obj.id,
            "object_type": obj.type,
            "valid_at": valid_at.isoformat(),
            "invalid_at": None,
            "extractor": fact.extractor,
            "confidence": fact.confidence,
            "source_ids": sorted(set(fact.source_ids)),
            "fact_key": hashlib.sha1("\x1f".join(key).encode()).hexdigest(),
        }
        importance = fact.importance if fact.importance is not None else 0.5
        record_fact = Fact(fact_id, subject.id, fact.predicate, obj.id, True, valid_at, metadata, importance)
        opposite = [
            old
            for old in state.current_for_object(subject.id, obj.id)
            if old.predicate != fact.predicate
            and fact.predicate in {negate_predicate(old.predicate), *_positives(old.predicate, fact.predicate)}
        ]
        ending = opposite + (state.current_for(subject.id, fact.predicate) if fact.predicate in functional else [])
        for old in ending:
            if old.valid_at <= valid_at:  # the new fact is newer: the old one ends
                state.end(old, invalid_at=valid_at.isoformat(), expired_at=now.isoformat(), superseded_by=fact_id)
                out.changed[old.id] = old
                out.ended.append(old)
            else:  # late news about the past: history at once, ended by the next known fact
                later = min(
                    (
                        state.facts[f]
                        for f in state.by_entity.get(subject.id, ())
                        if state.facts[f].subject_id == subject.id
                        and state.facts[f].predicate in {fact.predicate, old.predicate}
                        and state.facts[f].valid_at > valid_at
                    ),
                    key=lambda f: f.valid_at,
                )
                record_fact.current = False
                metadata.update(
                    invalid_at=later.valid_at.isoformat(),
                    expired_at=now.isoformat(),
                    superseded_by=later.id,
                )
        state.index(record_fact)
        out.new.append(record_fact)
        out.texts[fact_id] = fact_content(fact.subject, fact.predicate, fact.object)
        out.ids.append(fact_id)
    return out


def reinstate_superseded(state: SemanticState, removed: Sequence[Fact]) -> list[Fact]:
    """Facts that ``removed`` had superseded become current again (unless another fact holds the slot)."""
    gone = {f.id for f in removed}
    reinstated: list[Fact] = []
    for fact in removed:
        for other in list(state.facts.values()):
            if other.metadata.get("superseded_by") != fact.id or other.id in gone:
                continue
            if state.current_for(other.subject_id, other.predicate) or other.key in state.current:
                continue
            state.unindex(other.id)
            other.current = True
            other.metadata = {k: v for k, v in other.metadata.items() if k not in {"expired_at", "superseded_by"}} | {
                "invalid_at": None
            }
            state.index(other)
            reinstated.append(other)
    return reinstated


def repoint_entity(state: SemanticState, other: Entity, user: Entity) -> list[Fact]:
    """The facts of ``other`` become facts of ``user`` (who introduced themselves by its name)."""
    registry = state.registry
    assert registry is not None
    moved = []
    for fact_id in sorted(state.by_entity.get(other.id, ())):
        fact = state.unindex(fact_id)
        if fact is None:
            continue
        for side in ("subject", "object"):
            if getattr(fact, f"{side}_id") == other.id:
                setattr(fact, f"{side}_id", user.id)
                fact.metadata = {**fact.metadata, f"{side}_id": user.id, f"{side}_type": "PERSON"}
        state.index(fact)
        moved.append(fact)
    registry.absorb(user, other)
    state.by_entity.pop(other.id, None)
    return moved
