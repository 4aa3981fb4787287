"""Fixtures of the knowledge-base tests: a real document set written by the tests, a counting
wrapper around the real MiniLM embedding model, a scripted LLM, and knowledge bases closed
after each test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kb_fixtures import CountingEmbedding, real_model, write_doc_set
from scripted_llm import ScriptedLLM


@pytest.fixture
def doc_dir(tmp_path: Path) -> Path:
    """A folder with one document of each supported kind, one unsupported and one corrupt file."""
    return write_doc_set(tmp_path / "docs")


@pytest.fixture
def embed_model() -> CountingEmbedding:
    return CountingEmbedding(real_model())


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def make_kb(persist_dir: Path, embed_model: CountingEmbedding, llm: ScriptedLLM) -> Iterator[Callable[..., Any]]:
    """Factory of knowledge bases over the test's folder (one embedding model, so one shared context)."""
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    opened: list[KnowledgeBase] = []

    def factory(namespace: str = "docs", user_id: str = "alice", **kwargs: Any) -> KnowledgeBase:
        kwargs.setdefault("persist_dir", str(persist_dir))
        kwargs.setdefault("embed_model", embed_model)
        kwargs.setdefault("llm", llm)
        kb = KnowledgeBase.from_defaults(namespace=namespace, user_id=user_id, **kwargs)
        opened.append(kb)
        return kb

    yield factory
    for kb in opened:
        kb.close()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """One knowledge base with the document set ingested, shared by a module's read-only tests:
    ``(kb, embed_model, llm)``; modules override ``kb``/``llm``/``embed_model`` to use it."""
    from llama_index_memory_hierarchy.knowledge import KnowledgeBase

    root = tmp_path_factory.mktemp("kb_ingested")
    embed, llm = CountingEmbedding(real_model()), ScriptedLLM()
    kb = KnowledgeBase.from_defaults(
        namespace="docs", persist_dir=str(root / "store"), user_id="alice", embed_model=embed, llm=llm
    )
    kb.add_documents(write_doc_set(root / "docs"))
    yield kb, embed, llm
    kb.close()
