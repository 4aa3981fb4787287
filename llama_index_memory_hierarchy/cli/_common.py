"""What every ``lmh`` command shares: settings from flags, opening the stores, output, errors.

Kept light to import (argparse and the standard library only): rich, the stores and the
models are imported when a command runs, so ``lmh --help`` answers at once.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import json
import logging
import os
import re
import socket
import sys
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.types import parse_moment

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.types import MemoryItem

logger = logging.getLogger("llama_index_memory_hierarchy.cli")

#: Exit codes: 0 success, 1 runtime error, 2 usage error (argparse's own convention), 130 interrupted.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CLIError(MemoryHierarchyError):
    """A failure to report as one line on stderr, with an exit code (1 unless said otherwise)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        self.code = code
        super().__init__(message)


class UsageError(CLIError):
    """Bad arguments that argparse could not catch (exit code 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


def read_config_file(path: str) -> dict[str, Any]:
    """``MemoryConfig`` fields from a JSON or TOML file (a ``[memory]`` table or top-level keys)."""
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UsageError(f"--config: cannot read {str(file)!r}: {exc.strerror or exc}") from None
    except (UnicodeEncodeError, ValueError):  # a lone surrogate, an embedded NUL
        raise UsageError(f"--config: not a valid file name: {str(file)[:80]!r}") from None
    try:
        if file.suffix.lower() == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10: the same parser as a backport
                import tomli as tomllib

            data: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config: {str(file)!r} is not valid {file.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("memory"), dict):
        data = data["memory"]
    if not isinstance(data, dict):
        raise UsageError(f"--config: {str(file)!r} must hold a table of settings")
    return data


def load_config(args: argparse.Namespace, **overrides: Any) -> MemoryConfig:
    """Settings of this command: flags, then ``--config``, then ``LMH_*`` variables, then defaults."""
    from llama_index_memory_hierarchy.config import MemoryConfig

    data = read_config_file(args.config) if getattr(args, "config", None) else {}
    unknown = sorted(set(data) - set(MemoryConfig.model_fields))
    if unknown:  # e.g. a file that is no settings file at all: name --config, not a key inside it
        shown = ", ".join(repr(key[:40]) for key in unknown[:5])
        raise UsageError(f"--config: {str(args.config)[:80]!r} has settings MemoryConfig does not know: {shown}")
    flags = {"persist_dir": getattr(args, "dir", None), "user_id": getattr(args, "user", None), **overrides}
    data.update({key: value for key, value in flags.items() if value is not None})
    return MemoryConfig.from_env(**data)


def describe_location(config: MemoryConfig) -> str:
    """Where the memories live, for messages (no secrets)."""
    from llama_index_memory_hierarchy.config import redact_url

    if config.records_on_server:
        return str(redact_url(config.resolved_record_store_url))
    return str(Path(config.persist_dir).expanduser())


def require_store(config: MemoryConfig) -> None:
    """Refuse to read from an embedded folder that holds nothing (instead of creating an empty one)."""
    if config.records_on_server:
        return
    folder = Path(config.persist_dir).expanduser()
    if not (folder / "memory.db").is_file():
        raise CLIError(
            f"no memory stored in {str(folder)!r} yet (add some with 'lmh add', or run 'lmh demo --dir {folder}')"
        )


@contextlib.contextmanager
def open_memory(
    args: argparse.Namespace,
    out: Output,
    *,
    session: str | None = None,
    must_exist: bool = True,
    llm: Any = None,
) -> Iterator[HierarchicalMemory]:
    """The user's ``HierarchicalMemory`` over ``--dir``/``--config``, closed afterwards."""
    config = load_config(args, session_id=session)
    if must_exist:
        require_store(config)
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory  # after the checks: imports take seconds

    memory = HierarchicalMemory.from_defaults(config=config, llm=llm)
    try:
        yield memory
    finally:
        memory.close()


def load_embeddings(memory: Any, out: Output) -> None:
    """Load the embedding model now, behind a spinner (it otherwise loads silently on first use)."""
    service = memory.context.embeddings
    if service.loaded:
        return
    with out.status("Loading the embedding model"):
        service.probe()
    logger.info("embedding model: %s (%s dimensions)", service.label, service.dim)


# --------------------------------------------------------------------------------------------
# LLM
# --------------------------------------------------------------------------------------------

