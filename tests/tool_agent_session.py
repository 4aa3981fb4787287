"""Run one FunctionAgent turn that uses ``MemoryToolSpec`` over a persist folder, in this process.

``python tool_agent_session.py DIR USER SESSION MESSAGE PLAN_JSON`` prints JSON with the tool
results the LLM received, the tool names it was offered and the final response. The LLM is
core's ``MockFunctionCallingLLM`` driven by a script (the plan): each step is a tool call or
the final answer. ``"$id"`` in a step's arguments is replaced by the memory id that the last
tool result lists next to a memory containing the step's ``"match"`` text, so the agent
really finds the id it acts on. The tests also import :func:`run_turn` to run a turn in process.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM

from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.tools import MemoryToolSpec

_ENTRY = re.compile(r"id=([0-9a-f-]{36})[^\n]*\n\s+([^\n]*)")


def _resolve(value: Any, last_tool_result: str, match: str | None) -> Any:
    if value != "$id":
        return value
    for memory_id, content in _ENTRY.findall(last_tool_result):
        if match is None or match in content:
            return memory_id
    single = re.search(r"id=([0-9a-f-]{36})", last_tool_result)
    return single.group(1) if single else "no-id-found"


def scripted_llm(plan: list[dict[str, Any]], log: dict[str, Any]) -> MockFunctionCallingLLM:
    """A function-calling LLM that follows ``plan`` and records the tool results it is sent."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        log["offered"] = sorted(tool.metadata.name for tool in kwargs.get("tools") or [])
        last_user = max(i for i, m in enumerate(messages) if m.role == MessageRole.USER)
        results = [m.content or "" for m in messages[last_user + 1 :] if m.role == MessageRole.TOOL]
        log["tool_results"] = results
        step = plan[min(len(results), len(plan) - 1)]
        if "tool" not in step:
            return ChatMessage(role=MessageRole.ASSISTANT, content=step["answer"])
        last = results[-1] if results else ""
        arguments = {k: _resolve(v, last, step.get("match")) for k, v in step.get("kwargs", {}).items()}
        call = ToolCallBlock(tool_call_id=f"call-{uuid.uuid4().hex[:8]}", tool_name=step["tool"], tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    return MockFunctionCallingLLM(response_generator=respond)


async def run_turn(memory: HierarchicalMemory, message: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    """One agent turn with the memory tools; returns the log (tool results, tools offered, response)."""
    log: dict[str, Any] = {}
    tools = MemoryToolSpec(memory).to_tool_list()
    agent = FunctionAgent(llm=scripted_llm(plan, log), tools=tools, system_prompt="You remember things.")
    response = await agent.run(user_msg=message, memory=memory)
    log["response"] = str(response)
    return log


async def main(persist_dir: str, user_id: str, session_id: str, message: str, plan_json: str) -> None:
    memory = HierarchicalMemory.from_defaults(user_id=user_id, session_id=session_id, persist_dir=persist_dir)
    try:
        print(json.dumps(await run_turn(memory, message, json.loads(plan_json))))
    finally:
        memory.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
