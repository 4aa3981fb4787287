"""``lmh migrate --to CONFIG``: move an embedded folder to a server deployment, then verify counts.

What moves, from ``<persist_dir>`` (the embedded default) to the stores ``CONFIG`` names:

* **records**: every row of every table on the record store metadata (``memories`` with their
  embeddings, and tables other modules registered), batch by batch. A memory keeps its id,
  times, access counts and embedding; nothing is re-embedded. For each embedded memory an
  outbox ``upsert`` is written in the same transaction, and the target's vector index is then
  filled by draining that outbox (the same path every write takes);
* **graph**: every node (with its embedding) and relation of ``graph.db``, into the target
  graph store (``graph_store_url``: Neo4j, FalkorDB, or SQLite in the target folder);
* **files**: the content-addressed perception files under ``files/``, into the target
  ``persist_dir`` (a folder every process of the deployment can read, e.g. a shared volume).

Re-running is safe: rows, points, nodes and files already in the target are skipped, so an
interrupted migration is simply run again. The source folder is locked for the duration (no
process may write to it meanwhile) and never modified.

Verification (the report's ``ok``): every source row is in the target (by key) with as many
rows per user and namespace, every embedded memory has its point in the target vector index of
its space, every graph node and relation exists in the target graph, every file exists with
its size and SHA-256.

Use :func:`migrate` (or :func:`amigrate`) from Python, or :func:`main` with command-line
arguments (the ``lmh`` CLI wires ``lmh migrate`` to it)::

    lmh migrate --from ./memory_data --to deployment.toml
    LMH_RECORD_STORE_URL=postgresql+asyncpg://... LMH_QDRANT_URL=http://... lmh migrate --to env
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a backport
    import tomli as tomllib

from llama_index_memory_hierarchy.config import ENV_PREFIX, MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
from llama_index_memory_hierarchy.runtime import get_runtime
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.graph import UserGraph, open_graph_store
from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME, SQLitePropertyGraphStore
from llama_index_memory_hierarchy.stores.lock import FolderLock
from llama_index_memory_hierarchy.stores.reconcile import analyzer_version, set_analyzer_version
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.schema import index_outbox, memories, metadata

logger = logging.getLogger(__name__)

__all__ = ["MigrationReport", "amigrate", "load_target_config", "main", "migrate"]

#: Rows per batch (one target transaction each).
BATCH = 500
#: Tables that are bookkeeping, never copied: the outbox is rebuilt, the schema version is the target's own
#: (its keyword analysis version row follows the copied keyword text: :func:`_copy_analyzer_version`).
_SKIP_TABLES = {"index_outbox", "schema_info"}
Progress = Callable[[str], None]


@dataclass
class Check:
    """One verified quantity: how many the source has and how many of those the target has."""

    what: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.target == self.source


@dataclass
class MigrationReport:
    """What was copied and what the verification found."""

    source: str
    target: str
    copied: dict[str, int] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check found in the target everything the source has."""
        return all(check.ok for check in self.checks)

    @property
    def problems(self) -> list[str]:
        """The failed checks, in words."""
        return [f"{c.what}: source {c.source}, found in target {c.target}" for c in self.checks if not c.ok]

    def summary(self) -> str:
        """A human-readable table of the copy and the checks."""
        lines = [f"migrated {self.source} -> {self.target}"]
        lines += [f"  copied {name}: {count}" for name, count in self.copied.items()]
        lines += [f"  {'ok ' if c.ok else 'BAD'} {c.what}: {c.target}/{c.source}" for c in self.checks]
        lines.append("verified: all counts match" if self.ok else "verification FAILED")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "copied": self.copied,
            "checks": [{"what": c.what, "source": c.source, "target": c.target, "ok": c.ok} for c in self.checks],
        }


# ------------------------------------------------------------------------------------------------
# configuration
# ------------------------------------------------------------------------------------------------


