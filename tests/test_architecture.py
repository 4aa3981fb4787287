"""The house rules of docs/dev/architecture.md, checked on the package's own imports.

Every import counts: at module level, inside functions and under ``TYPE_CHECKING`` (an import
hidden in a function still ties the two modules). Read with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = "llama_index_memory_hierarchy"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: Layers from the ground up; a module may import its own layer and the layers below it.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"errors", "version", "runtime", "types", "durability"}),
    ("language", {"text", "language", "config", "messages", "turns", "llms", "extraction", "graph_export"}),
    ("services", {"embeddings", "calibration", "instrumentation", "perception"}),
    ("stores", {"stores"}),
    ("ranking", {"ranking", "entity_resolution"}),
    ("tiers", {"tiers", "blocks"}),
    ("retrieval", {"retrieval"}),
    ("lifecycle", {"lifecycle"}),
    ("operations", {"ops", "provenance", "knowledge"}),
    ("facade", {"hierarchy", "memory_message", "session_history"}),
    ("integrations", {"tools", "ui", "mcp_server", "__init__"}),
    ("cli", {"cli", "__main__"}),
]

#: No import cycle is allowed (the knowledge retriever and query engine work on a ``KnowledgeScope``, not the facade).
ALLOWED_CYCLES: list[set[str]] = []


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"
        found[name] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The package module that ``name`` (``a.b.c``, relative to the package) is, or is inside."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the package modules it imports; and every private name imported from another module."""
    edges: dict[str, set[str]] = defaultdict(set)
    private: list[str] = []
    for name, path in MODULES.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = (name.split(".") if is_package else name.split(".")[:-1]) if name != "__init__" else []
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    module = ".".join([*base, *([node.module] if node.module else [])])
                elif (node.module or "").startswith(PACKAGE):
                    module = node.module.removeprefix(PACKAGE).lstrip(".")  # type: ignore[union-attr]
                else:
                    continue
                for alias in node.names:
                    inner = f"{module}.{alias.name}" if module else alias.name
                    targets.append(_resolve(inner) if inner in MODULES else _resolve(module) or "__init__")
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append(f"{name}: {alias.name} from {module or PACKAGE}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE + "."):
                        targets.append(_resolve(alias.name.removeprefix(PACKAGE + ".")) or "__init__")
            edges[name].update(t for t in targets if t and t != name)
    return edges, private


EDGES, PRIVATE_IMPORTS = _imports()


def _layer(module: str) -> int:
    head = module.split(".")[0]
    for index, (_, heads) in enumerate(LAYERS):
        if head in heads:
            return index
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/dev/architecture.md")


def _cycles() -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for module in MODULES:
        if module not in index:
            visit(module)
    return found


def test_the_reader_sees_the_imports_it_should() -> None:
    """Guard the guard: known arrows are found (a reader that saw nothing would pass every rule)."""
    assert "tiers.tierset" in EDGES["hierarchy"]
    assert "stores.context" in EDGES["tiers.stored"]
    assert "lifecycle.erasure" in EDGES["ops.rebuild"]
    assert len(MODULES) > 80


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports_only_its_layer_and_below(module: str) -> None:
    upward = sorted(t for t in EDGES.get(module, ()) if _layer(t) > _layer(module))
    assert not upward, f"{module} ({LAYERS[_layer(module)][0]}) imports from above: {upward}"


def test_no_import_cycle() -> None:
    assert _cycles() == []


def test_no_private_name_is_imported_from_another_module() -> None:
    assert PRIVATE_IMPORTS == []
