"""The open memories of this process, per store context: what deletion, erasure and export reach.

A deletion, an erasure or an import changes the stores under every open memory of the user in
this process: their working memory, the history ``get()`` replays, the running summaries and
the cached derived views must follow. Each :class:`~.manager.MemoryManager` registers itself
here when its memory opens and leaves when it closes (weakly: a memory dropped without
``close()`` leaves too), so those operations find them from the store context alone.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Protocol

from llama_index_memory_hierarchy.lifecycle.compression import ConversationCompressor
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.stores.context import StoreContext


class LiveMemory(Protocol):
    """An open memory of one user, as the lifecycle's store-wide operations see it (its manager)."""

    @property
    def deps(self) -> LifecycleDeps: ...

    @property
    def compressor(self) -> ConversationCompressor: ...

    def invalidate(self) -> None: ...


def _registry(context: StoreContext) -> weakref.WeakValueDictionary[int, LiveMemory]:
    """The live memories of one store context, by ``id()`` (``shared.live``, typed here)."""
    return context.shared.live


def register(memory: LiveMemory) -> None:
    """``memory`` is open: deletions, erasures and imports of its user reach it from now on."""
    _registry(memory.deps.context)[id(memory)] = memory


def unregister(memory: LiveMemory) -> None:
    """``memory`` is closed: it is no longer one of the live memories."""
    _registry(memory.deps.context).pop(id(memory), None)


def live_memories(context: StoreContext, user_id: str | None = None) -> list[LiveMemory]:
    """The open memories of ``context`` in this process (of ``user_id`` when given)."""
    found = list(_registry(context).values())
    return found if user_id is None else [m for m in found if m.deps.user_id == user_id]


def track_background(context: StoreContext, user_id: str, task: asyncio.Task[Any]) -> None:
    """``task`` works for ``user_id`` in the background until it is done."""
    tasks = context.shared.background.setdefault(user_id, set())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def acancel_background(context: StoreContext, user_id: str) -> int:
    """Cancel the user's background tasks in this process and wait until they have stopped; how many."""
    current = asyncio.current_task()
    tasks = [t for t in context.shared.background.get(user_id, ()) if t is not current and not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    return len(tasks)
