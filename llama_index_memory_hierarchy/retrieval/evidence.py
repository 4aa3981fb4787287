"""Tier evidence: how much a memory's tier vouches for it (a fact's confidence, a procedure's task similarity)."""

from __future__ import annotations

from llama_index_memory_hierarchy.calibration import SimilarityCalibration, group_of
from llama_index_memory_hierarchy.retrieval.candidate import Candidate
from llama_index_memory_hierarchy.tiers.procedural import INSTRUCTION, procedural_evidence
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType


def tier_evidence(item: MemoryItem, history_factor: float) -> float:
    """How much the tier vouches for a memory: a fact by its confidence (and currency), others fully."""
    if item.memory_type is not MemoryType.SEMANTIC or item.metadata.get("kind") != "fact":
        return 1.0
    try:
        confidence = min(max(float(item.metadata.get("confidence", 1.0)), 0.0), 1.0)
    except (TypeError, ValueError):
        confidence = 1.0
    factor = 0.5 + 0.5 * confidence
    return factor * history_factor if item.metadata.get("invalid_at") else factor


def procedural(
    candidates: dict[str, Candidate], query_group: str, calibration: SimilarityCalibration, history_factor: float
) -> dict[str, Candidate]:
    """The procedural tier's evidence (``tiers.procedural.procedural_evidence``), its hook into the search: a
    procedure stays a candidate only for a similar task, a superseded instruction only with ``history_factor`` > 0
    (``include_history``)."""
    kept: dict[str, Candidate] = {}
    for memory_id, cand in candidates.items():
        item = cand.item
        if item.memory_type is MemoryType.PROCEDURAL:
            task = group_of(str(item.metadata.get("task") or item.content))
            similarity = float(calibration.calibrate(cand.dense, query_group, task, role="query"))
            cand.evidence = procedural_evidence(item, similarity)
            if cand.evidence <= 0.0 and item.metadata.get("kind") == INSTRUCTION:
                cand.evidence = history_factor
            if cand.evidence <= 0.0:
                continue
            cand.sources = frozenset()  # how a task was done: no restatement of the run's turns to collapse into
        kept[memory_id] = cand
    return kept
