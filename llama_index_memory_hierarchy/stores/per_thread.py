"""One resource per calling thread, opened on first use and closed all together: the embedded stores' read connections.

Why: a read that runs at once on its caller's thread (the store runtime's loop, mostly) needs a
connection that no other thread is using, without a pool to wait on; a thread keeps its own
for later reads, and the store closes every one when it closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerThread(Generic[T]):
    """``opener()``'s resource for each thread that asks (:meth:`get`), until :meth:`close`."""

    def __init__(self, opener: Callable[[], T], closed_error: Callable[[], Exception]) -> None:
        self._opener = opener
        self._closed_error = closed_error  # what :meth:`get` raises once closed
        self._local = threading.local()
        self._opened: list[T] = []
        self._lock = threading.Lock()
        self.closed = False

    def get(self) -> T:
        """This thread's resource (opened now if it has none)."""
        if self.closed:
            raise self._closed_error()
        resource: T | None = getattr(self._local, "resource", None)
        if resource is None:
            with self._lock:
                if self.closed:
                    raise self._closed_error()
                resource = self._local.resource = self._opener()
                self._opened.append(resource)
        return resource

    def close(self, closer: Callable[[T], None]) -> None:
        """Close every thread's resource (idempotent); :meth:`get` raises afterwards."""
        with self._lock:
            self.closed = True
            opened, self._opened = self._opened, []
        for resource in opened:
            closer(resource)

    def __len__(self) -> int:
        """How many resources are open."""
        return len(self._opened)
