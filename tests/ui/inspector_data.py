"""Memories of two users for the inspector tests: alice, whom the inspector serves, and bob, whom it must never show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ALICE_TEA = "My favourite tea is genmaicha, roasted rice and green tea."
BOB_SECRET = "Bob's secret: the vault code is oolong-7781."
ALICE_ASKED = "what is my favourite tea"


def populate(folder: Path) -> dict[str, Any]:
    """Two sessions and a fact for alice, one memory for bob; the memories are closed afterwards."""
    from llama_index.core.base.llms.types import ChatMessage

    from llama_index_memory_hierarchy import HierarchicalMemory

    ids: dict[str, Any] = {}
    alice = HierarchicalMemory.from_defaults(user_id="alice", session_id="monday", persist_dir=str(folder))
    alice.put_messages(
        [ChatMessage(role="user", content=ALICE_TEA), ChatMessage(role="assistant", content="Noted, genmaicha it is.")]
    )
    later = HierarchicalMemory.from_defaults(user_id="alice", session_id="friday", persist_dir=str(folder))
    later.put_messages(
        [
            ChatMessage(role="user", content="I am training for the Lyon half marathon in April."),
            ChatMessage(role="assistant", content="Good luck with the training!"),
        ]
    )
    ids["fact"] = alice.semantic.add_fact("Alice", "lives in", "Lyon")
    ids["alice_tea"] = next(i.id for i in alice.episodic.get_session("monday") if "genmaicha, roasted" in i.content)
    ids["tea_fact"] = alice.semantic.add_fact("Alice", "likes", "genmaicha", source_id=ids["alice_tea"])
    alice.get(input=ALICE_ASKED)  # an entry of the access log
    bob = HierarchicalMemory.from_defaults(user_id="bob", session_id="b1", persist_dir=str(folder))
    bob.put(ChatMessage(role="user", content=BOB_SECRET))
    ids["bob"] = bob.episodic.get_session("b1")[0].id
    for memory in (alice, later, bob):
        memory.close()
    return ids
