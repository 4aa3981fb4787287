"""``lmh export`` and ``lmh import``: a user's whole memory as one JSON file, or one session as a transcript."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import CLIError, Output, open_memory


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    export = commands.add_parser(
        "export",
        parents=parents,
        formatter_class=formatter,
        help="write the user's whole memory (or one --session transcript) to a file",
        description="Write every memory of the user (all tiers, knowledge bases, graph, lifecycle tables, "
        "stored files and embeddings) to one JSON file that 'lmh import' reads back without re-embedding "
        "when the model matches. With --session, write a readable transcript of one session instead.",
    )
    export.add_argument("path", help="file to write ('-' with --session prints to standard output)")
    export.add_argument("--session", metavar="ID", help="export this session's transcript instead")
    export.add_argument(
        "--format", choices=("markdown", "json"), default="markdown", help="transcript format (with --session)"
    )
    export.add_argument("--no-files", action="store_true", help="leave stored media files out of the export")
    export.add_argument("--force", action="store_true", help="overwrite an existing file")
    export.set_defaults(handler=run_export)

    imp = commands.add_parser(
        "import",
        parents=parents,
        formatter_class=formatter,
        help="read a user's memory from an 'lmh export' file",
        description="Write an export back into the stores, as the exported user or as --user when given.",
    )
    imp.add_argument("path", help="an export written by 'lmh export'")
    imp.add_argument(
        "--on-conflict",
        choices=("replace", "skip", "error"),
        default="replace",
        help="memories that already exist: replace them (default), skip them, or fail",
    )
    imp.set_defaults(handler=run_import)


def run_export(args: argparse.Namespace, out: Output) -> int:
    to_stdout = args.path == "-"
    if to_stdout and not args.session:
        raise CLIError("export: '-' (standard output) works only with --session", code=2)
    target = None if to_stdout else Path(args.path).expanduser()
    if target is not None:
        if target.exists() and not args.force:
            raise CLIError(f"{str(target)!r} exists; pass --force to overwrite it")
        if not target.parent.exists():
            raise CLIError(f"cannot write {str(target)!r}: folder {str(target.parent)!r} does not exist")
    with open_memory(args, out) as memory:
        if args.session:
            known = memory.episodic.get_session(args.session)
            if not known:
                raise CLIError(f"no session {args.session!r} for user {memory.user_id!r}")
            text = memory.manager.export_session(args.session, target, format=args.format)
            if to_stdout:
                print(text)
                return 0
            report: dict[str, Any] = {"path": str(target), "session_id": args.session, "format": args.format}
        else:
            report = memory.manager.export_user(None, target, include_files=not args.no_files).model_dump(mode="json")
    if out.json_mode:
        out.json(report)
    elif args.session:
        out.print(f"wrote the transcript of session {args.session} to {target}")
    else:
        namespaces = ", ".join(f"{k}: {v}" for k, v in report.get("by_namespace", {}).items())
        out.print(
            f"exported {report['records']} records ({namespaces}), {report['embeddings']} embeddings and "
            f"{report['files']} files of user {report['user_id']!r} to {report['path']}"
        )
    return 0


def run_import(args: argparse.Namespace, out: Output) -> int:
    source = Path(args.path).expanduser()
    if not source.is_file():
        raise CLIError(f"no such file: {args.path!r}")
    with open_memory(args, out, must_exist=False) as memory:
        report = memory.manager.import_user(source, user_id=args.user, on_conflict=args.on_conflict)
    if out.json_mode:
        out.json(report.model_dump(mode="json"))
        return 0
    out.print(
        f"imported {report.records} records for user {report.user_id!r} "
        f"({report.reused_embeddings} embeddings reused, {report.reembedded} re-embedded, "
        f"{report.replaced} replaced, {report.skipped} skipped, {report.files} files)"
    )
    return 0
