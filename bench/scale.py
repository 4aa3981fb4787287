"""Throughput of one deployment shared by 1, 2 and 4 worker processes, against one embedded process.

Scenarios (each worker is a separate interpreter running a closed loop, one operation in flight):

* ``embedded x1``: the default (SQLite + qdrant-edge in a folder; one process by design);
* ``server xN``: N processes on one PostgreSQL database + one Chroma server (``chroma run``),
  selected by ``LMH_RECORD_STORE_URL`` / ``LMH_VECTOR_STORE_URL`` only.

The mix is half adds (one memory: embed, insert, outbox, vector upsert) and half hybrid
retrievals (embed the query, dense + keyword, fuse) for 16 users shared by all workers.
Printed: operations per second over all workers, and p50/p95 latency of adds and retrievals.

Usage::

    python bench/scale.py                          # MiniLM, 15 s per scenario
    python bench/scale.py --embed hashing          # store-bound: the package's hashing embedder
    python bench/scale.py --seconds 30 --json bench/results/scale.json

Needs PostgreSQL (``LMH_TEST_POSTGRES_URL``, default the CI role) and the ``chroma`` extra.
Figures depend on the machine: on 2 shared cores the embedding model is the bottleneck, so
more processes cannot add throughput beyond the cores; ``--embed hashing`` shows the stores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USERS = [f"user{i:02d}" for i in range(16)]
WORDS = [
    "garden",
    "river",
    "coffee",
    "chess",
    "violin",
    "mountain",
    "recipe",
    "bicycle",
    "library",
    "winter",
    "harbour",
    "market",
    "train",
    "museum",
    "festival",
    "lantern",
    "orchard",
    "sailing",
    "pottery",
    "telescope",
]


# --------------------------------------------------------------------------------------------------
# worker (a separate interpreter)
# --------------------------------------------------------------------------------------------------


async def _worker(args: argparse.Namespace) -> dict[str, object]:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    memories = {
        user: HierarchicalMemory.from_defaults(user_id=user, session_id=f"bench{args.worker}", persist_dir=args.persist)
        for user in USERS
    }
    rng = random.Random(args.worker)
    sentence = lambda: " ".join(rng.choice(WORDS) for _ in range(12))  # noqa: E731
    await memories[USERS[0]].episodic.aretrieve("warm up", limit=1)
    for user in USERS[:4]:  # a little data so retrievals have something to fuse
        await memories[user].episodic.aadd(f"{user} likes {sentence()}")
    print("READY", flush=True)
    sys.stdin.readline()
    adds: list[float] = []
    retrievals: list[float] = []
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        memory = memories[rng.choice(USERS)]
        started = time.perf_counter()
        if rng.random() < 0.5:
            await memory.episodic.aadd(f"note: {sentence()}")
            adds.append(time.perf_counter() - started)
        else:
            await memory.episodic.aretrieve(f"what about {rng.choice(WORDS)} and {rng.choice(WORDS)}?", limit=5)
            retrievals.append(time.perf_counter() - started)
    for memory in memories.values():
        memory.close()
    return {"adds": adds, "retrievals": retrievals}


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--persist", required=True)
    args = parser.parse_args(argv)
    result = asyncio.run(_worker(args))
    print("RESULT " + json.dumps(result), flush=True)


# --------------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_scenario(name: str, processes: int, env: dict[str, str], seconds: float, persist: Path) -> dict[str, object]:
    """Start ``processes`` workers, release them together, collect their latencies."""
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(i), "--seconds", str(seconds), "--persist", str(persist)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for i in range(processes)
    ]
    for worker in workers:
        line = worker.stdout.readline() if worker.stdout else ""
        if line.strip() != "READY":
            raise SystemExit(f"{name}: a worker failed to start")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    adds: list[float] = []
    retrievals: list[float] = []
    for worker in workers:
        out, _ = worker.communicate(timeout=seconds + 300)
        result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
        adds += result["adds"]
        retrievals += result["retrievals"]
    ops = len(adds) + len(retrievals)
    return {
        "scenario": name,
        "processes": processes,
        "seconds": seconds,
        "ops": ops,
        "ops_per_s": ops / seconds,
        "adds_per_s": len(adds) / seconds,
        "retrievals_per_s": len(retrievals) / seconds,
        "add_p50_ms": 1000 * statistics.median(adds) if adds else float("nan"),
        "add_p95_ms": 1000 * _percentile(adds, 0.95),
        "retrieve_p50_ms": 1000 * statistics.median(retrievals) if retrievals else float("nan"),
        "retrieve_p95_ms": 1000 * _percentile(retrievals, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--embed", default="default", help="'default' (MiniLM) or 'hashing'")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    from servers import ChromaServer, fresh_pg_database

    base_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "LMH_EMBED_MODEL": args.embed,
    }
    for key in ("LMH_RECORD_STORE_URL", "LMH_VECTOR_STORE_URL", "LMH_QDRANT_URL", "LMH_GRAPH_STORE_URL"):
        base_env.pop(key, None)
    results = []
    with tempfile.TemporaryDirectory(prefix="lmh-bench-scale-") as tmp:
        folder = Path(tmp)
        results.append(run_scenario("embedded x1", 1, base_env, args.seconds, folder / "embedded"))
        print(_row(results[-1]), flush=True)
        server = ChromaServer(folder / "chroma").start()
        try:
            for processes in args.workers:
                with fresh_pg_database("lmh_bench") as pg_url:
                    env = {
                        **base_env,
                        "LMH_RECORD_STORE_URL": pg_url,
                        "LMH_VECTOR_STORE_URL": server.url,
                        "LMH_COLLECTION_PREFIX": f"bench{processes}",
                    }
                    results.append(
                        run_scenario(f"server x{processes}", processes, env, args.seconds, folder / "shared")
                    )
                print(_row(results[-1]), flush=True)
        finally:
            server.stop()
    print()
    print(_table(results, args.embed))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"embed": args.embed, "cores": os.cpu_count(), "results": results}, indent=2))


def _row(r: dict[str, object]) -> str:
    return (
        f"| {r['scenario']:<12} | {r['ops_per_s']:7.1f} | {r['adds_per_s']:6.1f} | {r['retrievals_per_s']:6.1f} | "
        f"{r['add_p50_ms']:6.0f} / {r['add_p95_ms']:6.0f} | {r['retrieve_p50_ms']:6.0f} / {r['retrieve_p95_ms']:6.0f} |"
    )


def _table(results: list[dict[str, object]], embed: str) -> str:
    head = (
        f"embeddings: {embed}, {os.cpu_count()} cores\n"
        "| scenario     |   ops/s | adds/s | retr/s | add p50 / p95 ms | retrieve p50 / p95 ms |\n"
        "|--------------|---------|--------|--------|------------------|-----------------------|"
    )
    return "\n".join([head, *(_row(r) for r in results)])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[1:])
    else:
        main()
