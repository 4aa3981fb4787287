"""Latency and scale of HierarchicalMemory against LlamaIndex's own Memory + VectorMemoryBlock.

For each size N (memories spread over ``--users`` users) it measures, in one process with
one embedding model:

* ``add_many`` ingestion throughput with real embedding (turns/s), on ``--ingest`` turns;
* ``HierarchicalMemory.aget(input=...)`` latency p50/p95 (query embedding included, distinct
  queries so no cache helps), and ``retrieve()`` per tier;
* the baseline: ``Memory`` with a ``VectorMemoryBlock`` on ``QdrantVectorStore`` (qdrant-client
  local mode), same vectors, same queries, scoped by its ``session_id`` per user;
* peak RSS.

The large stores are filled with precomputed embeddings (the same vectors for both systems)
so that a 100k run takes minutes, not an hour of embedding. Prints a table, writes JSON and a
PNG chart. Usage: ``python bench/latency.py --sizes 1000,10000`` (``--sizes 1000,10000,100000``
for the full run, ``--smoke`` for CI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
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
from llama_index_memory_hierarchy.types import MemoryType

logger = logging.getLogger("bench.latency")


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


async def measure_hierarchy(
    folder: Path, texts: list[str], vectors: np.ndarray, users: int, queries: list[str], ingest: int
) -> dict[str, Any]:
    """Fill a hierarchy with ``texts`` over ``users`` users and time aget/retrieve for one of them."""
    probe = HierarchicalMemory.from_defaults(user_id="u000", session_id="bench", persist_dir=str(folder))
    context = probe.context
    # ingestion with real embedding, through the public API
    sample = texts[:ingest]
    start = time.perf_counter()
    for offset in range(0, len(sample), 256):
        await probe.episodic.aadd_many(sample[offset : offset + 256])
    ingest_rate = len(sample) / (time.perf_counter() - start)
    await probe.episodic.aclear()
    # bulk fill with precomputed vectors, user by user
    from llama_index_memory_hierarchy.tiers.episodic import EpisodicMemory
    from llama_index_memory_hierarchy.tiers.semantic import SemanticMemory

    start = time.perf_counter()
    facts = 0
    for u in range(users):
        tier = EpisodicMemory(user_id=f"u{u:03d}", session_id="history", context=context)
        every = list(range(u, len(texts), users))
        idx = [i for n, i in enumerate(every) if n % 10]  # 9 in 10 are episodic turns, 1 in 10 a semantic fact
        items = [
            MemoryItem(content=texts[i], user_id=f"u{u:03d}", session_id="history", memory_type=MemoryType.EPISODIC)
            for i in idx
        ]
        for offset in range(0, len(items), 2000):
            await context.runtime.arun(
                tier.aadd_items(items[offset : offset + 2000], embeddings=list(vectors[idx[offset : offset + 2000]]))
            )
        triplets = [tuple(texts[i].split(" ", 1)) for n, i in enumerate(every) if not n % 10]
        semantic = SemanticMemory(user_id=f"u{u:03d}", session_id="history", context=context)
        facts += len(await semantic.aadd_facts([(who, "did", what) for who, what in triplets]))
    fill_rate = len(texts) / (time.perf_counter() - start)
    memory = HierarchicalMemory.from_defaults(user_id="u007", session_id="bench", persist_dir=str(folder))
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
    retrieve_ms = await timed(lambda q: memory.episodic.aretrieve(q, 5), [q + " ?" for q in queries[5:]])
    working_ms = await timed(lambda q: memory.working.aretrieve(q, 5), [q + " !" for q in queries[5:]])
    profile = await profile_search(memory, queries[5:])
    memory.close()
    probe.close()
    return {
        "ingest_turns_per_s": ingest_rate,
        "fill_records_per_s": fill_rate,
        "semantic_facts": facts,
        "aget_p50_ms": percentile(aget_ms, 50),
        "aget_p95_ms": percentile(aget_ms, 95),
        "episodic_retrieve_p50_ms": percentile(retrieve_ms, 50),
        "episodic_retrieve_p95_ms": percentile(retrieve_ms, 95),
        "working_retrieve_p50_ms": percentile(working_ms, 50),
        "profile_p50_ms": profile,
    }


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
        await step("aget", lambda q: memory.aget(input=q)),
    ]
    return dict(steps)


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
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--queries", type=int, default=105)
    parser.add_argument("--ingest", type=int, default=2000, help="turns embedded through add_many for throughput")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", type=Path, default=Path("bench/results/latency.json"))
    parser.add_argument("--chart", type=Path, default=None, help="PNG path (e.g. docs/img/latency.png)")
    parser.add_argument("--smoke", action="store_true", help="CI: 1000 memories, 25 queries, 300 ingested")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.queries, args.ingest = "1000", 25, 300
    logging.basicConfig(level=logging.WARNING)
    sizes = [int(s) for s in args.sizes.split(",")]
    all_texts = turns(max(sizes))
    queries = questions(args.queries)

    from llama_index_memory_hierarchy.embeddings import EmbeddingService

    service = EmbeddingService("default")
    start = time.perf_counter()
    vectors = np.asarray(await service.aembed_texts(all_texts), dtype=np.float32)
    model_rate = len(all_texts) / (time.perf_counter() - start)
    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            row: dict[str, Any] = {"size": size, "users": args.users}
            row["hierarchy"] = await measure_hierarchy(
                Path(tmp) / "h", all_texts[:size], vectors[:size], args.users, queries, min(args.ingest, size)
            )
            if not args.no_baseline:
                row["baseline"] = await measure_baseline(
                    Path(tmp) / "b", all_texts[:size], vectors[:size], args.users, queries, service.model
                )
                row["speedup_p95"] = row["baseline"]["aget_p95_ms"] / row["hierarchy"]["aget_p95_ms"]
            row["peak_rss_mb"] = peak_rss_mb()
            results.append(row)
    report = {"model_only_texts_per_s": model_rate, "cpu_count": os.cpu_count(), "results": results}
    print(f"embedding model alone: {model_rate:.0f} texts/s (batched; the machine's idleness reference)")
    headers = ["size", "ingest/s", "aget p50", "aget p95", "retr p95", "base p50", "base p95", "x p95", "RSS MB"]
    print(" ".join(f"{h:>9}" for h in headers))
    nan = float("nan")
    for r in results:
        h, b = r["hierarchy"], r.get("baseline", {})
        cells = [
            r["size"],
            h["ingest_turns_per_s"],
            h["aget_p50_ms"],
            h["aget_p95_ms"],
            h["episodic_retrieve_p95_ms"],
            b.get("aget_p50_ms", nan),
            b.get("aget_p95_ms", nan),
            r.get("speedup_p95", nan),
            r["peak_rss_mb"],
        ]
        print(" ".join(f"{c:>9.1f}" for c in cells))
    for r in results:
        steps = ", ".join(f"{k} {v:.1f}" for k, v in r["hierarchy"]["profile_p50_ms"].items())
        print(f"profile at {r['size']} (p50 ms, each step alone): {steps}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    if args.chart:
        chart(results, args.chart)


if __name__ == "__main__":
    asyncio.run(main())
