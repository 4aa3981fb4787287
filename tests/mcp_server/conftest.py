"""One ``lmh mcp --http`` server for the HTTP and agent tests (each start loads the embedding model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from mcp_helpers import HttpServer


def _ingest_manual(folder: Path, source: Path) -> None:
    """Alice's knowledge base 'manuals' holds one document (written before the server holds the folder)."""
    from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase

    source.write_text("# Router\n\nTo reset the router, hold the red reset button for ten seconds.\n", "utf-8")
    with KnowledgeBase.from_defaults(namespace="manuals", persist_dir=str(folder), user_id="alice") as kb:
        assert kb.add_documents(str(source)).ok


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The server over a folder where alice has a document; tokens for alice, bob, carol, dave, zhang_san, admin."""
    pytest.importorskip("mcp")
    from mcp_helpers import ADMIN, USERS, HttpServer, write_tokens

    root = tmp_path_factory.mktemp("mcp-http")
    _ingest_manual(root / "memory", root / "router.md")
    tokens = write_tokens(root / "tokens.toml", USERS, admin=ADMIN)
    with HttpServer(root / "memory", tokens) as running:
        yield running
