"""Child process of the erasure crash test: erases a user and stalls at a chosen stage until killed.

Run as ``python erasure_child.py PERSIST_DIR USER_ID STAGE [BACKEND]``. It opens the folder (hashing
embeddings and the vector backend the parent populated it with), replaces the erasure step named by
``STAGE`` with one that prints ``STALLED`` and sleeps, and calls ``forget_user``; the parent SIGKILLs
it there:

* ``graph``: the user's rows and vector points are deleted; graph nodes and files are not yet;
* ``compact``: everything is deleted, nothing is compacted yet (the vector folders and SQLite
  files still hold the user's bytes);
* ``unlink``: the qdrant-edge vector folder's rebuild is removing a folder: stalled right after its
  ``edge_config.json`` was unlinked (where ``shutil.rmtree`` of the live folder used to leave a
  folder no open accepted);
* ``delay:SECONDS``: nothing replaced; the erasure (compaction included) runs until the parent's
  SIGKILL after about that long (``STALLED`` is printed as the erasure starts).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main(persist_dir: str, user_id: str, stage: str, backend: str | None = None) -> None:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.lifecycle import erasure
    from llama_index_memory_hierarchy.stores.context import StoreContext

    def announce() -> None:
        sys.stdout.write("STALLED\n")
        sys.stdout.flush()

    async def stall(*_args: object, **_kwargs: object) -> None:
        announce()
        await asyncio.sleep(3600)

    if stage == "unlink":
        unlink = os.unlink

        def stalling_unlink(path: object, *args: object, **kwargs: object) -> None:
            unlink(path, *args, **kwargs)  # type: ignore[arg-type]
            if os.fspath(path).endswith("edge_config.json"):  # type: ignore[arg-type]
                announce()
                time.sleep(3600)

        os.unlink = stalling_unlink  # type: ignore[assignment]
    elif stage.startswith("delay:"):
        erase = erasure.aerase_user

        async def announced(*args: object, **kwargs: object) -> object:
            announce()
            return await erase(*args, **kwargs)  # type: ignore[arg-type]

        erasure.aerase_user = announced  # type: ignore[assignment]
        import llama_index_memory_hierarchy.lifecycle.manager as manager

        manager.aerase_user = announced  # type: ignore[attr-defined]
    else:
        owner, name = {"graph": (erasure, "_aerase_graph"), "compact": (StoreContext, "arewrite_index")}[stage]
        setattr(owner, name, stall)
    options = {"vector_backend": backend} if backend else {}
    memory = HierarchicalMemory.from_defaults(
        user_id=user_id, session_id="eraser", persist_dir=persist_dir, embed_model="hashing", **options
    )
    memory.manager.forget_user()
    sys.stdout.write("FINISHED\n")  # the stall never returns: the parent kills before this
    sys.stdout.flush()


if __name__ == "__main__":
    main(*sys.argv[1:])
