"""Consolidation: what matters moves down the hierarchy, as sleep does for human memory.

Two stages, each idempotent (handled memories are recorded in ``lifecycle_consolidated``,
so running consolidation twice creates nothing twice):

1. **Working → episodic.** Working items that matter (importance at least
   ``promote_min_importance``, said ``promote_min_repetitions`` times, recalled
   ``promote_min_accesses`` times, or pinned) are written to episodic memory with the same
   id. Turns recorded by ``HierarchicalMemory.put`` are already episodic (same id): they are
   only marked, never copied.
2. **Episodic → semantic.** Events not distilled yet (user turns and non-chat events by
   default) are summarised per session and distilled into facts: with an LLM, one prompt per
   batch returns a summary and facts citing the events they come from; offline, the
   extraction module (spaCy/jieba) extracts triplets from each event. An LLM reply is
   validated: the JSON schema, the cited event numbers, facts grounded in the events they
   cite (an uncited fact is linked to the events that mention it, or dropped), a summary that
   is not one of the events repeated. A reply that is unusable (no JSON, or no fact where the
   offline extractor finds some) is replaced by the offline path for that part, and
   ``ConsolidationReport.fallbacks`` says so. Every fact records its
   sources (``source_ids``), its validity start (the event time) and its extractor; the
   session summary is stored as an episodic event of kind ``summary`` citing its events:
   every event of the batch for an LLM summary (which sentence came from where is not known),
   only the events it quotes for an extractive one (:func:`extractive_event_summary`).

Then reflection runs when enough has happened (see :mod:`.reflection`). Consolidation runs
on demand (``consolidate()``), at ``end_session()``, or in the background on the store
runtime (``consolidate(background=True)`` or every ``consolidate_every_turns`` messages),
never blocking an agent turn.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import LLMReplyError, MemoryValidationError
from llama_index_memory_hierarchy.extraction import (
    USER_ENTITY,
    ExtractedFact,
    grounded,
    normalize_predicate,
)
from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle.compression import extractive_lines
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.importance import ImportanceEstimator
from llama_index_memory_hierarchy.lifecycle.llm import (
    SOURCES,
    acomplete,
    object_schema,
    parse_json,
    repeats_source,
)
from llama_index_memory_hierarchy.lifecycle.reflection import ReflectionReport, Reflector
from llama_index_memory_hierarchy.tiers.semantic import FactInput
from llama_index_memory_hierarchy.turns import chat_party_of
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

logger = logging.getLogger(__name__)

STAGE_EPISODIC = "episodic"
STAGE_SEMANTIC = "semantic"
#: Episodic ``metadata["kind"]`` of a consolidated session summary.
SUMMARY_KIND = "summary"
_SUMMARY_TOKENS = 120

#: The distillation prompt (events numbered from 1).
DISTILL_PROMPT = (
    "You consolidate the memory of an AI assistant about its user. Below are events from conversations, "
    "numbered, oldest first.\n\n{events}\n\n"
    "Return JSON only, in this form:\n"
    '{{"summary": "<2-4 sentences: what happened and what matters for the future>", '
    '"facts": [{{"subject": "...", "predicate": "snake_case_relation", "object": "...", "sources": [1, 2]}}]}}\n'
    "Facts are durable (still true after the conversation): who the user is, what they like or dislike, "
    'people, places, plans and commitments. Use "User" for the user. Cite in "sources" the numbers of the '
    "events each fact comes from. At most {max_facts} facts; none when nothing durable was said."
)


_FACT_SCHEMA = object_schema(
    {k: {"type": "string"} for k in ("subject", "predicate", "object")} | {"sources": SOURCES},
    ["subject", "predicate", "object", "sources"],
)
DISTILL_SCHEMA = object_schema(
    {"summary": {"type": "string"}, "facts": {"type": "array", "items": _FACT_SCHEMA}}, ["summary", "facts"]
)
#: Words of the prompt's own template: a reply that echoes them is not a summary.
_TEMPLATE_ECHO = ("2-4 sentences", "what happened and what matters")


@dataclass(frozen=True)
class EventSummary:
    """A summary of events to store: its text, the events it cites, and who wrote it."""

    text: str
    sources: Sequence[MemoryItem]
    method: str  # "llm" or "extractive"

    @property
    def party(self) -> str | None:
        """The chat party every source shares (``"user"`` for a summary of the user's own turns), else None."""
        parties = {chat_party_of(e) for e in self.sources}
        return parties.pop() if len(parties) == 1 else None


def extractive_event_summary(
    events: Sequence[MemoryItem], estimator: ImportanceEstimator | None = None
) -> EventSummary | None:
    """The extractive summary of ``events``, citing only the events whose sentences it quotes.

    None when it quotes fewer than two: a summary of one event only repeats it (and the
    deletion path deletes a summary left with one source). The deletion path regenerates
    summaries with it too, so a regenerated summary cites as honestly as a new one.
    """
    turns = [(str(e.metadata.get("role") or "event"), e.content) for e in events]
    lines = extractive_lines(None, turns, _SUMMARY_TOKENS, estimator)
    quoted = sorted({source for source, _ in lines if source is not None})
    if len(quoted) < 2:
        return None
    return EventSummary("\n".join(line for _, line in lines), [events[i] for i in quoted], "extractive")


class ConsolidationReport(BaseModel):
    """What one consolidation did."""

    promoted: list[str] = Field(default_factory=list, description="Working items written to episodic memory.")
    already_episodic: int = Field(default=0, description="Working items that were episodic already (put turns).")
    distilled: list[str] = Field(default_factory=list, description="Episodic events distilled in this run.")
    facts: list[str] = Field(default_factory=list, description="Fact ids created or confirmed by this run.")
    summaries: list[str] = Field(default_factory=list, description="Session summary events written.")
    method: str = Field(default="none", description="'llm', 'offline' or 'none' (nothing to distill).")
    fallbacks: list[str] = Field(
        default_factory=list, description="Where an unusable LLM reply was replaced by the offline path, and why."
    )
    reflection: ReflectionReport | None = None

    @property
    def changed(self) -> bool:
        """Whether anything was written."""
        return bool(self.promoted or self.facts or self.summaries or (self.reflection and self.reflection.insights))


class Consolidator:
    """Runs the consolidation stages for one user (one run at a time per user), then ``reflector``."""

    def __init__(self, deps: LifecycleDeps, reflector: Reflector, estimator: ImportanceEstimator | None = None) -> None:
        self.deps = deps
        self.reflector = reflector
        self.estimator = estimator or ImportanceEstimator()
        self._lock = deps.context.lock(Consolidator, deps.user_id)

    # ------------------------------------------------------------------ entry point
    @traced("consolidate")
    async def arun(
        self, *, session_id: str | None = None, promote: bool = True, distill: bool = True, reflect: bool = True
    ) -> ConsolidationReport:
        """Run the stages (``session_id``: only that session's working items and events)."""
        report = ConsolidationReport()
        async with self._lock:
            if promote:
                await self._apromote(report, session_id)
            if distill:
                await self._adistill(report, session_id)
            if reflect:
                report.reflection = await self.reflector.arun()
            await self.deps.store.alog(
                self.deps.user_id,
                "consolidate",
                {
                    "session_id": session_id,
                    "promoted": len(report.promoted),
                    "distilled": len(report.distilled),
                    "facts": len(report.facts),
                    "summaries": len(report.summaries),
                    "method": report.method,
                },
            )
        if report.changed:
            self.deps.revision.bump()
        return report

    # ------------------------------------------------------------------ working -> episodic
    def _matters(self, item: MemoryItem, repetitions: int) -> bool:
        settings = self.deps.settings
        return (
            item.pinned
            or item.importance >= settings.promote_min_importance
            or repetitions >= settings.promote_min_repetitions
            or item.access_count >= settings.promote_min_accesses
        )

    async def apromote(self, items: Sequence[MemoryItem], report: ConsolidationReport | None = None) -> list[str]:
        """Write the working ``items`` that matter to episodic memory (once); return the ids written."""
        report = report or ConsolidationReport()
        deps = self.deps
        user = deps.user_id
        counts = Counter(_norm(item.content) for item in items)
        chosen: dict[str, MemoryItem] = {}
        groups: dict[str, list[MemoryItem]] = {}
        for item in sorted(items, key=lambda i: i.timestamp):
            key = _norm(item.content)
            if not self._matters(item, counts[key]):
                continue
            groups.setdefault(key, []).append(item)
            chosen.setdefault(key, item)
        if not chosen:
            return []
        every_id = [i.id for members in groups.values() for i in members]
        deleted = await deps.store.atombstoned(user, every_id)  # deleted memories are never written back
        groups = {k: [m for m in v if m.id not in deleted] for k, v in groups.items()}
        groups = {k: v for k, v in groups.items() if v}
        chosen = {k: v[0] for k, v in groups.items()}
        done = await deps.store.aconsolidated(user, STAGE_EPISODIC, every_id)
        durable = {r.item.id for r in await deps.context.records.get(user, every_id)}
        marks: list[tuple[str, str | None, list[str]]] = []
        fresh: list[tuple[str, MemoryItem]] = []
        for key, members in groups.items():
            pending = [m for m in members if m.id not in done]
            if not pending:
                continue
            if any(m.id in durable for m in members):
                report.already_episodic += len([m for m in pending if m.id in durable])
                anchor = next(m.id for m in members if m.id in durable)
                marks += [(m.id, m.session_id, [anchor]) for m in pending]
                continue
            first = chosen[key]
            meta = {**first.metadata, "consolidated_from": "working"}
            if counts[key] > 1:
                meta["repetitions"] = counts[key]
            promoted = first.model_copy(
                update={
                    "memory_type": MemoryType.EPISODIC,
                    "importance": max(m.importance for m in members),
                    "access_count": max(m.access_count for m in members),
                    "metadata": meta,
                    "score": None,
                }
            )
            fresh.append((key, promoted))
        if fresh:
            written = await deps.tiers.episodic.aadd_items([p for _, p in fresh], dedupe=True)
            for (key, _), memory_id in zip(fresh, written, strict=True):
                report.promoted.append(memory_id)
                marks += [(m.id, m.session_id, [memory_id]) for m in groups[key] if m.id not in done]
        await deps.store.amark(user, STAGE_EPISODIC, marks)
        return list(report.promoted)

    async def _apromote(self, report: ConsolidationReport, session_id: str | None) -> None:
        working = self.deps.tiers.working
        items = working.get_recent(10**9)  # every live item, newest first
        if session_id is not None:
            items = [i for i in items if i.session_id == session_id]
        await self.apromote(items, report)

    async def aon_evict(self, items: list[MemoryItem]) -> None:
        """Working memory's eviction hook: promote evicted items that matter and are not durable yet."""
        candidates = [i for i in items if "role" not in i.metadata]  # put() turns are episodic already
        if candidates:
            await self.apromote(candidates)

    # ------------------------------------------------------------------ episodic -> semantic
    def _distillable(self, item: MemoryItem) -> bool:
        settings = self.deps.settings
        return (
            item.metadata.get("kind") != SUMMARY_KIND
            and item.metadata.get("role") in settings.distill_roles
            and item.importance >= settings.distill_min_importance
        )

    async def _adistill(self, report: ConsolidationReport, session_id: str | None) -> None:
        deps = self.deps
        filters: dict[str, Any] = {} if session_id is None else {"session_id": session_id}
        events = [e for e in await deps.tiers.episodic.aquery(**filters) if self._distillable(e)]
        if not events:
            return
        done = await deps.store.aconsolidated(deps.user_id, STAGE_SEMANTIC, [e.id for e in events])
        events = [e for e in events if e.id not in done]
        if not events:
            return
        llm = deps.background_llm()
        by_session: dict[str | None, list[MemoryItem]] = {}
        for event in events:
            by_session.setdefault(event.session_id, []).append(event)
        report.method = "llm" if llm is not None else "offline"
        for session, group in by_session.items():
            size = deps.settings.distill_batch_size
            for start in range(0, len(group), size):
                batch = group[start : start + size]
                results: dict[str, list[str]]
                summary: EventSummary | None
                if llm is not None:
                    try:
                        results, summary = await self._adistill_llm(llm, batch, report)
                    except Exception as exc:  # one bad reply must not stop consolidation: this batch goes offline
                        logger.warning(
                            "LLM consolidation failed (%s: %s); distilling this batch offline", type(exc).__name__, exc
                        )
                        report.fallbacks.append(
                            f"{len(batch)} events: unusable LLM reply ({type(exc).__name__}: {exc}); distilled offline"
                        )
                        results, summary = await self._adistill_offline(batch)
                else:
                    results, summary = await self._adistill_offline(batch)
                summary_id = await self._astore_summary(session, summary)
                if summary_id:
                    report.summaries.append(summary_id)
                for fact_ids in results.values():
                    report.facts.extend(f for f in fact_ids if f not in report.facts)
                report.distilled.extend(e.id for e in batch)
                summarised = {e.id for e in summary.sources} if summary_id and summary else set()
                marks = [
                    (e.id, e.session_id, [*results.get(e.id, []), *([summary_id] if e.id in summarised else [])])
                    for e in batch
                ]
                await deps.store.amark(deps.user_id, STAGE_SEMANTIC, marks)

    async def _adistill_offline(self, batch: Sequence[MemoryItem]) -> tuple[dict[str, list[str]], EventSummary | None]:
        results = await self._aadd_facts(await self._aoffline_facts(batch))
        return results, extractive_event_summary(batch, self.estimator)

    async def _aoffline_facts(self, batch: Sequence[MemoryItem]) -> list[tuple[str, Any]]:
        """The offline extractor's facts of each event, as fact inputs citing it."""
        extractor = self.deps.context.shared.offline_extractor()
        extractions = await extractor.aextract_many([e.content for e in batch])
        inputs: list[tuple[str, FactInput]] = []
        for event, extraction in zip(batch, extractions, strict=True):
            speaker = _other_speaker(event)
            for fact in extraction.facts:
                if speaker is not None:  # "I" of a turn someone else said is that someone, not the user
                    fact = fact.model_copy(
                        update={k: speaker for k in ("subject", "object") if getattr(fact, k) == USER_ENTITY}
                    )
                inputs.append(
                    (
                        event.id,
                        FactInput.extracted(
                            fact,
                            source_ids=[event.id],
                            valid_at=event.timestamp,
                            importance=event.importance,
                            extractor=f"consolidation:{fact.extractor}",
                        ),
                    )
                )
        return inputs

    async def _adistill_llm(
        self, llm: Any, batch: Sequence[MemoryItem], report: ConsolidationReport
    ) -> tuple[dict[str, list[str]], EventSummary | None]:
        lines = []
        for number, event in enumerate(batch, start=1):
            who = _other_speaker(event) or event.metadata.get("role") or "event"  # whose "I" it is
            lines.append(f"[{number}] {event.timestamp:%Y-%m-%d %H:%M} {who}: {' '.join(event.content.split())[:1500]}")
        prompt = DISTILL_PROMPT.format(events="\n".join(lines), max_facts=max(5, len(batch)))
        data = parse_json(await acomplete(llm, prompt, schema=DISTILL_SCHEMA))
        if not isinstance(data, dict):
            raise LLMReplyError("expected a JSON object with 'summary' and 'facts'")
        raw_facts = data.get("facts") or []
        if not isinstance(raw_facts, list):
            raise LLMReplyError("'facts' is not a list")
        inputs: list[tuple[str, FactInput]] = []
        for raw in raw_facts:
            if not isinstance(raw, dict) or not all(
                isinstance(raw.get(k), str) and raw[k].strip() for k in ("subject", "predicate", "object")
            ):
                continue
            claim = ExtractedFact(subject=raw["subject"], predicate=raw["predicate"], object=raw["object"])
            cited = [
                batch[n - 1]
                for n in raw.get("sources") or []
                if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(batch)
            ]
            # a fact stands on the events it cites; uncited, on the events that mention it; else it is dropped
            sources = [e for e in (cited or batch) if grounded(claim, e.content)]
            if not sources:
                logger.debug("dropping an LLM fact no event supports: %s", raw)
                continue
            inputs.append(
                (
                    sources[0].id,
                    FactInput(
                        subject=raw["subject"],
                        predicate=normalize_predicate(raw["predicate"]),
                        object=raw["object"],
                        valid_at=max(s.timestamp for s in sources),
                        source_ids=sorted({s.id for s in sources}),
                        confidence=0.9,
                        extractor="consolidation:llm",
                        importance=max(s.importance for s in sources),
                    ),
                )
            )
        if not inputs:  # nothing usable: if the events clearly state facts, the offline extractor has them
            offline = await self._aoffline_facts(batch)
            if offline:
                report.fallbacks.append(
                    f"{len(batch)} events: the LLM reply had no usable fact where the offline extractor found "
                    f"{len(offline)}; used those"
                )
                logger.warning("LLM consolidation gave no usable fact; using %d offline facts", len(offline))
                inputs = offline
        results = await self._aadd_facts(inputs)
        summary = data.get("summary")
        if (
            not isinstance(summary, str)
            or not summary.strip()
            or any(echo in summary for echo in _TEMPLATE_ECHO)
            or any(repeats_source(summary, e.content) for e in batch)
        ):
            summary = None
        if summary is None:
            fallback = extractive_event_summary(batch, self.estimator)
            if fallback:
                report.fallbacks.append(f"{len(batch)} events: no usable LLM summary; an extractive one is kept")
            return results, fallback
        return results, EventSummary(" ".join(summary.split()), batch, "llm")

    async def _aadd_facts(self, inputs: Sequence[tuple[str, Any]]) -> dict[str, list[str]]:
        """Add facts in one batch (one by one when one of them is invalid); ``{event id: fact ids}``."""
        results: dict[str, list[str]] = {}
        if not inputs:
            return results
        semantic = self.deps.tiers.semantic
        facts = [fact for _, fact in inputs]
        try:
            ids: list[str | None] = list(await semantic.aadd_facts(facts))
        except MemoryValidationError:
            ids = []
            for fact in facts:
                try:
                    ids.append((await semantic.aadd_facts([fact]))[0])
                except MemoryValidationError as exc:
                    logger.debug("skipping consolidated fact %s: %s", fact, exc)
                    ids.append(None)
        for (event_id, fact), fact_id in zip(inputs, ids, strict=True):
            if fact_id is None:
                continue
            for source in fact.source_ids or [event_id]:
                bucket = results.setdefault(source, [])
                if fact_id not in bucket:
                    bucket.append(fact_id)
        return results

    async def _astore_summary(self, session_id: str | None, summary: EventSummary | None) -> str | None:
        """Store ``summary`` as an episodic event citing its sources (none of one source: it would repeat it)."""
        if summary is None or len(summary.sources) < 2:
            return None
        deps = self.deps
        label = f"session {session_id}" if session_id else "events"
        sources = summary.sources
        item = MemoryItem.create(
            content=f"Summary of {label}: {summary.text}",
            memory_type=MemoryType.EPISODIC,
            user_id=deps.user_id,
            session_id=session_id,
            timestamp=max(e.timestamp for e in sources),
            importance=max(e.importance for e in sources),
            metadata={"kind": SUMMARY_KIND, "source_ids": [e.id for e in sources], "method": summary.method}
            | ({"party": summary.party} if summary.party else {}),
        )
        [memory_id] = await deps.tiers.episodic.aadd_items([item], dedupe=True)
        return memory_id


def _other_speaker(event: MemoryItem) -> str | None:
    """The named speaker of an event that is not the user's own message (``role`` other than "user"), or None.

    The offline extractor reads a first person as :data:`USER_ENTITY`, the person the memory belongs
    to; that holds for the user's messages and for notes without a speaker, not for a turn another
    person said ("I got promoted", said by John in a conversation stored with speakers).
    """
    speaker = event.metadata.get("speaker")
    if event.metadata.get("role") == "user" or not isinstance(speaker, str) or not speaker.strip():
        return None
    return speaker.strip()


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())
