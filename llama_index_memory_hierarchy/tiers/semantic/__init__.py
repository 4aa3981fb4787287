"""Semantic memory: facts that hold, kept current, with a knowledge graph to reason over.

Each fact ``subject -predicate-> object`` is a memory record (the record store is the source
of truth); a property graph mirrors the entities and the *current* facts for traversal.
The tier (:mod:`.tier`) stands on helpers that never import it:

* :mod:`.facts`: the fact input, its validation, and the index entry of a fact record;
* :mod:`.state`: one user's facts, entities and indexes, shared in-process;
* :mod:`.supersession`: which facts a new fact ends (bi-temporal), which a deletion reinstates;
* :mod:`.graph_mirror`: the graph kept in step with the current facts;
* :mod:`.writer`: every change written to records, state and graph together;
* :mod:`.entities` and :mod:`.graph_search`: entities by name, and search through the graph;
* :mod:`.export`: the knowledge graph as JSON, GraphML or HTML.
"""

from llama_index_memory_hierarchy.tiers.semantic.entities import EntityInfo
from llama_index_memory_hierarchy.tiers.semantic.facts import FactInput
from llama_index_memory_hierarchy.tiers.semantic.graph_search import RelatedEntity
from llama_index_memory_hierarchy.tiers.semantic.settings import SemanticSettings
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState, areset_semantic_state, semantic_state
from llama_index_memory_hierarchy.tiers.semantic.supersession import DEFAULT_FUNCTIONAL_PREDICATES
from llama_index_memory_hierarchy.tiers.semantic.tier import SemanticMemory

__all__ = [
    "DEFAULT_FUNCTIONAL_PREDICATES",
    "EntityInfo",
    "FactInput",
    "RelatedEntity",
    "SemanticMemory",
    "SemanticSettings",
    "SemanticState",
    "areset_semantic_state",
    "semantic_state",
]
