"""The one deletion path: every delete of a memory by id ends in :func:`adelete_memories`.

Doors: ``MemoryToolSpec.forget`` (and the MCP server's tools, which call it or the manager),
``MemoryManager.forget_memories``, every tier's ``remove``/``aremove``, ``clear`` and forgetting
strategies, and the CLI's ``lmh forget ID``. Whichever door, a deleted memory is removed

1. from its tier with what the tier owns: the record, its vectors (through the outbox) and
   its keyword-index entry (the FTS triggers / generated column), a turn's words in the keyword
   text of the turns that held it as context too (rewritten before the delete); a fact's graph relation
   (and the fact it had superseded comes back); a perception's satellite vectors and its
   stored file when nothing else shows those bytes;
2. from every live memory of the user in this process (:mod:`.sessions`): working memory (a
   chat turn has the same id in working and episodic memory: removing it from either tier
   removes both), the session history ``get()`` replays, and the cached memory message
   and profile;
3. from what was derived from it: semantic facts and reflection insights that cite only
   deleted memories are deleted (through this same path, so their own dependents follow);
   those that cite others too only lose the citation. A consolidated session summary that
   cites it is regenerated (extractively, from the events it still cites, citing those it then
   quotes) or deleted when it would cite fewer than two; a summary that does not cite it (an
   extractive summary that never quoted it) stays as it is. The running conversation summary
   of its session is dropped and folded again from the remaining turns on the next ``get()``;
4. from consolidation's future: a tombstone (the id only, never text) per deleted memory
   stops consolidation from writing any working copy of it (in another process too) back
   to episodic memory, and its consolidation marks are dropped;
5. from the access log: every row of what ``get()`` showed that names it (the input text with it).

What a single delete does not do: compact files. SQLite may keep deleted text in free pages
and qdrant-edge the id in its write-ahead log until they are rewritten; user erasure
(:mod:`.erasure`) does that for a whole user.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle.consolidation import SUMMARY_KIND, extractive_event_summary
from llama_index_memory_hierarchy.lifecycle.sessions import LiveMemory, live_memories
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, Record
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import memories
from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, validate_identifier, validate_memory_id

logger = logging.getLogger(__name__)

#: Ids per ``LIKE`` query when looking for memories that cite deleted ones.
_CITE_CHUNK = 50


class DeletionReport(BaseModel):
    """What one call of the deletion path removed."""

    user_id: str
    deleted: dict[str, str] = Field(default_factory=dict, description="Requested ids deleted -> their tier.")
    not_found: list[str] = Field(default_factory=list, description="Requested ids this user has in no tier.")
    derived: dict[str, str] = Field(
        default_factory=dict, description="Memories derived only from deleted ones, deleted too -> their tier."
    )
    facts: int = Field(default=0, description="Facts deleted because no remaining memory supports them.")
    summaries_regenerated: list[str] = Field(default_factory=list)
    running_summaries_reset: list[str] = Field(default_factory=list, description="Session ids.")
    live_memories: int = Field(default=0, description="Open memories of the user in this process updated.")

    @property
    def count(self) -> int:
        """Requested memories deleted."""
        return len(self.deleted)


@traced("delete")
async def adelete_memories(
    context: StoreContext,
    user_id: str,
    ids: Sequence[str],
    *,
    memory_type: MemoryType | None = None,
    tier: MemoryTier | None = None,
) -> DeletionReport:
    """Delete this user's memories ``ids`` and everything derived from them (see the module docstring).

    ``memory_type`` restricts the requested ids to one tier (a tier's ``remove``): an id of
    another tier is reported not found. ``WORKING`` means the items a working memory holds,
    with their durable copies. ``tier`` is the tier object to delete through for its type
    (default: the live memory's, else a fresh one over ``context``).
    """
    user_id = validate_identifier(user_id, "user_id")
    if isinstance(ids, str):
        ids = [ids]
    wanted = list(dict.fromkeys(validate_memory_id(i, "ids") for i in ids))
    return await context.runtime.arun(_adelete(context, user_id, wanted, memory_type, tier))


def _tier_for(
    context: StoreContext, user_id: str, kind: MemoryType, live: list[LiveMemory], given: MemoryTier | None
) -> Any:
    if given is not None and given.memory_type is kind:
        return given
    if live:
        return live[0].deps.tiers.tier(kind)
    return TierSet(context, user_id=user_id).tier(kind)


async def _adelete(
    context: StoreContext,
    user_id: str,
    wanted: list[str],
    memory_type: MemoryType | None,
    tier: MemoryTier | None,
) -> DeletionReport:
    report = DeletionReport(user_id=user_id)
    store = LifecycleStore(context)
    live = live_memories(context, user_id)
    report.live_memories = len(live)
    held = {i for m in live for i in m.deps.tiers.working.held(wanted)}
    if memory_type is MemoryType.WORKING:
        wanted = [i for i in wanted if i in held]
    pending, first, gone = wanted, True, set[str]()
    while pending:
        found = {r.item.id: r for r in await context.records.get(user_id, pending) if r.namespace == MEMORY_NAMESPACE}
        by_type: dict[MemoryType, list[str]] = {}
        for memory_id in pending:
            record = found.get(memory_id)
            if record is None:
                continue
            kind = record.item.memory_type
            if first and memory_type not in (None, MemoryType.WORKING, kind):
                continue  # another tier's memory: not this tier's to delete
            by_type.setdefault(kind, []).append(memory_id)
        deleted: dict[str, str] = {}
        for kind, group in by_type.items():
            handler = _tier_for(context, user_id, kind, live, tier)
            removed, facts = await handler.adelete_records(group)
            report.facts += facts
            deleted.update({memory_id: kind.value for memory_id in removed})
        if first:
            for memory_id in pending:
                if memory_id not in deleted and memory_id in held and memory_type in (None, MemoryType.WORKING):
                    deleted[memory_id] = MemoryType.WORKING.value  # a working item with no durable copy
            report.deleted = {i: deleted[i] for i in wanted if i in deleted}
            report.not_found = [i for i in wanted if i not in deleted]
        else:
            report.derived.update(deleted)
        gone.update(deleted)
        if deleted:
            sessions = {r.item.session_id for i, r in found.items() if i in deleted and r.item.session_id}
            sessions |= _forget_live(live, set(deleted))
            await store.atombstone(user_id, list(deleted))
            await store.aunmark(user_id, list(deleted))
            await context.accesses.adiscard(user_id, list(deleted))  # the access log names them: it goes too
            await store.aforget_shown(user_id, list(deleted))
            await _areset_running_summaries(store, user_id, sessions, live, report)
        pending = await _aderived(context, user_id, list(deleted), gone, live, report) if deleted else []
        first = False
    if gone:
        for memory in live:
            memory.invalidate()
        logger.debug("deleted %d memories of one user (%d derived)", len(report.deleted), len(report.derived))
    return report


def _forget_live(live: list[LiveMemory], deleted: set[str]) -> set[str]:
    """Working memory, session history and cached messages of the user's live memories in this process;
    the sessions whose history held a deleted turn."""
    sessions: set[str] = set()
    for memory in live:
        memory.deps.tiers.working.discard(deleted)
        if memory.deps.forget_turns(deleted):
            sessions.add(memory.deps.session_id)
    return sessions


async def _areset_running_summaries(
    store: LifecycleStore, user_id: str, sessions: set[str], live: list[LiveMemory], report: DeletionReport
) -> None:
    """Drop the running summaries of these sessions; the next ``get()`` folds the remaining turns again."""
    for session in sorted(sessions):
        row = await store.aget_summary(user_id, session)
        cached = any(m.compressor.has_summary(session) for m in live)
        if row is None and not cached:
            continue
        await store.adelete_summary(user_id, session)
        for memory in live:
            memory.compressor.forget_cached(session)
        report.running_summaries_reset.append(session)


async def aderived_from(context: StoreContext, user_id: str, memory_id: str) -> list[MemoryItem]:
    """This user's memories that cite ``memory_id`` as a source (the ones a delete of it reaches), oldest first."""
    found = [record.item for record in await _aciting(context, user_id, [memory_id], set())]
    return sorted(found, key=lambda item: (item.timestamp, item.created_at))


async def _aciting(context: StoreContext, user_id: str, ids: Sequence[str], gone: set[str]) -> list[Record]:
    """This user's memories whose ``source_ids`` name one of ``ids`` (and are not deleted themselves)."""
    m = memories.c

    async def work(conn: Any) -> list[str]:
        found: list[str] = []
        for start in range(0, len(ids), _CITE_CHUNK):
            part = ids[start : start + _CITE_CHUNK]
            rows = await conn.execute(
                sa.select(m.id).where(
                    m.user_id == user_id,
                    m.namespace == MEMORY_NAMESPACE,
                    sa.or_(*(m.metadata.contains(f'"{i}"', autoescape=True) for i in part)),
                )
            )
            found.extend(row[0] for row in rows)
        return found

    candidates = [i for i in dict.fromkeys(await context.records.run_transaction(work, op="citing")) if i not in gone]  # type: ignore[attr-defined]
    wanted = set(ids)
    return [
        r
        for r in await context.records.get(user_id, candidates)
        if wanted & set(r.item.metadata.get("source_ids") or [])
    ]


async def _aderived(
    context: StoreContext,
    user_id: str,
    deleted: list[str],
    gone: set[str],
    live: list[LiveMemory],
    report: DeletionReport,
) -> list[str]:
    """Handle the memories derived from ``deleted``; return those to delete next (derived only from deleted ones)."""
    doomed: list[str] = []
    for record in await _aciting(context, user_id, deleted, gone):
        item = record.item
        remaining = [s for s in item.metadata.get("source_ids") or [] if s not in gone]
        if item.metadata.get("kind") == SUMMARY_KIND:
            if len(remaining) < 2 or not await _aregenerate_summary(context, user_id, record, remaining, live):
                doomed.append(item.id)
            else:
                report.summaries_regenerated.append(item.id)
        elif not remaining:
            doomed.append(item.id)
        else:
            await context.records.update(user_id, item.id, metadata={**item.metadata, "source_ids": remaining})
    return doomed


async def _aregenerate_summary(
    context: StoreContext, user_id: str, record: Record, sources: list[str], live: list[LiveMemory]
) -> bool:
    """Rewrite a consolidated session summary from the events it still cites (extractive, no LLM);
    False when that summary would cite fewer than two events."""
    summary = extractive_event_summary([r.item for r in await context.records.get(user_id, sources)])
    if summary is None:
        return False
    label = record.item.content.split(":", 1)[0] if ":" in record.item.content else "Summary of events"
    episodic = _tier_for(context, user_id, MemoryType.EPISODIC, live, None)
    metadata = {"source_ids": [e.id for e in summary.sources], "method": summary.method, "regenerated": True}
    return bool(await episodic.aupdate(record.item.id, content=f"{label}: {summary.text}", metadata=metadata))
