"""LlamaIndex's memory behaviour, case by case, on HierarchicalMemory and the class each case comes from.

The cases are those of llama-index-core's memory tests (put/get/get_all/set/reset, the async twins,
token limits, roles, blocks) and of its agent tests that pass ``memory=`` (FunctionAgent,
ReActAgent, AgentWorkflow), written again from the behaviour: each runs on ``HierarchicalMemory``
and on ``ChatMemoryBuffer`` and ``Memory``. The one difference kept on purpose here: the hierarchy's
``get()`` adds one system message with the memories it recalls (``conversation()`` leaves it out);
the others are in the README ("Differences from LlamaIndex's memory").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from contract_memories import (
    KINDS,
    LONG_PAGE,
    TOKEN_LIMIT,
    agent,
    conversation,
    exact_messages,
    open_memory,
)
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.llms import MockFunctionCallingLLM
from media_samples import image_bytes


@pytest.fixture
def open_kind(persist_dir: Path) -> Any:
    opened: list[Any] = []

    def factory(kind: str, session_id: str = "s1") -> Any:
        memory = open_memory(kind, persist_dir, session_id)
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        if hasattr(memory, "close"):
            memory.close()


def _user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def _assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


@pytest.mark.parametrize("kind", KINDS)
def test_put_then_get_all_and_get_return_the_messages_as_put(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    messages = [_user("I keep bees on the roof."), _assistant("How many hives?"), _user("Three.")]
    for message in messages:
        memory.put(message)
    assert memory.get_all() == messages
    assert conversation(memory.get()) == messages


@pytest.mark.parametrize("kind", KINDS)
async def test_the_async_twins_do_what_the_sync_methods_do(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    await memory.aput(_user("My sister is called Ines."))
    await memory.aput_messages([_assistant("Nice name."), _user("She paints.")])
    assert [m.content for m in await memory.aget_all()] == ["My sister is called Ines.", "Nice name.", "She paints."]
    assert conversation(await memory.aget())[-1].content == "She paints."
    await memory.aset([_user("Start over.")])
    assert [m.content for m in await memory.aget_all()] == ["Start over."]
    await memory.areset()
    assert await memory.aget_all() == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_block_whitespace_role_and_kwarg_replays_exactly(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    messages = exact_messages()
    memory.put_messages(messages)
    assert memory.get_all() == messages
    assert conversation(memory.get())[-1] == messages[-1]  # Memory counts the bytes as tokens: fewer fit


@pytest.mark.parametrize("kind", KINDS)
def test_set_replaces_the_history_and_reset_empties_it(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    memory.put(_user("First draft of the plan."))
    replacement = [_user("The plan is to sail to Oslo."), _assistant("When?")]
    memory.set(replacement)
    assert memory.get_all() == replacement
    memory.reset()
    assert memory.get_all() == []
    assert conversation(memory.get()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_roles_are_kept(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="Answer briefly."),
        _user("What is 2+2?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="4"),
        ChatMessage(role=MessageRole.TOOL, content="calculator: 4", additional_kwargs={"tool_call_id": "c1"}),
    ]
    memory.put_messages(messages)
    assert [m.role for m in memory.get_all()] == [m.role for m in messages]


@pytest.mark.parametrize("kind", KINDS)
def test_get_keeps_the_latest_messages_within_the_token_limit(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    filler = " ".join(["saffron"] * 400)
    for n in range(12):
        memory.put(_user(f"Message {n}: {filler}"))
    window = conversation(memory.get())
    assert window and window[-1].content.startswith("Message 11:")
    assert all(not (m.content or "").startswith("Message 0:") for m in window)
    assert len(memory.get_all()) == 12  # get_all is the whole history, beyond the limit
    assert TOKEN_LIMIT < 12 * 400


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_longer_than_any_memory_is_kept_whole(open_kind: Any, kind: str) -> None:
    memory = open_kind(kind)
    memory.put(ChatMessage(role=MessageRole.TOOL, content=LONG_PAGE, additional_kwargs={"tool_call_id": "c9"}))
    assert memory.get_all()[0].content == LONG_PAGE


def _build(agent_kind: str, llm: MockFunctionCallingLLM) -> Any:
    if agent_kind == "function":
        return FunctionAgent(llm=llm, tools=[], system_prompt="You are a gardener.")
    if agent_kind == "react":
        return ReActAgent(llm=llm, tools=[], system_prompt="You are a gardener.")
    return AgentWorkflow(agents=[FunctionAgent(name="gardener", description="A gardener.", llm=llm, tools=[])])


@pytest.mark.parametrize("agent_kind", ["function", "react", "workflow"])
@pytest.mark.parametrize("kind", KINDS)
async def test_an_agent_run_sees_the_earlier_turns_of_its_memory(open_kind: Any, kind: str, agent_kind: str) -> None:
    sent: list[list[ChatMessage]] = []

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        sent.append(list(messages))
        answer = "Noted."
        return _assistant(f"Thought: I can answer.\nAnswer: {answer}" if agent_kind == "react" else answer)

    runner = _build(agent_kind, MockFunctionCallingLLM(response_generator=respond))
    memory = open_kind(kind)
    await runner.run(user_msg="My tomatoes have yellow leaves.", memory=memory)
    await runner.run(user_msg="What did I say about my plants?", memory=memory)
    texts = [m.content or "" for m in sent[-1]]
    assert any("yellow leaves" in text for text in texts)
    assert texts[-1].endswith("What did I say about my plants?") or any(
        "What did I say about my plants?" in t for t in texts
    )
    roles = [m.role for m in await memory.aget_all()]
    assert roles.count(MessageRole.USER) == 2 and roles.count(MessageRole.ASSISTANT) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_150000_character_tool_output_is_kept_and_the_run_finishes(open_kind: Any, kind: str) -> None:
    sent: list[list[ChatMessage]] = []
    plan = [{"tool": "fetch_page", "kwargs": {"url": "https://example.invalid/report"}}, {"answer": "Read it."}]
    memory = open_kind(kind)
    response = await agent(plan, sent).run(user_msg="Read the report page.", memory=memory)
    assert str(response) == "Read it."
    tool_messages = [m for m in await memory.aget_all() if m.role == MessageRole.TOOL]
    assert [m.content for m in tool_messages] == [LONG_PAGE]
    assert any(m.content == LONG_PAGE for m in sent[-1])  # the LLM got the whole output


@pytest.mark.parametrize("kind", KINDS)
async def test_an_image_put_by_an_agent_run_reaches_the_next_llm_call(open_kind: Any, kind: str) -> None:
    sent: list[list[ChatMessage]] = []
    png = image_bytes("sunset", size=(800, 600))
    question = ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="What tree is it?")])
    memory = open_kind(kind)
    await agent([{"answer": "An oak."}], sent).run(user_msg=question, memory=memory)
    if kind == "hierarchy":  # durable: a memory opened again on the session replays the image
        memory.close()
        memory = open_kind(kind)
    await agent([{"answer": "Yes."}], sent).run(user_msg="Are you sure?", memory=memory)
    images = [b for m in sent[-1] for b in m.blocks if isinstance(b, ImageBlock)]
    assert len(images) == 1 and images[0].image == ImageBlock(image=png).image
