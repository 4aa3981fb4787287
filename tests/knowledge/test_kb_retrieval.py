"""Knowledge retrieval: hybrid search with citations, MQE's N searches, HyDE's passage, RRF fusion."""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_memory_hierarchy.errors import LLMRequiredError
from llama_index_memory_hierarchy.knowledge.retriever import parse_queries

QUESTIONS = [
    (
        "How often is the lithium battery bank inspected?",
        "handbook.md",
        "Aurora Station Handbook > Power > Battery maintenance",
    ),
    ("Where is acetazolamide kept?", "medical.docx", "Medical Guide > Altitude sickness"),
    ("How deep did the ice core drill go?", "glaciology.pdf", ""),
    ("What camera does the survey drone carry?", "survey.html", "Penguin survey > Survey equipment"),
    ("When is the seismometer calibrated?", "instruments.csv", ""),
    ("Who is the station doctor?", "station.json", "contacts"),
    ("What does the cook bake on Sunday?", "kitchen.txt", ""),
]


@pytest.fixture
def embed_model(ingested):
    ingested[1].reset()
    return ingested[1]


@pytest.fixture
def llm(ingested):
    ingested[2].reset()
    return ingested[2]


@pytest.fixture
def kb(ingested, embed_model, llm):
    return ingested[0]


def test_hybrid_retrieval_cites_the_right_file_and_heading(kb, llm) -> None:
    retriever = kb.as_retriever(similarity_top_k=3)
    for question, file_name, heading in QUESTIONS:
        top = retriever.retrieve(question)[0]
        assert top.node.metadata["file_name"] == file_name, question
        assert top.node.metadata["heading_path"] == heading, question
        assert top.node.metadata["source"].endswith(file_name) and top.node.metadata["memory_id"] == top.node.node_id
    assert retriever.retrieve("How deep did the ice core drill go?")[0].node.metadata["page_label"] == "1"
    kinds = [(s.kind, s.source) for s in retriever.last_trace.searches]
    assert kinds == [("dense", "query"), ("keyword", "query")]
    assert llm.prompts == []  # MQE and HyDE are off by default


def test_mqe_searches_every_generated_query(kb, llm, embed_model) -> None:
    llm.mqe = lambda query, n: ["acetazolamide red cabinet", "altitude sickness medicine storage", "clinic drugs"][:n]
    retriever = kb.as_retriever(similarity_top_k=3)
    nodes = retriever.retrieve_with("where is the mountain-sickness medicine?", mqe_queries=3)
    mqe_prompts = llm.prompts_of("mqe")
    assert len(mqe_prompts) == 1 and "Generate 3 search queries" in mqe_prompts[0]
    trace = retriever.last_trace
    assert trace.mqe_queries == ["acetazolamide red cabinet", "altitude sickness medicine storage", "clinic drugs"]
    assert trace.llm_calls == 1
    searched = [(s.kind, s.source, s.text) for s in trace.searches]
    assert len(searched) == 2 * (1 + 3)  # a dense and a keyword search per query
    for alternative in trace.mqe_queries:
        assert ("dense", "mqe", alternative) in searched and ("keyword", "mqe", alternative) in searched
        assert alternative in embed_model.queries  # embedded as a query
    keyword_hits = next(s.ids for s in trace.searches if s.kind == "keyword" and s.text == "acetazolamide red cabinet")
    assert keyword_hits and nodes[0].node.node_id == keyword_hits[0]
    assert nodes[0].node.metadata["file_name"] == "medical.docx"
    retriever.retrieve("where is the mountain-sickness medicine?")
    assert len(llm.prompts_of("mqe")) == 1  # the switch held for one call only


def test_hyde_passage_is_embedded_as_a_document_and_searched(kb, llm, embed_model) -> None:
    passage = "Ice core samples are stored at minus 30 degrees in the cold lab."
    llm.hyde = lambda question: passage
    retriever = kb.as_retriever(similarity_top_k=3, hyde=True)
    nodes = retriever.retrieve("Where do we keep the samples?")
    hyde_prompts = llm.prompts_of("hyde")
    assert len(hyde_prompts) == 1 and "Where do we keep the samples?" in hyde_prompts[0]
    trace = retriever.last_trace
    assert trace.hyde_passage == passage
    assert passage in embed_model.documents and passage not in embed_model.queries
    hyde_list = next(s for s in trace.searches if s.source == "hyde")
    assert hyde_list.kind == "dense" and hyde_list.text == passage
    assert ("dense", "query") in [(s.kind, s.source) for s in trace.searches]  # alongside the original query
    target = nodes[0]
    assert hyde_list.ids[0] == target.node.node_id
    assert target.node.metadata["file_name"] == "glaciology.pdf" and target.node.metadata["page_label"] == "2"


