"""Import files and tool calls never make the package read host files it was not given (issue 17, item 9).

An import's perception files must be shipped in the export (stored) or lie in the export's folder with
the recorded SHA-256 (reference); anything else is refused before a byte is written. The agent tools
take text only: a path handed to them is stored as text and the file is never opened.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from store_checks import minilm

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.tools import MemoryToolSpec

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005050200a5c3a3b50000000049454e44ae426082"
)


@pytest.fixture
def owner(shared_dir: Path) -> Any:
    memory = HierarchicalMemory.from_defaults(
        user_id=f"f-{uuid.uuid4().hex[:10]}", session_id="s1", persist_dir=str(shared_dir), embed_model=minilm()
    )
    yield memory
    memory.close()


def _export(memory: Any, folder: Path) -> tuple[Path, dict[str, Any]]:
    memory.perceptual.add_perception(PNG, caption="a one-pixel drawing", filename="dot.png")
    path = folder / "export.json"
    memory.manager.export_user(None, path)
    return path, json.loads(path.read_text())


def _perception(document: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in document["records"] if r["memory_type"] == "perceptual" and "file" in r["metadata"])


def _tampered(document: dict[str, Any], path: Path, file: dict[str, Any]) -> Path:
    record = _perception(document)
    record["metadata"]["file"] = file
    path.write_text(json.dumps(document))
    return path


def test_import_refuses_references_outside_its_folder_and_foreign_refs(owner: Any, tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0:the secret")
    folder = tmp_path / "export"
    folder.mkdir()
    path, document = _export(owner, folder)
    sha = hashlib.sha256(secret.read_bytes()).hexdigest()
    other = f"someone-else/{sha[:2]}/{sha}.png"
    cases = {
        "reference outside": (
            {"mode": "reference", "path": str(secret), "sha256": sha, "size": 9, "ext": "txt"},
            "path",
        ),
        "reference via ..": (
            {"mode": "reference", "path": str(folder / ".." / "outside" / "secret.txt"), "sha256": sha, "ext": "txt"},
            "path",
        ),
        "another user's file": ({"mode": "stored", "ref": other, "sha256": sha, "ext": "png"}, "ref"),
    }
    target = f"t-{uuid.uuid4().hex[:8]}"
    for name, (file, field) in cases.items():
        with pytest.raises(MemoryValidationError) as refused:
            owner.manager.import_user(_tampered(json.loads(json.dumps(document)), path, file), user_id=target)
        assert refused.value.field.endswith(f"metadata.file.{field}"), name
    fresh = HierarchicalMemory.from_defaults(
        user_id=target, session_id="s1", persist_dir=str(owner.context.persist_dir), embed_model=minilm()
    )
    try:
        assert fresh.episodic.get_stats()["count"] == 0 and fresh.perceptual.get_stats()["count"] == 0
    finally:
        fresh.close()


def test_import_checks_the_hash_of_a_reference_in_its_folder(owner: Any, tmp_path: Path) -> None:
    path, document = _export(owner, tmp_path)
    beside = tmp_path / "dot.png"
    beside.write_bytes(PNG)
    good = {"mode": "reference", "path": str(beside), "sha256": hashlib.sha256(PNG).hexdigest(), "ext": "png"}
    wrong = {**good, "sha256": "0" * 64}
    with pytest.raises(MemoryValidationError) as refused:
        owner.manager.import_user(_tampered(json.loads(json.dumps(document)), path, wrong), user_id="t-hash")
    assert refused.value.field.endswith("metadata.file.sha256")
    report = owner.manager.import_user(_tampered(document, path, good))  # back into the owner: replaces
    assert report.records >= 1 and report.replaced >= 1


def test_tools_take_text_and_never_read_a_path(owner: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the vault opens with 9137")
    tools = MemoryToolSpec(owner)
    for tier in ("episodic", "semantic", "working"):
        answer = tools.remember(str(secret), tier=tier)
        assert "9137" not in answer
    assert "9137" not in tools.recall(str(secret), tier="all", limit=10)
    assert all("9137" not in item.content for tier in owner.tiers() for item in tier.retrieve(str(secret), 10))
