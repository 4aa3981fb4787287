"""The memories of the contract suite, the messages it puts, and a scripted function-calling LLM.

Each case of ``tests/contract`` runs on ``HierarchicalMemory`` and on the LlamaIndex class it
comes from (``ChatMemoryBuffer``, ``Memory``), built here with the same token limit. The LLM is
core's ``MockFunctionCallingLLM`` following a plan (the only mock: it stands in for a hosted LLM);
it records every message list it is sent. Run as a script, it resumes a saved agent ``Context`` in
a new process: ``python contract_memories.py CONTEXT_FILE SERIALIZER answer|continue TEXT`` prints what its
LLM saw, its response and the memory it ran with.
"""

import asyncio
import json
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.tools import FunctionTool
from workflows import Context
from workflows.context import JsonSerializer, PickleSerializer
from workflows.events import HumanResponseEvent, InputRequiredEvent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from media_samples import image_bytes

#: Token limit of the short-term history, the same for every kind.
TOKEN_LIMIT = 3000
KINDS = ("hierarchy", "buffer", "memory")
SERIALIZERS: dict[str, Callable[[], Any]] = {"json": JsonSerializer, "pickle": PickleSerializer}
#: What the page tool returns: longer than the 100,000 characters one explicit memory may hold.
LONG_PAGE = "".join(f"line {n}: the quarterly figures of the made-up Fennel Corp.\n" for n in range(2600))
assert len(LONG_PAGE) > 150_000


def open_memory(kind: str, persist_dir: Path, session_id: str = "s1", **kwargs: Any) -> Any:
    """A fresh memory of ``kind`` for user ``ada`` (the hierarchy over ``persist_dir``)."""
    if kind == "hierarchy":
        from llama_index_memory_hierarchy import HierarchicalMemory

        return HierarchicalMemory.from_defaults(
            user_id="ada", session_id=session_id, persist_dir=str(persist_dir), chat_history_token_limit=TOKEN_LIMIT
        )
    if kind == "buffer":
        return ChatMemoryBuffer.from_defaults(token_limit=TOKEN_LIMIT)
    return Memory.from_defaults(session_id=session_id, token_limit=TOKEN_LIMIT)


def exact_messages() -> list[ChatMessage]:
    """Messages that come back changed unless they are stored exactly (invented texts)."""
    png = image_bytes("sunset", size=(640, 480))
    return [
        ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="What is in this photo?")]),
        ChatMessage(role=MessageRole.ASSISTANT, content="    def area(r):\n        return 3.14 * r * r\n\n"),
        ChatMessage(role=MessageRole.ASSISTANT, blocks=[TextBlock(text="First part."), TextBlock(text="Second.")]),
        ChatMessage(role=MessageRole.ASSISTANT, content=""),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[ToolCallBlock(tool_call_id="call-7", tool_name="lookup", tool_kwargs={"q": "otters"})],
            additional_kwargs={"tool_calls": [{"id": "call-7", "name": "lookup"}]},
        ),
        ChatMessage(role=MessageRole.TOOL, content="Otters hold hands.", additional_kwargs={"tool_call_id": "call-7"}),
        ChatMessage(
            role=MessageRole.USER,
            blocks=[AudioBlock(audio=b"RIFF" + bytes(range(256)) * 40, format="wav"), TextBlock(text="Hear this.")],
        ),
        ChatMessage(
            role=MessageRole.USER,
            blocks=[
                DocumentBlock(data=b"%PDF-1.4\n" + b"(a made-up report) " * 400, document_mimetype="application/pdf"),
                TextBlock(text="Summarise the report."),
            ],
        ),
    ]