LLM_CHOICES_HELP = (
    "LLM for answers: 'auto' (default: llama_index Settings.llm if set, else the bundled local model when "
    "installed), 'local', 'none', or 'module:attribute' naming a LlamaIndex LLM or a function returning one "
    "(e.g. 'mypkg.llms:make_llm'); env LMH_LLM"
)


#: Stop sequences for the bundled local model in chat: a small model otherwise goes on writing both sides.
LOCAL_CHAT_STOP = ["\nUser:", "\nuser:", "\nQuestion:"]


def local_chat_options(max_tokens: int) -> dict[str, Any]:
    """Options of the local model for chat turns: bounded replies that stop at an invented next turn."""
    return {"max_tokens": max_tokens, "generate_kwargs": {"stop": LOCAL_CHAT_STOP}}


def llm_spec(args: argparse.Namespace) -> str:
    return (getattr(args, "llm", None) or os.environ.get("LMH_LLM") or "auto").strip()


def resolve_cli_llm(args: argparse.Namespace, *, required_for: str | None = None, **local_options: Any) -> Any:
    """The LLM ``--llm`` names (None for 'none', or for 'auto' when nothing is installed).

    ``local_options`` (e.g. ``max_tokens``) configure the bundled local model when it is the
    one chosen. With ``required_for``, a missing LLM is an error naming the feature and the fixes.
    """
    spec = llm_spec(args)
    llm: Any = None
    if spec == "none":
        llm = None
    elif spec == "auto":
        from llama_index_memory_hierarchy.llms import resolve_llm

        llm = resolve_llm(None)
        if llm is not None and local_options and type(llm).__name__ == "LocalLLM":
            llm = type(llm).from_defaults(**local_options)
    elif spec == "local":
        from llama_index_memory_hierarchy.llms import LocalLLM

        llm = LocalLLM.from_defaults(**local_options)  # raises LocalLLMUnavailableError naming the pip command
    elif ":" in spec:
        llm = _load_llm_factory(spec)
    else:
        raise UsageError(f"--llm: expected auto, local, none or module:attribute, got {spec!r}")
    if llm is None and required_for:
        from llama_index_memory_hierarchy.llms import local_llm_available
        from llama_index_memory_hierarchy.llms.local import INSTALL_HINT

        if spec == "none" and local_llm_available():  # installed, but turned off: say so, not "install it"
            raise CLIError(
                f"{required_for} needs an LLM and --llm none (or LMH_LLM=none) turns it off: leave it out to use "
                "the bundled local model, or pass --llm module:attribute naming a LlamaIndex LLM"
            )
        raise CLIError(
            f"{required_for} needs an LLM and none is installed: install the offline default "
            f"({INSTALL_HINT}) or pass --llm module:attribute naming a LlamaIndex LLM"
        )
    return llm


def _load_llm_factory(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--llm: cannot load {spec!r}: {exc}") from None
    from llama_index.core.llms.llm import LLM

    value = target if isinstance(target, LLM) else target() if callable(target) else target
    if not isinstance(value, LLM):
        raise UsageError(f"--llm: {spec!r} gave a {type(value).__name__}, not a LlamaIndex LLM")
    return value


def llm_label(llm: Any) -> str:
    from llama_index_memory_hierarchy.llms import describe_llm

    return "none" if llm is None else describe_llm(llm)


# --------------------------------------------------------------------------------------------
# Input parsing
# --------------------------------------------------------------------------------------------


#: One label of a host name (RFC 1123): letters, digits and inner hyphens, at most 63.
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def check_bind_address(host: str, port: int) -> None:
    """``--host`` / ``--port`` of a server, checked before anything opens: a host the resolver refuses otherwise
    surfaces from inside the web server, after the stores opened, as an unexpected codec error or its exit 3."""
    if not 0 < port < 65536:
        raise UsageError(f"--port: must be 1-65535, got {port}")
    try:
        ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
        return
    except ValueError:
        pass
    name = host.removesuffix(".")
    if not (0 < len(name) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in name.split("."))):
        raise UsageError(f"--host: expected an IP address or a host name, got {bounded_message(repr(host), 80)}")
    try:  # the web server's own failure is its exit code 3 and a log line that names no option
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UsageError(f"--host: cannot resolve {host!r}: {exc.strerror or exc}") from None


def parse_when(value: str, option: str, *, end_of_day: bool = False) -> datetime:
    """:func:`~llama_index_memory_hierarchy.types.parse_moment` for a command-line option (a usage error naming it)."""
    try:
        return parse_moment(value, option, end_of_day=end_of_day)
    except MemoryValidationError as exc:
        raise UsageError(str(exc)) from None


