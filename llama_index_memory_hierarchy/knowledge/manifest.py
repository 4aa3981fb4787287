"""The documents of a knowledge base, read from its chunks' own metadata (there is no other manifest).

Every chunk carries its document's bookkeeping (``doc_id``, ``doc_hash``, ``chunk_hash``,
``chunk_count``, source file, heading path), so nothing can drift out of step with the chunks,
and erasing a user's records erases the manifest with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.knowledge.scope import KnowledgeScope
    from llama_index_memory_hierarchy.stores.base import Record

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
#: File metadata the readers give that chunks keep.
FILE_META_KEYS = ("file_name", "file_type", "file_size", "creation_date", "last_modified_date", "page_label")


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
class DocumentState:
    """A document's chunks as stored: their ids, hashes and vector spaces."""

    first: Record
    ids: list[str] = field(default_factory=list)
    hashes: set[str] = field(default_factory=set)
    spaces: set[str | None] = field(default_factory=set)
    chunk_count: int = 0
    tokens: int = 0
    chunk_hashes: dict[str, str] = field(default_factory=dict)  # chunk_hash -> id, embedded in the space

    def unchanged(self, doc_hash: str, space: str) -> bool:
        """Whether the stored chunks are complete and came from this content, embedded in ``space``."""
        return self.hashes == {doc_hash} and self.spaces == {space} and len(self.ids) == self.chunk_count

    def info(self, doc_id: str) -> DocumentInfo:
        """The public description of the document."""
        meta = self.first.item.metadata
        return DocumentInfo(
            doc_id=doc_id,
            source=meta.get("source"),
            file_name=meta.get("file_name"),
            doc_hash=str(meta.get("doc_hash")),
            chunks=len(self.ids),
            tokens=self.tokens,
            ingested_at=self.first.item.created_at,
            metadata={k: v for k, v in meta.items() if k not in RESERVED_KEYS and k not in FILE_META_KEYS},
        )


async def amanifest(scope: KnowledgeScope, space: str | None = None) -> dict[str, DocumentState]:
    """Documents by ``doc_id`` from their chunks' metadata (with chunk hashes embedded in ``space``)."""
    manifest: dict[str, DocumentState] = {}
    for record in await scope.arecords():
        meta = record.item.metadata
        doc_id = meta.get("doc_id")
        if not isinstance(doc_id, str):
            continue
        state = manifest.setdefault(doc_id, DocumentState(first=record))
        state.ids.append(record.item.id)
        state.hashes.add(str(meta.get("doc_hash")))
        state.spaces.add(record.space)
        state.chunk_count = int(meta.get("chunk_count") or 0)
        if space is not None and record.space == space and isinstance(meta.get("chunk_hash"), str):
            state.chunk_hashes[meta["chunk_hash"]] = record.item.id
        state.tokens += int(meta.get("tokens") or 0)
    return manifest


__all__ = ["FILE_META_KEYS", "RESERVED_KEYS", "DocumentInfo", "DocumentState", "amanifest"]
