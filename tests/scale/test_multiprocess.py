"""Four worker processes (separate interpreters) share one PostgreSQL + one Chroma server.

For a bounded time (``FAST_SECONDS``; ``SLOW_SECONDS`` with ``--run-slow``) each worker adds
and retrieves for users that overlap with the other workers' (see ``worker.py``). The
deployment is selected by ``LMH_RECORD_STORE_URL`` / ``LMH_VECTOR_STORE_URL`` only. Afterwards:

* every acknowledged add is in the record store exactly once, with its content and owner, and
  nothing else is (no lost, duplicated or phantom memory);
* concurrent ``dedupe`` adds of one fact for one user by four processes left one row, and every
  worker got its id;
* every retrieval returned only the requesting user's memories, and each worker found its own
  latest note (read your writes across the shared indexes);
* the derived vector index converged: the outbox is empty and the index holds exactly the
  embedded records.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.stores.context import StoreContext

WORKERS = 4
FAST_SECONDS = 20.0
SLOW_SECONDS = 120.0
WORKER = Path(__file__).with_name("worker.py")
#: Each worker serves three of these users; every user is served by at least two workers.
NAMES = ["ana", "ben", "chen", "dora", "eli"]


class Run:
    """Users and collection prefix of one test run (runs share the session's servers)."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.users = [f"{name}_{tag}" for name in NAMES]
        self.prefix = f"mp{tag}"

    def users_of(self, worker: int) -> list[str]:
        return [self.users[(worker + k) % len(self.users)] for k in range(3)]


def _run_workers(
    tmp_path: Path, run: Run, pg_url: str, chroma_url: str, seconds: float, embed_model: str
) -> list[dict]:
    env = {
        **os.environ,
        "LMH_EMBED_MODEL": embed_model,
        "LMH_RECORD_STORE_URL": pg_url,
        "LMH_VECTOR_STORE_URL": chroma_url,
        "LMH_COLLECTION_PREFIX": run.prefix,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "ANONYMIZED_TELEMETRY": "False",
    }
    persist = tmp_path / "shared_persist"  # one folder for all: a server deployment takes no folder lock
    processes = []
    for worker in range(WORKERS):
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "--worker",
                    str(worker),
                    "--users",
                    ",".join(run.users_of(worker)),
                    "--seconds",
                    str(seconds),
                    "--persist-dir",
                    str(persist),
                    "--out",
                    str(tmp_path / f"worker{worker}.jsonl"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=open(tmp_path / f"worker{worker}.err", "wb"),  # noqa: SIM115 - closed with the process
                env=env,
                text=True,
            )
        )
    started = time.monotonic()
    try:
        for worker, process in enumerate(processes):
            line = process.stdout.readline() if process.stdout else ""
            if line.strip() != "READY":
                process.wait(timeout=60)
                err = (tmp_path / f"worker{worker}.err").read_text(errors="replace")[-3000:]
                pytest.fail(f"worker {worker} did not start ({process.returncode}): {err}")
        print(f"\nworkers ready after {time.monotonic() - started:.1f} s")
        for process in processes:  # start together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for worker, process in enumerate(processes):
            code = process.wait(timeout=seconds + 240)
            err = (tmp_path / f"worker{worker}.err").read_text(errors="replace")[-3000:]
            assert code == 0, f"worker {worker} exited with {code}: {err}"
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    events = []
    for worker in range(WORKERS):
        for line in (tmp_path / f"worker{worker}.jsonl").read_text().splitlines():
            events.append({"worker": worker, **json.loads(line)})
    return events


