"""The user-export file format: its marker and version, the reports, and how values are encoded.

One JSON document per user: ``format`` and ``version`` (checked on import), ``exported_at``, ``user_id``,
``text_space`` (the text model's vector space), ``records`` (each memory with its namespace, space and
embedding as base64 little-endian float32), ``tables`` (the user's rows of the other user-scoped tables,
bytes as ``{"$b64": ...}``), ``files`` (stored perception files, base64) and ``working`` (working memory).
Shared by :mod:`.portability` (export) and :mod:`.user_import` (import) so both read one definition.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories

EXPORT_FORMAT = "llama-index-memory-hierarchy/user-export"
EXPORT_VERSION = 1
PAGE = 1000
#: Metadata keys of a turn as ``put()`` stored it (``provenance.SIGNATURE_KEY``, ``session_history.CHAT_MESSAGE_KEY``
#: and its blocks' ``FILE_KEY``; those modules are layers above): a turn is imported whole, whatever its length, as it
#: was stored, and its blocks' files are the imported ones.
TURN_SIGNATURE_KEY = "chat_signature"
TURN_MESSAGE_KEY = "chat_message"
BLOCK_FILE_KEY = "lmh_file"
SKIP_TABLES = {memories.name, index_outbox.name}


class ExportReport(BaseModel):
    """What an export wrote."""

    path: str
    user_id: str
    records: int = 0
    by_namespace: dict[str, int] = Field(default_factory=dict)
    embeddings: int = 0
    tables: dict[str, int] = Field(default_factory=dict)
    files: int = 0
    working: int = 0


class ImportReport(BaseModel):
    """What an import wrote."""

    user_id: str
    records: int = 0
    reused_embeddings: int = 0
    reembedded: int = 0
    replaced: int = 0
    skipped: int = 0
    tables: dict[str, int] = Field(default_factory=dict)
    files: int = 0
    working: int = 0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode_vector(vector: np.ndarray | None) -> str | None:
    return None if vector is None else b64(np.asarray(vector, dtype="<f4").tobytes())


def decode_vector(data: str | None, field: str) -> np.ndarray | None:
    if data is None:
        return None
    try:
        return np.frombuffer(base64.b64decode(data, validate=True), dtype="<f4").astype(np.float32)
    except (ValueError, TypeError) as exc:
        raise MemoryValidationError(field, f"not a base64 float32 vector: {exc}") from None


def cell(value: Any) -> Any:
    return {"$b64": b64(value)} if isinstance(value, (bytes, bytearray, memoryview)) else value


def uncell(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"])
    return value


def dump_item(record: Record) -> dict[str, Any]:
    data = record.item.model_dump(mode="json", exclude={"score", "explanation"})
    data["namespace"] = record.namespace
    data["space"] = record.space
    data["embedding"] = encode_vector(record.embedding)
    return data


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def autoincrement_columns(table: sa.Table) -> set[str]:
    return {c.name for c in table.primary_key.columns if c.autoincrement is True}


def read_document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the export: {exc}") from exc
    except ValueError as exc:
        raise MemoryValidationError("path", f"{path} is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise MemoryValidationError("path", f"{path} is not a {EXPORT_FORMAT} document")
    if document.get("version") != EXPORT_VERSION:
        raise MemoryValidationError(
            "path",
            f"{path} has export version {document.get('version')!r}; this package reads version {EXPORT_VERSION}",
        )
    return document


def decode_files(files: Any) -> list[tuple[str, str, bytes]]:
    """``(exported ref, extension, bytes)`` of the files shipped in an export."""
    if not isinstance(files, list):
        raise MemoryValidationError("files", f"must be a list, got {type(files).__name__}")
    decoded: list[tuple[str, str, bytes]] = []
    for position, entry in enumerate(files):
        try:
            data = base64.b64decode(entry["data"], validate=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise MemoryValidationError(f"files[{position}].data", f"not base64: {exc}") from None
        decoded.append((str(entry.get("ref")), str(entry.get("ext") or "bin"), data))
    return decoded
