"""``RuntimeBound``: public coroutines run on the runtime loop, with one hop per public call."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound, default_threads

T = TypeVar("T")


class CountingRuntime(Runtime):
    """A real runtime that counts the coroutines handed over to its loop from outside."""

    def __init__(self) -> None:
        super().__init__(name="lmh-test-runtime")
        self.hops = 0

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        self.hops += 1
        return super().submit(coro)


class Probe(RuntimeBound):
    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    @property
    def runtime(self) -> Runtime:
        return self._rt

    async def athread(self) -> str:
        return threading.current_thread().name

    async def anested(self) -> list[str]:
        return [await self.athread(), await self.athread()]

    def nested(self) -> list[str]:
        return self.blocking(self.anested())

    async def _aprivate(self) -> str:
        return threading.current_thread().name


@pytest.fixture
def runtime() -> Iterator[CountingRuntime]:
    rt = CountingRuntime()
    yield rt
    rt.stop()


def test_public_coroutines_run_on_the_runtime_with_one_hop_per_call(runtime: CountingRuntime) -> None:
    probe = Probe(runtime)
    assert asyncio.run(probe.anested()) == ["lmh-test-runtime", "lmh-test-runtime"]
    assert runtime.hops == 1  # the nested public calls ran inline on the runtime
    assert probe.nested() == ["lmh-test-runtime", "lmh-test-runtime"]
    assert runtime.hops == 2
    assert asyncio.run(probe._aprivate()) == "MainThread"  # private coroutines are not moved


def test_sync_twins_refuse_to_block_the_runtime_itself(runtime: CountingRuntime) -> None:
    probe = Probe(runtime)

    async def from_inside() -> None:
        probe.nested()

    with pytest.raises(RuntimeError, match="async API"):
        runtime.run(from_inside())


# ---- default_threads: the one rule for the native engines' threads ------------------------------


@pytest.mark.parametrize(
    ("cores", "cores_per_thread", "expected"),
    [(8, 1, 4), (3, 1, 3), (6, 2, 3), (2, 2, 1), (1, 2, 1)],
)
def test_default_threads_is_one_per_cores_per_thread_at_most_four(
    monkeypatch: pytest.MonkeyPatch, cores: int, cores_per_thread: int, expected: int
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    assert default_threads(cores_per_thread) == expected


def test_default_threads_honours_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "6")
    assert default_threads() == default_threads(cores_per_thread=2) == 6
    monkeypatch.setenv("OMP_NUM_THREADS", "0")  # not a thread count: the cores decide
    assert default_threads() == 4