def load_target_config(
    spec: str | os.PathLike[str] | MemoryConfig, environ: dict[str, str] | None = None
) -> MemoryConfig:
    """The target deployment: a ``MemoryConfig``, ``"env"`` (``LMH_*`` variables), or a file.

    Files: ``.json`` / ``.toml`` (MemoryConfig fields; a TOML ``[memory]`` or ``[lmh]`` table
    is used when present) or ``.env`` style ``KEY=VALUE`` lines (``LMH_`` prefix optional).
    """
    if isinstance(spec, MemoryConfig):
        return spec
    if str(spec) == "env":
        return MemoryConfig.from_env(environ=environ)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise MemoryValidationError("to", f"{path}: no such config file (give a .toml/.json/.env file, or 'env')")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    elif path.suffix == ".toml":
        data = tomllib.loads(text)
        data = data.get("memory") or data.get("lmh") or data
    else:
        values: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            key = key.strip().removeprefix("export ").strip()
            values[key if key.startswith(ENV_PREFIX) else ENV_PREFIX + key.upper()] = value.strip().strip("'\"")
        return MemoryConfig.from_env(environ=values)
    if not isinstance(data, dict):
        raise MemoryValidationError("to", f"{path}: expected a table of MemoryConfig fields")
    return MemoryConfig.create(**data)


