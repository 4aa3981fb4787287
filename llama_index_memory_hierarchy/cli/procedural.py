"""``lmh procedural``: the user's standing instructions and learned procedures, shown, added, edited, deleted."""

from __future__ import annotations

import argparse
from typing import Any

from llama_index_memory_hierarchy.cli._common import CLIError, Output, UsageError, item_dict, open_memory, short


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    procedural = commands.add_parser(
        "procedural",
        parents=parents,
        formatter_class=formatter,
        help="standing instructions and learned procedures: list, add, edit, delete",
        description="List the user's standing instructions (rules about how to answer or act) and the procedures "
        "learned from the agent's runs; add an instruction (a newer one on the same matter replaces the older), "
        "edit one's text, or delete an instruction or procedure by id.",
    )
    action = procedural.add_mutually_exclusive_group()
    action.add_argument("--add", metavar="TEXT", help="store a standing instruction")
    action.add_argument("--edit", metavar="ID", help="change an instruction's or procedure's text (with --text)")
    action.add_argument("--delete", metavar="ID", help="delete an instruction or procedure")
    procedural.add_argument("--text", metavar="TEXT", help="the new text for --edit")
    procedural.add_argument("--when", metavar="CONDITION", help="with --add: when the rule applies ('deploy')")
    procedural.add_argument("--history", action="store_true", help="also the instructions a newer one replaced")
    procedural.set_defaults(handler=run_procedural)


def _check_text(option: str, value: str | None) -> None:
    from llama_index_memory_hierarchy.errors import MemoryValidationError
    from llama_index_memory_hierarchy.tiers.procedural.tier import MAX_CONDITION_CHARS
    from llama_index_memory_hierarchy.types import validate_content

    if value is None:
        return
    try:
        validate_content(value, option)
    except MemoryValidationError as exc:
        raise UsageError(str(exc)) from None
    if option == "--when" and len(value) > MAX_CONDITION_CHARS:
        raise UsageError(f"--when: longer than {MAX_CONDITION_CHARS} characters ({len(value)})")


def run_procedural(args: argparse.Namespace, out: Output) -> int:
    if args.edit and not args.text:
        raise UsageError("--edit needs --text")
    if (args.text and not args.edit) or (args.when and not args.add):
        raise UsageError("--text goes with --edit, --when with --add")
    for option, value in (("--add", args.add), ("--text", args.text), ("--when", args.when)):
        _check_text(option, value)  # before a store opens: the tier would name its own parameters
    with open_memory(args, out, must_exist=not args.add) as memory:
        tier = memory.procedural
        changed: dict[str, Any] | None = None
        if args.add:
            memory_id = tier.add_instruction(args.add, condition=args.when)
            changed = {"added": memory_id}
        elif args.edit:
            if not tier.update(args.edit, content=args.text):
                raise CLIError(f"no instruction or procedure with id {args.edit!r} for {memory.user_id!r}")
            changed = {"edited": args.edit}
        elif args.delete:
            if not tier.remove(args.delete):
                raise CLIError(f"no instruction or procedure with id {args.delete!r} for {memory.user_id!r}")
            changed = {"deleted": args.delete}
        instructions = tier.instructions(include_history=args.history)
        procedures = tier.procedures()
    result = {
        **(changed or {}),
        "instructions": [item_dict(i) for i in instructions],
        "procedures": [item_dict(p) for p in procedures],
    }
    if out.json_mode:
        out.json(result)
        return 0
    for verb, memory_id in (changed or {}).items():
        out.note(f"{verb} {memory_id}")
    rows = [
        [
            i.id,
            f"{i.timestamp:%Y-%m-%d}",
            str(i.metadata.get("condition") or ""),
            "ended" if i.metadata.get("invalid_at") else "current",
            short(i.content),
        ]
        for i in instructions
    ]
    out.print(out.table("standing instructions", ["id", "since", "when", "state", "rule"], rows))
    rows = [
        [p.id, str(p.metadata.get("runs", 1)), str(p.metadata.get("successes", 1)), short(str(p.metadata.get("task")))]
        for p in procedures
    ]
    out.print(out.table("procedures", ["id", "runs", "worked", "task"], rows))
    return 0
