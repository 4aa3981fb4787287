"""``KnowledgeBase``: a user's documents as chunks in the shared stores, for retrieval and answers.

Chunks are records of the shared record store under namespace ``kb:<name>`` (durable,
keyword indexed, erased with their user) with vectors in the shared vector index, so a
knowledge base needs no store of its own and never mixes with memory tiers (which live
in namespace ``memory``) or with other knowledge bases.

Every chunk carries its document's bookkeeping in metadata (``doc_id``, ``doc_hash``,
``chunk_hash``, ``chunk_count``, source file, heading path): that is the whole manifest,
so nothing can drift out of step with the chunks, and erasing a user's records erases it.

* An unchanged file costs one read and a hash: no parsing, no embedding.
* A changed file is re-chunked; chunks whose text (and heading path) did not change reuse
  their stored embeddings, only new chunks are embedded. New chunks are written before the
  old ones are deleted, so a crash in between leaves duplicates that the next ingest
  removes (the document then no longer looks unchanged), never a hole.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.schema import Document
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.knowledge.chunking import HEADING_SEPARATOR, MarkdownHeadingSplitter
from llama_index_memory_hierarchy.knowledge.loaders import (
    MAX_FILE_BYTES,
    DocumentLoadError,
    default_file_extractor,
    discover,
    load_file,
)
from llama_index_memory_hierarchy.runtime import Runtime, RuntimeBound
from llama_index_memory_hierarchy.stores.base import Record, batches
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    validate_content,
    validate_identifier,
    validate_metadata,
)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.llms import LLM
    from llama_index.core.readers.base import BaseReader

    from llama_index_memory_hierarchy.knowledge.query_engine import KnowledgeQueryEngine
    from llama_index_memory_hierarchy.knowledge.retriever import KnowledgeRetriever
    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)

#: Record namespace prefix of knowledge bases (memory tiers use ``memory``).
KB_NAMESPACE_PREFIX = "kb:"
#: Memory type stored on knowledge chunks (the namespace, not the type, isolates them).
KB_MEMORY_TYPE = MemoryType.SEMANTIC
#: Bumped when loaders change what text a file yields (part of every document hash).
LOADER_VERSION = "1"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_FILES_PER_BATCH = 16
_EMBED_BATCH = 128
_PAGE = 2000
#: Metadata keys the knowledge base owns on every chunk (user metadata cannot override them).
RESERVED_KEYS = (
    "doc_id",
    "doc_hash",
    "chunk_hash",
    "chunk_index",
    "chunk_count",
    "part",
    "start_char",
    "end_char",
    "tokens",
    "headings",
    "heading_path",
    "source",
    "kb",
)


def kb_namespace(name: str) -> str:
    """The record namespace of knowledge base ``name`` (letters, digits, ``_.-``; no ``:``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in {".", ".."}:
        raise MemoryValidationError("namespace", f"must be 1-64 characters of letters, digits and _.-, got {name!r}")
    return f"{KB_NAMESPACE_PREFIX}{name}"


class IngestError(BaseModel):
    """A source that could not be ingested, and why (the rest of the batch still is)."""

    source: str
    error: str


class IngestReport(BaseModel):
    """What an ingest did: documents added, updated, unchanged, failed, and the chunk work."""

    namespace: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    failed: list[IngestError] = Field(default_factory=list)
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    chunks_deleted: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every source was ingested (or was unchanged)."""
        return not self.failed

    def summary(self) -> str:
        """One line for logs and the CLI."""
        return (
            f"{self.namespace}: {len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.failed)} failed; {self.chunks_written} chunks written ({self.chunks_embedded} embedded, "
            f"{self.chunks_reused} reused), {self.chunks_deleted} removed in {self.seconds:.2f}s"
        )


class DocumentInfo(BaseModel):
    """One ingested document as :meth:`KnowledgeBase.list_documents` describes it."""

    doc_id: str
    source: str | None = None
    file_name: str | None = None
    doc_hash: str
    chunks: int
    tokens: int = 0
    ingested_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass
class _Source:
    doc_id: str
    path: Path | None = None
    text: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return str(self.path) if self.path is not None else self.doc_id


@dataclass
class _Chunk:
    text: str
    embed_text: str
    chunk_hash: str
    metadata: dict[str, Any]


@dataclass
class _DocState:
    ids: list[str] = field(default_factory=list)
    hashes: set[str] = field(default_factory=set)
    spaces: set[str | None] = field(default_factory=set)
    chunk_count: int = 0
    tokens: int = 0
    first: Record | None = None
    chunk_hashes: dict[str, str] = field(default_factory=dict)  # chunk_hash -> id, embedded in the space

    def unchanged(self, doc_hash: str, space: str) -> bool:
        return self.hashes == {doc_hash} and self.spaces == {space} and len(self.ids) == self.chunk_count


def _sha256(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode("utf-8", errors="surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _clean(text: str) -> str:
    """Text safe to store: no NUL characters, no lone surrogates (they cannot be stored)."""
    text = text.replace("\x00", "")
    return text.encode("utf-8", errors="replace").decode("utf-8") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_FILE_META_KEYS = ("file_name", "file_type", "file_size", "creation_date", "last_modified_date", "page_label")


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
        self.splitter = splitter or MarkdownHeadingSplitter()
        self.file_extractor = file_extractor if file_extractor is not None else default_file_extractor()
        self.llm = llm
        self.show_progress = show_progress
        self._owns_context = owns_context
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
            if self._owns_context:
                self.context.release()

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
        sources = [_Source(doc_id=str(path), path=path, metadata=extra) for path in files]
        return await self._aingest(sources, report)

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
        source = _Source(doc_id=doc_id, text=text, metadata=self._user_metadata(metadata))
        return await self._aingest([source], IngestReport(namespace=self.name))

    @staticmethod
    def _user_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
        metadata = validate_metadata(metadata)
        clash = sorted(set(metadata) & set(RESERVED_KEYS))
        if clash:
            raise MemoryValidationError("metadata", f"keys reserved by the knowledge base: {', '.join(clash)}")
        return metadata

    async def _aingest(self, sources: list[_Source], report: IngestReport) -> IngestReport:
        started = time.perf_counter()
        async with self._lock():
            space = await self.context.aspace()
            manifest = await self._amanifest(space)
            show = self.show_progress if self.show_progress is not None else len(sources) >= 20
            progress = _progress(total=len(sources), desc=f"Ingesting into {self.name}", unit="file", enabled=show)
            try:
                for start in range(0, len(sources), _FILES_PER_BATCH):
                    group = sources[start : start + _FILES_PER_BATCH]
                    await self._aingest_group(group, manifest, space, report, show)
                    progress.update(len(group))
            finally:
                progress.close()
        report.seconds = time.perf_counter() - started
        logger.info("%s", report.summary())
        for failure in report.failed:
            logger.warning("not ingested: %s: %s", failure.source, failure.error)
        return report

    async def _aingest_group(
        self, group: list[_Source], manifest: dict[str, _DocState], space: str, report: IngestReport, show: bool
    ) -> None:
        prepared: list[tuple[_Source, list[_Chunk], _DocState | None]] = []
        for source in group:
            try:
                doc_hash = await asyncio.to_thread(self._hash_source, source)
                state = manifest.get(source.doc_id)
                if state is not None and state.unchanged(doc_hash, space):
                    report.unchanged.append(source.doc_id)
                    continue
                chunks = await asyncio.to_thread(self._chunk_source, source, doc_hash)
            except DocumentLoadError as exc:
                report.failed.append(IngestError(source=source.label, error=exc.reason))
                continue
            except (OSError, MemoryValidationError) as exc:
                report.failed.append(IngestError(source=source.label, error=f"{type(exc).__name__}: {exc}"))
                continue
            prepared.append((source, chunks, state))
        if not prepared:
            return

        # Reuse the stored embedding of any chunk of this knowledge base with the same text and
        # heading path: unchanged parts of an edited file, and renamed or copied files.
        reuse: dict[str, np.ndarray] = {}
        known = {h: i for state in manifest.values() for h, i in state.chunk_hashes.items()}
        wanted = {c.chunk_hash for _, chunks, _ in prepared for c in chunks}
        old_ids = sorted({known[h] for h in wanted if h in known})
        for ids in batches(old_ids, _PAGE):
            for record in await self.context.records.get(self.user_id, ids, with_embeddings=True):
                chunk_hash = record.item.metadata.get("chunk_hash")
                if record.space == space and record.embedding is not None and isinstance(chunk_hash, str):
                    reuse[chunk_hash] = record.embedding

        vectors = await self._aembed_new(prepared, reuse, report, show)
        for source, chunks, state in prepared:
            if source.doc_id in vectors.failed:
                continue
            records = []
            try:
                for chunk in chunks:
                    item = MemoryItem.create(
                        content=chunk.text, memory_type=KB_MEMORY_TYPE, user_id=self.user_id, metadata=chunk.metadata
                    )
                    records.append(
                        Record(item=item, namespace=self.namespace, embedding=vectors.get(chunk), space=space)
                    )
            except MemoryValidationError as exc:
                report.failed.append(IngestError(source=source.label, error=str(exc)))
                continue
            await self.context.awrite(records)
            report.chunks_written += len(records)
            if state is not None:
                deleted = await self.context.adelete(self.user_id, state.ids)
                report.chunks_deleted += len(deleted)
                report.updated.append(source.doc_id)
            else:
                report.added.append(source.doc_id)
            manifest[source.doc_id] = _DocState(
                ids=[r.item.id for r in records],
                hashes={chunks[0].metadata["doc_hash"]},
                spaces={space},
                chunk_count=len(records),
                chunk_hashes={c.chunk_hash: r.item.id for c, r in zip(chunks, records, strict=True)},
            )

    async def _aembed_new(
        self,
        prepared: list[tuple[_Source, list[_Chunk], _DocState | None]],
        reuse: dict[str, np.ndarray],
        report: IngestReport,
        show: bool,
    ) -> _Vectors:
        """Embed chunks with no reusable vector, batched across documents; isolate a failing document."""
        vectors = _Vectors(reuse)
        pending: dict[str, str] = {}  # chunk_hash -> embed text (identical chunks embedded once)
        for _, chunks, _ in prepared:
            for chunk in chunks:
                if chunk.chunk_hash in reuse:
                    report.chunks_reused += 1
                elif chunk.chunk_hash not in pending:
                    pending[chunk.chunk_hash] = chunk.embed_text
        if not pending:
            return vectors
        hashes = list(pending)
        progress = _progress(
            total=len(hashes), desc="Embedding chunks", unit="chunk", enabled=show and len(hashes) > 64
        )
        try:
            for batch in batches(hashes, _EMBED_BATCH):
                embedded = await self.context.embeddings.aembed_texts([pending[h] for h in batch], field="chunk")
                vectors.fresh.update(zip(batch, embedded, strict=True))
                progress.update(len(batch))
        except MemoryValidationError:
            # One text the model cannot embed (e.g. an all-zero vector): find its document, keep the rest.
            for source, chunks, _ in prepared:
                todo = [c for c in chunks if c.chunk_hash not in reuse and c.chunk_hash not in vectors.fresh]
                if not todo:
                    continue
                try:
                    embedded = await self.context.embeddings.aembed_texts([c.embed_text for c in todo], field="chunk")
                except MemoryValidationError as exc:
                    vectors.failed.add(source.doc_id)
                    report.failed.append(IngestError(source=source.label, error=f"cannot embed a chunk: {exc}"))
                    continue
                vectors.fresh.update({c.chunk_hash: v for c, v in zip(todo, embedded, strict=True)})
        finally:
            progress.close()
        report.chunks_embedded += len(vectors.fresh)
        return vectors

    # ------------------------------------------------------------------ hashing and chunking (worker threads)
    def _fingerprint(self, source: _Source) -> str:
        suffix = source.path.suffix.lower() if source.path is not None else ".md"
        reader = type(self.file_extractor.get(suffix)).__name__ if source.path is not None else "text"
        meta = json.dumps(source.metadata, sort_keys=True, ensure_ascii=False)
        return f"{self.splitter.fingerprint}|loader-{LOADER_VERSION}|{reader}|{meta}"

    def _hash_source(self, source: _Source) -> str:
        """Content hash of a source (file bytes or text, plus settings that change its chunks)."""
        if source.path is None:
            return _sha256(self._fingerprint(source), source.text or "")
        suffix = source.path.suffix.lower()
        if suffix not in self.file_extractor:
            supported = ", ".join(sorted(self.file_extractor))
            raise DocumentLoadError(
                source.path, f"unsupported file type {suffix or '(no extension)'!r}; supported: {supported}"
            )
        try:
            size = source.path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise DocumentLoadError(source.path, f"file is {size} bytes, more than the {MAX_FILE_BYTES} byte limit")
            data = source.path.read_bytes()
        except OSError as exc:
            raise DocumentLoadError(source.path, f"cannot read the file: {exc.strerror or exc}") from exc
        return _sha256(self._fingerprint(source), data)

    def _chunk_source(self, source: _Source, doc_hash: str) -> list[_Chunk]:
        """Load (files) and chunk a source into records-to-be, with their bookkeeping metadata."""
        if source.path is not None:
            documents = load_file(source.path, self.file_extractor)
        else:
            documents = [Document(text=source.text or "")]
        chunks: list[_Chunk] = []
        for part, document in enumerate(documents):
            text = _clean(document.text)
            file_meta = {k: document.metadata[k] for k in _FILE_META_KEYS if document.metadata.get(k) is not None}
            for span in self.splitter.split_spans(text):
                chunk_text = text[span.start : span.end]
                if not chunk_text.strip():
                    continue
                heading_path = HEADING_SEPARATOR.join(span.headings)
                embed_text = f"{heading_path}\n\n{chunk_text}" if heading_path else chunk_text
                metadata = {
                    **source.metadata,
                    **file_meta,
                    "kb": self.name,
                    "doc_id": source.doc_id,
                    "doc_hash": doc_hash,
                    "chunk_hash": _sha256(embed_text),
                    "chunk_index": len(chunks),
                    "part": part,
                    "start_char": span.start,
                    "end_char": span.end,
                    "tokens": span.tokens,
                    "headings": list(span.headings),
                    "heading_path": heading_path,
                    "source": str(source.path) if source.path is not None else None,
                }
                chunks.append(_Chunk(chunk_text, embed_text, metadata["chunk_hash"], metadata))
        if not chunks:
            raise DocumentLoadError(source.label, "no text to index")
        for chunk in chunks:
            chunk.metadata["chunk_count"] = len(chunks)
        return chunks

    # ------------------------------------------------------------------ reading the manifest
    async def _aiter_records(self, filters: MemoryFilter | None = None) -> list[Record]:
        out: list[Record] = []
        offset = 0
        while True:
            page = await self.context.records.query(
                self.user_id,
                namespace=self.namespace,
                filters=filters,
                order_by="created_at",
                limit=_PAGE,
                offset=offset,
            )
            out.extend(page)
            if len(page) < _PAGE:
                return out
            offset += _PAGE

    async def _amanifest(self, space: str | None = None) -> dict[str, _DocState]:
        """Documents by ``doc_id`` from their chunks' metadata (with chunk hashes embedded in ``space``)."""
        manifest: dict[str, _DocState] = {}
        for record in await self._aiter_records():
            meta = record.item.metadata
            doc_id = meta.get("doc_id")
            if not isinstance(doc_id, str):
                continue
            state = manifest.setdefault(doc_id, _DocState(first=record))
            state.ids.append(record.item.id)
            state.hashes.add(str(meta.get("doc_hash")))
            state.spaces.add(record.space)
            state.chunk_count = int(meta.get("chunk_count") or 0)
            if space is not None and record.space == space and isinstance(meta.get("chunk_hash"), str):
                state.chunk_hashes[meta["chunk_hash"]] = record.item.id
            state.tokens += int(meta.get("tokens") or 0)
        return manifest

    def _lock(self) -> asyncio.Lock:
        """One writer at a time per (user, knowledge base) in this process."""
        return self.context.lock(KnowledgeBase, self.user_id, self.namespace)

    # ------------------------------------------------------------------ documents
    def list_documents(self) -> list[DocumentInfo]:
        """The documents of this knowledge base (this user), by ``doc_id``."""
        return self.blocking(self.alist_documents())

    async def alist_documents(self) -> list[DocumentInfo]:
        """Async twin of :meth:`list_documents`."""
        self._check_open()
        infos = []
        for doc_id, state in sorted((await self._amanifest()).items()):
            first = state.first
            assert first is not None
            meta = first.item.metadata
            user_meta = {k: v for k, v in meta.items() if k not in RESERVED_KEYS and k not in _FILE_META_KEYS}
            infos.append(
                DocumentInfo(
                    doc_id=doc_id,
                    source=meta.get("source"),
                    file_name=meta.get("file_name"),
                    doc_hash=str(meta.get("doc_hash")),
                    chunks=len(state.ids),
                    tokens=state.tokens,
                    ingested_at=first.item.created_at,
                    metadata=user_meta,
                )
            )
        return infos

    def delete_document(self, doc_id: str) -> int:
        """Delete a document's chunks and vectors; returns how many chunks (0 when absent)."""
        return self.blocking(self.adelete_document(doc_id))

    async def adelete_document(self, doc_id: str) -> int:
        """Async twin of :meth:`delete_document`."""
        self._check_open()
        if not isinstance(doc_id, str) or not doc_id:
            raise MemoryValidationError("doc_id", f"must be a non-empty string, got {doc_id!r}")
        async with self._lock():
            candidates = [doc_id]
            try:
                resolved = str(Path(doc_id).expanduser().resolve())
                if resolved != doc_id:
                    candidates.append(resolved)
            except (OSError, ValueError):
                pass
            for candidate in candidates:
                records = await self._aiter_records(MemoryFilter(metadata={"doc_id": candidate}))
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
        async with self._lock():
            deleted = await self.context.records.delete_where(self.user_id, namespace=self.namespace)
            await self.context.drain_outbox()
        return len(deleted)

    def stats(self) -> dict[str, Any]:
        """Counts of this knowledge base for this user: documents, chunks, tokens, file types, vector space."""
        return self.blocking(self.astats())

    async def astats(self) -> dict[str, Any]:
        """Async twin of :meth:`stats`."""
        self._check_open()
        manifest = await self._amanifest()
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
            knowledge_base=self,
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

        return KnowledgeQueryEngine.from_knowledge_base(
            self,
            llm=llm or self.llm,
            mqe_queries=mqe_queries,
            hyde=hyde,
            similarity_top_k=similarity_top_k,
            rerank=rerank,
            node_postprocessors=node_postprocessors,
            streaming=streaming,
            **kwargs,
        )


@dataclass
class _Vectors:
    reuse: dict[str, np.ndarray]
    fresh: dict[str, np.ndarray] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)

    def get(self, chunk: _Chunk) -> np.ndarray:
        found = self.fresh.get(chunk.chunk_hash)
        return found if found is not None else self.reuse[chunk.chunk_hash]


class _NoProgress:
    def update(self, n: int = 1) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""


def _progress(*, total: int, desc: str, unit: str, enabled: bool) -> Any:
    """A tqdm bar on stderr when ``enabled`` (large ingests), else a no-op."""
    if not enabled:
        return _NoProgress()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)


__all__ = [
    "KB_NAMESPACE_PREFIX",
    "DocumentInfo",
    "IngestError",
    "IngestReport",
    "KnowledgeBase",
    "kb_namespace",
]
