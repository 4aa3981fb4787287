"""The command-specific options of the serving, interactive and migrating commands (``chat``, ``demo``, ``mcp``,
``ui``, ``migrate``), read from the real parser, fed the hostile values of ``test_fuzz_options`` (issue 36,
item 7). Their shared options (``--user``, ``--dir``, ``--config``, ``--llm``) are fuzzed there, on ``stats``.

A value these commands accept starts a server, a conversation or a migration, so each run is a real subprocess
with stdin closed, a scratch ``--dir``, a free port for ``ui`` and ``mcp --http``, and a timeout. It must exit 2
naming the option, or, for a value the command accepts, not fail: no traceback, no "unexpected", no raw control
character on stderr, exit 0 (or 1 in one clean line). A process still running at the timeout (a server that
started) is killed and counts as accepted, after the same checks of what it wrote. An argument longer than the
system allows one argument is sent at a depth that fits. The default run feeds each option one value; the
long one (``--run-slow``) every value.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
from pathlib import Path

import cli_helpers
import pytest
from test_fuzz_options import CONTROLS, FIELDS, HOSTILE

from llama_index_memory_hierarchy.cli import main
from llama_index_memory_hierarchy.cli.__init__ import build_parser

COMMANDS = ("chat", "demo", "mcp", "ui", "migrate")
COMMON = {"--user", "--dir", "--config", "--llm"}
#: A server that starts is given this long, then killed (it accepted the value).
TIMEOUT = 20
#: Linux refuses one argument over 128 KiB: the deepest hostile value is sent at a depth that fits.
VALUES = [value if len(value) < 120_000 else '{"a":' * 20_000 + "1" + "}" * 20_000 for value in HOSTILE]


def _cases() -> list[tuple[str, str]]:
    """(command, option) for every value-taking, command-specific option of the serving commands."""
    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for command in COMMANDS:
        for option in commands.choices[command]._actions:
            if option.nargs == 0 or not option.option_strings or isinstance(option, argparse._HelpAction):
                continue
            name = max(option.option_strings, key=len)
            if name not in COMMON:
                cases.append((command, name))
    return cases


CASES = _cases()


def _free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def _base(command: str, option: str, work: Path) -> list[str]:
    """A run of ``command`` that works with good values and stops by itself or serves until killed."""
    port = [] if option == "--port" else ["--port", _free_port()]
    http = command == "mcp" and option in ("--host", "--port", "--path")  # (over --http, tokens name the user)
    base = {
        "chat": ["chat", "--llm", "cli_llms:remembering_llm"],
        "demo": ["demo", "--llm", "none"],
        "mcp": ["mcp", *(["--http", "--tokens", str(work / "tokens.json"), *port] if http else [])],
        "ui": ["ui", *port],
        "migrate": ["migrate", *([] if option == "--to" else ["--to", str(work / "target")])],
    }[command]
    home = [] if option == "--from" else ["--dir", str(work / "memory")]
    return [*base, *home, *([] if http else ["--user", "alice"])]


def _run(args: list[str], cwd: Path) -> tuple[int | None, str]:
    """Exit code (None: killed at the timeout) and stderr of ``python -m llama_index_memory_hierarchy ARGS``."""
    argv = [sys.executable, "-m", "llama_index_memory_hierarchy", *args]
    encoded = [part.encode("utf-8", "surrogatepass") for part in argv]  # a lone surrogate arrives as bad UTF-8
    env = cli_helpers._env({"LMH_EMBED_MODEL": "hashing"})
    with subprocess.Popen(encoded, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=cwd, env=env) as process:  # fmt: skip
        try:
            _, err = process.communicate(timeout=TIMEOUT)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            code = None
    return code, err.decode("utf-8", "replace")


def _check(command: str, option: str, value: str, work: Path) -> None:
    code, err = _run([*_base(command, option, work), option, value], work)
    shown = f"lmh {command} {option} {value[:40]!r}: exit {code}: {err[-600:]!r}"
    assert code in (None, 0, 1, 2), shown
    assert "Traceback" not in err and "unexpected" not in err, shown
    assert not CONTROLS & set(err), shown
    assert len(err) < 2000 or code is None, shown  # (a server's log grows while it runs)
    if code == 1:  # a runtime error in one clean line
        assert err.strip().splitlines()[-1].startswith("lmh"), shown
    if code == 2:
        stem = option.lstrip("-")
        named = {option, stem, stem.replace("-", "_"), *FIELDS.get(option, ())}
        assert any(re.search(rf"(?<![\w-]){re.escape(name)}\b", err) for name in named), shown


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fuzz-serving")
    with pytest.MonkeyPatch.context() as patch:  # a memory for ui to show (it refuses an empty folder)
        patch.setenv("LMH_EMBED_MODEL", "hashing")
        assert main(["add", "A trip to the lake with Mia", "--dir", str(work / "memory"), "--user", "alice"]) == 0
    (work / "tokens.json").write_text('{"tokens": [{"token": "alice-token-0123456789", "user": "alice"}]}', "utf-8")
    return work


@pytest.mark.parametrize(("command", "option"), CASES, ids=[f"{c} {o}" for c, o in CASES])
def test_fuzz_serving_option(work: Path, command: str, option: str) -> None:
    _check(command, option, VALUES[CASES.index((command, option)) % len(VALUES)], work)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "option"), CASES, ids=[f"{c} {o}" for c, o in CASES])
@pytest.mark.parametrize("value", range(len(VALUES)))
def test_fuzz_serving_option_long(work: Path, command: str, option: str, value: int) -> None:
    _check(command, option, VALUES[value], work)
