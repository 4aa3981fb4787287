"""The property graph as a mirror of one user's current facts.

The record store is the source of truth; the graph holds the entities and the *current*
facts for traversal. After every change the mirror is brought in step; when it cannot be
(a store error), the state is marked unloaded so that the next use reloads it and rebuilds
the graph from the records.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from llama_index.core.graph_stores.types import EntityNode, Relation

from llama_index_memory_hierarchy.tiers.semantic.facts import Fact
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.entity_resolution import Entity
    from llama_index_memory_hierarchy.stores.graph import UserGraph

logger = logging.getLogger(__name__)

_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def node_label(entity_type: str) -> str:
    """A graph label for an entity type (Cypher-safe; ``ENTITY`` when nothing is left)."""
    label = _LABEL_UNSAFE.sub("_", entity_type.upper()).strip("_")
    return label or "ENTITY"


class GraphMirror:
    """Writes one user's entities and current facts to a :class:`~.stores.graph.UserGraph`."""

    def __init__(self, graph: UserGraph, user_id: str) -> None:
        self.graph = graph
        self.user_id = user_id

    def node(self, entity: Entity) -> EntityNode:
        return EntityNode(
            name=entity.id,
            label=node_label(entity.type),
            properties={
                "user_id": self.user_id,
                "display_name": entity.name,
                "entity_type": entity.type,
                "aliases": sorted(entity.aliases),
            },
        )

    def relation(self, fact: Fact) -> Relation:
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

    async def aout_of_step(self, state: SemanticState) -> bool:
        """Whether the graph misses (or has extra) current facts of this user."""
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

    async def arebuild(self, state: SemanticState) -> int:
        """Replace this user's subgraph by the current facts; return the relations written."""
        await self.graph.aclear_user(self.user_id)
        # the user's name is the label of the user's node, not an edge to itself
        current = [f for f in (state.facts[i] for i in state.current.values()) if f.subject_id != f.object_id]
        entity_ids = {f.subject_id for f in current} | {f.object_id for f in current}
        assert state.registry is not None
        nodes = [self.node(state.registry.entities[e]) for e in sorted(entity_ids) if e in state.registry.entities]
        await self.graph.aupsert(nodes, [self.relation(f) for f in current])
        return len(current)

    async def amirror(self, state: SemanticState, touched: Iterable[Fact], ended: Iterable[Fact]) -> None:
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
            nodes = [self.node(registry.entities[e]) for e in entity_ids if e in registry.entities]
            if nodes or live:
                await self.graph.aupsert(nodes, [self.relation(f) for f in live])
        except Exception as exc:
            logger.error(
                "semantic memory of %s: graph update failed (%s); it is rebuilt on next load", self.user_id, exc
            )
            state.loaded = False

    async def aremove(self, state: SemanticState, removed: Sequence[Fact], orphans: Sequence[str]) -> bool:
        """Take deleted facts (and entities left without facts) out of the graph; False when it failed."""
        try:
            ended = [f.key for f in removed if f.current and f.key not in state.current]
            await self.graph.adelete_relations(self.user_id, ended)
            if orphans:
                await self.graph.adelete_nodes(self.user_id, orphans)
        except Exception as exc:
            logger.error("semantic memory of %s: graph update failed (%s); rebuilt on next load", self.user_id, exc)
            state.loaded = False
            return False
        return True
