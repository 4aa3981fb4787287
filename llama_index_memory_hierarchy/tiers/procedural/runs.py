"""An agent's runs as the memory sees them through ``put``: the task, the tool calls in order, how each went.

A run starts with a user turn and ends with the assistant's answer (a reply that calls no tool).
``FunctionAgent`` puts each tool call as an assistant message with ``ToolCallBlock``s (or OpenAI-style
``tool_calls``) followed by ``tool`` messages carrying the results; ``ReActAgent`` puts one assistant
message holding its whole trace (``Action:`` / ``Action Input:`` / ``Observation:`` ... ``Answer:``).
Both end as a :class:`Run`, from which the procedural tier learns a procedure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

#: How a tool result that failed reads (llama_index's ``ToolOutput`` of an error, a missing tool).
_FAILED = re.compile(r"^\s*(?:error\b|encountered error|exception\b|traceback|tool \S+ not found|failed\b)", re.I)
_REACT_STEP = re.compile(
    r"Action:\s*(?P<tool>[\w.-]+)\s*\n\s*Action Input:\s*(?P<input>.*?)\n\s*Observation:\s*(?P<obs>.*?)"
    r"(?=\n\s*(?:Thought|Action|Answer):|\Z)",
    re.S,
)
_REACT_ANSWER = re.compile(r"(?:^|\n)\s*Answer:", re.S)


@dataclass
class Step:
    """One tool call of a run: the tool, the names of its arguments, and whether it worked (its error if not)."""

    tool: str
    args: list[str]
    call_id: str | None = None
    ok: bool = True
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": self.args, **({"error": self.error} if self.error else {})}


@dataclass
class Run:
    """A task the agent worked on: the user's request, its tool calls in order, the turns it spans."""

    task: str
    task_id: str
    steps: list[Step] = field(default_factory=list)
    turn_ids: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        """It answered, and its last tool call worked (earlier failures it recovered from teach what to avoid)."""
        return bool(self.steps) and self.steps[-1].ok


def _arg_names(kwargs: Any) -> list[str]:
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except ValueError:
            return []
    return [str(k) for k in kwargs] if isinstance(kwargs, dict) else []


def tool_calls(message: ChatMessage) -> list[Step]:
    """The tool calls an assistant message makes (``ToolCallBlock``s, or OpenAI-style ``tool_calls``)."""
    steps = [
        Step(block.tool_name, _arg_names(block.tool_kwargs), block.tool_call_id)
        for block in message.blocks
        if isinstance(block, ToolCallBlock)
    ]
    if steps:
        return steps
    for call in message.additional_kwargs.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else getattr(call, "function", None)
        name = function.get("name") if isinstance(function, dict) else getattr(function, "name", None)
        arguments = function.get("arguments") if isinstance(function, dict) else getattr(function, "arguments", None)
        call_id = call.get("id") if isinstance(call, dict) else getattr(call, "id", None)
        if isinstance(name, str) and name:
            steps.append(Step(name, _arg_names(arguments), call_id))
    return steps


def react_steps(text: str) -> list[Step] | None:
    """The tool calls of a ReAct trace that ends in an answer, or None when ``text`` is no such trace."""
    if "Action:" not in text or not _REACT_ANSWER.search(text):
        return None
    steps = []
    for match in _REACT_STEP.finditer(text):
        raw = match.group("input").strip()
        try:
            args = _arg_names(json.loads(raw))
        except ValueError:  # ReActAgent writes the input as a Python dict
            args = re.findall(r"['\"](\w+)['\"]\s*:", raw)
        observation = match.group("obs").strip()
        failed = bool(_FAILED.match(observation))
        steps.append(Step(match.group("tool"), args, ok=not failed, error=observation[:200] if failed else None))
    return steps or None


class RunTracker:
    """Follows the messages of one session and hands back each run that ended (see the module docstring)."""

    def __init__(self, ignored_tools: Iterable[str] = ()) -> None:
        self._ignored = frozenset(ignored_tools)
        self._run: Run | None = None

    def observe(self, memory_id: str, text: str, message: ChatMessage) -> Run | None:
        """Take one message put (its id and text); the run it ends, if it ends one that called tools."""
        role = message.role
        if role == MessageRole.USER:
            self._run = Run(task=text, task_id=memory_id, turn_ids=[memory_id]) if text.strip() else None
            return None
        run = self._run
        if run is None:
            return None
        run.turn_ids.append(memory_id)
        if role == MessageRole.TOOL:
            call_id = message.additional_kwargs.get("tool_call_id")
            step = next((s for s in reversed(run.steps) if call_id is None or s.call_id == call_id), None)
            if step is not None and _FAILED.match(text or ""):
                step.ok, step.error = False, (text or "")[:200]
            return None
        if role != MessageRole.ASSISTANT:
            return None
        calls = tool_calls(message)
        if calls:
            run.steps.extend(s for s in calls if s.tool not in self._ignored)
            return None
        traced = react_steps(text or "")
        if traced is not None:
            run.steps.extend(s for s in traced if s.tool not in self._ignored)
        self._run = None  # an answer ends the run
        return run if run.steps else None
