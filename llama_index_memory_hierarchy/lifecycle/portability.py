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

``aexport_session`` writes a session as Markdown or JSON: the turns with their times, the
running summary, and what was remembered from it (facts distilled from its turns, session
summaries, insights, perceptions).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa
from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.lifecycle.consolidation import STAGE_SEMANTIC, SUMMARY_KIND
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.sessions import live_memories
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, user_scoped_tables
from llama_index_memory_hierarchy.tiers.semantic import areset_semantic_state
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType, file_sha256, parse_iso, validate_identifier

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "llama-index-memory-hierarchy/user-export"
EXPORT_VERSION = 1
_PAGE = 1000
#: Metadata keys of a turn as ``put()`` stored it (``provenance.SIGNATURE_KEY``, ``session_history.CHAT_MESSAGE_KEY``
#: and its blocks' ``FILE_KEY``; those modules are layers above): a turn is imported whole, whatever its length, as it
#: was stored, and its blocks' files are the imported ones.
_TURN_SIGNATURE_KEY = "chat_signature"
_TURN_MESSAGE_KEY = "chat_message"
_BLOCK_FILE_KEY = "lmh_file"
_SKIP_TABLES = {memories.name, index_outbox.name}


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


# ---------------------------------------------------------------------------------------------- encoding
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode_vector(vector: np.ndarray | None) -> str | None:
    return None if vector is None else _b64(np.asarray(vector, dtype="<f4").tobytes())


def _decode_vector(data: str | None, field: str) -> np.ndarray | None:
    if data is None:
        return None
    try:
        return np.frombuffer(base64.b64decode(data, validate=True), dtype="<f4").astype(np.float32)
    except (ValueError, TypeError) as exc:
        raise MemoryValidationError(field, f"not a base64 float32 vector: {exc}") from None


def _cell(value: Any) -> Any:
    return {"$b64": _b64(value)} if isinstance(value, (bytes, bytearray, memoryview)) else value


def _uncell(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"])
    return value


def _dump_item(record: Record) -> dict[str, Any]:
    data = record.item.model_dump(mode="json", exclude={"score", "explanation"})
    data["namespace"] = record.namespace
    data["space"] = record.space
    data["embedding"] = _encode_vector(record.embedding)
    return data


def _write_json(path: Path, document: dict[str, Any]) -> None:
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


def _autoincrement_columns(table: sa.Table) -> set[str]:
    return {c.name for c in table.primary_key.columns if c.autoincrement is True}


# ---------------------------------------------------------------------------------------------- export
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
            limit=_PAGE,
            offset=len(records),
            with_embeddings=True,  # type: ignore[arg-type]
        )
        records.extend(page)
        if len(page) < _PAGE:
            break
    items = [_dump_item(r) for r in records]
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
            files.append({"ref": file["ref"], "sha256": file.get("sha256"), "ext": file.get("ext"), "data": _b64(data)})
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
    await asyncio.to_thread(_write_json, path, document)
    await LifecycleStore(context).alog(user_id, "export", {"records": report.records, "files": report.files})
    return report


async def _aread_tables(context: StoreContext, user_id: str) -> dict[str, list[dict[str, Any]]]:
    async def work(conn: Any) -> dict[str, list[dict[str, Any]]]:
        existing = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
        out: dict[str, list[dict[str, Any]]] = {}
        for table in user_scoped_tables():
            if table.name in _SKIP_TABLES or table.name not in existing:
                continue
            skip = _autoincrement_columns(table)
            order = [c for c in table.primary_key.columns]
            rows = await conn.execute(sa.select(table).where(table.c.user_id == user_id).order_by(*order))
            out[table.name] = [{k: _cell(v) for k, v in row.items() if k not in skip} for row in rows.mappings()]
        return out

    return await context.records.run_transaction(work, write=False, op="export tables")  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- import
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
    document = await asyncio.to_thread(_read_document, Path(path))
    target = validate_identifier(user_id or document.get("user_id"), "user_id")
    files = _decode_files(document.get("files") or [])
    await asyncio.to_thread(_check_file_refs, document.get("records") or [], files, Path(path).parent)
    return await context.runtime.arun(_aimport(context, document, target, on_conflict, files))


def _decode_files(files: Any) -> list[tuple[str, str, bytes]]:
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


def _read_document(path: Path) -> dict[str, Any]:
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


