"""Semantic memory: facts that hold, kept current, with a knowledge graph to reason over.

Each fact ``subject -predicate-> object`` is a memory record (``memory_type`` semantic,
content ``"subject predicate object"``, the triplet and its provenance in metadata)
written through the :class:`~.stores.context.StoreContext`, so it is durable, embedded
and keyword-indexed like every memory. The record store is the source of truth; the
property graph (embedded SQLite by default, Neo4j or FalkorDB by URL, or any LlamaIndex
``PropertyGraphStore``) mirrors the entities and the *current* facts for traversal, and
is rebuilt from the records when it is missing or out of step (:meth:`arebuild_graph`).

* **Extraction** from text: an :class:`~.extraction.LLMExtractor` when an LLM is given
  (or set in ``Settings.llm``), else spaCy/jieba offline; each fact records its
  ``extractor`` and ``confidence``.
* **Entity resolution**: normalisation, token containment and name-embedding
  similarity; node ids are uuid5 digests of (user, canonical name).
* **Bi-temporal supersession** (as in Graphiti): a new fact with a *functional*
  predicate (one object at a time: ``lives_in``, ``works_at``, ``spouse``, ...) and a
  different object ends the old fact's validity (``invalid_at``, ``superseded_by``,
  ``expired_at``); the old fact stays as history. A fact and its negation
  (``works_at`` / ``does_not_work_at``, see :func:`~.extraction.negate_predicate`) end each
  other the same way: "I no longer work at Google" ends ``User works_at Google``.
* **The user's name** (``User named Zhang San``) makes the name an alias of the user's
  entity: later facts about "Zhang San" are facts about the user. Re-adding a current fact only adds its
  source: no duplicates. Removing the fact that superseded another reinstates it.
* **Hybrid retrieval**: dense and keyword rankings over facts plus graph expansion from
  the entities named in the query (bounded depth), fused by reciprocal rank, then
  weighted by recency, importance and confidence.
* **Provenance**: ``source_ids`` name the memories (episodic turns, statements,
  documents) a fact came from; :meth:`aremove_sources` removes the facts only they
  supported. Plain text added to this tier is kept as a *statement* and its facts point
  to it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llama_index_memory_hierarchy.entity_resolution import (
    Entity,
    EntityRegistry,
    EntityResolver,
    name_tokens,
    normalize_name,
    types_compatible,
)
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.extraction import (
    NAME_PREDICATE,
    USER_ENTITY,
    ExtractedFact,
    Extraction,
    Extractor,
    LLMExtractor,
    OfflineExtractor,
    clean_name,
    negate_predicate,
    normalize_predicate,
)
from llama_index_memory_hierarchy.graph_export import GraphEdge, GraphNode, KnowledgeGraph
from llama_index_memory_hierarchy.ranking.fusion import score_items
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.tiers.episodic import StoredTier
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    as_utc,
    matches,
    utcnow,
    validate_content,
    validate_importance,
    validate_memory_id,
)

if TYPE_CHECKING:
    from llama_index.core.graph_stores.types import PropertyGraphStore

    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.stores.graph import UserGraph

logger = logging.getLogger(__name__)

#: Predicates that hold one object at a time: a new object supersedes the old fact. ``is``, ``likes``,
#: ``has`` and ``prefers`` are not among them: "Carol is left-handed" does not end "Carol is a pilot".
DEFAULT_FUNCTIONAL_PREDICATES = frozenset(
    {
        "lives_in", "works_at", "works_as", "age", "spouse", "married_to", "job", "job_title", "title", "role",
        "nationality", "born_in", "born_on", "birthday", "email", "phone", "status", "favorite_color", "hometown",
        NAME_PREDICATE,
    }
)  # fmt: skip
FACT = "fact"
STATEMENT = "statement"
_FIRST_PERSON = {"i", "me", "my", "mine", "myself", "we", "our"}
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


class SemanticSettings(BaseModel):
    """Tunables of semantic memory (defaults suit conversational agents)."""

    model_config = ConfigDict(extra="forbid")

    functional_predicates: frozenset[str] = Field(default=DEFAULT_FUNCTIONAL_PREDICATES)
    similarity_threshold: float = Field(default=0.88, gt=0, le=1, description="Entity name similarity to merge.")
    containment_threshold: float = Field(default=0.68, gt=0, le=1, description="Same, with token containment.")
    expansion_depth: int = Field(default=2, ge=0, le=3, description="Graph hops from query entities in retrieval.")
    graph_weight: float = Field(default=1.0, ge=0, description="Weight of the graph ranking in the fusion.")
    min_confidence: float = Field(default=0.0, ge=0, le=1, description="Extracted facts below this are dropped.")
    extract_on_add: bool = Field(default=True, description="Extract facts from text given to add().")
    max_concurrency: int = Field(default=4, ge=1, description="Concurrent LLM extraction calls.")


class FactInput(BaseModel):
    """A fact to add: the triplet and its provenance."""

    subject: str
    predicate: str
    object: str
    subject_type: str = "ENTITY"
    object_type: str = "ENTITY"
    valid_at: datetime | None = None
    source_ids: list[str] = Field(default_factory=list)
    confidence: float = Field(default=1.0, ge=0, le=1)
    extractor: str = "manual"
    importance: float | None = None


def _fact(field: str, **data: Any) -> FactInput:
    """A :class:`FactInput`, with a wrong value reported as a :class:`MemoryValidationError` naming it."""
    try:
        return FactInput(**data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        raise MemoryValidationError(where if field == "fact" else f"{field}.{where}", error.get("msg", "")) from None
    except TypeError as exc:
        raise MemoryValidationError(field, str(exc)) from None


class EntityInfo(BaseModel):
    """An entity of the knowledge graph."""

    id: str
    name: str
    type: str
    aliases: list[str]
    fact_count: int
    score: float | None = None


class RelatedEntity(BaseModel):
    """An entity reached from another through the graph."""

    id: str
    name: str
    type: str
    hop: int
    relation: str
    direction: str  # "out": from the path to this entity; "in": this entity points back
    via: str
    fact_id: str | None
    confidence: float | None
    path: str


@dataclass
class _Fact:
    """In-memory index entry of one fact record (the record itself is the truth)."""

    id: str
    subject_id: str
    predicate: str
    object_id: str
    current: bool
    valid_at: datetime
    metadata: dict[str, Any]
    importance: float

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.subject_id, self.predicate, self.object_id)

    @property
    def source_ids(self) -> list[str]:
        return list(self.metadata.get("source_ids") or [])

    @property
    def confidence(self) -> float:
        return float(self.metadata.get("confidence", 1.0))


@dataclass
class _UserState:
    """One user's facts, entities and indexes, loaded once from the records, shared in-process."""

    user_id: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: bool = False
    registry: EntityRegistry | None = None
    facts: dict[str, _Fact] = field(default_factory=dict)
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

    def index(self, fact: _Fact) -> None:
        self.facts[fact.id] = fact
        if fact.current:
            self.current[fact.key] = fact.id
        for eid in (fact.subject_id, fact.object_id):
            self.by_entity.setdefault(eid, set()).add(fact.id)
        for source in fact.source_ids:
            self.by_source.setdefault(source, set()).add(fact.id)

    def unindex(self, fact_id: str) -> _Fact | None:
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

    def current_for_object(self, subject_id: str, object_id: str) -> list[_Fact]:
        return [
            self.facts[f]
            for f in self.by_entity.get(subject_id, ())
            if self.facts[f].current and self.facts[f].subject_id == subject_id and self.facts[f].object_id == object_id
        ]

    def current_for(self, subject_id: str, predicate: str) -> list[_Fact]:
        return [
            self.facts[f]
            for f in self.by_entity.get(subject_id, ())
            if self.facts[f].current and self.facts[f].subject_id == subject_id and self.facts[f].predicate == predicate
        ]


