"""Ingestion into a knowledge base: files and texts hashed, chunked, embedded and written as records.

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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.schema import Document
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.knowledge.chunking import HEADING_SEPARATOR, MarkdownHeadingSplitter
from llama_index_memory_hierarchy.knowledge.loaders import MAX_FILE_BYTES, DocumentLoadError, load_file
from llama_index_memory_hierarchy.knowledge.manifest import FILE_META_KEYS, DocumentState, amanifest
from llama_index_memory_hierarchy.knowledge.scope import KB_MEMORY_TYPE, KnowledgeScope
from llama_index_memory_hierarchy.stores.base import Record, batches
from llama_index_memory_hierarchy.types import MemoryItem

if TYPE_CHECKING:  # pragma: no cover
    from llama_index.core.readers.base import BaseReader

logger = logging.getLogger(__name__)

#: Bumped when loaders change what text a file yields (part of every document hash).
LOADER_VERSION = "1"
_FILES_PER_BATCH = 16
_EMBED_BATCH = 128
_PAGE = 2000


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


@dataclass
class Source:
    """A file or a text to ingest as document ``doc_id``, with the user's metadata for its chunks."""

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
class _Vectors:
    reuse: dict[str, np.ndarray]
    fresh: dict[str, np.ndarray] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)

    def get(self, chunk: _Chunk) -> np.ndarray:
        found = self.fresh.get(chunk.chunk_hash)
        return found if found is not None else self.reuse[chunk.chunk_hash]


_Prepared = list[tuple[Source, list[_Chunk], DocumentState | None]]


class Ingestor:
    """Writes sources into one knowledge base (one writer at a time per knowledge base in this process)."""

    def __init__(
        self,
        scope: KnowledgeScope,
        splitter: MarkdownHeadingSplitter,
        file_extractor: dict[str, BaseReader],
        show_progress: bool | None,
    ) -> None:
        self.scope = scope
        self.splitter = splitter
        self.file_extractor = file_extractor
        self.show_progress = show_progress

    async def aingest(self, sources: list[Source], report: IngestReport) -> IngestReport:
        """Ingest ``sources`` into the knowledge base; failures are listed in ``report``, the rest still go in."""
        started = time.perf_counter()
        async with self.scope.lock():
            space = await self.scope.context.aspace()
            manifest = await amanifest(self.scope, space)
            show = self.show_progress if self.show_progress is not None else len(sources) >= 20
            desc = f"Ingesting into {self.scope.name}"
            progress = _progress(total=len(sources), desc=desc, unit="file", enabled=show)
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
        self, group: list[Source], manifest: dict[str, DocumentState], space: str, report: IngestReport, show: bool
    ) -> None:
        prepared: _Prepared = []
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

        scope, context = self.scope, self.scope.context
        # Reuse the stored embedding of any chunk of this knowledge base with the same text and
        # heading path: unchanged parts of an edited file, and renamed or copied files.
        reuse: dict[str, np.ndarray] = {}
        known = {h: i for state in manifest.values() for h, i in state.chunk_hashes.items()}
        wanted = {c.chunk_hash for _, chunks, _ in prepared for c in chunks}
        old_ids = sorted({known[h] for h in wanted if h in known})
        for ids in batches(old_ids, _PAGE):
            for record in await context.records.get(scope.user_id, ids, with_embeddings=True):
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
                        content=chunk.text, memory_type=KB_MEMORY_TYPE, user_id=scope.user_id, metadata=chunk.metadata
                    )
                    records.append(
                        Record(item=item, namespace=scope.namespace, embedding=vectors.get(chunk), space=space)
                    )
            except MemoryValidationError as exc:
                report.failed.append(IngestError(source=source.label, error=str(exc)))
                continue
            await context.awrite(records)
            report.chunks_written += len(records)
            if state is not None:
                deleted = await context.adelete(scope.user_id, state.ids)
                report.chunks_deleted += len(deleted)
                report.updated.append(source.doc_id)
            else:
                report.added.append(source.doc_id)
            manifest[source.doc_id] = DocumentState(
                first=records[0],
                ids=[r.item.id for r in records],
                hashes={chunks[0].metadata["doc_hash"]},
                spaces={space},
                chunk_count=len(records),
                chunk_hashes={c.chunk_hash: r.item.id for c, r in zip(chunks, records, strict=True)},
            )

    async def _aembed_new(
        self, prepared: _Prepared, reuse: dict[str, np.ndarray], report: IngestReport, show: bool
    ) -> _Vectors:
        """Embed chunks with no reusable vector, batched across documents; isolate a failing document."""
        embeddings = self.scope.context.embeddings
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
                embedded = await embeddings.aembed_texts([pending[h] for h in batch], field="chunk")
                vectors.fresh.update(zip(batch, embedded, strict=True))
                progress.update(len(batch))
        except MemoryValidationError:
            # One text the model cannot embed (e.g. an all-zero vector): find its document, keep the rest.
            for source, chunks, _ in prepared:
                todo = [c for c in chunks if c.chunk_hash not in reuse and c.chunk_hash not in vectors.fresh]
                if not todo:
                    continue
                try:
                    embedded = await embeddings.aembed_texts([c.embed_text for c in todo], field="chunk")
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
    def _fingerprint(self, source: Source) -> str:
        suffix = source.path.suffix.lower() if source.path is not None else ".md"
        reader = type(self.file_extractor.get(suffix)).__name__ if source.path is not None else "text"
        meta = json.dumps(source.metadata, sort_keys=True, ensure_ascii=False)
        return f"{self.splitter.fingerprint}|loader-{LOADER_VERSION}|{reader}|{meta}"

    def _hash_source(self, source: Source) -> str:
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

    def _chunk_source(self, source: Source, doc_hash: str) -> list[_Chunk]:
        """Load (files) and chunk a source into records-to-be, with their bookkeeping metadata."""
        if source.path is not None:
            documents = load_file(source.path, self.file_extractor)
        else:
            documents = [Document(text=source.text or "")]
        chunks: list[_Chunk] = []
        for part, document in enumerate(documents):
            text = _clean(document.text)
            file_meta = {k: document.metadata[k] for k in FILE_META_KEYS if document.metadata.get(k) is not None}
            for span in self.splitter.split_spans(text):
                chunk_text = text[span.start : span.end]
                if not chunk_text.strip():
                    continue
                heading_path = HEADING_SEPARATOR.join(span.headings)
                embed_text = f"{heading_path}\n\n{chunk_text}" if heading_path else chunk_text
                metadata = {
                    **source.metadata,
                    **file_meta,
                    "kb": self.scope.name,
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


__all__ = ["LOADER_VERSION", "IngestError", "IngestReport", "Ingestor", "Source"]