def _check(tmp_path: Path, run: Run, pg_url: str, chroma_url: str, events: list[dict], embed_model: str) -> None:
    adds = [e for e in events if e["op"] == "add"]
    shared = [e for e in events if e["op"] == "shared"]
    assert len(adds) >= WORKERS * 2, f"the workers wrote too little to test anything: {len(adds)} adds"
    assert len({e["worker"] for e in shared}) >= 2, "no concurrent dedupe adds happened"

    config = MemoryConfig.create(
        persist_dir=tmp_path / "checker",
        record_store_url=pg_url,
        vector_store_url=chroma_url,
        collection_prefix=run.prefix,
        embed_model=embed_model,
    )
    context = StoreContext.acquire(config)
    try:
        wait = context.runtime.run
        records = context.records
        pending_before = len(wait(records.outbox_pending(10_000)))
        rows = {}
        for user in run.users:
            for record in wait(records.query(user, with_embeddings=True)):
                rows[record.item.id] = record
        assert sum(wait(records.count(user, namespace=None)) for user in run.users) == len(rows)

        # every acknowledged add exactly once, nothing unacknowledged
        acked = {e["id"]: e for e in adds}
        assert len(acked) == len(adds), "two adds were acknowledged with the same id"
        for memory_id, event in acked.items():
            assert memory_id in rows, f"acknowledged add lost: {event}"
            assert rows[memory_id].item.content == event["content"]
            assert rows[memory_id].item.user_id == event["user"]
        by_fact = collections.defaultdict(set)
        for event in shared:
            by_fact[(event["user"], event["content"])].add(event["id"])
        for fact, ids in by_fact.items():
            assert len(ids) == 1, f"concurrent dedupe adds of {fact} got different ids {ids}"
            [memory_id] = ids
            assert rows[memory_id].item.content == fact[1] and rows[memory_id].item.user_id == fact[0]
        contents = collections.Counter((r.item.user_id, r.item.content) for r in rows.values())
        assert max(contents.values()) == 1, f"duplicated memories: {contents.most_common(3)}"
        assert set(rows) == set(acked) | {i for ids in by_fact.values() for i in ids}, "unacknowledged rows exist"

        # retrievals saw only their own user's data; each worker read its own writes
        retrievals = [e for e in events if e["op"] in ("retrieve", "ryw")]
        assert retrievals, "no retrieval ran"
        for event in retrievals:
            assert set(event["owners"]) <= {event["user"]}, f"retrieval crossed users: {event}"
            for memory_id in event["ids"] if event["op"] == "retrieve" else event["found"]:
                assert memory_id not in rows or rows[memory_id].item.user_id == event["user"]
        for event in (e for e in events if e["op"] == "ryw"):
            assert event["id"] in event["found"], f"a worker could not find its own latest note: {event}"

        # the vector index converged on the record store
        wait(context.drain_outbox())
        assert wait(records.outbox_pending(10)) == []
        embedded = {memory_id for memory_id, r in rows.items() if r.embedding is not None}
        assert embedded == set(rows)
        [(space, dim)] = {(r.space, len(r.embedding)) for r in rows.values()}
        index = wait(context.avector_index(space, dim))  # explicit space: no embedding model to load
        assert wait(index.ids()) == embedded
        for user in run.users:
            assert wait(index.count(user)) == sum(1 for r in rows.values() if r.item.user_id == user)
        print(
            f"\n{len(adds)} adds, {len(shared)} dedupe adds ({len(by_fact)} facts), {len(retrievals)} retrievals "
            f"by {WORKERS} processes; outbox left by the workers: {pending_before}"
        )
    finally:
        context.release()


@pytest.mark.postgres
def test_four_processes_share_one_deployment(tmp_path: Path, scale_pg_url: str, scale_chroma_url: str) -> None:
    # The package's hashing embedder: four MiniLM loads cost a minute of CPU on two cores, and
    # this test is about concurrency; the soak variant and bench/scale.py use MiniLM.
    run = Run()
    events = _run_workers(tmp_path, run, scale_pg_url, scale_chroma_url, FAST_SECONDS, "hashing")
    _check(tmp_path, run, scale_pg_url, scale_chroma_url, events, "hashing")


@pytest.mark.slow
@pytest.mark.postgres
def test_four_processes_soak(tmp_path: Path, scale_pg_url: str, scale_chroma_url: str) -> None:
    run = Run()
    events = _run_workers(tmp_path, run, scale_pg_url, scale_chroma_url, SLOW_SECONDS, "default")
    _check(tmp_path, run, scale_pg_url, scale_chroma_url, events, "default")
