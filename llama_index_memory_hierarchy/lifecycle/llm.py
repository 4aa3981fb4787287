"""LLM plumbing shared by the lifecycle: which LLM, one completion, tolerant JSON parsing.

Prompts ask for JSON and the reply is parsed leniently (code fences, prose around the
object), because hosted and local models wrap JSON differently. A reply that cannot be
parsed is a failure the caller answers with its offline path, never an exception for the user.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from llama_index_memory_hierarchy.errors import LLMReplyError
from llama_index_memory_hierarchy.llms import resolve_llm

logger = logging.getLogger(__name__)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


_resolved: dict[tuple[int, bool], Any] = {}


def configured_llm(llm: Any = None, *, allow_local: bool = False) -> Any:
    """``llm``, else ``Settings.llm`` when the user set one, else (``allow_local``) the bundled model, else None.

    Resolved once per (``Settings.llm``, ``allow_local``): a later ``Settings.llm`` is seen, and the
    bundled model is constructed (and logged) once, not on every call.
    """
    if llm is not None:
        return llm
    from llama_index.core import Settings  # heavy: loaded when an LLM is first asked for

    key = (id(getattr(Settings, "_llm", None)), allow_local)
    if key not in _resolved:
        _resolved.clear()  # Settings changed: forget the previous answers (and their objects)
        _resolved[key] = resolve_llm(None, allow_local=allow_local)
    return _resolved[key]


async def acomplete(llm: Any, prompt: str, *, schema: dict[str, Any] | None = None) -> str:
    """The text of one completion (``acomplete``; chat models answer through LlamaIndex's adapter).

    ``schema``: the JSON schema of the expected reply, passed to LLMs that can constrain their
    output to it (the bundled local model), so that even a small model returns valid JSON.
    """
    kwargs: dict[str, Any] = {}
    if schema is not None and _constrains_json(llm):
        kwargs["json_schema"] = schema
    response = await llm.acomplete(prompt, **kwargs)
    return str(getattr(response, "text", response) or "")


def _constrains_json(llm: Any) -> bool:
    try:
        from llama_index_memory_hierarchy.llms.local import LocalLLM  # light: loads no library or model
    except ImportError:  # pragma: no cover - partial installs
        return False
    return isinstance(llm, LocalLLM)


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON object schema (helper for the reply schemas of the lifecycle's prompts)."""
    return {"type": "object", "properties": properties, "required": required}


SOURCES = {"type": "array", "items": {"type": "integer"}}


def parse_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (inside a code fence or not)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        candidate = candidate.strip()
        try:
            return json.loads(candidate)
        except ValueError:
            pass
        for opener, closer in (("{", "}"), ("[", "]")):
            start, end = candidate.find(opener), candidate.rfind(closer)
            if start != -1 and end > start:
                try:
                    return json.loads(candidate[start : end + 1])
                except ValueError:
                    continue
    raise LLMReplyError(f"no JSON in the LLM reply: {text[:200]!r}")


def repeats_source(generated: str, source: str) -> bool:
    """Whether an LLM's summary or insight only repeats a source text: (nearly) all its words are the source's."""
    words = re.findall(r"\w+", generated.casefold())
    given = set(re.findall(r"\w+", source.casefold()))
    return bool(words) and sum(w in given for w in words) / len(words) >= 0.9


def parse_rating(text: str, low: int = 1, high: int = 10) -> int:
    """The first integer in ``low..high`` in ``text`` (JSON ``{"rating": n}`` or plain text)."""
    try:
        data = parse_json(text)
        if isinstance(data, dict):
            for key in ("rating", "importance", "score", "poignancy"):
                value = data.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high:
                    return round(value)
    except LLMReplyError:
        pass
    for match in re.finditer(r"\d+(?:\.\d+)?", text):
        value = float(match.group(0))
        if low <= value <= high:
            return round(value)
    raise LLMReplyError(f"no rating {low}-{high} in the LLM reply: {text[:200]!r}")