def conversation(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` without system messages (the hierarchy adds one with the memories it recalls)."""
    return [m for m in messages if m.role != MessageRole.SYSTEM]


def scripted_llm(plan: list[dict[str, Any]], sent: list[list[ChatMessage]]) -> MockFunctionCallingLLM:
    """A function-calling LLM following ``plan`` (a step per tool result since the last user message:
    ``{"tool": name, "kwargs": {...}}`` or ``{"answer": text}``), recording each message list it is sent."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        sent.append(list(messages))
        last_user = max((i for i, m in enumerate(messages) if m.role == MessageRole.USER), default=0)
        results = [m for m in messages[last_user + 1 :] if m.role == MessageRole.TOOL]
        step = plan[min(len(results), len(plan) - 1)]
        if "tool" not in step:
            return ChatMessage(role=MessageRole.ASSISTANT, content=step["answer"])
        call = ToolCallBlock(
            tool_call_id=f"call-{uuid.uuid4().hex[:8]}", tool_name=step["tool"], tool_kwargs=step.get("kwargs", {})
        )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    return MockFunctionCallingLLM(response_generator=respond)


def fetch_page(url: str) -> str:
    """Fetch a web page."""
    return LONG_PAGE


async def ask_human(ctx: Context, question: str) -> str:
    """Ask the person a question and wait for the answer (the run pauses until it comes).

    The question goes out as the wait's ``waiter_event``, as LlamaIndex's human-in-the-loop guide does: the
    runtime publishes it only once the waiter is in the run's state, so a context saved on seeing it always
    holds the wait. (Written to the stream before the wait, it raced the step: a context saved on seeing it
    sometimes lacked the waiter, and the resumed run never delivered the answer.) This module has no
    ``from __future__ import annotations``: the tool finds ``ctx`` by its annotation.
    """
    answer = await ctx.wait_for_event(
        HumanResponseEvent, waiter_event=InputRequiredEvent(prefix=question), waiter_id=question
    )
    return answer.response


def agent(plan: list[dict[str, Any]], sent: list[list[ChatMessage]]) -> FunctionAgent:
    """A FunctionAgent with the page and the ask-a-human tools, following ``plan``."""
    tools = [FunctionTool.from_defaults(fetch_page), FunctionTool.from_defaults(ask_human)]
    return FunctionAgent(llm=scripted_llm(plan, sent), tools=tools, system_prompt="You help Ada.")


#: The plan of a run resumed after a pause: ask, then answer.
ASK_PLAN: list[dict[str, Any]] = [{"tool": "ask_human", "kwargs": {"question": "Which city?"}}, {"answer": "Noted."}]


async def apause(run_agent: FunctionAgent, message: str, memory: Any, serializer: str) -> dict[str, Any]:
    """Start a run that asks a human, and save its context at the question (the run is then cancelled)."""
    handler = run_agent.run(user_msg=message, memory=memory)
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            saved = handler.ctx.to_dict(serializer=SERIALIZERS[serializer]())
            await handler.cancel_run()
            return json.loads(json.dumps(saved))
    raise AssertionError("the run never asked")


async def aresume(run_agent: FunctionAgent, saved: dict[str, Any], serializer: str, answer: str) -> str:
    """Resume a paused run from its saved context with the human's answer; its response.

    The saved context already holds the wait (its question was asked once), so the answer is sent at once.
    """
    response, _ = await aresume_in(
        run_agent, Context.from_dict(run_agent, saved, serializer=SERIALIZERS[serializer]()), answer
    )
    return response


async def aresume_in(run_agent: FunctionAgent, ctx: Context, answer: str) -> tuple[str, Any]:
    """Resume a paused run in the restored ``ctx`` with the human's answer; its response and its memory."""
    handler = run_agent.run(ctx=ctx)
    handler.ctx.send_event(HumanResponseEvent(response=answer))
    response = str(await handler)
    return response, await ctx.store.get("memory")


async def _main(path: str, serializer: str, mode: str, text: str) -> None:
    sent: list[list[ChatMessage]] = []
    run_agent = agent(ASK_PLAN if mode == "answer" else [{"answer": "Welcome back."}], sent)
    saved = json.loads(Path(path).read_text())
    ctx = Context.from_dict(run_agent, saved, serializer=SERIALIZERS[serializer]())
    if mode == "answer":  # a paused run: the human's answer resumes it
        response, ctx_memory = await aresume_in(run_agent, ctx, text)
    else:  # a finished run: the next message continues it
        response = str(await run_agent.run(user_msg=text, ctx=ctx))
        ctx_memory = await ctx.store.get("memory")
    seen = [m.content or "" for m in sent[-1]]
    print(json.dumps({"seen": seen, "response": response, "memory": type(ctx_memory).__name__}))
    ctx_memory.close()


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:5]))
