"""Real LlamaIndex agents with HierarchicalMemory as ``memory=``: a fact from session 1
in one process reaches the LLM in session 2 in another process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("agent_session.py")


def run_turn(kind: str, persist_dir: Path, session: str, message: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), kind, str(persist_dir), session, message],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["function", "react", "workflow"])
def test_fact_from_session_one_reaches_llm_in_session_two(kind: str, persist_dir: Path) -> None:
    first = run_turn(kind, persist_dir, "s1", "I'm Zhang San, learning Python; I know the basic syntax.")
    assert first["sent"], "the LLM was never called in session 1"
    second = run_turn(kind, persist_dir, "s2", "Do you remember how far I got?")
    prompts = "\n".join(message["text"] for call in second["sent"] for message in call)
    assert "I know the basic syntax" in prompts
    last_call = second["sent"][-1]
    assert any(m["role"] == "system" and "learning Python" in m["text"] for m in last_call)
    assert last_call[-1]["role"] == "user" or any("how far I got" in m["text"] for m in last_call)