def test_fusion_is_reciprocal_rank_not_raw_score(kb, llm) -> None:
    llm.mqe = lambda query, n: ["battery voltage log", "blue binder"][:n]
    retriever = kb.as_retriever(similarity_top_k=6, mqe_queries=2, hyde=True)
    nodes = retriever.retrieve("battery checks")
    trace = retriever.last_trace
    k = retriever.rrf_k
    expected: dict[str, float] = {}
    for search in trace.searches:
        for rank, memory_id in enumerate(search.ids, start=1):
            expected[memory_id] = expected.get(memory_id, 0.0) + 1.0 / (k + rank)
    best = sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    assert [(n.node.node_id, pytest.approx(n.score)) for n in nodes] == [(i, pytest.approx(s)) for i, s in best]
    assert all(n.score <= len(trace.searches) / (k + 1) for n in nodes)  # RRF values, not cosines or BM25
    assert len(trace.searches) == 2 * 3 + 1

    weighted = kb.as_retriever(similarity_top_k=6, mqe_queries=2, hyde=True, expansion_weight=0.25)
    nodes = weighted.retrieve("battery checks")
    expected = {}
    for search in weighted.last_trace.searches:
        weight = 1.0 if search.source == "query" else 0.25
        for rank, memory_id in enumerate(search.ids, start=1):
            expected[memory_id] = expected.get(memory_id, 0.0) + weight / (k + rank)
    best = sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    assert [(n.node.node_id, pytest.approx(n.score)) for n in nodes] == [(i, pytest.approx(s)) for i, s in best]


async def test_async_expansion_calls_run_concurrently(kb, llm) -> None:
    retriever = kb.as_retriever(similarity_top_k=3)
    nodes = await retriever.aretrieve_with("How deep did the ice core drill go?", mqe_queries=2, hyde=True)
    assert nodes and retriever.last_trace.llm_calls == 2
    assert llm.max_in_flight == 2  # the MQE and HyDE calls overlapped
    assert {s.source for s in retriever.last_trace.searches} == {"query", "mqe", "hyde"}


def test_expansion_failure_degrades_to_plain_search(kb, llm) -> None:
    def broken(query: str, n: int) -> list[str]:
        raise RuntimeError("rate limited")

    llm.mqe = broken
    retriever = kb.as_retriever(similarity_top_k=2, mqe_queries=2)
    nodes = retriever.retrieve("Where is acetazolamide kept?")
    assert nodes[0].node.metadata["file_name"] == "medical.docx"
    assert retriever.last_trace.expansion_errors == ["MQE: RuntimeError: rate limited"]


def test_expansion_without_an_llm_is_a_clear_error(make_kb, doc_dir: Path, monkeypatch) -> None:
    from llama_index.core import Settings

    import llama_index_memory_hierarchy.llms.local as local

    monkeypatch.setattr(local, "local_llm_available", lambda: False)
    monkeypatch.setattr(Settings, "_llm", None)
    kb = make_kb(llm=None)
    kb.add_documents(doc_dir / "kitchen.txt")
    assert kb.as_retriever().retrieve("bread")  # plain search needs no LLM
    with pytest.raises(LLMRequiredError, match="multi-query expansion"):
        kb.as_retriever(mqe_queries=2).retrieve("bread")


def test_hyde_from_llamaindex_transform_survives_the_engine(kb, llm) -> None:
    """An external HyDEQueryTransform + TransformQueryEngine keeps the passage (custom_embedding_strs)."""
    from llama_index.core.indices.query.query_transform import HyDEQueryTransform
    from llama_index.core.query_engine import RetrieverQueryEngine, TransformQueryEngine

    llm.hyde = lambda question: "Rewarm frostbitten fingers in warm water, never by rubbing."
    retriever = kb.as_retriever(similarity_top_k=2)
    engine = TransformQueryEngine(RetrieverQueryEngine.from_args(retriever, llm=llm), HyDEQueryTransform(llm=llm))
    response = engine.query("what should I do about frozen fingers?")
    custom = [s for s in retriever.last_trace.searches if s.source == "custom"]
    assert len(custom) == 1 and custom[0].text.startswith("Rewarm frostbitten")
    assert response.source_nodes[0].node.metadata["heading_path"] == "Medical Guide > Frostbite"


def test_parse_queries_strips_markers_and_duplicates() -> None:
    text = 'Queries:\n1. first one\n2) second one\n- first one\n* "third"\n\nQuery 4: fourth\nfifth'
    assert parse_queries(text, "original", 4) == ["first one", "second one", "third", "fourth"]
    assert parse_queries("original\nORIGINAL\nnew", "Original", 3) == ["new"]


def test_parse_queries_skips_code_fences_and_lead_in_lines() -> None:
    text = "Here are three alternative search queries:\n```python\nreset the router\n```\nrouter factory reset"
    assert parse_queries(text, "how do I reset my router?", 3) == ["reset the router", "router factory reset"]
