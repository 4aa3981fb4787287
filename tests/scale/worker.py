"""One worker process of the multi-process test (run as ``python worker.py ...``, a separate interpreter).

Opens ``HierarchicalMemory`` for each of its users on the shared deployment (PostgreSQL +
vector server, chosen by the LMH_* settings alone), prints ``READY``, waits for a line on
stdin, then for ``--seconds`` adds and retrieves:

* ``add``: a unique note; the id is logged only once ``aadd`` returned (acknowledged);
* ``shared``: one of a few facts every worker adds for the same user and session with
  ``dedupe=True`` (concurrent writers of the same text must end with one row);
* ``retrieve``: a hybrid retrieval for the user; every returned item is logged with its owner,
  and the worker checks it can find its own latest note by its unique token (read your writes).

Each event is one JSON line in ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

SHARED_FACTS = 4
TOPICS = ["hiking", "pasta", "jazz", "chess", "sailing", "tea", "robots", "gardens"]


async def run(args: argparse.Namespace) -> None:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    users = args.users.split(",")
    memories = {
        user: HierarchicalMemory.from_defaults(user_id=user, session_id=f"w{args.worker}", persist_dir=args.persist_dir)
        for user in users
    }
    assert not next(iter(memories.values())).context.locked, "a server deployment must not lock the folder"
    await memories[users[0]].episodic.aretrieve("warm up", limit=1)  # load the model before the clock starts
    print("READY", flush=True)
    sys.stdin.readline()
    rng = random.Random(args.worker)
    last: dict[str, tuple[str, str]] = {}
    deadline = time.monotonic() + args.seconds
    n = 0
    with Path(args.out).open("w") as out:

        def log(**event: object) -> None:
            out.write(json.dumps(event) + "\n")

        while time.monotonic() < deadline:
            user = rng.choice(users)
            episodic = memories[user].episodic
            roll = rng.random()
            if roll < 0.55:
                token = f"tok{args.worker}x{n}"
                content = f"{user} note {token} about {rng.choice(TOPICS)} from worker {args.worker}"
                memory_id = await episodic.aadd(content)
                log(op="add", user=user, id=memory_id, content=content)
                last[user] = (memory_id, token)
            elif roll < 0.65:
                content = f"{user} shared fact {rng.randrange(SHARED_FACTS)}"
                memory_id = await episodic.aadd(content, session_id="shared", dedupe=True)
                log(op="shared", user=user, id=memory_id, content=content)
            else:
                items = await episodic.aretrieve(f"what about {rng.choice(TOPICS)}?", limit=10)
                log(op="retrieve", user=user, ids=[i.id for i in items], owners=[i.user_id for i in items])
                if user in last:
                    memory_id, token = last[user]
                    found = await episodic.aretrieve(token, limit=5)
                    log(
                        op="ryw",
                        user=user,
                        id=memory_id,
                        found=[i.id for i in found],
                        owners=[i.user_id for i in found],
                    )
            n += 1
    for memory in memories.values():
        memory.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--users", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--persist-dir", required=True)
    parser.add_argument("--out", required=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
