"""Run one agent turn over a persist folder in this process and print what the LLM was sent.

Used by the agent tests as a separate process (``python agent_session.py KIND DIR SESSION MESSAGE``)
so that session 2 really runs in a new interpreter. The LLM is core's
``MockFunctionCallingLLM`` with a response generator that records every message it
receives: the only mock, standing in for a hosted LLM.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import MockFunctionCallingLLM

from llama_index_memory_hierarchy import HierarchicalMemory


def recording_llm(sent: list[list[dict[str, str]]], kind: str) -> MockFunctionCallingLLM:
    """A mock LLM that answers plainly and records every prompt (role and text of each message)."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        sent.append([{"role": m.role.value, "text": m.content or ""} for m in messages])
        answer = "I remember our earlier conversation."
        if kind == "react":
            answer = f"Thought: I can answer without using any more tools.\nAnswer: {answer}"
        return ChatMessage(role="assistant", content=answer)

    return MockFunctionCallingLLM(response_generator=respond)


def build_agent(kind: str, llm: MockFunctionCallingLLM) -> Any:
    if kind == "function":
        return FunctionAgent(llm=llm, tools=[], system_prompt="You are a tutor.")
    if kind == "react":
        return ReActAgent(llm=llm, tools=[], system_prompt="You are a tutor.")
    if kind == "workflow":
        return AgentWorkflow(agents=[FunctionAgent(name="tutor", description="A tutor.", llm=llm, tools=[])])
    raise SystemExit(f"unknown agent kind {kind!r}")


async def main(kind: str, persist_dir: str, session_id: str, message: str) -> None:
    sent: list[list[dict[str, str]]] = []
    agent = build_agent(kind, recording_llm(sent, kind))
    memory = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id=session_id, persist_dir=persist_dir)
    try:
        response = await agent.run(user_msg=message, memory=memory)
        print(json.dumps({"response": str(response), "sent": sent}))
    finally:
        memory.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
