"""Child process of the erasure crash test: erases a user and stalls at a chosen stage until killed.

Run as ``python erasure_child.py PERSIST_DIR USER_ID STAGE``. It opens the folder (hashing
embeddings, as the parent populated it), replaces the erasure step named by ``STAGE`` with one
that prints ``STALLED`` and sleeps, and calls ``forget_user``; the parent SIGKILLs it there:

* ``graph``: the user's rows and vector points are deleted; graph nodes and files are not yet;
* ``compact``: everything is deleted, nothing is compacted yet (the vector folders and SQLite
  files still hold the user's bytes).
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main(persist_dir: str, user_id: str, stage: str) -> None:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.lifecycle import erasure
    from llama_index_memory_hierarchy.stores.context import StoreContext

    async def stall(*_args: object, **_kwargs: object) -> None:
        sys.stdout.write("STALLED\n")
        sys.stdout.flush()
        await asyncio.sleep(3600)

    owner, name = {"graph": (erasure, "_aerase_graph"), "compact": (StoreContext, "arewrite_index")}[stage]
    setattr(owner, name, stall)
    memory = HierarchicalMemory.from_defaults(
        user_id=user_id, session_id="eraser", persist_dir=persist_dir, embed_model="hashing"
    )
    memory.manager.forget_user()
    sys.stdout.write("FINISHED\n")  # the stall never returns: the parent kills before this


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
