"""Forgetting across tiers, with a dry run that reports what would go; pinned memories stay.

Strategies (parameters in brackets, defaults from :class:`LifecycleSettings`):

* ``importance_based``: effective importance (reinforced by access) below ``threshold``;
* ``time_based``: event older than ``older_than`` seconds, or before ``before`` (a datetime);
* ``capacity_based``: keep the ``keep`` strongest memories of each tier (effective importance,
  then recency; pinned ones count towards ``keep`` and always stay);
* ``decay``: effective importance times recency (half-life ``half_life_hours``, counted from
  the last access when there is one) below ``threshold`` (the Ebbinghaus-style forgetting curve).

Forgetting removes through each tier's own removal, so a forgotten perception takes its
vectors and stored file with it, and a forgotten fact its graph edge. Facts distilled from a
forgotten episode stay: consolidated knowledge outlives the episode it came from.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle.deletion import adelete_memories
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.importance import effective_importance
from llama_index_memory_hierarchy.ranking.fusion import recency
from llama_index_memory_hierarchy.tiers.base import FORGET_STRATEGIES, MemoryTier
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, as_utc, utcnow

logger = logging.getLogger(__name__)

_PARAMS = {
    "importance_based": {"threshold"},
    "time_based": {"older_than", "before"},
    "capacity_based": {"keep"},
    "decay": {"threshold", "half_life_hours"},
}
_PREVIEW = 120


class ForgottenItem(BaseModel):
    """A memory that was (or, in a dry run, would be) forgotten, and why."""

    id: str
    memory_type: MemoryType
    content: str = Field(description="The first characters of the content.")
    importance: float
    effective_importance: float
    timestamp: datetime
    reason: str


class TierForgetReport(BaseModel):
    """Forgetting in one tier."""

    memory_type: MemoryType
    considered: int = 0
    pinned_kept: int = 0
    items: list[ForgottenItem] = Field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.items)


class ForgetReport(BaseModel):
    """Forgetting across tiers: what went (or would go) per tier."""

    strategy: str
    dry_run: bool
    params: dict[str, Any] = Field(default_factory=dict)
    tiers: dict[str, TierForgetReport] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(t.count for t in self.tiers.values())

    def ids(self) -> list[str]:
        """Every id forgotten (or that would be), tier by tier."""
        return [i.id for t in self.tiers.values() for i in t.items]


class Forgetter:
    """Selects and removes memories of one user by strategy."""

    def __init__(self, deps: LifecycleDeps) -> None:
        self.deps = deps

    def _effective(self, item: MemoryItem) -> float:
        s = self.deps.settings
        return effective_importance(item, strength=s.access_reinforcement, saturation=s.access_saturation)

    def check(self, strategy: str, params: dict[str, Any]) -> dict[str, Any]:
        """Validate a strategy and its parameters; return them with defaults filled in."""
        if strategy not in FORGET_STRATEGIES:
            raise MemoryValidationError(
                "strategy", f"unknown {strategy!r}; choose one of {', '.join(FORGET_STRATEGIES)}"
            )
        unknown = sorted(set(params) - _PARAMS[strategy])
        if unknown:
            allowed = ", ".join(sorted(_PARAMS[strategy]))
            raise MemoryValidationError(unknown[0], f"not a parameter of {strategy!r}; allowed: {allowed}")
        s = self.deps.settings
        out: dict[str, Any] = {}
        if strategy == "importance_based":
            out["threshold"] = _number(params.get("threshold", s.forget_threshold), "threshold", 0.0, 1.0)
        elif strategy == "time_based":
            if params.get("before") is not None:
                out["before"] = as_utc(params["before"], "before")
            else:
                out["older_than"] = _number(params.get("older_than", s.forget_older_than_seconds), "older_than", 0.0)
        elif strategy == "capacity_based":
            keep = params.get("keep", s.forget_keep)
            if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
                raise MemoryValidationError("keep", f"must be an integer >= 0, got {keep!r}")
            out["keep"] = keep
        else:
            out["threshold"] = _number(params.get("threshold", s.forget_decay_threshold), "threshold", 0.0, 1.0)
            half_life = params.get("half_life_hours", s.forget_half_life_hours)
            if half_life is None:
                half_life = self.deps.config.recency_half_life_hours
            out["half_life_hours"] = _number(half_life, "half_life_hours", 1e-9)
        return out

    def select(self, items: list[MemoryItem], strategy: str, params: dict[str, Any]) -> list[tuple[MemoryItem, str]]:
        """The unpinned ``items`` the strategy forgets, each with the reason."""
        now = utcnow()
        free = [i for i in items if not i.pinned]
        if strategy == "importance_based":
            threshold = params["threshold"]
            return [
                (i, f"importance {self._effective(i):.2f} < {threshold:g}")
                for i in free
                if self._effective(i) < threshold
            ]
        if strategy == "time_based":
            if "before" in params:
                cutoff = params["before"]
                return [(i, f"happened before {cutoff.isoformat()}") for i in free if i.timestamp < cutoff]
            age = params["older_than"]
            return [(i, f"older than {age:g} s") for i in free if (now - i.timestamp).total_seconds() > age]
        if strategy == "capacity_based":
            room = max(params["keep"] - (len(items) - len(free)), 0)
            ranked = sorted(free, key=lambda i: (self._effective(i), i.timestamp), reverse=True)
            return [(i, f"beyond the {params['keep']} strongest") for i in ranked[room:]]
        threshold, half_life = params["threshold"], params["half_life_hours"]
        doomed = []
        for item in free:
            moment = max(item.timestamp, item.last_accessed) if item.last_accessed else item.timestamp
            strength = self._effective(item) * recency(moment, now, half_life)
            if strength < threshold:
                doomed.append((item, f"strength {strength:.3f} < {threshold:g}"))
        return doomed

    @traced("forget")
    async def arun(
        self,
        strategy: str = "importance_based",
        memory_types: list[MemoryType | str] | None = None,
        *,
        dry_run: bool = False,
        **params: Any,
    ) -> ForgetReport:
        """Forget (or, with ``dry_run``, only report) per tier; pinned memories always stay."""
        deps = self.deps
        checked = self.check(strategy, params)
        types = _types(memory_types)
        report = ForgetReport(strategy=strategy, dry_run=dry_run, params={k: _jsonable(v) for k, v in checked.items()})
        for memory_type in types:
            tier: Any = deps.tiers.tier(memory_type)
            if memory_type is MemoryType.WORKING:
                items = tier.get_recent(10**9)
            else:
                items = await tier.aquery()
            tier_params = dict(checked)
            if strategy == "capacity_based" and "keep" not in params and memory_type is MemoryType.WORKING:
                tier_params["keep"] = deps.config.working_capacity
            doomed = self.select(items, strategy, tier_params)
            tier_report = TierForgetReport(
                memory_type=memory_type, considered=len(items), pinned_kept=sum(1 for i in items if i.pinned)
            )
            tier_report.items = [
                ForgottenItem(
                    id=i.id,
                    memory_type=memory_type,
                    content=i.content[:_PREVIEW],
                    importance=i.importance,
                    effective_importance=round(self._effective(i), 4),
                    timestamp=i.timestamp,
                    reason=reason,
                )
                for i, reason in doomed
            ]
            if not dry_run and doomed:
                await self._aremove(memory_type, tier, [i.id for i, _ in doomed])
            report.tiers[memory_type.value] = tier_report
        await deps.store.alog(
            deps.user_id,
            "forget",
            {"strategy": strategy, "dry_run": dry_run, "counts": {k: v.count for k, v in report.tiers.items()}},
        )
        if not dry_run and report.total:
            deps.revision.bump()
        return report

    async def _aremove(self, memory_type: MemoryType, tier: MemoryTier, ids: list[str]) -> None:
        if memory_type is MemoryType.WORKING:
            self.deps.tiers.working.discard(ids)  # out of short-term memory; a put turn's episodic copy stays
            return
        await adelete_memories(self.deps.context, self.deps.user_id, ids, memory_type=memory_type, tier=tier)


def _types(memory_types: list[MemoryType | str] | None) -> list[MemoryType]:
    if memory_types is None:
        return list(MemoryType)
    if isinstance(memory_types, (str, MemoryType)):
        memory_types = [memory_types]
    out = []
    for value in memory_types:
        try:
            out.append(MemoryType(value))
        except ValueError:
            raise MemoryValidationError(
                "memory_types", f"unknown tier {value!r}; choose from {', '.join(t.value for t in MemoryType)}"
            ) from None
    return list(dict.fromkeys(out))


def _number(value: Any, field: str, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MemoryValidationError(field, f"must be a number, got {type(value).__name__}")
    value = float(value)
    if value != value or value < low or (high is not None and value > high):
        bound = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise MemoryValidationError(field, f"must be {bound}, got {value!r}")
    return value


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value
