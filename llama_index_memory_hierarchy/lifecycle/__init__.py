"""The memory lifecycle: routing, importance, consolidation, reflection, compression, profile,
forgetting, erasure and export/import. ``HierarchicalMemory.manager`` is the entry point.

Names are imported lazily, like the package's own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "MemoryManager": "llama_index_memory_hierarchy.lifecycle.manager",
    "LifecycleDeps": "llama_index_memory_hierarchy.lifecycle.deps",
    "live_memories": "llama_index_memory_hierarchy.lifecycle.sessions",
    "LifecycleSettings": "llama_index_memory_hierarchy.lifecycle.settings",
    "RoutingDecision": "llama_index_memory_hierarchy.lifecycle.routing",
    "HeuristicRouter": "llama_index_memory_hierarchy.lifecycle.routing",
    "ImportanceEstimator": "llama_index_memory_hierarchy.lifecycle.importance",
    "effective_importance": "llama_index_memory_hierarchy.lifecycle.importance",
    "IMPORTANCE_PROMPT": "llama_index_memory_hierarchy.lifecycle.importance",
    "ConsolidationReport": "llama_index_memory_hierarchy.lifecycle.consolidation",
    "ReflectionReport": "llama_index_memory_hierarchy.lifecycle.reflection",
    "ConversationCompressor": "llama_index_memory_hierarchy.lifecycle.compression",
    "extractive_summary": "llama_index_memory_hierarchy.lifecycle.compression",
    "ForgetReport": "llama_index_memory_hierarchy.lifecycle.forgetting",
    "TierForgetReport": "llama_index_memory_hierarchy.lifecycle.forgetting",
    "ForgottenItem": "llama_index_memory_hierarchy.lifecycle.forgetting",
    "ErasureReport": "llama_index_memory_hierarchy.lifecycle.erasure",
    "aerase_user": "llama_index_memory_hierarchy.lifecycle.erasure",
    "ExportReport": "llama_index_memory_hierarchy.lifecycle.export_format",
    "ImportReport": "llama_index_memory_hierarchy.lifecycle.export_format",
    "aexport_user": "llama_index_memory_hierarchy.lifecycle.portability",
    "aimport_user": "llama_index_memory_hierarchy.lifecycle.user_import",
    "UserProfile": "llama_index_memory_hierarchy.lifecycle.profile",
    "ProfileEntry": "llama_index_memory_hierarchy.lifecycle.profile",
    "ProfileMemoryBlock": "llama_index_memory_hierarchy.lifecycle.profile",
}

__all__ = [
    "IMPORTANCE_PROMPT",
    "ConsolidationReport",
    "ConversationCompressor",
    "ErasureReport",
    "ExportReport",
    "ForgetReport",
    "ForgottenItem",
    "HeuristicRouter",
    "ImportReport",
    "ImportanceEstimator",
    "LifecycleDeps",
    "LifecycleSettings",
    "MemoryManager",
    "ProfileEntry",
    "ProfileMemoryBlock",
    "ReflectionReport",
    "RoutingDecision",
    "TierForgetReport",
    "UserProfile",
    "aerase_user",
    "aexport_user",
    "aimport_user",
    "effective_importance",
    "extractive_summary",
    "live_memories",
]

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.lifecycle.compression import ConversationCompressor, extractive_summary
    from llama_index_memory_hierarchy.lifecycle.consolidation import ConsolidationReport
    from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
    from llama_index_memory_hierarchy.lifecycle.erasure import ErasureReport, aerase_user
    from llama_index_memory_hierarchy.lifecycle.export_format import ExportReport, ImportReport
    from llama_index_memory_hierarchy.lifecycle.forgetting import ForgetReport, ForgottenItem, TierForgetReport
    from llama_index_memory_hierarchy.lifecycle.importance import (
        IMPORTANCE_PROMPT,
        ImportanceEstimator,
        effective_importance,
    )
    from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager
    from llama_index_memory_hierarchy.lifecycle.portability import aexport_user
    from llama_index_memory_hierarchy.lifecycle.profile import ProfileEntry, ProfileMemoryBlock, UserProfile
    from llama_index_memory_hierarchy.lifecycle.reflection import ReflectionReport
    from llama_index_memory_hierarchy.lifecycle.routing import HeuristicRouter, RoutingDecision
    from llama_index_memory_hierarchy.lifecycle.sessions import live_memories
    from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
    from llama_index_memory_hierarchy.lifecycle.user_import import aimport_user


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
