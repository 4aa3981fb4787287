"""Fixtures of the security tests: one real embedding model and one persist folder per module,
shared by every hypothesis example (each example uses fresh, unique user ids)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "reliability"))

from store_checks import minilm


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A persist folder kept open for the whole module by an anchor memory (so examples reuse its stores)."""
    from llama_index_memory_hierarchy import HierarchicalMemory

    folder = tmp_path_factory.mktemp("security") / "memory_data"
    anchor = HierarchicalMemory.from_defaults(
        user_id="anchor", session_id="anchor", persist_dir=str(folder), embed_model=minilm()
    )
    yield folder
    anchor.close()
