"""``SharedState``: what the layers above keep once per deployment, as typed fields of the store context.

Every memory object over one set of stores sees the same state: the store's signing key once read,
whether the lifecycle tables exist, the offline extractor (its models load once), the open memories
and their background tasks, each user's semantic state. In-process only: what other processes must see
lives in the record store. The types of the last two belong to the layers above (tiers, lifecycle),
which the stores do not import; their accessors there (``semantic_state``, ``live_memories``) type them.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.extraction.offline import OfflineExtractor


@dataclass
class SharedState:
    """Per-deployment state of the layers above, one instance per :class:`~.context.StoreContext`."""

    #: The store's chat-signing key once read from ``lifecycle_state`` (``provenance.asigning_key``).
    signing_key: bytes | None = None
    #: Whether the lifecycle tables were checked to exist in this database (``lifecycle.tables``).
    lifecycle_tables_ready: bool = False
    #: Background lifecycle tasks (consolidations) by user: an erasure cancels and awaits them.
    background: dict[str, set[asyncio.Task[Any]]] = field(default_factory=dict)
    #: The open memories by ``id()`` (``lifecycle.sessions.LiveMemory``): deletions and erasures reach them.
    live: weakref.WeakValueDictionary[int, Any] = field(default_factory=weakref.WeakValueDictionary)
    #: Each user's facts and entity indexes (``tiers.semantic.state.SemanticState``), loaded on first use.
    semantic: dict[str, Any] = field(default_factory=dict)
    #: What ``get()`` showed earlier in each ``(user, session)`` (``lifecycle.shown.SessionShown``), for every object.
    shown: dict[tuple[str, str], Any] = field(default_factory=dict)
    _extractor: OfflineExtractor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def offline_extractor(self) -> OfflineExtractor:
        """The offline fact extractor, made on first use (its language models load once per deployment)."""
        with self._lock:
            if self._extractor is None:
                from llama_index_memory_hierarchy.extraction.offline import OfflineExtractor

                self._extractor = OfflineExtractor()
            return self._extractor
