"""``KnowledgeQueryEngine``: grounded answers from a knowledge base, with citations.

The pipeline is LlamaIndex's (retriever -> node postprocessors -> prompt -> LLM), with one
step of our own in between: :func:`build_context` turns the retrieved chunks into
a bounded context. Adjacent chunks of one document are merged back into one passage (their
overlap is not repeated), passages are ranked by their best chunk, the best are kept
within a token budget that fits the LLM's window, and the last one that does not fit is
cut at a paragraph boundary. Passages are numbered so the answer can cite ``[1]``; the
response's ``source_nodes`` are the chunks used, with file, heading path and score.

The LLM is called directly with the QA prompt (sync, async, streaming): llama-index-core
0.14's simple-summarize synthesizer formats its context as a Python list repr, and
compact/refine may spend several LLM calls on a context that is already bounded.

The query string *and* the ``QueryBundle`` reach the retriever (a ``CustomQueryEngine``
would pass only the string and silently drop a HyDE passage; this engine does not).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.knowledge.chunking import merge_spans
from llama_index_memory_hierarchy.knowledge.retriever import (
    KnowledgeRetriever,
    citation,
    node_text,
    retrieval_options,
)
from llama_index_memory_hierarchy.language import sentence_ends

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM

    from llama_index_memory_hierarchy.knowledge.scope import KnowledgeScope
    from llama_index_memory_hierarchy.tiers.base import MemoryTier

logger = logging.getLogger(__name__)

#: What the engine answers (without asking the LLM) when nothing relevant was retrieved;
#: the prompt asks the LLM to say exactly this when the sources do not contain the answer.
INSUFFICIENT_ANSWER = "I don't know: the documents do not contain the answer."
_INSUFFICIENT_PREFIXES = ("i don't know", "i do not know", "i don’t know")

DEFAULT_QA_TEMPLATE = PromptTemplate(
    "Answer the question using only the numbered sources below, which are excerpts of the user's documents.\n"
    "Cite the sources you use by their number, like [1] or [2][3].\n"
    f'If the sources do not contain the answer, reply exactly: "{INSUFFICIENT_ANSWER}"\n\n'
    "Sources:\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Question: {query_str}\n"
    "Answer: "
)

_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass
class ContextBlock:
    """One numbered passage of the context: merged adjacent chunks of one document."""

    number: int
    citation: str
    text: str
    score: float
    nodes: list[NodeWithScore]
    tokens: int = 0
    truncated: bool = False

    def render(self) -> str:
        return f"[{self.number}] {self.citation}\n{self.text}"


@dataclass
class BuiltContext:
    """The context string given to the LLM and the blocks and chunks in it."""

    text: str
    blocks: list[ContextBlock] = field(default_factory=list)
    tokens: int = 0

    @property
    def nodes(self) -> list[NodeWithScore]:
        """The chunks in the context, best first (the response's ``source_nodes``)."""
        nodes = [n for block in self.blocks for n in block.nodes]
        return sorted(nodes, key=lambda n: n.score or 0.0, reverse=True)


def _default_count_tokens(text: str) -> int:
    from llama_index_memory_hierarchy.text import count_tokens

    return count_tokens(text)


def build_context(
    nodes: Sequence[NodeWithScore],
    token_limit: int = 1500,
    count_tokens: Callable[[str], int] | None = None,
) -> BuiltContext:
    """A bounded, numbered context from retrieved chunks (see the module docstring).

    Nodes from the knowledge base carry ``doc_id``, ``part``, ``chunk_index`` and
    ``start_char``/``end_char``; nodes without them are kept as passages of their own.
    """
    count = count_tokens or _default_count_tokens
    groups: dict[tuple[Any, ...], list[NodeWithScore]] = {}
    for position, node in enumerate(nodes):
        meta = node.node.metadata
        if meta.get("doc_id") is not None and meta.get("start_char") is not None:
            key: tuple[Any, ...] = ("doc", meta["doc_id"], meta.get("part", 0))
        else:
            key = ("node", position)
        groups.setdefault(key, []).append(node)

    candidates: list[tuple[float, str, str, list[NodeWithScore]]] = []
    for members in groups.values():
        members.sort(key=lambda n: (n.node.metadata.get("start_char") or 0, n.node.metadata.get("chunk_index") or 0))
        run: list[NodeWithScore] = []
        for node in members:
            if run and not _adjacent(run[-1], node):
                candidates.append(_passage(run))
                run = []
            run.append(node)
        if run:
            candidates.append(_passage(run))
    candidates.sort(key=lambda c: c[0], reverse=True)

    blocks: list[ContextBlock] = []
    used = 0
    for score, cite, text, members in candidates:
        header = f"[{len(blocks) + 1}] {cite}\n"
        cost = count(header + text) + 2
        truncated = False
        if used + cost > token_limit:
            room = token_limit - used - count(header) - 2
            cut = truncate_at_boundary(text, room, count) if room > 0 else None
            if not cut:
                continue  # a smaller, lower-ranked passage may still fit
            text, truncated = cut, True
            cost = count(header + text) + 2
        blocks.append(ContextBlock(len(blocks) + 1, cite, text, score, members, cost, truncated))
        used += cost
    return BuiltContext(text="\n\n".join(b.render() for b in blocks), blocks=blocks, tokens=used)


def _adjacent(previous: NodeWithScore, node: NodeWithScore) -> bool:
    a, b = previous.node.metadata, node.node.metadata
    indexed = a.get("chunk_index") is not None and b.get("chunk_index") is not None
    if indexed and int(b["chunk_index"]) == int(a["chunk_index"]) + 1:
        return True
    return int(b.get("start_char") or 0) <= int(a.get("end_char") or 0)


def _passage(run: list[NodeWithScore]) -> tuple[float, str, str, list[NodeWithScore]]:
    """Merge a run of adjacent chunks: text without repeated overlap, best score, citation."""
    if len(run) == 1 or run[0].node.metadata.get("start_char") is None:
        text = "\n\n".join(node_text(n) for n in run)
    else:
        text = merge_spans(
            [(int(n.node.metadata["start_char"]), int(n.node.metadata["end_char"]), node_text(n)) for n in run]
        )
    score = max((n.score or 0.0) for n in run)
    first = citation(run[0])
    headings = []
    for node in run:
        heading = node.node.metadata.get("heading_path")
        if heading and heading not in headings:
            headings.append(heading)
    if len(headings) > 1:
        name = str(run[0].node.metadata.get("file_name") or run[0].node.metadata.get("doc_id") or "")
        first = f"{name} › {'; '.join(headings)}"
        page = run[0].node.metadata.get("page_label")
        first += f" (page {page})" if page else ""
    return score, first, text, run


def truncate_at_boundary(text: str, max_tokens: int, count: Callable[[str], int]) -> str | None:
    """The longest prefix of whole paragraphs within ``max_tokens`` (whole sentences of the first
    paragraph if even it is too long); None when not even one sentence fits."""
    if max_tokens <= 0:
        return None
    ends = [m.start() for m in _PARAGRAPH.finditer(text)] + [len(text)]
    best = None
    for end in ends:
        if count(text[:end]) <= max_tokens:
            best = end
        else:
            break
    if best:
        return text[:best].rstrip()
    first = text[: ends[0]]
    best = None
    for end in [*sentence_ends(first), len(first)]:
        if count(first[:end]) <= max_tokens:
            best = end
        else:
            break
    return first[:best].rstrip() if best else None


def is_insufficient(answer: str) -> bool:
    """Whether an answer says the context did not contain it."""
    start = answer.strip().strip("\"'“”").strip().casefold()
    return any(start.startswith(prefix) for prefix in _INSUFFICIENT_PREFIXES)


class KnowledgeQueryEngine(BaseQueryEngine):
    """Answers from a knowledge base, grounded in a bounded context, with citations.

    ``query``/``aquery`` return a ``Response`` (or ``StreamingResponse``/``AsyncStreamingResponse``
    when ``streaming``) whose ``source_nodes`` are the chunks in the context (file, heading
    path, score) and whose ``metadata`` holds ``insufficient_context``, ``citations``, the
    retrieval ``trace`` and, with ``write_back``, the id of the memory written.
    """

    def __init__(
        self,
        retriever: KnowledgeRetriever,
        *,
        llm: LLM | None = None,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        similarity_top_k: int | None = None,
        context_token_limit: int = 1500,
        streaming: bool = False,
        text_qa_template: BasePromptTemplate | None = None,
        write_back: MemoryTier | None = None,
        write_back_importance: float = 0.6,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if (
            isinstance(context_token_limit, bool)
            or not isinstance(context_token_limit, int)
            or context_token_limit < 64
        ):
            raise MemoryValidationError("context_token_limit", f"must be an integer >= 64, got {context_token_limit!r}")
        self.retriever = retriever
        self.llm = llm
        self.node_postprocessors = list(node_postprocessors or [])
        self.similarity_top_k = similarity_top_k or retriever.similarity_top_k
        self.context_token_limit = context_token_limit
        self.streaming = streaming
        self.text_qa_template = text_qa_template or DEFAULT_QA_TEMPLATE
        self.write_back = write_back
        self.write_back_importance = write_back_importance
        self._resolved_llm: LLM | None = None
        super().__init__(callback_manager=callback_manager or CallbackManager([]))

    @classmethod
    def from_scope(
        cls,
        scope: KnowledgeScope,
        *,
        llm: LLM | None = None,
        mqe_queries: int = 3,
        hyde: bool = True,
        similarity_top_k: int = 5,
        rerank: BaseNodePostprocessor | None = None,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        streaming: bool = False,
        rerank_candidates: int = 3,
        **kwargs: Any,
    ) -> KnowledgeQueryEngine:
        """Build over the knowledge base ``scope``; with ``rerank``, ``rerank_candidates`` x top_k chunks are retrieved
        and the reranker (then ``node_postprocessors``) picks the best ``similarity_top_k``."""
        postprocessors = [*([rerank] if rerank is not None else []), *(node_postprocessors or [])]
        for position, processor in enumerate(postprocessors):
            if not isinstance(processor, BaseNodePostprocessor):
                raise MemoryValidationError(
                    "node_postprocessors", f"item {position} is a {type(processor).__name__}, not a node postprocessor"
                )
        fetch = similarity_top_k * rerank_candidates if rerank is not None else similarity_top_k
        retriever = KnowledgeRetriever(scope, similarity_top_k=fetch, mqe_queries=mqe_queries, hyde=hyde, llm=llm)
        return cls(
            retriever,
            llm=llm,
            node_postprocessors=postprocessors,
            similarity_top_k=similarity_top_k,
            streaming=streaming,
            **kwargs,
        )

    # ------------------------------------------------------------------ prompts
    def _get_prompts(self) -> PromptDictType:
        return {"text_qa_template": self.text_qa_template}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "text_qa_template" in prompts:
            self.text_qa_template = prompts["text_qa_template"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"retriever": self.retriever}

    # ------------------------------------------------------------------ per-call switches
    def query_with(
        self, query: str | QueryBundle, *, mqe_queries: int | None = None, hyde: bool | None = None
    ) -> RESPONSE_TYPE:
        """``query`` with MQE or HyDE switched for this call only."""
        with retrieval_options(mqe_queries=mqe_queries, hyde=hyde):
            return self.query(query)

    async def aquery_with(
        self, query: str | QueryBundle, *, mqe_queries: int | None = None, hyde: bool | None = None
    ) -> RESPONSE_TYPE:
        """Async twin of :meth:`query_with`."""
        with retrieval_options(mqe_queries=mqe_queries, hyde=hyde):
            return await self.aquery(query)

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieved chunks after the node postprocessors (rerankers), best ``similarity_top_k``."""
        nodes = self.retriever.retrieve(query_bundle)
        return self._postprocess(nodes, query_bundle)

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Async twin of :meth:`retrieve`."""
        nodes = await self.retriever.aretrieve(query_bundle)
        return self._postprocess(nodes, query_bundle)

    def _postprocess(self, nodes: list[NodeWithScore], query_bundle: QueryBundle) -> list[NodeWithScore]:
        for processor in self.node_postprocessors:
            nodes = processor.postprocess_nodes(nodes, query_bundle=query_bundle)
        return nodes[: self.similarity_top_k]

    # ------------------------------------------------------------------ answering
    def _get_llm(self) -> LLM:
        if self._resolved_llm is None:
            from llama_index_memory_hierarchy.llms import require_llm

            self._resolved_llm = require_llm(self.llm, feature="answering from a knowledge base")
        return self._resolved_llm

    def _token_budget(self, llm: LLM, query: str) -> int:
        """The context budget: ``context_token_limit``, shrunk to fit the LLM's window."""
        try:
            meta = llm.metadata
            window, output = int(meta.context_window), max(int(meta.num_output), 0)
        except Exception:  # third-party metadata may need network or credentials
            return self.context_token_limit
        prompt = _default_count_tokens(self.text_qa_template.get_template()) + _default_count_tokens(query)
        room = window - output - prompt - 64
        return max(64, min(self.context_token_limit, room))

    def _prepare(self, query_bundle: QueryBundle, nodes: list[NodeWithScore]) -> tuple[LLM, BuiltContext]:
        llm = self._get_llm()
        context = build_context(nodes, self._token_budget(llm, query_bundle.query_str))
        return llm, context

    def _metadata(self, context: BuiltContext) -> dict[str, Any]:
        trace = self.retriever.last_trace
        return {
            "insufficient_context": not context.blocks,
            "citations": [
                {"number": b.number, "citation": b.citation, "score": b.score, "truncated": b.truncated}
                for b in context.blocks
            ],
            "context_tokens": context.tokens,
            "trace": trace.model_dump() if trace is not None else None,
        }

    def _insufficient(self, context: BuiltContext) -> RESPONSE_TYPE:
        metadata = self._metadata(context)
        if self.streaming:
            return StreamingResponse(response_gen=iter([INSUFFICIENT_ANSWER]), source_nodes=[], metadata=metadata)
        return Response(response=INSUFFICIENT_ANSWER, source_nodes=[], metadata=metadata)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        nodes = self.retrieve(query_bundle)
        llm, context = self._prepare(query_bundle, nodes)
        if not context.blocks:
            return self._insufficient(context)
        prompt_args = {"context_str": context.text, "query_str": query_bundle.query_str}
        if self.streaming:
            response: Any = StreamingResponse(response_gen=llm.stream(self.text_qa_template, **prompt_args))
        else:
            response = Response(response=llm.predict(self.text_qa_template, **prompt_args))
        return self._finish(query_bundle, context, response)

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        nodes = await self.aretrieve(query_bundle)
        llm, context = self._prepare(query_bundle, nodes)
        if not context.blocks:
            return self._insufficient(context)
        prompt_args = {"context_str": context.text, "query_str": query_bundle.query_str}
        if self.streaming:
            tokens = await llm.astream(self.text_qa_template, **prompt_args)
            response: Any = AsyncStreamingResponse(response_gen=tokens)
        else:
            response = Response(response=await llm.apredict(self.text_qa_template, **prompt_args))
        return await self._afinish(query_bundle, context, response)

    def _finish(self, query_bundle: QueryBundle, context: BuiltContext, response: Any) -> RESPONSE_TYPE:
        metadata = self._metadata(context)
        sources = context.nodes
        if isinstance(response, StreamingResponse):
            return StreamingResponse(
                response_gen=self._stream(query_bundle, response.response_gen, sources, metadata),
                source_nodes=sources,
                metadata=metadata,
            )
        answer = str(response.response or "")
        metadata["insufficient_context"] = is_insufficient(answer)
        if self.write_back is not None and not metadata["insufficient_context"]:
            metadata["memory_id"] = self.write_back.add(**self._memory(query_bundle, answer, sources))
        return Response(response=answer, source_nodes=sources, metadata=metadata)

    async def _afinish(self, query_bundle: QueryBundle, context: BuiltContext, response: Any) -> RESPONSE_TYPE:
        metadata = self._metadata(context)
        sources = context.nodes
        if isinstance(response, AsyncStreamingResponse):
            return AsyncStreamingResponse(
                response_gen=self._astream(query_bundle, response.response_gen, sources, metadata),
                source_nodes=sources,
                metadata=metadata,
            )
        answer = str(response.response or "")
        metadata["insufficient_context"] = is_insufficient(answer)
        if self.write_back is not None and not metadata["insufficient_context"]:
            metadata["memory_id"] = await self._awrite_back(query_bundle, answer, sources)
        return Response(response=answer, source_nodes=sources, metadata=metadata)

    def _stream(
        self, query_bundle: QueryBundle, tokens: Any, sources: list[NodeWithScore], metadata: dict[str, Any]
    ) -> Generator[str, None, None]:
        parts = []
        for token in tokens:
            parts.append(token)
            yield token
        answer = "".join(parts)
        metadata["insufficient_context"] = is_insufficient(answer)
        if self.write_back is not None and not metadata["insufficient_context"]:
            metadata["memory_id"] = self.write_back.add(**self._memory(query_bundle, answer, sources))

    async def _astream(
        self, query_bundle: QueryBundle, tokens: Any, sources: list[NodeWithScore], metadata: dict[str, Any]
    ) -> AsyncGenerator[str, None]:
        parts = []
        async for token in tokens:
            parts.append(token)
            yield token
        answer = "".join(parts)
        metadata["insufficient_context"] = is_insufficient(answer)
        if self.write_back is not None and not metadata["insufficient_context"]:
            metadata["memory_id"] = await self._awrite_back(query_bundle, answer, sources)

    async def _awrite_back(self, query_bundle: QueryBundle, answer: str, sources: list[NodeWithScore]) -> str:
        """Store the answer in the write-back tier (tier coroutines run on the store runtime loop)."""
        assert self.write_back is not None
        coro = self.write_back.aadd(**self._memory(query_bundle, answer, sources))
        return await self.retriever.scope.runtime.arun(coro)

    def _memory(self, query_bundle: QueryBundle, answer: str, sources: list[NodeWithScore]) -> dict[str, Any]:
        """The write-back memory: question and answer, with the chunks it came from."""
        kb = self.retriever.scope
        cited = [
            {
                "doc_id": n.node.metadata.get("doc_id"),
                "file_name": n.node.metadata.get("file_name"),
                "heading_path": n.node.metadata.get("heading_path"),
                "chunk_id": n.node.node_id,
            }
            for n in sources[:8]
        ]
        return {
            "item_or_text": f"Q: {query_bundle.query_str}\nA: {answer.strip()}",
            "importance": self.write_back_importance,
            "metadata": {"source": "knowledge_base", "knowledge_base": kb.name, "citations": cited},
        }


__all__ = [
    "DEFAULT_QA_TEMPLATE",
    "INSUFFICIENT_ANSWER",
    "BuiltContext",
    "ContextBlock",
    "KnowledgeQueryEngine",
    "build_context",
    "is_insufficient",
    "retrieval_options",
    "truncate_at_boundary",
]
