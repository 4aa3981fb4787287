"""``ContextRegistry``: the open store contexts of this process, one per configuration, counted.

Every memory object over one folder and configuration shares one context; the last release closes it.
An acquire racing the last release of the same folder waits for that close (its folder lock and
connections) and then opens anew. A forked child starts with an empty registry: its parent's contexts
kept their runtime thread and locks in the parent.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from llama_index_memory_hierarchy.errors import StoreError

#: Longest an acquire waits for this process to finish closing the same folder's stores.
CLOSE_WAIT_S = 120.0


class Counted(Protocol):
    """What the registry needs of a context: its reference count and whether its runtime survived a fork."""

    refs: int

    @property
    def forked(self) -> bool: ...


class Releasable(Protocol):
    """A context one reference of which can be dropped."""

    def release(self) -> None: ...


C = TypeVar("C", bound=Counted)
Key = tuple[Hashable, ...]


class ContextRegistry(Generic[C]):
    """Contexts by key; ``key[0]`` is the folder, closed before it is opened again in this process."""

    def __init__(self) -> None:
        self._open: dict[Key, C] = {}
        self._closing: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def acquire(self, key: Key, make: Callable[[], C]) -> tuple[C, bool]:
        """The context of ``key`` with one more reference, made by ``make`` when none is open; and whether made."""
        while True:
            with self._lock:
                context = self._open.get(key)
                closing = self._closing.get(key[0])
                if context is not None and not context.forked:
                    context.refs += 1
                    return context, False
                if closing is None:
                    context = make()
                    self._open[key] = context
                    context.refs += 1
                    return context, True
            # The last holder in this process is closing this folder's stores (and its lock): wait.
            if not closing.wait(CLOSE_WAIT_S):
                raise StoreError(f"{key[0]}: its stores took over {CLOSE_WAIT_S:.0f} s to close in this process")

    def release(self, key: Key, context: C, close: Callable[[], None]) -> None:
        """Drop one reference to ``context``; the last one runs ``close`` (while later acquires of the folder wait)."""
        with self._lock:
            context.refs -= 1
            if context.refs > 0:
                return
            self._open.pop(key, None)
            closed = self._closing.setdefault(key[0], threading.Event())
        try:
            close()
        finally:
            with self._lock:
                if self._closing.get(key[0]) is closed:
                    del self._closing[key[0]]
            closed.set()

    def contexts(self) -> list[C]:
        """Every open context."""
        with self._lock:
            return list(self._open.values())

    def _forget(self) -> None:
        self._open = {}
        self._closing = {}
        self._lock = threading.Lock()


class Hold:
    """One reference to a context held for ``owner``: dropped by :meth:`release`, or once ``owner`` is collected.

    Why: a memory dropped without ``close()`` kept its context (reader threads, folder lock, connections)
    open for the life of the process. The collector may run on any thread, the store runtime's own among
    them, which closing needs; so a collected owner's reference is dropped on a short-lived thread.
    """

    def __init__(self, context: Releasable, owner: object) -> None:
        self._context = context
        self._finalizer = weakref.finalize(owner, _release_in_thread, context)
        self._finalizer.atexit = False  # at exit the runtime stops; nothing is left to release on

    def release(self) -> None:
        """Drop the reference now (idempotent; what the owner's ``close()`` calls)."""
        if self._finalizer.detach() is not None:
            self._context.release()


def _release_in_thread(context: Releasable) -> None:
    threading.Thread(target=context.release, name="lmh-release-collected", daemon=True).start()
