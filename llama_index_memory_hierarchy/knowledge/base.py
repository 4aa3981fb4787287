"""``KnowledgeBase``: a user's documents as chunks in the shared stores, for retrieval and answers.

Chunks are records of the shared record store under namespace ``kb:<name>`` (durable,
keyword indexed, erased with their user) with vectors in the shared vector index, so a
knowledge base needs no store of its own and never mixes with memory tiers (which live
in namespace ``memory``) or with other knowledge bases. Ingestion is in
:mod:`~llama_index_memory_hierarchy.knowledge.ingest`, the manifest (read from the chunks'
own metadata) in :mod:`~llama_index_memory_hierarchy.knowledge.manifest`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.knowledge.chunking import MarkdownHeadingSplitter
from llama_index_memory_hierarchy.knowledge.ingest import IngestError, Ingestor, IngestReport, Source
from llama_index_memory_hierarchy.knowledge.loaders import default_file_extractor, discover
from llama_index_memory_hierarchy.knowledge.manifest import RESERVED_KEYS, DocumentInfo, amanifest
from llama_index_memory_hierarchy.knowledge.scope import KnowledgeScope, kb_namespace
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.stores.registry import Hold
from llama_index_memory_hierarchy.types import MemoryFilter, validate_content, validate_identifier, validate_metadata

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM
    from llama_index.core.readers.base import BaseReader

    from llama_index_memory_hierarchy.knowledge.query_engine import KnowledgeQueryEngine
    from llama_index_memory_hierarchy.knowledge.retriever import KnowledgeRetriever
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)


class KnowledgeBase(RuntimeBound):
    """A named collection of a user's documents, chunked, embedded and indexed in the shared stores.

    Use :meth:`from_defaults`. Every method has a sync form and an async twin (``a`` prefix);
    the async code is the implementation and runs on the package runtime loop.
    """

    def __init__(
        self,
        *,
        context: StoreContext,
        namespace: str = "docs",
        user_id: str | None = None,
        splitter: MarkdownHeadingSplitter | None = None,
        file_extractor: dict[str, BaseReader] | None = None,
        llm: LLM | None = None,
        show_progress: bool | None = None,
        owns_context: bool = False,
    ) -> None:
        self.name = namespace
        self.namespace = kb_namespace(namespace)
        self.context = context
        self.user_id = validate_identifier(user_id or context.config.user_id, "user_id")
        self.scope = KnowledgeScope(context=context, user_id=self.user_id, name=namespace, owner=self)
        self.splitter = splitter or MarkdownHeadingSplitter()
        self.file_extractor = file_extractor if file_extractor is not None else default_file_extractor()
        self.llm = llm
        self._ingestor = Ingestor(self.scope, self.splitter, self.file_extractor, show_progress)
        self._hold = Hold(context, self) if owns_context else None
        self._closed = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_defaults(
        cls,
        namespace: str = "docs",
        persist_dir: str | Path | None = None,
        user_id: str | None = None,
        embed_model: Any = None,
        config: MemoryConfig | None = None,
        *,
        context: StoreContext | None = None,
        chunk_size: int = 200,
        chunk_overlap: int = 30,
        file_extractor: dict[str, BaseReader] | None = None,
        llm: LLM | None = None,
        show_progress: bool | None = None,
    ) -> KnowledgeBase:
        """Open (or create) knowledge base ``namespace`` of ``user_id`` in ``persist_dir``.

        The stores are shared with every ``HierarchicalMemory`` and knowledge base on the same
        folder in this process (pass the same ``embed_model``, or none). ``context`` borrows an
        already open ``StoreContext`` (e.g. ``memory.context``) instead of acquiring one.
        ``llm`` is used by MQE, HyDE and answers (default: ``Settings.llm``, else the local LLM).
        """
        from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
        from llama_index_memory_hierarchy.stores.context import StoreContext

        kb_namespace(namespace)  # fail on a bad name before opening anything
        splitter = MarkdownHeadingSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        owns = context is None
        if context is None:
            overrides = {"persist_dir": persist_dir, "user_id": user_id}
            if config is None:
                config = MemoryConfig.from_env(**overrides)
            else:
                changes = {k: v for k, v in overrides.items() if v is not None}
                config = MemoryConfig.create(**{**config.model_dump(), **changes}) if changes else config
            context = StoreContext.acquire(config, embed_model=embed_model, on_open=aresume_erasures)
        return cls(
            context=context,
            namespace=namespace,
            user_id=user_id or (config.user_id if config is not None else None),
            splitter=splitter,
            file_extractor=file_extractor,
            llm=llm,
            show_progress=show_progress,
            owns_context=owns,
        )

    def __repr__(self) -> str:
        return f"KnowledgeBase(namespace={self.name!r}, user_id={self.user_id!r}, stores={self.context!r})"

    @property
    def runtime(self) -> Runtime:
        """The package runtime that runs the store coroutines."""
        return self.context.runtime

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryHierarchyError(f"knowledge base {self.name!r} is closed")

    def close(self) -> None:
        """Release the shared stores (the last holder closes them)."""
        if not self._closed:
            self._closed = True
            if self._hold is not None:
                self._hold.release()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ ingestion
    def add_documents(
        self, paths_or_dir: str | Path | Sequence[str | Path], *, recursive: bool = True, metadata: dict | None = None
    ) -> IngestReport:
        """Ingest files and folders (see :meth:`aadd_documents`)."""
        return self.blocking(self.aadd_documents(paths_or_dir, recursive=recursive, metadata=metadata))

    async def aadd_documents(
        self, paths_or_dir: str | Path | Sequence[str | Path], *, recursive: bool = True, metadata: dict | None = None
    ) -> IngestReport:
        """Ingest files and folders: new files are added, changed ones replaced, unchanged ones skipped.

        A file that is missing, of an unsupported type or unreadable is listed in
        ``report.failed`` with the reason; the others are still ingested. ``metadata`` is
        added to every chunk of these files.
        """
        self._check_open()
        if not isinstance(paths_or_dir, (str, Path)) and not isinstance(paths_or_dir, Sequence):
            raise MemoryValidationError(
                "paths_or_dir", f"expected a path or a list of paths, got {type(paths_or_dir).__name__}"
            )
        extra = self._user_metadata(metadata)
        files, missing = await asyncio.to_thread(discover, paths_or_dir, recursive=recursive)
        report = IngestReport(namespace=self.name)
        report.failed.extend(IngestError(source=e.path, error=e.reason) for e in missing)
        sources = [Source(doc_id=str(path), path=path, metadata=extra) for path in files]
        return await self._ingestor.aingest(sources, report)

    def add_text(self, text: str, doc_id: str, metadata: dict[str, Any] | None = None) -> IngestReport:
        """Ingest one text (Markdown allowed) as document ``doc_id``; re-adding replaces it."""
        return self.blocking(self.aadd_text(text, doc_id, metadata))

    async def aadd_text(self, text: str, doc_id: str, metadata: dict[str, Any] | None = None) -> IngestReport:
        """Async twin of :meth:`add_text`."""
        self._check_open()
        text = validate_content(text, "text")
        if not isinstance(doc_id, str) or not doc_id.strip() or len(doc_id) > 1024:
            raise MemoryValidationError(
                "doc_id", f"must be a non-empty string of at most 1024 characters, got {doc_id!r}"
            )
        source = Source(doc_id=doc_id, text=text, metadata=self._user_metadata(metadata))
        return await self._ingestor.aingest([source], IngestReport(namespace=self.name))

    @staticmethod
    def _user_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
        metadata = validate_metadata(metadata)
        clash = sorted(set(metadata) & set(RESERVED_KEYS))
        if clash:
            raise MemoryValidationError("metadata", f"keys reserved by the knowledge base: {', '.join(clash)}")
        return metadata

    # ------------------------------------------------------------------ documents
    def list_documents(self) -> list[DocumentInfo]:
        """The documents of this knowledge base (this user), by ``doc_id``."""
        return self.blocking(self.alist_documents())

    async def alist_documents(self) -> list[DocumentInfo]:
        """Async twin of :meth:`list_documents`."""
        self._check_open()
        return [state.info(doc_id) for doc_id, state in sorted((await amanifest(self.scope)).items())]

    def delete_document(self, doc_id: str) -> int:
        """Delete a document's chunks and vectors; returns how many chunks (0 when absent)."""
        return self.blocking(self.adelete_document(doc_id))

    async def adelete_document(self, doc_id: str) -> int:
        """Async twin of :meth:`delete_document`."""
        self._check_open()
        if not isinstance(doc_id, str) or not doc_id:
            raise MemoryValidationError("doc_id", f"must be a non-empty string, got {doc_id!r}")
        async with self.scope.lock():
            candidates = [doc_id]
            try:
                resolved = str(Path(doc_id).expanduser().resolve())
                if resolved != doc_id:
                    candidates.append(resolved)
            except (OSError, ValueError):
                pass
            for candidate in candidates:
                records = await self.scope.arecords(MemoryFilter(metadata={"doc_id": candidate}))
                if records:
                    deleted = await self.context.adelete(self.user_id, [r.item.id for r in records])
                    logger.info("%s: deleted document %s (%d chunks)", self.name, candidate, len(deleted))
                    return len(deleted)
        return 0

    def clear(self) -> int:
        """Delete every document of this knowledge base for this user; returns how many chunks."""
        return self.blocking(self.aclear())

    async def aclear(self) -> int:
        """Async twin of :meth:`clear`."""
        self._check_open()
        async with self.scope.lock():
            deleted = await self.context.records.delete_where(self.user_id, namespace=self.namespace)
            await self.context.drain_outbox()
        return len(deleted)

    def stats(self) -> dict[str, Any]:
        """Counts of this knowledge base for this user: documents, chunks, tokens, file types, vector space."""
        return self.blocking(self.astats())

    async def astats(self) -> dict[str, Any]:
        """Async twin of :meth:`stats`."""
        self._check_open()
        manifest = await amanifest(self.scope)
        types: dict[str, int] = {}
        for state in manifest.values():
            assert state.first is not None
            source = state.first.item.metadata.get("source")
            kind = Path(source).suffix.lower() if source else "text"
            types[kind] = types.get(kind, 0) + 1
        return {
            "namespace": self.name,
            "user_id": self.user_id,
            "documents": len(manifest),
            "chunks": sum(len(s.ids) for s in manifest.values()),
            "tokens": sum(s.tokens for s in manifest.values()),
            "file_types": dict(sorted(types.items())),
            "space": await self.context.aspace(),
            "chunk_size": self.splitter.chunk_size,
            "chunk_overlap": self.splitter.chunk_overlap,
        }

    # ------------------------------------------------------------------ retrieval and answers
    def as_retriever(
        self, similarity_top_k: int = 5, mqe_queries: int = 0, hyde: bool = False, llm: LLM | None = None, **kwargs: Any
    ) -> KnowledgeRetriever:
        """A LlamaIndex retriever: hybrid dense + keyword, optional MQE and HyDE, fused by reciprocal rank."""
        from llama_index_memory_hierarchy.knowledge.retriever import KnowledgeRetriever

        return KnowledgeRetriever(
            self.scope,
            similarity_top_k=similarity_top_k,
            mqe_queries=mqe_queries,
            hyde=hyde,
            llm=llm or self.llm,
            **kwargs,
        )

    def as_query_engine(
        self,
        llm: LLM | None = None,
        mqe_queries: int = 3,
        hyde: bool = True,
        similarity_top_k: int = 5,
        rerank: Any = None,
        node_postprocessors: Sequence[Any] | None = None,
        streaming: bool = False,
        **kwargs: Any,
    ) -> KnowledgeQueryEngine:
        """A LlamaIndex query engine answering from this knowledge base, with citations in ``source_nodes``."""
        from llama_index_memory_hierarchy.knowledge.query_engine import KnowledgeQueryEngine

        return KnowledgeQueryEngine.from_scope(
            self.scope,
            llm=llm or self.llm,
            mqe_queries=mqe_queries,
            hyde=hyde,
            similarity_top_k=similarity_top_k,
            rerank=rerank,
            node_postprocessors=node_postprocessors,
            streaming=streaming,
            **kwargs,
        )


__all__ = ["DocumentInfo", "IngestError", "IngestReport", "KnowledgeBase", "kb_namespace"]
