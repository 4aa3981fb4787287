"""A scripted LlamaIndex LLM that records every prompt (a stand-in for a hosted LLM in tests).

It recognises the three prompts the knowledge base sends: multi-query expansion (LlamaIndex's
``QueryFusionRetriever`` prompt), HyDE (``DEFAULT_HYDE_PROMPT``) and the grounded answer, and
answers each from a script. The async path sleeps a little and counts calls in flight, so a
test can see that the expansion calls overlap.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms import CustomLLM
from pydantic import Field, PrivateAttr


def prompt_kind(prompt: str) -> str:
    """Which of the knowledge base's prompts this is: ``mqe``, ``hyde`` or ``answer``."""
    if "search queries" in prompt and "Query:" in prompt:
        return "mqe"
    if "write a passage to answer the question" in prompt:
        return "hyde"
    return "answer"


class ScriptedLLM(CustomLLM):
    """Answers MQE, HyDE and QA prompts from a script and records the prompts it was sent."""

    mqe: Callable[[str, int], list[str]] | None = Field(default=None, exclude=True)
    hyde: Callable[[str], str] | None = Field(default=None, exclude=True)
    answer: Callable[[str], str] | None = Field(default=None, exclude=True)
    async_delay: float = 0.05

    _prompts: list[str] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _in_flight: int = PrivateAttr(default=0)
    _max_in_flight: int = PrivateAttr(default=0)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=4096, num_output=256, model_name="scripted")

    @property
    def prompts(self) -> list[str]:
        with self._lock:
            return list(self._prompts)

    def prompts_of(self, kind: str) -> list[str]:
        return [p for p in self.prompts if prompt_kind(p) == kind]

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    def reset(self) -> None:
        """Forget recorded prompts and the script (back to the default answers)."""
        with self._lock:
            self._prompts.clear()
            self._max_in_flight = 0
        self.mqe = self.hyde = self.answer = None

    def _respond(self, prompt: str) -> str:
        with self._lock:
            self._prompts.append(prompt)
        kind = prompt_kind(prompt)
        if kind == "mqe":
            n = int(re.search(r"Generate (\d+) search queries", prompt).group(1))
            query = prompt.split("Query:", 1)[1].split("\n", 1)[0].strip()
            alternatives = self.mqe(query, n) if self.mqe else [f"{query} (variant {i + 1})" for i in range(n)]
            return "\n".join(f"{i + 1}. {q}" for i, q in enumerate(alternatives))
        if kind == "hyde":
            question = prompt.split("possible.", 1)[1].split("Passage:", 1)[0].strip()
            return self.hyde(question) if self.hyde else f"A passage that answers: {question}"
        return self.answer(prompt) if self.answer else "The sources say so [1]."

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._respond(prompt))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = self._respond(prompt)

        def gen() -> CompletionResponseGen:
            so_far = ""
            for word in re.findall(r"\S+\s*", text):
                so_far += word
                yield CompletionResponse(text=so_far, delta=word)

        return gen()

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            await asyncio.sleep(self.async_delay)
            return self.complete(prompt, formatted=formatted, **kwargs)
        finally:
            with self._lock:
                self._in_flight -= 1
