"""Fixtures of the scale tests: one PostgreSQL database and one Chroma server per session.

Both are started (or created) on loopback for the session and stopped (dropped) afterwards;
a test that needs one skips with the reason when it cannot be had.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from servers import ChromaServer, Unavailable, fresh_pg_database


@pytest.fixture(scope="session")
def scale_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the session (``LMH_TEST_POSTGRES_URL`` names the server)."""
    try:
        manager = fresh_pg_database("lmh_scale")
        url = manager.__enter__()
    except Unavailable as exc:
        pytest.skip(str(exc))
    try:
        yield url
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def scale_chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server (``chroma run`` from the chromadb wheel) on a free loopback port."""
    try:
        server = ChromaServer(tmp_path_factory.mktemp("chroma-scale") / "data").start()
    except Unavailable as exc:
        pytest.skip(f"Chroma server unavailable: {exc}")
    try:
        yield server.url
    finally:
        server.stop()
