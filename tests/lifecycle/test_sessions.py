"""Live memories: a memory's manager is reachable from its store context while the memory is open, and only then."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage

from llama_index_memory_hierarchy.lifecycle.sessions import live_memories


def test_open_memories_are_live_per_user_until_closed(memory_factory) -> None:
    alice = memory_factory(user_id="alice", session_id="s1")
    again = memory_factory(user_id="alice", session_id="s2")
    bob = memory_factory(user_id="bob", session_id="s1")
    context = alice.context
    assert {id(m) for m in live_memories(context, "alice")} == {id(alice.manager), id(again.manager)}
    assert [m.deps.user_id for m in live_memories(context, "bob")] == ["bob"]
    again.close()
    assert [m is alice.manager for m in live_memories(context, "alice")] == [True]
    assert len(live_memories(context)) == 2
    bob.close()


def test_a_closed_memory_is_not_reached_by_a_deletion(memory_factory) -> None:
    first = memory_factory(user_id="carol", session_id="s1")
    first.put(ChatMessage(role="user", content="My locker code is 4711."))
    [turn] = first.get_all()
    second = memory_factory(user_id="carol", session_id="s1")
    memory_id = second.episodic.get_session("s1")[0].id
    first.close()
    report = second.manager.forget_memories([memory_id])
    assert report.deleted == {memory_id: "episodic"} and report.live_memories == 1
    assert second.get_all() == [] and turn.content == "My locker code is 4711."
