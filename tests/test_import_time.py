"""Importing the package or its command line loads no torch, model, database or LLM runtime.

Checked by the modules a fresh interpreter holds after the import (no timing assertion: the
measured times are reported by ``python -X importtime``; see the README's note on import time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Modules that take seconds to import or load a model, a database driver or a native runtime.
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "llama_index.embeddings",
    "llama_index.core",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "qdrant_client",
    "qdrant_edge",
    "xllamacpp",
    "spacy",
    "jieba",
    "sklearn",
    "numpy",
    "PIL",
    "rich",
    "mcp",
    "uvicorn",
)


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import llama_index_memory_hierarchy",
        "import llama_index_memory_hierarchy.cli",
        "from llama_index_memory_hierarchy.cli import build_parser; build_parser().format_help()",
        "import llama_index_memory_hierarchy.knowledge, llama_index_memory_hierarchy.lifecycle",
    ],
)
def test_import_loads_nothing_heavy(code: str) -> None:
    loaded = _modules_after(code)
    heavy = sorted(m for m in loaded for prefix in HEAVY if m == prefix or m.startswith(prefix + "."))
    assert not heavy, f"{code!r} imported {heavy[:10]}"
