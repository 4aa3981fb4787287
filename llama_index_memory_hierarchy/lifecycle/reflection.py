"""Reflection (Generative Agents): higher-level insights once enough has happened.

The importance of episodic events not yet reflected upon is summed; when the sum reaches
``reflection_threshold`` (importance in [0, 1], so 5.0 is about ten notable events), the
LLM reads the most recent of them (numbered) and writes ``reflection_insights`` insights,
each citing the events it rests on ("... (because of 1, 5, 3)"). Insights are stored in
semantic memory as statements with ``metadata["origin"] == "reflection"`` and their
``source_ids``; the events are marked as reflected upon.

An LLM insight must cite events that exist and must not merely repeat one of them;
others are dropped. Without an LLM a reflection is skipped and the log says so, unless
``offline_reflection`` is on: then clearly-labelled heuristic insights are stored instead
(topics the user came back to across sessions, found by ``EpisodicMemory.afind_patterns``),
with ``metadata["method"] == "offline-heuristic"`` and content starting ``[heuristic]``. A
topic is reported only when it is a noun the user talked about (spaCy's or jieba's
part-of-speech tags, stop words excluded): "went" or "keep" say nothing about the user, so
nothing is said.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import LLMReplyError
from llama_index_memory_hierarchy.extraction import is_noun
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.llm import (
    SOURCES,
    acomplete,
    object_schema,
    parse_json,
    repeats_source,
)
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

logger = logging.getLogger(__name__)

STAGE_REFLECTED = "reflected"
#: The Generative Agents reflection prompt, asking for JSON with citations.
REFLECTION_PROMPT = (
    "Statements about the user of an AI assistant, from recent conversations:\n{statements}\n\n"
    "What {n} high-level insights can you infer from the above statements? Insights are about the user's "
    "goals, values, relationships, habits or situation, and must be supported by the statements.\n"
    'Return JSON only: {{"insights": [{{"insight": "...", "sources": [1, 5, 3]}}]}} where "sources" lists '
    "the numbers of the statements each insight rests on."
)


class ReflectionReport(BaseModel):
    """What one reflection check did."""

    triggered: bool = Field(default=False, description="Whether the importance sum reached the threshold.")
    importance_sum: float = 0.0
    threshold: float = 0.0
    events: int = Field(default=0, description="Events not yet reflected upon.")
    insights: list[str] = Field(default_factory=list, description="Ids of the insights stored.")
    method: str = Field(default="none", description="'llm', 'offline-heuristic', or 'none'.")
    skipped: str | None = Field(default=None, description="Why no insight was written although triggered.")


class Reflector:
    """Checks the reflection trigger and writes insights for one user."""

    def __init__(self, deps: LifecycleDeps) -> None:
        self.deps = deps

    def _eligible(self, item: MemoryItem) -> bool:
        return item.metadata.get("role") in (None, "user") and item.metadata.get("kind") != "summary"

    async def apending(self) -> tuple[list[MemoryItem], float]:
        """Recent events not reflected upon (newest ``reflection_window``) and their summed importance."""
        deps = self.deps
        window = deps.settings.reflection_window
        recent = [
            e for e in await deps.tiers.episodic.aquery(order_by="-timestamp", limit=window * 4) if self._eligible(e)
        ][:window]
        if not recent:
            return [], 0.0
        done = await deps.store.aconsolidated(deps.user_id, STAGE_REFLECTED, [e.id for e in recent])
        pending = sorted((e for e in recent if e.id not in done), key=lambda e: e.timestamp)
        return pending, round(sum(e.importance for e in pending), 4)

    async def arun(self, *, force: bool = False) -> ReflectionReport:
        """Reflect when the threshold is reached (or ``force``); return what happened."""
        deps = self.deps
        settings = deps.settings
        pending, total = await self.apending()
        report = ReflectionReport(importance_sum=total, threshold=settings.reflection_threshold, events=len(pending))
        if not pending or (total < settings.reflection_threshold and not force):
            return report
        report.triggered = True
        llm = deps.background_llm()
        if llm is not None:
            try:
                report.insights = await self._allm(llm, pending)
                report.method = "llm"
            except Exception as exc:  # the model failed: say so, keep the events for the next reflection
                report.skipped = f"LLM reflection failed: {type(exc).__name__}: {exc}"
                logger.warning("reflection for %s skipped: %s", deps.user_id, report.skipped)
                return report
        elif settings.offline_reflection:
            report.insights = await self._aoffline(pending)
            report.method = "offline-heuristic"
        else:
            report.skipped = (
                "no LLM configured (pass llm= or set Settings.llm; or LifecycleSettings(offline_reflection=True) "
                "for heuristic insights)"
            )
            logger.info("reflection for %s skipped: %s", deps.user_id, report.skipped)
            return report
        await deps.store.amark(deps.user_id, STAGE_REFLECTED, [(e.id, e.session_id, report.insights) for e in pending])
        await deps.store.alog(
            deps.user_id,
            "reflect",
            {"events": len(pending), "insights": len(report.insights), "method": report.method},
        )
        if report.insights:
            deps.revision.bump()
        return report

    async def _allm(self, llm: Any, events: list[MemoryItem]) -> list[str]:
        n = self.deps.settings.reflection_insights
        statements = "\n".join(
            f"{number}. {' '.join(e.content.split())[:600]}" for number, e in enumerate(events, start=1)
        )
        schema = object_schema(
            {
                "insights": {
                    "type": "array",
                    "items": object_schema({"insight": {"type": "string"}, "sources": SOURCES}, ["insight", "sources"]),
                }
            },
            ["insights"],
        )
        data = parse_json(await acomplete(llm, REFLECTION_PROMPT.format(statements=statements, n=n), schema=schema))
        raw = data.get("insights") if isinstance(data, dict) else data
        if not isinstance(raw, list):
            raise LLMReplyError("expected a list of insights")
        items: list[MemoryItem] = []
        for entry in raw[:n]:
            text = entry.get("insight") if isinstance(entry, dict) else entry
            if not isinstance(text, str) or not text.strip():
                continue
            numbers = entry.get("sources") if isinstance(entry, dict) else None
            cited = [
                events[k - 1]
                for k in (numbers or [])
                if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(events)
            ]
            text = " ".join(text.split())
            if not cited or any(repeats_source(text, e.content) for e in events):
                logger.debug("dropping an LLM insight without valid sources or repeating an event: %r", text)
                continue
            items.append(self._insight(text, cited, "llm"))
        return await self._astore(items)

    async def _aoffline(self, events: list[MemoryItem]) -> list[str]:
        episodic = self.deps.tiers.episodic
        patterns = await episodic.afind_patterns(top_n=self.deps.settings.reflection_insights, min_sessions=2)
        items = []
        for topic in patterns["recurring_topics"]:
            word = topic["topic"]
            cited = [e for e in events if word in e.content.casefold()][:10]
            if not cited or not await asyncio.to_thread(is_noun, word, [e.content for e in cited]):
                continue
            text = f"[heuristic] The user came back to '{word}' in {topic['sessions']} sessions."
            items.append(self._insight(text, cited, "offline-heuristic"))
        return await self._astore(items)

    def _insight(self, text: str, sources: list[MemoryItem], method: str) -> MemoryItem:
        deps = self.deps
        return MemoryItem.create(
            content=text,
            memory_type=MemoryType.SEMANTIC,
            user_id=deps.user_id,
            session_id=deps.session_id,
            importance=max(e.importance for e in sources),
            metadata={"origin": "reflection", "method": method, "source_ids": sorted({e.id for e in sources})},
        )

    async def _astore(self, items: list[MemoryItem]) -> list[str]:
        if not items:
            return []
        semantic = self.deps.tiers.semantic
        return list(await semantic.aadd_items(items, dedupe=True))
