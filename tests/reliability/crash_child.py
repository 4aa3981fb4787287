"""Child process of the crash tests: writes memories until it is killed.

Run as ``python crash_child.py PERSIST_DIR SEED EMBED_MODEL``. Several users write
concurrently (one asyncio task each) through ``HierarchicalMemory`` and its tiers. Every
operation prints an intent line before it starts and an acknowledgement line once it has
returned, flushed at once, so the parent knows what was acknowledged when the kill came:

* ``I <user> <op> ...``: about to run ``op`` (in flight if no ack follows);
* ``A <user> <id> <content>``: an add returned this id;
* ``P <user> <content>``: ``put_messages`` returned (the message text is unique);
* ``D <user> <id>``: a remove returned True;
* ``U <user> <id> <content>``: an update returned True;
* ``F <user> <id> <subject>``: a semantic fact about ``<subject>`` was added (its record text starts
  with the subject; the graph mirrors it).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PREDICATES = ["lives_in", "works_at", "likes", "visited"]
WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "garden",
    "violin",
    "harbor",
    "lantern",
    "meadow",
    "copper",
    "falcon",
    "orchid",
    "canyon",
    "ember",
]


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def text(rng: random.Random, tag: str) -> str:
    return f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))


async def writer(memory, user: str, rng: random.Random, counter: list[int]) -> None:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    mine: list[str] = []
    while True:
        counter[0] += 1
        tag = f"{user}-{os.getpid()}-{counter[0]}"
        op = rng.choices(["add", "add_many", "put", "remove", "update", "fact"], weights=[5, 2, 2, 1, 1, 2])[0]
        if op in ("remove", "update") and not mine:
            op = "add"
        if op == "add":
            content = text(rng, tag)
            emit(f"I {user} add {content}")
            memory_id = await memory.episodic.aadd(content, importance=rng.random())
            mine.append(memory_id)
            emit(f"A {user} {memory_id} {content}")
        elif op == "add_many":
            contents = [text(rng, f"{tag}.{i}") for i in range(rng.randint(2, 20))]
            emit(f"I {user} add_many {'|'.join(contents)}")
            ids = await memory.episodic.aadd_many(contents)
            mine.extend(ids)
            for memory_id, content in zip(ids, contents, strict=True):
                emit(f"A {user} {memory_id} {content}")
        elif op == "put":
            content = text(rng, tag)
            emit(f"I {user} put {content}")
            await memory.aput_messages([ChatMessage(role=MessageRole.USER, content=content)])
            emit(f"P {user} {content}")
        elif op == "remove":
            memory_id = mine.pop(rng.randrange(len(mine)))
            emit(f"I {user} remove {memory_id}")
            if await memory.episodic.aremove(memory_id):
                emit(f"D {user} {memory_id}")
        elif op == "fact":
            subject = f"Person{counter[0]}x{os.getpid()}"
            emit(f"I {user} fact {subject}")
            fact_id = await memory.semantic.aadd_fact(subject, rng.choice(PREDICATES), rng.choice(WORDS).title())
            emit(f"F {user} {fact_id} {subject}")
        else:
            memory_id = rng.choice(mine)
            content = text(rng, tag + "u")
            emit(f"I {user} update {memory_id} {content}")
            if await memory.episodic.aupdate(memory_id, content=content):
                emit(f"U {user} {memory_id} {content}")


async def main(persist_dir: str, seed: int, embed_model: str, users: int) -> None:
    from llama_index_memory_hierarchy import HierarchicalMemory

    rng = random.Random(seed)
    memories = [
        HierarchicalMemory.from_defaults(
            user_id=f"user{i}", session_id=f"s{seed}", persist_dir=persist_dir, embed_model=embed_model
        )
        for i in range(users)
    ]
    await memories[0].context.runtime.arun(memories[0].context.aspace())  # load the model before READY
    emit("READY")
    counter = [0]
    await asyncio.gather(*(writer(m, m.user_id, random.Random(rng.random()), counter) for m in memories))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 3))
