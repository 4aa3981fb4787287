"""Child process of the cross-process erasure race: a consolidation whose LLM is slow, mid-reply when erased.

Run as ``python consolidation_child.py PERSIST_DIR USER_ID SESSION_ID``. It opens the folder with
hashing embeddings and a scripted LLM that prints ``REPLYING`` when the distillation prompt arrives
and answers 3 s later (a hosted model mid-reply), stores a few turns, consolidates in the foreground,
and prints how the consolidation ended (``DONE`` or the exception's class name).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))


def main(persist_dir: str, user_id: str, session_id: str) -> None:
    from lifecycle_llm import DISTILL, ScriptedLLM
    from llama_index.core.base.llms.types import ChatMessage

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    class Announcing(ScriptedLLM):
        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: object):  # type: ignore[override]
            if DISTILL in prompt:
                sys.stdout.write("REPLYING\n")
                sys.stdout.flush()
                await asyncio.sleep(3.0)
            return self.complete(prompt)

    facts = '{"facts": [{"subject": "user", "predicate": "keeps", "object": "bees on the roof"}]}'
    memory = HierarchicalMemory.from_defaults(
        user_id=user_id,
        session_id=session_id,
        persist_dir=persist_dir,
        embed_model="hashing",
        llm=Announcing(rules=[(DISTILL, facts)]),
    )
    memory.put_messages(
        [ChatMessage(role="user", content=f"I keep bees on the roof, hive {n}.") for n in range(6)]
        + [ChatMessage(role="user", content="My sister runs a bakery in Porto.")]
    )
    try:
        memory.manager.consolidate()
        outcome = "DONE"
    except Exception as exc:  # the parent reads how it ended
        outcome = type(exc).__name__
    memory.close()
    sys.stdout.write(f"{outcome}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