def _positives(old: str, new: str) -> list[str]:
    """``[new]`` when ``old`` is the negation of ``new`` ("does_not_work_at" of "works_at"), else ``[]``."""
    return [new] if negate_predicate(new) == old else []


def _fact_content(subject: str, predicate: str, obj: str) -> str:
    return f"{subject} {predicate.replace('_', ' ')} {obj}"


def _node_label(entity_type: str) -> str:
    label = _LABEL_UNSAFE.sub("_", entity_type.upper()).strip("_")
    return label or "ENTITY"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


class SemanticMemory(StoredTier):
    """Facts and a knowledge graph, per user: current by default, history on request."""

    memory_type = MemoryType.SEMANTIC

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str | None,
        context: StoreContext,
        llm: Any = None,
        extractor: Extractor | None = None,
        graph_store: PropertyGraphStore | None = None,
        settings: SemanticSettings | None = None,
    ) -> None:
        super().__init__(user_id=user_id, session_id=session_id, context=context)
        self.settings = settings or SemanticSettings()
        from llama_index_memory_hierarchy.llms import resolve_llm

        # an explicit LLM or Settings.llm when set; never a hosted default, and the local model only when
        # passed in: extraction runs on every add, offline spaCy/jieba is the fast default
        llm = resolve_llm(llm, allow_local=False)
        self.extractor: Extractor = extractor or (
            LLMExtractor(llm, max_concurrency=self.settings.max_concurrency) if llm is not None else OfflineExtractor()
        )
        self.resolver = EntityResolver(
            similarity_threshold=self.settings.similarity_threshold,
            containment_threshold=self.settings.containment_threshold,
        )
        from llama_index_memory_hierarchy.stores.graph import UserGraph

        if graph_store is not None:
            self.graph: UserGraph = UserGraph(graph_store)
        else:
            self.graph = context.graph
        self._state = context.shared(_UserState, self.user_id)

    # ------------------------------------------------------------------ state
    async def _astate(self) -> _UserState:
        """The user's index, loaded from the records on first use (graph repaired if out of step)."""
        state = self._state
        if state.loaded:
            return state
        async with state.lock:
            if not state.loaded:
                await self._aload(state)
                state.loaded = True
        return state

    async def _aload(self, state: _UserState) -> None:
        state.reset()
        records = await self.context.records.query(self.user_id, memory_type=self.memory_type)
        registry = state.registry
        assert registry is not None
        for record in records:
            item = record.item
            meta = item.metadata
            if meta.get("kind") != FACT:
                state.statements.add(item.id)
                continue
            for side in ("subject", "object"):
                entity = Entity(id=meta[f"{side}_id"], name=meta[side], type=meta.get(f"{side}_type", "ENTITY"))
                registry.add(entity)
            state.index(
                _Fact(
                    id=item.id,
                    subject_id=meta["subject_id"],
                    predicate=meta["predicate"],
                    object_id=meta["object_id"],
                    current=meta.get("invalid_at") is None,
                    valid_at=as_utc(meta.get("valid_at") or item.timestamp),
                    metadata=dict(meta),
                    importance=item.importance,
                )
            )
        for fact in state.facts.values():
            if fact.current and fact.predicate == NAME_PREDICATE and fact.subject_id == fact.object_id:
                registry.entities[fact.subject_id].name = str(fact.metadata.get("object") or USER_ENTITY)
        if await self._graph_out_of_step(state):
            logger.info("semantic memory of %s: rebuilding the graph from %d facts", self.user_id, len(state.current))
            await self._arebuild(state)

    async def _graph_out_of_step(self, state: _UserState) -> bool:
        keys = getattr(self.graph.store, "relation_keys", None)
        if keys is not None:  # exact: equal counts can hide a lost write (a crash mid-supersession)
            return await asyncio.to_thread(keys, self.user_id) != {k for k in state.current if k[0] != k[2]}
        counter = getattr(self.graph.store, "count", None)
        if counter is None:  # other stores: check that the nodes are there at all
            if not state.current:
                return False
            return not await self.graph.anodes(self.user_id, [next(iter(state.current))[0]])
        counts = await asyncio.to_thread(counter, self.user_id)
        return counts["relations"] != sum(k[0] != k[2] for k in state.current)

    async def arebuild_graph(self) -> int:
        """Rebuild this user's subgraph from the fact records; return the relations written."""
        state = await self._astate()
        async with state.lock:
            return await self._arebuild(state)

    def rebuild_graph(self) -> int:
        """Sync twin of :meth:`arebuild_graph`."""
        return self._run(self.arebuild_graph())

    async def _arebuild(self, state: _UserState) -> int:
        await self.graph.aclear_user(self.user_id)
        # the user's name is the label of the user's node, not an edge to itself
        current = [f for f in (state.facts[i] for i in state.current.values()) if f.subject_id != f.object_id]
        entity_ids = {f.subject_id for f in current} | {f.object_id for f in current}
        assert state.registry is not None
        nodes = [self._node(state.registry.entities[e]) for e in sorted(entity_ids) if e in state.registry.entities]
        await self.graph.aupsert(nodes, [self._relation(f) for f in current])
        return len(current)

    # ------------------------------------------------------------------ graph mirror
    def _node(self, entity: Entity) -> Any:
        from llama_index.core.graph_stores.types import EntityNode

        return EntityNode(
            name=entity.id,
            label=_node_label(entity.type),
            properties={
                "user_id": self.user_id,
                "display_name": entity.name,
                "entity_type": entity.type,
                "aliases": sorted(entity.aliases),
            },
        )

    def _relation(self, fact: _Fact) -> Any:
        from llama_index.core.graph_stores.types import Relation

        meta = fact.metadata
        properties = {
            "user_id": self.user_id,
            "fact_id": fact.id,
            "predicate": fact.predicate,
            "confidence": fact.confidence,
            "valid_at": meta.get("valid_at"),
            "extractor": meta.get("extractor"),
            "source_ids": fact.source_ids,
        }
        return Relation(
            label=fact.predicate,
            source_id=fact.subject_id,
            target_id=fact.object_id,
            properties={k: v for k, v in properties.items() if v not in (None, [])},
        )

    # ------------------------------------------------------------------ adding facts
    async def aadd_fact(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        source_id: str | None = None,
        valid_at: datetime | str | float | None = None,
        confidence: float = 1.0,
        importance: float | None = None,
        subject_type: str = "ENTITY",
        object_type: str = "ENTITY",
    ) -> str:
        """Add one fact (or add a source to the same current fact); return the fact id."""
        fact = _fact(
            "fact",
            subject=subject,
            predicate=predicate,
            object=object,
            subject_type=subject_type,
            object_type=object_type,
            valid_at=None if valid_at is None else as_utc(valid_at, "valid_at"),
            source_ids=[validate_memory_id(source_id, "source_id")] if source_id else [],
            confidence=confidence,
            importance=importance,
        )
        return (await self.aadd_facts([fact]))[0]

    def add_fact(self, subject: str, predicate: str, object: str, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd_fact`."""
        return self._run(self.aadd_fact(subject, predicate, object, **kwargs))

    async def aadd_facts(self, facts: Sequence[FactInput | dict[str, Any] | tuple[str, str, str]]) -> list[str]:
        """Add many facts with one embedding batch and one record transaction; ids in order."""
        inputs = [self._fact_input(f, i) for i, f in enumerate(facts)]
        if not inputs:
            return []
        return [i for i in await self._aadd_facts(inputs, strict=True) if i is not None]

    def add_facts(self, facts: Sequence[FactInput | dict[str, Any] | tuple[str, str, str]]) -> list[str]:
        """Sync twin of :meth:`aadd_facts`."""
        return self._run(self.aadd_facts(facts))

    def _fact_input(self, fact: Any, position: int) -> FactInput:
        field_name = f"facts[{position}]"
        if isinstance(fact, tuple):
            if len(fact) != 3:
                raise MemoryValidationError(field_name, "a tuple fact must be (subject, predicate, object)")
            fact = _fact(field_name, subject=fact[0], predicate=fact[1], object=fact[2])
        elif isinstance(fact, dict):
            fact = _fact(field_name, **fact)
        elif not isinstance(fact, FactInput):
            raise MemoryValidationError(field_name, f"expected a FactInput, dict or tuple, got {type(fact).__name__}")
        for part in ("subject", "predicate", "object"):
            value = getattr(fact, part)
            validate_content(value, f"{field_name}.{part}")
            if len(value) > 500:
                raise MemoryValidationError(f"{field_name}.{part}", "longer than 500 characters")
        subject, obj = clean_name(fact.subject), clean_name(fact.object)
        if not normalize_name(subject) or not normalize_name(obj):
            raise MemoryValidationError(field_name, "subject and object must contain a letter or digit")
        if fact.importance is not None:
            validate_importance(fact.importance)
        return fact.model_copy(
            update={
                "subject": subject,
                "object": obj,
                "predicate": normalize_predicate(fact.predicate),
                "source_ids": [validate_memory_id(s, "source_ids") for s in fact.source_ids],
            }
        )

    async def _aadd_facts(self, inputs: Sequence[FactInput], *, strict: bool) -> list[str | None]:
        """Add facts; with ``strict`` a fact whose subject and object resolve to one entity is an error,
        otherwise (extracted facts) it is skipped and its id is None."""
        state = await self._astate()
        async with state.lock:
            registry = state.registry
            assert registry is not None
            mentions: list[tuple[str, str]] = []
            named = set()
            for position, fact in enumerate(inputs):
                mentions += [(fact.subject, fact.subject_type), (fact.object, fact.object_type)]
                if fact.predicate == NAME_PREDICATE and fact.subject == USER_ENTITY:
                    if not self.resolver.name_user(registry, fact.object):
                        await self._amerge_into_user(state, fact.object)
                    if self.resolver.name_user(registry, fact.object):
                        named.add(position)
            resolved = await self.resolver.aresolve(registry, mentions, self.context.embeddings.aembed_texts)
            now = utcnow()
            ids: list[str | None] = []
            new: list[_Fact] = []
            texts: dict[str, str] = {}
            changed: dict[str, _Fact] = {}  # existing facts whose record must be rewritten
            ended: list[_Fact] = []  # facts leaving the graph
            for position, fact in enumerate(inputs):
                subject, obj = resolved[2 * position], resolved[2 * position + 1]
                key = (subject.id, fact.predicate, obj.id)
                if subject.id == obj.id and position not in named:
                    if strict:
                        raise MemoryValidationError(
                            f"facts[{position}]", f"subject and object are the same entity {subject.name!r}"
                        )
                    ids.append(None)
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
                        changed[existing_id] = existing
                    ids.append(existing_id)
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
                record_fact = _Fact(fact_id, subject.id, fact.predicate, obj.id, True, valid_at, metadata, importance)
                opposite = [
                    old
                    for old in state.current_for_object(subject.id, obj.id)
                    if old.predicate != fact.predicate
                    and fact.predicate in {negate_predicate(old.predicate), *_positives(old.predicate, fact.predicate)}
                ]
                ending = opposite + (
                    state.current_for(subject.id, fact.predicate)
                    if fact.predicate in self.settings.functional_predicates
                    else []
                )
                if ending:
                    for old in ending:
                        if old.valid_at <= valid_at:  # the new fact is newer: the old one ends
                            state.unindex(old.id)
                            old.current = False
                            old.metadata = {
                                **old.metadata,
                                "invalid_at": valid_at.isoformat(),
                                "expired_at": now.isoformat(),
                                "superseded_by": fact_id,
                            }
                            state.index(old)
                            changed[old.id] = old
                            ended.append(old)
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
                new.append(record_fact)
                texts[fact_id] = _fact_content(fact.subject, fact.predicate, fact.object)
                ids.append(fact_id)
            new_ids = {f.id for f in new}
            items = [
                MemoryItem.create(
                    id=f.id,
                    content=texts[f.id],
                    memory_type=MemoryType.SEMANTIC,
                    user_id=self.user_id,
                    session_id=self.session_id,
                    timestamp=f.valid_at,
                    importance=f.importance,
                    metadata=f.metadata,
                )
                for f in new
            ]
            try:
                if items:
                    await self.context.awrite([Record(item=item) for item in items])
                for fact in changed.values():
                    if fact.id not in new_ids:
                        await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
                if changed:
                    await self.context.drain_outbox()
            except BaseException:
                state.loaded = False  # the index may be ahead of the records: reload on next use
                raise
            await self._amirror(state, [*new, *changed.values()], ended)
            return ids

    async def _amerge_into_user(self, state: _UserState, name: str) -> None:
        """The user introduced themselves by a name an entity already has: that entity is the user.

        Its facts are re-pointed to the user's entity (records updated, graph rebuilt); an entity
        of another strong type (a place or an organisation of that name) is left alone.
        """
        registry = state.registry
        assert registry is not None
        other = registry.by_alias(normalize_name(name))
        user = self.resolver.user(registry)
        if other is None or other.id == user.id or not types_compatible(other.type, "PERSON"):
            return
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
        for fact in moved:
            await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
        if moved:
            await self.context.drain_outbox()
        logger.info("semantic memory of %s: %r is the user; %d facts moved to the user", self.user_id, name, len(moved))
        try:
            await self._arebuild(state)
        except Exception as exc:
            logger.error("semantic memory of %s: graph rebuild failed (%s); retried on next load", self.user_id, exc)
            state.loaded = False

    async def _amirror(self, state: _UserState, touched: Iterable[_Fact], ended: Iterable[_Fact]) -> None:
        """Bring the graph in step after a change (records already committed)."""
        registry = state.registry
        assert registry is not None
        touched = list(touched)
        try:
            ended_keys = [f.key for f in ended if state.current.get(f.key) != f.id]
            if ended_keys:
                await self.graph.adelete_relations(self.user_id, ended_keys)
            live = [f for f in touched if f.current and f.subject_id != f.object_id]
            named = [f for f in touched if f.current and f.subject_id == f.object_id]
            entity_ids = sorted({f.subject_id for f in [*live, *named]} | {f.object_id for f in live})
            nodes = [self._node(registry.entities[e]) for e in entity_ids if e in registry.entities]
            if nodes or live:
                await self.graph.aupsert(nodes, [self._relation(f) for f in live])
        except Exception as exc:
            logger.error(
                "semantic memory of %s: graph update failed (%s); it is rebuilt on next load", self.user_id, exc
            )
            state.loaded = False

    # ------------------------------------------------------------------ extraction
    async def aextract_and_add(
        self,
        text: str,
        *,
        source_id: str | None = None,
        valid_at: datetime | str | float | None = None,
        importance: float | None = None,
    ) -> list[str]:
        """Extract facts from ``text`` and add them (pointing to ``source_id``); return their ids."""
        return (
            await self.aextract_and_add_many([text], source_ids=[source_id], valid_at=valid_at, importance=importance)
        )[0]

    def extract_and_add(self, text: str, **kwargs: Any) -> list[str]:
        """Sync twin of :meth:`aextract_and_add`."""
        return self._run(self.aextract_and_add(text, **kwargs))

    async def aextract_and_add_many(
        self,
        texts: Sequence[str],
        *,
        source_ids: Sequence[str | None] | None = None,
        valid_at: datetime | str | float | None = None,
        importance: float | None = None,
    ) -> list[list[str]]:
        """Batch twin of :meth:`aextract_and_add` (extraction concurrency bounded by the extractor)."""
        texts = [validate_content(t, f"texts[{i}]") for i, t in enumerate(texts)]
        sources = list(source_ids) if source_ids is not None else [None] * len(texts)
        if len(sources) != len(texts):
            raise MemoryValidationError("source_ids", "must have one entry per text")
        sources = [validate_memory_id(s, "source_ids") if s else None for s in sources]
        moment = None if valid_at is None else as_utc(valid_at, "valid_at")
        extractions = await self.extractor.aextract_many(texts)
        return await self._aadd_extracted(extractions, sources, moment, importance)

    async def _aadd_extracted(
        self,
        extractions: Sequence[Extraction],
        sources: Sequence[str | None],
        valid_at: datetime | None,
        importance: float | None,
    ) -> list[list[str]]:
        batch: list[FactInput] = []
        owners: list[int] = []
        for position, (extraction, source) in enumerate(zip(extractions, sources, strict=True)):
            for fact in extraction.facts:
                if fact.confidence < self.settings.min_confidence:
                    continue
                candidate = self._from_extracted(fact, source, valid_at, importance)
                if candidate is not None:
                    batch.append(candidate)
                    owners.append(position)
        ids = await self._aadd_facts(batch, strict=False) if batch else []
        out: list[list[str]] = [[] for _ in extractions]
        for owner, fact_id in zip(owners, ids, strict=True):
            if fact_id is not None and fact_id not in out[owner]:
                out[owner].append(fact_id)
        return out

    def _from_extracted(
        self, fact: ExtractedFact, source: str | None, valid_at: datetime | None, importance: float | None
    ) -> FactInput | None:
        try:
            return self._fact_input(
                FactInput(
                    subject=fact.subject,
                    predicate=fact.predicate,
                    object=fact.object,
                    subject_type=fact.subject_type,
                    object_type=fact.object_type,
                    valid_at=valid_at,
                    source_ids=[source] if source else [],
                    confidence=fact.confidence,
                    extractor=fact.extractor,
                    importance=importance,
                ),
                0,
            )
        except MemoryValidationError as exc:
            logger.debug("skipping extracted fact %r: %s", fact, exc)
            return None

    # ------------------------------------------------------------------ the common tier interface
    async def aadd(
        self,
        item_or_text: MemoryItem | str,
        *,
        timestamp: datetime | str | float | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
        dedupe: bool = False,
    ) -> str:
        """Add a statement (its facts are extracted and point to it), or a fact given by metadata.

        With ``metadata`` holding ``subject``, ``predicate`` and ``object`` the item is a
        fact (see :meth:`aadd_fact`); otherwise the text is kept as a statement.
        """
        item = self.make_item(
            item_or_text, timestamp=timestamp, importance=importance, metadata=metadata, session_id=session_id
        )
        return (await self.aadd_items([item], dedupe=dedupe))[0]

    async def aadd_items(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[Any] | None = None, dedupe: bool = False
    ) -> list[str]:
        """Store statements (extracting their facts) and triplet items as facts; ids in order."""
        if not items:
            return []
        return await self._runtime.arun(self._aadd_items(items, embeddings, dedupe))

    async def _aadd_items(
        self, items: Sequence[MemoryItem], embeddings: Sequence[Any] | None, dedupe: bool
    ) -> list[str]:
        state = await self._astate()
        ids: list[str | None] = [None] * len(items)
        facts: list[tuple[int, FactInput]] = []
        statements: list[tuple[int, MemoryItem]] = []
        for position, item in enumerate(items):
            meta = item.metadata
            if (
                all(isinstance(meta.get(k), str) for k in ("subject", "predicate", "object"))
                and meta.get("kind") != STATEMENT
            ):
                facts.append(
                    (
                        position,
                        self._fact_input(
                            FactInput(
                                subject=meta["subject"],
                                predicate=meta["predicate"],
                                object=meta["object"],
                                valid_at=item.timestamp,
                                importance=item.importance,
                                confidence=float(meta.get("confidence", 1.0)),
                                source_ids=list(meta.get("source_ids") or []),
                            ),
                            position,
                        ),
                    )
                )
            else:
                statements.append((position, item.model_copy(update={"metadata": {**meta, "kind": STATEMENT}})))
        if facts:
            added = await self._aadd_facts([f for _, f in facts], strict=True)
            for (position, _), fact_id in zip(facts, added, strict=True):
                ids[position] = fact_id
        if statements:
            vectors = None if embeddings is None else [embeddings[p] for p, _ in statements]
            written = await super().aadd_items([i for _, i in statements], embeddings=vectors, dedupe=dedupe)
            fresh = []
            for (position, item), memory_id in zip(statements, written, strict=True):
                ids[position] = memory_id
                state.statements.add(memory_id)
                if memory_id == item.id:  # not a duplicate of an earlier statement
                    fresh.append(item)
            if fresh and self.settings.extract_on_add:  # the facts point back to their statement
                extractions = await self.extractor.aextract_many([i.content for i in fresh])
                await self._aadd_extracted(extractions, [i.id for i in fresh], None, None)
        return [i for i in ids if i is not None]

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Change importance/metadata; a statement's new content re-extracts its facts.

        A fact's content is its triplet: add the corrected fact instead (it supersedes a
        functional one) and remove the wrong one.
        """
        return await self._runtime.arun(self._aupdate(memory_id, content, importance, metadata))

    async def _aupdate(
        self, memory_id: str, content: str | None, importance: float | None, metadata: dict[str, Any] | None
    ) -> bool:
        memory_id = self.check_id(memory_id)
        state = await self._astate()
        current = await self.aget(memory_id)
        if current is None:
            return False
        if memory_id in state.facts:
            if content is not None:
                raise MemoryValidationError(
                    "content", "a fact's content is its triplet; add the corrected fact instead"
                )
            if metadata and set(metadata) & {"subject", "predicate", "object", "subject_id", "object_id", "kind"}:
                raise MemoryValidationError("metadata", "the triplet of a fact cannot be changed")
            done = await super().aupdate(memory_id, importance=importance, metadata=metadata)
            async with state.lock:
                fact = state.facts.get(memory_id)
                if fact is not None:
                    if metadata:
                        fact.metadata = {**fact.metadata, **metadata}
                    if importance is not None:
                        fact.importance = importance
            return done
        done = await super().aupdate(memory_id, content=content, importance=importance, metadata=metadata)
        if done and content is not None and self.settings.extract_on_add:
            await self._aremove_sources([memory_id])
            extraction = await self.extractor.aextract_many([content])
            await self._aadd_extracted(extraction, [memory_id], None, None)
        return done

    async def _adelete_records(self, ids: Sequence[str]) -> tuple[list[str], int]:
        """Delete facts (reinstating those they superseded) and statements with the facts only they supported."""
        state = await self._astate()
        facts = [i for i in ids if i in state.facts]
        if facts:
            await self._adelete_facts(state, facts)
        deleted = await self.context.adelete(self.user_id, [i for i in ids if i not in state.facts and i not in facts])
        state.statements.difference_update(deleted)
        return facts + deleted, await self._aremove_sources(deleted) if deleted else 0

    async def aremove_sources(self, source_ids: Sequence[str]) -> int:
        """Forget that these memories said anything: facts only they supported go; return how many."""
        ids = [validate_memory_id(s, "source_ids") for s in source_ids]
        return await self._runtime.arun(self._aremove_sources(ids))

    def remove_sources(self, source_ids: Sequence[str]) -> int:
        """Sync twin of :meth:`aremove_sources`."""
        return self._run(self.aremove_sources(source_ids))

    async def _aremove_sources(self, source_ids: Sequence[str]) -> int:
        state = await self._astate()
        doomed: list[str] = []
        async with state.lock:
            gone = set(source_ids)
            touched: list[_Fact] = []
            for source in source_ids:
                for fact_id in list(state.by_source.get(source, ())):
                    fact = state.facts[fact_id]
                    remaining = [s for s in fact.source_ids if s not in gone]
                    if not remaining:
                        doomed.append(fact_id)
                    elif remaining != fact.source_ids:
                        state.unindex(fact_id)
                        fact.metadata = {**fact.metadata, "source_ids": remaining}
                        state.index(fact)
                        touched.append(fact)
            for fact in {f.id: f for f in touched if f.id not in doomed}.values():
                await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
            if touched:
                await self.context.drain_outbox()
                await self._amirror(state, [f for f in touched if f.current], [])
        if doomed:
            await self._adelete_facts(state, sorted(set(doomed)))
        return len(set(doomed))

    async def _adelete_facts(self, state: _UserState, fact_ids: Sequence[str]) -> None:
        """Delete fact records; reinstate facts they had superseded; drop orphan entities."""
        async with state.lock:
            await self.context.adelete(self.user_id, list(fact_ids))
            removed = [f for f in (state.unindex(i) for i in fact_ids) if f is not None]
            gone = {f.id for f in removed}
            reinstated: list[_Fact] = []
            for fact in removed:
                for other in list(state.facts.values()):
                    if other.metadata.get("superseded_by") != fact.id or other.id in gone:
                        continue
                    if state.current_for(other.subject_id, other.predicate) or other.key in state.current:
                        continue
                    state.unindex(other.id)
                    other.current = True
                    other.metadata = {
                        k: v for k, v in other.metadata.items() if k not in {"expired_at", "superseded_by"}
                    } | {"invalid_at": None}
                    state.index(other)
                    reinstated.append(other)
            for fact in reinstated:
                await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
            if reinstated:
                await self.context.drain_outbox()
            assert state.registry is not None
            orphans = sorted({e for f in removed for e in (f.subject_id, f.object_id) if not state.by_entity.get(e)})
            for orphan in orphans:
                state.registry.remove(orphan)
                state.by_entity.pop(orphan, None)
            try:
                ended = [f.key for f in removed if f.current and f.key not in state.current]
                await self.graph.adelete_relations(self.user_id, ended)
                if orphans:
                    await self.graph.adelete_nodes(self.user_id, orphans)
            except Exception as exc:
                logger.error("semantic memory of %s: graph update failed (%s); rebuilt on next load", self.user_id, exc)
                state.loaded = False
                return
            await self._amirror(state, reinstated, [])

    async def aclear(self) -> int:
        """Delete every semantic memory of this user and their subgraph (nothing of other users)."""
        return await self._runtime.arun(self._aclear())

    async def _aclear(self) -> int:
        state = await self._astate()
        async with state.lock:
            deleted = await self.context.records.delete_where(self.user_id, memory_type=self.memory_type)
            await self.context.drain_outbox()
            state.reset()
            await self.graph.aclear_user(self.user_id)
            return len(deleted)

    async def aget_stats(self) -> dict[str, Any]:
        """Counts of this user's semantic memories, facts (current, history), entities and statements."""
        stats = await super().aget_stats()
        state = await self._astate()
        assert state.registry is not None
        stats.update(
            facts=len(state.facts),
            current_facts=len(state.current),
            historical_facts=len(state.facts) - len(state.current),
            statements=len(state.statements),
            entities=len(state.registry),
            extractor=type(self.extractor).__name__,
            graph_store=type(self.graph.store).__name__,
        )
        return stats

    # ------------------------------------------------------------------ retrieval
    async def aretrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]:
        """Hybrid: dense + keyword over facts and statements, plus graph expansion from the query's entities.

        ``include_history=True`` also returns superseded facts.
        """
        return await self._runtime.arun(self._aretrieve(query, limit, filters))

    async def _aretrieve(self, query: str, limit: int, filters: dict[str, Any]) -> list[MemoryItem]:
        query = validate_content(query, "query")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryValidationError("limit", f"must be a positive integer, got {limit!r}")
        include_history = bool(filters.pop("include_history", False))
        flt = MemoryFilter.from_kwargs(**filters)
        state = await self._astate()
        hybrid = await self.arank(query, flt, limit)
        graph_ranking = await self._agraph_ranking(state, query, max(limit * self.config.candidate_multiplier, 20))
        k = self.config.rrf_k
        # the hybrid ranking and the graph ranking meet by reciprocal rank (their scores differ in scale)
        ordered = sorted(hybrid, key=lambda fact_id: hybrid[fact_id], reverse=True)
        relevance = {fact_id: 1.0 / (k + rank) for rank, fact_id in enumerate(ordered, start=1)}
        for rank, fact_id in enumerate(graph_ranking, start=1):
            relevance[fact_id] = relevance.get(fact_id, 0.0) + self.settings.graph_weight / (k + rank)
        records = await self.context.records.get(self.user_id, list(relevance))
        items = [
            r.item
            for r in records
            if r.item.memory_type == self.memory_type
            and matches(r.item, flt)
            and (include_history or r.item.metadata.get("invalid_at") is None)
        ]
        ranked = score_items(
            items,
            relevance,
            now=utcnow(),
            relevance_weight=self.config.relevance_weight,
            recency_weight=self.config.recency_weight,
            importance_weight=self.config.importance_weight,
            half_life_hours=self.config.recency_half_life_hours,
        )
        for item in ranked:  # facts weigh by how sure their extraction was
            confidence = float(item.metadata.get("confidence", 1.0)) if item.metadata.get("kind") == FACT else 1.0
            item.score = (item.score or 0.0) * (0.5 + 0.5 * confidence)
        ranked.sort(key=lambda i: i.score or 0.0, reverse=True)
        ranked = ranked[:limit]
        if ranked:
            self.context.spawn(self.context.records.touch(self.user_id, [item.id for item in ranked]))
        return ranked

    def mentioned_entities(self, state: _UserState, text: str) -> list[Entity]:
        """Entities of this user named in ``text`` (all words of an alias present; CJK by substring)."""
        registry = state.registry
        assert registry is not None
        normalized = normalize_name(text)
        words = set(normalized.split())
        found: dict[str, Entity] = {}
        if words & _FIRST_PERSON:
            user = registry.by_alias(USER_ENTITY.casefold())
            if user is not None:
                found[user.id] = user
        for candidate in registry.search(text, limit=50):
            if any(name_tokens(a) and name_tokens(a) <= words for a in candidate.aliases):
                found[candidate.id] = candidate
        if _CJK.search(text):
            for entity in registry.entities.values():
                if any(_CJK.search(a) and a in normalized for a in entity.aliases):
                    found[entity.id] = entity
        return list(found.values())

    async def _agraph_ranking(self, state: _UserState, query: str, limit: int) -> list[str]:
        """Fact ids reached from the query's entities, nearest and most confident first."""
        hops = await self._ahops(state, query, limit)
        return sorted(hops, key=lambda fact_id: (hops[fact_id], -state.facts[fact_id].confidence, fact_id))

    async def agraph_hops(self, query: str, limit: int = 20) -> dict[str, int]:
        """Facts the graph reaches from the entities ``query`` names: ``{fact id: hops}`` (1 = about them).

        The cross-tier search takes it as one signal among others; no entity named (or no fact
        yet), no graph call.
        """
        state = await self._astate()
        if not state.facts:
            return {}
        return await self._ahops(state, query, limit)

    async def _ahops(self, state: _UserState, query: str, limit: int) -> dict[str, int]:
        depth = self.settings.expansion_depth
        if depth < 1:
            return {}
        seeds = [e.id for e in self.mentioned_entities(state, query)]
        if not seeds:
            return {}
        try:
            reach = await self.graph.aneighbourhood(self.user_id, seeds, depth=depth, limit=limit)
        except Exception as exc:
            logger.warning("graph expansion failed (%s); ranking without it", exc)
            return {}
        hops: dict[str, int] = {}
        for hop, (_, relation, _) in reach:
            fact_id = relation.properties.get("fact_id")
            if fact_id in state.facts:
                hops[fact_id] = min(hop, hops.get(fact_id, hop))
        return hops

    # ------------------------------------------------------------------ entities and facts
    def _find_entity(self, state: _UserState, name: str) -> Entity | None:
        registry = state.registry
        assert registry is not None
        if name == USER_ENTITY:
            return registry.by_alias(USER_ENTITY.casefold())
        entity = registry.by_alias(normalize_name(name))
        if entity is not None:
            return entity
        candidates = registry.search(name, limit=2)
        tokens = name_tokens(normalize_name(name))
        contained = [c for c in candidates if any(tokens and tokens <= name_tokens(a) for a in c.aliases)]
        return contained[0] if len(contained) == 1 else None

    async def asearch_entities(self, query: str, limit: int = 10) -> list[EntityInfo]:
        """Entities matching ``query`` by name words and by name-embedding similarity."""
        validate_content(query, "query")
        state = await self._astate()
        registry = state.registry
        assert registry is not None
        by_words = registry.search(query, limit=limit * 2)
        vector = await self.context.embeddings.aembed_query(query)
        by_vector = [
            (registry.entities[eid], score)
            for eid, score in registry.vectors.nearest(vector, k=limit * 2)
            if eid in registry.entities and score >= 0.4
        ]
        scores: dict[str, float] = {}
        for rank, entity in enumerate(by_words, start=1):
            scores[entity.id] = scores.get(entity.id, 0.0) + 1.0 / (self.config.rrf_k + rank)
        for rank, (entity, _) in enumerate(by_vector, start=1):
            scores[entity.id] = scores.get(entity.id, 0.0) + 1.0 / (self.config.rrf_k + rank)
        ranked = sorted(scores, key=lambda eid: scores[eid], reverse=True)[:limit]
        return [self._entity_info(state, registry.entities[eid], scores[eid]) for eid in ranked]

    def search_entities(self, query: str, limit: int = 10) -> list[EntityInfo]:
        """Sync twin of :meth:`asearch_entities`."""
        return self._run(self.asearch_entities(query, limit))

    def _entity_info(self, state: _UserState, entity: Entity, score: float | None = None) -> EntityInfo:
        return EntityInfo(
            id=entity.id,
            name=entity.name,
            type=entity.type,
            aliases=sorted(entity.aliases),
            fact_count=sum(1 for f in state.by_entity.get(entity.id, ()) if state.facts[f].current),
            score=score,
        )

    async def aget_entity(self, name: str) -> EntityInfo | None:
        """The entity a name resolves to (alias or unambiguous containment), or None."""
        state = await self._astate()
        entity = self._find_entity(state, name)
        return None if entity is None else self._entity_info(state, entity)

    def get_entity(self, name: str) -> EntityInfo | None:
        """Sync twin of :meth:`aget_entity`."""
        return self._run(self.aget_entity(name))

    async def aget_related_entities(
        self, name: str, depth: int = 1, relation_types: Sequence[str] | None = None, limit: int = 50
    ) -> list[RelatedEntity]:
        """Entities within ``depth`` (1-3) hops of ``name`` in the graph, nearest first."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 3:
            raise MemoryValidationError("depth", f"must be 1, 2 or 3, got {depth!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryValidationError("limit", f"must be a positive integer, got {limit!r}")
        validate_content(name, "name")
        types = [normalize_predicate(t) for t in relation_types] if relation_types else None
        state = await self._astate()
        start = self._find_entity(state, name)
        if start is None:
            return []
        registry = state.registry
        assert registry is not None
        reach = await self.graph.aneighbourhood(
            self.user_id, [start.id], depth=depth, relation_types=types, limit=limit * 4
        )
        paths: dict[str, str] = {start.id: start.name}
        out: dict[str, RelatedEntity] = {}
        for hop, (_, relation, _) in reach:
            source, target = relation.source_id, relation.target_id
            if source in paths and target not in paths:
                origin, other, direction = source, target, "out"
            elif target in paths and source not in paths:
                origin, other, direction = target, source, "in"
            else:
                continue
            entity = registry.get(other)
            if entity is None:
                continue
            arrow = f" -{relation.label}-> " if direction == "out" else f" <-{relation.label}- "
            paths[other] = paths[origin] + arrow + entity.name
            origin_entity = registry.get(origin)
            out[other] = RelatedEntity(
                id=other,
                name=entity.name,
                type=entity.type,
                hop=hop,
                relation=relation.label,
                direction=direction,
                via=origin_entity.name if origin_entity else origin,
                fact_id=relation.properties.get("fact_id"),
                confidence=relation.properties.get("confidence"),
                path=paths[other],
            )
            if len(out) >= limit:
                break
        return list(out.values())

    def get_related_entities(
        self, name: str, depth: int = 1, relation_types: Sequence[str] | None = None, limit: int = 50
    ) -> list[RelatedEntity]:
        """Sync twin of :meth:`aget_related_entities`."""
        return self._run(self.aget_related_entities(name, depth, relation_types, limit))

    async def aget_facts(self, entity: str, include_history: bool = False) -> list[MemoryItem]:
        """Facts about an entity (as subject or object): current ones, or all with history, oldest first."""
        validate_content(entity, "entity")
        state = await self._astate()
        found = self._find_entity(state, entity)
        if found is None:
            return []
        ids = [f for f in state.by_entity.get(found.id, ()) if include_history or state.facts[f].current]
        items = await self.aget_many(ids)
        return sorted(items, key=lambda i: (i.timestamp, i.created_at))

    def get_facts(self, entity: str, include_history: bool = False) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_facts`."""
        return self._run(self.aget_facts(entity, include_history))

    # ------------------------------------------------------------------ export
    async def aexport_knowledge_graph(
        self, format: str = "json", *, path: str | Path | None = None, include_history: bool = False
    ) -> str:
        """This user's knowledge graph as ``json``, ``graphml`` or ``html`` (written to ``path`` if given)."""
        state = await self._astate()
        registry = state.registry
        assert registry is not None
        facts = [f for f in state.facts.values() if include_history or f.current]
        entity_ids = sorted({f.subject_id for f in facts} | {f.object_id for f in facts})
        nodes = [
            GraphNode(
                id=e.id,
                label=e.name,
                type=e.type,
                properties={"aliases": sorted(e.aliases), "facts": len(state.by_entity.get(e.id, ()))},
            )
            for e in (registry.entities[i] for i in entity_ids if i in registry.entities)
        ]
        edges = [
            GraphEdge(
                source=f.subject_id,
                target=f.object_id,
                label=f.predicate,
                properties={
                    "fact_id": f.id,
                    "status": "current" if f.current else "superseded",
                    **{
                        k: f.metadata.get(k)
                        for k in ("confidence", "valid_at", "invalid_at", "extractor", "source_ids")
                        if f.metadata.get(k) is not None
                    },
                },
            )
            for f in sorted(facts, key=lambda f: (f.valid_at, f.id))
            if f.subject_id != f.object_id  # the user's name labels the user's node
        ]
        graph = KnowledgeGraph(nodes=nodes, edges=edges, title=f"Knowledge graph of {self.user_id}")
        text = graph.export(format)
        if path is not None:
            target = Path(path)
            try:
                await asyncio.to_thread(target.write_text, text, "utf-8")
            except OSError as exc:
                raise StoreError(f"{target}: cannot write the export: {exc}") from exc
        return text

    def export_knowledge_graph(
        self, format: str = "json", *, path: str | Path | None = None, include_history: bool = False
    ) -> str:
        """Sync twin of :meth:`aexport_knowledge_graph`."""
        return self._run(self.aexport_knowledge_graph(format, path=path, include_history=include_history))
