"""Knowledge bases: a user's documents chunked into the shared stores, retrieval with MQE/HyDE, answers.

Names are imported lazily so that importing the package loads no reader, model or store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "KnowledgeBase": "llama_index_memory_hierarchy.knowledge.base",
    "IngestReport": "llama_index_memory_hierarchy.knowledge.ingest",
    "IngestError": "llama_index_memory_hierarchy.knowledge.ingest",
    "DocumentInfo": "llama_index_memory_hierarchy.knowledge.manifest",
    "kb_namespace": "llama_index_memory_hierarchy.knowledge.scope",
    "MarkdownHeadingSplitter": "llama_index_memory_hierarchy.knowledge.chunking",
    "DocumentLoadError": "llama_index_memory_hierarchy.knowledge.loaders",
    "SUPPORTED_EXTENSIONS": "llama_index_memory_hierarchy.knowledge.loaders",
    "default_file_extractor": "llama_index_memory_hierarchy.knowledge.loaders",
    "load_file": "llama_index_memory_hierarchy.knowledge.loaders",
    "KnowledgeRetriever": "llama_index_memory_hierarchy.knowledge.retriever",
    "SearchTrace": "llama_index_memory_hierarchy.knowledge.retriever",
    "KnowledgeQueryEngine": "llama_index_memory_hierarchy.knowledge.query_engine",
    "build_context": "llama_index_memory_hierarchy.knowledge.query_engine",
}

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "DocumentInfo",
    "DocumentLoadError",
    "IngestError",
    "IngestReport",
    "KnowledgeBase",
    "KnowledgeQueryEngine",
    "KnowledgeRetriever",
    "MarkdownHeadingSplitter",
    "SearchTrace",
    "build_context",
    "default_file_extractor",
    "kb_namespace",
    "load_file",
]

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase
    from llama_index_memory_hierarchy.knowledge.chunking import MarkdownHeadingSplitter
    from llama_index_memory_hierarchy.knowledge.ingest import IngestError, IngestReport
    from llama_index_memory_hierarchy.knowledge.loaders import (
        SUPPORTED_EXTENSIONS,
        DocumentLoadError,
        default_file_extractor,
        load_file,
    )
    from llama_index_memory_hierarchy.knowledge.manifest import DocumentInfo
    from llama_index_memory_hierarchy.knowledge.query_engine import KnowledgeQueryEngine, build_context
    from llama_index_memory_hierarchy.knowledge.retriever import KnowledgeRetriever, SearchTrace
    from llama_index_memory_hierarchy.knowledge.scope import kb_namespace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
