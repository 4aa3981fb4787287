"""LLMs the CLI tests name with ``--llm cli_llms:NAME`` (this folder is on PYTHONPATH).

Stand-ins for a hosted LLM, the only mocks the tests use: a function-calling model that stores
what the user asks it to remember through the memory tools, and the knowledge-base script.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "knowledge"))


def remembering_llm() -> MockFunctionCallingLLM:
    """Calls ``remember`` for "remember that ..." turns, then confirms; otherwise quotes the memory context."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        last_user = max(i for i, m in enumerate(messages) if m.role == MessageRole.USER)
        text = messages[last_user].content or ""
        tool_results = [m for m in messages[last_user + 1 :] if m.role == MessageRole.TOOL]
        wanted = re.match(r"remember that (.+)", text, re.IGNORECASE)
        if wanted and not tool_results:
            call = ToolCallBlock(
                tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
                tool_name="remember",
                tool_kwargs={"content": wanted.group(1), "tier": "semantic", "importance": 0.9},
            )
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        if tool_results:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"Done: {tool_results[-1].content}")
        context = "\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
        remembered = [line for line in context.splitlines() if line.startswith("- [")]
        return ChatMessage(role=MessageRole.ASSISTANT, content="I remember: " + " | ".join(remembered))

    return MockFunctionCallingLLM(response_generator=respond)


def scripted_llm() -> Any:
    """The knowledge tests' scripted LLM (MQE variants, a HyDE passage, an answer citing [1])."""
    from scripted_llm import ScriptedLLM

    return ScriptedLLM(async_delay=0.0)
