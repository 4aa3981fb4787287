"""Add and retrieve latency of semantic memory at a given number of facts.

Fills one user's semantic memory with ``--size`` synthetic facts (people, companies,
cities; about a third with functional predicates, so supersession happens) in batches
through the public ``aadd_facts`` (real MiniLM embeddings of every fact and entity name,
records, vectors and the embedded SQLite graph), then measures:

* bulk throughput (facts/s) and single ``aadd_fact`` latency p50/p95 at that size;
* ``aretrieve`` (dense + keyword + graph expansion) p50/p95 on distinct questions;
* ``aget_related_entities`` depth 2 and ``aget_facts`` p50/p95;
* cold start: reopening the folder and loading the user's index from the records.

Usage: ``python bench/semantic.py --size 1000`` (``--size 10000`` for the large run).
Prints a table and writes ``bench/results/semantic-<size>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.stores.context import StoreContext

FIRST = [
    "Alice",
    "Bob",
    "Carol",
    "Dave",
    "Erin",
    "Frank",
    "Grace",
    "Heidi",
    "Ivan",
    "Judy",
    "Mallory",
    "Niaj",
    "Olivia",
    "Peggy",
    "Rupert",
    "Sybil",
    "Trent",
    "Uma",
    "Victor",
    "Walter",
    "Xena",
    "Yusuf",
    "Zoe",
    "Aiko",
]
LAST = [
    "Chen",
    "Smith",
    "Garcia",
    "Okafor",
    "Novak",
    "Tanaka",
    "Silva",
    "Kowalski",
    "Haddad",
    "Larsen",
    "Moreau",
    "Rossi",
    "Ivanova",
    "Kim",
    "Nguyen",
    "Singh",
    "Cohen",
    "Murphy",
    "Schmidt",
    "Yilmaz",
]
COMPANIES = [
    "Acme",
    "Initech",
    "Globex",
    "Hooli",
    "Umbrella",
    "Stark Industries",
    "Wayne Enterprises",
    "Wonka",
    "Cyberdyne",
    "Soylent",
    "Tyrell",
    "Aperture",
    "Massive Dynamic",
    "Vandelay",
    "Oceanic",
    "Nakatomi",
]
CITIES = [
    "Paris",
    "Berlin",
    "Lisbon",
    "Austin",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Lima",
    "Oslo",
    "Seoul",
    "Dublin",
    "Prague",
    "Cairo",
    "Denver",
    "Hanoi",
    "Perth",
    "Bogota",
    "Zurich",
]
TOPICS = ["jazz", "chess", "hiking", "sushi", "poetry", "robotics", "sailing", "gardening", "astronomy", "tennis"]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def synthetic_facts(size: int, seed: int = 7) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``size`` facts over about ``size / 4`` people, and the people's names."""
    rng = random.Random(seed)
    people_count = max(size // 4, 10)
    combos = [f"{first} {a}-{b}" for first in FIRST for a in LAST for b in LAST if a != b]
    if people_count > len(combos):
        raise SystemExit(f"at most {len(combos) * 4} facts: not enough distinct synthetic names")
    people = rng.sample(combos, people_count)
    facts: list[tuple[str, str, str]] = []
    for i in range(size):
        person = people[i % people_count] if i < people_count else rng.choice(people)
        kind = rng.random()
        if kind < 0.2:
            facts.append((person, "works_at", rng.choice(COMPANIES)))
        elif kind < 0.35:
            facts.append((person, "lives_in", rng.choice(CITIES)))
        elif kind < 0.7:
            other = rng.choice(people)
            facts.append((person, "knows" if other != person else "likes", other if other != person else "tea"))
        elif kind < 0.85:
            facts.append((person, "likes", rng.choice(TOPICS)))
        else:
            facts.append((rng.choice(COMPANIES), "located_in", rng.choice(CITIES)))
    return facts, people


async def timed(calls: list[Any]) -> list[float]:
    out = []
    for call in calls:
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


async def run(size: int, batch: int, samples: int, folder: Path) -> dict[str, Any]:
    facts, people = synthetic_facts(size)
    memory = HierarchicalMemory.from_defaults(user_id="bench", session_id="s1", persist_dir=str(folder))
    semantic = memory.semantic
    await semantic.aadd_fact("Warm Up", "likes", "benchmarks")  # load the embedding model outside the timings
    start = time.perf_counter()
    for offset in range(0, len(facts), batch):
        await semantic.aadd_facts(facts[offset : offset + batch])
    fill_s = time.perf_counter() - start
    stats = await semantic.aget_stats()

    rng = random.Random(11)
    singles = [(rng.choice(people), "likes", f"{rng.choice(TOPICS)} {i}") for i in range(samples)]
    add_ms = await timed([lambda f=f: semantic.aadd_fact(*f) for f in singles])
    questions = [f"Where does {rng.choice(people)} work?" for _ in range(samples)]
    questions += [f"Who does {rng.choice(people)} know in {rng.choice(CITIES)}?" for _ in range(samples)]
    retrieve_ms = await timed([lambda q=q: semantic.aretrieve(q, 5) for q in questions])
    related_ms = await timed([lambda p=p: semantic.aget_related_entities(p, 2) for p in rng.sample(people, samples)])
    facts_ms = await timed([lambda p=p: semantic.aget_facts(p) for p in rng.sample(people, samples)])
    memory.close()
    StoreContext.close_all()

    start = time.perf_counter()
    reopened = HierarchicalMemory.from_defaults(user_id="bench", session_id="s2", persist_dir=str(folder))
    await reopened.semantic.aget_facts(people[0])
    cold_load_ms = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    await reopened.semantic.aadd_fact(people[1], "likes", "cold starts")
    first_add_after_load_ms = (time.perf_counter() - start) * 1000.0
    reopened.close()
    StoreContext.close_all()
    return {
        "size": size,
        "facts_stored": stats["facts"],
        "current_facts": stats["current_facts"],
        "historical_facts": stats["historical_facts"],
        "entities": stats["entities"],
        "bulk_facts_per_s": round(size / fill_s, 1),
        "bulk_batch": batch,
        "add_fact_p50_ms": round(percentile(add_ms, 50), 1),
        "add_fact_p95_ms": round(percentile(add_ms, 95), 1),
        "retrieve_p50_ms": round(percentile(retrieve_ms, 50), 1),
        "retrieve_p95_ms": round(percentile(retrieve_ms, 95), 1),
        "related_depth2_p50_ms": round(percentile(related_ms, 50), 1),
        "related_depth2_p95_ms": round(percentile(related_ms, 95), 1),
        "get_facts_p50_ms": round(percentile(facts_ms, 50), 1),
        "get_facts_p95_ms": round(percentile(facts_ms, 95), 1),
        "cold_open_and_load_ms": round(cold_load_ms, 1),
        "first_add_after_load_ms": round(first_add_after_load_ms, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "samples": samples,
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1000, help="facts to store (1000 or 10000)")
    parser.add_argument("--batch", type=int, default=200, help="facts per aadd_facts call while filling")
    parser.add_argument("--samples", type=int, default=30, help="timed calls per operation")
    parser.add_argument("--json", type=Path, default=None, help="output (default bench/results/semantic-<size>.json)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="lmh-bench-semantic-") as tmp:
        result = asyncio.run(run(args.size, args.batch, args.samples, Path(tmp)))
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    out = args.json or Path(__file__).resolve().parent / "results" / f"semantic-{args.size}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
