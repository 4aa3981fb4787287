"""The rankings of a fixed memory set for fixed queries, to show that a speed change ranks the same.

Usage (from the repository root)::

    python bench/ranking_fingerprint.py --json /tmp/before.json          # on the old code
    python bench/ranking_fingerprint.py --compare /tmp/before.json       # on the new code

It fills one user with 400 episodic turns (fixed times and importances), 60 semantic facts
and two working-memory turns, another user with 200 turns, then records the top 10 of
``asearch`` for 44 queries and the memory message of one ``aget``. ``--compare`` reports
every query whose order differs and the largest score difference (scores are rounded to
1e-5; recency moves with the clock, so tiny differences between runs are expected), and
whether the memory message is the same but for its times (facts are stamped when stored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import questions, turns


async def fingerprint(model: str) -> dict[str, Any]:
    """Top-10 ``(content, tier, score)`` per query and one memory message."""
    from llama_index.core.base.llms.types import ChatMessage

    from llama_index_memory_hierarchy import HierarchicalMemory, MemoryItem
    from llama_index_memory_hierarchy.types import MemoryType

    texts = turns(600, seed=3)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    queries = [
        *questions(40, seed=5),
        "What did Alice do?",
        "hiking",
        "ok",
        "Who planned a trip to Kyoto last weekend?",
    ]
    with tempfile.TemporaryDirectory() as folder:
        memory = HierarchicalMemory.from_defaults(user_id="u1", session_id="s", persist_dir=folder, embed_model=model)
        other = HierarchicalMemory.from_defaults(user_id="u2", session_id="s", persist_dir=folder, embed_model=model)
        items = [
            MemoryItem(
                content=text,
                user_id="u1",
                session_id=f"s{i % 7}",
                memory_type=MemoryType.EPISODIC,
                timestamp=start + timedelta(hours=i),
                importance=(i % 5) / 5,
            )
            for i, text in enumerate(texts[:400])
        ]
        await memory.episodic.aadd_items(items)
        await other.episodic.aadd_many(texts[400:])
        await memory.semantic.aadd_facts([(t.split(" ", 1)[0], "did", t.split(" ", 1)[1]) for t in texts[:60]])
        await memory.aput_messages(
            [
                ChatMessage(role="user", content="I went hiking in the mountains with Bob."),
                ChatMessage(role="assistant", content="ok"),
            ]
        )
        rankings = {}
        for query in queries:
            ranked = await memory.asearch(query, 10)
            rankings[query] = [[item.content, item.memory_type.value, round(item.score or 0.0, 5)] for item in ranked]
        messages = await memory.aget(input="When did Chen bake sourdough bread?")
        memory.close()
        other.close()
    return {"model": model, "rankings": rankings, "aget": [str(m.content) for m in messages]}


def _timeless(text: str) -> str:
    """A memory message without its times (facts are stamped when the run stores them)."""
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<time>", text)


def compare(old: dict[str, Any], new: dict[str, Any]) -> int:
    """Print the differences; 0 when every order (and the memory message) is the same."""
    differ = 0
    largest = 0.0
    for query, before in old["rankings"].items():
        after = new["rankings"].get(query, [])
        if [r[:2] for r in before] != [r[:2] for r in after]:
            differ += 1
            print(f"order differs for {query!r}:\n  before {[r[0] for r in before]}\n  after  {[r[0] for r in after]}")
        largest = max([largest, *(abs(a[2] - b[2]) for a, b in zip(before, after, strict=False))])
    same_message = [_timeless(m) for m in old["aget"]] == [_timeless(m) for m in new["aget"]]
    print(
        f"{len(old['rankings'])} queries: {differ} in another order; largest score difference {largest:.5f}; "
        f"memory message {'the same' if same_message else 'differs'}"
    )
    return 0 if differ == 0 and same_message else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed-model", default="minilm-onnx", help="embed_model (default: %(default)s, exact)")
    parser.add_argument("--json", type=Path, default=None, help="write the fingerprint here")
    parser.add_argument("--compare", type=Path, default=None, help="compare with a fingerprint written before")
    args = parser.parse_args(argv)
    result = asyncio.run(fingerprint(args.embed_model))
    if args.json:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    if args.compare:
        return compare(json.loads(args.compare.read_text()), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
