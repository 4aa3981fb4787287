"""The session's history shared by every memory object on it, durable through reset/set, binaries stored once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from media_samples import image_bytes

from llama_index_memory_hierarchy.session_history import CHAT_MESSAGE_KEY, FILE_KEY

Factory = Callable[..., Any]


def _user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def _texts(memory: Any) -> list[str]:
    return [m.content or "" for m in memory.get_all()]


def test_two_objects_on_one_session_see_each_others_turns(make_memory: Factory) -> None:
    a, b = make_memory(), make_memory()
    a.put(_user("I moved to Tartu."))
    b.put(_user("My cat is called Miso."))
    assert _texts(a) == _texts(b) == ["I moved to Tartu.", "My cat is called Miso."]
    assert any("Tartu" in (m.content or "") for m in b.get("where do I live?"))


def test_reset_ends_the_history_for_every_object_and_after_reopening(make_memory: Factory) -> None:
    a, b = make_memory(), make_memory()
    a.put(_user("My card number is 4000 1234 5678 9010."))
    assert _texts(b)
    a.reset()
    assert _texts(b) == []
    b.put(_user("Fresh start."))
    assert _texts(make_memory()) == ["Fresh start."]
    assert a.episodic.get_session()  # long-term memories stay


def test_set_makes_the_history_for_every_object(make_memory: Factory) -> None:
    a, b = make_memory(), make_memory()
    a.put(_user("Old topic."))
    kept = _user("Kept topic.")
    b.put(kept)
    a.set([kept, _user("New topic.")])
    assert _texts(b) == ["Kept topic.", "New topic."]
    assert _texts(make_memory()) == ["Kept topic.", "New topic."]
    assert [i.content for i in a.episodic.get_session()].count("Kept topic.") == 1  # not recorded twice


def test_another_process_sees_a_put_and_a_reset(make_memory: Factory, persist_dir: Path) -> None:
    memory = make_memory()
    memory.put(_user("Written here."))
    script = textwrap.dedent(
        f"""
        from llama_index.core.base.llms.types import ChatMessage
        from llama_index_memory_hierarchy import HierarchicalMemory
        m = HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir={str(persist_dir)!r})
        assert [x.content for x in m.get_all()] == ["Written here."], m.get_all()
        m.put(ChatMessage(role="user", content="Written there."))
        m.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if "held by another process" in done.stderr:
        pytest.skip("the embedded folder opens in one process at a time until it is shared by processes (issue 30)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _texts(memory) == ["Written here.", "Written there."]


def test_a_turn_deleted_by_another_process_leaves_the_history(make_memory: Factory, persist_dir: Path) -> None:
    memory = make_memory()
    memory.put(_user("Keep this."))
    memory.put(_user("Forget this."))
    assert len(memory.get_all()) == 2
    script = textwrap.dedent(
        f"""
        from llama_index_memory_hierarchy import HierarchicalMemory
        m = HierarchicalMemory.from_defaults(user_id="alice", session_id="s1", persist_dir={str(persist_dir)!r})
        (doomed,) = [i.id for i in m.episodic.get_session() if i.content == "Forget this."]
        m.manager.forget_memories([doomed])
        m.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    memory.search("anything")  # a read follows the folder's change log
    assert _texts(memory) == ["Keep this."]


def test_an_image_is_stored_once_as_a_perception_and_replayed(make_memory: Factory) -> None:
    png = image_bytes("sunset", size=(640, 480))
    message = ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="Look.")])
    memory = make_memory()
    memory.put(message)
    memory.put(message)
    (first, second) = memory.episodic.get_session()
    for turn in (first, second):
        raw = turn.metadata[CHAT_MESSAGE_KEY]
        assert FILE_KEY in raw and len(raw) < 2000  # referenced, not inline
    assert len(memory.perceptual.files.stored_files("alice")) == 1  # the same bytes once
    assert make_memory().get_all() == [message, message]


def test_deleting_the_turn_deletes_its_image(make_memory: Factory) -> None:
    png = image_bytes("sunset", size=(800, 600))
    memory = make_memory()
    memory.put(ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="Mine.")]))
    (turn,) = memory.episodic.get_session()
    memory.manager.forget_memories([turn.id])
    assert memory.perceptual.get_stats()["count"] == 0
    assert memory.perceptual.files.stored_files("alice") == []
    assert memory.get_all() == []


def test_the_same_image_in_two_turns_stays_until_both_are_deleted(make_memory: Factory) -> None:
    """One stored file for both turns (content-addressed): deleting the first turn must not take the second's image."""
    png = image_bytes("sunset", size=(800, 600))
    memory = make_memory()
    memory.put(ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="First.")]))
    memory.put(ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="Again.")]))
    first, second = memory.episodic.get_session()
    memory.manager.forget_memories([first.id])
    (kept,) = make_memory().get_all()  # reopened: read back from the stored file
    assert isinstance(kept.blocks[0], ImageBlock) and kept.blocks[0].resolve_image().read() == png
    assert len(memory.perceptual.files.stored_files("alice")) == 1
    memory.manager.forget_memories([second.id])  # the last turn citing it: nothing left
    assert memory.perceptual.get_stats()["count"] == 0
    assert memory.perceptual.files.stored_files("alice") == []


def test_an_image_added_explicitly_is_not_deleted_with_a_turn_that_showed_it(make_memory: Factory) -> None:
    png = image_bytes("sunset", size=(800, 600))
    memory = make_memory()
    memory.put(ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(image=png), TextBlock(text="Mine.")]))
    perception = memory.perceptual.add_perception(png)  # the user's own memory of the same bytes
    (turn,) = memory.episodic.get_session()
    memory.manager.forget_memories([turn.id])
    assert memory.perceptual.get(perception) is not None
    assert len(memory.perceptual.files.stored_files("alice")) == 1


def test_a_long_turn_is_stored_whole_and_found_by_its_head(make_memory: Factory) -> None:
    page = "Zanzibar spice report. " + "filler words here. " * 9000
    memory = make_memory()
    memory.put(ChatMessage(role=MessageRole.TOOL, content=page, additional_kwargs={"tool_call_id": "c1"}))
    assert make_memory().get_all()[0].content == page
    assert any("Zanzibar" in item.content for item in memory.search("Zanzibar spice report"))
