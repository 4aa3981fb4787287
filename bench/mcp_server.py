"""What the MCP server costs: ``remember`` / ``recall`` through ``lmh mcp --http`` against the same tools in process.

In one run it measures, with the bundled embedding model:

* the idleness reference: the embedding model's own speed on single texts in this process;
* the baseline: ``MemoryToolSpec.aremember`` / ``arecall`` in this process (no protocol);
* the server: the same calls through the MCP SDK's client over streamable HTTP with a bearer
  token, one client session, sequential (p50/p95 ms per call), then ``--clients`` concurrent
  clients of two users writing ``--writes`` each (calls/s, and that every write is listed).

Prints a table and the ratios server / in-process. Usage: ``python bench/mcp_server.py``
(``--smoke`` for a quick check).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.tools import MemoryToolSpec

TOKENS = {
    "carol-bench-token-0123456789": "carol",  # the sequential session
    "alice-bench-token-0123456789": "alice",  # the concurrent clients, half each
    "bob-bench-token-0123456789ab": "bob",
}
ID = re.compile(r"id=([0-9a-f-]{36})")


def fact(i: int) -> str:
    return f"Note {i}: the user booked a table for {i % 7 + 2} people at restaurant number {i}."


def question(i: int) -> str:
    return f"How many people did the user book restaurant number {i} for?"


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> list[float]:
    out = []
    for call in calls:
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def summary(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(folder: Path, tokens: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "llama_index_memory_hierarchy", "mcp", "--http", "--port", str(port)]
    command += ["--dir", str(folder), "--tokens", str(tokens), "--llm", "none"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"lmh mcp exited {process.returncode}: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("lmh mcp did not start")


async def session_calls(url: str, token: str, work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await work(session)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=50, help="sequential remember calls (and per concurrent client)")
    parser.add_argument("--recalls", type=int, default=20, help="sequential recall calls")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--smoke", action="store_true", help="a few calls only")
    args = parser.parse_args()
    if args.smoke:
        args.writes, args.recalls, args.clients = 5, 3, 2
    root = Path(tempfile.mkdtemp(prefix="lmh-bench-mcp-"))
    rows: list[tuple[str, str]] = []

    # in process: the idleness reference and the baseline
    memory = HierarchicalMemory.from_defaults(user_id="alice", session_id="bench", persist_dir=str(root / "inproc"))
    model = memory.context.embeddings.model
    model.get_text_embedding("warm up")
    embed_ms = await timed([lambda i=i: asyncio.to_thread(model.get_text_embedding, fact(i)) for i in range(50)])
    spec = MemoryToolSpec(memory)
    local_w = await timed([lambda i=i: spec.aremember(fact(i), "episodic") for i in range(args.writes)])
    local_r = await timed([lambda i=i: spec.arecall(question(i), "all", 5) for i in range(args.recalls)])
    memory.close()

    tokens = root / "tokens.toml"
    tokens.write_text("".join(f'[[tokens]]\ntoken = "{t}"\nuser = "{u}"\n\n' for t, u in TOKENS.items()))
    started = time.perf_counter()
    process, url = start_server(root / "served", tokens, root / "server.log")
    start_s = time.perf_counter() - started
    try:
        token = next(iter(TOKENS))

        async def sequential(session: ClientSession) -> tuple[list[float], list[float]]:
            def remember(i: int) -> Awaitable[Any]:
                return session.call_tool("remember", {"content": fact(i), "tier": "episodic"})

            def recall(i: int) -> Awaitable[Any]:
                return session.call_tool("recall", {"query": question(i)})

            writes = await timed([lambda i=i: remember(i) for i in range(args.writes)])
            return writes, await timed([lambda i=i: recall(i) for i in range(args.recalls)])

        served_w, served_r = await session_calls(url, token, sequential)

        async def client(number: int, token: str) -> int:
            async def work(session: ClientSession) -> int:
                stored = 0
                for i in range(args.writes):
                    content = fact(100_000 * (number + 1) + i)
                    result = await session.call_tool("remember", {"content": content, "tier": "episodic"})
                    stored += len(ID.findall(result.content[0].text)) if not result.is_error else 0
                return stored

            return await session_calls(url, token, work)

        users = list(TOKENS)[1:]
        started = time.perf_counter()
        stored = await asyncio.gather(*(client(n, users[n % 2]) for n in range(args.clients)))
        concurrent_s = time.perf_counter() - started
        listed = 0
        for token in users:
            result = await session_calls(url, token, lambda s: s.call_tool("memory_stats", {}))
            listed += json.loads(result.content[0].text)["episodic"]["count"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

    load = os.getloadavg()[0]
    e50, e95 = summary(embed_ms)
    lw50, lw95 = summary(local_w)
    lr50, lr95 = summary(local_r)
    sw50, sw95 = summary(served_w)
    sr50, sr95 = summary(served_r)
    total = args.clients * args.writes
    rows += [
        ("machine load (1 min average)", f"{load:.1f} on {os.cpu_count()} CPUs"),
        ("embedding one text, in process (reference)", f"p50 {e50:.1f} ms, p95 {e95:.1f} ms"),
        ("remember, MemoryToolSpec in process", f"p50 {lw50:.1f} ms, p95 {lw95:.1f} ms"),
        ("remember, MCP over HTTP (one session)", f"p50 {sw50:.1f} ms, p95 {sw95:.1f} ms  x{sw50 / lw50:.2f}"),
        ("recall, MemoryToolSpec in process", f"p50 {lr50:.1f} ms, p95 {lr95:.1f} ms"),
        ("recall, MCP over HTTP (one session)", f"p50 {sr50:.1f} ms, p95 {sr95:.1f} ms  x{sr50 / lr50:.2f}"),
        ("server start until listening", f"{start_s:.1f} s"),
        (f"{args.clients} concurrent clients x {args.writes} remember", f"{total / concurrent_s:.1f} calls/s"),
        ("writes acknowledged / listed afterwards", f"{sum(stored)} / {listed} of {total}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"lmh mcp benchmark ({args.writes} writes, {args.recalls} recalls; timings on this machine as loaded)")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    if sum(stored) != total or listed != total:
        raise SystemExit("writes were lost")


if __name__ == "__main__":
    asyncio.run(main())
