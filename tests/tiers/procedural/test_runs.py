"""Runs as the memory sees them through put: FunctionAgent's tool-call messages and ReActAgent's trace."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock

from llama_index_memory_hierarchy.tiers.procedural import MEMORY_TOOLS, RunTracker
from llama_index_memory_hierarchy.tiers.procedural.runs import react_steps, tool_calls
from llama_index_memory_hierarchy.tools import MemoryToolSpec


def test_function_agent_messages_make_a_run_with_its_failures() -> None:
    tracker = RunTracker()
    assert tracker.observe("u", "resize the photos", ChatMessage(role="user", content="resize the photos")) is None
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="a", tool_name="open", tool_kwargs={})])
    tracker.observe("c1", "", call)
    tracker.observe(
        "t1", "Error: no such folder", ChatMessage(role="tool", content="x", additional_kwargs={"tool_call_id": "a"})
    )
    again = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_call_id="b", tool_name="resize", tool_kwargs={"width": 800, "folder": "p"})],
    )
    tracker.observe("c2", "", again)
    tracker.observe(
        "t2", "12 resized", ChatMessage(role="tool", content="12 resized", additional_kwargs={"tool_call_id": "b"})
    )
    run = tracker.observe("a", "Done.", ChatMessage(role="assistant", content="Done."))
    assert run is not None and run.task == "resize the photos" and run.succeeded
    assert [(s.tool, s.ok) for s in run.steps] == [("open", False), ("resize", True)]
    assert run.steps[1].args == ["width", "folder"] and run.turn_ids == ["u", "c1", "t1", "c2", "t2", "a"]


def test_openai_style_tool_calls_are_read() -> None:
    message = ChatMessage(
        role="assistant",
        content="",
        additional_kwargs={"tool_calls": [{"id": "x", "function": {"name": "lookup", "arguments": '{"q": "a"}'}}]},
    )
    (step,) = tool_calls(message)
    assert (step.tool, step.args, step.call_id) == ("lookup", ["q"], "x")


def test_a_react_trace_is_one_run() -> None:
    trace = (
        "Thought: read it.\nAction: load_table\nAction Input: {'path': 'a.csv'}\nObservation: 3 rows\n"
        'Thought: plot.\nAction: draw_chart\nAction Input: {"rows": 3}\nObservation: Error: bad style\n'
        'Thought: again.\nAction: draw_chart\nAction Input: {"rows": 3, "style": "bar"}\nObservation: chart.png\n'
        "Thought: done.\nAnswer: here it is"
    )
    steps = react_steps(trace)
    assert [(s.tool, s.ok) for s in steps] == [("load_table", True), ("draw_chart", False), ("draw_chart", True)]
    assert steps[0].args == ["path"] and steps[2].args == ["rows", "style"]
    assert react_steps("Thought: I can answer.\nAnswer: hi") is None
    tracker = RunTracker()
    tracker.observe("u", "chart it", ChatMessage(role="user", content="chart it"))
    run = tracker.observe("a", trace, ChatMessage(role="assistant", content=trace))
    assert run is not None and len(run.steps) == 3


def test_an_answer_without_tools_is_no_run_and_memory_tools_are_ignored() -> None:
    tracker = RunTracker(MEMORY_TOOLS)
    tracker.observe("u", "hello", ChatMessage(role="user", content="hello"))
    assert tracker.observe("a", "hi", ChatMessage(role="assistant", content="hi")) is None
    tracker.observe("u2", "what do I like", ChatMessage(role="user", content="what do I like"))
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="r", tool_name="recall", tool_kwargs={})])
    tracker.observe("c", "", call)
    assert tracker.observe("a2", "You like tea.", ChatMessage(role="assistant", content="You like tea.")) is None


def test_every_memory_tool_is_ignored() -> None:
    assert {name for name, _ in MemoryToolSpec.spec_functions} <= MEMORY_TOOLS
