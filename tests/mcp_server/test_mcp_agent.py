"""A LlamaIndex ``FunctionAgent`` whose tools come from ``lmh mcp --http`` through ``llama-index-tools-mcp``.

The agent stores a fact with the server's ``remember`` tool, the server is restarted twice, and
after each restart a new agent (new tools, new client) recalls the fact through ``recall``. The
LLM is core's ``MockFunctionCallingLLM`` with a script: the only mock, standing in for a hosted
function-calling model.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.tools.mcp")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec
from mcp_helpers import AGENT, HttpServer


def scripted_llm(calls: list[tuple[str, dict[str, Any]]]) -> MockFunctionCallingLLM:
    """'Remember that X' -> remember(X); any other question -> recall(question); then answer from the tool result."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        last_user = max(i for i, m in enumerate(messages) if m.role == MessageRole.USER)
        question = messages[last_user].content or ""
        results = [m.content or "" for m in messages[last_user + 1 :] if m.role == MessageRole.TOOL]
        if results:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"From memory: {results[-1]}")
        wanted = re.match(r"remember that (.+)", question, re.IGNORECASE)
        name, arguments = (
            ("remember", {"content": wanted.group(1), "importance": 0.9})
            if wanted
            else (
                "recall",
                {"query": question, "limit": 3},
            )
        )
        calls.append((name, arguments))
        call = ToolCallBlock(tool_call_id=f"call-{uuid.uuid4().hex[:8]}", tool_name=name, tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    return MockFunctionCallingLLM(response_generator=respond)


async def ask(server: HttpServer, message: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """One agent turn with tools freshly listed from ``server``."""
    client = BasicMCPClient(server.url, headers={"Authorization": f"Bearer {AGENT}"}, timeout=120)
    tools = await McpToolSpec(client=client).to_tool_list_async()
    assert {"remember", "recall", "forget"} <= {tool.metadata.name for tool in tools}
    agent = FunctionAgent(llm=scripted_llm(calls), tools=tools, system_prompt="You are an assistant with memory.")
    return str(await agent.run(user_msg=message))


async def test_function_agent_stores_and_recalls_a_fact_across_two_server_restarts(server: HttpServer) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    stored = await ask(server, "Remember that my sister Mia lives in Lisbon.", calls)
    assert calls[-1][0] == "remember" and "Remembered in semantic memory" in stored
    (memory_id,) = set(re.findall(r"id=([0-9a-f-]{36})", stored))
    for _restart in range(2):
        assert server.restart() == 0  # a clean stop (SIGTERM), then a new process on the same folder and port
        answer = await ask(server, "Where does my sister Mia live?", calls)
        assert calls[-1][0] == "recall"
        assert "Lisbon" in answer and memory_id in answer


async def test_tools_and_resources_listed_together_have_unique_names(server: HttpServer) -> None:
    client = BasicMCPClient(server.url, headers={"Authorization": f"Bearer {AGENT}"}, timeout=120)
    names = [
        tool.metadata.name for tool in await McpToolSpec(client=client, include_resources=True).to_tool_list_async()
    ]
    assert "profile" in names and "user_profile" in names
    assert len(names) == len(set(names)), sorted(names)
