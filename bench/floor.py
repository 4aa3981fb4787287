"""The relevance floor on unrelated queries: how often a search and ``get()`` show nothing, English and Chinese.

Usage (from the repository root)::

    python bench/floor.py                          # both languages, every user, the default floor
    python bench/floor.py --rates 0.0005,0.002,0.01 --langs en
    python bench/floor.py --smoke                  # CI: one user per language, ten queries

Each user of ``bench/conversation_data/`` (invented: an archive of 105 dated past events per user, four users
per language) is stored as ``bench/conversation.py`` stores it (each event a user turn of its own past session).
Then every query of ``tests/data/unrelated_queries.json`` (invented, 45 per language: nonsense strings, world
knowledge, off-topic tasks) is searched once per ``RankingSettings.floor_false_positive_rate`` of ``--rates``,
and asked of ``get()`` once with the default settings. The figures are the share of (user, query) pairs that
show nothing (``search`` empty; ``get()`` with no memory message), printed with the load average. Nothing here
is fitted: the rates are read off, not chosen from this data.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from conversation import load, past_events  # noqa: E402

logger = logging.getLogger("bench.floor")

QUERIES = HERE.parent / "tests" / "data" / "unrelated_queries.json"


def run_user(user: dict[str, Any], queries: list[str], rates: list[float], folder: Path) -> dict[str, list[bool]]:
    """Per rate (and ``get``): whether each query showed nothing for this user."""
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.messages import MEMORY_HEADER
    from llama_index_memory_hierarchy.ranking.settings import RankingSettings

    empty: dict[str, list[bool]] = {}
    with HierarchicalMemory.from_defaults(user_id=user["user"], session_id="now", persist_dir=str(folder)) as memory:
        memory.episodic.add_many(past_events(user))
        default = RankingSettings.preset("default")
        for rate in rates:
            settings = default.but(floor_false_positive_rate=rate)
            shown = [memory.search(q, limit=5, ranking=settings) for q in queries]
            empty[f"search, rate {rate:g}"] = [not items for items in shown]
            for query, items in zip(queries, shown, strict=True):
                for item in items:
                    logger.info("rate %g: %r showed %r (%s)", rate, query, item.content, item.explanation)
        empty["get(), default"] = [
            not [m for m in memory.get(input=q) if MEMORY_HEADER in str(m.content or "")] for q in queries
        ]
    return empty


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--langs", default="en,zh")
    parser.add_argument("--rates", default="0.002", help="comma-separated floor_false_positive_rate values")
    parser.add_argument("--smoke", action="store_true", help="one user per language, ten queries")
    parser.add_argument("--verbose", action="store_true", help="log what each query showed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    rates = [float(r) for r in args.rates.split(",")]
    data = json.loads(QUERIES.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as root:
        for lang in args.langs.split(","):
            users = load(lang)[:1] if args.smoke else load(lang)
            queries = data[lang][:10] if args.smoke else data[lang]
            total: dict[str, list[bool]] = {}
            for user in users:
                for name, flags in run_user(user, queries, rates, Path(root) / lang / user["user"]).items():
                    total.setdefault(name, []).extend(flags)
            for name, flags in total.items():
                print(
                    f"{lang} {name}: {sum(flags)}/{len(flags)} unrelated queries show nothing "
                    f"({sum(flags) / len(flags):.3f}; {len(users)} users x {len(queries)} queries; "
                    f"load {os.getloadavg()[0]:.1f})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
