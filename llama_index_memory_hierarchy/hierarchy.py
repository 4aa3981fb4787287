"""``HierarchicalMemory``: the four tiers behind LlamaIndex's ``BaseMemory`` interface.

Pass it as ``memory=`` to ``FunctionAgent``, ``ReActAgent`` or ``AgentWorkflow``. Every
message put is recorded at once in working memory and, durably, in episodic memory.
``get()`` returns this session's recent history within a token budget with one system
message, right after the latest user message, carrying the memories retrieved for the
current input (or the latest user message) from every tier, including earlier sessions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.types import BaseMemory
from pydantic import BaseModel, Field, PrivateAttr, field_serializer

from llama_index_memory_hierarchy.blocks import HierarchyMemoryBlock, memory_blocks, set_memory_opener
from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.instrumentation import traced
from llama_index_memory_hierarchy.lifecycle.deletion import adelete_memories
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
from llama_index_memory_hierarchy.lifecycle.manager import MemoryManager
from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings
from llama_index_memory_hierarchy.lifecycle.shown import SessionShown
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.memory_message import MemoryMessage, MemoryMessageSources
from llama_index_memory_hierarchy.messages import SUMMARY_TAG, memory_message_text, message_text, tagged
from llama_index_memory_hierarchy.provenance import SIGNATURE_KEY, asigning_key, sign_turn
from llama_index_memory_hierarchy.ranking.settings import RankingSettings, ranking_settings
from llama_index_memory_hierarchy.retrieval.retriever import HierarchyRetriever
from llama_index_memory_hierarchy.retrieval.search import CrossTierSearch, asearch
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.session_history import CHAT_MESSAGE_KEY, Entry, SessionHistory
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.registry import Hold
from llama_index_memory_hierarchy.text import count_tokens, truncate_to_tokens
from llama_index_memory_hierarchy.tiers.base import MemoryTier
from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
from llama_index_memory_hierarchy.tiers.perceptual import PerceptionSettings, PerceptualMemory
from llama_index_memory_hierarchy.tiers.procedural import ProceduralMemory, ProceduralSettings
from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory, SemanticSettings
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.tiers.working import WorkingMemory
from llama_index_memory_hierarchy.turns import ROLE_IMPORTANCE
from llama_index_memory_hierarchy.types import MAX_BATCH_ITEMS, MemoryItem, MemoryType, utcnow, validate_content

logger = logging.getLogger(__name__)

#: The open memories of this process by handle: a reference reopened here gets the same models and stores.
_OPEN: weakref.WeakValueDictionary[str, HierarchicalMemory] = weakref.WeakValueDictionary()

#: The access log keeps this much of a get()'s input.
_LOGGED_INPUT_CHARS = 2000


def _reopen(data: dict[str, Any]) -> HierarchicalMemory:
    return HierarchicalMemory.from_dict(data)


set_memory_opener(_reopen)


class HierarchicalMemory(RuntimeBound, BaseMemory):
    """Working, episodic, semantic and perceptual memory for one user and session."""

    config: MemoryConfig = Field(default_factory=MemoryConfig, description="Settings of the hierarchy.")
    user_id: str = Field(description="Whose memories these are.")
    session_id: str = Field(description="The current conversation.")

    _context: StoreContext = PrivateAttr()
    _hold: Hold = PrivateAttr()
    _tiers: TierSet = PrivateAttr()
    _tier_options: dict[str, Any] = PrivateAttr(default_factory=dict)
    _llm: Any = PrivateAttr(default=None)
    _history: SessionHistory = PrivateAttr()
    _memory_message: MemoryMessage = PrivateAttr()
    _closed: bool = PrivateAttr(default=False)
    _handle: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex)
    _options: dict[str, Any] = PrivateAttr(default_factory=dict)
    _manager: MemoryManager = PrivateAttr()
    _search: CrossTierSearch | None = PrivateAttr(default=None)
    _ranking: RankingSettings | str | None = PrivateAttr(default=None)
    _shown: SessionShown = PrivateAttr()

    @classmethod
    def class_name(cls) -> str:
        return "HierarchicalMemory"

    @classmethod
    def from_defaults(
        cls,
        user_id: str | None = None,
        session_id: str | None = None,
        persist_dir: str | None = None,
        *,
        config: MemoryConfig | None = None,
        embed_model: Any = None,
        llm: Any = None,
        graph_store: Any = None,
        perception_encoders: Sequence[Any] = (),
        vector_store: Any = None,
        lifecycle: LifecycleSettings | None = None,
        semantic: SemanticSettings | None = None,
        perception: PerceptionSettings | None = None,
        ranking: RankingSettings | str | None = None,
        procedural: ProceduralSettings | None = None,
        **config_overrides: Any,
    ) -> HierarchicalMemory:
        """Open (or create) the memory of ``user_id`` in ``persist_dir``, offline by default.

        Settings come from ``config``, else from ``LMH_*`` environment variables, with the
        explicit arguments winning. ``embed_model`` takes any LlamaIndex ``BaseEmbedding``;
        ``llm`` any LlamaIndex ``LLM`` (extraction, consolidation, captions); ``graph_store``
        any LlamaIndex ``PropertyGraphStore``; ``perception_encoders`` extra encoders such as
        a CLIP ``MultiModalEmbedding``; ``vector_store`` any LlamaIndex ``BasePydanticVectorStore``
        (for the text space) or a factory ``(space, dim) -> store`` (for every space). The
        settings pick the backends too (``record_store_url``, ``vector_store_url``/``qdrant_url``,
        ``graph_store_url``): see ``docs/deployment.md``. ``lifecycle`` takes a
        :class:`~llama_index_memory_hierarchy.lifecycle.settings.LifecycleSettings` (consolidation,
        compression, profile, forgetting) for :attr:`manager`; ``semantic`` a
        :class:`~llama_index_memory_hierarchy.tiers.semantic.SemanticSettings` (extraction, graph
        weight, entity resolution) and ``perception`` a
        :class:`~llama_index_memory_hierarchy.tiers.perceptual.PerceptionSettings` (file storage,
        captions) for those tiers, ``procedural`` a
        :class:`~llama_index_memory_hierarchy.tiers.procedural.ProceduralSettings` (instructions, procedures)
        for the procedural tier. ``ranking`` takes a
        :class:`~llama_index_memory_hierarchy.ranking.settings.RankingSettings` or a preset name (default: the
        ``default`` preset, fitted weights) for every search of this memory; a search may override it per call.
        """
        overrides = {"user_id": user_id, "session_id": session_id, "persist_dir": persist_dir, **config_overrides}
        if config is None:
            config = MemoryConfig.from_env(**overrides)
        else:
            changes = {k: v for k, v in overrides.items() if v is not None}
            config = MemoryConfig.create(**{**config.model_dump(), **changes}) if changes else config
        session = config.session_id or f"session-{uuid.uuid4().hex[:12]}"
        context = StoreContext.acquire(
            config, embed_model=embed_model, vector_store=vector_store, on_open=aresume_erasures
        )
        memory = cls(config=config, user_id=config.user_id, session_id=session)
        memory._llm = llm
        memory._ranking = ranking_settings(ranking)  # validated here: a bad preset fails at open, not at first search
        memory._tier_options = {
            "llm": llm,
            "graph_store": graph_store,
            "perception_encoders": perception_encoders,
            "semantic_settings": semantic,
            "perception_settings": perception,
            "procedural_settings": procedural,
        }
        memory._options = {
            "embed_model": embed_model,
            "vector_store": vector_store,
            "llm": llm,
            "graph_store": graph_store,
            "perception_encoders": perception_encoders,
            "lifecycle": lifecycle,
            "semantic": semantic,
            "perception": perception,
        }
        memory._attach(context, lifecycle)
        _OPEN[memory._handle] = memory
        return memory

    # ------------------------------------------------------------------ serialisation
    @field_serializer("config")
    def _config_reference(self, config: MemoryConfig) -> dict[str, Any]:
        """Every serialised form carries the settings without a secret (:meth:`MemoryConfig.reference`)."""
        return config.reference()

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """A small reference without a secret that reopens this memory on the same stores: what
        ``from_dict``, ``to_json``, pickle and a saved workflow ``Context`` (both serializers) carry.

        Objects given to :meth:`from_defaults` (models, stores, encoders) are not in it: in this process
        the reopened memory gets the same ones; in another, what the settings (and ``LMH_*`` environment
        variables, which also give the secrets) name.
        """
        data = self.model_dump(mode="json")
        data["class_name"] = self.class_name()
        data["handle"] = self._handle
        data["settings"] = {
            name: value.model_dump(mode="json")
            for name in ("lifecycle", "semantic", "perception")
            if isinstance(value := self._options.get(name), BaseModel)
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> HierarchicalMemory:  # type: ignore[override]
        """Reopen the memory :meth:`to_dict` describes (``kwargs`` as for :meth:`from_defaults`)."""
        data = {**data}
        original = _OPEN.get(str(data.get("handle")))
        if original is not None and not original._closed and not kwargs:
            return cls.from_defaults(config=original.config, session_id=data["session_id"], **original._options)
        config = MemoryConfig.from_env(**{**(data.get("config") or {}), "user_id": data["user_id"]})
        settings = data.get("settings") or {}
        models = {"lifecycle": LifecycleSettings, "semantic": SemanticSettings, "perception": PerceptionSettings}
        for name, model in models.items():
            if name in settings and name not in kwargs:
                kwargs[name] = model.model_validate(settings[name])
        return cls.from_defaults(config=config, session_id=data["session_id"], **kwargs)

    @classmethod
    def from_json(cls, data_str: str, **kwargs: Any) -> HierarchicalMemory:  # type: ignore[override]
        """Reopen the memory :meth:`to_json` describes."""
        return cls.from_dict(json.loads(data_str), **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its reference (:meth:`to_dict`): unpickling reopens it."""
        return _reopen, (self.to_dict(),)

    def _attach(self, context: StoreContext, lifecycle: LifecycleSettings | None = None) -> None:
        self._context = context
        self._hold = Hold(context, self)
        self._tiers = TierSet(
            context,
            user_id=self.user_id,
            session_id=self.session_id,
            config=self.config,
            delete=self._adelete,
            search=self._asearch_tier,
            forget=self._aforget_tier,
            on_evict=self._aon_evict,
            **self._tier_options,
        )
        self._search = CrossTierSearch(self, self._ranking)
        self._history = SessionHistory(
            context, self._tiers, user_id=self.user_id, session_id=self.session_id, on_foreign_start=self._aon_start
        )
        self._shown = SessionShown(context, LifecycleStore(context), self.user_id, self.session_id)
        deps = LifecycleDeps(
            context=context,
            tiers=self._tiers,
            store=LifecycleStore(context),
            search=self._search,
            config=self.config,
            settings=lifecycle or LifecycleSettings(),
            user_id=self.user_id,
            session_id=self.session_id,
            areset_context=self._areset_context,
            forget_turns=self._forget_turns,
            llm_given=self._llm,
        )
        self._manager = MemoryManager(deps)
        self._memory_message = MemoryMessage(
            MemoryMessageSources(
                config=self.config,
                procedural=self.procedural,
                history=self._history,
                shown=self._shown,
                manager=self._manager,
                search=self.asearch,
            )
        )

    async def _asearch_tier(
        self, memory_type: MemoryType, query: str, limit: int = 5, **filters: Any
    ) -> list[MemoryItem]:
        """A tier's retrieval: the cross-tier search restricted to that tier (one scorer for every read path)."""
        return await asearch(self, query, limit, memory_types=[memory_type], **filters)

    async def _aforget_tier(self, memory_type: MemoryType, strategy: str, dry_run: bool, **params: Any) -> int:
        """A tier's forgetting: the memory's forgetting restricted to that tier (one implementation)."""
        report = await self._manager.forgetter.arun(strategy, [memory_type], dry_run=dry_run, **params)
        return report.total

    async def _aon_evict(self, items: list[MemoryItem]) -> None:
        """Working memory evicted ``items``: the ones that matter and are not durable yet move to episodic."""
        await self._manager.consolidator.aon_evict(items)

    async def _adelete(self, memory_type: MemoryType, ids: Sequence[str], tier: MemoryTier | None) -> list[str]:
        """Every tier deletes through the deletion path (``working.remove(id)``: a put turn goes from
        episodic memory too); the ids deleted."""
        report = await adelete_memories(self._context, self.user_id, ids, memory_type=memory_type, tier=tier)
        return list(report.deleted)

    def _forget_turns(self, ids: set[str]) -> bool:
        """Deleted turns leave the replayed history and the cached memory message; whether one was there."""
        self._memory_message.invalidate()
        return self._history.forget(ids)

    async def _areset_context(self) -> None:
        """The stores changed under this memory (an erasure): read the history again, drop what is held."""
        self._history.invalidate()
        self._shown.clear()
        self._memory_message.invalidate()
        await self.working.aclear()

    async def _aon_start(self) -> None:
        """Another object reset (or set) this session's history: this one's short-term state follows."""
        self._memory_message.invalidate()
        await self.working.aclear()
        self._manager.compressor.forget_cached(self.session_id)

    @property
    def manager(self) -> MemoryManager:
        """The lifecycle of this memory: routing, cross-tier retrieval, consolidation, forgetting,
        erasure, export and import."""
        return self._manager

    @property
    def cross_tier_search(self) -> CrossTierSearch:
        """The one search behind every read path of this memory (``get``, ``search``, retrievers, blocks, tools)."""
        assert self._search is not None
        return self._search

    # ------------------------------------------------------------------ tiers
    @property
    def context(self) -> StoreContext:
        """The shared stores behind this memory."""
        return self._context

    @property
    def tier_set(self) -> TierSet:
        """The tiers of this memory, each built once with the options given to :meth:`from_defaults`."""
        return self._tiers

    @property
    def working(self) -> WorkingMemory:
        """Short-lived, in-process context of this session."""
        return self._tiers.working

    @property
    def episodic(self) -> EpisodicMemory:
        """Durable, time-ordered record of every turn and event."""
        return self._tiers.episodic

    @property
    def semantic(self) -> SemanticMemory:
        """Facts and the knowledge graph."""
        return self._tiers.semantic

    @property
    def perceptual(self) -> PerceptualMemory:
        """Images, audio, video and other non-text inputs."""
        return self._tiers.perceptual

    @property
    def procedural(self) -> ProceduralMemory:
        """Standing instructions of this user and procedures learned from the agent's runs."""
        return self._tiers.procedural

    def tiers(self, memory_types: Sequence[MemoryType | str] | None = None) -> list[MemoryTier]:
        """The tiers named (default: all), in hierarchy order."""
        return self._tiers.tiers(memory_types)

    def as_retriever(
        self, similarity_top_k: int = 5, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> HierarchyRetriever:
        """A LlamaIndex retriever over the chosen tiers (default: all), ranked by the cross-tier search."""
        return HierarchyRetriever(self, similarity_top_k=similarity_top_k, memory_types=memory_types, filters=filters)

    def search(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`asearch`."""
        return self.blocking(self.asearch(query, limit, memory_types=memory_types, **filters))

    async def asearch(
        self, query: str, limit: int = 5, *, memory_types: Sequence[MemoryType | str] | None = None, **filters: Any
    ) -> list[MemoryItem]:
        """The best ``limit`` memories for ``query`` across the chosen tiers (default: all), best first.

        One score for every tier (see :mod:`~llama_index_memory_hierarchy.retrieval.search`);
        ``filters`` are ``MemoryFilter`` keys plus ``include_history``; each item carries its
        ``score`` and ``explanation``.
        """
        return await asearch(self, query, limit, memory_types=memory_types, **filters)

    def memory_blocks(self) -> list[HierarchyMemoryBlock]:
        """The tiers as ``BaseMemoryBlock``s for ``llama_index.core.memory.Memory(memory_blocks=...)``."""
        return memory_blocks(self, self.config.retrieval_top_k)

    @property
    def runtime(self) -> Runtime:
        """The store runtime this memory's coroutines run on."""
        return self._context.runtime

    # ------------------------------------------------------------------ BaseMemory: writes
    def put(self, message: ChatMessage) -> None:
        """Record one message in working and episodic memory."""
        self.blocking(self.aput(message))

    async def aput(self, message: ChatMessage) -> None:
        """Async twin of :meth:`put`."""
        await self._aput_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Record several messages with one embedding batch and one transaction."""
        self.blocking(self.aput_messages(messages))

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async twin of :meth:`put_messages`."""
        await self._aput_messages(messages)

    def set(self, messages: list[ChatMessage]) -> None:
        """Make ``messages`` this session's short-term history, for every object on the session (recording
        new ones; those already recorded are not recorded twice)."""
        self.blocking(self.aset(messages))

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async twin of :meth:`set`."""
        start = utcnow()
        await self._aclear_short_term()
        await self._aput_messages(messages, dedupe=True, start=start)
        if not messages:
            await self._history.astart(start)

    def reset(self) -> None:
        """End this session's short-term history, for every object on the session and after reopening;
        long-term memories stay (use ``forget`` to delete)."""
        self.blocking(self.areset())

    async def areset(self) -> None:
        """Async twin of :meth:`reset`."""
        await self._aclear_short_term()
        await self._history.astart()

    async def _aclear_short_term(self) -> None:
        self._memory_message.invalidate()
        self._shown.clear()
        await self.working.aclear()
        await self._manager.compressor.areset(self.session_id)

    @traced("put")
    async def _aput_messages(
        self, messages: Sequence[ChatMessage], *, dedupe: bool = False, start: datetime | None = None
    ) -> list[str]:
        """Record ``messages``; they extend the history, or (``start``, for ``set()``) are the history from then."""
        if not isinstance(messages, (list, tuple)):
            raise MemoryValidationError("messages", f"expected a list of ChatMessage, got {type(messages).__name__}")
        messages = list(messages)  # the caller's list (an agent's scratchpad) may change while this awaits
        if not messages:
            return []
        if len(messages) > MAX_BATCH_ITEMS:
            raise MemoryValidationError("messages", f"at most {MAX_BATCH_ITEMS} messages per call; put them in batches")
        for position, message in enumerate(messages):  # all checked before a block is stored as a file
            if not isinstance(message, ChatMessage):
                raise MemoryValidationError(
                    f"messages[{position}]", f"expected a ChatMessage, got {type(message).__name__}"
                )
        items: list[MemoryItem] = []
        now = utcnow()
        key = await asigning_key(self._context)
        for message in messages:
            memory_id, content = str(uuid.uuid4()), message_text(message)
            metadata: dict[str, Any] = {"role": message.role.value}
            raw = await self._history.aencode(message, memory_id, content)
            if raw is not None:
                metadata[CHAT_MESSAGE_KEY] = raw
            metadata[SIGNATURE_KEY] = sign_turn(
                key, user_id=self.user_id, memory_id=memory_id, role=message.role.value, content=content, raw=raw
            )
            items.append(
                MemoryItem.create(
                    id=memory_id,
                    content=content,
                    memory_type=MemoryType.EPISODIC,
                    user_id=self.user_id,
                    session_id=self.session_id,
                    timestamp=now,
                    importance=ROLE_IMPORTANCE.get(message.role.value, 0.4),
                    metadata=metadata,
                    turn=True,
                )
            )
        records = await self.episodic.abuild_records(items)
        ids = await self._context.awrite(records, dedupe=dedupe)
        for record in records:
            if record.item.metadata["role"] in ("user", "assistant"):
                await self.working.aadd(self._working_view(record.item), embedding=record.embedding)
        if start is None:
            await self._history.aappend(ids, messages)
        else:
            await self._history.astart(start, ids, messages)
        written = [(r.item, m) for r, m, i in zip(records, messages, ids, strict=True) if r.item.id == i]
        await self.procedural.aobserve([item for item, _ in written], [message for _, message in written])
        await self._manager.aafter_put(len(messages))
        return ids

    def _working_view(self, item: MemoryItem) -> MemoryItem:
        """What working memory holds of a turn: the turn, or its head when it exceeds the working budget.

        Why: episodic memory keeps every turn whole; working memory is a bounded scratchpad, and a
        reply longer than its whole budget must neither crash ``put()`` (the agent) nor evict everything.
        """
        budget = self.config.working_token_budget
        tokens = count_tokens(item.content)
        if tokens <= budget:
            return item
        head = truncate_to_tokens(item.content, max(budget // 2, 1))
        metadata = {**item.metadata, "working_view": f"first {count_tokens(head)} of {tokens} tokens"}
        return item.model_copy(update={"content": f"{head}…", "metadata": metadata})

    # ------------------------------------------------------------------ BaseMemory: reads
    async def _ahistory(self) -> list[Entry]:
        """This session's messages as put, by every object on the session (see :mod:`.session_history`)."""
        return await self._history.aentries()

    def get_all(self) -> list[ChatMessage]:
        """Every message of this session's short-term history."""
        return self.blocking(self.aget_all())

    async def aget_all(self) -> list[ChatMessage]:
        """Async twin of :meth:`get_all`."""
        return [message for _, message, _ in await self._ahistory()]

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Recent history within the token budget, with the retrieved memories after the latest user message."""
        return self.blocking(self.aget(input, **kwargs))

    @traced("get")
    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Async twin of :meth:`get`."""
        if input is not None and not isinstance(input, str):
            raise MemoryValidationError("input", f"must be a string or None, got {type(input).__name__}")
        with contextlib.suppress(MemoryValidationError):  # the search below says what is wrong with it
            self._context.embeddings.start_query(validate_content(input, "input"))  # runs while the rest reads
        history = await self._ahistory()
        compressor = self._manager.compressor  # older turns beyond the budget fold into a running summary
        pending, summary = await compressor.acompress(history, self.config.chat_history_token_limit, self.session_id)
        budget = self.config.chat_history_token_limit - compressor.cost(summary)
        window: list[Entry] = []
        used = 0
        for entry in reversed(pending):
            if used + entry[2] > budget and window:
                break
            window.append(entry)
            used += entry[2]
        window.reverse()
        while len(window) > 1 and window[0][1].role in (MessageRole.TOOL, MessageRole.ASSISTANT):
            window.pop(0)  # never start with a tool result or an answer cut from its question
        query = input
        if query is None:
            query = next((message_text(m) for _, m, _ in reversed(history) if m.role == MessageRole.USER), None)
        turns = [message_text(m) for _, m, _ in history if m.role == MessageRole.USER]  # what it is about
        sections, shown = await self._memory_message.asections(query, {memory_id for memory_id, _, _ in window}, turns)
        if query:  # the access log: what this get() showed, for which input (written in the background)
            self._shown.record(query, shown, query[:_LOGGED_INPUT_CHARS])
            self._context.accesses.shown(self.user_id, self.session_id, query[:_LOGGED_INPUT_CHARS], shown)
        if summary:
            sections = [tagged(SUMMARY_TAG, compressor.section(summary)), *sections]
        messages = [message for _, message, _ in window]
        if not sections:
            return messages
        # one <memory> block (LlamaIndex Memory's convention) whose stored texts are quoted data, none able to
        # close its tags; right after the latest user message, never first: ReActAgent takes a leading system
        # message for its own prompt and drops it, so the memories would never reach its LLM
        memory_message = ChatMessage(role=MessageRole.SYSTEM, content=memory_message_text(sections))
        at = next(
            (i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i].role == MessageRole.USER), len(messages)
        )
        return [*messages[:at], memory_message, *messages[at:]]

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Release this memory's hold on the shared stores (the last one closes them)."""
        if not self._closed:
            self._closed = True
            self._manager.close()
            self._hold.release()

    def __enter__(self) -> HierarchicalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
