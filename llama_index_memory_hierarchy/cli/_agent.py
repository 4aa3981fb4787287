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

from llama_index.core.llms.function_calling import FunctionCallingLLM

from llama_index_memory_hierarchy.llms.chat_only import ChatOnlyLLM

logger = logging.getLogger(__name__)

#: Longest an agent turn may take before the CLI gives up on it (the local model is bounded by max_tokens).
TURN_TIMEOUT_SECONDS = 180.0


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
    except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
        from llama_index_memory_hierarchy.cli._common import CLIError

        raise CLIError(f"the agent did not answer within {timeout:.0f} s") from None
