"""``verify_indexes``: the full consistency check of a deployment's derived state.

The stores' half (vector ids per space, the keyword index's integrity, pending outbox entries)
is :func:`~llama_index_memory_hierarchy.stores.reconcile.acheck_indexes`; this adds what only the
layers above the stores know: user erasures that began and did not finish, and graph nodes or
stored files of users who have no records (a half-erased user). For tests and operators;
``repair=True`` fixes vector differences.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.lifecycle.erasure import user_digest
from llama_index_memory_hierarchy.lifecycle.tables import COMPACTION_PENDING, LifecycleStore
from llama_index_memory_hierarchy.perception.files import user_dir_name
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.reconcile import IndexReport, acheck_indexes, as_config

logger = logging.getLogger(__name__)

__all__ = ["averify_indexes", "verify_indexes"]


async def averify_indexes(context: StoreContext, *, repair: bool = False) -> IndexReport:
    """Full consistency check of the derived indexes and erasures against the records of ``context``."""

    async def run() -> IndexReport:
        report = await acheck_indexes(context, repair=repair)
        await _acheck_erasures(context, report)
        return report

    return await context.runtime.arun(run())


async def _acheck_erasures(context: StoreContext, report: IndexReport) -> None:
    """Unfinished erasures, and graph nodes or stored files of users that have no records (a half-erased user)."""
    pending = await LifecycleStore(context).apending_erasures()
    report.pending_erasures = sorted(u for u in pending if u != COMPACTION_PENDING)
    hint = "it is finished when a memory next opens these stores (or run `lmh forget --everything --yes --user ID`)"
    for user in report.pending_erasures:
        report.problems.append(f"the erasure of user #{user_digest(user)} began and did not finish; {hint}")
    if COMPACTION_PENDING in pending:
        report.problems.append(f"an erasure's compaction (vector folders, SQLite files) did not finish; {hint}")
    users = set(await context.records.users())  # type: ignore[attr-defined]
    try:
        graph_users = getattr(context.graph.store, "users", None)
    except Exception as exc:  # a graph backend that cannot open here is reported by its own users
        logger.warning("graph store not checked: %s", exc)
        graph_users = None
    if graph_users is not None:
        for user, nodes in (await asyncio.to_thread(graph_users)).items():
            if user not in users:
                report.graph_orphans[user_digest(user)] = nodes
                report.problems.append(
                    f"the graph holds {nodes} nodes of user #{user_digest(user)}, who has no records "
                    "(a half-erased user?); `lmh reindex` rebuilds the graph from the facts"
                )
    for user, rows in (await LifecycleStore(context).aleftover_users()).items():
        if user not in users:
            report.lifecycle_orphans[user_digest(user)] = rows
            report.problems.append(
                f"{rows} consolidation marks or summaries of user #{user_digest(user)}, who has no records "
                "(a half-erased user?); `lmh forget --everything --yes --user ID` removes them"
            )
    files = context.persist_dir / "files"
    if files.is_dir():
        expected = {user_dir_name(u) for u in users}
        for folder in sorted(p for p in files.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if folder.name not in expected and any(f.is_file() for f in folder.rglob("*")):
                report.file_orphans.append(folder.name)
                report.problems.append(
                    f"stored files in {folder} belong to no user with records (a half-erased user?); "
                    "finish the erasure or delete the folder"
                )


def verify_indexes(config: MemoryConfig | str | Path, *, repair: bool = False, embed_model: Any = None) -> IndexReport:
    """Sync twin of :func:`averify_indexes` that opens (and closes) the stores of ``config``."""
    context = StoreContext.acquire(as_config(config), embed_model=embed_model)  # no on_open: report
    try:
        return context.runtime.run(averify_indexes(context, repair=repair))
    finally:
        context.release()
