"""Help, version and bad arguments: exit code 2 for usage errors, 1 for runtime errors, one line, no traceback.

None of these loads a model, so each run takes about a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import assert_clean_error, lmh_script, run_lmh, run_script

from llama_index_memory_hierarchy.version import __version__

COMMANDS = [
    "demo",
    "chat",
    "add",
    "search",
    "timeline",
    "stats",
    "forget",
    "export",
    "import",
    "ingest",
    "ask",
    "graph",
    "reindex",
    "migrate",
]


def test_help_lists_every_command_and_version() -> None:
    result = run_lmh("--help").ok()
    for command in COMMANDS:
        assert f"    {command} " in result.stdout, command
    assert "exit codes" in result.stdout
    assert run_lmh("--version").ok().stdout.strip() == f"lmh {__version__}"
    for command in COMMANDS:
        sub = run_lmh(command, "--help").ok()
        assert sub.stdout.startswith(f"usage: lmh {command}"), sub.stdout[:200]
        assert "--user" in sub.stdout and "--dir" in sub.stdout and "--json" in sub.stdout


@pytest.mark.skipif(lmh_script() is None, reason="the lmh console script is not installed in this environment")
def test_console_script(tmp_path: Path) -> None:
    assert run_script("--version", cwd=tmp_path).ok().stdout.strip() == f"lmh {__version__}"
    assert_clean_error(run_script("search", "x", "--dir", str(tmp_path / "none"), cwd=tmp_path), 1, "no memory")


def test_no_command_and_unknown_command_are_usage_errors() -> None:
    bare = run_lmh()
    assert bare.code == 2 and "usage: lmh" in bare.stderr
    unknown = run_lmh("remember", "x")
    assert unknown.code == 2 and "invalid choice: 'remember'" in unknown.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["search"], ["required: query"]),
        (["add", "tea", "--importance", "2"], ["between 0 and 1"]),
        (["add", "tea", "--importance", "high"], ["not a number"]),
        (["add"], ["give the text"]),
        (["add", "tea", "--tier", "working"], ["invalid choice"]),
        (["add", "tea", "--user", "bad/user"], ["user_id"]),
        (["add", "tea", "--metadata", "[1, 2]"], ["json object"]),
        (["add", "tea", "--when", "someday"], ["not a time"]),
        (["search", "tea", "--limit", "0"], ["at least 1"]),
        (["timeline", "--since", "2026-13-45"], ["not a time"]),
        (["timeline", "--since", "2026-02-01", "--until", "2026-01-01"], ["after --until"]),
        (["forget"], ["exactly one"]),
        (["forget", "--everything"], ["--yes"]),
        (["forget", "not-a-uuid"], ["uuid"]),
        (["forget", "--strategy", "sometimes"], ["invalid choice"]),
        (["graph", "--depth", "5"], ["invalid choice"]),
        (["ask", "why?", "--mqe", "11"], ["between 0 and 10"]),
        (["ask", "why?", "--llm", "nonsense"], ["--llm"]),
        (["ask", "why?", "--llm", "no_such_module:llm"], ["cannot load"]),
        (["ingest", ".", "--chunk-size", "4"], ["chunk-size"]),
        (["ingest", ".", "--namespace", "bad:name"], ["namespace"]),
        (["export", "-"], ["--session"]),
        (["stats", "--config", "/no/such/config.json"], ["cannot read"]),
        (["chat", "--max-tokens", "0"], ["max-tokens"]),
        (["migrate"], ["--to"]),
    ],
)
def test_bad_arguments_exit_2(tmp_path: Path, args: list[str], words: list[str]) -> None:
    result = run_lmh(*args, "--dir", str(tmp_path / "memory"), cwd=tmp_path)
    assert result.code == 2, f"lmh {' '.join(args)}: exit {result.code}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    for word in words:
        assert word.lower() in result.stderr.lower(), result.stderr


def test_bad_config_file_is_a_usage_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("persist_dir = ", encoding="utf-8")
    assert_clean_error(run_lmh("stats", "--config", str(broken)), 2, "not valid toml")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"persist_dir": str(tmp_path), "colour": "red"}), encoding="utf-8")
    assert_clean_error(run_lmh("stats", "--config", str(unknown)), 2, "colour")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["search", "tea"], ["no memory stored"]),
        (["timeline"], ["no memory stored"]),
        (["stats"], ["no memory stored"]),
        (["graph"], ["no memory stored"]),
        (["export", "out.json"], ["no memory stored"]),
        (["reindex"], ["no memory stored"]),
        (["migrate", "--to", "target.toml"], ["no memory stored"]),
        (["ask", "why?", "--llm", "none"], ["needs an llm"]),
        (["import", "missing.json"], ["no such file"]),
        (["ingest", "no-such-folder"], ["no such file"]),
        (["add", "x", "--file", "no-such.png"], ["no such file"]),
    ],
)
def test_runtime_errors_exit_1(tmp_path: Path, args: list[str], words: list[str]) -> None:
    result = run_lmh(*args, "--dir", str(tmp_path / "memory"), cwd=tmp_path)
    assert_clean_error(result, 1, *words)
    assert not (tmp_path / "memory").exists() or args[0] in ("ask",), "a failed read created the folder"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    quiet = run_lmh("search", "tea", "--dir", str(tmp_path / "none"))
    assert quiet.code == 1 and "Traceback" not in quiet.stderr
    loud = run_lmh("search", "tea", "--dir", str(tmp_path / "none"), "--debug")
    assert loud.code == 1 and "Traceback" in loud.stderr and "CLIError" in loud.stderr


def test_options_before_and_after_the_command(tmp_path: Path) -> None:
    before = run_lmh("--dir", str(tmp_path / "a"), "--user", "ann", "stats")
    after = run_lmh("stats", "--dir", str(tmp_path / "a"), "--user", "ann")
    assert before.code == after.code == 1
    assert str(tmp_path / "a") in before.stderr and str(tmp_path / "a") in after.stderr


def test_environment_selects_the_folder(tmp_path: Path) -> None:
    result = run_lmh("stats", env={"LMH_PERSIST_DIR": str(tmp_path / "from-env")})
    assert_clean_error(result, 1, "from-env")
