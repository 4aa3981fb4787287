"""Fixtures of the lifecycle tests: one MiniLM model for the session, memories over a fresh folder,
no global LLM (offline paths unless a test passes a scripted LLM), and a controllable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def embed_model() -> Any:
    """The bundled all-MiniLM-L6-v2, loaded once for every lifecycle test."""
    from llama_index_memory_hierarchy.embeddings import resolve_embed_model

    return resolve_embed_model("default")


@pytest.fixture(autouse=True)
def no_global_llm() -> Iterator[None]:
    """``Settings.llm`` unset during each test (restored afterwards), so offline paths run unless asked."""
    from llama_index.core import Settings

    saved = getattr(Settings, "_llm", None)
    Settings._llm = None
    try:
        yield
    finally:
        Settings._llm = saved


@pytest.fixture
def memory_factory(persist_dir: Path, embed_model: Any) -> Iterator[Callable[..., Any]]:
    """HierarchicalMemory objects over the test's folder sharing the session's model; closed afterwards."""
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    opened: list[Any] = []

    def factory(user_id: str = "alice", session_id: str = "s1", **kwargs: Any) -> Any:
        kwargs.setdefault("persist_dir", str(persist_dir))
        kwargs.setdefault("embed_model", embed_model)
        memory = HierarchicalMemory.from_defaults(user_id=user_id, session_id=session_id, **kwargs)
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()


class Clock:
    """A settable UTC clock for simulated days (patched over ``utcnow`` where time is read)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now = self.now + timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Simulated time: every module of the package that reads ``utcnow`` reads this clock."""
    import llama_index_memory_hierarchy.hierarchy as hierarchy
    import llama_index_memory_hierarchy.lifecycle.forgetting as forgetting
    import llama_index_memory_hierarchy.tiers.base as base
    import llama_index_memory_hierarchy.tiers.episodic as episodic
    import llama_index_memory_hierarchy.tiers.semantic.tier as semantic
    import llama_index_memory_hierarchy.tiers.semantic.writer as semantic_writer
    import llama_index_memory_hierarchy.tiers.stored as stored
    import llama_index_memory_hierarchy.tiers.working as working
    import llama_index_memory_hierarchy.types as types

    fake = Clock(datetime(2025, 3, 1, 9, 0, tzinfo=UTC))
    for module in (hierarchy, forgetting, base, episodic, stored, semantic, semantic_writer, working, types):
        if hasattr(module, "utcnow"):
            monkeypatch.setattr(module, "utcnow", fake)
    return fake
