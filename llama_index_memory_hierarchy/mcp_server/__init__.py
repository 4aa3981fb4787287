"""``lmh mcp``: the memory as a Model Context Protocol server, for any MCP client or agent.

Imports the ``mcp`` SDK (the ``mcp`` extra: ``pip install 'llama-index-memory-hierarchy[mcp]'``);
the package root never imports this module, so ``import llama_index_memory_hierarchy`` stays light.
"""

from __future__ import annotations

from llama_index_memory_hierarchy.mcp_server.access import Principal, TokenTable, token_digest
from llama_index_memory_hierarchy.mcp_server.server import INSTRUCTIONS, build_server
from llama_index_memory_hierarchy.mcp_server.service import MemoryService

__all__ = ["INSTRUCTIONS", "MemoryService", "Principal", "TokenTable", "build_server", "token_digest"]
