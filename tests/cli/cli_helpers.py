"""Run ``lmh`` through its real entry points, in a subprocess (imported by the CLI tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: Each command that loads the embedding model takes seconds; none should take minutes.
COMMAND_TIMEOUT = 300


@dataclass
class Result:
    """What one ``lmh`` run did."""

    args: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, f"lmh {' '.join(self.args)} exited {self.code}: {self.stderr}"
        return json.loads(self.stdout)

    def ok(self) -> Result:
        assert self.code == 0, f"lmh {' '.join(self.args)} exited {self.code}:\n{self.stderr}\n{self.stdout}"
        return self


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMH_")}
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "COLUMNS": "120",
        }
    )
    env.update(extra or {})
    return env


def run_lmh(*args: str, stdin: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """``python -m llama_index_memory_hierarchy ARGS`` (the same ``main`` as the ``lmh`` script)."""
    command = [sys.executable, "-m", "llama_index_memory_hierarchy", *args]
    done = subprocess.run(
        command,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        cwd=cwd,
        env=_env(env),
    )
    return Result(list(args), done.returncode, done.stdout, done.stderr)


def lmh_script() -> Path | None:
    """The ``lmh`` console script of this environment, when the package is installed with it."""
    candidate = Path(sys.executable).parent / ("lmh.exe" if os.name == "nt" else "lmh")
    return candidate if candidate.exists() else None


def run_script(*args: str, cwd: Path | None = None) -> Result:
    script = lmh_script()
    assert script is not None
    done = subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, cwd=cwd, env=_env()
    )
    return Result(list(args), done.returncode, done.stdout, done.stderr)


def assert_clean_error(result: Result, code: int, *words: str) -> None:
    """Exit ``code`` with one line on stderr naming the problem, and no traceback."""
    assert result.code == code, f"expected exit {code}, got {result.code}: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    for word in words:
        assert word.lower() in result.stderr.lower(), f"{word!r} not in: {result.stderr}"
    assert message.startswith("lmh"), result.stderr
