"""``MemoryService``, the stores and hierarchies one MCP server holds for its life."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.mcp_server.access import Principal
from llama_index_memory_hierarchy.mcp_server.service import MemoryService


def test_a_warm_up_after_the_server_closed_logs_no_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Found by the serving fuzz (``tests/cli/test_fuzz_serving_options.py``): a stdio client that leaves at once
    (stdin closed) closed the server while the stores still opened in the background, and the warm-up logged 'the
    server is shutting down' as an error, with a traceback."""
    service = MemoryService(MemoryConfig(persist_dir=str(tmp_path), embed_model="hashing"), principal=Principal(
        user_id="alice"))  # fmt: skip
    service.close()
    with caplog.at_level(logging.DEBUG, logger="llama_index_memory_hierarchy.mcp_server.service"):
        service.warm_up_in_background()
        assert service._warming is not None
        service._warming.join()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "shutting down" in caplog.text  # said, at debug level
