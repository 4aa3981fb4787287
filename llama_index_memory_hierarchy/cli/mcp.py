"""``lmh mcp``: serve the memory of one folder or ``--config`` deployment over the Model Context Protocol."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import signal
import sys
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    Output,
    UsageError,
    check_bind_address,
    load_config,
    resolve_cli_llm,
)

DEFAULT_PORT = 8765


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    serve = commands.add_parser(
        "mcp",
        parents=parents,
        formatter_class=formatter,
        help="serve the memory to MCP clients (Claude Desktop, Cursor, agents) over stdio or HTTP",
        description="Serve the memory as an MCP server: tools remember, recall, list_memories, get_memory, "
        "fact_history, update_memory, forget, forget_all, timeline, profile, related_entities, memory_stats, "
        "add_document, ingest_documents (inside --document-root folders only), search_documents and "
        "ask_documents, the resources memory://profile and memory://users/{user_id}/profile and the prompt "
        "use_memory. Over stdio (the default, the form an MCP client's config "
        "file starts) every call acts for --user. Over streamable HTTP (--http) every request needs a bearer "
        "token from --tokens, which names the user it acts for. --llm answers ask_documents.",
        epilog="examples:\n"
        "  lmh mcp --user alice --dir ./memory_data\n"
        "  lmh mcp --http --tokens tokens.toml --host 127.0.0.1 --port 8765",
    )
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind with --http (127.0.0.1: this machine)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port with --http ({DEFAULT_PORT})")
    serve.add_argument("--path", default="/mcp", help="endpoint path with --http (/mcp)")
    serve.add_argument(
        "--tokens",
        metavar="FILE",
        help="TOML or JSON file mapping bearer tokens to users, needed by --http (env LMH_MCP_TOKENS)",
    )
    serve.add_argument(
        "--document-root",
        action="append",
        default=[],
        metavar="FOLDER",
        help="a folder add_document / ingest_documents may read (repeatable; none: they read no file)",
    )
    serve.set_defaults(handler=run_mcp)


def run_mcp(args: argparse.Namespace, out: Output) -> int:
    tokens_file = args.tokens or os.environ.get("LMH_MCP_TOKENS")
    if args.http:
        if getattr(args, "user", None):
            raise UsageError("--user fixes the user of a stdio server; over --http each token names its user")
        if not tokens_file:
            raise UsageError("--http needs --tokens FILE (or LMH_MCP_TOKENS): every request must carry a token")
        check_bind_address(args.host, args.port)
        if not args.path.startswith("/"):
            raise UsageError(f"--path: must start with '/', got {args.path!r}")
    from llama_index_memory_hierarchy.mcp_server.access import (
        DocumentRoots,
        Principal,
        TokenTable,
    )

    tokens = TokenTable.from_file(tokens_file) if args.http else None  # warns of a file others may read
    roots = DocumentRoots(args.document_root)
    config = load_config(args)
    llm = resolve_cli_llm(args)
    # Whatever a library prints while loading must not reach a stdio client's protocol stream.
    with contextlib.redirect_stdout(sys.stderr):
        from llama_index_memory_hierarchy.mcp_server import MemoryService, build_server

        principal = None if args.http else Principal(user_id=config.user_id)
        service = MemoryService(config, llm=llm, principal=principal, document_roots=roots)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if args.http:  # listening means ready
                service.warm_up()
            else:  # a stdio client waits for initialize: answer it while the stores open and the model loads
                service.warm_up_in_background()
            server = build_server(service, tokens)
        if args.http:
            _serve_http(server, args, out, len(tokens or ()))
        else:
            import anyio

            from llama_index_memory_hierarchy.mcp_server.stdio import aserve_stdio

            out.note(f"lmh mcp: serving the memory of {config.user_id!r} over stdio")
            anyio.run(aserve_stdio, server)
    finally:
        service.close()
    return 0


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a service manager's stop; uvicorn re-raises it after its graceful shutdown) ends the
    command normally, so that the stores are closed instead of the process dying mid-way."""
    raise SystemExit(0)


def _serve_http(server: Any, args: argparse.Namespace, out: Output, n_tokens: int) -> None:
    import uvicorn

    if not _is_loopback(args.host):
        out.warn(
            f"serving on {args.host}, reachable from other machines: put a TLS terminator (a reverse proxy with "
            "HTTPS) in front, or bearer tokens travel in clear"
        )
    from llama_index_memory_hierarchy.mcp_server.http_auth import http_app

    app = http_app(server, host=args.host, path=args.path)
    level = "debug" if args.debug else "info" if args.verbose else "warning"
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=level, timeout_graceful_shutdown=5, server_header=False
    )
    out.note(f"lmh mcp: serving on http://{args.host}:{args.port}{args.path} ({n_tokens} token(s))")
    uvicorn.Server(config).run()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
