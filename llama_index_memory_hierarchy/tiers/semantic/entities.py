"""Finding a user's entities by name: the entity a name means, and the entities a text mentions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from llama_index_memory_hierarchy.calibration import IDENTITY, SimilarityCalibration, group_of
from llama_index_memory_hierarchy.entity_resolution import Entity, name_tokens, normalize_name
from llama_index_memory_hierarchy.extraction import USER_ENTITY
from llama_index_memory_hierarchy.language import FIRST_PERSON, FIRST_PERSON_PLURAL, HAN_CHAR
from llama_index_memory_hierarchy.ranking.fusion import rrf_fuse
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState

#: Calibrated similarity (role ``"name"``) from which an entity's name matches a query by embedding
#: (MiniLM's former raw 0.4).
ENTITY_QUERY_SIMILARITY = 0.2
#: Words by which a text speaks of its writer, the user (alone or with others).
_FIRST_PERSON = FIRST_PERSON | FIRST_PERSON_PLURAL


class EntityInfo(BaseModel):
    """An entity of the knowledge graph."""

    id: str
    name: str
    type: str
    aliases: list[str]
    fact_count: int
    score: float | None = None


def entity_info(state: SemanticState, entity: Entity, score: float | None = None) -> EntityInfo:
    """The public view of ``entity``, with the number of its current facts."""
    return EntityInfo(
        id=entity.id,
        name=entity.name,
        type=entity.type,
        aliases=sorted(entity.aliases),
        fact_count=sum(1 for f in state.by_entity.get(entity.id, ()) if state.facts[f].current),
        score=score,
    )


def find_entity(state: SemanticState, name: str) -> Entity | None:
    """The entity ``name`` resolves to: an alias, else the one entity whose aliases contain its words."""
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


def mentioned_entities(state: SemanticState, text: str) -> list[Entity]:
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
    if HAN_CHAR.search(text):
        for entity in registry.entities.values():
            if any(HAN_CHAR.search(a) and a in normalized for a in entity.aliases):
                found[entity.id] = entity
    return list(found.values())


def rank_entities(
    state: SemanticState,
    query: str,
    vector: Any,
    *,
    limit: int,
    rrf_k: int,
    calibration: SimilarityCalibration = IDENTITY,
) -> list[EntityInfo]:
    """Entities matching ``query`` by name words and by name-embedding similarity (``vector``), fused by rank.

    A name matches by embedding from :data:`ENTITY_QUERY_SIMILARITY` on ``calibration``'s scale (the model's).
    """
    registry = state.registry
    assert registry is not None
    by_words = registry.search(query, limit=limit * 2)
    asked = group_of(query)
    by_vector = [
        (registry.entities[eid], score)
        for eid, score in registry.vectors.nearest(vector, k=limit * 2)
        if eid in registry.entities
        and calibration.calibrate(score, asked, group_of(registry.entities[eid].name), role="name")
        >= ENTITY_QUERY_SIMILARITY
    ]
    fused = rrf_fuse([[entity.id for entity in by_words], [entity.id for entity, _ in by_vector]], k=rrf_k)
    return [entity_info(state, registry.entities[eid], score) for eid, score in fused[:limit]]
