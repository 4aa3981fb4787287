"""The smaller defects of issue 17, item 13: memory blocks flushed at session end, a new caption for the same
bytes, ``pin`` on every tier, and a huge memory not repeated in the keyword text of the turns after it."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

sys.path.insert(0, str(Path(__file__).parent))

from media_samples import image_bytes

from llama_index_memory_hierarchy.blocks import aflush_memory
from llama_index_memory_hierarchy.turns import CONTEXT_TURN_CHARS


def _user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def test_flushing_a_llama_index_memory_records_its_short_term_buffer(make_memory) -> None:
    hierarchy = make_memory(session_id="blocks")
    chat = Memory.from_defaults(session_id="chat", token_limit=4000, memory_blocks=hierarchy.memory_blocks())
    await chat.aput(_user("My bike lock code is 4417."))
    await chat.aput(ChatMessage(role="assistant", content="Noted."))
    assert hierarchy.episodic.get_stats()["count"] == 0  # still only in LlamaIndex's buffer
    assert await aflush_memory(chat) == 2
    assert [i.content for i in hierarchy.episodic.get_session()] == ["My bike lock code is 4417.", "Noted."]
    assert await aflush_memory(chat) == 0  # archived: never handed over twice


def test_the_same_bytes_with_a_new_caption_take_the_caption(make_memory) -> None:
    perceptual = make_memory().perceptual
    first = perceptual.add_perception(image_bytes("sunset"), filename="a.png", caption="a sunset")
    again = perceptual.add_perception(image_bytes("sunset"), filename="a.png", caption="sunset over the harbour")
    assert again == first and perceptual.get_stats()["count"] == 1
    assert perceptual.get(first).content == "sunset over the harbour"
    assert perceptual.retrieve("harbour", limit=1)[0].id == first


def test_every_tier_has_a_sync_pin(make_memory) -> None:
    memory = make_memory()
    memory.put(_user("keep this in mind"))
    turn = memory.episodic.get_session()[0].id
    ids = {"episodic": turn, "working": turn, "semantic": memory.semantic.add("Kim likes tea.")}
    for tier in memory.tiers(["working", "episodic", "semantic"]):
        assert tier.pin(ids[tier.memory_type.value]) is True
        assert tier.get(ids[tier.memory_type.value]).pinned
        assert tier.pin(ids[tier.memory_type.value], False) is True


def test_a_huge_memory_is_not_repeated_in_the_next_turns_keyword_text(make_memory, persist_dir: Path) -> None:
    episodic = make_memory(session_id="cjk").episodic
    huge = "".join("我们明天去北京开会然后去上海看朋友" for _ in range(100_000 // 17))[:100_000]
    first = episodic.add(huge)
    after = [episodic.add(f"第{i}个短句子") for i in range(2)]
    with sqlite3.connect(persist_dir / "memory.db") as db:
        rows = dict(db.execute("SELECT id, length(keyword) FROM memories WHERE id IN (?, ?, ?)", (first, *after)))
    assert all(rows[i] < 3 * CONTEXT_TURN_CHARS for i in after), rows
    assert episodic.retrieve("北京开会", limit=1)[0].id == first  # the huge memory itself is indexed whole
