"""Procedural memory with real agents (FunctionAgent, ReActAgent) and a scripted LLM, each step in a new
process: an instruction of session 1 reaches the LLM's system context in session 5, a correction replaces
it, a tool sequence that solved a task is offered for a similar task and not for an unrelated one, and an
instruction deleted through the agent's tool is gone from every path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPT = HERE / "procedural_session.py"
TOOL_SCRIPT = HERE.parent / "tool_agent_session.py"


def run_turns(kind: str, persist_dir: Path, turns: list[list]) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), kind, str(persist_dir), json.dumps(turns)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def system_context(turn: dict) -> str:
    """What the LLM's last call carried as system messages."""
    return "\n".join(m["text"] for m in turn["sent"][-1] if m["role"] == "system")


@pytest.mark.parametrize("kind", ["function", "react"])
def test_an_instruction_reaches_session_five_and_a_correction_replaces_it(kind: str, persist_dir: Path) -> None:
    run_turns(kind, persist_dir, [["s1", "Hello! From now on, answer me in Chinese."]])
    *_, fifth, corrected, after = run_turns(
        kind,
        persist_dir,
        [
            ["s2", "What is a good name for a cat?"],
            ["s3", "How long should I boil an egg?"],
            ["s4", "Thanks!"],
            ["s5", "Tell me something about Lisbon."],
            ["s6", "Actually, English is fine again."],
            ["s7", "And Porto?"],
        ],
    )
    assert "From now on, answer me in Chinese." in system_context(fifth)
    shown = system_context(after)
    assert "English is fine again" in shown and "answer me in Chinese" not in shown
    assert corrected["sent"]


@pytest.mark.parametrize("kind", ["function", "react"])
def test_a_tool_sequence_is_offered_for_a_similar_task_only(kind: str, persist_dir: Path) -> None:
    (first,) = run_turns(kind, persist_dir, [["s1", "Convert the CSV to a chart.", ["load_table", "draw_chart"]]])
    assert len(first["sent"]) == 3  # two tool calls, then the answer
    similar, unrelated = run_turns(
        kind,
        persist_dir,
        [["s2", "Make a bar chart from the sales CSV file."], ["s3", "What is the capital of Portugal?"]],
    )
    offered = system_context(similar)
    assert "Procedure that worked for" in offered and "1. load_table(path); 2. draw_chart(rows, style)" in offered
    assert "Procedure that worked for" not in system_context(unrelated)


def test_an_instruction_deleted_by_the_agent_is_gone_from_every_path(persist_dir: Path) -> None:
    run_turns("function", persist_dir, [["s1", "Never book flights before 9 am."]])
    plan = [
        {"tool": "list_instructions"},
        {"tool": "remove_instruction", "kwargs": {"instruction_id": "$id"}, "match": "Never book flights"},
        {"answer": "Removed."},
    ]
    done = subprocess.run(
        [
            sys.executable,
            str(TOOL_SCRIPT),
            str(persist_dir),
            "li_lei",
            "s2",
            "Forget my flight rule.",
            json.dumps(plan),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = json.loads(done.stdout.strip().splitlines()[-1])
    listed, removed = log["tool_results"]
    assert "Never book flights before 9 am." in listed and removed.startswith("Removed standing instruction")
    (later,) = run_turns("function", persist_dir, [["s3", "Book me a flight to Rome; any rule about flight times?"]])
    # no standing rule reaches the LLM any more (the user's own turn stays an episodic record, quoted as data)
    assert "Standing instructions" not in json.dumps(later["sent"])

    from llama_index_memory_hierarchy import HierarchicalMemory

    memory = HierarchicalMemory.from_defaults(user_id="li_lei", session_id="s4", persist_dir=str(persist_dir))
    try:
        assert memory.procedural.instructions(include_history=True) == []
        found = memory.search("book flights before 9 am", 10, memory_types=["procedural"], include_history=True)
        assert found == []
    finally:
        memory.close()
