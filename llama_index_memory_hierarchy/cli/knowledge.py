"""``lmh ingest`` and ``lmh ask``: a user's documents as a knowledge base, answered with citations."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.cli._common import (
    CLIError,
    Output,
    UsageError,
    llm_label,
    load_config,
    read_text_argument,
    require_store,
    resolve_cli_llm,
    short,
)


def register(commands: Any, parents: list[argparse.ArgumentParser], formatter: Any) -> None:
    ingest = commands.add_parser(
        "ingest",
        parents=parents,
        formatter_class=formatter,
        help="add files or folders to a knowledge base",
        description="Chunk, embed and index documents (md, txt, html, csv, json; pdf and docx with the docs "
        "extra) into the user's knowledge base NAME. Unchanged files are skipped, changed ones replaced. "
        "Exit code 1 when a file could not be ingested (the others still are).",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    ingest.add_argument("--namespace", "-N", default="docs", metavar="NAME", help="knowledge base (default: docs)")
    ingest.add_argument("--no-recursive", action="store_true", help="do not descend into sub-folders")
    ingest.add_argument("--chunk-size", type=int, default=200, metavar="TOKENS", help="tokens per chunk (200)")
    ingest.add_argument("--chunk-overlap", type=int, default=30, metavar="TOKENS", help="overlap (30)")
    ingest.set_defaults(handler=run_ingest)

    ask = commands.add_parser(
        "ask",
        parents=parents,
        formatter_class=formatter,
        help="answer a question from a knowledge base, with citations",
        description="Retrieve from knowledge base NAME (hybrid search, multi-query expansion and HyDE, fused by "
        "reciprocal rank) and answer with numbered citations. Needs an LLM (--llm; the bundled local "
        "model by default).",
    )
    ask.add_argument("question", help="the question ('-' reads standard input)")
    ask.add_argument("--namespace", "-N", default="docs", metavar="NAME", help="knowledge base (default: docs)")
    ask.add_argument("--mqe", type=int, default=3, metavar="N", help="alternative queries to search (0-10; 3)")
    ask.add_argument("--no-hyde", action="store_true", help="do not search a hypothetical answer passage")
    ask.add_argument("-k", "--top-k", type=int, default=5, metavar="N", help="passages in the context (5)")
    ask.add_argument("--trace", action="store_true", help="show the expanded queries and the HyDE passage")
    ask.set_defaults(handler=run_ask)


@contextlib.contextmanager
def open_knowledge_base(
    args: argparse.Namespace, out: Output, namespace: str, *, must_exist: bool = True, llm: Any = None, **kwargs: Any
) -> Iterator[Any]:
    """The user's knowledge base ``namespace`` over ``--dir``/``--config``, closed afterwards."""
    from llama_index_memory_hierarchy.types import validate_identifier

    if not isinstance(namespace, str) or ":" in namespace or len(namespace) > 64:
        raise UsageError(f"--namespace: must be 1-64 characters of letters, digits and _.-, got {namespace!r}")
    validate_identifier(namespace, "namespace")
    config = load_config(args)
    if must_exist:
        require_store(config)
    from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase, kb_namespace

    kb_namespace(namespace)
    kb = KnowledgeBase.from_defaults(namespace=namespace, config=config, llm=llm, **kwargs)
    try:
        if not kb.context.embeddings.loaded:
            with out.status("Loading the embedding model"):
                kb.context.embeddings.probe()
        yield kb
    finally:
        kb.close()


def run_ingest(args: argparse.Namespace, out: Output) -> int:
    missing = [p for p in args.paths if not os.path.exists(Path(p).expanduser())]  # False for a name too long
    if missing:
        raise CLIError(f"no such file or folder: {missing[0]!r}")
    if args.chunk_size < 16 or not 0 <= args.chunk_overlap < args.chunk_size:
        raise CLIError("--chunk-size must be at least 16 and --chunk-overlap between 0 and the chunk size", code=2)
    paths = [str(Path(p).expanduser()) for p in args.paths]
    with open_knowledge_base(
        args,
        out,
        args.namespace,
        must_exist=False,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        show_progress=out.interactive and not out.json_mode,
    ) as kb:
        report = kb.add_documents(paths if len(paths) > 1 else paths[0], recursive=not args.no_recursive)
        stats = kb.stats()
    if out.json_mode:
        out.json({"report": report.model_dump(mode="json"), "knowledge_base": stats})
    else:
        rows = [
            ["added", str(len(report.added))],
            ["updated", str(len(report.updated))],
            ["unchanged", str(len(report.unchanged))],
            ["failed", str(len(report.failed))],
            [
                "chunks written",
                f"{report.chunks_written} ({report.chunks_embedded} embedded, {report.chunks_reused} reused)",
            ],
            ["seconds", f"{report.seconds:.2f}"],
        ]
        out.print(out.table(f"Ingested into {args.namespace!r}", ["", ""], rows))
        out.print(
            f"{args.namespace!r} now holds {stats['documents']} documents, {stats['chunks']} chunks "
            f"({stats['tokens']} tokens)"
        )
        for failure in report.failed:
            out.warn(f"not ingested: {failure.source}: {failure.error}")
    return 0 if report.ok else 1


