"""Import a user export (:mod:`.export_format`) back into a store, item for item.

Same ids and fields; an embedding is reused when its space is the current text space and recomputed
when the text model differs; satellite vectors keep their own spaces; the knowledge graph is rebuilt
from the imported facts; a chat turn is imported whole whatever its length, and the stored files its
blocks name are the imported copies. The file is untrusted input: its perception file references are
checked before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.export_format import (
    BLOCK_FILE_KEY,
    PAGE,
    SKIP_TABLES,
    TURN_MESSAGE_KEY,
    TURN_SIGNATURE_KEY,
    ImportReport,
    autoincrement_columns,
    decode_files,
    decode_vector,
    read_document,
    uncell,
)
from llama_index_memory_hierarchy.lifecycle.sessions import live_memories
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import memories, user_scoped_tables
from llama_index_memory_hierarchy.tiers.semantic import areset_semantic_state
from llama_index_memory_hierarchy.tiers.semantic.facts import FACT
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, as_utc, file_sha256, validate_identifier

logger = logging.getLogger(__name__)

#: The times a fact record keeps in its metadata (ISO strings), read back whenever the user's facts load.
_FACT_TIMES = ("valid_at", "invalid_at", "expired_at")


async def aimport_user(
    context: StoreContext,
    path: str | os.PathLike[str],
    *,
    user_id: str | None = None,
    on_conflict: Literal["replace", "skip", "error"] = "replace",
) -> ImportReport:
    """Write an export back (as ``user_id`` when given); see the module docstring."""
    if on_conflict not in ("replace", "skip", "error"):
        raise MemoryValidationError("on_conflict", f"must be 'replace', 'skip' or 'error', got {on_conflict!r}")
    document = await asyncio.to_thread(read_document, Path(path))
    target = validate_identifier(user_id or document.get("user_id"), "user_id")
    files = decode_files(document.get("files") or [])
    await asyncio.to_thread(_check_file_refs, document.get("records") or [], files, Path(path).parent)
    return await context.runtime.arun(_aimport(context, document, target, on_conflict, files))


def _check_file_refs(records: Any, files: list[tuple[str, str, bytes]], folder: Path) -> None:
    """Every perception file of an import is one it ships or one beside it, with the recorded SHA-256.

    Why: an import file is untrusted input. A ``reference`` to any host path (``/etc/passwd``) or a
    ``stored`` ref naming another user's file would make later reads serve bytes the importer never had.
    Checked before anything is written, so a bad file is refused whole.
    """
    shipped = {ref: hashlib.sha256(data).hexdigest() for ref, _, data in files}
    root = folder.expanduser().resolve()
    for position, data in enumerate(records if isinstance(records, list) else []):
        metadata = data.get("metadata") if isinstance(data, dict) else None
        if not isinstance(metadata, dict) or "file" not in metadata:
            continue
        if data.get("memory_type") != MemoryType.PERCEPTUAL.value:
            continue
        field = f"records[{position}].metadata.file"
        try:
            file = FileRef.from_metadata(metadata["file"])
        except MemoryValidationError as exc:
            raise MemoryValidationError(field, str(exc)) from None
        if file.mode == "stored":
            if shipped.get(str(file.ref)) != file.sha256:
                raise MemoryValidationError(
                    f"{field}.ref", "not a file shipped in this export with the recorded sha256"
                )
            continue
        path = Path(str(file.path))
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise MemoryValidationError(f"{field}.path", f"no file at {str(path)[:200]!r}") from None
        if not resolved.is_relative_to(root) or not resolved.is_file():
            raise MemoryValidationError(
                f"{field}.path", f"a referenced file must lie in the export's folder {root}, not {str(path)[:200]!r}"
            )
        if file_sha256(resolved) != file.sha256:
            raise MemoryValidationError(f"{field}.sha256", f"{resolved} does not have the recorded sha256")


async def _aimport(
    context: StoreContext,
    document: dict[str, Any],
    user_id: str,
    on_conflict: str,
    files: list[tuple[str, str, bytes]],
) -> ImportReport:
    records_data = document.get("records") or []
    for position, data in enumerate(records_data):  # every record and table row checked before a write
        validate_identifier(data.get("namespace", "memory"), f"records[{position}].namespace")
        decode_vector(data.get("embedding"), f"records[{position}].embedding")
        _record_item(dict(data), f"records[{position}]", user_id)
    for position, data in enumerate(document.get("working") or []):
        _record_item(dict(data), f"working[{position}]", user_id)
    plan = _table_plan(document.get("tables") or {}, user_id)
    store = LifecycleStore(context)
    await store.aensure_tables()
    report = ImportReport(user_id=user_id)
    refs = await _aimport_files(context, files, user_id, report)
    exported_space = document.get("text_space")
    current_space = await context.aspace()
    records: list[Record] = []
    for position, data in enumerate(records_data):
        data = dict(data)
        namespace = validate_identifier(data.pop("namespace", "memory"), f"records[{position}].namespace")
        space = data.pop("space", None)
        vector = decode_vector(data.pop("embedding", None), f"records[{position}].embedding")
        data["user_id"] = user_id
        metadata = data.get("metadata") or {}
        file = metadata.get("file")
        if isinstance(file, dict) and file.get("ref") in refs:
            data["metadata"] = metadata = {**metadata, "file": {**file, "ref": refs[file["ref"]]}}
        raw = metadata.get(TURN_MESSAGE_KEY)
        if isinstance(raw, str) and refs:
            data["metadata"] = metadata = {**metadata, TURN_MESSAGE_KEY: _remap_block_files(raw, refs)}
        item = _record_item(data, f"records[{position}]", user_id)
        if vector is not None and space == exported_space and space != current_space:
            vector, space = None, None  # another text model: embed again
            report.reembedded += 1
        elif vector is not None:
            report.reused_embeddings += 1
        records.append(Record(item=item, namespace=namespace, embedding=vector, space=space))
    records = await _aresolve_conflicts(context, user_id, records, on_conflict, report)
    for start in range(0, len(records), PAGE):
        batch = records[start : start + PAGE]
        await context.awrite([r for r in batch if r.embedding is not None], embed=False)
        missing = [r for r in batch if r.embedding is None]
        if missing:
            await context.awrite(missing, embed=True)
    report.records = len(records)
    report.tables = await _aimport_tables(context, plan)
    await _arefresh_semantic(context, user_id, records)
    report.working = await _aimport_working(context, document.get("working") or [], user_id)
    for memory in live_memories(context, user_id):
        memory.compressor.forget_cached()
        memory.invalidate()
    await store.alog(user_id, "import", {"records": report.records, "reembedded": report.reembedded})
    return report


def _remap_block_files(raw: str, refs: dict[str, str]) -> str:
    """A turn's stored message with its binary blocks' file refs moved to the imported files.

    Why: a block stored as a file names it by ref (``<user>/<sha[:2]>/<sha>.<ext>``); imported as another user or
    into another folder, the exporter's ref would name the exporter's file. Unchanged text when nothing moved, so a
    turn re-imported as it was keeps its signature.
    """
    try:
        message = json.loads(raw)
    except ValueError:
        return raw
    changed = False
    for block in message.get("blocks") or [] if isinstance(message, dict) else []:
        stored = block.get(BLOCK_FILE_KEY) if isinstance(block, dict) else None
        file = stored.get("file") if isinstance(stored, dict) else None
        if isinstance(file, dict) and refs.get(file.get("ref"), file.get("ref")) != file.get("ref"):
            stored["file"] = {**file, "ref": refs[file["ref"]]}
            changed = True
    return json.dumps(message, ensure_ascii=False) if changed else raw


async def _aimport_files(
    context: StoreContext, files: list[tuple[str, str, bytes]], user_id: str, report: ImportReport
) -> dict[str, str]:
    """Store the exported files for ``user_id``; ``{exported ref: new ref}``."""
    store = FileStore(context.persist_dir)
    refs: dict[str, str] = {}
    for exported, extension, data in files:

        def commit(payload: bytes = data, ext: str = extension) -> str:
            staged = store.stage(payload, copy=True)
            try:
                return store.commit(staged, user_id, ext).ref or ""
            finally:
                store.discard(staged)

        refs[exported] = await asyncio.to_thread(commit)
        report.files += 1
    return refs


async def _aresolve_conflicts(
    context: StoreContext, user_id: str, records: list[Record], on_conflict: str, report: ImportReport
) -> list[Record]:
    ids = [r.item.id for r in records]
    owners: dict[str, str] = {}

    async def work(conn: Any) -> None:
        for start in range(0, len(ids), 500):
            rows = await conn.execute(
                sa.select(memories.c.id, memories.c.user_id).where(memories.c.id.in_(ids[start : start + 500]))
            )
            owners.update({row[0]: row[1] for row in rows})

    await context.records.run_transaction(work, write=False, op="import conflicts")  # type: ignore[attr-defined]
    foreign = sorted(i for i, owner in owners.items() if owner != user_id)
    if foreign:
        raise MemoryValidationError(
            "records",
            f"{len(foreign)} memory ids already belong to another user "
            f"(first: {foreign[0]}); import into another store",
        )
    existing = [i for i in ids if i in owners]
    if not existing:
        return records
    if on_conflict == "error":
        raise MemoryValidationError("records", f"{len(existing)} memories already exist (first: {existing[0]})")
    if on_conflict == "skip":
        report.skipped = len(existing)
        return [r for r in records if r.item.id not in owners]
    await context.adelete(user_id, existing)
    report.replaced = len(existing)
    return records


def _record_item(data: dict[str, Any], where: str, user_id: str) -> MemoryItem:
    """The item of the record at ``where`` (``records[3]``), its fields (a fact's times in its metadata too) checked,
    errors naming the record: an out-of-range time written here would make every later read of the user fail."""
    data = {k: v for k, v in data.items() if k not in ("namespace", "space", "embedding")}
    data["user_id"] = user_id
    metadata = data.get("metadata") or {}
    try:
        if isinstance(metadata, dict) and metadata.get("kind") == FACT:
            for key in _FACT_TIMES:
                if metadata.get(key) is not None:
                    as_utc(metadata[key], f"metadata.{key}")
        return MemoryItem.create(turn=isinstance(metadata, dict) and TURN_SIGNATURE_KEY in metadata, **data)
    except MemoryValidationError as exc:
        message = str(exc).removeprefix(f"{exc.field}: ")
        raise MemoryValidationError(f"{where}.{exc.field}", message) from None


def _table_plan(tables: dict[str, Any], user_id: str) -> list[tuple[sa.Table, list[dict[str, Any]]]]:
    """The rows to write per registered table, as the user's, each time column checked (epoch seconds in range)."""
    known = {t.name: t for t in user_scoped_tables()}
    plan: list[tuple[sa.Table, list[dict[str, Any]]]] = []
    for name, rows in tables.items():
        table = known.get(name)
        if table is None or name in SKIP_TABLES:
            logger.warning("import: table %r is not registered here; its rows are left out", name)
            continue
        skip = autoincrement_columns(table)
        times = {c.name for c in table.c if isinstance(c.type, sa.Double)}  # the lifecycle tables' times
        clean = []
        for position, row in enumerate(rows):
            values = {k: uncell(v) for k, v in row.items() if k in table.c and k not in skip}
            for key in times & set(values):
                values[key] = _epoch_seconds(values[key], f"tables.{name}[{position}].{key}")
            values["user_id"] = user_id
            clean.append(values)
        plan.append((table, clean))
    return plan


def _epoch_seconds(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MemoryValidationError(field, f"expected epoch seconds, got {type(value).__name__}")
    as_utc(value, field)  # bounded; the number itself is kept (a datetime would round it)
    return value


async def _aimport_tables(context: StoreContext, plan: list[tuple[sa.Table, list[dict[str, Any]]]]) -> dict[str, int]:
    counts: dict[str, int] = {}

    async def work(conn: Any) -> None:
        for table, rows in plan:
            keys = [c.name for c in table.primary_key.columns if c.name not in autoincrement_columns(table)]
            for row in rows:
                if keys and all(k in row for k in keys):
                    await conn.execute(sa.delete(table).where(*(table.c[k] == row[k] for k in keys)))
            if rows:
                await conn.execute(sa.insert(table), rows)
            counts[table.name] = len(rows)

    await context.records.run_transaction(work, write=True, op="import tables")  # type: ignore[attr-defined]
    return counts


async def _arefresh_semantic(context: StoreContext, user_id: str, records: list[Record]) -> None:
    """Reload the user's semantic index and rebuild their graph from the imported facts."""
    if not any(r.item.memory_type is MemoryType.SEMANTIC for r in records):
        return
    await areset_semantic_state(context, user_id)
    # the graph each open memory of the user was given (``graph_store=``), else the configured one
    tier_sets = [m.deps.tiers for m in live_memories(context, user_id)] or [TierSet(context, user_id=user_id)]
    graphs = {id(tiers.semantic.graph.store): tiers.semantic for tiers in tier_sets}
    for semantic in graphs.values():
        await semantic.arebuild_graph()


async def _aimport_working(context: StoreContext, working: list[dict[str, Any]], user_id: str) -> int:
    targets = live_memories(context, user_id)
    if not working or not targets:
        return 0
    items = [_record_item(dict(data), f"working[{n}]", user_id) for n, data in enumerate(working)]
    for memory in targets:
        for item in items:
            await memory.deps.tiers.working.aadd(item)
    return len(items)


__all__ = ["aimport_user"]
