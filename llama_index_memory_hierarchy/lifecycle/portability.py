"""Export and import a user's whole memory as JSON; readable transcripts of sessions.

``aexport_user(context, user_id, path)`` writes one JSON document holding every record of
the user in every namespace (the four tiers, superseded facts with their validity, the
perceptual tier's satellite vectors, knowledge-base chunks), each with its id, times,
importance, access count, pin and metadata, and its embedding (base64 float32) with the
vector space it belongs to; the user's rows of every other user-scoped table (running
summaries, consolidation marks, cursors, audit trail); the stored perception files
(base64); and the working memory of the user's live memories in this process (:mod:`.sessions`).

``aimport_user(context, path)`` writes it back item for item (same ids, same fields). An
embedding is reused when its space is the current text space (same model), and
recomputed when the text model differs; satellite vectors keep their own spaces. The
knowledge graph is rebuilt from the imported facts. A chat turn is imported whole whatever its
length (the length bound is for an explicit ``add()``), and the stored files its image, audio or
document blocks name are the imported copies, not the exporter's.

The file format lives in :mod:`.export_format`, the import in :mod:`.user_import`, and
``aexport_session`` (a session as Markdown or JSON) in :mod:`.session_export`; their public
names are re-exported here.
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.lifecycle.export_format import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    PAGE,
    SKIP_TABLES,
    ExportReport,
    ImportReport,
    autoincrement_columns,
    b64,
    cell,
    dump_item,
    write_json,
)
from llama_index_memory_hierarchy.lifecycle.session_export import aexport_session
from llama_index_memory_hierarchy.lifecycle.sessions import live_memories
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.lifecycle.user_import import aimport_user
from llama_index_memory_hierarchy.perception.files import FileStore
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import user_scoped_tables
from llama_index_memory_hierarchy.types import validate_identifier

logger = logging.getLogger(__name__)


async def aexport_user(
    context: StoreContext, user_id: str, path: str | os.PathLike[str], *, include_files: bool = True
) -> ExportReport:
    """Write ``user_id``'s whole memory to ``path`` as JSON (see the module docstring)."""
    user_id = validate_identifier(user_id, "user_id")
    return await context.runtime.arun(_aexport(context, user_id, Path(path), include_files))


async def _aexport(context: StoreContext, user_id: str, path: Path, include_files: bool) -> ExportReport:
    await LifecycleStore(context).aensure_tables()
    report = ExportReport(path=str(path), user_id=user_id)
    records: list[Record] = []
    while True:
        page = await context.records.query(
            user_id,
            namespace=None,
            order_by="created_at",
            limit=PAGE,
            offset=len(records),
            with_embeddings=True,  # type: ignore[arg-type]
        )
        records.extend(page)
        if len(page) < PAGE:
            break
    items = [dump_item(r) for r in records]
    for record in records:
        report.by_namespace[record.namespace] = report.by_namespace.get(record.namespace, 0) + 1
    report.records = len(items)
    report.embeddings = sum(1 for r in records if r.embedding is not None)
    table_rows = await _aread_tables(context, user_id)
    report.tables = {name: len(rows) for name, rows in table_rows.items()}
    files: list[dict[str, Any]] = []
    if include_files:
        store = FileStore(context.persist_dir)
        seen: set[str] = set()
        for record in records:
            file = record.item.metadata.get("file")
            if not isinstance(file, dict) or file.get("mode") != "stored" or file.get("ref") in seen:
                continue
            try:
                data = await asyncio.to_thread(lambda f=file: store.resolve(f, user_id).read_bytes())
            except (OSError, MemoryValidationError, StoreError) as exc:
                logger.warning("export: stored file of memory %s unreadable (%s); left out", record.item.id, exc)
                continue
            seen.add(file["ref"])
            files.append({"ref": file["ref"], "sha256": file.get("sha256"), "ext": file.get("ext"), "data": b64(data)})
    report.files = len(files)
    working: list[dict[str, Any]] = []
    seen_working: set[str] = set()
    for memory in live_memories(context, user_id):
        for item in memory.deps.tiers.working.get_recent(10**9):
            if item.id not in seen_working:
                seen_working.add(item.id)
                working.append(item.model_dump(mode="json", exclude={"score", "explanation"}))
    report.working = len(working)
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": datetime.now(timezone.utc).isoformat(),
        "user_id": user_id,
        "text_space": await context.aspace(),
        "records": items,
        "tables": table_rows,
        "files": files,
        "working": working,
    }
    await asyncio.to_thread(write_json, path, document)
    await LifecycleStore(context).alog(user_id, "export", {"records": report.records, "files": report.files})
    return report


async def _aread_tables(context: StoreContext, user_id: str) -> dict[str, list[dict[str, Any]]]:
    async def work(conn: Any) -> dict[str, list[dict[str, Any]]]:
        existing = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
        out: dict[str, list[dict[str, Any]]] = {}
        for table in user_scoped_tables():
            if table.name in SKIP_TABLES or table.name not in existing:
                continue
            skip = autoincrement_columns(table)
            order = [c for c in table.primary_key.columns]
            rows = await conn.execute(sa.select(table).where(table.c.user_id == user_id).order_by(*order))
            out[table.name] = [{k: cell(v) for k, v in row.items() if k not in skip} for row in rows.mappings()]
        return out

    return await context.records.run_transaction(work, write=False, op="export tables")  # type: ignore[attr-defined]


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportReport",
    "ImportReport",
    "aexport_session",
    "aexport_user",
    "aimport_user",
]
