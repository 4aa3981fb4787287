"""The MCP tools of the user's documents: ``add_document``, ``ingest_documents`` (only inside the configured
document roots), ``search_documents`` and ``ask_documents`` (with an LLM), registered by
:func:`register_document_tools` from ``build_server``. The library stack loads on the first call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.mcp_server.access import DocumentRoots
from llama_index_memory_hierarchy.mcp_server.arguments import READ, WRITE, NamespaceArg, UserArg
from llama_index_memory_hierarchy.mcp_server.results import (
    Answer,
    Citation,
    DocumentsAdded,
    Passage,
    Passages,
    tool_result,
)
from llama_index_memory_hierarchy.types import validate_content

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.tools import RagToolSpec

#: Most paths one ingest_documents call takes.
_MAX_PATHS = 100


async def _aingest(spec: RagToolSpec, roots: DocumentRoots, paths: list[str], *, field: str) -> CallToolResult:
    """Ingest ``paths`` after checking that each, and every file a folder yields, is inside the document roots."""
    from llama_index_memory_hierarchy.knowledge.loaders import discover

    real = [roots.resolve(path, field) for path in paths]
    files, missing = await asyncio.to_thread(discover, real)
    for file in files:  # a link inside a root may point out of it
        roots.check(file, field)
    if missing:
        raise MemoryValidationError(field, f"{missing[0].reason}: {str(missing[0].path)!r}")
    if not files:
        raise MemoryValidationError(field, "no files to ingest there")
    report = await spec.knowledge_base.aadd_documents(files)
    result = DocumentsAdded(
        namespace=report.namespace,
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        failed={e.source: e.error for e in report.failed},
        chunks_written=report.chunks_written,
    )
    text = (
        f"Knowledge base {report.namespace!r}: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.failed)} failed ({report.chunks_written} chunks written)."
    )
    return tool_result(text + "".join(f"\nfailed: {e.source}: {e.error}" for e in report.failed), result)


def register_document_tools(
    server: MCPServer,
    documents_for: Callable[[Context, str | None, str], RagToolSpec],
    *,
    roots: DocumentRoots,
    has_llm: Callable[[], bool],
    structured: Callable[[Callable[[], Awaitable[CallToolResult]]], Awaitable[CallToolResult]],
) -> None:
    """Add the four tools to ``server``; ``documents_for`` gives the document tools of the user a request acts
    for in a namespace, ``structured`` runs a tool body as the other tools do."""

    @server.tool(annotations=WRITE)
    async def add_document(
        path: Annotated[str, Field(description="A file inside the server's document folders.")],
        ctx: Context,
        namespace: NamespaceArg = "docs",
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, DocumentsAdded]:
        """Add one file to the user's knowledge base (re-adding a changed file replaces it), for search_documents.

        Only files inside the folders the server was started with (--document-root) can be read.

        Example: add_document(path="manuals/router.md", namespace="manuals")
        """
        return await structured(lambda: _aingest(documents_for(ctx, user_id, namespace), roots, [path], field="path"))

    @server.tool(annotations=WRITE)
    async def ingest_documents(
        paths: Annotated[
            list[str], Field(min_length=1, max_length=_MAX_PATHS, description="Files or folders to ingest.")
        ],
        ctx: Context,
        namespace: NamespaceArg = "docs",
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, DocumentsAdded]:
        """Ingest files and whole folders into the user's knowledge base: new files added, changed ones
        replaced, unchanged ones skipped.

        Only paths inside the server's document folders (--document-root) are read, symlinks included.

        Example: ingest_documents(paths=["manuals"], namespace="manuals")
        """
        return await structured(lambda: _aingest(documents_for(ctx, user_id, namespace), roots, paths, field="paths"))

    @server.tool(annotations=READ)
    async def search_documents(
        query: Annotated[str, Field(description="What to look for in the user's documents.")],
        ctx: Context,
        namespace: NamespaceArg = "docs",
        limit: Annotated[int, Field(ge=1, le=20, description="How many passages.")] = 5,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Passages]:
        """Find passages in the user's own documents (their knowledge base); each with file, section and chunk id.

        Use it when you need exact wording or several sources. For a direct answer with citations use
        ask_documents.

        Example: search_documents(query="refund policy for damaged items", namespace="manuals", limit=3)
        """

        async def run() -> CallToolResult:  # the namespace is checked in here: a bad one is a tool error naming it
            from llama_index_memory_hierarchy.knowledge.retriever import citation, node_text

            spec = documents_for(ctx, user_id, namespace)
            checked, nodes = await spec.asearch_passages(query, limit)

            def meta(node: Any, key: str) -> str | None:
                value = node.node.metadata.get(key)
                return str(value) if value else None

            passages = [
                Passage(
                    chunk_id=n.node.node_id,
                    source=citation(n),
                    file=meta(n, "file_name"),
                    section=meta(n, "heading_path"),
                    score=float(n.score or 0.0),
                    text=node_text(n),
                )
                for n in nodes
            ]
            result = Passages(query=checked, namespace=namespace, passages=passages)
            return tool_result(spec.format_passages(checked, nodes), result)

        return await structured(run)

    @server.tool(annotations=READ)
    async def ask_documents(
        question: Annotated[str, Field(description="A complete question about the user's documents.")],
        ctx: Context,
        namespace: NamespaceArg = "docs",
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, Answer]:
        """Answer a question from the user's own documents, with numbered citations; says so when they lack it.

        Use it for questions about the user's files, manuals, notes or policies. Needs the server to run
        with an LLM (``lmh mcp --llm ...``).

        Example: ask_documents(question="Which port does the service listen on?", namespace="manuals")
        """

        async def run() -> CallToolResult:
            spec = documents_for(ctx, user_id, namespace)
            checked = validate_content(question, "question")
            if not has_llm():
                raise MemoryValidationError(
                    "ask_documents", "this server runs without an LLM (start it with --llm); use search_documents"
                )
            response = await spec.aanswer(checked)
            meta = response.metadata or {}
            result = Answer(
                question=checked,
                namespace=namespace,
                answer=str(response).strip(),
                insufficient=bool(meta.get("insufficient_context")),
                citations=[Citation(number=c["number"], source=c["citation"]) for c in meta.get("citations") or []],
                chunk_ids=[n.node.node_id for n in response.source_nodes],
            )
            return tool_result(spec.format_answer(response), result)

        return await structured(run)
