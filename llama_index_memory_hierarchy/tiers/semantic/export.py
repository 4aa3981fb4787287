"""One user's knowledge graph as a portable :class:`~.graph_export.KnowledgeGraph` (JSON, GraphML, HTML)."""

from __future__ import annotations

from llama_index_memory_hierarchy.graph_export import GraphEdge, GraphNode, KnowledgeGraph
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState


def knowledge_graph(state: SemanticState, *, include_history: bool = False) -> KnowledgeGraph:
    """The entities and current facts (all facts with ``include_history``) of the state's user."""
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
    return KnowledgeGraph(nodes=nodes, edges=edges, title=f"Knowledge graph of {state.user_id}")
