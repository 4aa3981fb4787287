"""The conversation benchmark's data holds what its docstring promises, and its parser reads get()'s lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from llama_index.core.llms import ChatMessage, MessageRole

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path[:0] = [str(BENCH)]

from conversation import load, recall, shown_events  # noqa: E402

from llama_index_memory_hierarchy.messages import MEMORY_HEADER, format_memory  # noqa: E402
from llama_index_memory_hierarchy.types import MemoryItem  # noqa: E402


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_user_has_a_large_archive_and_the_marked_events_exist(language: str) -> None:
    users = load(language)
    assert len(users) >= 2
    assert sum(len(u["dialogues"]) for u in users) >= 120
    for user in users:
        ids = {e["id"] for e in user["events"]}
        assert len(ids) == len(user["events"]) >= 100
        assert any(e["kind"] == "distractor" for e in user["events"])
        for dialogue in user["dialogues"]:
            assert set(dialogue["relevant"]) <= ids
            assert dialogue["turns"][-1]["role"] == "user"
            event = next(e["text"] for e in user["events"] if e["id"] == dialogue["relevant"][0])
            assert all(t["text"] not in event for t in dialogue["turns"])


def test_shown_events_reads_the_memory_lines_in_order() -> None:
    items = [MemoryItem.create(content=text, user_id="u", metadata={"role": "user"}) for text in ("b said", 'a "q"')]
    content = "\n".join([MEMORY_HEADER, *(format_memory(i) for i in reversed(items))])
    messages = [ChatMessage(role=MessageRole.USER, content="hi"), ChatMessage(role=MessageRole.SYSTEM, content=content)]
    assert shown_events(messages, {"b said": "e1", 'a "q"': "e2"}) == ["e2", "e1"]
    assert recall(["e2", "e1"], ["e1"], 1) == 0.0
    assert recall(["e2", "e1"], ["e1"], 5) == 1.0
