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


def scripted_browser(calls: list[tuple[str, dict[str, Any]]]) -> MockFunctionCallingLLM:
    """'Remember X #tag' -> remember(X, tags); 'list tag T' -> list_memories; 'show ID' -> get_memory;
    'forget ID ID' -> forget(memory_ids); then answer with the tool's text."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        last_user = max(i for i, m in enumerate(messages) if m.role == MessageRole.USER)
        question = messages[last_user].content or ""
        results = [m.content or "" for m in messages[last_user + 1 :] if m.role == MessageRole.TOOL]
        if results:
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"From memory: {results[-1]}")
        verb, _, rest = question.partition(" ")
        if verb == "Remember":
            content, _, tag = rest.partition(" #")
            name, arguments = "remember", {"content": content, "tier": "episodic", "tags": [tag]}
        elif verb == "list":
            name, arguments = "list_memories", {"tags": [rest.removeprefix("tag ")], "limit": 10}
        elif verb == "show":
            name, arguments = "get_memory", {"memory_id": rest}
        else:
            name, arguments = "forget", {"memory_ids": rest.split()}
        calls.append((name, arguments))
        call = ToolCallBlock(tool_call_id=f"call-{uuid.uuid4().hex[:8]}", tool_name=name, tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    return MockFunctionCallingLLM(response_generator=respond)


async def test_function_agent_browses_inspects_and_forgets_several_memories(server: HttpServer) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    client = BasicMCPClient(server.url, headers={"Authorization": f"Bearer {AGENT}"}, timeout=120)
    tools = await McpToolSpec(client=client).to_tool_list_async()
    agent = FunctionAgent(llm=scripted_browser(calls), tools=tools, system_prompt="You are an assistant with memory.")

    async def ask(message: str) -> str:
        return str(await agent.run(user_msg=message))

    stored = [
        await ask("Remember The user planted apple trees. #orchard"),
        await ask("Remember The user grafted a pear tree. #orchard"),
    ]
    memory_ids = [re.findall(r"id=([0-9a-f-]{36})", answer)[0] for answer in stored]
    listed = await ask("list tag orchard")
    assert calls[-1][0] == "list_memories" and all(i in listed for i in memory_ids) and "2 memories match" in listed
    shown = await ask(f"show {memory_ids[0]}")
    assert calls[-1][0] == "get_memory" and "apple trees" in shown
    forgotten = await ask(f"forget {' '.join(memory_ids)}")
    assert calls[-1] == ("forget", {"memory_ids": memory_ids}) and forgotten.count("Forgot episodic memory") == 2
    assert "0 memories match" in await ask("list tag orchard")
