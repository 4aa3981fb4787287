"""A scripted LlamaIndex LLM for the lifecycle tests: fixed replies per prompt kind, every prompt recorded.

It stands in for a hosted model: ``rules`` map a marker found in the prompt (the importance,
routing, distillation, reflection and summary prompts each have one) to a fixed reply or to a
function of the prompt. ``async_delay`` makes the async path slow, to show that background
work does not block the caller.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from pydantic import Field, PrivateAttr

#: Markers of the lifecycle's prompts.
IMPORTANCE = "rate the likely poignancy"
ROUTING = "sort the memories of an AI assistant"
DISTILL = "You consolidate the memory"
REFLECTION = "high-level insights"
SUMMARY = "Progressively summarize"


class ScriptedLLM(CustomLLM):
    """Replies from ``rules`` (first marker found in the prompt wins), else ``default``."""

    rules: list[tuple[str, Any]] = Field(default_factory=list, exclude=True)
    default: str = "{}"
    async_delay: float = 0.0

    _prompts: list[str] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=8192, num_output=512, model_name="scripted-lifecycle")

    @property
    def prompts(self) -> list[str]:
        with self._lock:
            return list(self._prompts)

    def prompts_with(self, marker: str) -> list[str]:
        return [p for p in self.prompts if marker in p]

    def _reply(self, prompt: str) -> str:
        with self._lock:
            self._prompts.append(prompt)
        for marker, reply in self.rules:
            if marker in prompt:
                return reply(prompt) if callable(reply) else reply
        return self.default

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._reply(prompt))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if self.async_delay:
            await asyncio.sleep(self.async_delay)
        return self.complete(prompt)
