"""The lifecycle sits below the hierarchy: its services take a LifecycleDeps bundle, never the facade or the memory."""

from __future__ import annotations

import ast
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage

import llama_index_memory_hierarchy.lifecycle as lifecycle
from llama_index_memory_hierarchy.lifecycle.forgetting import Forgetter
from llama_index_memory_hierarchy.lifecycle.profile import ProfileBuilder

PACKAGE = "llama_index_memory_hierarchy"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, wherever the import stands (TYPE_CHECKING blocks and functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_lifecycle_module_imports_the_hierarchy_and_no_service_the_facade() -> None:
    folder = Path(lifecycle.__file__).parent
    for path in sorted(folder.glob("*.py")):
        imported = _imports(path)
        assert f"{PACKAGE}.hierarchy" not in imported, path.name
        if path.name not in ("__init__.py", "manager.py"):
            assert f"{PACKAGE}.lifecycle.manager" not in imported, path.name


def test_services_work_from_the_bundle_alone(memory_factory) -> None:
    memory = memory_factory(user_id="dora")
    memory.put_messages([ChatMessage(role="user", content="I live in Porto and I love sardines.")])
    memory.manager.consolidate()
    deps, run = memory.manager.deps, memory.context.runtime.run
    profile = run(ProfileBuilder(deps).abuild())
    assert profile == memory.manager.get_profile() and not profile.empty
    report = run(Forgetter(deps).arun("importance_based", dry_run=True, threshold=0.99))
    assert report.total >= 1 and len(memory.episodic.get_session("s1")) == 1