def _describe(config: MemoryConfig) -> str:
    parts = [f"records={redact_url(config.resolved_record_store_url)}", f"vectors={config.resolved_vector_backend}"]
    if config.graph_store_url:
        parts.append(f"graph={redact_url(config.graph_store_url)}")
    parts.append(f"files={Path(config.persist_dir).expanduser().resolve() / 'files'}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------------------


def _key_columns(table: sa.Table) -> list[sa.Column[Any]]:
    """Columns that identify a row across databases: ``memories.id``, else the primary key."""
    if table.name == "memories":
        return [table.c.id]
    return list(table.primary_key.columns)


async def _copy_table(source: Any, target: Any, table: sa.Table, progress: Progress) -> tuple[int, int]:
    """Copy the rows the target lacks; return (source rows, rows inserted)."""
    keys = _key_columns(table)
    if not keys:
        raise StoreError(f"table {table.name} has no primary key: cannot migrate it safely")
    is_memories = table.name == "memories"
    async with target.engine.connect() as conn:
        target_columns = {c["name"] for c in await conn.run_sync(lambda s: sa.inspect(s).get_columns(table.name))}
    async with source.engine.connect() as conn:
        source_columns = {c["name"] for c in await conn.run_sync(lambda s: sa.inspect(s).get_columns(table.name))}
    columns = [c for c in table.c if c.name in source_columns and c.name in target_columns]
    if is_memories:
        columns = [c for c in columns if c.name != "seq"]  # the target numbers its own rows
    order = list(table.primary_key.columns) or keys
    total = inserted = 0
    offset = 0
    while True:
        async with source.engine.connect() as conn:
            result = await conn.execute(sa.select(*columns).order_by(*order).limit(BATCH).offset(offset))
            rows = [dict(row) for row in result.mappings()]
        if not rows:
            return total, inserted
        offset += len(rows)
        total += len(rows)

        async def work(conn: Any, rows: list[dict[str, Any]] = rows) -> int:
            if len(keys) == 1:
                wanted = [row[keys[0].name] for row in rows]
                found = await conn.execute(sa.select(keys[0]).where(keys[0].in_(wanted)))
                existing = {(value,) for value in found.scalars()}
            else:
                existing = set()
                for row in rows:
                    clause = sa.and_(*(k == row[k.name] for k in keys))
                    if (await conn.execute(sa.select(sa.literal(1)).where(clause))).first():
                        existing.add(tuple(row[k.name] for k in keys))
            fresh = [row for row in rows if tuple(row[k.name] for k in keys) not in existing]
            if fresh:
                await conn.execute(sa.insert(table), fresh)
                if is_memories:
                    ops = [
                        {"op": "upsert", "memory_id": r["id"], "user_id": r["user_id"], "space": r["space"]}
                        for r in fresh
                        if r.get("embedding") is not None
                    ]
                    if ops:
                        await conn.execute(sa.insert(index_outbox), ops)
            return len(fresh)

        inserted += await target.run_transaction(work, write=True, op=f"migrate {table.name}")
        progress(f"{table.name}: {total} rows read, {inserted} copied")


async def _copy_analyzer_version(
    source: SQLRecordStore, target: SQLRecordStore, target_was_empty: bool, report: MigrationReport
) -> None:
    """Mark the target with the keyword analysis its copied keyword text was written with.

    Why: the text is copied as it is, so a store written by an older analysis must keep saying so
    (the warning that names ``lmh reindex``); a target that held records already keeps the older
    of the two versions.
    """
    version = await analyzer_version(source)
    if not target_was_empty:
        version = min(version, await analyzer_version(target))
    await target.run_transaction(lambda conn: set_analyzer_version(conn, version), op="migrate analyzer version")
    report.checks.append(Check("keyword analysis version", version, await analyzer_version(target)))


async def _fix_sequences(target: Any, tables: Sequence[sa.Table]) -> None:
    """PostgreSQL: move serial sequences past copied explicit keys (tables whose key was copied)."""
    if target.dialect != "postgresql":
        return

    async def work(conn: Any) -> None:
        for table in tables:
            if table.name == "memories":
                continue
            for column in table.primary_key.columns:
                if not column.autoincrement or not isinstance(column.type, sa.Integer):
                    continue
                sequence = (
                    await conn.execute(sa.select(sa.func.pg_get_serial_sequence(table.name, column.name)))
                ).scalar()
                if sequence:
                    await conn.execute(
                        sa.text(
                            f'SELECT setval(:seq, GREATEST((SELECT COALESCE(MAX("{column.name}"), 0) '
                            f'FROM "{table.name}"), 1))'
                        ),
                        {"seq": sequence},
                    )

    await target.run_transaction(work, write=True, op="migrate sequences")


async def _check_records(source: Any, target: Any, tables: Sequence[sa.Table], report: MigrationReport) -> None:

    for table in tables:
        keys = _key_columns(table)
        async with source.engine.connect() as conn:
            source_keys = {tuple(row) for row in await conn.execute(sa.select(*keys))}
        found = 0
        values = sorted(source_keys)
        async with target.engine.connect() as conn:
            if len(keys) == 1:
                for start in range(0, len(values), BATCH):
                    chunk = [v[0] for v in values[start : start + BATCH]]
                    found += int(
                        (
                            await conn.execute(sa.select(sa.func.count()).select_from(table).where(keys[0].in_(chunk)))
                        ).scalar_one()
                    )
            else:
                for value in values:
                    clause = sa.and_(*(k == v for k, v in zip(keys, value, strict=True)))
                    found += int((await conn.execute(sa.select(sa.literal(1)).where(clause))).first() is not None)
        report.checks.append(Check(f"rows of {table.name}", len(source_keys), found))
    # per user and namespace: the target holds at least the source's memories (exactly, for a fresh target)
    m = memories.c
    scope = sa.select(m.user_id, m.namespace, sa.func.count()).group_by(m.user_id, m.namespace)
    async with source.engine.connect() as conn:
        per_scope = {(u, n): c for u, n, c in await conn.execute(scope)}
    async with target.engine.connect() as conn:
        target_scope = {(u, n): c for u, n, c in await conn.execute(scope)}
    short = sum(max(0, count - target_scope.get(key, 0)) for key, count in per_scope.items())
    total = sum(per_scope.values())
    report.checks.append(Check(f"memories per user and namespace ({len(per_scope)} scopes)", total, total - short))


async def _check_vectors(source: Any, context: Any, report: MigrationReport) -> None:

    m = memories.c
    async with source.engine.connect() as conn:
        rows = (await conn.execute(sa.select(m.id, m.space, m.embedding).where(m.embedding.is_not(None)))).all()
    by_space: dict[str, tuple[int, set[str]]] = {}
    for memory_id, space, blob in rows:
        dim, ids = by_space.get(space, (len(blob) // 4, set()))
        ids.add(memory_id)
        by_space[space] = (dim, ids)
    for space, (dim, ids) in sorted(by_space.items()):
        index = await context.avector_index(space, dim)
        present = await index.ids()
        report.checks.append(Check(f"vectors in space {space}", len(ids), len(ids & present)))


# ------------------------------------------------------------------------------------------------
# graph and files
# ------------------------------------------------------------------------------------------------


def _read_graph(path: Path) -> tuple[list[Any], list[Any]]:
    """Every node (with its embedding) and relation of an embedded ``graph.db``."""
    store = SQLitePropertyGraphStore(path)
    try:
        return store.dump()
    finally:
        store.close()


async def _copy_graph(source_dir: Path, target: MemoryConfig, report: MigrationReport, progress: Progress) -> None:

    path = source_dir / GRAPH_DB_NAME
    if not path.exists():
        return
    nodes, relations = await asyncio.to_thread(_read_graph, path)
    store = await asyncio.to_thread(open_graph_store, target)
    graph = UserGraph(store)
    try:
        for start in range(0, len(nodes), BATCH):  # nodes first: relations then join existing endpoints
            await graph.aupsert(nodes[start : start + BATCH], [])
        for start in range(0, len(relations), BATCH):
            await graph.aupsert([], relations[start : start + BATCH])
        progress(f"graph: {len(nodes)} nodes, {len(relations)} relations")
        report.copied["graph nodes"] = len(nodes)
        report.copied["graph relations"] = len(relations)
        found_nodes = 0
        found_keys: set[tuple[str, str, str]] = set()
        ids = [node.id for node in nodes]
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            found_nodes += len({n.id for n in await asyncio.to_thread(store.get, None, chunk)} & set(chunk))
            for _, rel, _ in await asyncio.to_thread(store.get_triplets, None, None, None, chunk):
                found_keys.add((rel.source_id, rel.label, rel.target_id))
        wanted = {(r.source_id, r.label, r.target_id) for r in relations}
        report.checks.append(Check("graph nodes", len(nodes), found_nodes))
        report.checks.append(Check("graph relations", len(wanted), len(wanted & found_keys)))
    finally:
        await graph.aclose()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_files(source_dir: Path, target_dir: Path, report: MigrationReport, progress: Progress) -> None:
    """Copy ``files/`` (content-addressed: ``<user>/<xx>/<sha256>.<ext>``), each file atomically."""
    root = source_dir / "files"
    if not root.is_dir():
        return
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".staging" not in p.relative_to(root).parts)
    copied = verified = 0
    for path in files:
        relative = path.relative_to(root)
        destination = target_dir / "files" / relative
        if not (destination.exists() and destination.stat().st_size == path.stat().st_size):
            destination.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=destination.parent, delete=False, prefix=".migrate-") as handle:
                temp = Path(handle.name)
            try:
                shutil.copyfile(path, temp)
                with temp.open("rb") as handle:
                    os.fsync(handle.fileno())
                os.replace(temp, destination)
            finally:
                temp.unlink(missing_ok=True)
            copied += 1
        expected = path.stem if len(path.stem) == 64 else _sha256(path)
        if destination.stat().st_size == path.stat().st_size and _sha256(destination) == expected:
            verified += 1
    if files:
        progress(f"files: {copied} copied, {len(files) - copied} already there")
    report.copied["files"] = copied
    report.checks.append(Check("files (size and SHA-256)", len(files), verified))


# ------------------------------------------------------------------------------------------------
# the migration
# ------------------------------------------------------------------------------------------------


async def amigrate(
    source: str | os.PathLike[str] | MemoryConfig,
    target: str | os.PathLike[str] | MemoryConfig,
    *,
    files: bool = True,
    graph: bool = True,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy an embedded folder (``source``: its path or config) into ``target``, then verify.

    Must run on the package runtime loop (:func:`migrate` does that for you).
    """
    say = progress or (lambda message: logger.info("migrate: %s", message))
    source_config = (
        source if isinstance(source, MemoryConfig) else MemoryConfig.create(persist_dir=Path(source).expanduser())
    )
    target_config = load_target_config(target)
    source_dir = Path(source_config.persist_dir).expanduser().resolve()
    target_dir = Path(target_config.persist_dir).expanduser().resolve()
    if not (source_dir / "memory.db").exists():
        raise MemoryValidationError("from", f"{source_dir} holds no memory.db: not an embedded memory folder")
    if source_config.resolved_record_store_url == target_config.resolved_record_store_url:
        raise MemoryValidationError("to", "the target record store is the source's own database")
    report = MigrationReport(str(source_dir), _describe(target_config))
    lock = await asyncio.to_thread(FolderLock, source_dir)  # nobody writes to the source meanwhile
    src = SQLRecordStore(source_config.resolved_record_store_url, sqlite_synchronous=source_config.sqlite_synchronous)
    context = None
    try:
        await src.start()
        context = await asyncio.to_thread(StoreContext.acquire, target_config, on_open=aresume_erasures)
        dst = context.records
        tables = [t for t in metadata.sorted_tables if t.name not in _SKIP_TABLES]
        async with src.engine.connect() as conn:
            present = set(await conn.run_sync(lambda s: sa.inspect(s).get_table_names()))
        tables = [t for t in tables if t.name in present]
        await dst.create_tables()
        target_was_empty = await dst.count(None, namespace=None) == 0
        for table in tables:
            _, inserted = await _copy_table(src, dst, table, say)
            report.copied[f"rows of {table.name}"] = inserted
        await _fix_sequences(dst, tables)
        await _copy_analyzer_version(src, dst, target_was_empty, report)
        say("indexing vectors from the outbox")
        report.copied["vector operations"] = await context.drain_outbox()
        await _check_records(src, dst, tables, report)
        await _check_vectors(src, context, report)
        if graph:
            await _copy_graph(source_dir, target_config, report, say)
        if files:
            await asyncio.to_thread(_copy_files, source_dir, target_dir, report, say)
    finally:
        await src.close()
        if context is not None:
            await asyncio.to_thread(context.release)
        await asyncio.to_thread(lock.release)
    (logger.info if report.ok else logger.error)("%s", report.summary())
    return report


def migrate(
    source: str | os.PathLike[str] | MemoryConfig,
    target: str | os.PathLike[str] | MemoryConfig,
    **kwargs: Any,
) -> MigrationReport:
    """Sync twin of :func:`amigrate` (runs it on the package runtime)."""
    return get_runtime().run(amigrate(source, target, **kwargs))


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``lmh migrate`` arguments (pass a sub-parser to add them to a larger CLI)."""
    parser = parser or argparse.ArgumentParser(
        prog="lmh migrate", description="Move an embedded memory folder to a server deployment and verify it."
    )
    parser.add_argument(
        "--from",
        dest="source",
        default=os.environ.get(f"{ENV_PREFIX}PERSIST_DIR", "./memory_data"),
        help="the embedded folder (default: $LMH_PERSIST_DIR or ./memory_data)",
    )
    parser.add_argument(
        "--to", dest="target", required=True, help="target config: a .toml/.json/.env file, or 'env' (LMH_* variables)"
    )
    parser.add_argument("--no-files", action="store_true", help="leave perception files where they are")
    parser.add_argument("--no-graph", action="store_true", help="do not copy the knowledge graph")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def run_from_args(args: argparse.Namespace) -> int:
    """Run a parsed ``lmh migrate``; 0 when verified, 1 when a check failed, 2 on an error."""
    try:
        report = migrate(
            args.source,
            args.target,
            files=not args.no_files,
            graph=not args.no_graph,
            progress=lambda message: print(message, file=sys.stderr),
        )
    except (MemoryValidationError, StoreError) as exc:
        print(f"lmh migrate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``lmh migrate`` as a function: ``main(["--from", "./memory_data", "--to", "deploy.toml"])``."""
    return run_from_args(build_parser().parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
