"""``TierSet``: the tiers of one user and session, each built once, with the caller's options.

Why: a tier built on the side (for a delete cascade, a graph rebuild, an import) knows none
of the options its owner was given, e.g. ``HierarchicalMemory.from_defaults(graph_store=custom)``,
and would update the default graph instead. Every tier is built here, lazily (a memory that
never touches the perceptual tier never builds it), and the tier set wires what ties tiers
together: the facts the semantic tier derived from an episodic or perceptual memory go when
that memory goes, from this tier set's semantic tier.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
from llama_index_memory_hierarchy.tiers.perceptual import PerceptionSettings, PerceptualMemory
from llama_index_memory_hierarchy.tiers.procedural import ProceduralMemory, ProceduralSettings
from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory, SemanticSettings
from llama_index_memory_hierarchy.tiers.stored import StoredTier
from llama_index_memory_hierarchy.tiers.working import EvictionHandler, WorkingMemory
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

if TYPE_CHECKING:
    from llama_index.core.graph_stores.types import PropertyGraphStore

    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.stores.context import StoreContext

#: Deletes memories by id through the owner's deletion path: ``(tier type, ids, tier to delete through)``
#: -> the ids deleted. ``WORKING`` names the items working memory holds, with their durable copies.
Deleter = Callable[[MemoryType, Sequence[str], MemoryTier | None], Awaitable[list[str]]]
#: The owner's cross-tier search restricted to tiers: ``(tier type, query, limit, **filters)`` -> ranked memories.
Searcher = Callable[..., Awaitable[list[MemoryItem]]]
#: The owner's forgetting restricted to tiers: ``(tier type, strategy, dry_run, **params)`` -> how many (would) go.
Forgetting = Callable[..., Awaitable[int]]
T = TypeVar("T", bound=MemoryTier)
Stored = TypeVar("Stored", bound=StoredTier)


class TierSet:
    """The tiers of ``user_id`` over one store context (see the module docstring).

    ``llm`` serves extraction and captions, ``graph_store`` the semantic tier's graph (default:
    the store context's), ``perception_encoders`` the perceptual tier; ``semantic_settings`` and
    ``perception_settings`` tune those two tiers, ``procedural_settings``
    the procedural one (default: their defaults). ``delete`` routes every
    tier's removals through the owner's deletion path; ``search`` is every tier's retrieval (the
    owner's cross-tier search restricted to that tier), ``forget`` its forgetting (the owner's, restricted to
    that tier); ``on_evict`` receives what working
    memory evicts. Without them a tier deletes its own records (with the cascade), retrieves
    and forgets nothing (its ``retrieve`` and ``forget`` say so) and evicted items are dropped.
    """

    def __init__(
        self,
        context: StoreContext,
        *,
        user_id: str,
        session_id: str | None = None,
        config: MemoryConfig | None = None,
        llm: Any = None,
        graph_store: PropertyGraphStore | None = None,
        perception_encoders: Sequence[Any] = (),
        semantic_settings: SemanticSettings | None = None,
        perception_settings: PerceptionSettings | None = None,
        procedural_settings: ProceduralSettings | None = None,
        delete: Deleter | None = None,
        search: Searcher | None = None,
        forget: Forgetting | None = None,
        on_evict: EvictionHandler | None = None,
    ) -> None:
        self.context = context
        self.user_id = user_id
        self.session_id = session_id
        self.config = config or context.config
        self._llm = llm
        self._graph_store = graph_store
        self._encoders = tuple(perception_encoders)
        self._semantic_settings = semantic_settings
        self._perception_settings = perception_settings
        self._procedural_settings = procedural_settings
        self._delete = delete
        self._search = search
        self._forget = forget
        self._on_evict = on_evict

    # ------------------------------------------------------------------ the tiers
    @cached_property
    def working(self) -> WorkingMemory:
        """Short-lived, in-process context of this session."""
        return self._searched(
            WorkingMemory(
                user_id=self.user_id,
                session_id=self.session_id,
                runtime=self.context.runtime,
                config=self.config,
                embeddings=self.context.embeddings,
                on_evict=self._on_evict,
                on_remove=self._aremove_working if self._delete is not None else None,
            )
        )

    @cached_property
    def episodic(self) -> EpisodicMemory:
        """Durable, time-ordered record of every turn and event."""
        return self._source(EpisodicMemory(user_id=self.user_id, session_id=self.session_id, context=self.context))

    @cached_property
    def semantic(self) -> SemanticMemory:
        """Facts and the knowledge graph (its own cascade: a deleted statement takes its facts along)."""
        return self._routed(
            SemanticMemory(
                user_id=self.user_id,
                session_id=self.session_id,
                context=self.context,
                llm=self._llm,
                graph_store=self._graph_store,
                settings=self._semantic_settings,
            )
        )

    @cached_property
    def perceptual(self) -> PerceptualMemory:
        """Images, audio, video and other non-text inputs."""
        return self._source(
            PerceptualMemory(
                user_id=self.user_id,
                session_id=self.session_id,
                context=self.context,
                llm=self._llm,
                encoders=self._encoders,
                settings=self._perception_settings,
            )
        )

    @cached_property
    def procedural(self) -> ProceduralMemory:
        """Standing instructions and learned procedures (of ``config.agent_id``'s agent, when set)."""
        return self._routed(
            ProceduralMemory(
                user_id=self.user_id,
                session_id=self.session_id,
                context=self.context,
                agent_id=self.config.agent_id,
                llm=self._llm,
                settings=self._procedural_settings,
            )
        )

    def tier(self, memory_type: MemoryType | str) -> MemoryTier:
        """The tier of this type."""
        return getattr(self, MemoryType(memory_type).value)

    def built(self, memory_type: MemoryType | str) -> MemoryTier | None:
        """The tier of this type if it was built already (what only reads a tier's settings builds none)."""
        return self.__dict__.get(MemoryType(memory_type).value)

    def tiers(self, memory_types: Sequence[MemoryType | str] | None = None) -> list[MemoryTier]:
        """The tiers named (default: all), in hierarchy order."""
        return [self.tier(kind) for kind in (memory_types or list(MemoryType))]

    # ------------------------------------------------------------------ wiring
    def _searched(self, tier: T) -> T:
        if self._search is not None:
            tier.search_through(functools.partial(self._search, tier.memory_type))
        if self._forget is not None:
            tier.forget_through(functools.partial(self._forget, tier.memory_type))
        return tier

    def _routed(self, tier: Stored) -> Stored:
        if self._delete is not None:
            tier.delete_through(self._adelete)
        return self._searched(tier)

    def _source(self, tier: Stored) -> Stored:
        """A tier facts are extracted from: its deleted memories take the facts only they supported along, and a
        corrected memory's facts are corrected with it (history kept)."""
        tier.on_delete(self._aforget_sources)
        tier.on_edit(self._arestate_source)
        return self._routed(tier)

    async def _arestate_source(self, item: MemoryItem) -> int:
        return await self.semantic.arestate(item.id, item.content, only_cited=True)

    async def _aforget_sources(self, ids: Sequence[str]) -> int:
        return await self.semantic.aremove_sources(ids)

    async def _adelete(self, tier: StoredTier, ids: Sequence[str]) -> list[str]:
        assert self._delete is not None
        return await self._delete(tier.memory_type, ids, tier)

    async def _aremove_working(self, memory_id: str) -> bool:
        assert self._delete is not None
        return memory_id in await self._delete(MemoryType.WORKING, [memory_id], None)
