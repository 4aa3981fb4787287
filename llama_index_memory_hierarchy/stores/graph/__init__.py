"""Graph stores: the embedded SQLite default and the bridge to any LlamaIndex ``PropertyGraphStore``.

* :class:`SQLitePropertyGraphStore`: embedded default (``<persist_dir>/graph.db``).
* :func:`open_graph_store`: builds the store a :class:`MemoryConfig` names
  (``graph_store_url``: none = SQLite; ``bolt://``/``neo4j://`` = Neo4j; ``falkor://``/
  ``falkors://``/``redis://`` = FalkorDB).
* :class:`UserGraph`: the user-scoped, async operations semantic memory needs, written
  against the ``PropertyGraphStore`` interface only, so any LlamaIndex graph store plugs in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.graph_stores.types import LabelledNode, PropertyGraphStore, Relation, Triplet

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.graph.sqlite import GRAPH_DB_NAME, SQLitePropertyGraphStore

if TYPE_CHECKING:
    from llama_index_memory_hierarchy.config import MemoryConfig

logger = logging.getLogger(__name__)

__all__ = ["GRAPH_DB_NAME", "SQLitePropertyGraphStore", "UserGraph", "open_graph_store"]

#: Label every node carries in the Cypher stores (their indexes are label-scoped).
_CYPHER_NODE_LABEL = {"FalkorDBPropertyGraphStore": "__Entity__", "Neo4jPropertyGraphStore": "__Node__"}


def open_graph_store(config: MemoryConfig) -> PropertyGraphStore:
    """The graph store ``config.graph_store_url`` names (embedded SQLite when None)."""
    url = config.graph_store_url
    if not url:
        return SQLitePropertyGraphStore.from_persist_dir(config.persist_dir, synchronous=config.sqlite_synchronous)
    scheme = url.split("://", 1)[0].lower()
    if scheme in {"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"}:
        try:
            from llama_index.graph_stores.neo4j import Neo4jPropertyGraphStore
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise StoreError("Neo4j graph store needs: pip install 'llama-index-memory-hierarchy[neo4j]'") from exc
        return Neo4jPropertyGraphStore(
            username=config.graph_store_username or "neo4j",
            password=config.graph_store_password or "",
            url=url,
            refresh_schema=False,
        )
    if scheme in {"falkor", "falkors", "redis", "rediss"}:
        try:
            from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise StoreError(
                "FalkorDB graph store needs: pip install 'llama-index-memory-hierarchy[falkordb]'"
            ) from exc
        kwargs: dict[str, Any] = {}
        if config.graph_store_username:
            kwargs["username"] = config.graph_store_username
        if config.graph_store_password:
            kwargs["password"] = config.graph_store_password
        return FalkorDBPropertyGraphStore(
            url=url, database=f"{config.collection_prefix}_graph", refresh_schema=False, **kwargs
        )
    raise MemoryValidationError("graph_store_url", f"unsupported scheme {scheme!r}; use bolt://, neo4j:// or falkor://")


def _user_of(item: Any) -> Any:
    return (getattr(item, "properties", None) or {}).get("user_id")


class UserGraph:
    """User-scoped async graph operations over any ``PropertyGraphStore``.

    Every read filters by the ``user_id`` property in the store *and* again on the
    results (defence in depth: a store that ignores a filter still cannot leak).
    Sync store calls run in a worker thread so the event loop never blocks, but for the
    reads of the embedded store: they wait for nothing (``SQLitePropertyGraphStore._read``)
    and take less than the hop.
    """

    def __init__(self, store: PropertyGraphStore) -> None:
        self.store = store

    async def _call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(func, *args, **kwargs)

    async def _read(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.store, SQLitePropertyGraphStore):
            return func(*args, **kwargs)
        return await self._call(func, *args, **kwargs)

    # ------------------------------------------------------------------ writes
    async def aupsert(self, nodes: Sequence[LabelledNode], relations: Sequence[Relation]) -> None:
        """Nodes then relations (one transaction on the embedded store)."""
        if isinstance(self.store, SQLitePropertyGraphStore):
            await self._call(self.store.upsert, list(nodes), list(relations))
            return
        if nodes:
            await self._call(self.store.upsert_nodes, list(nodes))
        if relations:
            await self._call(self.store.upsert_relations, list(relations))

    async def adelete_relations(self, user_id: str, keys: Iterable[tuple[str, str, str]]) -> None:
        """Delete exactly these ``(source_id, label, target_id)`` relations of this user.

        The interface has no such call: the embedded store has a native one; Cypher
        stores get one parameterised statement; any other store gets its endpoints
        rewritten without the relations.
        """
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
        store = self.store
        if isinstance(store, SQLitePropertyGraphStore):
            await self._call(store.delete_relations, keys, user_id=user_id)
            return
        if store.supports_structured_queries:
            label = _CYPHER_NODE_LABEL.get(type(store).__name__)
            node = f"(a:`{label}` {{id: row.s}})" if label else "(a {id: row.s})"
            target = f"(b:`{label}` {{id: row.t}})" if label else "(b {id: row.t})"
            await self._call(
                store.structured_query,
                f"UNWIND $rows AS row MATCH {node}-[r]->{target} "
                "WHERE type(r) = row.l AND r.user_id = $user_id DELETE r",
                param_map={"rows": [{"s": s, "l": rel, "t": t} for s, rel, t in keys], "user_id": user_id},
            )
            return
        await self._rewrite_without(user_id, set(keys))

    async def _rewrite_without(self, user_id: str, doomed: set[tuple[str, str, str]]) -> None:
        """Generic fallback: delete the endpoints, then write them back with their other relations."""
        ids = sorted({k[0] for k in doomed} | {k[2] for k in doomed})
        nodes = [n for n in await self._call(self.store.get, None, ids) if _user_of(n) == user_id]
        triplets = await self._call(self.store.get_triplets, None, None, {"user_id": user_id}, ids)
        keep = {
            (rel.source_id, rel.label, rel.target_id): rel
            for _, rel, _ in triplets
            if (rel.source_id, rel.label, rel.target_id) not in doomed and _user_of(rel) == user_id
        }
        neighbour_ids = {k[0] for k in keep} | {k[2] for k in keep}
        neighbours = [n for n in await self._call(self.store.get, None, sorted(neighbour_ids)) if n.id not in ids]
        await self._call(self.store.delete, None, None, None, ids)
        await self.aupsert([*nodes, *neighbours], list(keep.values()))

    async def adelete_nodes(self, user_id: str, ids: Sequence[str]) -> None:
        """Delete this user's nodes with these ids (and their relations)."""
        ids = [n.id for n in await self.anodes(user_id, ids)] if ids else []
        if ids:
            await self._call(self.store.delete, None, None, None, ids)

    async def aclear_user(self, user_id: str) -> None:
        """Delete every node of this user (and so every relation of theirs), nothing else."""
        await self._call(self.store.delete, None, None, {"user_id": user_id}, None)

    # ------------------------------------------------------------------ reads
    async def anodes(self, user_id: str, ids: Sequence[str] | None = None) -> list[LabelledNode]:
        """This user's nodes (with these ids)."""
        if ids is not None and not ids:
            return []
        nodes = await self._read(self.store.get, {"user_id": user_id}, list(ids) if ids else None)
        return [n for n in nodes if _user_of(n) == user_id]

    async def atriplets(
        self, user_id: str, ids: Sequence[str], relation_types: Sequence[str] | None = None
    ) -> list[Triplet]:
        """This user's triplets touching these nodes, each once."""
        if not ids:
            return []
        found = await self._read(
            self.store.get_triplets,
            None,
            list(relation_types) if relation_types else None,
            {"user_id": user_id},
            list(ids),
        )
        out: dict[tuple[str, str, str], Triplet] = {}
        for source, rel, target in found:
            if _user_of(rel) not in (user_id, None) or _user_of(source) != user_id or _user_of(target) != user_id:
                continue
            out.setdefault((rel.source_id, rel.label, rel.target_id), (source, rel, target))
        return list(out.values())

    async def aneighbourhood(
        self,
        user_id: str,
        ids: Sequence[str],
        *,
        depth: int = 1,
        relation_types: Sequence[str] | None = None,
        limit: int = 200,
    ) -> list[tuple[int, Triplet]]:
        """Triplets within ``depth`` hops of ``ids`` (either direction) as ``(hop, triplet)``, nearest first."""
        seen_nodes = set(ids)
        frontier = list(ids)
        seen: set[tuple[str, str, str]] = set()
        out: list[tuple[int, Triplet]] = []
        for hop in range(1, depth + 1):
            if not frontier:
                break
            nxt: list[str] = []
            for triplet in sorted(await self.atriplets(user_id, frontier, relation_types), key=_triplet_key):
                key = _triplet_key(triplet)
                if key in seen:
                    continue
                seen.add(key)
                out.append((hop, triplet))
                for node_id in (key[0], key[2]):
                    if node_id not in seen_nodes:
                        seen_nodes.add(node_id)
                        nxt.append(node_id)
                if len(out) >= limit:
                    return out
            frontier = nxt
        return out

    async def aclose(self) -> None:
        """Close the store when it can be closed."""
        for name in ("aclose", "close"):
            closer = getattr(self.store, name, None)
            if closer is None:
                continue
            try:
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # pragma: no cover - best effort on shutdown
                logger.debug("closing graph store failed", exc_info=True)
            return


def _triplet_key(triplet: Triplet) -> tuple[str, str, str]:
    rel = triplet[1]
    return (rel.source_id, rel.label, rel.target_id)
