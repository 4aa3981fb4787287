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
    """The server over a folder where alice has a document; tokens for alice, bob, carol, dave, erin, zhang_san,
    admin; document tools confined to :func:`document_root`."""
    pytest.importorskip("mcp")
    from mcp_helpers import ADMIN, USERS, HttpServer, write_tokens

    root = tmp_path_factory.mktemp("mcp-http")
    _ingest_manual(root / "memory", root / "router.md")
    tokens = write_tokens(root / "tokens.toml", USERS, admin=ADMIN)
    with HttpServer(root / "memory", tokens, "--document-root", str(document_root(root))) as running:
        yield running


def document_root(root: Path) -> Path:
    """The folder the server may read: two notes, and a link to a file outside it (which it must refuse)."""
    folder = root / "docs"
    (folder / "garden").mkdir(parents=True)
    (folder / "garden" / "roses.md").write_text("# Roses\n\nPrune the climbing roses in late winter.\n", "utf-8")
    (folder / "garden" / "tomatoes.md").write_text("# Tomatoes\n\nWater tomatoes at the base.\n", "utf-8")
    (root / "secret.md").write_text("# Secret\n\nThe safe code is 1234.\n", "utf-8")
    (folder / "escape.md").symlink_to(root / "secret.md")
    return folder
