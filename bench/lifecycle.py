"""Costs of the memory lifecycle on the embedded stores, offline paths (MiniLM, spaCy, no LLM).

Runs one user through ``--exchanges`` conversation exchanges (``put_messages`` of a user and an
assistant message, then ``get()`` as an agent would), with a small history budget so that the
running summary is rewritten regularly, then measures:

* ``get()`` latency p50/p95 over the conversation, and how many calls folded turns into the summary;
* ``consolidate()`` (offline extraction of every user turn into facts, session summaries);
* ``forget(dry_run=True)`` across the four tiers and ``retrieve_memories`` across tiers;
* ``export_user`` / ``forget_user`` (with compaction) / ``import_user`` of the whole user.

Usage: ``python bench/lifecycle.py --exchanges 100``. Prints a table and writes
``bench/results/lifecycle-<exchanges>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

TOPICS = ["the garden", "my commute", "the book club", "a pasta recipe", "the budget", "a hike", "work", "the car"]


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=100)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        memory = HierarchicalMemory.from_defaults(
            user_id="bench", session_id="s1", persist_dir=folder, chat_history_token_limit=400
        )
        manager = memory.manager
        memory.put(ChatMessage(role="user", content="I am allergic to peanuts and I live in Utrecht."))
        memory.get()  # model and stores warm
        gets: list[float] = []
        folds = 0
        for i in range(args.exchanges):
            topic = TOPICS[i % len(TOPICS)]
            memory.put_messages(
                [
                    ChatMessage(role="user", content=f"Note {i}: I keep thinking about {topic} and what to do next."),
                    ChatMessage(role="assistant", content=f"For {topic}, take it one step at a time (note {i})."),
                ]
            )
            covered = manager.compressor.covered_turns("s1")
            start = time.perf_counter()
            memory.get()
            gets.append(time.perf_counter() - start)
            folds += manager.compressor.covered_turns("s1") != covered
        figures["get_p50_ms"], figures["get_p95_ms"] = p(gets, 0.5), p(gets, 0.95)
        figures["summary_rewrites"] = folds

        start = time.perf_counter()
        report = manager.consolidate()
        figures["consolidate_s"] = time.perf_counter() - start
        figures["consolidated_events"] = len(report.distilled)
        figures["facts"] = len(report.facts)

        start = time.perf_counter()
        forget = manager.forget("decay", dry_run=True)
        figures["forget_dry_run_ms"] = (time.perf_counter() - start) * 1000
        figures["forget_considered"] = sum(t.considered for t in forget.tiers.values())

        times = []
        for i in range(20):
            start = time.perf_counter()
            manager.retrieve_memories(f"what did I say about {TOPICS[i % len(TOPICS)]}?", limit=5)
            times.append(time.perf_counter() - start)
        figures["retrieve_p50_ms"], figures["retrieve_p95_ms"] = p(times, 0.5), p(times, 0.95)

        path = Path(folder) / "export.json"
        start = time.perf_counter()
        exported = manager.export_user(None, path)
        figures["export_s"] = time.perf_counter() - start
        figures["records"] = exported.records
        figures["export_mb"] = path.stat().st_size / 1e6
        start = time.perf_counter()
        manager.forget_user()
        figures["forget_user_s"] = time.perf_counter() - start
        start = time.perf_counter()
        manager.import_user(path)
        figures["import_s"] = time.perf_counter() - start
        memory.close()
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:10.2f}" if isinstance(value, float) else f"{key:<{width}}  {value:10d}")
    out = Path(__file__).parent / "results" / f"lifecycle-{args.exchanges}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"exchanges": args.exchanges, **figures}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
