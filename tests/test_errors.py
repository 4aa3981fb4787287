"""One root for every exception of the package, without losing the bases callers already catch."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import llama_index_memory_hierarchy
from llama_index_memory_hierarchy.cli._common import CLIError, UsageError
from llama_index_memory_hierarchy.errors import LLMReplyError, MemoryHierarchyError, MemoryNotFoundError
from llama_index_memory_hierarchy.knowledge.loaders import DocumentLoadError, load_file

PACKAGE = Path(llama_index_memory_hierarchy.__file__).parent


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in the package whose bases name an ``...Error`` or ``Exception``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            names = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
            if any(name.endswith(("Error", "Exception")) for name in names):
                found.append((module, node.name))
    return found


@pytest.mark.parametrize(("module", "name"), _exception_classes())
def test_every_exception_derives_from_the_root(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, MemoryHierarchyError), f"{module}.{name} is outside MemoryHierarchyError"


def test_the_scan_sees_the_strays_it_was_written_for() -> None:
    names = {name for _, name in _exception_classes()}
    assert {"LLMReplyError", "DocumentLoadError", "CLIError", "LocalLLMError"} <= names


def test_existing_except_clauses_still_catch() -> None:
    with pytest.raises(ValueError):  # callers that caught the LLM's bad reply as a ValueError
        raise LLMReplyError("not JSON")
    with pytest.raises(KeyError):
        raise MemoryNotFoundError("m1")
    with pytest.raises(CLIError):
        raise UsageError("bad flag")


def test_a_document_load_error_is_caught_by_the_root_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "diagram.xyz"
    path.write_bytes(b"\x00\x01")
    with pytest.raises(MemoryHierarchyError) as caught:
        load_file(path)
    assert isinstance(caught.value, DocumentLoadError) and caught.value.path == str(path)
