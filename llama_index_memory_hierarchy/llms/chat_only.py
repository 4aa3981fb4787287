"""``ChatOnlyLLM``: a chat LLM presented as a function-calling one, so ``FunctionAgent`` runs it.

Why: ``FunctionAgent`` requires a function-calling LLM even with no tools, and the bundled offline
model (SmolLM2-135M, ``LocalLLM``) cannot call tools reliably. Wrapped, it answers plain chat turns with
what ``HierarchicalMemory.get()`` retrieved; ``lmh chat`` and ``lmh demo`` run it so, and so does the
README's Quick start.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
