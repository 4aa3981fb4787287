"""One search over the whole hierarchy: every read path ranks memories here.

``HierarchicalMemory.get()`` (the memory message), ``as_retriever()``, ``memory_blocks()``,
``MemoryToolSpec.recall``, ``lmh search`` and ``MemoryManager.retrieve_memories`` all call
:meth:`CrossTierSearch.asearch`. Per query it

1. embeds the query once, and gathers candidates of every requested tier of the user with one
   dense search and one keyword search over the record store (all durable tiers at once), the
   facts the knowledge graph reaches from the entities the query names, the encoder spaces of
   perceptions (CLIP) when configured, and working memory (in-process);
2. scores every candidate with the same signals on the same scale, whatever its tier:
   ``relevance = (keyword + dense) * (1 + entity + time + graph)``, where dense is the cosine of
   the candidate's stored vector on the model's calibrated scale (``calibration.py``: 0 for
   unrelated texts whatever the model and languages), keyword its BM25 over the best keyword hit
   (half of it earned by the query's rare terms in what the memory's own text states,
   ``RankingSettings.context_share``, a reply owning the words of the question it answers),
   entity/time the priors the question carries (``ranking.pipeline``; a person it names, by name or, for the
   two parties of a chat, as "my"/"我" or "you"/"你"), graph ``1/hop`` for a fact the graph
   reaches; then ``score = tier_evidence * (w_rel * relevance / best + w_rec * recency +
   w_imp * importance) / (w_rel + w_rec + w_imp)``, tier evidence being a fact's confidence
   (and half for a superseded fact, when history is asked for);
   every weight a field of :class:`~llama_index_memory_hierarchy.ranking.settings.RankingSettings` (per memory,
   per call: ``ranking=``), each column of the explanation times its fitted signal weight (``bench/fit_ranking.py``);
3. shows only what has evidence of relevance (``RankingSettings.relevance_floor``, ``retrieval.floor``): a cosine
   that stands out from unrelated texts by a calibrated bar, a content word of the query in its own text (with a
   meaning that agrees), a person, date or graph link the query names; a content-free memory never. An
   explicit ``min_score`` replaces the floor. Nothing relevant: an empty list;
4. chooses the final list with :func:`~llama_index_memory_hierarchy.ranking.selection.select`:
   one slot per memory, a derived memory and its sources only when both add words, near-identical
   contents collapsed, content-free turns last, a light maximal-marginal-relevance penalty.

Every returned item carries ``explanation``: the contribution of each signal to its ``score``
(they sum to it). Ranked lists of different tiers are never fused by rank. Ranking is
deterministic: recency counts from the event time (not from the last access), and the access
bumps of a search (``stores.access``) are written in the background and read by no ranking signal.

The parts: ``candidate`` (a candidate and what ranking reads from its text), ``keyword`` (term weights),
``conversation_rules`` (a reply owns the question it answers), ``evidence`` (tier evidence), ``floor``
(the relevance floor), ``conversation_query`` (the query of small talk), ``query`` (the query's analysis); the
candidate reads and the composition with explanations are here.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from llama_index_memory_hierarchy.calibration import SimilarityCalibration, acalibration
from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.ranking.fusion import recency
from llama_index_memory_hierarchy.ranking.pipeline import entity_boost, mentioned_names, time_score
from llama_index_memory_hierarchy.ranking.selection import Choice, is_content_free, select, slot_score
from llama_index_memory_hierarchy.ranking.settings import RankingSettings, ranking_settings
from llama_index_memory_hierarchy.retrieval.candidate import Candidate, sources_of
from llama_index_memory_hierarchy.retrieval.conversation_query import (
    conversation_share,
    conversation_text,
    recent_turns,
    topic_vector,
)
from llama_index_memory_hierarchy.retrieval.conversation_rules import answered_terms
from llama_index_memory_hierarchy.retrieval.evidence import procedural, tier_evidence
from llama_index_memory_hierarchy.retrieval.floor import aprepare, relevant, standing_of
from llama_index_memory_hierarchy.retrieval.keyword import term_weights
from llama_index_memory_hierarchy.retrieval.query import Query
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.tiers.perceptual import PerceptualMemory
from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.tiers.working import WorkingMemory
from llama_index_memory_hierarchy.turns import chat_party_of, speaker_of
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    matches,
    validate_content,
    validate_positive_int,
)


class SearchedMemory(Protocol):
    """What the search reads of a memory (a ``HierarchicalMemory``), so that it never imports the hierarchy above it."""

    user_id: str
    config: MemoryConfig

    @property
    def context(self) -> StoreContext: ...

    @property
    def cross_tier_search(self) -> CrossTierSearch:
        """The memory's own search, which :func:`asearch` runs in a span of the memory."""
        ...

    @property
    def tier_set(self) -> TierSet: ...

    @property
    def working(self) -> WorkingMemory: ...

    @property
    def semantic(self) -> SemanticMemory: ...

    @property
    def perceptual(self) -> PerceptualMemory: ...


