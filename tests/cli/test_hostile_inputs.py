"""Inputs that used to escape the command line's checks (issue 36, items 3 and 7): huge relative ages, times past
year 9998, metadata nested 60,000 deep exit 2 naming the option, and nothing is stored; stored control and escape
sequences are printed escaped by every table (``search``, ``timeline``, ``forget --dry-run``).

Usage errors run through ``main`` in this process (they are found before a store opens); what a table prints runs
through the real entry point in a subprocess, on the hashing embedding.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import cli_helpers
import pytest

run_lmh = functools.partial(cli_helpers.run_lmh, env={"LMH_EMBED_MODEL": "hashing"})

HUGE_AGES = ["99999999999d", "9" * 400 + "d", "3000000d", "9999-12-31T23:59:59.999999", "9999-12-31", "0001-01-01"]
TIME_OPTIONS = [
    ["add", "A trip to the lake", "--tier", "episodic", "--when"],
    ["search", "lake", "--since"],
    ["search", "lake", "--until"],
    ["timeline", "--since"],
    ["timeline", "--until"],
    ["forget", "--strategy", "time_based", "--older-than"],
]


@pytest.fixture
def lmh_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Any:
    """``lmh`` in this process (a usage error is found before any store opens): (exit code, stderr)."""
    from llama_index_memory_hierarchy.cli import main

    monkeypatch.setenv("LMH_EMBED_MODEL", "hashing")
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        return code, capsys.readouterr().err

    return run


@pytest.mark.parametrize("value", HUGE_AGES, ids=["11-digit-days", "400-digit", "3e6-days", "max", "max-day", "min"])
def test_a_time_out_of_range_is_a_usage_error_naming_the_option(lmh_main: Any, tmp_path: Path, value: str) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "alice"]
    for command in TIME_OPTIONS:
        code, stderr = lmh_main(*command, value, *common)
        assert code == 2 and f"{command[-1]}:" in stderr, (command, code, stderr)
        assert "unexpected" not in stderr and len(stderr) < 400, stderr  # a 400-digit age is not echoed whole
    assert not (tmp_path / "memory" / "memory.db").exists()  # nothing stored, nothing opened


def test_metadata_nested_60000_deep_is_a_usage_error(lmh_main: Any, tmp_path: Path) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "alice"]
    for deep in ['{"a":' + "[" * 60_000 + "]" * 60_000 + "}", '{"a":' * 60_000 + "1" + "}" * 60_000]:
        code, stderr = lmh_main("add", "A note", "--metadata", deep, *common)
        assert code == 2 and "--metadata" in stderr and "unexpected" not in stderr, stderr
    code, stderr = lmh_main("add", "A note", "--metadata", '{"a":' * 10 + "1" + "}" * 10, *common)
    assert code == 2 and "metadata: nested deeper" in stderr, stderr  # parses, but deeper than metadata may be
    assert not (tmp_path / "memory" / "memory.db").exists() or lmh_main("stats", *common)[0] == 0


def test_stored_escape_sequences_are_printed_escaped(tmp_path: Path) -> None:
    common = ["--dir", str(tmp_path / "memory"), "--user", "alice"]
    hostile = "Lunch notes \x1b]0;owned\x07\x1b[2J\x1b[31m red \x9b1m \u202eevil\u202c end"
    role = '{"role": "\\u001b[5m"}'
    run_lmh("add", hostile, "--tier", "episodic", "--when", "2026-01-05", "--metadata", role, *common).ok()
    outputs = {
        "search": run_lmh("search", "lunch notes", *common).ok().stdout,
        "timeline": run_lmh("timeline", *common).ok().stdout,
        "forget": run_lmh("forget", "--strategy", "time_based", "--older-than", "1d", "--dry-run", *common).ok().stdout,
    }
    for command, stdout in outputs.items():
        assert "Lunch notes" in stdout, (command, stdout)
        for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert raw not in stdout, f"lmh {command} printed {raw!r} raw: {stdout!r}"
        assert "\\x1b" in stdout, (command, stdout)
    documents = {c: run_lmh(*c.split(), "--json", *common).ok().stdout for c in ("search lunch", "timeline", "graph")}
    for command, stdout in documents.items():  # JSON escapes C0 itself; DEL, C1 and overrides were printed raw
        assert not {"\x1b", "\x07", "\x9b", "\u202e", "\u202c"} & set(stdout), f"lmh {command} --json: {stdout!r}"
    found = run_lmh("search", "lunch notes", "--json", *common).json()["results"]
    assert found[0]["content"] == hostile  # stored and returned as data, byte for byte
    assert json.loads(run_lmh("timeline", "--json", *common).stdout)["events"][0]["metadata"]["role"] == "\x1b[5m"


@pytest.mark.parametrize("option", ["--dir", "--config"])
@pytest.mark.parametrize("value", ["a\ud800b", "a\x00b"], ids=["lone surrogate", "NUL"])
def test_a_path_no_file_system_can_take_is_a_usage_error(lmh_main: Any, option: str, value: str) -> None:
    """Found by the long fuzz (``tests/cli/test_fuzz_options.py``): ``--dir 'a\\ud800b'`` was an unexpected
    UnicodeEncodeError."""
    code, stderr = lmh_main("stats", option, value)
    assert code == 2 and "unexpected" not in stderr, stderr
    assert (f"{option}:" if value == "a\ud800b" else "persist_dir" if option == "--dir" else "--config") in stderr, (
        stderr
    )


@pytest.mark.parametrize(
    "args",
    [
        ["graph", "--html", "a\ud800b"],
        ["graph", "--export-json", "a\ud800b"],
        ["search", "a\ud800b"],
        ["procedural", "--add", "a\ud800b"],
        ["procedural", "--add", "x" * 120_000],
        ["procedural", "--add", "Answer briefly", "--when", "x" * 2_000],
    ],
    ids=["graph --html", "graph --export-json", "search query", "procedural --add", "long --add", "long --when"],
)
def test_an_argument_that_is_no_text_or_too_long_names_its_option(
    lmh_main: Any, tmp_path: Path, args: list[str]
) -> None:
    """Found by the long fuzz: these named no option ('an argument is not valid text'), or the tier's own
    parameters ('text: longer than 100000 characters', 'condition')."""
    code, stderr = lmh_main(*args, "--dir", str(tmp_path / "memory"), "--user", "alice")
    option = next((a for a in reversed(args) if a.startswith("--")), "query")
    assert code == 2 and stderr.startswith(f"lmh: error: {option}: "), stderr
    assert not (tmp_path / "memory").exists()  # found before any store opens


def test_a_config_file_of_other_keys_names_config(lmh_main: Any, tmp_path: Path) -> None:
    """Found by the long fuzz (a JSON file another command wrote, given as ``--config``): the error named a key in it,
    'title: Extra inputs are not permitted', not the option."""
    other = tmp_path / "graph.json"
    other.write_text('{"title": "a graph", "nodes": []}', "utf-8")
    code, stderr = lmh_main("stats", "--config", str(other), "--dir", str(tmp_path / "memory"))
    assert code == 2 and stderr.startswith("lmh: error: --config: ") and "'nodes', 'title'" in stderr, stderr


@pytest.mark.parametrize(
    "host", ['{"a":' * 50 + "1", "a" * 64, "", "no host", "trail-.example", "\x1b[2J", "unresolvable.invalid"]
)
@pytest.mark.parametrize("command", ["ui", "mcp"])
def test_a_host_no_resolver_takes_names_host(lmh_main: Any, tmp_path: Path, command: str, host: str) -> None:
    """Found by the serving fuzz (``tests/cli/test_fuzz_serving_options.py``): ``lmh ui --host`` of a label over 63
    characters was an unexpected UnicodeError ('idna' codec) from inside the web server, after the stores opened, and
    a name that does not resolve was the web server's exit 3, "Name or service not known"."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": [{"token": "alice-token-0123456789", "user": "alice"}]}', "utf-8")
    serve = ["ui", "--user", "alice"] if command == "ui" else ["mcp", "--http", "--tokens", str(tokens)]
    code, stderr = lmh_main(*serve, "--host", host, "--port", "8", "--dir", str(tmp_path / "memory"))
    assert code == 2 and stderr.startswith("lmh: error: --host: "), stderr
    assert not (tmp_path / "memory").exists()  # found before any store opens


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "0.0.0.0"])
def test_an_address_or_host_name_is_a_host(host: str) -> None:
    from llama_index_memory_hierarchy.cli._common import check_bind_address

    check_bind_address(host, 8770)
