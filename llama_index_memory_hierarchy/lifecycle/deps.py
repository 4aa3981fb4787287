"""``LifecycleDeps``: what the lifecycle services of one memory use, and nothing more.

Like graphiti-core's services, which take ``GraphitiClients`` rather than the ``Graphiti``
facade, every lifecycle service (consolidation, reflection, compression, forgetting, the
profile) takes this bundle: the stores, the tiers, the lifecycle tables, the LLMs, the
settings, and the callbacks by which the memory that owns them lets the lifecycle act on its
short-term state. The memory builds the bundle and the :class:`~.manager.MemoryManager`
facade over the services; no service sees either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.lifecycle.llm import configured_llm
from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.retrieval.search import CrossTierSearch
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.tiers.tierset import TierSet


@dataclass
class Revision:
    """Version of what is derived from the memories (the profile, the memory message of ``get()``).

    Why: a change made by a service (consolidation, forgetting, a deletion) must reach caches that
    live above it; they key on this number instead of being reached into.
    """

    value: int = 0

    def bump(self) -> None:
        """Something derived views show may have changed."""
        self.value += 1


@dataclass(frozen=True)
class LifecycleDeps:
    """The stores, tiers, tables, LLMs, settings and owner callbacks of one user's memory lifecycle."""

    context: StoreContext
    tiers: TierSet
    store: LifecycleStore
    search: CrossTierSearch
    config: MemoryConfig
    settings: LifecycleSettings
    user_id: str
    session_id: str
    #: Start a fresh short-term context of the owning memory (what ``reset()`` does).
    areset_context: Callable[[], Awaitable[None]]
    #: Drop turns from the history the owning memory replays; whether one of them was there.
    forget_turns: Callable[[set[str]], bool]
    llm_given: Any = None
    revision: Revision = field(default_factory=Revision)

    def llm(self) -> Any:
        """The LLM for routing and importance: the one given, else ``Settings.llm``, else None."""
        return configured_llm(self.llm_given, allow_local=False)

    def background_llm(self) -> Any:
        """The LLM for consolidation, reflection and summaries (may be the bundled model; see settings)."""
        return configured_llm(self.llm_given, allow_local=self.settings.use_local_llm)
