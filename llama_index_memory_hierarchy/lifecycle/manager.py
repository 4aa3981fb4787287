"""``MemoryManager``: the lifecycle of one user's memory, reachable as ``HierarchicalMemory.manager``.

It routes new memories to a tier, retrieves across tiers, and runs what keeps a long-lived
memory useful: importance, consolidation, reflection, conversation compression, the user
profile, forgetting, erasure, and export/import. Every coroutine runs on the store runtime
(``a*`` methods can be awaited from any loop; the sync twins block), like the tiers.

A thin facade: the memory builds it from a :class:`~.deps.LifecycleDeps` bundle, and each
operation is one of the services built over that same bundle (the services never see the
facade). Retrieval is the memory's one cross-tier search (:mod:`~..retrieval.search`).

LLM use: routing and importance use an LLM only when one is configured (``llm=`` given to
``HierarchicalMemory.from_defaults`` or to the manager, or ``Settings.llm``); the background
tasks (consolidation, reflection, summaries) may also use the bundled local model when
``LifecycleSettings.use_local_llm`` is on. Without an LLM everything runs on the offline paths.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any, Literal

from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle import browse
from llama_index_memory_hierarchy.lifecycle.adding import MemoryAdder
from llama_index_memory_hierarchy.lifecycle.browse import MemoryPage, MemoryRelations
from llama_index_memory_hierarchy.lifecycle.compression import ConversationCompressor
from llama_index_memory_hierarchy.lifecycle.consolidation import ConsolidationReport, Consolidator
from llama_index_memory_hierarchy.lifecycle.deletion import DeletionReport, adelete_memories
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.erasure import ErasureReport, aerase_user
from llama_index_memory_hierarchy.lifecycle.export_format import ExportReport, ImportReport
from llama_index_memory_hierarchy.lifecycle.forgetting import ForgetReport, Forgetter
from llama_index_memory_hierarchy.lifecycle.importance import (
    ImportanceEstimator,
    effective_importance,
)
from llama_index_memory_hierarchy.lifecycle.portability import aexport_user
from llama_index_memory_hierarchy.lifecycle.profile import ProfileBuilder, ProfileMemoryBlock, UserProfile
from llama_index_memory_hierarchy.lifecycle.reflection import ReflectionReport, Reflector
from llama_index_memory_hierarchy.lifecycle.routing import HeuristicRouter, RoutingDecision
from llama_index_memory_hierarchy.lifecycle.session_export import aexport_session
from llama_index_memory_hierarchy.lifecycle.sessions import register, track_background, unregister
from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.lifecycle.user_import import aimport_user
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.types import (
    MemoryItem,
    MemoryType,
    validate_content,
    validate_identifier,
    validate_memory_id,
)

logger = logging.getLogger(__name__)


class MemoryManager(RuntimeBound):
    """Routing, retrieval and the lifecycle of one user's memory (see the module docstring).

    Registered as a live memory (:mod:`.sessions`) from construction until :meth:`close`, so that
    deletions, erasures and imports of its user reach its short-term state.
    """

    def __init__(self, deps: LifecycleDeps) -> None:
        self.deps = deps
        self.estimator = ImportanceEstimator()
        self.router = HeuristicRouter()
        self.adder = MemoryAdder(deps, self.router, self.estimator)
        self.reflector = Reflector(deps)
        self.consolidator = Consolidator(deps, self.reflector, self.estimator)
        self.compressor = ConversationCompressor(deps, self.estimator)
        self.forgetter = Forgetter(deps)
        self.profiler = ProfileBuilder(deps)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._since_consolidation = 0
        self._profile_cache: tuple[tuple[Any, ...], UserProfile] | None = None
        deps.context.accesses.shown_sink = deps.store.arecord_shown  # the access log (one table per context)
        register(self)

    def __repr__(self) -> str:
        return f"MemoryManager(user_id={self.user_id!r}, session_id={self.session_id!r})"

    def close(self) -> None:
        """The memory closed: it is no longer a live memory of its user."""
        unregister(self)

    # ------------------------------------------------------------------ plumbing
    @property
    def context(self) -> StoreContext:
        return self.deps.context

    @property
    def user_id(self) -> str:
        return self.deps.user_id

    @property
    def session_id(self) -> str:
        return self.deps.session_id

    @property
    def settings(self) -> LifecycleSettings:
        return self.deps.settings

    @property
    def store(self) -> LifecycleStore:
        return self.deps.store

    @property
    def runtime(self) -> Runtime:
        """The store runtime the manager's coroutines run on."""
        return self.context.runtime

    def llm(self) -> Any:
        """The LLM for routing and importance: the one given, else ``Settings.llm``, else None."""
        return self.deps.llm()

    def background_llm(self) -> Any:
        """The LLM for consolidation, reflection and summaries (may be the bundled model; see settings)."""
        return self.deps.background_llm()

    def invalidate(self) -> None:
        """Forget cached derived views (the profile, the memory message of ``get()``) after a change."""
        self.deps.revision.bump()

    # ------------------------------------------------------------------ routing and importance
    async def aclassify(self, content: Any) -> RoutingDecision:
        """Which tier ``content`` belongs in (LLM when configured and ``llm_routing``, else heuristics)."""
        return await self.adder.aclassify(content)

    def classify(self, content: Any) -> RoutingDecision:
        """Sync twin of :meth:`aclassify`."""
        return self.blocking(self.aclassify(content))

    async def aestimate_importance(self, text: str) -> float:
        """Importance of ``text`` in [0, 1]: the LLM's 1-10 rating when configured, else the offline estimate."""
        return (await self.adder.aestimate(validate_content(text, "text")))[0]

    def estimate_importance(self, text: str) -> float:
        """Sync twin of :meth:`aestimate_importance`."""
        return self.blocking(self.aestimate_importance(text))

    def effective_importance(self, item: MemoryItem) -> float:
        """Importance reinforced by access (what forgetting and ranking use)."""
        s = self.settings
        return effective_importance(item, strength=s.access_reinforcement, saturation=s.access_saturation)

    # ------------------------------------------------------------------ adding
    async def aadd_memory(
        self,
        content: Any,
        memory_type: MemoryType | str | None = None,
        importance: float | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        timestamp: datetime | str | float | None = None,
        session_id: str | None = None,
        pinned: bool = False,
        dedupe: bool = False,
        caption: str | None = None,
        modality: str | None = None,
    ) -> str:
        """Store a memory in the tier the caller names, else the one the classifier picks; return its id.

        ``content`` is text, or (perceptual) bytes, a path, a file object or an image.
        ``importance`` defaults to the estimate (LLM rating when configured, else offline).
        """
        return await self.adder.aadd(
            content,
            memory_type,
            importance,
            metadata=metadata,
            timestamp=timestamp,
            session_id=session_id,
            pinned=pinned,
            dedupe=dedupe,
            caption=caption,
            modality=modality,
        )

    def add_memory(
        self, content: Any, memory_type: MemoryType | str | None = None, importance: float | None = None, **kwargs: Any
    ) -> str:
        """Sync twin of :meth:`aadd_memory`."""
        return self.blocking(self.aadd_memory(content, memory_type, importance, **kwargs))

    # ------------------------------------------------------------------ retrieval
    @traced("retrieve")
    async def aretrieve_memories(
        self,
        query: str,
        memory_types: Sequence[MemoryType | str] | None = None,
        limit: int = 5,
        min_importance: float | None = None,
        time_range: tuple[Any, Any] | None = None,
        *,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """The best memories for ``query`` from the chosen tiers (default: all), by the cross-tier search.

        Filters (``min_importance`` on stored importance, ``time_range`` on event time,
        ``session_id``, ``metadata`` equality) apply in every tier. Every memory competes on one
        score (:class:`~llama_index_memory_hierarchy.retrieval.search.CrossTierSearch`, the one every
        read path uses); among equally ranked ones, the more important,
        then the more recent, then the more often recalled come first.
        """
        filters = {
            name: value
            for name, value in (
                ("min_importance", min_importance),
                ("time_range", time_range),
                ("session_id", session_id),
                ("metadata", metadata),
            )
            if value is not None
        }
        return await self.deps.search.asearch(query, limit, memory_types=memory_types, **filters)

    def retrieve_memories(
        self,
        query: str,
        memory_types: Sequence[MemoryType | str] | None = None,
        limit: int = 5,
        min_importance: float | None = None,
        time_range: tuple[Any, Any] | None = None,
        **kwargs: Any,
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`aretrieve_memories`."""
        return self.blocking(self.aretrieve_memories(query, memory_types, limit, min_importance, time_range, **kwargs))

    # ------------------------------------------------------------------ consolidation and reflection
    async def aconsolidate(
        self,
        session_id: str | None = None,
        *,
        background: bool = False,
        promote: bool = True,
        distill: bool = True,
        reflect: bool = True,
    ) -> ConsolidationReport | None:
        """Consolidate now (return the report) or, with ``background``, start it and return None at once."""
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        coro = self.consolidator.arun(session_id=session_id, promote=promote, distill=distill, reflect=reflect)
        if background:
            await self._aspawn(coro)
            return None
        return await coro

    def consolidate(self, session_id: str | None = None, **kwargs: Any) -> ConsolidationReport | None:
        """Sync twin of :meth:`aconsolidate`."""
        return self.blocking(self.aconsolidate(session_id, **kwargs))

    async def areflect(self, *, force: bool = False) -> ReflectionReport:
        """Reflect when the importance of new events reaches the threshold (or ``force``)."""
        return await self.reflector.arun(force=force)

    def reflect(self, *, force: bool = False) -> ReflectionReport:
        """Sync twin of :meth:`areflect`."""
        return self.blocking(self.areflect(force=force))

    async def aend_session(self, *, background: bool = False, clear_working: bool = True) -> ConsolidationReport | None:
        """The session is over: consolidate it (then reflect if due) and clear its working memory."""

        async def finish() -> ConsolidationReport:
            report = await self.consolidator.arun(session_id=self.session_id)
            if clear_working:
                await self.deps.tiers.working.aclear()
            await self.store.alog(self.user_id, "end_session", {"session_id": self.session_id})
            return report

        if background:
            await self._aspawn(finish())
            return None
        return await finish()

    def end_session(self, **kwargs: Any) -> ConsolidationReport | None:
        """Sync twin of :meth:`aend_session`."""
        return self.blocking(self.aend_session(**kwargs))

    async def _aspawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` on the runtime as a background task (awaited when the stores close)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        track_background(self.context, self.user_id, task)  # an erasure of the user cancels it
        self.context.spawn(task)

    async def await_background(self) -> None:
        """Wait for the background consolidations started by this manager (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def wait_background(self) -> None:
        """Sync twin of :meth:`await_background`."""
        self.blocking(self.await_background())

    @property
    def background_running(self) -> bool:
        """Whether a background consolidation of this manager is still running."""
        return any(not t.done() for t in self._tasks)

    async def aafter_put(self, count: int) -> None:
        """Hook of ``HierarchicalMemory.put``: start a background consolidation every ``consolidate_every_turns``."""
        every = self.settings.consolidate_every_turns
        if not every:
            return
        self._since_consolidation += count
        if self._since_consolidation >= every and not self.background_running:
            self._since_consolidation = 0
            await self._aspawn(self.consolidator.arun(session_id=self.session_id))

    # ------------------------------------------------------------------ compression and profile
    async def asession_summary(self, session_id: str | None = None) -> str | None:
        """The running summary of a session (default: the current one), or None."""
        return await self.compressor.asummary(session_id)

    def session_summary(self, session_id: str | None = None) -> str | None:
        """Sync twin of :meth:`asession_summary`."""
        return self.blocking(self.asession_summary(session_id))

    async def aget_profile(self) -> UserProfile:
        """The user's profile (preferences and facts) derived from semantic memory."""
        return await self._aprofile()

    def get_profile(self) -> UserProfile:
        """Sync twin of :meth:`aget_profile`."""
        return self.blocking(self.aget_profile())

    async def _aprofile(self) -> UserProfile:
        records = self.context.records
        if self.context.sees_all_writes:  # its own count of writes to the facts tells when they changed
            await self.context.afollow()  # other processes' writes, where they may write too, counted
            seen = records.changes(self.user_id, MemoryType.SEMANTIC)
        else:  # other processes may write too: the store's own count (a fact added elsewhere changes it)
            seen = await records.count(self.user_id, memory_type=MemoryType.SEMANTIC)
        key = (self.context.sees_all_writes, seen, self.deps.revision.value)
        if self._profile_cache is not None and self._profile_cache[0] == key:
            return self._profile_cache[1]
        profile = await self.profiler.abuild()
        self._profile_cache = (key, profile)
        return profile

    async def aprofile_text(self, max_tokens: int | None = None, *, standing_only: bool = False) -> str:
        """The profile block within ``max_tokens`` (default ``profile_token_limit``); "" when empty.

        Standing facts (diet, allergies, language, ...) come first; ``standing_only``: nothing else.
        """
        limit = self.settings.profile_token_limit if max_tokens is None else max_tokens
        if limit <= 0:
            return ""
        return (await self._aprofile()).text(limit, standing_only=standing_only)

    def profile_block(self, max_tokens: int | None = None, *, priority: int = 0) -> ProfileMemoryBlock:
        """The profile as a LlamaIndex memory block for ``llama_index.core.memory.Memory``."""
        return ProfileMemoryBlock(
            name="user_profile",
            description="Preferences and facts about the user.",
            manager=self,
            max_tokens=max_tokens or self.settings.profile_token_limit or 150,
            priority=priority,
            accept_short_term_memory=False,
        )

    # ------------------------------------------------------------------ forgetting and pins
    async def aforget(
        self,
        strategy: str = "importance_based",
        memory_types: Sequence[MemoryType | str] | None = None,
        dry_run: bool = False,
        **params: Any,
    ) -> ForgetReport:
        """Forget by ``strategy`` in the given tiers (all by default); ``dry_run`` only reports."""
        return await self.forgetter.arun(
            strategy, list(memory_types) if memory_types else None, dry_run=dry_run, **params
        )

    def forget(
        self,
        strategy: str = "importance_based",
        memory_types: Sequence[MemoryType | str] | None = None,
        dry_run: bool = False,
        **params: Any,
    ) -> ForgetReport:
        """Sync twin of :meth:`aforget`."""
        return self.blocking(self.aforget(strategy, memory_types, dry_run, **params))

    async def apin(self, memory_id: str, pinned: bool = True) -> bool:
        """Pin a memory (in any tier) so that forgetting never removes it; False when absent."""
        return await self._apin(validate_memory_id(memory_id), pinned)

    def pin(self, memory_id: str) -> bool:
        """Sync twin of :meth:`apin`."""
        return self.blocking(self.apin(memory_id))

    async def aunpin(self, memory_id: str) -> bool:
        """Remove a pin; False when absent."""
        return await self._apin(validate_memory_id(memory_id), False)

    def unpin(self, memory_id: str) -> bool:
        """Sync twin of :meth:`aunpin`."""
        return self.blocking(self.aunpin(memory_id))

    async def _apin(self, memory_id: str, pinned: bool) -> bool:
        found = await self.deps.tiers.working.apin(memory_id, pinned)
        record = await self.context.records.update(self.user_id, memory_id, pinned=pinned)
        if record is not None:
            await self.context.drain_outbox()
        return found or record is not None

    async def aupdate_memory(
        self, memory_id: str, content: str | None = None, importance: float | None = None
    ) -> MemoryItem | None:
        """Correct or re-weight a memory in every tier that holds it; the memory as it now reads, None when absent.

        A turn that ``put`` recorded is working and episodic memory under one id: both change, and the
        facts extracted from it are corrected with it, history kept (``SemanticMemory.arestate``); a
        fact given new content ends as history (``SemanticMemory.aupdate``). The stored copy changes
        first, so an error leaves both as they were.
        """
        memory_id = validate_memory_id(memory_id)
        tiers = self.deps.tiers
        records = await self.context.records.get(self.user_id, [memory_id])
        held = [tiers.tier(records[0].item.memory_type)] if records else []
        if await tiers.working.aget(memory_id) is not None:
            held.append(tiers.working)
        changed = [tier for tier in held if await tier.aupdate(memory_id, content=content, importance=importance)]
        return await changed[0].aget(memory_id) if changed else None

    def update_memory(
        self, memory_id: str, content: str | None = None, importance: float | None = None
    ) -> MemoryItem | None:
        """Sync twin of :meth:`aupdate_memory`."""
        return self.blocking(self.aupdate_memory(memory_id, content, importance))

    # ------------------------------------------------------------------ deletion, erasure and portability
    async def aforget_memories(self, ids: Sequence[str]) -> DeletionReport:
        """Delete memories by id from every tier, with everything derived from them; see :mod:`.deletion`."""
        return await adelete_memories(self.context, self.user_id, ids)

    def forget_memories(self, ids: Sequence[str]) -> DeletionReport:
        """Sync twin of :meth:`aforget_memories`."""
        return self.blocking(self.aforget_memories(ids))

    # ------------------------------------------------------------------ browsing (see :mod:`.browse`)
    async def alist_memories(
        self,
        *,
        tier: MemoryType | None = None,
        kind: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        tags: list[str] | None = None,
        include_history: bool = False,
        limit: int = 20,
        offset: int = 0,
    ) -> MemoryPage:
        """A page of this user's stored memories (one tier or all), newest first, filtered."""
        return await browse.alist_memories(
            self.deps,
            tier=tier,
            kind=kind,
            start=start,
            end=end,
            tags=tags,
            include_history=include_history,
            limit=limit,
            offset=offset,
        )

    def list_memories(self, **filters: Any) -> MemoryPage:
        """Sync twin of :meth:`alist_memories`."""
        return self.blocking(self.alist_memories(**filters))

    async def aget_memory(self, memory_id: str) -> MemoryItem | None:
        """One memory of this user by id, from any tier; None when it has none with this id."""
        return await browse.aget_memory(self.deps, memory_id)

    def get_memory(self, memory_id: str) -> MemoryItem | None:
        """Sync twin of :meth:`aget_memory`."""
        return self.blocking(self.aget_memory(memory_id))

    async def arelations(self, item: MemoryItem) -> MemoryRelations:
        """What ``item`` was derived from, what was derived from it and, for a fact, its versions."""
        return await browse.arelations(self.deps, item)

    def relations(self, item: MemoryItem) -> MemoryRelations:
        """Sync twin of :meth:`arelations`."""
        return self.blocking(self.arelations(item))

    async def aaccess_log(self, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        """What ``get()`` showed this user, newest first: ``at`` (epoch seconds), ``session_id``, ``input``,
        ``memory_ids`` (what is still queued is written first)."""
        await self.context.accesses.aflush()
        return await self.store.ashown(self.user_id, limit=limit, offset=offset)

    def access_log(self, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        """Sync twin of :meth:`aaccess_log`."""
        return self.blocking(self.aaccess_log(limit, offset))

    async def aforget_access_log(self) -> int:
        """Delete this user's whole access log (the memories stay); how many rows."""
        await self.context.accesses.adiscard(self.user_id, memory_ids=None)
        return await self.store.aforget_shown(self.user_id)

    def forget_access_log(self) -> int:
        """Sync twin of :meth:`aforget_access_log`."""
        return self.blocking(self.aforget_access_log())

    async def aforget_user(self, user_id: str | None = None, *, compact: bool = True) -> ErasureReport:
        """Remove a user (default: this one) from every store; see :mod:`.erasure`."""
        return await aerase_user(self.context, user_id or self.user_id, compact=compact)

    def forget_user(self, user_id: str | None = None, *, compact: bool = True) -> ErasureReport:
        """Sync twin of :meth:`aforget_user`."""
        return self.blocking(self.aforget_user(user_id, compact=compact))

    async def aexport_user(
        self, user_id: str | None, path: str | os.PathLike[str], *, include_files: bool = True
    ) -> ExportReport:
        """Write a user's whole memory (default: this one) to ``path`` as JSON; see :mod:`.portability`."""
        return await aexport_user(self.context, user_id or self.user_id, path, include_files=include_files)

    def export_user(self, user_id: str | None, path: str | os.PathLike[str], **kwargs: Any) -> ExportReport:
        """Sync twin of :meth:`aexport_user`."""
        return self.blocking(self.aexport_user(user_id, path, **kwargs))

    async def aimport_user(
        self,
        path: str | os.PathLike[str],
        *,
        user_id: str | None = None,
        on_conflict: Literal["replace", "skip", "error"] = "replace",
    ) -> ImportReport:
        """Write an export back into these stores (as ``user_id`` when given)."""
        return await aimport_user(self.context, path, user_id=user_id, on_conflict=on_conflict)

    def import_user(self, path: str | os.PathLike[str], **kwargs: Any) -> ImportReport:
        """Sync twin of :meth:`aimport_user`."""
        return self.blocking(self.aimport_user(path, **kwargs))

    async def aexport_session(
        self,
        session_id: str | None = None,
        path: str | os.PathLike[str] | None = None,
        format: Literal["markdown", "json"] = "markdown",
    ) -> str:
        """A readable transcript of a session (default: the current one); written to ``path`` if given."""
        return await aexport_session(self.deps, session_id or self.session_id, path, format=format)

    def export_session(
        self,
        session_id: str | None = None,
        path: str | os.PathLike[str] | None = None,
        format: Literal["markdown", "json"] = "markdown",
    ) -> str:
        """Sync twin of :meth:`aexport_session`."""
        return self.blocking(self.aexport_session(session_id, path, format))

    async def aevents(self, limit: int | None = None) -> list[dict[str, Any]]:
        """This user's lifecycle audit trail (consolidations, reflections, forgetting, exports), oldest first."""
        return await self.store.aevents(self.user_id, limit)

    def events(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Sync twin of :meth:`aevents`."""
        return self.blocking(self.aevents(limit))
