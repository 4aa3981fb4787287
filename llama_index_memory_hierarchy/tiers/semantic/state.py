"""One user's semantic state: facts, entities and the indexes over them, shared in-process.

The state is loaded once from the fact records and kept in step by every change; each
:class:`~.stores.context.StoreContext` holds one per user (``shared.semantic``, :func:`semantic_state`), so
that every ``SemanticMemory`` of that user sees the same facts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.entity_resolution import Entity, EntityRegistry
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction import NAME_PREDICATE, USER_ENTITY
from llama_index_memory_hierarchy.tiers.semantic.facts import FACT, Fact
from llama_index_memory_hierarchy.types import as_utc

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.base import Record
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)


def stored_valid_at(value: Any, timestamp: datetime) -> datetime:
    """A fact record's stored ``valid_at`` as an aware time; one out of range or unreadable (a row written before
    times were bounded, or by hand) is clamped, or replaced by the record's own time, with a warning: one bad row
    must not make every fact of the user unreadable."""
    if value is None:
        return timestamp
    try:
        return as_utc(value, "valid_at")
    except MemoryValidationError as exc:
        try:
            moment = as_utc(value, "valid_at", clamp=True)
        except MemoryValidationError:
            moment = timestamp
        logger.warning("a fact's stored valid_at cannot be used (%s); it reads as %s", exc, moment.isoformat())
        return moment


@dataclass
class SemanticState:
    """One user's facts, entities and indexes, loaded once from the records, shared in-process."""

    user_id: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: bool = False
    #: ``StoreContext.foreign_revision`` of the user when loaded: other processes' writes since make it stale.
    revision: tuple[int, int] = (0, 0)
    registry: EntityRegistry | None = None
    facts: dict[str, Fact] = field(default_factory=dict)
    current: dict[tuple[str, str, str], str] = field(default_factory=dict)
    by_entity: dict[str, set[str]] = field(default_factory=dict)
    by_source: dict[str, set[str]] = field(default_factory=dict)
    statements: set[str] = field(default_factory=set)

    def reset(self) -> None:
        self.registry = EntityRegistry(self.user_id)
        self.facts.clear()
        self.current.clear()
        self.by_entity.clear()
        self.by_source.clear()
        self.statements.clear()

    def load(self, records: Iterable[Record]) -> None:
        """Rebuild the state from this user's semantic records (facts and statements)."""
        self.reset()
        registry = self.registry
        assert registry is not None
        for record in records:
            item = record.item
            meta = item.metadata
            if meta.get("kind") != FACT:
                self.statements.add(item.id)
                continue
            for side in ("subject", "object"):
                entity = Entity(id=meta[f"{side}_id"], name=meta[side], type=meta.get(f"{side}_type", "ENTITY"))
                registry.add(entity)
            self.index(
                Fact(
                    id=item.id,
                    subject_id=meta["subject_id"],
                    predicate=meta["predicate"],
                    object_id=meta["object_id"],
                    current=meta.get("invalid_at") is None,
                    valid_at=stored_valid_at(meta.get("valid_at") or None, item.timestamp),
                    metadata=dict(meta),
                    importance=item.importance,
                )
            )
        for fact in self.facts.values():
            if fact.current and fact.predicate == NAME_PREDICATE and fact.subject_id == fact.object_id:
                registry.entities[fact.subject_id].name = str(fact.metadata.get("object") or USER_ENTITY)

    def index(self, fact: Fact) -> None:
        self.facts[fact.id] = fact
        if fact.current:
            self.current[fact.key] = fact.id
        for eid in (fact.subject_id, fact.object_id):
            self.by_entity.setdefault(eid, set()).add(fact.id)
        for source in fact.source_ids:
            self.by_source.setdefault(source, set()).add(fact.id)

    def unindex(self, fact_id: str) -> Fact | None:
        fact = self.facts.pop(fact_id, None)
        if fact is None:
            return None
        if self.current.get(fact.key) == fact_id:
            del self.current[fact.key]
        for eid in (fact.subject_id, fact.object_id):
            self.by_entity.get(eid, set()).discard(fact_id)
        for source in fact.source_ids:
            self.by_source.get(source, set()).discard(fact_id)
        return fact

    def detach_sources(self, source_ids: Sequence[str]) -> tuple[list[str], list[Fact]]:
        """Drop these sources from the facts they support: ``(facts left with no source, facts still supported)``."""
        gone = set(source_ids)
        doomed: list[str] = []
        touched: list[Fact] = []
        for source in source_ids:
            for fact_id in list(self.by_source.get(source, ())):
                fact = self.facts[fact_id]
                remaining = [s for s in fact.source_ids if s not in gone]
                if not remaining:
                    doomed.append(fact_id)
                elif remaining != fact.source_ids:
                    self.unindex(fact_id)
                    fact.metadata = {**fact.metadata, "source_ids": remaining}
                    self.index(fact)
                    touched.append(fact)
        return doomed, touched

    def end(self, fact: Fact, *, invalid_at: str, expired_at: str, superseded_by: str | None = None) -> None:
        """End ``fact`` in place: no longer current, kept as history from ``invalid_at`` (re-indexed as such)."""
        self.unindex(fact.id)
        fact.current = False
        ending = {"invalid_at": invalid_at, "expired_at": expired_at}
        if superseded_by is not None:
            ending["superseded_by"] = superseded_by
        fact.metadata = {**fact.metadata, **ending}
        self.index(fact)

    def current_for_object(self, subject_id: str, object_id: str) -> list[Fact]:
        return [
            self.facts[f]
            for f in self.by_entity.get(subject_id, ())
            if self.facts[f].current and self.facts[f].subject_id == subject_id and self.facts[f].object_id == object_id
        ]

    def current_for(self, subject_id: str, predicate: str) -> list[Fact]:
        return [
            self.facts[f]
            for f in self.by_entity.get(subject_id, ())
            if self.facts[f].current and self.facts[f].subject_id == subject_id and self.facts[f].predicate == predicate
        ]


def semantic_state(context: StoreContext, user_id: str) -> SemanticState:
    """The semantic state of ``user_id`` in ``context`` (created empty, not loaded, on first use)."""
    state: SemanticState = context.shared.semantic.setdefault(user_id, SemanticState(user_id))
    return state


async def areset_semantic_state(context: StoreContext, user_id: str) -> None:
    """Forget the in-process state of ``user_id`` (its records were erased or replaced): reloaded on next use."""
    state = semantic_state(context, user_id)
    async with state.lock:
        state.reset()
        state.loaded = False
