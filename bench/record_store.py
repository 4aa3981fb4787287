"""Record store benchmark: insert throughput and keyword_search latency, SQLite and PostgreSQL.

    python bench/record_store.py                      # 10k rows, batches of 100, 300 queries
    python bench/record_store.py --rows 2000 --backends sqlite

PostgreSQL uses ``LMH_TEST_POSTGRES_URL`` (default ``postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test``);
a scratch database is created and dropped. Prints one line per backend.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.types import MemoryItem

PG_DEFAULT_URL = "postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test"
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mo",
    "ne",
    "sa",
    "lu",
    "vi",
    "de",
    "po",
    "ra",
    "chi",
    "en",
    "ol",
    "ma",
    "ti",
    "ber",
    "son",
    "gar",
    "fel",
    "and",
    "ex",
    "qu",
    "im",
]
CHINESE = ["我喜欢学习Python编程", "明天下午开会讨论项目进度", "周末去公园跑步", "这本小说非常精彩", "北京的天气很好"]


def vocabulary(size: int = 5000, seed: int = 3) -> list[str]:
    """Pseudo-words of 2-4 syllables (a realistic vocabulary size, unlike a handful of words)."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5))))] = None
    return list(words)


def corpus(rows: int, words: list[str], seed: int = 7) -> list[str]:
    """Sentences of Zipf-distributed words; every tenth row adds a Chinese sentence."""
    rng = np.random.default_rng(seed)
    texts = []
    for i in range(rows):
        ranks = np.minimum(rng.zipf(1.2, size=int(rng.integers(8, 40))), len(words)) - 1
        text = " ".join(words[r] for r in ranks)
        if i % 10 == 0:
            text += " " + CHINESE[i % len(CHINESE)]
        texts.append(text.capitalize() + ".")
    return texts


async def pg_admin(url: str, statement: str) -> None:
    import asyncpg

    dsn = sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def run(label: str, url: str, args: argparse.Namespace, **store_kwargs: object) -> None:
    words = vocabulary()
    texts = corpus(args.rows, words)
    rng = np.random.default_rng(1)
    store = SQLRecordStore(url, **store_kwargs)  # type: ignore[arg-type]
    await store.start()
    try:
        records = [
            Record(
                item=MemoryItem(content=text, user_id=f"user{i % args.users}", session_id=f"s{i % 50}"),
                embedding=rng.standard_normal(args.dim).astype(np.float32),
                space="bench",
            )
            for i, text in enumerate(texts)
        ]
        start = time.perf_counter()
        for offset in range(0, len(records), args.batch):
            await store.insert(records[offset : offset + args.batch])
        insert_s = time.perf_counter() - start
        assert await store.count(None) == len(records)

        # Query words: drawn from the rows themselves, as a user would recall them.
        queries = [
            " ".join(rng.choice(texts[int(rng.integers(len(texts)))].split()[:-1], size=int(rng.integers(1, 4))))
            for _ in range(args.queries)
        ]
        queries += ["学习", "项目进度", "Python 编程"] * 10
        latencies = []
        hits = 0
        for number, query in enumerate(queries):
            user = f"user{number % args.users}"
            start = time.perf_counter()
            found = await store.keyword_search(user, query, limit=20)
            latencies.append((time.perf_counter() - start) * 1000)
            hits += bool(found)
        latencies.sort()
        p50 = statistics.median(latencies)
        p95 = latencies[int(0.95 * (len(latencies) - 1))]
        print(
            f"{label:<22} rows={args.rows} batch={args.batch}: insert {len(records) / insert_s:8.0f} rows/s "
            f"({insert_s:.2f} s) | keyword_search p50 {p50:6.2f} ms p95 {p95:6.2f} ms "
            f"({len(queries)} queries, {hits} with hits, {args.users} users)"
        )
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    backends = args.backends.split(",")

    if "sqlite" in backends:
        for synchronous in ("FULL", "NORMAL"):
            with tempfile.TemporaryDirectory() as folder:
                url = f"sqlite+aiosqlite:///{Path(folder) / 'memory.db'}"
                await run(f"sqlite sync={synchronous}", url, args, sqlite_synchronous=synchronous)
    if "postgres" in backends:
        base = os.environ.get("LMH_TEST_POSTGRES_URL", PG_DEFAULT_URL)
        name = f"lmh_bench_{uuid.uuid4().hex[:8]}"
        try:
            await pg_admin(base, f'CREATE DATABASE "{name}"')
        except Exception as exc:
            print(f"postgres: skipped ({type(exc).__name__}: {exc})")
            return
        try:
            url = sa.engine.make_url(base).set(database=name).render_as_string(hide_password=False)
            await run("postgres", url, args)
        finally:
            await pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
