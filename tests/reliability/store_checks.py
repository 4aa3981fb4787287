"""Independent consistency checks of a persist folder, used by the reliability and security tests.

They read SQLite and the vector index directly, so a bug in the package's own maintenance
code cannot hide a bug elsewhere.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class StoreState:
    """What a folder holds, read straight from SQLite."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> row
    outbox: int = 0
    #: Whether vectors are kept in qdrant-edge folders, which the outbox feeds (else it is the change log the
    #: processes' in-memory mirrors follow, kept by design).
    vectors_on_disk: bool = False
    fts_rows: int = 0
    fts_integrity: str = ""


def read_sqlite(persist_dir: Path) -> StoreState:
    """Every memory row, the outbox size and the FTS5 state, read with the stdlib driver."""
    db = sqlite3.connect(f"file:{persist_dir / 'memory.db'}?mode=ro", uri=True)
    try:
        state = StoreState(vectors_on_disk=(persist_dir / "vectors").is_dir())
        cursor = db.execute(
            "SELECT id, user_id, session_id, namespace, memory_type, content, embedding, space, seq, metadata "
            "FROM memories"
        )
        for memory_id, user, session, namespace, kind, content, embedding, space, seq, metadata in cursor:
            state.rows[memory_id] = {
                "user_id": user,
                "session_id": session,
                "namespace": namespace,
                "memory_type": kind,
                "content": content,
                "embedding": None if embedding is None else np.frombuffer(embedding, dtype="<f4"),
                "space": space,
                "seq": seq,
                "metadata": json.loads(metadata),
            }
        state.outbox = db.execute("SELECT count(*) FROM index_outbox").fetchone()[0]
        state.fts_rows = db.execute("SELECT count(*) FROM memories_fts_docsize").fetchone()[0]
    finally:
        db.close()
    rw = sqlite3.connect(str(persist_dir / "memory.db"))
    try:
        rw.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        state.fts_integrity = "ok"
    except sqlite3.DatabaseError as exc:
        state.fts_integrity = str(exc)
    finally:
        rw.close()
    return state


async def vector_ids(context: Any) -> dict[str, set[str]]:
    """Point ids of every vector space on disk (qdrant-edge folders) or in the records (the in-process
    mirrors, which read them from there), through the context's public API."""
    from llama_index_memory_hierarchy.stores.reconcile import space_stats

    spaces = {space: dim for space, (_, dim) in (await space_stats(context.records)).items()}
    vectors = context.persist_dir / "vectors"
    for folder in sorted(vectors.iterdir()) if vectors.is_dir() else []:
        spaces[folder.name] = json.loads((folder / "edge_config.json").read_text())["vectors"][""]["size"]
    return {space: await (await context.avector_index(space, dim)).ids() for space, dim in sorted(spaces.items())}


def assert_graph_agrees(state: StoreState, persist_dir: Path) -> None:
    """Graph relations of every user == the (subject, predicate, object) keys of their current facts."""
    expected: dict[str, set[tuple[str, str, str]]] = {}
    for row in state.rows.values():
        meta = row["metadata"]
        if row["memory_type"] == "semantic" and meta.get("kind") == "fact" and meta.get("invalid_at") is None:
            key = (meta["subject_id"], meta["predicate"], meta["object_id"])
            expected.setdefault(row["user_id"], set()).add(key)
    found: dict[str, set[tuple[str, str, str]]] = {}
    if (persist_dir / "graph.db").exists():
        db = sqlite3.connect(f"file:{persist_dir / 'graph.db'}?mode=ro", uri=True)
        try:
            for source, label, target, user in db.execute(
                "SELECT source_id, label, target_id, user_id FROM graph_relations"
            ):
                found.setdefault(user, set()).add((source, label, target))
        finally:
            db.close()
    for user in set(expected) | set(found):
        want, have = expected.get(user, set()), found.get(user, set())
        assert want == have, f"graph of {user}: {len(want - have)} facts without a relation, {len(have - want)} stray"


def assert_indexes_agree(state: StoreState, points: dict[str, set[str]]) -> None:
    """Vector points == records with an embedding, per space; FTS rows == records; outbox empty."""
    expected: dict[str, set[str]] = {}
    for memory_id, row in state.rows.items():
        if row["embedding"] is not None:
            expected.setdefault(row["space"], set()).add(memory_id)
    for space in set(expected) | set(points):
        want, have = expected.get(space, set()), points.get(space, set())
        assert want == have, f"space {space}: {len(want - have)} records without a point, {len(have - want)} stray"
    assert state.fts_rows == len(state.rows), f"FTS has {state.fts_rows} rows for {len(state.rows)} records"
    assert state.fts_integrity == "ok", state.fts_integrity
    assert state.outbox == 0 or not state.vectors_on_disk, f"{state.outbox} outbox entries left after open"


@functools.cache
def hashing() -> Any:
    """One lightweight hashing embedding per session (same vector space as ``embed_model="hashing"``):
    contexts are keyed by the model instance, so sharing it shares the stores and the fitted vectorizer."""
    from llama_index_memory_hierarchy.embeddings import HashingEmbedding

    return HashingEmbedding()


def clone_folder(source: Path, target: Path) -> Path:
    """Copy a persist folder keeping its sparse files sparse (qdrant-edge preallocates 32 MB maps)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    (target / ".lock").unlink(missing_ok=True)
    return target


@functools.cache
def minilm() -> Any:
    """The bundled all-MiniLM-L6-v2, loaded once per session (contexts are keyed by the instance)."""
    from llama_index_memory_hierarchy.embeddings import load_default_model

    return load_default_model()
