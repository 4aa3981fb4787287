"""Run agent turns over a persist folder in this process and print what the LLM was sent, as JSON.

``python procedural_session.py KIND DIR TURNS_JSON``: ``TURNS_JSON`` lists ``[session, message]`` (or
``[session, message, [tool, ...]]``: the scripted LLM first calls those tools in order, then answers).
Each turn opens its session's memory, runs a ``FunctionAgent`` or ``ReActAgent`` (``KIND``) with two
chart tools, and closes it. The LLM is core's ``MockFunctionCallingLLM`` with a scripted response
generator (the only mock, standing in for a hosted LLM).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from llama_index_memory_hierarchy import HierarchicalMemory

ARGS = {"load_table": {"path": "sales.csv"}, "draw_chart": {"rows": "3", "style": "bar"}}


def load_table(path: str) -> str:
    """Read a table from a CSV file."""
    return f"3 rows from {path}"


def draw_chart(rows: str, style: str = "bar") -> str:
    """Draw a chart of table rows."""
    return f"chart.png ({style}, {rows} rows)"


def scripted_llm(sent: list[list[dict[str, str]]], kind: str, tools: list[str]) -> MockFunctionCallingLLM:
    """Calls ``tools`` in order (one per LLM call), then answers; records every prompt."""
    state = {"calls": 0}

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        sent.append([{"role": m.role.value, "text": m.content or ""} for m in messages])
        step = state["calls"]
        state["calls"] += 1
        if kind == "react":
            if step < len(tools):
                name = tools[step]
                return ChatMessage(
                    role=MessageRole.ASSISTANT,
                    content=f"Thought: I need {name}.\nAction: {name}\nAction Input: {json.dumps(ARGS[name])}",
                )
            return ChatMessage(role=MessageRole.ASSISTANT, content="Thought: I can answer now.\nAnswer: Done.")
        if step < len(tools):
            name = tools[step]
            call = ToolCallBlock(tool_call_id=f"call-{uuid.uuid4().hex[:8]}", tool_name=name, tool_kwargs=ARGS[name])
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
        return ChatMessage(role=MessageRole.ASSISTANT, content="Done.")

    return MockFunctionCallingLLM(response_generator=respond)


async def run(kind: str, persist_dir: str, turns: list[list[Any]]) -> list[dict[str, Any]]:
    out = []
    tools = [FunctionTool.from_defaults(load_table), FunctionTool.from_defaults(draw_chart)]
    for session, message, *script in turns:
        sent: list[list[dict[str, str]]] = []
        llm = scripted_llm(sent, kind, script[0] if script else [])
        agent_cls = FunctionAgent if kind == "function" else ReActAgent
        agent = agent_cls(llm=llm, tools=tools, system_prompt="You are an assistant.")
        memory = HierarchicalMemory.from_defaults(user_id="li_lei", session_id=session, persist_dir=persist_dir)
        try:
            response = await agent.run(user_msg=message, memory=memory)
        finally:
            memory.close()
        out.append({"session": session, "response": str(response), "sent": sent})
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))))