logger = logging.getLogger(__name__)

#: Signal names of :attr:`MemoryItem.explanation`, in display order.
SIGNALS = (
    "dense",
    "keyword",
    "cross_modal",
    "entity",
    "time",
    "graph",
    "recency",
    "importance",
    "tier_evidence",
    "content_free",
    "duplicate_penalty",
    "covers",
    "source_slot",
)
# The knobs (the share of its score a content-free candidate keeps, ``context_share``: the share of a keyword
# hit's score the words of its neighbours alone can earn it, the weight of a superseded fact...) are fields of
# ``ranking.settings.RankingSettings``. About ``context_share``: a turn's keyword text holds the turns before it
# (``turns.keyword_document``), so the turn after an answer matches it too; the rest of the score
# goes by the share of the query's terms in the memory's own text, each term weighted by its rarity among the
# candidates (inverse document frequency, as BM25 weighs it).


def admit(
    item: MemoryItem,
    vector: np.ndarray | None,
    indexed: str,
    query: Query,
    config: MemoryConfig,
    settings: RankingSettings,
) -> Candidate:
    """A candidate with every signal that needs neither the query's vector nor the other candidates."""
    cand = Candidate(item, vector, indexed, sources=sources_of(item))
    cand.when = settings.time_weight * time_score(item.timestamp, query.hints) if query.hints else 0.0
    if query.temporal and cand.text.names_time:
        cand.when += settings.temporal_weight
    cand.fresh = recency(item.timestamp, query.now, config.recency_half_life_hours)
    cand.evidence = tier_evidence(item, settings.history_factor)
    return cand


def memory_types_of(memory_types: Sequence[MemoryType | str] | MemoryType | str | None) -> list[MemoryType]:
    """The tiers named (default: all), validated, in hierarchy order."""
    if memory_types is None:
        return list(MemoryType)
    if isinstance(memory_types, (str, MemoryType)):
        memory_types = [memory_types]
    try:
        wanted = {MemoryType(t) for t in memory_types}
    except ValueError:
        raise MemoryValidationError(
            "memory_types", f"unknown tier in {memory_types!r}; choose from {', '.join(t.value for t in MemoryType)}"
        ) from None
    if not wanted:
        raise MemoryValidationError("memory_types", "name at least one tier")
    return [t for t in MemoryType if t in wanted]


