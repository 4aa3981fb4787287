"""``SemanticMemory``: the semantic tier's public interface over facts, statements and the graph.

Facts are added (:meth:`SemanticMemory.aadd_fact`, or extracted from text: an
:class:`~.extraction.LLMExtractor` when an LLM is given or set in ``Settings.llm``, else
spaCy/jieba offline), resolved to the user's entities (normalisation, token containment,
name-embedding similarity), superseded bi-temporally, and mirrored in the graph. The
user's name (``User named Zhang San``) makes the name an alias of the user's entity.
Plain text added to this tier is kept as a *statement* and its facts point to it; a fact's
``source_ids`` name the memories it came from (:meth:`SemanticMemory.aremove_sources`).
Retrieval fuses dense and keyword rankings with graph expansion from the entities the
query names, then weighs recency, importance and confidence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.calibration import acalibration
from llama_index_memory_hierarchy.entity_resolution import EntityResolver
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.extraction import (
    Extraction,
    Extractor,
    LLMExtractor,
    OfflineExtractor,
    normalize_predicate,
)
from llama_index_memory_hierarchy.llms import resolve_llm
from llama_index_memory_hierarchy.stores.graph import UserGraph
from llama_index_memory_hierarchy.tiers.semantic.entities import EntityInfo, entity_info, find_entity, rank_entities
from llama_index_memory_hierarchy.tiers.semantic.export import knowledge_graph
from llama_index_memory_hierarchy.tiers.semantic.facts import (
    STATEMENT,
    FactInput,
    check_fact,
    extracted_facts,
    fact_input,
    item_fact,
)
from llama_index_memory_hierarchy.tiers.semantic.graph_mirror import GraphMirror
from llama_index_memory_hierarchy.tiers.semantic.graph_search import (
    RelatedEntity,
    afact_hops,
    arelated_entities,
)
from llama_index_memory_hierarchy.tiers.semantic.settings import SemanticSettings
from llama_index_memory_hierarchy.tiers.semantic.state import SemanticState, semantic_state
from llama_index_memory_hierarchy.tiers.semantic.writer import FactWriter
from llama_index_memory_hierarchy.tiers.stored import StoredTier
from llama_index_memory_hierarchy.types import (
    MemoryItem,
    MemoryType,
    as_utc,
    validate_content,
    validate_memory_id,
    validate_positive_int,
)

if TYPE_CHECKING:
    from llama_index.core.graph_stores.types import PropertyGraphStore

    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)


class SemanticMemory(StoredTier):
    """Facts and a knowledge graph, per user: current by default, history on request."""

    memory_type = MemoryType.SEMANTIC

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str | None,
        context: StoreContext,
        llm: Any = None,
        extractor: Extractor | None = None,
        graph_store: PropertyGraphStore | None = None,
        settings: SemanticSettings | None = None,
    ) -> None:
        super().__init__(user_id=user_id, session_id=session_id, context=context)
        self.settings = settings or SemanticSettings()
        # an explicit LLM or Settings.llm when set; never a hosted default, and the local model only when
        # passed in: extraction runs on every add, offline spaCy/jieba is the fast default
        llm = resolve_llm(llm, allow_local=False)
        self.extractor: Extractor = extractor or (
            LLMExtractor(llm, max_concurrency=self.settings.max_concurrency) if llm is not None else OfflineExtractor()
        )
        self.resolver = EntityResolver(
            similarity_threshold=self.settings.similarity_threshold,
            containment_threshold=self.settings.containment_threshold,
        )
        if graph_store is not None:
            self.graph: UserGraph = UserGraph(graph_store)
        else:
            self.graph = context.graph
        self.mirror = GraphMirror(self.graph, self.user_id)
        self.writer = FactWriter(
            context=context,
            user_id=self.user_id,
            session_id=self.session_id,
            resolver=self.resolver,
            mirror=self.mirror,
            functional_predicates=self.settings.functional_predicates,
        )
        self._state: SemanticState = semantic_state(context, self.user_id)

    # ------------------------------------------------------------------ state
    async def _astate(self) -> SemanticState:
        """The user's index, loaded from the records on first use (graph repaired if out of step)."""
        state = self._state
        await self.context.afollow()  # facts other processes wrote to the user make the state stale
        revision = self.context.foreign_revision(self.user_id)
        if state.loaded and state.revision == revision:
            return state
        async with state.lock:
            if not state.loaded or state.revision != revision:
                await self._aload(state)
                state.loaded = True
                state.revision = revision
        return state

    async def _aload(self, state: SemanticState) -> None:
        state.load(await self.context.records.query(self.user_id, memory_type=self.memory_type))
        if await self.mirror.aout_of_step(state):
            logger.info("semantic memory of %s: rebuilding the graph from %d facts", self.user_id, len(state.current))
            await self.mirror.arebuild(state)

    async def arebuild_graph(self) -> int:
        """Rebuild this user's subgraph from the fact records; return the relations written."""
        state = await self._astate()
        async with state.lock:
            return await self.mirror.arebuild(state)

    def rebuild_graph(self) -> int:
        """Sync twin of :meth:`arebuild_graph`."""
        return self.blocking(self.arebuild_graph())

    # ------------------------------------------------------------------ adding facts
    async def aadd_fact(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        source_id: str | None = None,
        valid_at: datetime | str | float | None = None,
        confidence: float = 1.0,
        importance: float | None = None,
        subject_type: str = "ENTITY",
        object_type: str = "ENTITY",
    ) -> str:
        """Add one fact (or add a source to the same current fact); return the fact id."""
        fact = fact_input(
            "fact",
            subject=subject,
            predicate=predicate,
            object=object,
            subject_type=subject_type,
            object_type=object_type,
            valid_at=None if valid_at is None else as_utc(valid_at, "valid_at"),
            source_ids=[validate_memory_id(source_id, "source_id")] if source_id else [],
            confidence=confidence,
            importance=importance,
        )
        return (await self.aadd_facts([fact]))[0]

    def add_fact(self, subject: str, predicate: str, object: str, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd_fact`."""
        return self.blocking(self.aadd_fact(subject, predicate, object, **kwargs))

    async def aadd_facts(self, facts: Sequence[FactInput | dict[str, Any] | tuple[str, str, str]]) -> list[str]:
        """Add many facts with one embedding batch and one record transaction; ids in order."""
        inputs = [check_fact(f, i) for i, f in enumerate(facts)]
        if not inputs:
            return []
        return [i for i in await self._aadd_facts(inputs, strict=True) if i is not None]

    def add_facts(self, facts: Sequence[FactInput | dict[str, Any] | tuple[str, str, str]]) -> list[str]:
        """Sync twin of :meth:`aadd_facts`."""
        return self.blocking(self.aadd_facts(facts))

    async def _aadd_facts(self, inputs: Sequence[FactInput], *, strict: bool) -> list[str | None]:
        return await self.writer.aadd(await self._astate(), inputs, strict=strict)

    # ------------------------------------------------------------------ extraction
    async def aextract_and_add(
        self,
        text: str,
        *,
        source_id: str | None = None,
        valid_at: datetime | str | float | None = None,
        importance: float | None = None,
    ) -> list[str]:
        """Extract facts from ``text`` and add them (pointing to ``source_id``); return their ids."""
        return (
            await self.aextract_and_add_many([text], source_ids=[source_id], valid_at=valid_at, importance=importance)
        )[0]

    def extract_and_add(self, text: str, **kwargs: Any) -> list[str]:
        """Sync twin of :meth:`aextract_and_add`."""
        return self.blocking(self.aextract_and_add(text, **kwargs))

    async def aextract_and_add_many(
        self,
        texts: Sequence[str],
        *,
        source_ids: Sequence[str | None] | None = None,
        valid_at: datetime | str | float | None = None,
        importance: float | None = None,
    ) -> list[list[str]]:
        """Batch twin of :meth:`aextract_and_add` (extraction concurrency bounded by the extractor)."""
        texts = [validate_content(t, f"texts[{i}]") for i, t in enumerate(texts)]
        sources = list(source_ids) if source_ids is not None else [None] * len(texts)
        if len(sources) != len(texts):
            raise MemoryValidationError("source_ids", "must have one entry per text")
        sources = [validate_memory_id(s, "source_ids") if s else None for s in sources]
        moment = None if valid_at is None else as_utc(valid_at, "valid_at")
        extractions = await self.extractor.aextract_many(texts)
        return await self._aadd_extracted(extractions, sources, moment, importance)

    async def _aadd_extracted(
        self,
        extractions: Sequence[Extraction],
        sources: Sequence[str | None],
        valid_at: datetime | None,
        importance: float | None,
    ) -> list[list[str]]:
        batch, owners = extracted_facts(
            extractions, sources, valid_at=valid_at, importance=importance, min_confidence=self.settings.min_confidence
        )
        ids = await self._aadd_facts(batch, strict=False) if batch else []
        out: list[list[str]] = [[] for _ in extractions]
        for owner, fact_id in zip(owners, ids, strict=True):
            if fact_id is not None and fact_id not in out[owner]:
                out[owner].append(fact_id)
        return out

    # ------------------------------------------------------------------ the common tier interface
    async def aadd_items(
        self, items: Sequence[MemoryItem], *, embeddings: Sequence[Any] | None = None, dedupe: bool = False
    ) -> list[str]:
        """Store statements (extracting their facts) and triplet items as facts; ids in order.

        This is what :meth:`aadd` and :meth:`aadd_many` do here: an item whose ``metadata``
        holds ``subject``, ``predicate`` and ``object`` is a fact (see :meth:`aadd_fact`); any
        other is kept as a statement, and the facts extracted from it point to it.
        """
        if not items:
            return []
        state = await self._astate()
        ids: list[str | None] = [None] * len(items)
        facts: list[tuple[int, FactInput]] = []
        statements: list[tuple[int, MemoryItem]] = []
        for position, item in enumerate(items):
            fact = item_fact(item, position)
            if fact is not None:
                facts.append((position, fact))
            else:
                statements.append(
                    (position, item.model_copy(update={"metadata": {**item.metadata, "kind": STATEMENT}}))
                )
        if facts:
            added = await self._aadd_facts([f for _, f in facts], strict=True)
            for (position, _), fact_id in zip(facts, added, strict=True):
                ids[position] = fact_id
        if statements:
            vectors = None if embeddings is None else [embeddings[p] for p, _ in statements]
            written = await super().aadd_items([i for _, i in statements], embeddings=vectors, dedupe=dedupe)
            fresh = []
            for (position, item), memory_id in zip(statements, written, strict=True):
                ids[position] = memory_id
                state.statements.add(memory_id)
                if memory_id == item.id:  # not a duplicate of an earlier statement
                    fresh.append(item)
            if fresh and self.settings.extract_on_add:  # the facts point back to their statement
                extractions = await self.extractor.aextract_many([i.content for i in fresh])
                await self._aadd_extracted(extractions, [i.id for i in fresh], None, None)
        return [i for i in ids if i is not None]

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Change importance/metadata; a statement's new content re-extracts its facts.

        The facts the new content states supersede those it contradicts; facts the statement no
        longer states end. Both stay as history (``historical_facts``, the profile's history).
        A fact's new content is a correction of it (:meth:`_acorrect_fact`): the fact ends as history.
        """
        memory_id = self.check_id(memory_id)
        state = await self._astate()
        current = await self.aget(memory_id)
        if current is None:
            return False
        if memory_id in state.facts:
            if content is not None:
                if metadata:
                    raise MemoryValidationError("metadata", "correct a fact's content or its metadata, not both")
                return await self._acorrect_fact(state, memory_id, content, importance)
            if metadata and set(metadata) & {"subject", "predicate", "object", "subject_id", "object_id", "kind"}:
                raise MemoryValidationError("metadata", "the triplet of a fact cannot be changed")
            done = await super().aupdate(memory_id, importance=importance, metadata=metadata)
            async with state.lock:
                fact = state.facts.get(memory_id)
                if fact is not None:
                    if metadata:
                        fact.metadata = {**fact.metadata, **metadata}
                    if importance is not None:
                        fact.importance = importance
            return done
        done = await super().aupdate(memory_id, content=content, importance=importance, metadata=metadata)
        if done and content is not None and self.settings.extract_on_add:
            await self.arestate(memory_id, content)
        return done

    async def _acorrect_fact(self, state: SemanticState, fact_id: str, content: str, importance: float | None) -> bool:
        """A fact now reads ``content`` (an agent's correction of a recalled fact): kept as history, never lost.

        ``content`` is kept as a statement and its facts are added citing it, so they supersede the
        fact as a later turn would; when none of them does by itself ("likes jazz" corrected to "likes
        blues"), the fact ends now, superseded by the first of them. Deleting the correction
        reinstates the fact. Content that states no fact changes nothing: an error naming ``content``.
        """
        text = validate_content(content)
        [extraction] = await self.extractor.aextract_many([text])
        batch, _ = extracted_facts(
            [extraction], [None], valid_at=None, importance=None, min_confidence=self.settings.min_confidence
        )
        if not batch:
            raise MemoryValidationError(
                "content", f"states no fact to correct {fact_id} with; write a statement like 'The user lives in Oslo.'"
            )
        old = state.facts[fact_id]
        weight = importance if importance is not None else old.importance
        statement = self.make_item(text, importance=weight, metadata={"kind": STATEMENT, "corrects": fact_id})
        [statement_id] = await super().aadd_items([statement])
        state.statements.add(statement_id)
        [new_ids] = await self._aadd_extracted([extraction], [statement_id], None, weight)
        if old.current and new_ids and fact_id not in new_ids:
            await self.writer.aend(state, fact_id, superseded_by=new_ids[0])
        return True

    async def arestate(self, source_id: str, content: str, *, only_cited: bool = False) -> int:
        """``source_id`` (a statement, or a turn facts were extracted from) now says ``content``: how many facts ended.

        Its facts are extracted again and added first, so that they supersede those they contradict
        (history kept, as for a later contradicting turn); the facts it no longer states then end
        (history too, :meth:`FactWriter.aretract`). ``only_cited``: nothing when no fact cites it yet
        (a turn not consolidated yet is extracted when it is).
        """
        source_id = validate_memory_id(source_id, "source_id")
        state = await self._astate()
        if only_cited and not state.by_source.get(source_id):
            return 0
        extraction = await self.extractor.aextract_many([validate_content(content)])
        [kept] = await self._aadd_extracted(extraction, [source_id], None, None)
        return await self.writer.aretract(state, source_id, kept)

    async def adelete_records(self, ids: Sequence[str]) -> tuple[list[str], int]:
        """Delete facts (reinstating those they superseded) and statements with the facts only they supported."""
        state = await self._astate()
        facts = [i for i in ids if i in state.facts]
        if facts:
            await self.writer.adelete(state, facts)
        deleted = await self.context.adelete(self.user_id, [i for i in ids if i not in state.facts and i not in facts])
        state.statements.difference_update(deleted)
        return facts + deleted, await self._aremove_sources(deleted) if deleted else 0

    async def aremove_sources(self, source_ids: Sequence[str]) -> int:
        """Forget that these memories said anything: facts only they supported go; return how many."""
        ids = [validate_memory_id(s, "source_ids") for s in source_ids]
        return await self._aremove_sources(ids)

    def remove_sources(self, source_ids: Sequence[str]) -> int:
        """Sync twin of :meth:`aremove_sources`."""
        return self.blocking(self.aremove_sources(source_ids))

    async def _aremove_sources(self, source_ids: Sequence[str]) -> int:
        return await self.writer.aremove_sources(await self._astate(), source_ids)

    async def aderived_from(self, source_id: str) -> list[str]:
        """Ids of the facts that cite ``source_id`` (a turn, a perception, a stated memory) among their sources."""
        source = validate_memory_id(source_id, "source_id")
        state = await self._astate()
        return sorted(fact_id for fact_id in state.by_source.get(source, ()) if fact_id != source)

    def derived_from(self, source_id: str) -> list[str]:
        """Sync twin of :meth:`aderived_from`."""
        return self.blocking(self.aderived_from(source_id))

    async def aclear(self) -> int:
        """Delete every semantic memory of this user and their subgraph (nothing of other users)."""
        state = await self._astate()
        async with state.lock:
            deleted = await self.context.records.delete_where(self.user_id, memory_type=self.memory_type)
            await self.context.drain_outbox()
            state.reset()
            await self.graph.aclear_user(self.user_id)
            return len(deleted)

    async def aget_stats(self) -> dict[str, Any]:
        """Counts of this user's semantic memories, facts (current, history), entities and statements."""
        stats = await super().aget_stats()
        state = await self._astate()
        assert state.registry is not None
        stats.update(
            facts=len(state.facts),
            current_facts=len(state.current),
            historical_facts=len(state.facts) - len(state.current),
            statements=len(state.statements),
            entities=len(state.registry),
            extractor=type(self.extractor).__name__,
            graph_store=type(self.graph.store).__name__,
        )
        return stats

    # ------------------------------------------------------------------ retrieval
    async def agraph_hops(self, query: str, limit: int = 20) -> dict[str, int]:
        """Facts the graph reaches from the entities ``query`` names: ``{fact id: hops}`` (1 = about them).

        The cross-tier search takes it as one signal among others; no entity named (or no fact
        yet), no graph call.
        """
        state = await self._astate()
        if not state.facts:
            return {}
        return await self._ahops(state, query, limit)

    async def _ahops(self, state: SemanticState, query: str, limit: int) -> dict[str, int]:
        return await afact_hops(self.graph, state, query, depth=self.settings.expansion_depth, limit=limit)

    # ------------------------------------------------------------------ entities and facts

    async def asearch_entities(self, query: str, limit: int = 10) -> list[EntityInfo]:
        """Entities matching ``query`` by name words and by name-embedding similarity."""
        validate_content(query, "query")
        state = await self._astate()
        vector = await self.context.embeddings.aembed_query(query)
        calibration = await acalibration(self.context.embeddings)
        return rank_entities(state, query, vector, limit=limit, rrf_k=self.config.rrf_k, calibration=calibration)

    def search_entities(self, query: str, limit: int = 10) -> list[EntityInfo]:
        """Sync twin of :meth:`asearch_entities`."""
        return self.blocking(self.asearch_entities(query, limit))

    async def aget_entity(self, name: str) -> EntityInfo | None:
        """The entity a name resolves to (alias or unambiguous containment), or None."""
        state = await self._astate()
        entity = find_entity(state, name)
        return None if entity is None else entity_info(state, entity)

    def get_entity(self, name: str) -> EntityInfo | None:
        """Sync twin of :meth:`aget_entity`."""
        return self.blocking(self.aget_entity(name))

    async def aget_related_entities(
        self, name: str, depth: int = 1, relation_types: Sequence[str] | None = None, limit: int = 50
    ) -> list[RelatedEntity]:
        """Entities within ``depth`` (1-3) hops of ``name`` in the graph, nearest first."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 3:
            raise MemoryValidationError("depth", f"must be 1, 2 or 3, got {depth!r}")
        limit = validate_positive_int(limit, "limit")
        validate_content(name, "name")
        types = [normalize_predicate(t) for t in relation_types] if relation_types else None
        state = await self._astate()
        start = find_entity(state, name)
        if start is None:
            return []
        return await arelated_entities(self.graph, state, start, depth=depth, relation_types=types, limit=limit)

    def get_related_entities(
        self, name: str, depth: int = 1, relation_types: Sequence[str] | None = None, limit: int = 50
    ) -> list[RelatedEntity]:
        """Sync twin of :meth:`aget_related_entities`."""
        return self.blocking(self.aget_related_entities(name, depth, relation_types, limit))

    async def aget_facts(self, entity: str, include_history: bool = False) -> list[MemoryItem]:
        """Facts about an entity (as subject or object): current ones, or all with history, oldest first."""
        validate_content(entity, "entity")
        state = await self._astate()
        found = find_entity(state, entity)
        if found is None:
            return []
        ids = [f for f in state.by_entity.get(found.id, ()) if include_history or state.facts[f].current]
        items = await self.aget_many(ids)
        return sorted(items, key=lambda i: (i.timestamp, i.created_at))

    def get_facts(self, entity: str, include_history: bool = False) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_facts`."""
        return self.blocking(self.aget_facts(entity, include_history))

    async def aexport_knowledge_graph(
        self, format: str = "json", *, path: str | Path | None = None, include_history: bool = False
    ) -> str:
        """This user's knowledge graph as ``json``, ``graphml`` or ``html`` (written to ``path`` if given)."""
        state = await self._astate()
        text = knowledge_graph(state, include_history=include_history).export(format)
        if path is not None:
            target = Path(path)
            try:
                await asyncio.to_thread(target.write_text, text, "utf-8")
            except OSError as exc:
                raise StoreError(f"{target}: cannot write the export: {exc}") from exc
        return text

    def export_knowledge_graph(
        self, format: str = "json", *, path: str | Path | None = None, include_history: bool = False
    ) -> str:
        """Sync twin of :meth:`aexport_knowledge_graph`."""
        return self.blocking(self.aexport_knowledge_graph(format, path=path, include_history=include_history))
