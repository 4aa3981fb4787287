"""Fixtures of the reliability tests: one real embedding model per session, and store checks
written independently of the package's own verifier (the tests must not trust the code under test)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The bundled all-MiniLM-L6-v2, loaded once for the session (contexts are keyed by the instance)."""
    from llama_index_memory_hierarchy.embeddings import load_default_model

    return load_default_model()


@functools.cache
def hashing() -> Any:
    """One lightweight hashing embedding per session (same vector space as ``embed_model="hashing"``):
    contexts are keyed by the model instance, so sharing it shares the stores and the fitted vectorizer."""
    from llama_index_memory_hierarchy.embeddings import HashingEmbedding

    return HashingEmbedding()


def clone_folder(source: Path, target: Path) -> Path:
    """Copy a persist folder keeping its sparse files sparse (qdrant-edge preallocates 32 MB maps)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    (target / ".lock").unlink(missing_ok=True)
    return target
