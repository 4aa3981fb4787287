"""Fixtures of the knowledge-base tests: a real document set written by the tests, a counting
wrapper around the real MiniLM embedding model, a scripted LLM, and knowledge bases closed
after each test."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kb_fixtures import (
    CSV,
    HTML,
    JSON_DOC,
    MARKDOWN,
    PDF_PAGES,
    TEXT,
    CountingEmbedding,
    real_model,
    write_docx,
    write_pdf,
)
from scripted_llm import ScriptedLLM


@pytest.fixture
def doc_dir(tmp_path: Path) -> Path:
    """A folder with one document of each supported kind, one unsupported and one corrupt file."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "handbook.md").write_text(MARKDOWN, encoding="utf-8")
    (folder / "kitchen.txt").write_text(TEXT, encoding="utf-8")
    (folder / "survey.html").write_text(HTML, encoding="utf-8")
    (folder / "instruments.csv").write_text(CSV, encoding="utf-8")
    (folder / "station.json").write_text(json.dumps(JSON_DOC), encoding="utf-8")
    write_pdf(folder / "glaciology.pdf", PDF_PAGES)
    write_docx(folder / "medical.docx")
    (folder / "diagram.xyz").write_bytes(b"\x89XYZ not a document")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this file was truncated")
    return folder


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