def run_ask(args: argparse.Namespace, out: Output) -> int:
    question = read_text_argument(args.question, "question")
    if not 0 <= args.mqe <= 10:
        raise CLIError("--mqe must be between 0 and 10", code=2)
    if not 1 <= args.top_k <= 50:
        raise CLIError("--top-k must be between 1 and 50", code=2)
    llm = resolve_cli_llm(args, required_for="lmh ask")
    with open_knowledge_base(args, out, args.namespace, llm=llm) as kb:
        if kb.stats()["documents"] == 0:
            raise CLIError(f"knowledge base {args.namespace!r} of this user is empty: add files with 'lmh ingest'")
        engine = kb.as_query_engine(mqe_queries=args.mqe, hyde=not args.no_hyde, similarity_top_k=args.top_k)
        _load_llm(out, llm)
        with out.status(f"Answering with {llm_label(llm)}"):
            response = engine.query(question)
    return show_answer(out, question, response, llm, trace=args.trace, mqe_requested=args.mqe)


def _load_llm(out: Output, llm: Any) -> None:
    load = getattr(llm, "load", None)
    if callable(load):  # the local model: load it behind a spinner rather than inside the first answer
        with out.status(f"Loading {llm_label(llm)}"):
            load()


def answer_data(question: str, response: Any, llm: Any) -> dict[str, Any]:
    """A query engine response as JSON-ready data."""
    from llama_index_memory_hierarchy.knowledge.retriever import citation

    metadata = response.metadata or {}
    trace = metadata.get("trace") or {}
    return {
        "question": question,
        "answer": str(response).strip(),
        "llm": llm_label(llm),
        "insufficient_context": metadata.get("insufficient_context"),
        "citations": metadata.get("citations") or [],
        "sources": [
            {"chunk_id": n.node.node_id, "score": n.score, "citation": citation(n)} for n in response.source_nodes
        ],
        "mqe_queries": trace.get("mqe_queries") or [],
        "hyde_passage": trace.get("hyde_passage"),
        "expansion_errors": trace.get("expansion_errors") or [],
    }


def show_answer(
    out: Output, question: str, response: Any, llm: Any, *, trace: bool = True, mqe_requested: int = 0
) -> int:
    """Print an answer with its citations (and, with ``trace``, the expansions searched)."""
    data = answer_data(question, response, llm)
    if out.json_mode:
        out.json(data)
        return 0
    from rich.panel import Panel

    if trace:
        if data["mqe_queries"]:
            out.print("[bold]MQE[/bold] - the LLM's alternative queries, each searched (dense + keyword):")
            for query in data["mqe_queries"]:
                out.print(f"  • {short(query, 200)}")
        elif mqe_requested:
            out.print("[bold]MQE[/bold] - the LLM gave no usable alternative query; the original query was searched")
        if data["hyde_passage"]:
            out.print(
                "[bold]HyDE[/bold] - a hypothetical answer, searched by its embedding: "
                f"[italic]{short(data['hyde_passage'], 300)}[/italic]"
            )
        for error in data["expansion_errors"]:
            out.warn(f"expansion skipped: {error}")
    out.print(Panel(data["answer"] or "(empty answer)", title=f"Answer ({data['llm']})", title_align="left"))
    if data["citations"]:
        rows = [[f"[{c['number']}]", c["citation"], f"{c['score']:.4f}"] for c in data["citations"]]
        out.print(out.table("Sources", ["#", "document › section", "score"], rows))
    return 0
