"""Shared fixtures: offline model loading, a fresh persist folder, memories closed after each test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run long variants (soak, fuzz)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="long variant: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def persist_dir(tmp_path: Path) -> Path:
    """An empty persist folder for one test."""
    folder = tmp_path / "memory_data"
    folder.mkdir()
    return folder


@pytest.fixture
def make_memory(persist_dir: Path) -> Iterator[Callable[..., object]]:
    """Factory of HierarchicalMemory objects over the test's folder; all closed afterwards."""
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    opened: list[HierarchicalMemory] = []

    def factory(user_id: str = "alice", session_id: str = "s1", **kwargs: object) -> HierarchicalMemory:
        kwargs.setdefault("persist_dir", str(persist_dir))
        memory = HierarchicalMemory.from_defaults(user_id=user_id, session_id=session_id, **kwargs)
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()
