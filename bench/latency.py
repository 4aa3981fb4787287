"""Latency and scale of HierarchicalMemory against LlamaIndex's own Memory + VectorMemoryBlock.

For each size N (memories spread over ``--users`` users, 1 in 10 a semantic fact) it measures,
in one process with the default embedding model (``--embed-model``):

* ``HierarchicalMemory.aget(input=...)`` latency p50/p95 for one user (query embedding
  included, distinct queries so no cache helps), ``retrieve()`` per tier, and each step of the
  cross-tier search and each other read of a ``get()`` alone, and the CPU time of an ``aget`` (where the
  milliseconds go; ``--profile`` adds a pyinstrument profile of the ``aget`` calls at the largest size);
* the baseline at ``--baseline-sizes``: ``Memory`` with a ``VectorMemoryBlock`` on
  ``QdrantVectorStore`` (qdrant-client local mode), same vectors, same queries, scoped by its
  ``session_id`` per user;
* ``add_many`` ingestion throughput with real embedding (turns/s), on ``--ingest`` turns;
* the embedding model's own speed (query p50 wall and CPU time, batched texts/s) and the load
  average, in the same run: they say how idle the machine was (figures are upper bounds).

The stores are filled with the corpus' vectors (embedded once by the model and cached) and kept
in ``--cache`` (built once per model and size; each run measures a fresh copy), so a 100k run
takes minutes after the first. Prints a table, writes JSON and optionally a PNG chart. Usage:
``python bench/latency.py`` (10k and 100k, the baseline at 10k), ``--sizes 1000,10000``,
``--smoke`` for CI (1k, a temporary cache).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from _synthetic import questions, turns

from llama_index_memory_hierarchy import HierarchicalMemory, MemoryItem
from llama_index_memory_hierarchy.embeddings import EmbeddingService
from llama_index_memory_hierarchy.types import MemoryType

logger = logging.getLogger("bench.latency")

#: Bump when the way stores are filled changes: cached stores of older versions are rebuilt.
STORE_VERSION = 2


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


async def timed(fn: Any, inputs: list[str]) -> list[float]:
    out = []
    for text in inputs:
        start = time.perf_counter()
        await fn(text)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


async def model_speed(service: EmbeddingService, queries: list[str], texts: list[str]) -> dict[str, float]:
    """The model alone: one query at a time (wall and CPU ms, cache off) and batched texts/s."""
    probe = EmbeddingService(service.model, query_cache_size=0)
    await probe.aembed_query("warm up")
    wall, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        await probe.aembed_query(f"{query} (model alone)")
        wall.append((time.perf_counter() - start) * 1000.0)
        cpu.append((time.process_time() - start_cpu) * 1000.0)
    start = time.perf_counter()
    await probe.aembed_texts(texts)
    return {
        "query_p50_ms": percentile(wall, 50),
        "query_p95_ms": percentile(wall, 95),
        "query_cpu_p50_ms": percentile(cpu, 50),
        "texts_per_s": len(texts) / (time.perf_counter() - start),
    }


#: Texts per cached block of corpus vectors (a 10k run reuses the first block of a 100k run).
VECTOR_BLOCK = 10_000


def corpus_vectors(service: EmbeddingService, texts: list[str], cache: Path) -> np.ndarray:
    """The corpus embedded by the model, once: cached as ``.npy`` blocks by model space and texts."""
    blocks = []
    for start in range(0, len(texts), VECTOR_BLOCK):
        block = texts[start : start + VECTOR_BLOCK]
        digest = hashlib.sha1("\n".join(block).encode()).hexdigest()[:12]
        path = cache / f"vectors-{service.space}-{len(block)}-{digest}.npy"
        if not path.is_file():
            logger.warning("embedding %d corpus texts once (cached in %s)", len(block), path)
            vectors = np.asarray(service.embed_texts(block), dtype=np.float32)
            cache.mkdir(parents=True, exist_ok=True)
            np.save(path.with_suffix(".tmp.npy"), vectors)
            path.with_suffix(".tmp.npy").rename(path)
        blocks.append(np.load(path))
    return np.concatenate(blocks)


async def fill_store(folder: Path, texts: list[str], vectors: np.ndarray, users: int, embed_model: Any) -> int:
    """Fill ``folder`` with ``texts`` over ``users`` users: 9 in 10 episodic turns (precomputed
    vectors, one transaction per 2,000), 1 in 10 a semantic fact (embedded, graph included).
    Returns the number of facts."""
    from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
    from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory

    memory = HierarchicalMemory.from_defaults(
        user_id="u000", session_id="history", persist_dir=str(folder), embed_model=embed_model
    )
    context = memory.context
    facts = 0
    for u in range(users):
        user = f"u{u:03d}"
        tier = EpisodicMemory(user_id=user, session_id="history", context=context)
        every = list(range(u, len(texts), users))
        idx = [i for n, i in enumerate(every) if n % 10]
        items = [
            MemoryItem(content=texts[i], user_id=user, session_id="history", memory_type=MemoryType.EPISODIC)
            for i in idx
        ]
        for offset in range(0, len(items), 2000):
            chunk = items[offset : offset + 2000]
            await context.runtime.arun(tier.aadd_items(chunk, embeddings=list(vectors[idx[offset : offset + 2000]])))
        triplets = [tuple(texts[i].split(" ", 1)) for n, i in enumerate(every) if not n % 10]
        semantic = SemanticMemory(user_id=user, session_id="history", context=context)
        facts += len(await semantic.aadd_facts([(who, "did", what) for who, what in triplets]))
    memory.close()
    return facts


async def cached_store(
    cache: Path, texts: list[str], vectors: np.ndarray, users: int, service: EmbeddingService
) -> tuple[Path, dict[str, Any]]:
    """The filled store for this model, size and user count: built once into ``cache``, reused after."""
    digest = hashlib.sha1(f"v{STORE_VERSION}\n{users}\n".encode() + "\n".join(texts).encode()).hexdigest()[:10]
    folder = cache / f"store-{service.space}-{len(texts)}-{users}u-{digest}"
    manifest = folder / "built.json"
    if manifest.is_file():
        return folder, json.loads(manifest.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    building = folder.with_name(folder.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    start = time.perf_counter()
    facts = await fill_store(building, texts, vectors, users, service.model)
    info = {"records": len(texts), "semantic_facts": facts, "fill_s": time.perf_counter() - start}
    (building / "built.json").write_text(json.dumps(info))
    building.rename(folder)
    return folder, info


async def measure_hierarchy(folder: Path, queries: list[str], embed_model: Any, profile: Path | None) -> dict[str, Any]:
    """Time aget/retrieve for one user (u007) of the store in ``folder``."""
    memory = HierarchicalMemory.from_defaults(
        user_id="u007", session_id="bench", persist_dir=str(folder), embed_model=embed_model
    )
    from llama_index.core.base.llms.types import ChatMessage

    await memory.aput_messages(
        [
            ChatMessage(role="user", content="Hi, let's talk about my week."),
            ChatMessage(role="assistant", content="Sure!"),
        ]
    )
    warm = queries[:5]
    await timed(lambda q: memory.aget(input=q), warm)
    aget_ms = await timed(lambda q: memory.aget(input=q), queries[5:])
    cpu_ms = []  # CPU time of the process (every thread) per aget: what load inflates least
    for query in queries[5:]:
        start = time.process_time()
        await memory.aget(input=f"{query} (cpu)")
        cpu_ms.append((time.process_time() - start) * 1000.0)
    runtime_ms = await runtime_cpu(memory, queries[5:])
    retrieve_ms = await timed(lambda q: memory.episodic.aretrieve(q, 5), [q + " ?" for q in queries[5:]])
    working_ms = await timed(lambda q: memory.working.aretrieve(q, 5), [q + " !" for q in queries[5:]])
    steps = await profile_search(memory, queries[5:])
    if profile is not None:
        from pyinstrument import Profiler

        async def profiled() -> str:
            # in the memory's runtime thread, where aget's work runs (pyinstrument samples one thread)
            profiler = Profiler(async_mode="enabled", interval=0.0005)
            profiler.start()
            await timed(lambda q: memory.aget(input=q), [f"{q} (profiled)" for q in queries[5:]])
            profiler.stop()
            return profiler.output_text(unicode=False, color=False, show_all=False)

        profile.parent.mkdir(parents=True, exist_ok=True)
        profile.write_text(await memory.context.runtime.arun(profiled()))
    memory.close()
    return {
        "aget_p50_ms": percentile(aget_ms, 50),
        "aget_p95_ms": percentile(aget_ms, 95),
        "aget_cpu_p50_ms": percentile(cpu_ms, 50),
        "aget_cpu_p95_ms": percentile(cpu_ms, 95),
        "aget_runtime_cpu_p50_ms": percentile(runtime_ms, 50),
        "episodic_retrieve_p50_ms": percentile(retrieve_ms, 50),
        "episodic_retrieve_p95_ms": percentile(retrieve_ms, 95),
        "working_retrieve_p50_ms": percentile(working_ms, 50),
        "profile_p50_ms": steps,
    }


async def measure_ingest(folder: Path, texts: list[str], embed_model: Any) -> float:
    """``add_many`` with real embedding, batches of 256, into a fresh store: turns/s."""
    memory = HierarchicalMemory.from_defaults(
        user_id="ingest", session_id="bench", persist_dir=str(folder), embed_model=embed_model
    )
    await memory.episodic.aadd_many(texts[:8])  # opens the stores
    start = time.perf_counter()
    for offset in range(0, len(texts), 256):
        await memory.episodic.aadd_many(texts[offset : offset + 256])
    rate = len(texts) / (time.perf_counter() - start)
    memory.close()
    return rate


async def profile_search(memory: HierarchicalMemory, queries: list[str]) -> dict[str, float]:
    """Where the milliseconds of one ``aget`` go: each step of the cross-tier search timed alone (p50).

    Fresh query texts for each step, so that the query-embedding cache never answers.
    """
    from llama_index_memory_hierarchy.ranking.pipeline import keyword_terms

    context, user = memory.context, memory.user_id
    vector = await context.embeddings.aembed_query(queries[0] + " (profile)")
    ids = [i for i, _ in await context.runtime.arun(context.adense_search(user, vector, limit=40))]

    async def step(name: str, make: Any) -> tuple[str, float]:
        return name, percentile(await timed(make, [f"{q} ({name})" for q in queries]), 50)

    steps = [
        await step("embed_query", lambda q: context.embeddings.aembed_query(q)),
        await step("dense_search", lambda q: context.runtime.arun(context.adense_search(user, vector, limit=40))),
        await step(
            "keyword_search",
            lambda q: context.runtime.arun(context.records.keyword_search(user, " ".join(keyword_terms(q)), limit=40)),
        ),
        await step(
            "fetch_candidates", lambda q: context.runtime.arun(context.records.get(user, ids, with_embeddings=True))
        ),
        await step("graph_hops", lambda q: memory.semantic.agraph_hops(q, 40)),
        await step("search", lambda q: memory.asearch(q, 10)),
        # the reads of a get() besides its search (every object and process on the session shares them)
        await step("history", lambda q: memory.aget_all()),
        await step("instructions", lambda q: memory.procedural.ainstructions(include_history=True)),
        await step("aget", lambda q: memory.aget(input=q)),
    ]
    return dict(steps)


async def runtime_cpu(memory: HierarchicalMemory, queries: list[str]) -> list[float]:
    """CPU ms of the memory's runtime thread (where aget's Python runs) per ``aget``: what load inflates least."""

    async def one(query: str) -> float:
        start = time.thread_time()
        await memory.aget(input=query)
        return (time.thread_time() - start) * 1000.0

    return [await memory.context.runtime.arun(one(f"{q} (runtime cpu)")) for q in queries]


async def measure_baseline(
    folder: Path, texts: list[str], vectors: np.ndarray, users: int, queries: list[str], embed_model: Any
) -> dict[str, Any]:
    """LlamaIndex Memory + VectorMemoryBlock on QdrantVectorStore (local mode), same vectors."""
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory import Memory
    from llama_index.core.memory.memory_blocks.vector import VectorMemoryBlock
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import AsyncQdrantClient

    store = QdrantVectorStore(collection_name="baseline", aclient=AsyncQdrantClient(path=str(folder / "qdrant")))
    start = time.perf_counter()
    nodes = [
        TextNode(text=t, embedding=vectors[i].tolist(), metadata={"session_id": f"u{i % users:03d}"})
        for i, t in enumerate(texts)
    ]
    for offset in range(0, len(nodes), 2000):
        await store.async_add(nodes[offset : offset + 2000])
    fill_rate = len(texts) / (time.perf_counter() - start)
    block = VectorMemoryBlock(vector_store=store, embed_model=embed_model, similarity_top_k=5)
    memory = Memory.from_defaults(
        session_id="u007",
        token_limit=3000,
        memory_blocks=[block],
        async_database_uri=f"sqlite+aiosqlite:///{folder / 'chat.db'}",
    )
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="Hi, let's talk about my week."),
            ChatMessage(role="assistant", content="Sure!"),
        ]
    )

    async def one(query: str) -> None:
        await memory.aput(ChatMessage(role="user", content=query))
        await memory.aget()

    await timed(one, queries[:5])
    aget_ms = await timed(one, queries[5:])
    return {
        "fill_records_per_s": fill_rate,
        "aget_p50_ms": percentile(aget_ms, 50),
        "aget_p95_ms": percentile(aget_ms, 95),
    }


def chart(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in results]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, [r["hierarchy"]["aget_p95_ms"] for r in results], "o-", label="HierarchicalMemory aget p95")
    ax.plot(sizes, [r["hierarchy"]["aget_p50_ms"] for r in results], "o--", label="HierarchicalMemory aget p50")
    if all("baseline" in r for r in results):
        ax.plot(sizes, [r["baseline"]["aget_p95_ms"] for r in results], "s-", label="Memory+VectorMemoryBlock p95")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories (100 users)")
    ax.set_ylabel("latency (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--queries", type=int, default=105)
    parser.add_argument("--ingest", type=int, default=2000, help="turns embedded through add_many for throughput")
    parser.add_argument("--baseline-sizes", default="10000", help="sizes that also run the LlamaIndex baseline")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--embed-model", default="default", help="embed_model of the library (default: %(default)s)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "lmh-bench-latency")
    parser.add_argument("--json", type=Path, default=Path("bench/results/latency.json"))
    parser.add_argument("--profile", type=Path, default=None, help="pyinstrument text profile of aget (largest size)")
    parser.add_argument("--chart", type=Path, default=None, help="PNG path (e.g. docs/img/latency.png)")
    parser.add_argument("--smoke", action="store_true", help="CI: 1000 memories, 25 queries, 300 ingested")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    scratch = tempfile.TemporaryDirectory()
    if args.smoke:
        args.sizes, args.queries, args.ingest, args.baseline_sizes = "1000", 25, 300, "1000"
        args.cache = Path(scratch.name) / "cache"
    load_before = os.getloadavg()
    sizes = [int(s) for s in args.sizes.split(",")]
    baseline_sizes = set() if args.no_baseline else {int(s) for s in args.baseline_sizes.split(",") if s}
    all_texts = turns(max(sizes))
    queries = questions(args.queries)
    service = EmbeddingService(args.embed_model)
    await service.aprobe()
    model = await model_speed(service, queries, all_texts[: args.ingest])
    vectors = corpus_vectors(service, all_texts, args.cache)
    results = []
    for size in sizes:
        built, info = await cached_store(args.cache, all_texts[:size], vectors[:size], args.users, service)
        with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
            row: dict[str, Any] = {"size": size, "users": args.users, "store": info}
            shutil.copytree(built, Path(tmp) / "h")
            profile = args.profile if size == max(sizes) else None
            row["hierarchy"] = await measure_hierarchy(Path(tmp) / "h", queries, service.model, profile)
            if size in baseline_sizes:
                row["baseline"] = await measure_baseline(
                    Path(tmp) / "b", all_texts[:size], vectors[:size], args.users, queries, service.model
                )
                row["speedup_p95"] = row["baseline"]["aget_p95_ms"] / row["hierarchy"]["aget_p95_ms"]
            row["peak_rss_mb"] = peak_rss_mb()
            results.append(row)
    with tempfile.TemporaryDirectory() as tmp:
        ingest_rate = await measure_ingest(Path(tmp), all_texts[: args.ingest], service.model)
    load_after = os.getloadavg()
    report = {
        "embed_model": args.embed_model,
        "space": service.space,
        "model_alone": model,
        "ingest_turns_per_s": ingest_rate,
        "load_average": {"before": load_before, "after": load_after},
        "cpu_count": os.cpu_count(),
        "results": results,
    }
    print(
        f"model {service.space} alone: query p50 {model['query_p50_ms']:.1f} ms (CPU {model['query_cpu_p50_ms']:.1f}), "
        f"p95 {model['query_p95_ms']:.1f} ms; {model['texts_per_s']:.0f} texts/s batched"
    )
    print(f"add_many with embedding: {ingest_rate:.0f} turns/s ({args.ingest} turns, batches of 256)")
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    headers = [
        "size",
        "facts",
        "aget p50",
        "aget p95",
        "cpu p50",
        "cpu p95",
        "retr p95",
        "base p50",
        "base p95",
        "x p95",
        "RSS MB",
    ]
    print(" ".join(f"{h:>9}" for h in headers))
    nan = float("nan")
    for r in results:
        h, b = r["hierarchy"], r.get("baseline", {})
        cells = [
            r["size"],
            r["store"]["semantic_facts"],
            h["aget_p50_ms"],
            h["aget_p95_ms"],
            h["aget_cpu_p50_ms"],
            h["aget_cpu_p95_ms"],
            h["episodic_retrieve_p95_ms"],
            b.get("aget_p50_ms", nan),
            b.get("aget_p95_ms", nan),
            r.get("speedup_p95", nan),
            r["peak_rss_mb"],
        ]
        print(" ".join(f"{c:>9.1f}" for c in cells))
    for r in results:
        h = r["hierarchy"]
        steps = ", ".join(f"{k} {v:.1f}" for k, v in h["profile_p50_ms"].items())
        print(f"profile at {r['size']} (p50 ms, each step alone): {steps}")
        step = h["profile_p50_ms"]
        print(
            f"where an aget goes at {r['size']} (p50 ms): model query embedding {model['query_p50_ms']:.1f} "
            f"(runs beside the reads), search {step['search']:.1f} (the embedding included), other reads "
            f"{step['history'] + step['instructions']:.2f} (history {step['history']:.2f}, instructions "
            f"{step['instructions']:.2f}), aget {step['aget']:.1f}; CPU per aget: the runtime thread's "
            f"{h['aget_runtime_cpu_p50_ms']:.1f}, the process' {h['aget_cpu_p50_ms']:.1f} (the model's "
            f"{model['query_cpu_p50_ms']:.1f} of it)"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    if args.chart:
        chart(results, args.chart)
    scratch.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