async def _aimport(
    context: StoreContext,
    document: dict[str, Any],
    user_id: str,
    on_conflict: str,
    files: list[tuple[str, str, bytes]],
) -> ImportReport:
    store = LifecycleStore(context)
    await store.aensure_tables()
    report = ImportReport(user_id=user_id)
    refs = await _aimport_files(context, files, user_id, report)
    exported_space = document.get("text_space")
    current_space = await context.aspace()
    records: list[Record] = []
    for position, data in enumerate(document.get("records") or []):
        data = dict(data)
        namespace = validate_identifier(data.pop("namespace", "memory"), f"records[{position}].namespace")
        space = data.pop("space", None)
        vector = _decode_vector(data.pop("embedding", None), f"records[{position}].embedding")
        data["user_id"] = user_id
        metadata = data.get("metadata") or {}
        file = metadata.get("file")
        if isinstance(file, dict) and file.get("ref") in refs:
            data["metadata"] = metadata = {**metadata, "file": {**file, "ref": refs[file["ref"]]}}
        raw = metadata.get(_TURN_MESSAGE_KEY)
        if isinstance(raw, str) and refs:
            data["metadata"] = metadata = {**metadata, _TURN_MESSAGE_KEY: _remap_block_files(raw, refs)}
        item = MemoryItem.create(turn=_TURN_SIGNATURE_KEY in metadata, **data)
        if vector is not None and space == exported_space and space != current_space:
            vector, space = None, None  # another text model: embed again
            report.reembedded += 1
        elif vector is not None:
            report.reused_embeddings += 1
        records.append(Record(item=item, namespace=namespace, embedding=vector, space=space))
    records = await _aresolve_conflicts(context, user_id, records, on_conflict, report)
    for start in range(0, len(records), _PAGE):
        batch = records[start : start + _PAGE]
        await context.awrite([r for r in batch if r.embedding is not None], embed=False)
        missing = [r for r in batch if r.embedding is None]
        if missing:
            await context.awrite(missing, embed=True)
    report.records = len(records)
    report.tables = await _aimport_tables(context, document.get("tables") or {}, user_id)
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
        stored = block.get(_BLOCK_FILE_KEY) if isinstance(block, dict) else None
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


