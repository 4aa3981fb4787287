"""``lmh graph``: the user's knowledge graph (facts of semantic memory), shown or exported."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import CLIError, Output, item_dict, open_memory, short


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    graph = commands.add_parser(
        "graph",
        parents=parents,
        formatter_class=formatter,
        help="show the knowledge graph, or export it (HTML, JSON, GraphML)",
        description="List the user's current facts (subject -predicate-> object), the entities related to "
        "--entity, and write the graph as a self-contained interactive HTML page, JSON or GraphML.",
    )
    graph.add_argument("--html", metavar="FILE", help="write an interactive HTML view")
    graph.add_argument("--graphml", metavar="FILE", help="write GraphML (Gephi, yEd, NetworkX)")
    graph.add_argument("--export-json", metavar="FILE", help="write the graph as JSON")
    graph.add_argument("--entity", metavar="NAME", help="show this entity's facts and related entities")
    graph.add_argument("--depth", type=int, default=2, choices=(1, 2, 3), help="hops from --entity (default: 2)")
    graph.add_argument("--history", action="store_true", help="include superseded facts")
    graph.add_argument("-n", "--limit", type=int, default=50, metavar="N", help="facts listed (default: 50)")
    graph.set_defaults(handler=run_graph)


def _write(semantic: Any, fmt: str, target: str, history: bool) -> str:
    path = Path(target).expanduser()
    if path.parent and not path.parent.exists():
        raise CLIError(f"cannot write {str(path)!r}: folder {str(path.parent)!r} does not exist")
    semantic.export_knowledge_graph(fmt, path=path, include_history=history)
    return str(path.resolve())


def run_graph(args: argparse.Namespace, out: Output) -> int:
    import json

    with open_memory(args, out) as memory:
        semantic = memory.semantic
        graph = json.loads(semantic.export_knowledge_graph("json", include_history=args.history))
        written = {}
        for fmt, target in (("html", args.html), ("graphml", args.graphml), ("json", args.export_json)):
            if target:
                written[fmt] = _write(semantic, fmt, target, args.history)
        entity = facts = related = None
        if args.entity:
            entity = semantic.get_entity(args.entity)
            if entity is None:
                raise CLIError(f"no entity {args.entity!r} in the knowledge graph of {memory.user_id!r}")
            facts = semantic.get_facts(args.entity, include_history=args.history)
            related = semantic.get_related_entities(args.entity, depth=args.depth)
    nodes = {node["id"]: node for node in graph.get("nodes", [])}
    edges = graph.get("edges", [])
    triples = [
        {
            "subject": nodes.get(e["source"], {}).get("label", e["source"]),
            "predicate": e.get("label"),
            "object": nodes.get(e["target"], {}).get("label", e["target"]),
            "status": (e.get("properties") or {}).get("status", "current"),
            "fact_id": (e.get("properties") or {}).get("fact_id"),
        }
        for e in edges
    ]
    if out.json_mode:
        data: dict[str, Any] = {"entities": len(nodes), "facts": triples, "written": written}
        if entity is not None:
            data["entity"] = entity.model_dump(mode="json")
            data["entity_facts"] = [item_dict(i) for i in facts or []]
            data["related"] = [r.model_dump(mode="json") for r in related or []]
        out.json(data)
        return 0
    if not triples:
        out.print("the knowledge graph is empty (facts come from semantic memories: lmh add --tier semantic ...)")
    else:
        rows = [
            [t["subject"], t["predicate"], t["object"]] + ([t["status"]] if args.history else [])
            for t in triples[: args.limit]
        ]
        columns = ["subject", "relation", "object"] + (["status"] if args.history else [])
        title = f"Knowledge graph: {len(nodes)} entities, {len(triples)} facts"
        if len(triples) > args.limit:
            title += f" (first {args.limit})"
        out.print(out.table(title, columns, rows))
    if entity is not None:
        out.print(f"[bold]{entity.name}[/bold] ({entity.type}), aliases: {', '.join(entity.aliases) or '-'}")
        for item in facts or []:
            out.print(f"  • {short(item.content, 200)}")
        if related:
            rows = [[str(r.hop), r.name, r.path] for r in related]
            out.print(out.table(f"Related to {entity.name} (up to {args.depth} hops)", ["hop", "entity", "path"], rows))
    for fmt, path in written.items():
        out.print(f"wrote {fmt}: {path}")
    return 0
