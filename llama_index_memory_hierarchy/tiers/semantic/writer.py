"""Every change to one user's facts, written to the records, the in-memory state and the graph together.

The records are written first; when that fails the state is marked unloaded (it may be
ahead of the records) and reloads on next use. The graph follows (:mod:`.graph_mirror`).
Callers hold a loaded :class:`~.state.SemanticState`; each method takes its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from llama_index_memory_hierarchy.calibration import acalibration
from llama_index_memory_hierarchy.entity_resolution import EntityResolver, normalize_name, types_compatible
from llama_index_memory_hierarchy.extraction import NAME_PREDICATE, USER_ENTITY
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.tiers.semantic.facts import Fact, FactInput
from llama_index_memory_hierarchy.tiers.semantic.graph_mirror import GraphMirror
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState
from llama_index_memory_hierarchy.tiers.semantic.supersession import apply_facts, reinstate_superseded, repoint_entity
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, utcnow

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)


class FactWriter:
    """Adds and removes one user's facts: supersession, provenance and the graph kept in step."""

    def __init__(
        self,
        *,
        context: StoreContext,
        user_id: str,
        session_id: str | None,
        resolver: EntityResolver,
        mirror: GraphMirror,
        functional_predicates: Collection[str],
    ) -> None:
        self.context = context
        self.user_id = user_id
        self.session_id = session_id
        self.resolver = resolver
        self.mirror = mirror
        self.functional_predicates = functional_predicates

    async def aadd(self, state: SemanticState, inputs: Sequence[FactInput], *, strict: bool) -> list[str | None]:
        """Add facts; with ``strict`` a fact whose subject and object resolve to one entity is an error,
        otherwise (extracted facts) it is skipped and its id is None."""
        async with state.lock:
            registry = state.registry
            assert registry is not None
            mentions: list[tuple[str, str]] = []
            named = set()
            for position, fact in enumerate(inputs):
                mentions += [(fact.subject, fact.subject_type), (fact.object, fact.object_type)]
                if fact.predicate == NAME_PREDICATE and fact.subject == USER_ENTITY:
                    if not self.resolver.name_user(registry, fact.object):
                        await self._amerge_into_user(state, fact.object)
                    if self.resolver.name_user(registry, fact.object):
                        named.add(position)
            embeddings = self.context.embeddings
            resolved = await self.resolver.aresolve(
                registry, mentions, embeddings.aembed_texts, await acalibration(embeddings)
            )
            changes = apply_facts(
                state,
                inputs,
                resolved,
                named=named,
                functional=self.functional_predicates,
                strict=strict,
                now=utcnow(),
            )
            new_ids = {f.id for f in changes.new}
            items = [
                MemoryItem.create(
                    id=f.id,
                    content=changes.texts[f.id],
                    memory_type=MemoryType.SEMANTIC,
                    user_id=self.user_id,
                    session_id=self.session_id,
                    timestamp=f.valid_at,
                    importance=f.importance,
                    metadata=f.metadata,
                )
                for f in changes.new
            ]
            try:
                if items:
                    await self.context.awrite([Record(item=item) for item in items])
                for fact in changes.changed.values():
                    if fact.id not in new_ids:
                        await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
                if changes.changed:
                    await self.context.drain_outbox()
            except BaseException:
                state.loaded = False  # the index may be ahead of the records: reload on next use
                raise
            await self.mirror.amirror(state, [*changes.new, *changes.changed.values()], changes.ended)
            return changes.ids

    async def _amerge_into_user(self, state: SemanticState, name: str) -> None:
        """The user introduced themselves by a name an entity already has: that entity is the user.

        Its facts are re-pointed to the user's entity (records updated, graph rebuilt); an entity
        of another strong type (a place or an organisation of that name) is left alone.
        """
        registry = state.registry
        assert registry is not None
        other = registry.by_alias(normalize_name(name))
        user = self.resolver.user(registry)
        if other is None or other.id == user.id or not types_compatible(other.type, "PERSON"):
            return
        moved = repoint_entity(state, other, user)
        for fact in moved:
            await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
        if moved:
            await self.context.drain_outbox()
        logger.info("semantic memory of %s: %r is the user; %d facts moved to the user", self.user_id, name, len(moved))
        try:
            await self.mirror.arebuild(state)
        except Exception as exc:
            logger.error("semantic memory of %s: graph rebuild failed (%s); retried on next load", self.user_id, exc)
            state.loaded = False

    async def aremove_sources(self, state: SemanticState, source_ids: Sequence[str]) -> int:
        """Drop these sources from the facts they support; facts left with none are deleted; how many."""
        async with state.lock:
            doomed, touched = state.detach_sources(source_ids)
            for fact in {f.id: f for f in touched if f.id not in doomed}.values():
                await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
            if touched:
                await self.context.drain_outbox()
                await self.mirror.amirror(state, [f for f in touched if f.current], [])
        if doomed:
            await self.adelete(state, sorted(set(doomed)))
        return len(set(doomed))

    async def aretract(self, state: SemanticState, source_id: str, kept: Collection[str]) -> int:
        """``source_id`` was corrected and no longer states its current facts but ``kept``: how many ended.

        A fact only it supported ends now (``invalid_at``, ``expired_at``) and stays as history, as a
        superseded fact does; a fact other memories state too only loses it as a source. Deleting the
        memory later deletes that history with it.
        """
        async with state.lock:
            now = utcnow().isoformat()
            changed: list[Fact] = []
            ended: list[Fact] = []
            for fact_id in sorted(state.by_source.get(source_id, ())):
                fact = state.facts[fact_id]
                if not fact.current or fact_id in kept:
                    continue
                others = [s for s in fact.source_ids if s != source_id]
                if others:
                    state.unindex(fact_id)
                    fact.metadata = {**fact.metadata, "source_ids": others}
                    state.index(fact)
                else:
                    state.end(fact, invalid_at=now, expired_at=now)
                    ended.append(fact)
                changed.append(fact)
            await self._asave(state, changed, ended)
            return len(ended)

    async def aend(self, state: SemanticState, fact_id: str, *, superseded_by: str) -> None:
        """A current fact no longer holds from now: ended as history (``invalid_at``), reinstated if
        ``superseded_by`` is deleted (:func:`reinstate_superseded`)."""
        async with state.lock:
            fact = state.facts.get(fact_id)
            if fact is None or not fact.current:
                return
            now = utcnow().isoformat()
            state.end(fact, invalid_at=now, expired_at=now, superseded_by=superseded_by)
            await self._asave(state, [fact], [fact])

    async def _asave(self, state: SemanticState, changed: Sequence[Fact], ended: Sequence[Fact]) -> None:
        """Write the metadata of facts changed in place (``ended`` among them), then mirror them; under the lock."""
        try:
            for fact in changed:
                await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
            if changed:
                await self.context.drain_outbox()
        except BaseException:
            state.loaded = False  # the state may be ahead of the records: reload on next use
            raise
        await self.mirror.amirror(state, [f for f in changed if f.current], ended)

    async def adelete(self, state: SemanticState, fact_ids: Sequence[str]) -> None:
        """Delete fact records; reinstate facts they had superseded; drop orphan entities."""
        async with state.lock:
            await self.context.adelete(self.user_id, list(fact_ids))
            removed = [f for f in (state.unindex(i) for i in fact_ids) if f is not None]
            reinstated = reinstate_superseded(state, removed)
            for fact in reinstated:
                await self.context.records.update(self.user_id, fact.id, metadata=fact.metadata)
            if reinstated:
                await self.context.drain_outbox()
            assert state.registry is not None
            orphans = sorted({e for f in removed for e in (f.subject_id, f.object_id) if not state.by_entity.get(e)})
            for orphan in orphans:
                state.registry.remove(orphan)
                state.by_entity.pop(orphan, None)
            if await self.mirror.aremove(state, removed, orphans):
                await self.mirror.amirror(state, reinstated, [])
