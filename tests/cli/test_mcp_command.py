"""``lmh mcp``: usage errors before anything is opened (the servers themselves: tests/mcp_server/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, run_lmh

pytest.importorskip("mcp")


def test_mcp_help_names_the_transports_and_tools() -> None:
    text = run_lmh("mcp", "--help").ok().stdout
    for word in ("--http", "--tokens", "--host", "remember", "recall", "memory://profile"):
        assert word in text, word


def test_http_needs_a_token_file_and_no_fixed_user(tmp_path: Path) -> None:
    assert_clean_error(run_lmh("mcp", "--http", "--dir", str(tmp_path)), 2, "--tokens")
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": [{"token": "alice-token-0123456789", "user": "alice"}]}')
    assert_clean_error(run_lmh("mcp", "--http", "--tokens", str(tokens), "--user", "bob"), 2, "--user")
    assert_clean_error(run_lmh("mcp", "--http", "--tokens", str(tokens), "--port", "0"), 2, "--port")
    assert_clean_error(run_lmh("mcp", "--http", "--tokens", str(tokens), "--path", "mcp"), 2, "--path")


def test_a_bad_token_file_is_refused_naming_the_entry(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[tokens]]\ntoken = "short"\nuser = "alice"\n')
    result = run_lmh("mcp", "--http", "--tokens", str(tokens), "--dir", str(tmp_path / "memory"))
    assert_clean_error(result, 2, "tokens: entry 1", "at least 16 characters")
    assert not (tmp_path / "memory").exists()  # refused before the folder is opened


def test_the_server_module_leaves_the_library_stack_for_after_initialize() -> None:
    # what a stdio server imports before answering initialize; LlamaIndex, SQLAlchemy, the model and the
    # stores load in the background afterwards (bench/mcp_startup.py measures the seconds)
    script = (
        "import sys, llama_index_memory_hierarchy.cli.mcp, llama_index_memory_hierarchy.mcp_server.stdio\n"
        "from llama_index_memory_hierarchy.mcp_server import build_server\n"
        "print(sorted(m for m in ('llama_index.core', 'sqlalchemy', 'onnxruntime', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
