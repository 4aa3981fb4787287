"""Adding one memory: route it to a tier, estimate its importance, and store it there.

The service behind ``MemoryManager.aadd_memory``, ``aclassify`` and ``aestimate_importance``; like the
other lifecycle services it sees only the :class:`~.deps.LifecycleDeps` bundle (and the router and
estimator the manager shares with consolidation and compression).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.importance import ImportanceEstimator, aestimate_importance
from llama_index_memory_hierarchy.lifecycle.routing import HeuristicRouter, RoutingDecision, aroute, is_media
from llama_index_memory_hierarchy.types import MemoryType, validate_content, validate_importance

logger = logging.getLogger(__name__)


class MemoryAdder:
    """Routes, rates and stores new memories of one user."""

    def __init__(self, deps: LifecycleDeps, router: HeuristicRouter, estimator: ImportanceEstimator) -> None:
        self.deps = deps
        self.router = router
        self.estimator = estimator

    async def aclassify(self, content: Any) -> RoutingDecision:
        """The tier ``content`` belongs in: the LLM's choice when configured and ``llm_routing``, else heuristics."""
        llm = self.deps.llm() if self.deps.settings.llm_routing else None
        return await aroute(content, llm=llm, router=self.router)

    async def aestimate(self, text: str) -> tuple[float, str]:
        """Importance of ``text`` and who rated it (``"llm"`` or the offline estimate)."""
        llm = self.deps.llm() if self.deps.settings.llm_importance else None
        return await aestimate_importance(text, llm=llm, estimator=self.estimator)

    async def aadd(
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
        """Store ``content`` in the named tier, else the routed one; its id (see ``MemoryManager.aadd_memory``)."""
        media = is_media(content)
        if not media:
            content = validate_content(content, "content")
        if importance is not None:
            importance = validate_importance(importance)
        if memory_type is not None:
            try:
                decision = RoutingDecision(memory_type=MemoryType(memory_type), method="caller")
            except ValueError:
                raise MemoryValidationError(
                    "memory_type", f"unknown {memory_type!r}; choose from {', '.join(t.value for t in MemoryType)}"
                ) from None
        else:
            decision = await self.aclassify(content)
        kind = decision.memory_type
        if media and kind is not MemoryType.PERCEPTUAL:
            raise MemoryValidationError("content", f"a file or raw media cannot go to {kind.value} memory")
        text = caption if media else content
        importance_by = "caller"
        if importance is None and text:
            importance, importance_by = await self.aestimate(text)
        meta = dict(metadata or {})
        meta["lifecycle"] = {"routed_by": decision.method, "importance_by": importance_by if text else "default"}
        common: dict[str, Any] = {
            "timestamp": timestamp,
            "importance": importance,
            "metadata": meta,
            "session_id": session_id,
        }
        tier: Any = self.deps.tiers.tier(kind)
        if kind is MemoryType.PERCEPTUAL and media:
            memory_id = await tier.aadd_perception(content, modality, caption=caption, **common)
        elif kind is MemoryType.PERCEPTUAL and modality:
            memory_id = await tier.aadd(
                content, **{**common, "metadata": {**meta, "modality": modality}}, dedupe=dedupe
            )
        else:
            memory_id = await tier.aadd(content, **common, dedupe=dedupe)
        if pinned:
            await tier.apin(memory_id)
        self.deps.revision.bump()
        logger.debug("memory %s -> %s (%s)", memory_id, kind.value, decision.method)
        return memory_id


__all__ = ["MemoryAdder"]
