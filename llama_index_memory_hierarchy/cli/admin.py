"""``lmh reindex`` and ``lmh migrate``: operate on a whole deployment (every user)."""

from __future__ import annotations

import argparse
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    describe_location,
    load_config,
    require_store,
)


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    reindex = commands.add_parser(
        "reindex",
        parents=parents,
        formatter_class=formatter,
        help="rebuild the keyword, vector and graph indexes from the record store",
        description="Rebuild every derived index of the deployment (all users) from the record store: the "
        "keyword index, each vector space (a corrupt embedded vector folder is replaced) and each user's "
        "knowledge graph. No process may have the folder open. Use it after changing the embedding model "
        "is refused (EmbeddingDimensionError) or when an index is damaged.",
    )
    reindex.add_argument("--no-graph", action="store_true", help="leave the knowledge graphs as they are")
    reindex.set_defaults(handler=run_reindex)

    migrate = commands.add_parser(
        "migrate",
        parents=parents,
        formatter_class=formatter,
        help="copy an embedded folder to a server deployment, then verify the counts",
        description="Copy every user's memory (records with their embeddings, the knowledge graph, perception "
        "files) from the embedded folder of --dir (or --from) to the deployment CONFIG describes (for example "
        "PostgreSQL + Qdrant + Neo4j), then verify that the target holds everything. Re-running is safe. "
        "Exit code 1 when a check fails.",
    )
    migrate.add_argument("--from", dest="dir", metavar="DIR", default=argparse.SUPPRESS, help="same as --dir")
    migrate.add_argument(
        "--to", required=True, metavar="CONFIG", help="the target: a .toml/.json/.env file of settings, or 'env'"
    )
    migrate.add_argument("--no-files", action="store_true", help="leave perception files where they are")
    migrate.add_argument("--no-graph", action="store_true", help="do not copy the knowledge graph")
    migrate.set_defaults(handler=run_migrate)


def run_reindex(args: argparse.Namespace, out: Output) -> int:
    from llama_index_memory_hierarchy.ops.rebuild import rebuild_indexes

    config = load_config(args)
    require_store(config)
    with out.status(f"Rebuilding the indexes of {describe_location(config)}"):
        report = rebuild_indexes(config, graph=not args.no_graph)
    if out.json_mode:
        from dataclasses import asdict

        out.json(asdict(report))
        return 0
    out.print(f"[green]reindexed[/green] {describe_location(config)}: {report.summary()}")
    return 0


def run_migrate(args: argparse.Namespace, out: Output) -> int:
    from llama_index_memory_hierarchy.ops.migrate import load_target_config, migrate

    source = load_config(args)
    require_store(source)
    target = load_target_config(args.to)
    with out.status(f"Migrating {describe_location(source)} to {describe_location(target)}"):
        report = migrate(source, target, files=not args.no_files, graph=not args.no_graph, progress=out.note)
    if out.json_mode:
        out.json(report.to_dict())
    else:
        out.print(report.summary(), markup=False)
    if not report.ok:
        raise CLIError("verification failed: " + "; ".join(report.problems))
    return 0
