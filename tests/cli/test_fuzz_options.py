"""Every value-taking option of every ``lmh`` command, fed huge, deep, malformed and control-character values
(issue 36, item 7): each run exits 0 (the value is fine), 2 (a usage error naming the option or the field) or 1 (a
runtime error in one clean line), never "unexpected ...", never a traceback, never a raw control character on
stderr, and never a message that echoes a 100,000-character value whole.

Run through ``main`` in this process on the hashing embedding, from a scratch working folder. The fast variant
feeds each option a few values in turn; the long ones (``--run-slow``) every value to every option, and 400 values
Hypothesis draws (any text, huge numbers and ages, times, deep JSON) to drawn options. The serving
and interactive commands (``chat``, ``demo``, ``mcp``, ``ui``, ``migrate``) run as subprocesses, in
``test_fuzz_serving_options.py``: a value they accept starts a server.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llama_index_memory_hierarchy.cli import main
from llama_index_memory_hierarchy.cli.__init__ import build_parser

HOSTILE = [
    "9" * 400,
    "99999999999d",
    "9999-12-31T23:59:59.999999",
    "-1",
    "0",
    "",
    "nan",
    "1e309",
    "\x1b]0;owned\x07\x1b[2J",
    '{"a":' + "[" * 60_000 + "]" * 60_000 + "}",
    '{"a":' * 60_000 + "1" + "}" * 60_000,
    "x" * 100_000,
    "a\ud800b",
    "../../../etc/passwd",
    "\u202eevil",
]
#: Options shared by every command (fuzzed once, on ``stats``), and those that start servers or conversations.
COMMON = {"--user", "--dir", "--config", "--llm"}
SKIPPED = {"chat", "demo", "mcp", "ui", "migrate"}
#: The setting an option fills, named by its errors instead of the option.
FIELDS = {"--dir": ("persist_dir",), "--user": ("user_id",), "--session": ("session_id",), "--delete": ("memory_id",)}
CONTROLS = {chr(c) for c in [*range(0x20), 0x7F, 0x9B, 0x202E]} - {"\n", "\t"}


def _base(command: str, work: Path) -> list[str]:
    """A run of ``command`` that works with good values (what the hostile value then replaces)."""
    return {
        "add": ["add", "A note about the lake"],
        "search": ["search", "lake"],
        "timeline": ["timeline"],
        "stats": ["stats"],
        "forget": ["forget", "--strategy", "time_based", "--dry-run"],
        "export": ["export", str(work / "out.json")],
        "import": ["import", str(work / "seed.json")],
        "ingest": ["ingest", str(work / "doc.txt")],
        "ask": ["ask", "What is in the doc?"],
        "graph": ["graph"],
        "reindex": ["reindex"],
        "procedural": ["procedural"],
    }[command]


def _cases() -> list[tuple[str, str]]:
    """(command, option) for every value-taking option of every fuzzed command."""
    parser = build_parser()
    cases = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for command, sub in action.choices.items():
            if command in SKIPPED:
                continue
            for option in sub._actions:
                if option.nargs == 0 or not option.option_strings or isinstance(option, argparse._HelpAction):
                    continue
                name = max(option.option_strings, key=len)
                if name in COMMON and command != "stats":
                    continue
                cases.append((command, name))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder with a memory of alice, an export of it and a document to ingest."""
    work = tmp_path_factory.mktemp("fuzz")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LMH_EMBED_MODEL", "hashing")
        common = ["--dir", str(work / "memory"), "--user", "alice"]
        assert main(["add", "A trip to the lake with Mia", "--tier", "episodic", *common]) == 0
        assert main(["export", str(work / "seed.json"), *common]) == 0
    (work / "doc.txt").write_text("The lake is deep and cold in spring.", "utf-8")
    return work


def _check(lmh: Any, command: str, option: str, value: str, work: Path) -> None:
    args = [*_base(command, work), option, value, "--dir", str(work / "memory"), "--user", "alice"]
    if option in ("--dir", "--user"):  # the hostile value is the one given
        args = [*_base(command, work), option, value]
    code, err = lmh(args)
    shown = f"lmh {command} {option} {value[:40]!r}: exit {code}: {err[:300]!r}"
    assert code in (0, 1, 2), shown
    assert "Traceback" not in err and "unexpected" not in err, shown
    assert not CONTROLS & set(err), shown
    assert len(err) < 2000, shown
    if code == 2:  # a usage error names the option (or the setting it fills)
        stem = option.lstrip("-")
        named = {option, stem, stem.replace("-", "_"), *FIELDS.get(option, ())}
        assert any(re.search(rf"(?<![\w-]){re.escape(name)}\b", err) for name in named), shown


@pytest.fixture
def lmh(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], work: Path) -> Any:
    monkeypatch.setenv("LMH_EMBED_MODEL", "hashing")
    monkeypatch.chdir(work)

    def run(args: list[str]) -> tuple[int, str]:
        code = main(args)
        captured = capsys.readouterr()
        return code, captured.err

    return run


@pytest.mark.parametrize(("command", "option"), CASES, ids=[f"{c} {o}" for c, o in CASES])
def test_fuzz_every_option(lmh: Any, work: Path, command: str, option: str) -> None:
    start = CASES.index((command, option))
    for value in [HOSTILE[(start + k) % len(HOSTILE)] for k in range(3)]:
        _check(lmh, command, option, value, work)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "option"), CASES, ids=[f"{c} {o}" for c, o in CASES])
@pytest.mark.parametrize("value", range(len(HOSTILE)))
def test_fuzz_every_option_long(lmh: Any, work: Path, command: str, option: str, value: int) -> None:
    _check(lmh, command, option, HOSTILE[value], work)


#: Drawn values: any text (control characters and lone surrogates too), huge numbers and ages, times, deep JSON.
VALUES = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=300),
    st.integers(-(10**400), 10**400).map(str),
    st.tuples(st.integers(0, 10**30), st.sampled_from(["d", "h", "m", "s", "w", "y", "D", ""])).map(
        lambda age: f"{age[0]}{age[1]}"
    ),
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.integers(1, 100_000).map(lambda depth: '{"a":' + "[" * depth + "]" * depth + "}"),
    st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=20), lambda inner: st.lists(inner)
                 | st.dictionaries(st.text(max_size=10), inner), max_leaves=30).map(json.dumps),
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), value=VALUES)
def test_fuzz_every_option_hypothesis(lmh: Any, work: Path, case: tuple[str, str], value: str) -> None:
    """Drawn (option, value) pairs: the same answer as the fixed values (exit 0, 1 or 2 naming the option)."""
    _check(lmh, *case, value, work)


def test_the_fuzzed_memory_still_reads(lmh: Any, work: Path) -> None:
    """After the fast fuzz, alice's memory is intact and readable (nothing half-written broke it)."""
    code, _ = lmh(["timeline", "--json", "--dir", str(work / "memory"), "--user", "alice"])
    assert code == 0
    assert json.dumps(CASES)  # every case is a plain (command, option) pair
