"""Every agent kind, with and without a system prompt, gets the memories through ``memory=``; a reply
longer than working memory's whole token budget is stored and never crashes the agent (issue 17, items 6-7).

Real LlamaIndex agents and stores; the only mock is the LLM (core's ``MockFunctionCallingLLM``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import MockFunctionCallingLLM

sys.path.insert(0, str(Path(__file__).parent))

from agent_session import recording_llm

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.text import count_tokens

FACT = "I'm Zhang San, learning Python; I know the basic syntax."


def _agent(kind: str, prompt: str | None, llm: MockFunctionCallingLLM) -> Any:
    if kind == "function":
        return FunctionAgent(llm=llm, tools=[], system_prompt=prompt)
    if kind == "react":
        return ReActAgent(llm=llm, tools=[], system_prompt=prompt)
    if kind == "workflow-react":
        return AgentWorkflow(agents=[ReActAgent(name="tutor", description="A tutor.", llm=llm, system_prompt=prompt)])
    return AgentWorkflow(agents=[FunctionAgent(name="tutor", description="A tutor.", llm=llm, system_prompt=prompt)])


@pytest.mark.parametrize(
    ("kind", "prompt"),
    [
        ("function", None),
        ("react", None),
        ("react", "You are a tutor."),
        ("workflow", None),
        ("workflow-react", None),
    ],
)  # with a system prompt, function agents and workflows are covered by test_agents.py
async def test_memories_reach_the_llm_for_every_agent_kind(kind: str, prompt: str | None, persist_dir: Path) -> None:
    react = "react" in kind
    first = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id="s1", persist_dir=str(persist_dir))
    try:
        await _agent(kind, prompt, recording_llm([], "react" if react else kind)).run(user_msg=FACT, memory=first)
    finally:
        first.close()
    sent: list[list[dict[str, str]]] = []
    second = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id="s2", persist_dir=str(persist_dir))
    try:
        llm = recording_llm(sent, "react" if react else kind)
        await _agent(kind, prompt, llm).run(user_msg="Do you remember how far I got?", memory=second)
    finally:
        second.close()
    prompt_text = "\n".join(message["text"] for message in sent[-1])
    assert "I know the basic syntax" in prompt_text, sent[-1]
    if prompt:
        assert prompt in prompt_text


async def test_a_reply_longer_than_the_working_budget_is_stored_whole(persist_dir: Path) -> None:
    long_reply = " ".join(f"step{i} of the derivation" for i in range(700))

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        return ChatMessage(role="assistant", content=long_reply)

    memory = HierarchicalMemory.from_defaults(user_id="zhang_san", session_id="s1", persist_dir=str(persist_dir))
    try:
        budget = memory.config.working_token_budget
        assert count_tokens(long_reply) > budget
        agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=respond), tools=[])
        response = await agent.run(user_msg="Derive it in full, please.", memory=memory)
        assert str(response) == long_reply
        stored = [item for item in memory.episodic.get_session() if item.metadata.get("role") == "assistant"]
        assert [item.content for item in stored] == [long_reply]  # episodic keeps the whole reply, once
        view = memory.working.get(stored[0].id)
        assert view is not None and long_reply.startswith(view.content.rstrip("…"))
        assert memory.working.token_count <= budget and "working_view" in view.metadata
        assert [m.content for m in await memory.aget_all()][-1] == long_reply
        memory.put(ChatMessage(role="user", content=long_reply))  # the sync path too, twice in a row
        memory.put(ChatMessage(role="user", content=long_reply + " again"))
        assert memory.working.token_count <= budget
    finally:
        memory.close()
