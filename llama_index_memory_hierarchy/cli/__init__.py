"""``lmh``: the command line of llama-index-memory-hierarchy (also ``python -m llama_index_memory_hierarchy``).

One module per command group; each adds its sub-commands to the parser and imports what it
needs (stores, models, rich) only when a command runs. Every command is scoped by
``--user`` and ``--dir`` (or ``--config``), prints rich tables or, with ``--json``, one JSON
document on stdout, and exits 0 on success, 1 on a runtime error and 2 on a usage error,
with one line on stderr naming the problem (the traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from llama_index_memory_hierarchy.cli._common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    LLM_CHOICES_HELP,
    CLIError,
    Output,
    bounded_message,
)
from llama_index_memory_hierarchy.version import __version__

__all__ = ["build_parser", "main"]

PROG = "lmh"
_COMMAND_MODULES = ("demo", "chat", "memory", "procedural", "transfer", "knowledge", "graph", "admin", "mcp", "ui")

DESCRIPTION = """\
Long-term memory for LlamaIndex agents, from the shell.

Start with 'lmh demo'. Every command works on one user's memory (--user, default 'default')
in one folder (--dir, default ./memory_data), or on the deployment a --config file describes.
"""

EPILOG = """\
examples:
  lmh demo                                   a two-session agent conversation, offline
  lmh add "I'm allergic to peanuts" --tier semantic --user alice
  lmh search "food allergies" --user alice
  lmh ingest ./docs --namespace manuals && lmh ask "How do I reset the router?" --namespace manuals
  lmh stats --json | jq .episodic.count

exit codes: 0 ok, 1 runtime error, 2 usage error.
settings: flags win over --config (JSON or TOML of MemoryConfig fields), which wins over LMH_* variables.
"""


def _common_options(*, top_level: bool) -> argparse.ArgumentParser:
    """Options every command takes, before or after its name (``lmh --user a search x`` = ``lmh search x --user a``).

    On sub-commands the defaults are SUPPRESS so that an option given before the command name
    is not overwritten by the sub-command's default.
    """
    default = None if top_level else argparse.SUPPRESS
    flag_default = False if top_level else argparse.SUPPRESS
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("common options")
    group.add_argument("--user", metavar="NAME", default=default, help="whose memory (env LMH_USER_ID; 'default')")
    group.add_argument(
        "--dir", metavar="DIR", default=default, help="memory folder (env LMH_PERSIST_DIR; ./memory_data)"
    )
    group.add_argument(
        "--config", metavar="FILE", default=default, help="JSON or TOML file of settings (e.g. a server deployment)"
    )
    group.add_argument("--llm", metavar="SPEC", default=default, help=LLM_CHOICES_HELP)
    group.add_argument("--json", action="store_true", default=flag_default, help="print one JSON document")
    group.add_argument("-q", "--quiet", action="store_true", default=flag_default, help="no notes or progress")
    group.add_argument(
        "-v", "--verbose", action="store_true", default=flag_default, help="log what the library does (INFO)"
    )
    group.add_argument(
        "--debug", action="store_true", default=flag_default, help="debug logging and tracebacks on errors"
    )
    return parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors quote the offending value escaped and cut short (a 100,000-character
    or control-character value is not echoed whole; sub-command parsers are made of this class too)."""

    def error(self, message: str) -> NoReturn:
        super().error(bounded_message(message))


def build_parser() -> argparse.ArgumentParser:
    """The ``lmh`` parser with every sub-command."""
    import importlib

    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_Formatter,
        parents=[_common_options(top_level=True)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    parents = [_common_options(top_level=False)]
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"llama_index_memory_hierarchy.cli.{name}")
        module.register(commands, parents, _Formatter)
    return parser


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("lmh: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "urllib3", "filelock", "asyncio", "jieba", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def _quiet_libraries() -> None:
    """Environment for the third-party libraries a command loads (set before they are imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # our own spinner shows model loading
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {bounded_message(message)}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lmh`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2), already printed
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    unreadable = _unencodable_argument(parser, args)
    if unreadable:
        _error(unreadable)
        return EXIT_USAGE
    _quiet_libraries()
    _setup_logging(args)
    out = Output(json_mode=args.json, quiet=args.quiet)
    try:
        code = args.handler(args, out)
        return EXIT_OK if code is None else int(code)
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `lmh timeline | head`
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:
        return _report(exc, args.debug)


def _unencodable_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The usage error for the first argument no file system or store can take (a lone surrogate, which a shell
    passes as ``surrogateescape`` of bytes that are not UTF-8), naming its option; None when all are text."""
    actions = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            actions += action.choices[args.command]._actions
    names = {a.dest: max(a.option_strings, key=len) if a.option_strings else a.dest for a in actions}
    for dest, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{names.get(dest, dest)}: not valid text: {text[:60]!r} ({exc.reason})"
    return None


def _report(exc: BaseException, debug: bool) -> int:
    """One line on stderr naming the problem (and the traceback with ``--debug``); the exit code."""
    from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError

    if debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, CLIError):
        _error(str(exc))
        return exc.code
    if isinstance(exc, MemoryValidationError):
        _error(str(exc))
        return EXIT_USAGE
    if isinstance(exc, MemoryHierarchyError):
        _error(str(exc))
        return EXIT_ERROR
    if isinstance(exc, UnicodeEncodeError):  # an argument naming a file with a lone surrogate, say
        _error(f"an argument is not valid text: {exc.object[:80]!r} ({exc.reason})")
        return EXIT_USAGE
    if isinstance(exc, FileNotFoundError):
        _error(f"{exc.filename}: no such file or folder" if exc.filename else str(exc))
        return EXIT_ERROR
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
        return EXIT_ERROR
    hint = "" if debug else " (run with --debug for the traceback)"
    _error(f"unexpected {type(exc).__name__}: {exc}{hint}")
    return EXIT_ERROR


__all__ += ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE"]
