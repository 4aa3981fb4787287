"""HierarchicalMemory as a LlamaIndex BaseMemory: history, retrieved memories, sharing, isolation."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemory, Memory
from PIL import Image

from llama_index_memory_hierarchy import HierarchicalMemory, MemoryValidationError
from llama_index_memory_hierarchy.tiers.perceptual import PerceptionSettings
from llama_index_memory_hierarchy.tiers.semantic import SemanticSettings
from llama_index_memory_hierarchy.types import MemoryType


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def test_is_a_llama_index_base_memory(make_memory) -> None:
    memory = make_memory()
    assert isinstance(memory, BaseMemory)
    assert memory.working.memory_type is MemoryType.WORKING
    assert memory.episodic.memory_type is MemoryType.EPISODIC


def test_put_records_every_message_in_working_and_episodic(make_memory) -> None:
    memory = make_memory()
    memory.put(user("My sister Lena lives in Lisbon."))
    memory.put(assistant("Noted, Lena lives in Lisbon."))
    assert memory.episodic.get_stats()["count"] == 2
    assert memory.working.get_stats()["count"] == 2
    assert [m.content for m in memory.get_all()] == ["My sister Lena lives in Lisbon.", "Noted, Lena lives in Lisbon."]


def test_new_session_gets_earlier_memories_as_a_system_message(make_memory) -> None:
    first = make_memory(session_id="s1")
    first.put_messages([user("I'm Zhang San, learning Python; I know the basic syntax."), assistant("Great start!")])
    first.close()
    second = make_memory(session_id="s2")
    second.put(user("Do you remember how far I got with Python?"))
    messages = second.get()
    # the memory message follows the latest user message (a leading one would be dropped by ReActAgent)
    assert [m.role for m in messages][-2:] == [MessageRole.USER, MessageRole.SYSTEM]
    assert "I know the basic syntax" in messages[-1].content
    assert messages[-2].content == "Do you remember how far I got with Python?"
    assert "basic syntax" not in "".join(m.content for m in messages[:-1])  # not duplicated in history


def test_get_with_explicit_input_and_token_budget(make_memory) -> None:
    memory = make_memory(chat_history_token_limit=60)
    memory.episodic.add("The user's favourite colour is teal", session_id="older")
    for i in range(20):
        memory.put(user(f"message number {i} with some padding words"))
    messages = memory.get(input="what colour do I like?")
    assert messages[-1].role == MessageRole.SYSTEM and "teal" in messages[-1].content
    history = messages[:-1]
    assert history[-1].content.startswith("message number 19")
    assert len(history) < 20


def test_history_survives_a_new_object_in_the_same_session(make_memory) -> None:
    first = make_memory(session_id="s1")
    first.put_messages([user("one"), assistant("two")])
    first.close()
    again = make_memory(session_id="s1")
    assert [m.content for m in again.get_all()] == ["one", "two"]


def test_set_and_reset(make_memory) -> None:
    memory = make_memory()
    memory.put(user("before"))
    memory.set([user("a"), assistant("b")])
    assert [m.content for m in memory.get_all()] == ["a", "b"]
    memory.reset()
    assert memory.get_all() == []
    assert memory.working.get_stats()["count"] == 0
    assert memory.episodic.get_stats()["count"] == 3  # long-term memory keeps what was said


async def test_async_twins_do_not_block_the_loop(make_memory) -> None:
    memory = make_memory()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await memory.aput(user("async hello about gardening"))
    await memory.aput_messages([assistant("hi"), user("tomatoes need sun")])
    messages = await memory.aget(input="gardening")
    task.cancel()
    assert ticks > 3
    assert [m.content for m in await memory.aget_all()][-1] == "tomatoes need sun"
    assert messages
    await memory.aset([user("x")])
    await memory.areset()
    assert await memory.aget_all() == []


def test_many_memories_share_one_folder_and_stay_isolated(make_memory) -> None:
    alice = make_memory("alice", "s1")
    bob = make_memory("bob", "s1")
    alice_2 = make_memory("alice", "s2")
    alice.put(user("My passport number is X1234567"))
    bob.put(user("I like sailing"))
    assert alice.context is bob.context is alice_2.context
    leaked = bob.get(input="passport number")
    assert all("X1234567" not in m.content for m in leaked)
    assert "X1234567" in alice_2.get(input="passport number")[-1].content
    assert not bob.as_retriever(similarity_top_k=10).retrieve("passport")  # nothing of bob's is relevant
    nodes = bob.as_retriever(similarity_top_k=10, ranking="no_floor").retrieve("passport")
    assert nodes and all(n.node.metadata["user_id"] == "bob" for n in nodes)


def test_fused_retriever_returns_nodes_with_identity(make_memory) -> None:
    memory = make_memory()
    memory.put(user("I keep my bike in the basement"))
    nodes = memory.as_retriever(similarity_top_k=3).retrieve("where is the bike?")
    assert nodes[0].node.get_content() == "I keep my bike in the basement"
    metadata = nodes[0].node.metadata
    assert {"memory_id", "memory_type", "user_id", "timestamp", "importance"} <= set(metadata)
    only_episodic = memory.as_retriever(memory_types=["episodic"]).retrieve("bike")
    assert {n.node.metadata["memory_type"] for n in only_episodic} == {"episodic"}


async def test_memory_blocks_compose_into_llama_index_memory(make_memory) -> None:
    hierarchy = make_memory(session_id="earlier")
    hierarchy.put(user("My dentist appointment is on March 3rd"))
    memory = Memory.from_defaults(session_id="now", token_limit=2000, memory_blocks=hierarchy.memory_blocks())
    await memory.aput(user("When is my dentist appointment?"))
    messages = await memory.aget()
    assert "March 3rd" in messages[0].content


def test_from_defaults_without_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("LMH_")]:
        monkeypatch.delenv(key)
    memory = HierarchicalMemory.from_defaults()
    try:
        memory.put(user("hello"))
        assert memory.user_id == "default"
        assert (tmp_path / "memory_data" / "memory.db").exists()
    finally:
        memory.close()


def test_tier_settings_are_reachable_through_from_defaults(make_memory, tmp_path: Path) -> None:
    semantic, perception = SemanticSettings(extract_on_add=False), PerceptionSettings(store_files=False)
    memory = make_memory(semantic=semantic, perception=perception)
    assert memory.semantic.settings == semantic and memory.perceptual.settings == perception
    memory.semantic.add("Alice works at Acme Corp.")  # kept as a statement, no fact extracted from it
    assert memory.semantic.get_facts("Alice") == []
    original = tmp_path / "note.png"
    Image.new("RGB", (16, 16), "teal").save(original)
    pid = memory.perceptual.add_perception(original, caption="a teal square")
    assert memory.perceptual.get(pid).metadata["file"]["mode"] == "reference"  # not copied into the store
    default = make_memory(user_id="bob")  # the defaults still extract and copy
    default.semantic.add("Bob works at Acme Corp.")
    assert default.semantic.get_facts("Bob")
    assert default.perceptual.get(default.perceptual.add_perception(original)).metadata["file"]["mode"] != "reference"


def test_bad_messages_raise_precise_errors(make_memory) -> None:
    memory = make_memory()
    with pytest.raises(MemoryValidationError, match=r"messages\[1\]"):
        memory.put_messages([user("fine"), "not a message"])  # type: ignore[list-item]
    assert memory.episodic.get_stats()["count"] == 0
    with pytest.raises(MemoryValidationError, match="user_id"):
        HierarchicalMemory.from_defaults(user_id="../../etc", persist_dir="unused")


def test_llm_and_encoders_reach_the_tiers(make_memory) -> None:
    from llama_index.core.llms import MockLLM

    llm = MockLLM()
    memory = make_memory(llm=llm)
    assert memory.semantic.extractor.__class__.__name__ == "LLMExtractor"
    assert memory.perceptual.llm is llm
