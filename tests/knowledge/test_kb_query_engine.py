"""The knowledge query engine: bounded merged context, grounded answers, citations, streaming, write-back."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_memory_hierarchy.knowledge.chunking import MarkdownHeadingSplitter
from llama_index_memory_hierarchy.knowledge.query_engine import (
    INSUFFICIENT_ANSWER,
    build_context,
    truncate_at_boundary,
)

BATTERY = "How often is the lithium battery bank inspected?"
BATTERY_HEADING = "Aurora Station Handbook > Power > Battery maintenance"


def _words(text: str) -> int:
    return len(text.split())


def _chunk_nodes(text: str, scores: dict[int, float], size: int = 12, overlap: int = 3) -> list[NodeWithScore]:
    splitter = MarkdownHeadingSplitter(chunk_size=size, chunk_overlap=overlap)
    spans = splitter.split_spans(text)
    nodes = []
    for i, span in enumerate(spans):
        if i in scores:
            meta = {
                "doc_id": "d1",
                "file_name": "d1.md",
                "part": 0,
                "chunk_index": i,
                "start_char": span.start,
                "end_char": span.end,
                "heading_path": " > ".join(span.headings),
            }
            nodes.append(NodeWithScore(node=TextNode(text=text[span.start : span.end], metadata=meta), score=scores[i]))
    return nodes


def test_context_merges_adjacent_chunks_without_repeating_overlap() -> None:
    text = " ".join(f"Fact {i} is about item {i}." for i in range(40))
    nodes = _chunk_nodes(text, {1: 0.5, 2: 0.9, 3: 0.4, 7: 0.8})
    context = build_context(nodes, token_limit=10_000, count_tokens=_words)
    assert [b.score for b in context.blocks] == [0.9, 0.8]  # best passage first
    merged = context.blocks[0]
    first, last = merged.nodes[0].node.metadata, merged.nodes[-1].node.metadata
    assert merged.text == text[first["start_char"] : last["end_char"]]  # overlap not duplicated
    assert len(merged.nodes) == 3 and context.blocks[1].nodes[0].node.metadata["chunk_index"] == 7
    assert context.text.startswith("[1] d1.md\n") and "\n\n[2] d1.md\n" in context.text
    assert [n.score for n in context.nodes] == [0.9, 0.8, 0.5, 0.4]


def test_context_is_bounded_and_cut_at_a_paragraph() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 20 for i in range(6)]
    text = "\n\n".join(paragraphs)
    node = NodeWithScore(node=TextNode(text=text), score=1.0)
    small = NodeWithScore(node=TextNode(text="Tiny extra passage."), score=0.5)
    context = build_context([node, small], token_limit=60, count_tokens=_words)
    assert context.tokens <= 60
    block = context.blocks[0]
    assert block.truncated and block.text == "\n\n".join(paragraphs[:2]).rstrip()
    assert context.blocks[1].text == "Tiny extra passage."  # a smaller passage still fits
    assert truncate_at_boundary("One. Two three four five six.", 2, _words) == "One."
    assert truncate_at_boundary("Onlyonelongword " * 5, 2, _words) is None


@pytest.fixture
def llm(ingested):
    ingested[2].reset()
    return ingested[2]


@pytest.fixture
def kb(ingested, llm):
    return ingested[0]


def test_answer_is_grounded_cited_and_uses_mqe_and_hyde(kb, llm) -> None:
    llm.answer = lambda prompt: "Every 14 days, logging the cell voltages [1]."
    engine = kb.as_query_engine(llm=llm)  # defaults: mqe_queries=3, hyde=True
    response = engine.query(BATTERY)
    assert str(response) == "Every 14 days, logging the cell voltages [1]."
    assert [len(llm.prompts_of(kind)) for kind in ("mqe", "hyde", "answer")] == [1, 1, 1]
    prompt = llm.prompts_of("answer")[0]
    assert (
        f"[1] handbook.md › {BATTERY_HEADING}" in prompt
        or f"[1] handbook.md › Aurora Station Handbook > Power; {BATTERY_HEADING}" in prompt
    )
    assert "Inspect the lithium battery bank every 14 days" in prompt and f"Question: {BATTERY}" in prompt
    assert INSUFFICIENT_ANSWER in prompt  # the model is told what to say when the sources lack the answer
    top = response.source_nodes[0]
    assert top.node.metadata["file_name"] == "handbook.md" and top.node.metadata["heading_path"] == BATTERY_HEADING
    assert top.node.metadata["file_path"].endswith("handbook.md")
    scores = [n.score for n in response.source_nodes]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 5
    meta = response.metadata
    assert meta["insufficient_context"] is False and meta["citations"][0]["number"] == 1
    assert len(meta["trace"]["mqe_queries"]) == 3 and meta["trace"]["hyde_passage"]


def test_insufficient_context_is_said_plainly(make_kb, kb, llm) -> None:
    empty = make_kb("empty")
    response = empty.as_query_engine(llm=llm, mqe_queries=0, hyde=False).query("What is the capital of Peru?")
    assert str(response) == INSUFFICIENT_ANSWER and response.metadata["insufficient_context"]
    assert response.source_nodes == [] and llm.prompts_of("answer") == []  # no LLM call without context

    llm.answer = lambda prompt: INSUFFICIENT_ANSWER
    response = kb.as_query_engine(llm=llm).query_with("What is the capital of Peru?", mqe_queries=0, hyde=False)
    assert response.metadata["insufficient_context"] is True
    assert llm.prompts_of("mqe") == [] and llm.prompts_of("hyde") == []  # switched off for this call


def test_streaming_sync_and_async(kb, llm) -> None:
    llm.answer = lambda prompt: "Twice a week at the base of the plant."
    engine = kb.as_query_engine(llm=llm, streaming=True, mqe_queries=0, hyde=False)
    response = engine.query("How is drinking water made?")
    assert "".join(response.response_gen) == "Twice a week at the base of the plant."
    assert response.source_nodes and response.metadata["insufficient_context"] is False


async def test_async_query_and_async_streaming(kb, llm) -> None:
    llm.answer = lambda prompt: "It is kept in the red cabinet [1]."
    engine = kb.as_query_engine(llm=llm, mqe_queries=2, hyde=True)
    response = await engine.aquery("Where is acetazolamide kept?")
    assert str(response) == "It is kept in the red cabinet [1]."
    assert response.source_nodes[0].node.metadata["heading_path"] == "Medical Guide > Altitude sickness"
    assert llm.max_in_flight == 2

    streaming = kb.as_query_engine(llm=llm, streaming=True, mqe_queries=0, hyde=False)
    response = await streaming.aquery("Where is acetazolamide kept?")
    tokens = [token async for token in response.async_response_gen()]
    assert "".join(tokens) == "It is kept in the red cabinet [1]."


async def test_answers_written_back_to_memory_with_their_sources(make_kb, make_memory, doc_dir: Path, llm) -> None:
    memory = make_memory(user_id="alice")
    kb = make_kb(embed_model=None)
    kb.add_documents(doc_dir / "medical.docx")
    llm.answer = lambda prompt: "Rewarm them in water at 38 degrees [1]."
    engine = kb.as_query_engine(llm=llm, mqe_queries=0, hyde=False, write_back=memory.episodic)
    response = engine.query("How do I treat frostbite?")
    item = memory.episodic.get(response.metadata["memory_id"])
    assert item.content == "Q: How do I treat frostbite?\nA: Rewarm them in water at 38 degrees [1]."
    assert item.metadata["source"] == "knowledge_base" and item.metadata["knowledge_base"] == "docs"
    assert item.metadata["citations"][0]["file_name"] == "medical.docx"
    assert item.metadata["citations"][0]["heading_path"] == "Medical Guide > Frostbite"
    response = await engine.aquery("Where is acetazolamide kept?")
    assert memory.episodic.get(response.metadata["memory_id"]) is not None


class _Reverse(BaseNodePostprocessor):
    calls: int = 0

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None):
        self.calls += 1
        return list(reversed(nodes))


def test_rerank_and_postprocessors_are_applied(kb, llm) -> None:
    rerank = _Reverse()
    engine = kb.as_query_engine(llm=llm, mqe_queries=0, hyde=False, similarity_top_k=2, rerank=rerank)
    assert engine.retriever.similarity_top_k == 6  # candidates for the reranker
    nodes = engine.retrieve(QueryBundle(BATTERY))
    assert rerank.calls == 1 and len(nodes) == 2
    plain = kb.as_retriever(similarity_top_k=6).retrieve(BATTERY)
    assert [n.node.node_id for n in nodes] == [n.node.node_id for n in reversed(plain)][:2]
