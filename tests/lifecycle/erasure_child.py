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
* ``compacting``: nothing stalls; ``STALLED`` is printed as the compaction starts and the erasure goes
  on, so the parent's SIGKILL some time after lands in the compaction or after it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def kill_at(folder: Path, user_id: str, stage: str, *backend: str, after: float = 0.0, log: Path) -> bool:
    """Run this child on ``folder`` until it reaches ``stage``, wait ``after`` seconds, SIGKILL it; whether the
    kill landed (False: the erasure had finished first). The child's stderr goes to ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as err:
        child = subprocess.Popen(
            [sys.executable, __file__, str(folder), user_id, stage, *backend],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    assert child.stdout is not None
    line = child.stdout.readline().decode().strip()  # blocks until the child stalls (or dies)
    time.sleep(after)
    child.send_signal(signal.SIGKILL)
    child.wait(60)
    assert line == "STALLED", f"the child did not reach {stage}: {line!r}; see {log}"
    if child.returncode == -signal.SIGKILL:
        return child.stdout.read().decode().strip() != "FINISHED"
    assert child.returncode == 0, f"the child failed: see {log}"
    return False


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
    elif stage == "compacting":
        compact = erasure._acompact

        async def announced(*args: object, **kwargs: object) -> None:
            announce()
            await compact(*args, **kwargs)  # type: ignore[arg-type]

        erasure._acompact = announced  # type: ignore[assignment]
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
