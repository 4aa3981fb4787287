"""``KnowledgeRetriever``: hybrid dense + keyword search over a knowledge base, with MQE and HyDE.

One retrieval is a set of ranked lists fused by reciprocal rank (RRF, never raw scores:
cosine and BM25 live on different scales):

* the query: a dense list and a keyword list;
* **MQE** (``mqe_queries=N``): the LLM writes N alternative phrasings (LlamaIndex's
  ``QueryFusionRetriever`` prompt); each gets a dense and a keyword list too;
* **HyDE** (``hyde=True``): the LLM writes a hypothetical passage answering the query
  (LlamaIndex's ``HyDEQueryTransform`` and its prompt); its *document* embedding is
  searched as one more dense list, beside the original query's lists.

Each list has weight 1 in the fusion; ``expansion_weight`` < 1 makes the MQE and HyDE lists
count less than the original query's (useful with a weak LLM, whose expansions drift).

A ``QueryBundle`` that already carries ``custom_embedding_strs`` (e.g. from an external
``HyDEQueryTransform``) is honoured: each string gets its own dense list, so wrapping this
retriever in ``TransformQueryEngine`` + ``RetrieverQueryEngine`` keeps the passage.

Why not ``QueryFusionRetriever`` itself: it fuses by node text hash with a fixed k, cannot
run the HyDE call concurrently with query generation, and its sync path nests
``asyncio.run``. Here the LLM calls run in the caller's thread or event loop (concurrently
on the async path), never on the store runtime loop, and all searches for one retrieval run
concurrently on the runtime loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.callbacks import CallbackManager
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_HYDE_PROMPT
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.retrievers.fusion_retriever import QUERY_GEN_PROMPT
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryValidationError
from llama_index_memory_hierarchy.knowledge.manifest import FILE_META_KEYS, RESERVED_KEYS
from llama_index_memory_hierarchy.ranking.fusion import rrf_fuse

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM

    from llama_index_memory_hierarchy.knowledge.scope import KnowledgeScope
    from llama_index_memory_hierarchy.stores.base import Record

logger = logging.getLogger(__name__)

#: Metadata of a chunk that citations and the LLM context show (the rest is bookkeeping).
CITATION_KEYS = ("file_name", "heading_path", "page_label")
#: Bookkeeping the LLM is not shown: every key the knowledge base owns or the reader adds, but the citation.
_BOOKKEEPING = frozenset({*RESERVED_KEYS, *FILE_META_KEYS, "memory_id", "file_path"} - set(CITATION_KEYS))
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]+|\(?\d{1,2}[.):]|query\s*\d*\s*[:.-])\s*", re.IGNORECASE)
_MAX_MQE = 10

_overrides: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "kb_retrieval_overrides", default=None
)


@contextmanager
def retrieval_options(
    *, mqe_queries: int | None = None, hyde: bool | None = None, similarity_top_k: int | None = None
) -> Iterator[None]:
    """Switch MQE, HyDE or ``similarity_top_k`` of knowledge retrievers for the calls inside the block.

    A context variable, so concurrent tasks each keep their own switches.
    """
    switches: dict[str, Any] = {}
    if mqe_queries is not None:
        switches["mqe_queries"] = _check_count(mqe_queries, "mqe_queries", 0, _MAX_MQE)
    if hyde is not None:
        switches["hyde"] = bool(hyde)
    if similarity_top_k is not None:
        switches["similarity_top_k"] = _check_count(similarity_top_k, "similarity_top_k", 1, 1000)
    token = _overrides.set(switches)
    try:
        yield
    finally:
        _overrides.reset(token)


class SearchList(BaseModel):
    """One ranked list that went into the fusion."""

    kind: str  # "dense" or "keyword"
    source: str  # "query", "mqe", "hyde" or "custom"
    text: str
    ids: list[str]


class SearchTrace(BaseModel):
    """What one retrieval did: expansions, the lists searched, fusion, LLM calls and time."""

    query: str
    mqe_queries: list[str] = Field(default_factory=list)
    hyde_passage: str | None = None
    searches: list[SearchList] = Field(default_factory=list)
    fused: list[tuple[str, float]] = Field(default_factory=list)
    llm_calls: int = 0
    llm_seconds: float = 0.0
    search_seconds: float = 0.0
    expansion_errors: list[str] = Field(default_factory=list)


def parse_queries(text: str, original: str, limit: int) -> list[str]:
    """Alternative queries from an LLM's answer: one per line, list markers and quotes stripped,
    the original and duplicates dropped, at most ``limit``."""
    seen = {original.strip().casefold()}
    out: list[str] = []
    for line in text.strip().splitlines():
        if line.lstrip().startswith("```"):
            continue  # code fences are formatting, never a query
        query = _LIST_MARKER.sub("", line).strip().strip("\"'“”").strip()
        if not query or query.endswith(":"):
            continue  # blank lines and headers such as "Queries:" or "Here are three queries:"
        key = query.casefold()
        if key in seen:
            continue
        seen.add(key)
        out.append(query)
        if len(out) >= limit:
            break
    return out


def _check_count(value: Any, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise MemoryValidationError(field, f"must be an integer in [{minimum}, {maximum}], got {value!r}")
    return value


class KnowledgeRetriever(BaseRetriever):
    """Retriever over one knowledge base: hybrid dense + keyword, optional MQE and HyDE, fused by RRF.

    ``retrieve``/``aretrieve`` use the settings given here; :meth:`retrieve_with` and
    :meth:`aretrieve_with` switch MQE, HyDE or ``similarity_top_k`` for one call. Returned
    nodes carry ``file_name``, ``source`` (path), ``heading_path``, ``page_label``, ``doc_id``
    and ``memory_id`` in metadata; the score is the fused RRF score. :attr:`last_trace`
    tells what the last retrieval searched.
    """

    def __init__(
        self,
        scope: KnowledgeScope,
        *,
        similarity_top_k: int = 5,
        mqe_queries: int = 0,
        hyde: bool = False,
        llm: LLM | None = None,
        candidate_k: int | None = None,
        keyword: bool = True,
        rrf_k: int | None = None,
        expansion_weight: float = 1.0,
        mqe_prompt: str | BasePromptTemplate | None = None,
        hyde_prompt: BasePromptTemplate | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.scope = scope
        self.similarity_top_k = _check_count(similarity_top_k, "similarity_top_k", 1, 1000)
        self.mqe_queries = _check_count(mqe_queries, "mqe_queries", 0, _MAX_MQE)
        self.hyde = bool(hyde)
        self.llm = llm
        self.candidate_k = None if candidate_k is None else _check_count(candidate_k, "candidate_k", 1, 10_000)
        self.keyword = keyword
        self.rrf_k = rrf_k or scope.context.config.rrf_k
        if isinstance(expansion_weight, bool) or not isinstance(expansion_weight, (int, float)):
            raise MemoryValidationError("expansion_weight", f"must be a number, got {expansion_weight!r}")
        if not 0.0 <= expansion_weight <= 1.0:
            raise MemoryValidationError("expansion_weight", f"must be in [0, 1], got {expansion_weight!r}")
        self.expansion_weight = float(expansion_weight)
        self.mqe_prompt = (
            mqe_prompt if isinstance(mqe_prompt, BasePromptTemplate) else PromptTemplate(mqe_prompt or QUERY_GEN_PROMPT)
        )
        self.hyde_prompt = hyde_prompt or DEFAULT_HYDE_PROMPT
        self.last_trace: SearchTrace | None = None
        self._resolved_llm: LLM | None = None
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # ------------------------------------------------------------------ prompts
    def _get_prompts(self) -> PromptDictType:
        return {"mqe_prompt": self.mqe_prompt, "hyde_prompt": self.hyde_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "mqe_prompt" in prompts:
            self.mqe_prompt = prompts["mqe_prompt"]
        if "hyde_prompt" in prompts:
            self.hyde_prompt = prompts["hyde_prompt"]

    # ------------------------------------------------------------------ per-call switches
    def retrieve_with(
        self,
        query: str | QueryBundle,
        *,
        mqe_queries: int | None = None,
        hyde: bool | None = None,
        similarity_top_k: int | None = None,
    ) -> list[NodeWithScore]:
        """``retrieve`` with MQE, HyDE or ``similarity_top_k`` switched for this call only."""
        with retrieval_options(mqe_queries=mqe_queries, hyde=hyde, similarity_top_k=similarity_top_k):
            return self.retrieve(query)

    async def aretrieve_with(
        self,
        query: str | QueryBundle,
        *,
        mqe_queries: int | None = None,
        hyde: bool | None = None,
        similarity_top_k: int | None = None,
    ) -> list[NodeWithScore]:
        """Async twin of :meth:`retrieve_with`."""
        with retrieval_options(mqe_queries=mqe_queries, hyde=hyde, similarity_top_k=similarity_top_k):
            return await self.aretrieve(query)

    def _options(self) -> tuple[int, bool, int]:
        current = _overrides.get() or {}
        return (
            current.get("mqe_queries", self.mqe_queries),
            current.get("hyde", self.hyde),
            current.get("similarity_top_k", self.similarity_top_k),
        )

    def _get_llm(self, feature: str) -> LLM:
        if self._resolved_llm is None:
            from llama_index_memory_hierarchy.llms import require_llm

            self._resolved_llm = require_llm(self.llm, feature=feature)
        return self._resolved_llm

    # ------------------------------------------------------------------ BaseRetriever
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        mqe, hyde, top_k = self._options()
        trace = SearchTrace(query=query_bundle.query_str)
        started = time.perf_counter()
        if mqe:
            llm = self._get_llm("multi-query expansion (mqe_queries > 0)")
            try:
                prompt = self.mqe_prompt.format(num_queries=mqe, query=query_bundle.query_str)
                trace.llm_calls += 1
                trace.mqe_queries = parse_queries(llm.complete(prompt).text, query_bundle.query_str, mqe)
            except LLMRequiredError:
                raise
            except Exception as exc:
                self._expansion_failed(trace, "MQE", exc)
        if hyde:
            from llama_index.core.indices.query.query_transform import HyDEQueryTransform

            llm = self._get_llm("HyDE (hyde=True)")
            try:
                trace.llm_calls += 1
                transformed = HyDEQueryTransform(llm=llm, hyde_prompt=self.hyde_prompt, include_original=False).run(
                    QueryBundle(query_bundle.query_str)
                )
                trace.hyde_passage = (transformed.custom_embedding_strs or [""])[0].strip() or None
            except LLMRequiredError:
                raise
            except Exception as exc:
                self._expansion_failed(trace, "HyDE", exc)
        trace.llm_seconds = time.perf_counter() - started
        return self.scope.runtime.run(self._asearch(query_bundle, trace, top_k))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        mqe, hyde, top_k = self._options()
        trace = SearchTrace(query=query_bundle.query_str)
        started = time.perf_counter()
        tasks = []
        if mqe:
            tasks.append(self._amqe(self._get_llm("multi-query expansion (mqe_queries > 0)"), query_bundle, mqe, trace))
        if hyde:
            tasks.append(self._ahyde(self._get_llm("HyDE (hyde=True)"), query_bundle, trace))
        if tasks:
            await asyncio.gather(*tasks)  # the expansion calls run concurrently
        trace.llm_seconds = time.perf_counter() - started
        return await self.scope.runtime.arun(self._asearch(query_bundle, trace, top_k))

    async def _amqe(self, llm: LLM, query_bundle: QueryBundle, n: int, trace: SearchTrace) -> None:
        try:
            prompt = self.mqe_prompt.format(num_queries=n, query=query_bundle.query_str)
            trace.llm_calls += 1
            response = await llm.acomplete(prompt)
            trace.mqe_queries = parse_queries(response.text, query_bundle.query_str, n)
        except Exception as exc:
            self._expansion_failed(trace, "MQE", exc)

    async def _ahyde(self, llm: LLM, query_bundle: QueryBundle, trace: SearchTrace) -> None:
        try:
            trace.llm_calls += 1
            passage = await llm.apredict(self.hyde_prompt, context_str=query_bundle.query_str)
            trace.hyde_passage = passage.strip() or None
        except Exception as exc:
            self._expansion_failed(trace, "HyDE", exc)

    @staticmethod
    def _expansion_failed(trace: SearchTrace, what: str, exc: Exception) -> None:
        """An LLM failure degrades to plain search (logged, recorded in the trace), never to no answer."""
        logger.warning("%s query expansion failed (%s: %s); searching without it", what, type(exc).__name__, exc)
        trace.expansion_errors.append(f"{what}: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ the search (runtime loop)
    async def _asearch(self, query_bundle: QueryBundle, trace: SearchTrace, top_k: int) -> list[NodeWithScore]:
        kb = self.scope
        ctx = kb.context
        started = time.perf_counter()
        candidates = self.candidate_k or max(top_k * ctx.config.candidate_multiplier, 20)
        query = query_bundle.query_str

        # What to embed as a query, what as a document (HyDE passages are document-like).
        queries: list[tuple[str, str]] = [("query", query), *(("mqe", q) for q in trace.mqe_queries)]
        passages: list[tuple[str, str]] = []
        if trace.hyde_passage:
            passages.append(("hyde", trace.hyde_passage))
        for text in query_bundle.custom_embedding_strs or []:
            if text and text.strip() and text != query:
                passages.append(("custom", text))

        query_vectors: list[np.ndarray]
        if query_bundle.embedding is not None:
            first = np.asarray(query_bundle.embedding, dtype=np.float32)
            rest = await asyncio.gather(*(ctx.embeddings.aembed_query(q) for _, q in queries[1:]))
            query_vectors = [first, *rest]
        else:
            query_vectors = list(await asyncio.gather(*(ctx.embeddings.aembed_query(q) for _, q in queries)))
        passage_vectors = (
            list(await ctx.embeddings.aembed_texts([p for _, p in passages], field="hyde_passage")) if passages else []
        )

        jobs: list[tuple[str, str, str, Any]] = []
        for (source, text), vector in zip(queries, query_vectors, strict=True):
            jobs.append(("dense", source, text, self._dense(vector, candidates)))
            if self.keyword:
                jobs.append(("keyword", source, text, self._keyword(text, candidates)))
        for (source, text), vector in zip(passages, passage_vectors, strict=True):
            jobs.append(("dense", source, text, self._dense(vector, candidates)))
        results = await asyncio.gather(*(job[3] for job in jobs))
        trace.searches = [
            SearchList(kind=kind, source=source, text=text, ids=[i for i, _ in hits])
            for (kind, source, text, _), hits in zip(jobs, results, strict=True)
        ]

        weights = [1.0 if s.source == "query" else self.expansion_weight for s in trace.searches]
        fused = rrf_fuse([s.ids for s in trace.searches], weights, k=self.rrf_k)
        ranked = sorted(fused, key=lambda kv: (-kv[1], kv[0]))[:top_k]
        trace.fused = ranked
        records = await ctx.records.get(kb.user_id, [i for i, _ in ranked])
        by_id = {r.item.id: r for r in records if r.namespace == kb.namespace}
        nodes = [to_node(by_id[i], score) for i, score in ranked if i in by_id]
        trace.search_seconds = time.perf_counter() - started
        self.last_trace = trace
        if self._verbose:
            logger.info("retrieval %s", trace.model_dump_json(exclude={"searches"}))
        return nodes

    async def _dense(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        kb = self.scope
        return await kb.context.adense_search(kb.user_id, vector, namespace=kb.namespace, limit=limit)

    async def _keyword(self, text: str, limit: int) -> list[tuple[str, float]]:
        kb = self.scope
        return await kb.context.records.keyword_search(kb.user_id, text, namespace=kb.namespace, limit=limit)


def to_node(record: Record, score: float | None) -> NodeWithScore:
    """A knowledge chunk as a LlamaIndex node: citation metadata shown to the LLM, bookkeeping hidden."""
    meta = dict(record.item.metadata)
    meta["memory_id"] = record.item.id
    if meta.get("source"):
        meta["file_path"] = meta["source"]
    shown = {k for k in meta if k not in _BOOKKEEPING}
    hidden = [k for k in meta if k not in shown]
    node = TextNode(
        id_=record.item.id,
        text=record.item.content,
        metadata=meta,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
        start_char_idx=meta.get("start_char"),
        end_char_idx=meta.get("end_char"),
    )
    return NodeWithScore(node=node, score=score)


def citation(node: NodeWithScore | TextNode) -> str:
    """``file.md › Heading > Sub (page 2)`` for a knowledge node."""
    base = node.node if isinstance(node, NodeWithScore) else node
    meta = base.metadata
    name = meta.get("file_name") or meta.get("doc_id") or base.node_id
    parts = [str(name)]
    if meta.get("heading_path"):
        parts.append(str(meta["heading_path"]))
    text = " › ".join(parts)
    if meta.get("page_label"):
        text += f" (page {meta['page_label']})"
    return text


def node_text(node: NodeWithScore) -> str:
    """The node's text without metadata."""
    return node.node.get_content(metadata_mode=MetadataMode.NONE)


__all__ = [
    "KnowledgeRetriever",
    "SearchList",
    "SearchTrace",
    "citation",
    "parse_queries",
    "retrieval_options",
    "to_node",
]
