"""The agent behind ``lmh chat`` and ``lmh demo``: a LlamaIndex ``FunctionAgent`` with ``memory=``.

A function-calling LLM (a hosted model given with ``--llm``) gets the memory tools and
decides itself when to remember, recall, update or forget. A plain chat LLM, such as the
bundled SmolLM2-135M, cannot call tools reliably: it is wrapped by :class:`ChatOnlyLLM`
so that the same ``FunctionAgent`` runs it for plain chat turns, with the memories that
``HierarchicalMemory.get()`` retrieves folded into the user's turn (where a small model
actually reads them), and the caller invokes the memory tools itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import LLM, ToolSelection
from pydantic import Field, SerializeAsAny

logger = logging.getLogger(__name__)

#: Longest an agent turn may take before the CLI gives up on it (the local model is bounded by max_tokens).
TURN_TIMEOUT_SECONDS = 180.0


class ChatOnlyLLM(FunctionCallingLLM):
    """A chat LLM presented as a function-calling one that never calls a tool.

    Why: ``FunctionAgent`` requires a function-calling LLM even with no tools. With
    ``fold_system=True`` the system messages (the agent's system prompt and the memory
    context) are moved into the latest user message: small local models follow
    instructions and use facts given in the user turn far better than in system turns.
    """

    llm: SerializeAsAny[LLM] = Field(description="The wrapped chat LLM.")
    fold_system: bool = Field(default=True, description="Move system messages into the latest user turn.")

    @classmethod
    def class_name(cls) -> str:
        return "ChatOnlyLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.llm.metadata.model_copy(update={"is_function_calling_model": True})

    # ---- tools: none are offered, none are called ----------------------------------------------
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if tools:
            logger.debug("ChatOnlyLLM: %d tools not offered to %s", len(tools), type(self.llm).__name__)
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(
                user_msg if isinstance(user_msg, ChatMessage) else ChatMessage(role="user", content=user_msg)
            )
        return {"messages": messages}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        return []

    # ---- messages ---------------------------------------------------------------------------
    def _messages(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        if not self.fold_system:
            return list(messages)
        system = [m.content or "" for m in messages if m.role in (MessageRole.SYSTEM, MessageRole.DEVELOPER)]
        rest = [m for m in messages if m.role not in (MessageRole.SYSTEM, MessageRole.DEVELOPER)]
        last_user = max((i for i, m in enumerate(rest) if m.role == MessageRole.USER), default=None)
        if not system or last_user is None:
            return list(messages)
        turn = rest[last_user]
        folded = "\n\n".join([*(s.strip() for s in system if s.strip()), turn.content or ""])
        rest[last_user] = ChatMessage(role=MessageRole.USER, content=folded)
        return rest

    # ---- delegation -----------------------------------------------------------------------------
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.llm.chat(self._messages(messages), **kwargs)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self.llm.achat(self._messages(messages), **kwargs)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self.llm.stream_chat(self._messages(messages), **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return await self.llm.astream_chat(self._messages(messages), **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.llm.complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await self.llm.acomplete(prompt, formatted=formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        return self.llm.stream_complete(prompt, formatted=formatted, **kwargs)

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        return await self.llm.astream_complete(prompt, formatted=formatted, **kwargs)


def calls_tools(llm: Any) -> bool:
    """Whether ``llm`` can drive tools itself (a function-calling model)."""
    try:
        return bool(llm.metadata.is_function_calling_model) and isinstance(llm, FunctionCallingLLM)
    except Exception:  # metadata of third-party LLMs may need credentials or network
        return False


def build_agent(llm: Any, *, system_prompt: str, tools: Sequence[Any] = ()) -> Any:
    """A ``FunctionAgent``: with the tools for a function-calling LLM, tool-less around a chat LLM."""
    from llama_index.core.agent.workflow import FunctionAgent

    if calls_tools(llm):
        return FunctionAgent(llm=llm, tools=list(tools), system_prompt=system_prompt, timeout=TURN_TIMEOUT_SECONDS)
    return FunctionAgent(llm=ChatOnlyLLM(llm=llm), tools=[], system_prompt=system_prompt, timeout=TURN_TIMEOUT_SECONDS)


async def arun_turn(
    agent: Any,
    message: str,
    memory: Any,
    *,
    on_delta: Callable[[str], None] | None = None,
    on_tool: Callable[[str, dict[str, Any], str], None] | None = None,
    timeout: float = TURN_TIMEOUT_SECONDS,
) -> str:
    """One agent turn with ``memory=``; streams text to ``on_delta`` and tool calls to ``on_tool``.

    Bounded by ``timeout`` so that a stuck model never hangs the command.
    """
    from llama_index.core.agent.workflow import AgentStream, ToolCallResult

    async def turn() -> str:
        handler = agent.run(user_msg=message, memory=memory)
        async for event in handler.stream_events():
            if isinstance(event, AgentStream) and on_delta is not None and event.delta:
                on_delta(event.delta)
            elif isinstance(event, ToolCallResult) and on_tool is not None:
                on_tool(event.tool_name, dict(event.tool_kwargs), str(event.tool_output))
        response = await handler
        return str(response).strip()

    try:
        return await asyncio.wait_for(turn(), timeout)
    except TimeoutError:
        from llama_index_memory_hierarchy.cli._common import CLIError

        raise CLIError(f"the agent did not answer within {timeout:.0f} s") from None
