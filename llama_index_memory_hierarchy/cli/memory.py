"""``lmh add``, ``lmh search``, ``lmh timeline``, ``lmh stats`` and ``lmh forget``: one user's memories."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    UsageError,
    describe_location,
    item_dict,
    load_embeddings,
    open_memory,
    parse_json_object,
    parse_when,
    read_text_argument,
    short,
)

#: Tiers a command line can write text to (working memory lives only as long as its process).
TEXT_TIERS = ("auto", "episodic", "semantic")
SEARCH_TIERS = ("all", "episodic", "semantic", "perceptual", "procedural")
FORGET_TIERS = ("episodic", "semantic", "perceptual", "procedural")  # working memory does not outlive a command
STRATEGIES = ("importance_based", "time_based", "capacity_based", "decay")


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    add = commands.add_parser(
        "add",
        parents=parents,
        formatter_class=formatter,
        help="store a memory (text, or a file with --file)",
        description="Store one memory for the user. Text goes to episodic or semantic memory "
        "(--tier auto picks one from the text); --file stores an image, audio, video or text file "
        "in perceptual memory.",
    )
    add.add_argument("text", nargs="?", help="what to remember ('-' reads standard input)")
    add.add_argument("--tier", choices=TEXT_TIERS, default="auto", help="where to store text (default: auto)")
    add.add_argument("--file", metavar="PATH", help="store this file in perceptual memory (text becomes its caption)")
    add.add_argument("--importance", type=_unit_float, metavar="0..1", help="how much it matters (default: estimated)")
    add.add_argument("--session", metavar="ID", default="cli", help="session to file it under (default: cli)")
    add.add_argument("--when", metavar="TIME", help="when it happened (ISO time, 'yesterday', '3d'; default: now)")
    add.add_argument("--metadata", metavar="JSON", help="a JSON object stored with the memory")
    add.add_argument("--pin", action="store_true", help="never forget it (forgetting skips pinned memories)")
    add.set_defaults(handler=run_add)

    search = commands.add_parser(
        "search",
        parents=parents,
        formatter_class=formatter,
        help="find memories (or documents with --namespace) relevant to a query",
        description="One search over the user's memories of every tier (dense, keyword, entity and time "
        "priors, importance, recency, all on one score), or over a knowledge base's documents with --namespace.",
    )
    search.add_argument("query", help="what to look for ('-' reads standard input)")
    search.add_argument("--tier", choices=SEARCH_TIERS, default="all", help="which tier (default: all)")
    search.add_argument("-n", "--limit", type=_positive_int, default=5, metavar="N", help="results (default: 5)")
    search.add_argument("--namespace", metavar="NAME", help="search this knowledge base's documents instead")
    search.add_argument("--session", metavar="ID", help="only this session")
    search.add_argument("--since", metavar="TIME", help="only events at or after (ISO time, 'today', '7d')")
    search.add_argument("--until", metavar="TIME", help="only events at or before")
    search.add_argument("--min-importance", type=_unit_float, metavar="0..1", help="only memories this important")
    search.add_argument(
        "--min-score",
        type=float,
        metavar="S",
        help="only results scoring at least S, in place of the relevance floor (results with no evidence of "
        "relevance are left out by default)",
    )
    search.add_argument("--explain", action="store_true", help="show each result's score, signal by signal")
    search.set_defaults(handler=run_search)

    timeline = commands.add_parser(
        "timeline",
        parents=parents,
        formatter_class=formatter,
        help="list episodic events in time order",
        description="The user's episodic events between --since and --until, oldest first.",
    )
    timeline.add_argument("--since", metavar="TIME", help="from (ISO date/time, 'today', '7d')")
    timeline.add_argument("--until", metavar="TIME", help="to (inclusive)")
    timeline.add_argument("--session", metavar="ID", help="only this session")
    timeline.add_argument("-n", "--limit", type=_positive_int, default=50, metavar="N", help="most events (50)")
    timeline.add_argument(
        "--last",
        nargs="?",
        type=_positive_int,
        const=0,
        metavar="N",
        help="the most recent N events (default: --limit) instead of the first ones",
    )
    timeline.set_defaults(handler=run_timeline)

    stats = commands.add_parser(
        "stats",
        parents=parents,
        formatter_class=formatter,
        help="counts per tier (and of a knowledge base with --namespace)",
        description="How much the user's memory holds, per tier, and where it is stored.",
    )
    stats.add_argument("--namespace", metavar="NAME", action="append", help="also a knowledge base (repeatable)")
    stats.set_defaults(handler=run_stats)

    forget = commands.add_parser(
        "forget",
        parents=parents,
        formatter_class=formatter,
        help="delete memories: by id, by a forgetting strategy, or all of a user's data",
        description="Delete memories of the user. Give memory ids; or --strategy to forget by importance, "
        "age, capacity or decay (pinned memories are never forgotten; --dry-run shows what would go); "
        "or --everything --yes to erase the user from every store.",
    )
    forget.add_argument("ids", nargs="*", metavar="ID", help="memory ids to delete")
    forget.add_argument("--strategy", choices=STRATEGIES, help="forget by a strategy instead of ids")
    forget.add_argument(
        "--tier", choices=FORGET_TIERS, action="append", help="tiers the strategy applies to (default: all)"
    )
    forget.add_argument("--threshold", type=float, help="importance_based/decay: forget below this score")
    forget.add_argument("--older-than", metavar="AGE", help="time_based: forget events older than this (e.g. 30d)")
    forget.add_argument("--keep", type=_positive_int, metavar="N", help="capacity_based: keep the N best per tier")
    forget.add_argument("--dry-run", action="store_true", help="report what would be forgotten, delete nothing")
    forget.add_argument("--everything", action="store_true", help="erase all of the user's data (needs --yes)")
    forget.add_argument("--yes", action="store_true", help="confirm --everything")
    forget.set_defaults(handler=run_forget)


# --------------------------------------------------------------------------------------------
# argument types
# --------------------------------------------------------------------------------------------


def _unit_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return number


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


# --------------------------------------------------------------------------------------------
# add
# --------------------------------------------------------------------------------------------


def run_add(args: argparse.Namespace, out: Output) -> int:
    if args.text is None and args.file is None:
        raise UsageError("add: give the text to remember (or '-' for standard input), or --file PATH")
    text = read_text_argument(args.text, "text") if args.text is not None else None
    metadata = parse_json_object(args.metadata, "--metadata")
    when = parse_when(args.when, "--when") if args.when else None
    if args.file is not None and not Path(args.file).expanduser().is_file():
        raise CLIError(f"--file: no such file: {args.file!r}")
    with open_memory(args, out, session=args.session, must_exist=False) as memory:
        manager = memory.manager
        load_embeddings(memory, out)
        options: dict[str, Any] = {"metadata": metadata, "timestamp": when, "pinned": args.pin}
        if args.file is not None:
            tier_name, reason = "perceptual", "--file"
            with out.status("Storing the file"):
                memory_id = manager.add_memory(
                    Path(args.file).expanduser(), "perceptual", args.importance, caption=text, **options
                )
        else:
            assert text is not None
            if args.tier == "auto":
                decision = manager.classify(text)
                tier_name, reason = decision.memory_type.value, f"routed by {decision.method}"
                if tier_name not in ("episodic", "semantic"):  # working memory ends with this command
                    reason += f" to {tier_name}; stored in episodic, which outlives the command"
                    tier_name = "episodic"
            else:
                tier_name, reason = args.tier, "--tier"
            memory_id = manager.add_memory(text, tier_name, args.importance, **options)
        item = memory.tiers([tier_name])[0].get(memory_id)
        # search may list a fact derived from this memory rather than the memory itself: name both
        derived = [fact for fact in map(memory.semantic.get, memory.semantic.derived_from(memory_id)) if fact]
    if out.json_mode:
        out.json(
            {
                "id": memory_id,
                "tier": tier_name,
                "reason": reason,
                "memory": item_dict(item) if item else None,
                "derived": [item_dict(fact) for fact in derived],
            }
        )
        return 0
    importance = f", importance {item.importance:.2f}" if item is not None else ""
    out.print(f"[green]stored[/green] in {tier_name} memory ({reason}{importance}): {memory_id}")
    for fact in derived:
        out.print(f"  derived fact in semantic memory: {short(fact.content, 120)}: {fact.id}")
    return 0


# --------------------------------------------------------------------------------------------
# search
# --------------------------------------------------------------------------------------------


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    if getattr(args, "session", None):
        filters["session_id"] = args.session
    if getattr(args, "since", None):
        filters["start_time"] = parse_when(args.since, "--since")
    if getattr(args, "until", None):
        filters["end_time"] = parse_when(args.until, "--until", end_of_day=True)
    if getattr(args, "min_importance", None) is not None:
        filters["min_importance"] = args.min_importance
    return filters


def run_search(args: argparse.Namespace, out: Output) -> int:
    query = read_text_argument(args.query, "query")
    if args.namespace:
        return _search_documents(args, out, query)
    filters = _filters(args)
    with open_memory(args, out) as memory:
        load_embeddings(memory, out)
        tiers = [t for t in SEARCH_TIERS if t != "all"] if args.tier == "all" else [args.tier]
        if getattr(args, "min_score", None) is not None:
            filters["min_score"] = args.min_score
        items = memory.search(query, args.limit, memory_types=tiers, **filters)
    if out.json_mode:
        out.json({"query": query, "tier": args.tier, "results": [item_dict(i) for i in items]})
        return 0
    if not items:
        out.print(f"nothing relevant for {query!r}")
        return 0
    from rich.text import Text

    # Tier, time and importance share one column so the whole id (36 characters, for `lmh forget`) fits 80 columns.
    rows = [
        [
            str(rank),
            f"{item.score:.4f}" if item.score is not None else "",
            f"{item.memory_type.value}\n{item.timestamp:%Y-%m-%d %H:%M}\nimportance {item.importance:.2f}",
            Text(short(item.content, 300)).append(f"\n{item.id}", style="dim"),
        ]
        for rank, item in enumerate(items, start=1)
    ]
    columns = ["#", "score", "tier, when (UTC)", ("memory / id", {"ratio": 1, "min_width": 36})]
    out.print(out.table(f"Memories for {query!r}", columns, rows))
    if getattr(args, "explain", False):
        from llama_index_memory_hierarchy.retrieval.search import explain

        for rank, item in enumerate(items, start=1):
            out.print(f"#{rank} {item.id}: {explain(item)}")
    return 0


def _search_documents(args: argparse.Namespace, out: Output, query: str) -> int:
    from llama_index_memory_hierarchy.cli.knowledge import open_knowledge_base
    from llama_index_memory_hierarchy.knowledge.retriever import citation, node_text

    with open_knowledge_base(args, out, args.namespace) as kb:
        nodes = kb.as_retriever(similarity_top_k=args.limit).retrieve(query)
    if out.json_mode:
        results = [
            {
                "chunk_id": n.node.node_id,
                "score": n.score,
                "citation": citation(n),
                "text": node_text(n),
                "doc_id": n.node.metadata.get("doc_id"),
            }
            for n in nodes
        ]
        out.json({"query": query, "namespace": args.namespace, "results": results})
        return 0
    if not nodes:
        out.print(f"no passages in {args.namespace!r} match {query!r}")
        return 0
    rows = [
        [str(rank), f"{n.score or 0.0:.4f}", citation(n), short(node_text(n), 240)]
        for rank, n in enumerate(nodes, start=1)
    ]
    out.print(out.table(f"Passages in {args.namespace!r} for {query!r}", ["#", "score", "source", "passage"], rows))
    return 0


# --------------------------------------------------------------------------------------------
# timeline
# --------------------------------------------------------------------------------------------


def run_timeline(args: argparse.Namespace, out: Output) -> int:
    start = parse_when(args.since, "--since") if args.since else None
    end = parse_when(args.until, "--until", end_of_day=True) if args.until else None
    if start and end and start > end:
        raise UsageError("--since is after --until")
    with open_memory(args, out) as memory:
        if args.last is not None:
            limit = args.last or args.limit  # a bare --last takes --limit
            from llama_index_memory_hierarchy.types import MemoryFilter

            flt = {"start_time": start, "end_time": end, "session_id": args.session}
            flt = {k: v for k, v in flt.items() if v is not None}
            MemoryFilter.from_kwargs(**flt)  # validate before querying
            items = memory.context.runtime.run(memory.episodic.aquery(order_by="-timestamp", limit=limit, **flt))
            items.reverse()
        else:
            items = memory.episodic.get_timeline(start=start, end=end, session_id=args.session, limit=args.limit)
    if out.json_mode:
        out.json({"events": [item_dict(i) for i in items]})
        return 0
    if not items:
        out.print("no events in this range")
        return 0
    rows = [
        [
            f"{item.timestamp:%Y-%m-%d %H:%M:%S}",
            item.session_id or "",
            str(item.metadata.get("role") or ""),
            short(item.content, 220),
        ]
        for item in items
    ]
    out.print(out.table(f"Timeline of {memory.user_id}", ["when (UTC)", "session", "role", "event"], rows))
    return 0


# --------------------------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------------------------


#: The stored tiers ``lmh stats`` counts (working memory lives in a session only).
STATS_TIERS = ("episodic", "semantic", "perceptual", "procedural")


def run_stats(args: argparse.Namespace, out: Output) -> int:
    result: dict[str, Any] = {}
    with open_memory(args, out) as memory:
        result["user_id"] = memory.user_id
        result["location"] = describe_location(memory.config)
        result["vector_backend"] = memory.config.resolved_vector_backend
        for tier in memory.tiers(list(STATS_TIERS)):
            result[tier.memory_type.value] = tier.get_stats()
        result["users_in_store"] = len(memory.context.runtime.run(memory.context.records.users()))
        knowledge = {}
        for name in args.namespace or []:
            from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase

            with KnowledgeBase.from_defaults(namespace=name, user_id=memory.user_id, context=memory.context) as kb:
                knowledge[name] = kb.stats()
        if knowledge:
            result["knowledge_bases"] = knowledge
    if out.json_mode:
        out.json(result)
        return 0
    rows = []
    for name in STATS_TIERS:
        stats = result[name]
        rows.append(
            [
                name,
                str(stats.get("count", 0)),
                _day(stats.get("first_timestamp")),
                _day(stats.get("last_timestamp")),
                _details(name, stats),
            ]
        )
    title = f"Memory of {result['user_id']} in {result['location']} (vectors: {result['vector_backend']})"
    out.print(out.table(title, ["tier", "items", "first", "last", "details"], rows))
    for name, stats in result.get("knowledge_bases", {}).items():
        out.print(
            f"knowledge base [bold]{name}[/bold]: {stats['documents']} documents, {stats['chunks']} chunks, "
            f"{stats['tokens']} tokens"
        )
    return 0


def _details(tier: str, stats: dict[str, Any]) -> str:
    """The few statistics of a tier worth a glance (all of them are in --json)."""
    if tier == "semantic":
        keys = ("facts", "entities", "statements")
        return ", ".join(f"{stats[k]} {k}" for k in keys if stats.get(k))
    if tier == "procedural":
        parts = [f"{stats.get('instructions', 0)} instructions", f"{stats.get('procedures', 0)} procedures"]
        if stats.get("ended_instructions"):
            parts.insert(1, f"{stats['ended_instructions']} replaced")
        return ", ".join(parts)
    if tier == "perceptual":
        modalities = stats.get("by_modality") or {}
        return ", ".join(f"{n} {m}" for m, n in modalities.items() if n)
    sessions = stats.get("sessions")
    return f"{sessions} sessions" if sessions else ""


def _day(value: Any) -> str:
    return str(value)[:16].replace("T", " ") if value else ""


# --------------------------------------------------------------------------------------------
# forget
# --------------------------------------------------------------------------------------------


def run_forget(args: argparse.Namespace, out: Output) -> int:
    modes = sum([bool(args.ids), args.strategy is not None, args.everything])
    if modes != 1:
        raise UsageError("forget: give memory ids, or --strategy NAME, or --everything (exactly one)")
    if args.everything:
        if not args.yes:
            raise UsageError("forget --everything erases all of the user's data; add --yes to confirm")
        return _forget_everything(args, out)
    if args.strategy is None:
        return _forget_ids(args, out)
    return _forget_strategy(args, out)


def _forget_ids(args: argparse.Namespace, out: Output) -> int:
    from llama_index_memory_hierarchy.types import validate_memory_id

    ids = [validate_memory_id(i, "ID") for i in args.ids]
    with open_memory(args, out) as memory:
        report = memory.manager.forget_memories(ids)  # the deletion path: every tier and what derives from it
        deleted = [{"id": memory_id, "tier": tier} for memory_id, tier in report.deleted.items()]
        missing = list(report.not_found)
    if out.json_mode:
        out.json({"deleted": deleted, "not_found": missing})
    else:
        for entry in deleted:
            out.print(f"[green]forgot[/green] {entry['tier']} memory {entry['id']}")
    if missing:
        raise CLIError(f"no memory {', '.join(missing)} for user {memory.user_id!r}; nothing deleted for it")
    return 0


def _forget_strategy(args: argparse.Namespace, out: Output) -> int:
    options: dict[str, Any] = {}
    if args.threshold is not None:
        options["threshold"] = args.threshold
    if args.older_than:
        options["before"] = parse_when(args.older_than, "--older-than")
    if args.keep is not None:
        options["keep"] = args.keep
    with open_memory(args, out) as memory:
        report = memory.manager.forget(args.strategy, args.tier or list(FORGET_TIERS), args.dry_run, **options)
    if out.json_mode:
        data = report.model_dump(mode="json")
        data["total"] = report.total
        out.json(data)
        return 0
    verb = "would forget" if args.dry_run else "forgot"
    detail = ", ".join(f"{name} {tier.count}" for name, tier in report.tiers.items())
    out.print(f"{verb} {report.total} memories by {args.strategy} ({detail})")
    rows = [
        [
            i.memory_type.value,
            f"{i.effective_importance:.2f}",
            f"{i.timestamp:%Y-%m-%d}",
            i.reason,
            short(i.content, 80),
            i.id,
        ]
        for tier in report.tiers.values()
        for i in tier.items[:50]
    ]
    if rows:
        out.print(out.table(None, ["tier", "eff. imp.", "when", "why", "memory", "id"], rows))
    return 0


def _forget_everything(args: argparse.Namespace, out: Output) -> int:
    with open_memory(args, out) as memory:
        report = memory.manager.forget_user()
    if out.json_mode:
        out.json(report.model_dump(mode="json"))
    else:
        out.print(
            f"[green]erased[/green] user {report.user_id!r}: {report.total_rows} rows, "
            f"{sum(report.vectors.values())} vectors, {report.files} files"
        )
    return 0
