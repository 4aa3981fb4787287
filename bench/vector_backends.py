"""Filtered-query latency and upsert throughput: EdgeVectorIndex vs qdrant-client local mode.

Random unit vectors spread over many users; every query is filtered by one user (as the
memory tiers do), and a second query kind adds memory_type and a timestamp range.

    python bench/vector_backends.py                       # small, < 1 min
    python bench/vector_backends.py --points 10000 50000  # the figures in the docs
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.vector import EdgeVectorIndex, qdrant_vector_index


def make_points(n: int, users: int, dim: int, seed: int) -> list[VectorPoint]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    kinds = ("episodic", "semantic")
    return [
        VectorPoint(
            str(uuid.uuid4()),
            vectors[i],
            {
                "user_id": f"user{i % users}",
                "namespace": "memory",
                "memory_type": kinds[i % 2],
                "timestamp": float(i),
                "importance": float(rng.random()),
            },
        )
        for i in range(n)
    ]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


async def time_queries(index: VectorIndex, n: int, users: int, dim: int, queries: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    simple: list[float] = []
    combined: list[float] = []
    for q in range(queries):
        vector = rng.standard_normal(dim).astype(np.float32)
        user = f"user{rng.integers(users)}"
        start = time.perf_counter()
        hits = await index.search(vector, VectorFilter(user_id=user), 10)
        simple.append((time.perf_counter() - start) * 1000)
        assert len(hits) == min(10, n // users), (q, len(hits))
        flt = VectorFilter(user_id=user, equals={"memory_type": "semantic"}, ranges={"timestamp": (n * 0.25, None)})
        start = time.perf_counter()
        await index.search(vector, flt, 10)
        combined.append((time.perf_counter() - start) * 1000)
    return {
        "user_p50": statistics.median(simple),
        "user_p95": pct(simple, 95),
        "combo_p50": statistics.median(combined),
        "combo_p95": pct(combined, 95),
    }


async def run_backend(
    name: str, opener: Callable[[Path], VectorIndex], n: int, args: argparse.Namespace
) -> dict[str, float | str]:
    folder = Path(tempfile.mkdtemp(prefix="lmh-bench-"))
    try:
        points = make_points(n, args.users, args.dim, seed=n)
        index = opener(folder)
        start = time.perf_counter()
        for i in range(0, n, args.batch):
            await index.upsert(points[i : i + args.batch])
        upsert_s = time.perf_counter() - start
        row: dict[str, float | str] = {"backend": name, "points": n, "upsert_per_s": n / upsert_s}
        before = await time_queries(index, n, args.users, args.dim, args.queries, seed=1)
        row.update({f"{k}_fresh": v for k, v in before.items()})
        if isinstance(index, EdgeVectorIndex):
            start = time.perf_counter()
            await index.optimize()
            row["optimize_s"] = time.perf_counter() - start
            after = await time_queries(index, n, args.users, args.dim, args.queries, seed=2)
            row.update({f"{k}_optimized": v for k, v in after.items()})
        await index.close()
        start = time.perf_counter()
        reopened = opener(folder)
        row["reopen_s"] = time.perf_counter() - start
        assert await reopened.count() == n
        await reopened.close()
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, nargs="+", default=[1000], help="index sizes to test")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50, help="queries of each kind")
    parser.add_argument("--batch", type=int, default=500, help="points per upsert call")
    parser.add_argument("--backends", nargs="+", default=["edge", "qdrant-local"], choices=["edge", "qdrant-local"])
    args = parser.parse_args()

    space = f"bench-{args.dim}"
    openers: dict[str, Callable[[Path], VectorIndex]] = {
        "edge": lambda folder: EdgeVectorIndex(folder, space, args.dim),
        "qdrant-local": lambda folder: qdrant_vector_index(space, args.dim, path=folder / "qdrant"),
    }
    print(
        f"{args.users} users, {args.dim}-d random vectors, {args.queries} queries of each kind, "
        f"upserts in batches of {args.batch} (flushed per batch)"
    )
    print("latency in ms: 'user' = filter by user; 'combo' = user + memory_type + timestamp range\n")
    header = (
        f"{'backend':<13}{'points':>8}{'upsert/s':>10}{'user p50':>10}{'user p95':>10}"
        f"{'combo p50':>11}{'combo p95':>11}{'reopen s':>10}"
    )
    print(header)
    print("-" * len(header))
    for n in args.points:
        for name in args.backends:
            row = asyncio.run(run_backend(name, openers[name], n, args))
            for stage in ("fresh", "optimized"):
                if f"user_p50_{stage}" not in row:
                    continue
                label = name if stage == "fresh" else "  +optimize"
                print(
                    f"{label:<13}{n:>8}{row['upsert_per_s'] if stage == 'fresh' else 0:>10.0f}"
                    f"{row[f'user_p50_{stage}']:>10.2f}{row[f'user_p95_{stage}']:>10.2f}"
                    f"{row[f'combo_p50_{stage}']:>11.2f}{row[f'combo_p95_{stage}']:>11.2f}"
                    f"{row['reopen_s'] if stage == 'fresh' else 0:>10.2f}"
                )
            if "optimize_s" in row:
                print(f"{'':<13}{'':>8}  (optimize took {row['optimize_s']:.2f} s)")


if __name__ == "__main__":
    main()
