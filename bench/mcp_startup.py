"""How fast ``lmh mcp`` over stdio is ready: ``initialize`` and the first ``recall`` of a fresh server.

A desktop client (or LlamaIndex's ``BasicMCPClient`` over stdio, which starts one server per call)
pays this start on every launch. For ``--runs`` fresh servers on one folder holding a few memories,
through the official MCP SDK's stdio client, it measures:

* ``initialize``: from starting the process to the answer of ``initialize``;
* ``first recall``: from the ``initialize`` answer to the answer of the first ``recall`` (the store
  opens and the model loads in the background meanwhile);
* the import time of the server's modules alone (``python -X importtime``) and of the MCP SDK.

Prints p50/max per step, the load average beside them (other work on the machine inflates every
figure). Usage: ``python bench/mcp_startup.py`` (``--runs 5``), ``--smoke`` for a quick check.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from llama_index_memory_hierarchy import HierarchicalMemory


def lmh() -> list[str]:
    exe = shutil.which("lmh")
    return [exe] if exe else [sys.executable, "-m", "llama_index_memory_hierarchy"]


async def one_start(folder: Path, user: str) -> tuple[float, float]:
    """Seconds to ``initialize`` and then to the first ``recall`` answer, for one fresh server."""
    command = [*lmh(), "mcp", "--user", user, "--dir", str(folder), "--llm", "none"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ready = time.perf_counter()
        result = await session.call_tool("recall", {"query": "Which city does the user plan to visit?"})
        recalled = time.perf_counter()
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.is_error or "Lisbon" not in text:
        raise RuntimeError(f"the first recall did not find the memory: {text[:300]!r}")
    return ready - start, recalled - ready


def import_seconds(module: str) -> float:
    """Cumulative import time of ``module`` in a fresh interpreter (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    pattern = re.compile(rf"\|\s*(\d+)\s*\|\s*{re.escape(module)}\s*$")
    return max((int(m.group(1)) for m in map(pattern.search, done.stderr.splitlines()) if m), default=0) / 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh servers started one after another")
    parser.add_argument("--smoke", action="store_true", help="one run")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "memory"
        memory = HierarchicalMemory.from_defaults(user_id="dana", session_id="setup", persist_dir=str(folder))
        await memory.episodic.aadd_many(
            ["Dana plans a trip to Lisbon in May.", "Dana's sister studies marine biology.", "Dana dislikes cilantro."]
        )
        memory.close()
        initialize, recall = [], []
        for _ in range(runs):
            init_s, recall_s = await one_start(folder, "dana")
            initialize.append(init_s)
            recall.append(recall_s)
    imports = {
        module: import_seconds(module)
        for module in (
            "mcp.server.mcpserver",
            "llama_index_memory_hierarchy.mcp_server",
            "llama_index_memory_hierarchy.hierarchy",
        )
    }
    load_after = os.getloadavg()
    print(f"lmh mcp over stdio, {runs} fresh server(s), the MCP SDK's stdio client:")
    print(f"  initialize      p50 {statistics.median(initialize):.2f} s, max {max(initialize):.2f} s")
    print(f"  first recall    p50 {statistics.median(recall):.2f} s, max {max(recall):.2f} s (after initialize)")
    for module, seconds in imports.items():
        print(f"  import {module}: {seconds:.2f} s (cumulative, fresh interpreter)")
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    asyncio.run(main())