async def _aimport_tables(context: StoreContext, tables: dict[str, Any], user_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    known = {t.name: t for t in user_scoped_tables()}
    plan: list[tuple[sa.Table, list[dict[str, Any]]]] = []
    for name, rows in tables.items():
        table = known.get(name)
        if table is None or name in _SKIP_TABLES:
            logger.warning("import: table %r is not registered here; its rows are left out", name)
            continue
        skip = _autoincrement_columns(table)
        clean = []
        for row in rows:
            values = {k: _uncell(v) for k, v in row.items() if k in table.c and k not in skip}
            values["user_id"] = user_id
            clean.append(values)
        plan.append((table, clean))

    async def work(conn: Any) -> None:
        for table, rows in plan:
            keys = [c.name for c in table.primary_key.columns if c.name not in _autoincrement_columns(table)]
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
    items = [MemoryItem.create(**{**data, "user_id": user_id}) for data in working]
    for memory in targets:
        for item in items:
            await memory.deps.tiers.working.aadd(item)
    return len(items)


# ---------------------------------------------------------------------------------------------- sessions
async def aexport_session(
    deps: LifecycleDeps,
    session_id: str,
    path: str | os.PathLike[str] | None = None,
    *,
    format: Literal["markdown", "json"] = "markdown",
) -> str:
    """A readable record of one session (turns, times, what was remembered); written to ``path`` if given."""
    if format not in ("markdown", "json"):
        raise MemoryValidationError("format", f"must be 'markdown' or 'json', got {format!r}")
    session_id = validate_identifier(session_id, "session_id")
    data = await _asession_data(deps, session_id)
    text = json.dumps(data, ensure_ascii=False, indent=2) if format == "json" else _session_markdown(data)
    if path is not None:
        await asyncio.to_thread(_write_text, Path(path), text)
    return text


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def _asession_data(deps: LifecycleDeps, session_id: str) -> dict[str, Any]:
    user = deps.user_id
    events = await deps.tiers.episodic.aget_session(session_id)
    turns = [e for e in events if e.metadata.get("role") and e.metadata.get("kind") != SUMMARY_KIND]
    others = [e for e in events if not e.metadata.get("role") and e.metadata.get("kind") != SUMMARY_KIND]
    summaries = [e for e in events if e.metadata.get("kind") == SUMMARY_KIND]
    ids = {e.id for e in events}
    distilled = await deps.store.aconsolidated(user, STAGE_SEMANTIC, sorted(ids)) if ids else {}
    facts: list[dict[str, Any]] = []
    insights: list[dict[str, Any]] = []
    if await deps.context.records.count(user, memory_type=MemoryType.SEMANTIC):
        for item in await deps.tiers.semantic.aquery():
            sources = [s for s in item.metadata.get("source_ids") or [] if s in ids]
            if not sources:
                continue
            entry = {
                "id": item.id,
                "content": item.content,
                "sources": sources,
                "valid_at": item.metadata.get("valid_at"),
                "invalid_at": item.metadata.get("invalid_at"),
            }
            (insights if item.metadata.get("origin") == "reflection" else facts).append(entry)
    perceptions = []
    if await deps.context.records.count(user, memory_type=MemoryType.PERCEPTUAL):
        perceptions = [
            {
                "id": p.id,
                "timestamp": p.timestamp.isoformat(),
                "modality": p.metadata.get("modality"),
                "content": p.content,
            }
            for p in await deps.tiers.perceptual.aquery(session_id=session_id)
        ]
    running = await deps.store.aget_summary(user, session_id)
    return {
        "user_id": user,
        "session_id": session_id,
        "started": events[0].timestamp.isoformat() if events else None,
        "ended": events[-1].timestamp.isoformat() if events else None,
        "turns": [
            {
                "id": t.id,
                "timestamp": t.timestamp.isoformat(),
                "role": t.metadata.get("role"),
                "content": t.content,
                "importance": t.importance,
                "distilled": t.id in distilled,
            }
            for t in turns
        ],
        "events": [{"id": e.id, "timestamp": e.timestamp.isoformat(), "content": e.content} for e in others],
        "running_summary": running["summary"] if running else None,
        "summaries": [{"id": s.id, "timestamp": s.timestamp.isoformat(), "content": s.content} for s in summaries],
        "facts": facts,
        "insights": insights,
        "perceptions": perceptions,
    }


def _session_markdown(data: dict[str, Any]) -> str:
    def when(value: str | None) -> str:
        return parse_iso(value).strftime("%Y-%m-%d %H:%M UTC") if value else "?"

    lines = [f"# Session {data['session_id']}", ""]
    lines.append(f"- User: {data['user_id']}")
    lines.append(f"- From {when(data['started'])} to {when(data['ended'])}; {len(data['turns'])} turns")
    lines += ["", "## Transcript", ""]
    for turn in data["turns"]:
        text = turn["content"].replace("\n", "\n  ")
        lines.append(f"- **{turn['role']}** ({when(turn['timestamp'])}): {text}")
    if data["events"]:
        lines += ["", "## Other events", ""]
        lines += [f"- ({when(e['timestamp'])}) {e['content']}" for e in data["events"]]
    lines += ["", "## What was remembered", ""]
    remembered = False
    if data["running_summary"]:
        lines += ["### Running summary", "", data["running_summary"], ""]
        remembered = True
    if data["summaries"]:
        lines += ["### Session summaries", ""]
        lines += [f"- {s['content']}" for s in data["summaries"]]
        lines.append("")
        remembered = True
    if data["facts"]:
        lines += ["### Facts", ""]
        for fact in data["facts"]:
            status = " (superseded)" if fact.get("invalid_at") else ""
            lines.append(f"- {fact['content']}{status} — from {len(fact['sources'])} turn(s)")
        lines.append("")
        remembered = True
    if data["insights"]:
        lines += ["### Insights", ""]
        lines += [f"- {i['content']}" for i in data["insights"]]
        lines.append("")
        remembered = True
    if data["perceptions"]:
        lines += ["### Perceptions", ""]
        lines += [f"- [{p['modality']}] {p['content']}" for p in data["perceptions"]]
        lines.append("")
        remembered = True
    if not remembered:
        lines.append("Nothing consolidated from this session yet (run consolidate() or end_session()).")
    return "\n".join(lines).rstrip() + "\n"


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportReport",
    "ImportReport",
    "aexport_session",
    "aexport_user",
    "aimport_user",
]
