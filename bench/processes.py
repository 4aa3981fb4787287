"""Many processes on one embedded folder (issue 30): throughput, ``aget`` latency and write visibility.

For each process count (``--procs``, default 1,2,4,8) and each mix (``--mixes``: put/get shares, default
80/20 and 20/80), that many worker processes open one fresh folder with ``from_defaults()`` and, for
``--seconds``, each run ``aput`` (a chat turn) or ``aget(input=...)`` at random in that mix, on one user
(a session per worker). Printed per run: operations/s over all workers, ``aget`` p50/p95 and ``aput``
p50 (ms). The same workers then run on LlamaIndex's own ``Memory`` over one SQLite file (its
``async_database_uri``), side by side.

Write visibility: one process writes ``--probes`` memories carrying a fresh token, another searches for
each token in a loop; the delay from the writer's acknowledgement to the first search that finds it is
reported as p50/p95/max (ms), for the dense path alone (``StoreContext.adense_search``) and for
``search()``.

Timings on a shared machine are upper bounds. Usage: ``python bench/processes.py`` (the default model),
``--smoke`` for CI (hashing embeddings, 1 and 2 processes, 2 s, a few probes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e3 if values else float("nan")


async def _ours(folder: str, worker: int, embed_model: str) -> tuple[Any, Any, Any]:
    from llama_index_memory_hierarchy import HierarchicalMemory

    memory = HierarchicalMemory.from_defaults(
        user_id="alice", session_id=f"w{worker}", persist_dir=folder, embed_model=embed_model
    )
    return memory, memory.aput, memory.aget


async def _baseline(folder: str, worker: int, embed_model: str) -> tuple[Any, Any, Any]:
    from llama_index.core.memory import Memory

    memory = Memory.from_defaults(
        session_id="alice", token_limit=3000, async_database_uri=f"sqlite+aiosqlite:///{folder}/llama.db"
    )
    return None, memory.aput, memory.aget


def _worker(kind: str, folder: str, worker: int, put_share: float, seconds: float, embed_model: str, start: Any,
            out: Any) -> None:  # fmt: skip
    from llama_index.core.base.llms.types import ChatMessage

    async def run() -> dict[str, Any]:
        memory, put, get = await (_ours if kind == "ours" else _baseline)(folder, worker, embed_model)
        await get(input="warm up")  # the model loaded and the stores open before the clock starts
        out.put("ready")
        start.wait()
        rng = random.Random(worker)
        puts: list[float] = []
        gets: list[float] = []
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            i += 1
            began = time.perf_counter()
            if rng.random() < put_share:
                await put(ChatMessage(role="user", content=f"worker {worker} turn {i}: the kettle is in the shed"))
                puts.append(time.perf_counter() - began)
            else:
                await get(input=f"where is the kettle {i}")
                gets.append(time.perf_counter() - began)
        if memory is not None:
            memory.close()
        return {"puts": puts, "gets": gets}

    out.put(asyncio.run(run()))


def run_mix(kind: str, procs: int, put_share: float, seconds: float, embed_model: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        start, out = ctx.Event(), ctx.Queue()
        workers = [
            ctx.Process(target=_worker, args=(kind, folder, w, put_share, seconds, embed_model, start, out))
            for w in range(procs)
        ]
        for process in workers:
            process.start()
        for _ in workers:  # every worker has opened the folder and warmed up: all start together
            assert out.get(timeout=600) == "ready"
        start.set()
        results = [out.get(timeout=seconds + 600) for _ in workers]
        for process in workers:
            process.join(60)
    puts = [v for r in results for v in r["puts"]]
    gets = [v for r in results for v in r["gets"]]
    return {
        "kind": kind,
        "procs": procs,
        "put_share": put_share,
        "ops_per_s": round((len(puts) + len(gets)) / seconds, 1),
        "puts": len(puts),
        "gets": len(gets),
        "aget_p50_ms": round(_pct(gets, 50), 2),
        "aget_p95_ms": round(_pct(gets, 95), 2),
        "aput_p50_ms": round(_pct(puts, 50), 2),
    }


def _writer(folder: str, embed_model: str, probes: int, ready: Any, acks: Any, seen: Any) -> None:
    from llama_index_memory_hierarchy import HierarchicalMemory

    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="writer", persist_dir=folder,
                                              embed_model=embed_model)  # fmt: skip
    ready.wait()
    for _ in range(probes):
        token = f"probe{uuid.uuid4().hex[:12]}"
        memory.episodic.add(f"the {token} lantern hangs by the door")
        acks.put((token, time.time()))
        seen.get(timeout=120)  # the next probe once the reader found this one
    memory.close()


def _reader(folder: str, embed_model: str, probes: int, ready: Any, acks: Any, seen: Any, out: Any) -> None:
    from llama_index_memory_hierarchy import HierarchicalMemory

    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="reader", persist_dir=folder,
                                              embed_model=embed_model)  # fmt: skip
    context, runtime = memory.context, memory.context.runtime
    memory.search("warm up")
    ready.set()
    dense: list[float] = []
    fused: list[float] = []
    for _ in range(probes):
        token, acked = acks.get(timeout=120)
        vector = runtime.run(context.embeddings.aembed_query(f"the {token} lantern hangs by the door"))
        found_dense = found_search = None
        deadline = time.time() + 30
        while (found_dense is None or found_search is None) and time.time() < deadline:
            if found_search is None and any(token in m.content for m in memory.search(token, limit=3)):
                found_search = time.time()
            if found_dense is None:
                hits = runtime.run(context.adense_search("alice", vector, limit=1))
                item = memory.episodic.get(hits[0][0]) if hits else None
                if item is not None and token in item.content:
                    found_dense = time.time()
        dense.append((found_dense or deadline) - acked)
        fused.append((found_search or deadline) - acked)
        seen.put(True)
    memory.close()
    out.put({"dense": dense, "search": fused})


def visibility(embed_model: str, probes: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        ready, acks, seen, out = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Queue()
        writer = ctx.Process(target=_writer, args=(folder, embed_model, probes, ready, acks, seen))
        reader = ctx.Process(target=_reader, args=(folder, embed_model, probes, ready, acks, seen, out))
        reader.start()
        writer.start()
        result = out.get(timeout=probes * 60 + 600)
        writer.join(60)
        reader.join(60)
    return {
        path: {
            "p50_ms": round(_pct(values, 50), 1),
            "p95_ms": round(_pct(values, 95), 1),
            "max_ms": round(max(values) * 1e3, 1),
        }
        for path, values in result.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", default="1,2,4,8")
    parser.add_argument("--mixes", default="0.8,0.2", help="put shares (0.8: 80%% put, 20%% get)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--embed-model", default="default")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="CI: hashing embeddings, 1 and 2 processes, 2 s")
    args = parser.parse_args()
    if args.smoke:
        args.procs, args.seconds, args.probes, args.embed_model = "1,2", 2.0, 5, "hashing"
    rows = []
    print(f"{'kind':<9} {'procs':>5} {'put%':>5} {'ops/s':>8} {'aget p50':>9} {'aget p95':>9} {'aput p50':>9}")
    for share in [float(s) for s in args.mixes.split(",")]:
        for procs in [int(p) for p in args.procs.split(",")]:
            for kind in ("ours",) if args.no_baseline else ("ours", "llama"):
                row = run_mix(kind, procs, share, args.seconds, args.embed_model)
                rows.append(row)
                print(
                    f"{kind:<9} {procs:>5} {share * 100:>4.0f}% {row['ops_per_s']:>8} {row['aget_p50_ms']:>9} "
                    f"{row['aget_p95_ms']:>9} {row['aput_p50_ms']:>9}",
                    flush=True,
                )
    seen = visibility(args.embed_model, args.probes)
    print(f"write visibility in another process ({args.probes} probes): {json.dumps(seen)}")
    load = os.getloadavg()
    print(f"load average during the run: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": rows, "visibility": seen, "load": load}, indent=2))


if __name__ == "__main__":
    main()
