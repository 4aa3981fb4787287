"""What every tool module of the server shares: the ``user_id`` argument, the knowledge-base ``namespace``
argument and the tool annotations, defined once so that each tool says the same to a client."""

from __future__ import annotations

from typing import Annotated

from mcp.types import ToolAnnotations
from pydantic import Field

UserArg = Annotated[
    str | None,
    Field(
        description="Leave this out: the server already knows whose memory it serves. Only an admin token "
        "may name another user; any other value is refused."
    ),
]
NamespaceArg = Annotated[str, Field(description="Which knowledge base (default 'docs').")]

#: Reads the user's memory only.
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
#: Adds to the user's memory; nothing is replaced.
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
#: Removes memories (doing it twice removes nothing more).
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)

__all__ = ["DESTROY", "READ", "WRITE", "NamespaceArg", "UserArg"]
