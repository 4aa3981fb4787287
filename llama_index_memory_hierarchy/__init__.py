"""Long-term, human-like memory for LlamaIndex agents.

Public names are imported lazily so that ``import llama_index_memory_hierarchy`` stays
fast and loads no model, torch or database.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.version import __version__

_EXPORTS: dict[str, str] = {
    "HierarchicalMemory": "llama_index_memory_hierarchy.hierarchy",
    "WorkingMemory": "llama_index_memory_hierarchy.tiers.working",
    "EpisodicMemory": "llama_index_memory_hierarchy.tiers.episodic",
    "MemoryTier": "llama_index_memory_hierarchy.tiers.base",
    "HierarchyMemoryBlock": "llama_index_memory_hierarchy.blocks",
    "TierRetriever": "llama_index_memory_hierarchy.tiers.retriever",
    "HierarchyRetriever": "llama_index_memory_hierarchy.retrieval.retriever",
    "SemanticMemory": "llama_index_memory_hierarchy.tiers.semantic",
    "PerceptualMemory": "llama_index_memory_hierarchy.tiers.perceptual",
    "KnowledgeBase": "llama_index_memory_hierarchy.knowledge.base",
    "KnowledgeRetriever": "llama_index_memory_hierarchy.knowledge.retriever",
    "KnowledgeQueryEngine": "llama_index_memory_hierarchy.knowledge.query_engine",
    "MarkdownHeadingSplitter": "llama_index_memory_hierarchy.knowledge.chunking",
    "MemoryToolSpec": "llama_index_memory_hierarchy.tools",
    "RagToolSpec": "llama_index_memory_hierarchy.tools",
    "LocalLLM": "llama_index_memory_hierarchy.llms.local",
    "resolve_llm": "llama_index_memory_hierarchy.llms",
    "EmbeddingService": "llama_index_memory_hierarchy.embeddings",
    "HashingEmbedding": "llama_index_memory_hierarchy.embeddings",
    "SQLitePropertyGraphStore": "llama_index_memory_hierarchy.stores.graph.sqlite",
    "MemoryManager": "llama_index_memory_hierarchy.lifecycle.manager",
    "LifecycleSettings": "llama_index_memory_hierarchy.lifecycle.settings",
    "ProfileMemoryBlock": "llama_index_memory_hierarchy.lifecycle.profile",
    "migrate": "llama_index_memory_hierarchy.ops.migrate",
    "MemoryConfig": "llama_index_memory_hierarchy.config",
    "MemoryItem": "llama_index_memory_hierarchy.types",
    "MemoryType": "llama_index_memory_hierarchy.types",
    "MemoryFilter": "llama_index_memory_hierarchy.types",
    "MemoryHierarchyError": "llama_index_memory_hierarchy.errors",
    "MemoryValidationError": "llama_index_memory_hierarchy.errors",
    "MemoryNotFoundError": "llama_index_memory_hierarchy.errors",
    "EmbeddingDimensionError": "llama_index_memory_hierarchy.errors",
    "StoreError": "llama_index_memory_hierarchy.errors",
    "StoreLockedError": "llama_index_memory_hierarchy.errors",
    "LLMRequiredError": "llama_index_memory_hierarchy.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.blocks import HierarchyMemoryBlock
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.embeddings import EmbeddingService, HashingEmbedding
    from llama_index_memory_hierarchy.errors import (
        EmbeddingDimensionError,
        LLMRequiredError,
        MemoryHierarchyError,
        MemoryNotFoundError,
        MemoryValidationError,
        StoreError,
        StoreLockedError,
    )
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase
    from llama_index_memory_hierarchy.knowledge.chunking import MarkdownHeadingSplitter
    from llama_index_memory_hierarchy.knowledge.query_engine import KnowledgeQueryEngine
    from llama_index_memory_hierarchy.knowledge.retriever import KnowledgeRetriever
    from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager
    from llama_index_memory_hierarchy.lifecycle.profile import ProfileMemoryBlock
    from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
    from llama_index_memory_hierarchy.llms import resolve_llm
    from llama_index_memory_hierarchy.llms.local import LocalLLM
    from llama_index_memory_hierarchy.ops.migrate import migrate
    from llama_index_memory_hierarchy.retrieval.retriever import HierarchyRetriever
    from llama_index_memory_hierarchy.stores.graph.sqlite import SQLitePropertyGraphStore
    from llama_index_memory_hierarchy.tiers.base import MemoryTier
    from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
    from llama_index_memory_hierarchy.tiers.perceptual import PerceptualMemory
    from llama_index_memory_hierarchy.tiers.retriever import TierRetriever
    from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory
    from llama_index_memory_hierarchy.tiers.working import WorkingMemory
    from llama_index_memory_hierarchy.tools import MemoryToolSpec, RagToolSpec
    from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llama_index_memory_hierarchy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
