"""A workflow ``Context`` saved and resumed with the memory in it, as LlamaIndex's ChatMemoryBuffer survives it.

Human-in-the-loop and paused runs save ``handler.ctx.to_dict(serializer=...)`` and resume with
``Context.from_dict``. With both serializers (JSON, the default, and pickle), in this process and in
a new one, the resumed run continues with the earlier turns; for the hierarchy it also writes to the
same folder. Where LlamaIndex's ChatMemoryBuffer does not survive it, its case is an expected failure that says
why; ``Memory`` is left out (LlamaIndex's own ``Memory.from_dict`` cannot rebuild memory blocks).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from contract_memories import ASK_PLAN, SERIALIZERS, agent, apause, aresume, open_memory
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from workflows import Context

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.blocks import HierarchyMemoryBlock

HERE = Path(__file__).resolve().parent


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages]


_JSON_SKIPS_IT = pytest.mark.xfail(
    strict=True, reason="LlamaIndex's JsonSerializer skips a ChatMemoryBuffer ('known unserializable key: memory')"
)


@pytest.mark.parametrize(
    ("kind", "serializer"),
    [
        ("hierarchy", "json"),
        ("hierarchy", "pickle"),
        pytest.param("buffer", "json", marks=_JSON_SKIPS_IT),
        ("buffer", "pickle"),
    ],
)
async def test_a_finished_run_resumed_from_its_context_continues_with_the_earlier_turns(
    persist_dir: Path, kind: str, serializer: str
) -> None:
    sent: list[list[ChatMessage]] = []
    runner = agent([{"answer": "Hello Ada."}], sent)
    memory = open_memory(kind, persist_dir)
    ctx = Context(runner)
    await runner.run(user_msg="I was born in Lisbon.", ctx=ctx, memory=memory)
    saved = json.loads(json.dumps(ctx.to_dict(serializer=SERIALIZERS[serializer]())))
    restored = Context.from_dict(runner, saved, serializer=SERIALIZERS[serializer]())
    await runner.run(user_msg="Where was I born?", ctx=restored)
    assert "I was born in Lisbon." in _texts(sent[-1])
    resumed = await restored.store.get("memory")
    assert type(resumed) is type(memory)
    if kind == "hierarchy":
        assert resumed.config.persist_dir == memory.config.persist_dir
        assert "Where was I born?" in _texts(memory.get_all())  # the resumed run wrote to the same stores
        resumed.close()
        memory.close()


@pytest.mark.parametrize(
    ("kind", "serializer"),
    [
        ("hierarchy", "json"),
        ("hierarchy", "pickle"),
        pytest.param("buffer", "json", marks=_JSON_SKIPS_IT),
        ("buffer", "pickle"),
    ],
)
async def test_a_paused_run_resumes_from_its_saved_context(persist_dir: Path, kind: str, serializer: str) -> None:
    sent: list[list[ChatMessage]] = []
    memory = open_memory(kind, persist_dir)
    await agent([{"answer": "Hi."}], sent).run(user_msg="I collect maps.", memory=memory)
    saved = await apause(agent(ASK_PLAN, sent), "Book me a trip.", memory, serializer)
    response = await aresume(agent(ASK_PLAN, sent), saved, serializer, "Porto")
    assert response == "Noted."
    seen = _texts(sent[-1])
    assert "I collect maps." in seen and "Book me a trip." in seen and "Porto" in seen
    if kind == "hierarchy":
        assert "Porto" in _texts(memory.get_all())
        memory.close()


@pytest.mark.parametrize(
    ("serializer", "mode"),
    [("json", "continue"), ("pickle", "continue"), ("json", "answer"), ("pickle", "answer")],
)
async def test_a_context_resumed_in_a_new_process_continues_on_the_same_folder(
    persist_dir: Path, tmp_path: Path, serializer: str, mode: str
) -> None:
    """A finished run takes the next message in a new process (``continue``); a run paused at a question takes
    the human's answer there (``answer``). Either way the new process sees the earlier turns and writes to the
    same folder."""
    sent: list[list[ChatMessage]] = []
    memory = open_memory("hierarchy", persist_dir)
    runner = agent([{"answer": "Hi Ada."}], sent)
    ctx = Context(runner)
    await runner.run(user_msg="I am Ada and I like figs.", ctx=ctx, memory=memory)
    if mode == "answer":
        saved = await apause(agent(ASK_PLAN, sent), "Plan my picnic.", memory, serializer)
    else:
        saved = json.loads(json.dumps(ctx.to_dict(serializer=SERIALIZERS[serializer]())))
    memory.close()
    path = tmp_path / "context.json"
    path.write_text(json.dumps(saved))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(HERE / "contract_memories.py"), str(path), serializer, mode, "What fruit do I like?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "I am Ada and I like figs." in result["seen"] and "What fruit do I like?" in result["seen"]
    if mode == "answer":
        assert "Plan my picnic." in result["seen"] and result["response"] == "Noted."
    assert result["memory"] == "HierarchicalMemory"
    reopened = open_memory("hierarchy", persist_dir)
    assert "What fruit do I like?" in _texts(reopened.get_all())
    reopened.close()


def test_a_secret_in_the_config_is_in_no_serialised_form(persist_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMH_QDRANT_API_KEY", "qk-not-for-export-1")
    memory = HierarchicalMemory.from_defaults(
        user_id="ada",
        session_id="s1",
        persist_dir=str(persist_dir),
        graph_store_password="gp-not-for-export-2",
        vector_store_api_key="vk-not-for-export-3",
    )
    try:
        memory.put(ChatMessage(role=MessageRole.USER, content="Hello."))
        block = memory.memory_blocks()[0]
        forms = [
            json.dumps(memory.to_dict()),
            memory.to_json(),
            memory.model_dump_json(),
            repr(memory.model_dump()),
            repr(memory),
            block.model_dump_json(),
        ]
        blobs = [pickle.dumps(memory), pickle.dumps(block)]
        for serializer in SERIALIZERS.values():
            forms.append(json.dumps(serializer().serialize_value({"memory": memory})))
        for secret in ("qk-not-for-export-1", "gp-not-for-export-2", "vk-not-for-export-3"):
            assert not any(secret in form for form in forms), secret
            assert not any(secret.encode() in blob for blob in blobs), secret
        assert memory.config.qdrant_api_key == "qk-not-for-export-1"
    finally:
        memory.close()


def test_to_dict_from_dict_to_json_and_pickle_give_working_memories(persist_dir: Path) -> None:
    memory = open_memory("hierarchy", persist_dir)
    memory.put(ChatMessage(role=MessageRole.USER, content="My bike is green."))
    copies: list[Any] = [
        HierarchicalMemory.from_dict(memory.to_dict()),
        HierarchicalMemory.from_json(memory.to_json()),
        pickle.loads(pickle.dumps(memory)),
    ]
    memory.close()  # the copies stand on their own
    for n, copy in enumerate(copies):
        copy.put(ChatMessage(role=MessageRole.USER, content=f"Copy {n} was here."))
        assert "My bike is green." in _texts(copy.get_all())
        assert copy.search("green bike")
    reopened = open_memory("hierarchy", persist_dir)
    assert {f"Copy {n} was here." for n in range(3)} <= set(_texts(reopened.get_all()))
    for copy in [*copies, reopened]:
        copy.close()


def test_a_memory_block_survives_json_and_pickle(persist_dir: Path) -> None:
    memory = open_memory("hierarchy", persist_dir)
    try:
        block = memory.memory_blocks()[0]
        copies = [HierarchyMemoryBlock.model_validate_json(block.model_dump_json()), pickle.loads(pickle.dumps(block))]
        for copy in copies:
            assert isinstance(copy.memory, HierarchicalMemory)
            assert copy.memory.user_id == "ada" and copy.memory_types == block.memory_types
            copy.memory.close()
    finally:
        memory.close()
