"""Search through the graph: the facts a query's entities reach, and the entities near an entity."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from llama_index_memory_hierarchy.tiers.semantic.entities import mentioned_entities
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.entity_resolution import Entity
    from llama_index_memory_hierarchy.stores.graph import UserGraph

logger = logging.getLogger(__name__)


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


async def afact_hops(graph: UserGraph, state: SemanticState, query: str, *, depth: int, limit: int) -> dict[str, int]:
    """Facts reached from the entities ``query`` names, within ``depth`` hops: ``{fact id: hops}``.

    A graph store error is logged and ranks nothing (retrieval goes on without the graph).
    """
    if depth < 1:
        return {}
    seeds = [e.id for e in mentioned_entities(state, query)]
    if not seeds:
        return {}
    try:
        reach = await graph.aneighbourhood(state.user_id, seeds, depth=depth, limit=limit)
    except Exception as exc:
        logger.warning("graph expansion failed (%s); ranking without it", exc)
        return {}
    hops: dict[str, int] = {}
    for hop, (_, relation, _) in reach:
        fact_id = relation.properties.get("fact_id")
        if fact_id in state.facts:
            hops[fact_id] = min(hop, hops.get(fact_id, hop))
    return hops


async def arelated_entities(
    graph: UserGraph,
    state: SemanticState,
    start: Entity,
    *,
    depth: int,
    relation_types: Sequence[str] | None,
    limit: int,
) -> list[RelatedEntity]:
    """Entities within ``depth`` hops of ``start``, nearest first, each with the path that reached it."""
    registry = state.registry
    assert registry is not None
    reach = await graph.aneighbourhood(
        state.user_id, [start.id], depth=depth, relation_types=relation_types, limit=limit * 4
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
