"""``lmh ui``: serve the memory inspector of one user on loopback (see ``llama_index_memory_hierarchy.ui``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    check_bind_address,
    describe_location,
    load_embeddings,
    open_memory,
)

#: The inspector's own session: it never records a turn, so get() there shows only what memory injects.
UI_SESSION = "lmh-ui"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    ui = commands.add_parser(
        "ui",
        parents=parents,
        formatter_class=formatter,
        help="inspect a user's memory in the browser (search with reasons, lists, timeline, graph, get(), access log)",
        description="Serve a local web page over ONE user's memory (--user with --dir, or a --config "
        "deployment): search with explanations, filtered lists, the timeline by session and dates, the knowledge "
        "graph, the profile, what get() would inject for an input and what it showed (the access log). Read-only "
        "unless --allow-edits (create, edit, pin, forget, erase the access log, forget everything). "
        "The user is fixed for the server's life: no URL reaches another user's data, except through the "
        "operator's link that --operator prints (its holder may choose any stored user). Every page needs the "
        "secret link printed at start (a new secret each run, kept in a cookie once opened); for scripted use, "
        "give a fixed secret with --token-file or LMH_UI_TOKEN (never on the command line, where `ps` shows it).",
    )
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    ui.add_argument("--port", type=int, default=8770, help="port (default: 8770)")
    ui.add_argument("--allow-edits", action="store_true", help="allow create / edit / pin / forget from the page")
    ui.add_argument(
        "--operator",
        action="store_true",
        help="also print an operator's link, whose holder may choose which stored user to view (Users page)",
    )
    ui.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the secret to use instead of a new random one (env LMH_UI_TOKEN: the secret itself); "
        "16-512 characters of A-Z a-z 0-9 . _ ~ -",
    )
    ui.set_defaults(handler=run_ui)


def given_secret(args: argparse.Namespace, out: Output) -> str | None:
    """The fixed secret of ``--token-file`` or ``LMH_UI_TOKEN`` (None: a new random one), checked before any
    store opens; warns of a file others may read."""
    from llama_index_memory_hierarchy.mcp_server.access import readable_by_others
    from llama_index_memory_hierarchy.ui.inspector import GIVEN_SECRET

    if args.token_file:
        source = "--token-file"
        try:
            secret = Path(args.token_file).expanduser().read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise CLIError(f"--token-file: cannot read {args.token_file!r}: {reason}", code=2) from None
        if readable_by_others(args.token_file):
            out.warn(
                f"{args.token_file}: other users of this machine may read the secret (chmod 600 {args.token_file})"
            )
    else:
        source, secret = "LMH_UI_TOKEN", os.environ.get("LMH_UI_TOKEN", "")
        if not secret:
            return None
    if not GIVEN_SECRET.fullmatch(secret):
        raise CLIError(f"{source}: the secret must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ -", code=2)
    return secret


def run_ui(args: argparse.Namespace, out: Output) -> int:
    try:
        import uvicorn

        from llama_index_memory_hierarchy.ui.app import create_app
    except ImportError as exc:
        raise CLIError(
            f"lmh ui needs the 'ui' extra ({exc.name} is missing): pip install 'llama-index-memory-hierarchy[ui]'"
        ) from None
    check_bind_address(args.host, args.port)
    secret = given_secret(args, out)
    if args.host not in LOOPBACK:
        out.warn(f"--host {args.host}: the inspector is reachable from other machines, over plain HTTP")
    with open_memory(args, out, session=UI_SESSION) as memory:
        load_embeddings(memory, out)
        hosts = sorted({args.host.strip("[]"), "127.0.0.1", "localhost"})
        app = create_app(
            memory,
            allow_edits=args.allow_edits,
            hosts=hosts,
            location=describe_location(memory.config),
            operator=args.operator,
            access_token=secret,
        )
        mode = "edits allowed" if args.allow_edits else "read-only"
        shown = f"[{args.host}]" if ":" in args.host else args.host
        inspector = app.state.inspector
        if secret is None:  # new each run: only who reads this line can open the pages
            out.note(f"memory inspector of {memory.user_id!r} ({mode}); open this link (Ctrl-C stops):")
            link = f"    http://{shown}:{args.port}/?token={inspector.access_token}"
        else:  # the caller knows its secret: it is not written into a log
            out.note(f"memory inspector of {memory.user_id!r} ({mode}), with the secret given (Ctrl-C stops):")
            link = f"    http://{shown}:{args.port}/?token=<the secret>  (or send Authorization: Bearer <the secret>)"
        # the link is what the command gives: shown with --quiet too, on one line whatever the width
        out.err.print(link, soft_wrap=True, markup=False)
        if inspector.operator_token is not None:
            out.note("operator's link (may choose which user to view; keep it to yourself):")
            link = f"    http://{shown}:{args.port}/?token={inspector.operator_token}"
            out.err.print(link, soft_wrap=True, markup=False)
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
        try:
            uvicorn.Server(config).run()
        finally:
            inspector.close()
    return 0
