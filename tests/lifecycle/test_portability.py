"""Export and import of a user's whole memory (item for item, embeddings reused or recomputed),
and readable session transcripts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.llms.types import ChatMessage
from media_samples import image_bytes
from PIL import Image

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase
from llama_index_memory_hierarchy.lifecycle.portability import EXPORT_FORMAT
from llama_index_memory_hierarchy.perception.files import FileStore, user_dir_name


def settle(memory: Any) -> None:
    """Wait for background writes (access-count updates after retrieval) to land."""

    async def wait() -> None:
        while memory.context._background:
            await asyncio.gather(*list(memory.context._background), return_exceptions=True)

    memory.context.runtime.run(wait())


def snapshot(memory: Any, user_id: str = "alice") -> list[tuple[Any, ...]]:
    """Every record of the user, every field, with its embedding bytes and space, in insertion order."""
    records = memory.context.runtime.run(
        memory.context.records.query(user_id, namespace=None, order_by="created_at", with_embeddings=True)
    )
    return [
        (
            r.namespace,
            json.dumps(r.item.model_dump(mode="json"), sort_keys=True),
            r.space,
            None if r.embedding is None else np.asarray(r.embedding, dtype=np.float32).tobytes(),
        )
        for r in records
    ]


def photo() -> bytes:
    import io

    image = Image.new("RGB", (80, 60), (20, 120, 200))
    for x in range(0, 80, 10):
        for y in range(60):
            image.putpixel((x, y), (250, 250, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def rich(memory_factory):
    """A user with every kind of memory: turns, summary, facts with history, pins, accesses, a file, a KB."""
    memory = memory_factory(chat_history_token_limit=100)
    manager = memory.manager
    for i in range(5):
        memory.put_messages(
            [
                ChatMessage(role="user", content=f"I live in Berlin and I work at Acme Corp, part {i}."),
                ChatMessage(role="assistant", content=f"Got it, Berlin and Acme Corp ({i})."),
            ]
        )
        memory.get()
    manager.consolidate()
    semantic = memory.semantic
    old = semantic.add_fact("User", "lives_in", "Hamburg", valid_at="2020-01-01T00:00:00+00:00")
    semantic.add_fact("User", "lives_in", "Munich")  # supersedes whatever was current
    pinned = manager.add_memory("My passport number is P1234567.", "semantic", 0.95)
    manager.pin(pinned)
    manager.add_memory("Scratch: call the landlord today.", "working", 0.7)
    picture = manager.add_memory(photo(), caption="A photo of my blue and yellow bike")
    KnowledgeBase(context=memory.context, namespace="manuals", user_id="alice").add_text(
        "# Bike manual\n\nPump the tyres to 4 bar.", doc_id="bike"
    )
    for _ in range(3):
        memory.context.runtime.run(memory.context.records.touch("alice", [pinned, picture]))
    settle(memory)
    return memory, {"old_fact": old, "pinned": pinned, "picture": picture}


def test_round_trip_is_equal_item_for_item(rich, tmp_path: Path) -> None:
    memory, ids = rich
    manager = memory.manager
    before = snapshot(memory)
    namespaces = {n for n, *_ in before}
    assert {"memory", "perceptual:vectors", "kb:manuals"} <= namespaces
    superseded = memory.semantic.get(ids["old_fact"])
    assert superseded.metadata["invalid_at"] is not None  # history travels with its validity

    path = tmp_path / "alice.json"
    exported = manager.export_user(None, path)
    document = json.loads(path.read_text())
    assert document["format"] == EXPORT_FORMAT and document["user_id"] == "alice"
    assert exported.records == len(before) == len(document["records"]) and exported.files == 1
    assert exported.tables["lifecycle_summaries"] == 1 and exported.tables["lifecycle_consolidated"] > 0
    assert exported.working >= 1
    tables_before = document["tables"]

    manager.forget_user()
    assert snapshot(memory) == []
    imported = manager.import_user(path)
    assert imported.records == len(before) and imported.reembedded == 0
    assert imported.reused_embeddings == exported.embeddings and imported.files == 1

    after = snapshot(memory)
    assert after == before  # ids, contents, times, importance, access counts, pins, metadata, embeddings
    again = tmp_path / "again.json"
    manager.export_user("alice", again)
    tables_after = json.loads(again.read_text())["tables"]
    for name, rows in tables_before.items():
        if name == "lifecycle_events":  # the import and export themselves were logged after
            assert tables_after[name][: len(rows)] == rows
        else:
            assert tables_after[name] == rows, name

    # derived state works again: graph, file, pins, summary, working memory
    assert [f.content for f in memory.semantic.get_facts("User")] and memory.semantic.get_related_entities("User")
    assert memory.semantic.get(ids["pinned"]).pinned
    picture = memory.perceptual.get(ids["picture"])
    assert FileStore(memory.context.persist_dir).resolve(picture.metadata["file"], "alice").read_bytes() == photo()
    assert manager.session_summary() is not None
    assert "Scratch: call the landlord today." in {i.content for i in memory.working.get_recent(50)}
    assert manager.retrieve_memories("passport number", limit=1)[0].id == ids["pinned"]


def test_import_into_another_store_with_another_model_reembeds(rich, memory_factory, tmp_path: Path) -> None:
    memory, ids = rich
    path = tmp_path / "alice.json"
    memory.manager.export_user(None, path)
    before = {row[1]: row for row in snapshot(memory)}
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    target = memory_factory(persist_dir=str(other_dir), embed_model="hashing", session_id="elsewhere")
    report = target.manager.import_user(path)
    text_space = memory.context.runtime.run(memory.context.aspace())
    assert report.reembedded == sum(1 for row in before.values() if row[2] == text_space) > 0
    after = {row[1]: row for row in snapshot(target)}
    assert set(after) == set(before)  # every item equal, field for field
    new_space = target.context.runtime.run(target.context.aspace())
    for key, (_, _, space, vector) in after.items():
        if before[key][2] == text_space:
            assert space == new_space and vector is not None and vector != before[key][3]
        else:
            assert (space, vector) == before[key][2:]  # satellite spaces (phash) are kept as they are
    assert target.manager.retrieve_memories("passport", limit=1)[0].id == ids["pinned"]
    assert target.semantic.get_facts("User")
    file = target.perceptual.get(ids["picture"]).metadata["file"]
    assert FileStore(other_dir).resolve(file, "alice").read_bytes() == photo()
    assert report.working >= 1


def test_import_as_another_user_and_conflicts(rich, tmp_path: Path) -> None:
    memory, _ = rich
    path = tmp_path / "alice.json"
    memory.manager.export_user(None, path)
    with pytest.raises(MemoryValidationError, match="another user"):
        memory.manager.import_user(path, user_id="carol")  # the ids are alice's in this store
    skipped = memory.manager.import_user(path, on_conflict="skip")
    assert skipped.records == 0 and skipped.skipped > 0
    with pytest.raises(MemoryValidationError, match="already exist"):
        memory.manager.import_user(path, on_conflict="error")
    replaced = memory.manager.import_user(path)
    assert replaced.replaced == replaced.records > 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(MemoryValidationError, match="path"):
        memory.manager.import_user(bad)


def test_a_long_turn_and_an_image_turn_import_as_another_user_elsewhere(memory_factory, tmp_path: Path) -> None:
    """A 150,000-character turn (put() keeps it whole) re-imports whole; an image block's stored file is the
    importer's copy, under the importer's user, not the exporter's file."""
    from llama_index.core.base.llms.types import ImageBlock, TextBlock

    from llama_index_memory_hierarchy.session_history import CHAT_MESSAGE_KEY, FILE_KEY

    page = "".join(f"row {n}: an invented ledger of the Quillon bakery.\n" for n in range(3200))
    assert len(page) > 150_000
    png = image_bytes("sunset", size=(640, 480))
    memory = memory_factory()
    memory.put(ChatMessage(role="tool", content=page, additional_kwargs={"tool_call_id": "call-1"}))
    memory.put(ChatMessage(role="user", blocks=[ImageBlock(image=png), TextBlock(text="My garden.")]))
    path = tmp_path / "alice.json"
    memory.manager.export_user(None, path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    target = memory_factory(user_id="bob", persist_dir=str(other_dir))
    target.manager.import_user(path, user_id="bob")
    turns = {t.content: t for t in target.episodic.get_session("s1")}
    assert page.strip() in turns  # whole (a turn's text is stored stripped; its exact message beside it)
    (garden,) = [t for text, t in turns.items() if "My garden." in text]
    raw = json.loads(garden.metadata[CHAT_MESSAGE_KEY])
    (stored,) = [b[FILE_KEY] for b in raw["blocks"] if b.get(FILE_KEY)]
    assert stored["file"]["ref"].startswith(f"{user_dir_name('bob')}/")
    assert FileStore(other_dir).resolve(stored["file"], "bob").read_bytes() == png
    assert target.perceptual.get(stored["perception"]).metadata["file"]["ref"] == stored["file"]["ref"]


def test_export_session_markdown_and_json(rich, tmp_path: Path) -> None:
    memory, _ = rich
    text = memory.manager.export_session("s1", tmp_path / "s1.md")
    assert (tmp_path / "s1.md").read_text() == text
    assert text.startswith("# Session s1\n")
    assert "- **user** (" in text and "I live in Berlin and I work at Acme Corp, part 0." in text
    assert "UTC): " in text
    assert "## What was remembered" in text and "### Facts" in text and "User works at Acme Corp" in text
    assert "### Running summary" in text and "### Session summaries" in text
    data = json.loads(memory.manager.export_session(format="json"))
    assert [t["role"] for t in data["turns"][:2]] == ["user", "assistant"]
    assert all(t["distilled"] for t in data["turns"] if t["role"] == "user")
    assert data["facts"] and all(f["sources"] for f in data["facts"])
    assert data["perceptions"][0]["modality"] == "image"
    empty = memory.manager.export_session("never-happened")
    assert "0 turns" in empty and "Nothing consolidated" in empty
    with pytest.raises(MemoryValidationError, match="format"):
        memory.manager.export_session(format="pdf")


def test_import_rebuilds_the_graph_store_the_memory_was_given(make_memory, tmp_path: Path) -> None:
    from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME, SQLitePropertyGraphStore

    custom = SQLitePropertyGraphStore(tmp_path / "custom" / GRAPH_DB_NAME)
    memory = make_memory(graph_store=custom)
    memory.semantic.add_fact("Alice", "lives_in", "Utrecht")
    keys = custom.relation_keys("alice")
    path = tmp_path / "alice.json"
    memory.manager.export_user(None, path)
    custom.delete_relations(keys, user_id="alice")  # the graph lost its relation; the records kept the fact
    memory.manager.import_user(path)
    assert custom.relation_keys("alice") == keys


#: Where each out-of-range time is put in an export, and the field its refusal must name (issue 36, item 3).
_BAD_TIMES = [
    ("record timestamp", "records.timestamp", "9999-12-31T23:59:59.999999Z"),
    ("fact valid_at", "records.metadata.valid_at", "9999-12-31T23:59:59.999999"),
    ("fact invalid_at", "records.metadata.invalid_at", "not a time"),
    ("table time", "tables.lifecycle_events.at", 1e300),
    ("table time as text", "tables.lifecycle_events.at", "yesterday"),
]


@pytest.mark.parametrize(("where", "field", "value"), _BAD_TIMES, ids=[b[0] for b in _BAD_TIMES])
def test_an_import_with_a_time_out_of_range_is_refused_before_anything_is_written(
    memory_factory, tmp_path: Path, where: str, field: str, value: Any
) -> None:
    """Before: a fact's ``valid_at`` past year 9998 was written and then made every fact of the user unreadable, and
    a table's time was written as given (a text, 1e300); now the import names the field and writes nothing."""
    memory = memory_factory()
    memory.semantic.add_fact("User", "lives_in", "Utrecht")
    memory.episodic.add("A walk along the canal with Noor")
    path = tmp_path / "alice.json"
    memory.manager.export_user(None, path)
    document = json.loads(path.read_text())
    if field.startswith("tables."):
        events = document["tables"].setdefault("lifecycle_events", [])
        events.append({"user_id": "alice", "at": value, "action": "note", "detail": "{}"})
        expected = f"tables.lifecycle_events[{len(events) - 1}].at"
    else:
        kind = "fact" if "metadata" in field else None
        position = next(
            i for i, r in enumerate(document["records"]) if kind is None or r["metadata"].get("kind") == kind
        )
        record = document["records"][position]
        target, key = (record["metadata"], field.rsplit(".", 1)[1]) if kind else (record, "timestamp")
        target[key] = value
        expected = f"records[{position}].{field.removeprefix('records.')}"
    path.write_text(json.dumps(document))
    target_memory = memory_factory(user_id="bob", persist_dir=str(tmp_path / "elsewhere"))
    with pytest.raises(MemoryValidationError) as refused:
        target_memory.manager.import_user(path)
    assert str(refused.value).startswith(f"{expected}: "), str(refused.value)
    assert snapshot(target_memory, "bob") == [] and target_memory.manager.export_user(None, tmp_path / "b.json")
    assert target_memory.semantic.get_facts("User") == []