def read_text_argument(value: str, what: str) -> str:
    """The argument itself, or stdin when it is '-'."""
    if value == "-":
        text = sys.stdin.read()
        if not text.strip():
            raise UsageError(f"{what}: nothing on standard input")
        return text.strip()
    return value


def parse_json_object(value: str | None, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise UsageError(f"{what}: not valid JSON: {exc}") from None
    except RecursionError:  # the parser's own bound on nesting, far above what metadata may hold
        raise UsageError(f"{what}: nested too deeply") from None
    if not isinstance(data, dict):
        raise UsageError(f"{what}: must be a JSON object, got {type(data).__name__}")
    return data


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def item_dict(item: MemoryItem) -> dict[str, Any]:
    """A memory as JSON-ready data (``tier`` = its memory type)."""
    data = item.model_dump(mode="json")
    data["tier"] = data.pop("memory_type")
    return data


#: Characters a terminal acts on rather than shows (C0 and C1 controls, DEL, bidirectional overrides): stored text
#: is printed with them escaped, so a memory cannot clear the screen, set the title or reorder what is shown.
_TERMINAL_CONTROLS = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    if chr(code) not in "\n\t"
}

#: The same characters as JSON escapes (JSON escapes C0 itself; DEL, C1 and the overrides it would print raw): a
#: ``--json`` document reads back to the very same strings and shows nothing a terminal acts on.
_JSON_CONTROLS = {code: f"\\u{code:04x}" for code in _TERMINAL_CONTROLS if code >= 0x7F}


def printable(text: str) -> str:
    """Text as a terminal should show it: control and bidirectional-override characters written as escapes."""
    return text.translate(_TERMINAL_CONTROLS)


def bounded_message(text: str, limit: int = 600) -> str:
    """An error message for stderr: controls escaped, and cut short when a value it quotes is huge."""
    text = printable(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else f"{text[: limit - 40]}… ({len(text)} characters in all)"


def short(text: str, limit: int = 160) -> str:
    """Text on one line (white space collapsed), cut at ``limit`` characters, controls escaped."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    return str(value)


class Output:
    """Where a command writes: rich tables for people, one JSON document with ``--json``.

    Results go to stdout; notes, spinners and progress go to stderr, so that
    ``lmh ... --json | jq`` always reads clean JSON.
    """

    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self._console: Any = None
        self._err: Any = None

    @property
    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(highlight=False)
        return self._console

    @property
    def err(self) -> Any:
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False)
        return self._err

    @property
    def interactive(self) -> bool:
        """Whether progress can be drawn (stderr is a terminal, and not quiet)."""
        return not self.quiet and sys.stderr.isatty()

    def json(self, data: Any) -> None:
        text = json.dumps(data, default=_json_default, ensure_ascii=False, indent=2)
        sys.stdout.write(text.translate(_JSON_CONTROLS) + "\n")
        sys.stdout.flush()

    def print(self, *renderables: Any, **kwargs: Any) -> None:
        """Human output on stdout (nothing in ``--json`` mode)."""
        if not self.json_mode:
            self.console.print(*renderables, **kwargs)

    def note(self, text: str) -> None:
        """A side remark on stderr (hidden by ``--quiet``)."""
        if not self.quiet:
            self.err.print(f"[dim]{_escape(text)}[/dim]")

    def warn(self, text: str) -> None:
        self.err.print(f"[yellow]warning:[/yellow] {_escape(text)}")

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A progress bar on stderr while something slow runs (a log line when not interactive).

        Model loading and LLM calls report no fraction done, so the bar pulses, with the time elapsed.
        """
        if not self.interactive:
            logger.info("%s…", text)
            yield
            return
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as progress:
            progress.add_task(f"{_escape(text)}…", total=None)
            yield

    def table(self, title: str | None, columns: list[str | tuple[str, dict[str, Any]]], rows: list[list[Any]]) -> Any:
        """A rich table (columns: a name, or (name, options such as justify/overflow/max_width))."""
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_lines=False, expand=False)
        for column in columns:
            name, options = (column, {}) if isinstance(column, str) else column
            table.add_column(name, **options)
        for row in rows:
            table.add_row(
                *(
                    "" if cell is None else cell if not isinstance(cell, str) else _escape(printable(cell))
                    for cell in row
                )
            )
        return table


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