class CrossTierSearch(RuntimeBound):
    """The search of one memory (its user), over any subset of its tiers."""

    def __init__(self, memory: SearchedMemory, ranking: RankingSettings | str | None = None) -> None:
        self.memory = memory
        self.settings = ranking_settings(ranking)

    @property
    def runtime(self) -> Runtime:
        """The store runtime the search runs on."""
        return self.memory.context.runtime

    def search(
        self,
        query: str,
        limit: int = 5,
        *,
        memory_types: Sequence[MemoryType | str] | None = None,
        **filters: Any,
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`asearch`."""
        return self.blocking(self.asearch(query, limit, memory_types=memory_types, **filters))

    async def asearch(
        self,
        query: str,
        limit: int = 5,
        *,
        memory_types: Sequence[MemoryType | str] | None = None,
        **filters: Any,
    ) -> list[MemoryItem]:
        """The best ``limit`` memories for ``query`` from ``memory_types`` (default: every tier), best first.

        ``filters`` are :class:`~llama_index_memory_hierarchy.types.MemoryFilter` keys plus
        ``include_history`` (superseded facts too), ``ranking`` (:class:`RankingSettings` or a preset name, for
        this call) and ``min_score`` (a score every result reaches, in place of the relevance floor). Each item
        has ``score`` and ``explanation`` set. Nothing relevant gives an empty list.
        """
        query = validate_content(query, "query")
        limit = validate_positive_int(limit, "limit")
        types = memory_types_of(memory_types)
        include_history = bool(filters.pop("include_history", False))
        settings = ranking_settings(filters.pop("ranking", None), self.settings)
        min_score = filters.pop("min_score", None)
        conversation = filters.pop("conversation", None) or ()
        if isinstance(conversation, str) or not all(isinstance(t, str) for t in conversation):
            raise MemoryValidationError("conversation", "must be a list of the recent user turns' texts")
        if min_score is not None:
            if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or math.isnan(min_score):
                raise MemoryValidationError("min_score", f"must be a number, got {min_score!r}")
            min_score = float(min_score)
        flt = MemoryFilter.from_kwargs(**filters)
        context = self.memory.context
        candidates, asked = await self._acandidates(
            query, types, flt, limit, include_history, settings, list(conversation)
        )
        calibration = await acalibration(context.embeddings)
        candidates = procedural(
            candidates, asked.group, calibration, settings.history_factor if include_history else 0.0
        )
        if not candidates:
            return []
        if settings.relevance_floor and min_score is None:
            await aprepare(context.embeddings, calibration, list(candidates.values()))
        ranked = self._score(asked, list(candidates.values()), limit, calibration, settings, min_score)
        if not ranked:
            logger.debug("nothing relevant for a query of %d characters", len(query))
        context.accesses.record(self.memory.user_id, [i.id for i in ranked if i.memory_type is not MemoryType.WORKING])
        if MemoryType.WORKING in types:
            self.memory.working.touch([i.id for i in ranked if i.memory_type is MemoryType.WORKING])
        return ranked

    async def _acandidates(
        self,
        query: str,
        types: list[MemoryType],
        flt: MemoryFilter,
        wanted: int,
        include_history: bool,
        settings: RankingSettings,
        conversation: Sequence[str] = (),
    ) -> tuple[dict[str, Candidate], Query]:
        """Every candidate of the requested tiers, by id, with its raw signals, and the query's analysis.

        The query is embedded while it is analysed, the keyword search runs and its hits are read and
        admitted (:func:`admit`), and the graph and the encoders of perceptions are asked (none of them
        needs the text vector): the model and the rest work on different cores, and the dense search
        starts as soon as the vector is there; then only the rows not read yet are.
        """
        memory = self.memory
        context = memory.context
        user = memory.user_id
        durable = [t for t in types if t is not MemoryType.WORKING]
        depth = max(wanted * memory.config.candidate_multiplier, settings.candidate_depth)
        only = durable[0] if len(durable) == 1 else None
        embedding = context.embeddings.start_query(query)  # first: what follows runs beside the model
        turns = recent_turns(conversation, query, settings)  # what the conversation is about (small talk)
        turn_embeddings = [context.embeddings.start_query(turn) for turn in turns]  # cached: earlier get() inputs
        asked = Query.of(query, conversation_text(query, turns) if turns else None, in_conversation=bool(conversation))
        working = memory.working.entries(flt) if MemoryType.WORKING in types else []

        async def admitted(ids: Sequence[str]) -> list[Candidate]:
            """The candidates among the records of ``ids`` (of the requested tiers and filters)."""
            if not ids:
                return []
            records = await context.records.get(user, ids, with_embeddings=True, with_keywords=True)
            space = await context.aspace() if records else None
            out = []
            for record in records:
                item = record.item
                if record.namespace != MEMORY_NAMESPACE or item.memory_type not in durable or not matches(item, flt):
                    continue
                if item.memory_type is MemoryType.SEMANTIC and not include_history and item.metadata.get("invalid_at"):
                    continue
                usable = record.embedding is not None and record.space in (None, space)
                vector = record.embedding if usable else None
                out.append(admit(item, vector, record.keyword or "", asked, memory.config, settings))
            return out

        async def keyword_hits_and_candidates() -> tuple[list[tuple[str, float]], list[Candidate]]:
            if not durable:
                return [], []
            hits = await context.records.keyword_search(
                user, asked.keywords, memory_type=only, filters=flt, limit=depth
            )
            return hits, await admitted([i for i, _ in hits])

        async def embedded_and_dense() -> tuple[np.ndarray, list[tuple[str, float]]]:
            vector = await asyncio.wrap_future(embedding)
            if turn_embeddings:
                recent = [await asyncio.wrap_future(f) for f in turn_embeddings]
                vector = topic_vector(vector, recent, conversation_share(query, settings), decay=settings.turn_decay)
            asked.vector.append(vector)
            if not durable:
                return vector, []
            return vector, await context.adense_search(user, vector, memory_type=only, filters=flt, limit=depth)

        tasks = [
            asyncio.ensure_future(embedded_and_dense()),
            asyncio.ensure_future(keyword_hits_and_candidates()),
            asyncio.ensure_future(self._agraph(query, depth) if MemoryType.SEMANTIC in durable else _none()),
            asyncio.ensure_future(
                self._across_modal(query, flt, depth) if MemoryType.PERCEPTUAL in durable else _none()
            ),
        ]
        try:
            (vector, dense), (keyword, early), hops, cross = await asyncio.gather(*tasks)
        except BaseException:  # the first failure is raised as itself; the other lookups stop
            for task in tasks:
                task.cancel()
            raise
        pool = list(dict.fromkeys([*(i for i, _ in dense), *(i for i, _ in keyword), *hops, *cross]))
        if MemoryType.EPISODIC in durable:
            pool += [item.id for item, _ in working]  # put turns: the durable copy
        read = {i for i, _ in keyword}
        found = {c.item.id: c for c in [*early, *await admitted(list(dict.fromkeys(i for i in pool if i not in read)))]}
        for item, item_vector in working:
            if item.id not in found:
                found[item.id] = admit(item, item_vector, "", asked, memory.config, settings)
        cosine = dict(dense)
        for memory_id, cand in found.items():
            if memory_id in cosine:
                cand.dense = cosine[memory_id]
            elif cand.vector is not None and cand.vector.shape == vector.shape:
                cand.dense = float(np.dot(vector, cand.vector))
        hits = {i: s for i, s in keyword if i in found}
        top = max(hits.values(), default=0.0)
        terms = asked.terms
        mine = {i: c.text.own for i, c in found.items()}
        for memory_id, words in answered_terms(found.values()).items():
            mine[memory_id] |= words
        weights = term_weights(terms, list(mine.values()))
        total = sum(weights.values())
        context_share = settings.context_share
        for memory_id, cand in found.items():
            cand.matched = terms & mine[memory_id]
            own = sum(weights[t] for t in cand.matched) / total if total else 1.0
            cand.own = own if total else 0.0
            if memory_id in hits:
                share = context_share + (1.0 - context_share) * own  # see RankingSettings.context_share
                cand.keyword = max(hits[memory_id], 0.0) / top * share if top > 0 else 0.0
            elif cand.item.memory_type is MemoryType.WORKING and terms:
                # not in the keyword index: the share of the query's terms it contains, on the same [0, 1] scale
                cand.keyword = own
            cand.graph = 1.0 / hops[memory_id] if memory_id in hops else 0.0
            cand.cross_modal = cross.get(memory_id, 0.0)
        return found, asked

    async def _agraph(self, query: str, depth: int) -> dict[str, int]:
        try:
            semantic = self.memory.semantic
        except ImportError:
            return {}
        return await semantic.agraph_hops(query, depth)

    async def _across_modal(self, query: str, flt: MemoryFilter, depth: int) -> dict[str, float]:
        """Perceptions found through the text side of their encoders (CLIP, CLAP), max-normalised."""
        try:
            perceptual = self.memory.perceptual
        except ImportError:
            return {}
        encoders = [e for e in perceptual.encoders if e.supports_text]
        if not encoders:
            return {}
        rankings = await asyncio.gather(*(perceptual.aencoder_text_hits(e, query, flt, depth) for e in encoders))
        best: dict[str, float] = {}
        for hits in rankings:
            top = max((s for _, s in hits), default=0.0)
            for memory_id, score in hits:
                if top > 0:
                    best[memory_id] = max(best.get(memory_id, 0.0), max(score, 0.0) / top)
        return best

    # ------------------------------------------------------------------ scoring
    def _score(
        self,
        query: Query,
        candidates: list[Candidate],
        limit: int,
        calibration: SimilarityCalibration,
        settings: RankingSettings,
        min_score: float | None = None,
    ) -> list[MemoryItem]:
        graph_weight = settings.entity_weight * settings.graph_weight * self._graph_weight()
        names = {s for c in candidates if (s := speaker_of(c.item))}
        named = mentioned_names(query.context, names) if names else set()
        party = query.party  # "my"/"我" or "you"/"你": that party weighs as a speaker the query names
        w_kw, w_dense = settings.keyword_weight, settings.dense_weight
        if query.chat:
            w_kw *= settings.chat_keyword_weight
        # the signals of every candidate as columns, combined in the order of the explanation's parts
        keyword = np.array([c.keyword for c in candidates])
        cross_modal = np.array([c.cross_modal for c in candidates])
        graph = graph_weight * np.array([c.graph for c in candidates])
        # the cosine on the model's calibrated scale: unrelated texts at 0 whatever the model and languages
        dense = np.array([c.dense for c in candidates])
        groups = np.array([c.text.group for c in candidates])
        for group in set(groups.tolist()):
            rows = groups == group
            dense[rows] = calibration.calibrate(dense[rows], query.group, group, role="query")
        dense = np.maximum(dense, 0.0)
        base = w_kw * keyword + w_dense * (dense + cross_modal)
        entity = np.zeros(len(candidates))
        if named or party:
            entity[:] = [
                entity_boost(speaker_of(c.item), c.item.content, named, party=chat_party_of(c.item), named_party=party)
                for c in candidates
            ]
            entity *= settings.entity_weight
        relevance = {
            "dense": w_dense * dense,
            "keyword": w_kw * keyword,
            "cross_modal": w_dense * cross_modal,
            "entity": base * entity,
            "time": base * np.array([c.when for c in candidates]),
            "graph": base * graph,
        }
        best = float(sum(relevance.values()).max()) or 1.0
        total = (settings.relevance_weight + settings.recency_weight + settings.importance_weight) or 1.0
        relevance_scale = settings.relevance_weight / (best * total)
        columns = {name: value * relevance_scale for name, value in relevance.items()}
        columns["recency"] = settings.recency_weight * np.array([c.fresh for c in candidates]) / total
        columns["importance"] = settings.importance_weight * np.array([c.item.importance for c in candidates]) / total
        for name in columns:
            columns[name] = settings.weight(name) * columns[name]
        evidence = np.array([c.evidence for c in candidates])
        columns["tier_evidence"] = (evidence - 1.0) * sum(columns.values())
        scores = sum(columns.values()).tolist()
        table = {name: column.tolist() for name, column in columns.items()}
        if settings.relevance_floor and min_score is None:  # what shows no evidence of relevance is never shown
            standing = standing_of(calibration, query.vector[0] if query.vector else None, query.group, candidates)
            rate = settings.floor_false_positive_rate
            shown = relevant(query.text, query.hints, candidates, standing, rate, named, entity, recall=query.recall)
        else:
            shown = np.ones(len(candidates), dtype=bool)
        order = sorted(
            (i for i in range(len(candidates)) if shown[i]),
            key=lambda i: (scores[i], candidates[i].item.id),
            reverse=True,
        )
        # what selection may pick: far more than it needs (redundancy only lowers scores), not the whole pool
        choices: list[Choice] = []
        by_key: dict[str, Candidate] = {}
        cut = max(4 * limit, settings.shortlist)
        shortlist = {candidates[i].item.id for i in order[:cut]}
        # and the memories derived from those (a summary quoting one), which may take its slot (``select``)
        derived = [i for i in order[cut:] if candidates[i].sources & shortlist]
        for i in [*order[:cut], *derived]:
            cand = candidates[i]
            item = cand.item
            cand.parts = parts = {name: column[i] for name, column in table.items()}
            text = cand.text
            free = is_content_free(text.words, bool(text.words & query.words))  # its own words: not its context
            if free:
                parts["content_free"] = -(1.0 - settings.content_free_factor) * sum(parts.values())
            choices.append(
                Choice(
                    key=item.id,
                    score=sum(parts.values()),
                    words=text.stems,
                    identity=text.identity,
                    vector=cand.vector,
                    related=cand.sources,
                    content_free=free,
                    group=text.group,
                    tiebreak=(item.importance, item.timestamp.timestamp()),
                )
            )
            by_key[item.id] = cand
        ranked: list[MemoryItem] = []
        floor = float("inf")
        for choice in select(
            choices,
            limit,
            diversity=settings.diversity,
            near_duplicate=settings.near_duplicate_similarity,
            min_novelty=settings.min_novelty,
            calibration=calibration,
            source_first=settings.source_first,
        ):
            parts = dict(by_key[choice.key].parts)
            parts["duplicate_penalty"] = -choice.penalty
            score = sum(parts.values())
            if choice.covers is not None:  # it holds the slot of the memory it says more than
                parts["covers"] = slot_score(choice) - score
                score = slot_score(choice)
            elif choice.stands_for is not None:  # it holds the place of a derived memory that does not reproduce it
                parts["source_slot"] = slot_score(choice) - score
                score = slot_score(choice)
            if choice.content_free and score > floor:  # ranked after every informative memory, and scored so
                parts["content_free"] = parts.get("content_free", 0.0) - (score - floor)
                score = floor
            floor = min(floor, score)
            if min_score is not None and score < min_score:
                continue
            explanation = {name: round(parts[name], 6) for name in SIGNALS if parts.get(name)}
            ranked.append(by_key[choice.key].item.model_copy(update={"score": score, "explanation": explanation}))
        return ranked

    def _graph_weight(self) -> float:
        """The semantic tier's own graph weight (``SemanticSettings.graph_weight``), 1 without that tier."""
        semantic = self.memory.tier_set.built(MemoryType.SEMANTIC)
        settings = getattr(semantic, "settings", None)
        return float(getattr(settings, "graph_weight", 1.0))


@traced("retrieve")
async def asearch(
    memory: SearchedMemory,
    query: str,
    limit: int = 5,
    *,
    memory_types: Sequence[MemoryType | str] | None = None,
    **filters: Any,
) -> list[MemoryItem]:
    """:meth:`CrossTierSearch.asearch` of ``memory`` (one traced ``retrieve`` span per search)."""
    return await memory.cross_tier_search.asearch(query, limit, memory_types=memory_types, **filters)


async def _none() -> dict[str, Any]:
    return {}


def explain(item: MemoryItem) -> str:
    """One line saying why ``item`` ranked where it did: its signal contributions, largest first."""
    parts = sorted((item.explanation or {}).items(), key=lambda kv: abs(kv[1]), reverse=True)
    return ", ".join(f"{name} {value:+.3f}" for name, value in parts) or "no explanation"
