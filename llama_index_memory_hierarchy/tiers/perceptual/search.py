"""Searching perceptions by every signal: caption text, perceptual hash, and each encoder's space.

Each signal yields rankings of perceptions; they are fused by reciprocal rank, keeping each
signal's raw score (``metadata["match_signals"]``) and the signal that ranked a perception
best (``metadata["match_signal"]``: ``caption_text``, ``phash``, ``clip``, ``audio``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.perception.encoders import (
    SIGNAL_CAPTION,
    SIGNAL_PHASH,
    PerceptionEncoder,
    PHashEncoder,
)
from llama_index_memory_hierarchy.perception.files import FileStore
from llama_index_memory_hierarchy.perception.media import Modality, inspect_media, similarity_to_hamming
from llama_index_memory_hierarchy.ranking.fusion import rrf_fuse
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE
from llama_index_memory_hierarchy.tiers.perceptual.intake import astage
from llama_index_memory_hierarchy.tiers.perceptual.records import VECTOR_NAMESPACE
from llama_index_memory_hierarchy.tiers.perceptual.settings import PerceptionSettings
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType, matches

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)

#: A ranking: (signal, [(perception id, raw score)]) best first.
Ranking = tuple[str, list[tuple[str, float]]]


@dataclass
class Matches:
    """Fused relevance of perceptions, the raw score of each signal, and the best-ranked signal."""

    relevance: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    best: dict[str, str] = field(default_factory=dict)


class PerceptionSearch:
    """One user's perceptions searched by text, by media (bytes, path, image) or by a raw vector."""

    memory_type = MemoryType.PERCEPTUAL

    def __init__(
        self,
        *,
        user_id: str,
        context: StoreContext,
        files: FileStore,
        settings: PerceptionSettings,
        phash_encoder: PHashEncoder,
        encoders: Sequence[PerceptionEncoder],
    ) -> None:
        self.user_id = user_id
        self.context = context
        self.config = context.config
        self.files = files
        self.settings = settings
        self.phash_encoder = phash_encoder
        self.encoders = encoders

    def all_encoders(self) -> list[PerceptionEncoder]:
        """The phash encoder and the configured ones."""
        return [self.phash_encoder, *self.encoders]

    def _candidates(self, limit: int, target: Modality | None) -> int:
        base = max(limit * self.config.candidate_multiplier, 20)
        return base * 4 if target is not None else base

    async def asearch_text(
        self, query: str, target: Modality | None, flt: MemoryFilter, limit: int, wanted: set[str] | None
    ) -> Matches:
        """Captions (dense and keyword) and every encoder that embeds text, fused."""
        candidates = self._candidates(limit, target)
        tasks = []
        if wanted is None or SIGNAL_CAPTION in wanted:
            tasks.append(self._acaption_rankings(query, flt, candidates))
        for encoder in self.encoders:
            if encoder.supports_text and (wanted is None or encoder.signal in wanted):
                tasks.append(self._aencoder_text_ranking(encoder, query, flt, candidates))
        rankings = [r for group in await asyncio.gather(*tasks) for r in group]
        return self.fuse(rankings)

    async def _acaption_rankings(self, query: str, flt: MemoryFilter, candidates: int) -> list[Ranking]:
        vector = await self.context.embeddings.aembed_query(query)
        dense, keyword = await asyncio.gather(
            self.context.adense_search(
                self.user_id, vector, memory_type=self.memory_type, filters=flt, limit=candidates
            ),
            self.context.records.keyword_search(
                self.user_id, query, memory_type=self.memory_type, filters=flt, limit=candidates
            ),
        )
        return [(SIGNAL_CAPTION, dense), (SIGNAL_CAPTION, keyword)]

    async def _aencoder_text_ranking(
        self, encoder: PerceptionEncoder, query: str, flt: MemoryFilter, candidates: int
    ) -> list[Ranking]:
        vector = await encoder.aembed_text(query)
        return [(encoder.signal, await self._asatellite_search(encoder.space, vector, flt, candidates))]

    async def aencoder_text_hits(
        self, encoder: PerceptionEncoder, query: str, flt: MemoryFilter, limit: int
    ) -> list[tuple[str, float]]:
        """Perceptions nearest to ``query`` in the text side of ``encoder``'s space: ``(id, cosine)``."""
        return (await self._aencoder_text_ranking(encoder, query, flt, limit))[0][1]

    async def _asatellite_search(
        self, space: str, vector: np.ndarray, flt: MemoryFilter, candidates: int
    ) -> list[tuple[str, float]]:
        """Search one encoder space and map satellite hits to perception ids (best first)."""
        sat_filter = MemoryFilter(**{**flt.model_dump(), "memory_ids": None, "metadata": None})
        hits = await self.context.adense_search(
            self.user_id,
            np.asarray(vector, dtype=np.float32),
            namespace=VECTOR_NAMESPACE,
            memory_type=self.memory_type,
            filters=sat_filter,
            limit=candidates,
            space=space,
        )
        if not hits:
            return []
        owners = {
            r.item.id: r.item.metadata.get("perception_id")
            for r in await self.context.records.get(self.user_id, [i for i, _ in hits])
        }
        ranking: list[tuple[str, float]] = []
        seen: set[str] = set()
        for sat_id, score in hits:
            owner = owners.get(sat_id)
            if isinstance(owner, str) and owner not in seen:
                seen.add(owner)
                ranking.append((owner, float(score)))
        return ranking

    async def asearch_media(
        self,
        query: Any,
        modality: Modality,
        target: Modality | None,
        flt: MemoryFilter,
        limit: int,
        wanted: set[str] | None,
    ) -> Matches:
        """Near duplicates by perceptual hash, and every encoder that embeds this modality, fused."""
        candidates = self._candidates(limit, target)
        staged, detected, ext = await astage(self.files, query, modality, None, True)
        try:
            path = staged.read_path
            info = await asyncio.to_thread(inspect_media, path, detected, ext, staged.display_name)
            rankings: list[Ranking] = []
            if info.phash is not None and (wanted is None or SIGNAL_PHASH in wanted):
                hits = await self._asatellite_search(
                    self.phash_encoder.space, self.phash_encoder.vector(info.phash), flt, candidates
                )
                near = [(i, float(similarity_to_hamming(s))) for i, s in hits]
                near = [(i, d) for i, d in near if d <= self.settings.phash_max_distance]
                rankings.append((SIGNAL_PHASH, near))
            for encoder in self.encoders:
                if encoder.handles(detected) and (wanted is None or encoder.signal in wanted):
                    vector = await encoder.aembed_file(path, detected)
                    rankings.append(
                        (encoder.signal, await self._asatellite_search(encoder.space, vector, flt, candidates))
                    )
        finally:
            await asyncio.to_thread(self.files.discard, staged)
        if not rankings:
            logger.info("no signal can search %s queries with the configured encoders", modality.value)
        return self.fuse(rankings)

    async def asearch_vector(
        self,
        query: Any,
        space: str | None,
        flt: MemoryFilter,
        limit: int,
        target: Modality | None,
        wanted: set[str] | None,
    ) -> Matches:
        """A raw vector searched in ``space``, or in the one encoder space of its dimension."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if not np.isfinite(vector).all() or float(np.linalg.norm(vector)) <= 1e-12:
            raise MemoryValidationError("query", "an embedding query must be a finite, non-zero vector")
        choices = [e for e in self.all_encoders() if e.dim is not None and (wanted is None or e.signal in wanted)]
        if space is not None:
            choices = [e for e in choices if e.space == space]
        else:
            choices = [e for e in choices if e.dim == vector.shape[0]]
        if len(choices) != 1:
            known = ", ".join(f"{e.space} ({e.dim}-d)" for e in self.all_encoders() if e.dim is not None)
            raise MemoryValidationError(
                "space", f"name one encoder space for a {vector.shape[0]}-d vector; known: {known or 'none yet'}"
            )
        encoder = choices[0]
        if encoder.dim != vector.shape[0]:
            raise MemoryValidationError("query", f"space {encoder.space} holds {encoder.dim}-d vectors")
        hits = await self._asatellite_search(
            encoder.space, vector / np.linalg.norm(vector), flt, self._candidates(limit, target)
        )
        return self.fuse([(encoder.signal, hits)])

    def fuse(self, rankings: Sequence[Ranking]) -> Matches:
        """RRF over rankings, keeping each signal's raw score and the signal that ranked a perception best."""
        found = Matches(dict(rrf_fuse([[i for i, _ in hits] for _, hits in rankings], k=self.config.rrf_k)))
        best_rank: dict[str, int] = {}
        for signal, hits in rankings:
            for rank, (memory_id, score) in enumerate(hits):
                found.scores.setdefault(memory_id, {}).setdefault(signal, score)
                if rank < best_rank.get(memory_id, len(hits) + 1):
                    best_rank[memory_id] = rank
                    found.best[memory_id] = signal
        return found

    async def aload(self, found: Matches, flt: MemoryFilter, target: Modality | None) -> list[MemoryItem]:
        """Fetch ranked perceptions, filter them, and annotate which signal matched."""
        if not found.relevance:
            return []
        records = await self.context.records.get(self.user_id, list(found.relevance))
        items: list[MemoryItem] = []
        for record in records:
            item = record.item
            if record.namespace != MEMORY_NAMESPACE or item.memory_type != self.memory_type:
                continue
            if not matches(item, flt) or (target is not None and item.metadata.get("modality") != target.value):
                continue
            signals = found.scores.get(item.id, {})
            meta = {**item.metadata, "match_signal": found.best.get(item.id), "match_signals": dict(signals)}
            if SIGNAL_PHASH in signals:
                meta["match_distance"] = int(signals[SIGNAL_PHASH])
            items.append(item.model_copy(update={"metadata": meta}))
        return items
