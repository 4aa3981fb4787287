"""Load (slow only): sustained adds and queries from several threads for a few minutes, on one set of
stores with the real embedding model; afterwards counts are exact and memory stayed flat after warm-up.

Memory is read from ``/proc/self/status``: ``RssAnon`` (heap: caches, leaks) is what must stay
flat; ``RssFile`` grows with the data because qdrant-edge maps its segment files into memory.
Duration: ``LMH_LOAD_SECONDS`` (default 180), warm-up a fifth of it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from store_checks import assert_indexes_agree, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory

WORDS = [
    "coffee",
    "train",
    "garden",
    "doctor",
    "invoice",
    "holiday",
    "piano",
    "river",
    "birthday",
    "password",
    "meeting",
    "recipe",
]


def _memory_mb() -> dict[str, float]:
    values: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                values[key] = int(rest.split()[0]) / 1024
    return values


@pytest.mark.slow
def test_sustained_adds_and_queries_keep_memory_flat(tmp_path: Path, minilm: Any) -> None:
    seconds = float(os.environ.get("LMH_LOAD_SECONDS", "180"))
    warmup = seconds / 5
    folder = tmp_path / "memory_data"
    users = [f"load{i}" for i in range(20)]
    memories = {
        u: HierarchicalMemory.from_defaults(user_id=u, session_id="s1", persist_dir=str(folder), embed_model=minilm)
        for u in users
    }
    counts = {"adds": 0, "puts": 0, "queries": 0, "gets": 0}
    added: dict[str, int] = dict.fromkeys(users, 0)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        rng = random.Random(number)
        try:
            while not stop.is_set():
                user = rng.choice(users)
                memory = memories[user]
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
                roll = rng.random()
                if roll < 0.35:
                    ids = memory.episodic.add_many([f"{text} #{rng.random():.6f}" for _ in range(rng.randint(1, 8))])
                    with lock:
                        counts["adds"] += len(ids)
                        added[user] += len(ids)
                elif roll < 0.5:
                    memory.put(ChatMessage(role=MessageRole.USER, content=f"{text} #{rng.random():.6f}"))
                    with lock:
                        counts["puts"] += 1
                        added[user] += 1
                elif roll < 0.85:
                    memory.episodic.retrieve(text, limit=5)
                    with lock:
                        counts["queries"] += 1
                else:
                    memory.get(input=text)
                    with lock:
                        counts["gets"] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    samples: list[tuple[float, dict[str, float]]] = []
    try:
        while time.monotonic() - started < seconds and not errors:
            time.sleep(5)
            samples.append((time.monotonic() - started, _memory_mb()))
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
    assert not errors, errors[0]
    assert all(not t.is_alive() for t in threads), "a worker did not finish: deadlock?"
    elapsed = time.monotonic() - started
    after = [m for t, m in samples if t >= warmup]
    base, last = after[0], after[-1]
    peak_anon = max(m["RssAnon"] for m in after)
    operations = sum(counts.values())
    for user, memory in memories.items():
        assert len(memory.episodic.get_timeline()) == added[user]
    context = memories[users[0]].context
    assert_indexes_agree(read_sqlite(folder), context.runtime.run(vector_ids(context)))
    for memory in memories.values():
        memory.close()
    print(
        f"load (slow): {elapsed:.0f} s, {operations} operations ({operations / elapsed:.1f}/s: {counts}), "
        f"{len(users)} users, 6 threads; after {warmup:.0f} s warm-up RssAnon {base['RssAnon']:.0f} -> "
        f"{last['RssAnon']:.0f} MB (peak {peak_anon:.0f}), RssFile {base['RssFile']:.0f} -> {last['RssFile']:.0f} MB"
    )
    assert peak_anon - base["RssAnon"] < 150, "heap memory kept growing after warm-up"
