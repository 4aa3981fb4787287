"""PerThread: each thread its own resource, kept for its later calls, all closed together."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from llama_index_memory_hierarchy.stores.per_thread import PerThread


def test_each_thread_gets_its_own_and_keeps_it() -> None:
    opened: list[tuple[int, int]] = []

    def opener() -> tuple[int, int]:
        opened.append((threading.get_ident(), len(opened)))
        return opened[-1]

    resources = PerThread(opener, lambda: RuntimeError("closed"))
    mine = resources.get()
    assert resources.get() is mine
    barrier = threading.Barrier(3)

    def in_a_thread(_: int) -> tuple[int, int]:
        barrier.wait(5)
        first = resources.get()
        assert resources.get() is first
        return first

    with ThreadPoolExecutor(3) as pool:
        others = list(pool.map(in_a_thread, range(3)))
    assert len({id(r) for r in [mine, *others]}) == 4 and len(resources) == 4
    assert len({owner for owner, _ in opened}) == 4  # each opened by the thread that uses it
    closed: list[tuple[int, int]] = []
    resources.close(closed.append)
    assert sorted(closed) == sorted(opened) and len(resources) == 0
    resources.close(closed.append)  # idempotent
    assert len(closed) == 4
    with pytest.raises(RuntimeError, match="closed"):
        resources.get()
