"""A private event loop on a daemon thread that runs all store I/O.

Why: async database drivers (aiosqlite, asyncpg) bind connections to the loop that made
them, while callers arrive from many loops (agents, notebooks, pytest) and from plain
threads. Running every store coroutine on one owned loop lets the same coroutine serve
the sync API (``run``: block until done) and the async API (``arun``: await without
blocking the caller's loop), with no copy of the logic. :class:`RuntimeBound` is the one
way the package's public objects (the memory, its tiers, manager, tools and knowledge
bases) put their calls there. Beside it, :func:`default_threads`: how many CPU threads the
native engines (ONNX Runtime, llama.cpp) take by default, one rule for both.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Runtime:
    """Owns one event loop thread. Thread-safe; cheap to share between many memories."""

    def __init__(self, name: str = "lmh-runtime") -> None:
        self._pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = threading.Event()
        self._thread.start()
        self._started.wait()
        atexit.register(self.stop)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._started.set)
        self._loop.run_forever()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The owned loop (for code that must schedule onto it)."""
        return self._loop

    def in_runtime(self) -> bool:
        """True when called from the runtime's own thread."""
        return threading.current_thread() is self._thread

    @property
    def forked(self) -> bool:
        """True in a child process forked after this runtime started (its loop thread is not there)."""
        return os.getpid() != self._pid

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the runtime loop; returns a concurrent future."""
        if self.forked:  # the loop thread did not survive fork(): waiting on it would hang forever
            coro.close()
            raise RuntimeError(
                f"this memory belongs to process {self._pid}, not to this forked child; open memories anew in "
                "the child (an embedded folder stays locked by the parent: use a server deployment to share one)"
            )
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("the memory runtime is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion from synchronous code (any thread but the runtime's)."""
        if self.in_runtime():
            coro.close()
            raise RuntimeError("synchronous memory API called from inside the memory runtime; use the async API")
        return self.submit(coro).result()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` from any event loop without blocking it."""
        if self.in_runtime():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    async def to_thread(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking work (embedding, file I/O) off the runtime loop."""
        return await asyncio.to_thread(func, *args)

    def stop(self) -> None:
        """Stop the loop thread (idempotent). Pending work is cancelled."""
        if self._loop.is_closed() or self.forked:
            return
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()


class RuntimeBound:
    """Mixin: every public coroutine method (``a*``) of a class runs on its :attr:`runtime` loop.

    The methods are wrapped once, when the class (or a subclass) is made. A public call
    awaited from another loop hops onto the runtime once; the public calls it makes there
    run inline. Sync twins stay thin: ``return self.blocking(self.aname(...))``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if (
                name.startswith("a")
                and inspect.iscoroutinefunction(value)
                and not getattr(value, "__isabstractmethod__", False)
                and not getattr(value, "__on_runtime__", False)
            ):
                setattr(cls, name, _on_runtime(value))

    @property
    def runtime(self) -> Runtime:
        """The runtime whose loop runs this object's coroutines."""
        raise NotImplementedError

    def blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runtime and wait for it (the sync twins; not from the runtime's thread)."""
        return self.runtime.run(coro)


def _on_runtime(method: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Coroutine[Any, Any, T]]:
    @functools.wraps(method)
    async def hop(self: RuntimeBound, *args: Any, **kwargs: Any) -> T:
        return await self.runtime.arun(method(self, *args, **kwargs))

    hop.__on_runtime__ = True  # type: ignore[attr-defined]
    return hop


_shared: Runtime | None = None
_shared_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide runtime, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.loop.is_closed() or _shared.forked:
            _shared = Runtime()
        return _shared


def _after_fork_in_child() -> None:
    """A forked child starts its own runtime on first use (the lock may have been held mid-fork)."""
    global _shared, _shared_lock
    _shared = None
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def default_threads(cores_per_thread: int = 1) -> int:
    """CPU threads for a native engine: ``$OMP_NUM_THREADS`` when set, else one per
    ``cores_per_thread`` of the cores this process may run on, at most 4.

    Why the cap: more threads rarely speed up the small bundled models, and on a shared machine
    they take cores from everything else.
    """
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores // cores_per_thread, 4))
