"""Chroma as a vector server: :func:`chroma_vector_index` and the store adapter it uses.

Chroma ships its server in the ``chromadb`` wheel (``chroma run --path DIR --port N``), so
a multi-process deployment can be tested on a machine where no Qdrant server can be
installed. Qdrant server stays the production recommendation (see ``docs/deployment.md``).

LlamaIndex's ``ChromaVectorStore`` needs four corrections to meet the :class:`VectorIndex`
contract, made in :class:`ChromaMemoryStore` (a subclass, so it is still a LlamaIndex
``BasePydanticVectorStore``):

* ``add`` calls ``collection.add``, which silently *ignores* ids that exist; the outbox needs
  an idempotent replace, so ``add`` calls ``collection.upsert``;
* similarities are ``exp(-distance)``; on a cosine collection the cosine is ``1 - distance``;
* ``VectorStoreQuery.node_ids`` is ignored; Chroma's ``query(ids=...)`` restricts the search;
* ``delete_nodes(node_ids=[], filters=...)`` sends an empty id list, which Chroma rejects.

It also lists ids and counts without fetching documents (``point_ids``), which
:class:`LlamaVectorIndex` uses when a store offers it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import MetadataFilters, VectorStoreQuery, VectorStoreQueryResult
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from llama_index_memory_hierarchy.config import redact_url
from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.vector._common import validate_dim, validate_space
from llama_index_memory_hierarchy.stores.vector.llama import LlamaVectorIndex

try:  # optional extra: pip install 'llama-index-memory-hierarchy[chroma]'
    from llama_index.vector_stores.chroma import ChromaVectorStore
    from llama_index.vector_stores.chroma.base import _to_chroma_filter
except ImportError:  # pragma: no cover - depends on the extra
    ChromaVectorStore = None  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)

#: Ids per Chroma request (well under its batch limit).
BATCH = 1000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{1,510}[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def _require_chroma() -> None:
    if ChromaVectorStore is None:
        raise StoreError("Chroma vector store needs: pip install 'llama-index-memory-hierarchy[chroma]'")


def collection_name(prefix: str, space: str) -> str:
    """``<prefix>_<space>`` when Chroma accepts it, else ``<prefix>-<hash>`` (names are 3-512 safe characters)."""
    name = f"{prefix}_{space}"
    if _NAME.fullmatch(name) and ".." not in name:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:32]
    safe = re.sub(r"[^A-Za-z0-9]", "", prefix)[:32] or "lmh"
    return f"{safe}-{digest}"


def parse_chroma_url(url: str) -> dict[str, Any]:
    """``chroma://host:port[?tenant=t&database=d]`` (``chromas://`` = TLS) as HttpClient arguments."""
    parts = urlsplit(url)
    if parts.scheme not in ("chroma", "chromas", "chroma+http", "chroma+https"):
        raise MemoryValidationError(
            "vector_store_url", f"unsupported scheme {parts.scheme!r}; use chroma://host:port or chromas://host:port"
        )
    if not parts.hostname:
        raise MemoryValidationError("vector_store_url", f"no host in {redact_url(url)}")
    ssl = parts.scheme in ("chromas", "chroma+https")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    args: dict[str, Any] = {"host": parts.hostname, "port": parts.port or (443 if ssl else 8000), "ssl": ssl}
    for key in ("tenant", "database"):
        if key in query:
            args[key] = query[key]
    return args


if ChromaVectorStore is not None:

    class ChromaMemoryStore(ChromaVectorStore):  # type: ignore[misc,valid-type]
        """``ChromaVectorStore`` with replace-on-add, cosine scores, id-restricted queries (see the module)."""

        #: The HTTP client may be called from several threads at once (no per-index lock needed).
        lmh_thread_safe: bool = True

        @classmethod
        def class_name(cls) -> str:
            return "ChromaMemoryStore"

        def add(self, nodes: list[BaseNode], **add_kwargs: Any) -> list[str]:
            """Insert or replace (``collection.upsert``)."""
            ids: list[str] = []
            for start in range(0, len(nodes), BATCH):
                part = nodes[start : start + BATCH]
                metadatas = []
                for node in part:
                    metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
                    metadatas.append({k: ("" if v is None else v) for k, v in metadata.items()})
                self._collection.upsert(
                    ids=[node.node_id for node in part],
                    embeddings=[node.get_embedding() for node in part],
                    metadatas=metadatas,
                    documents=["" for _ in part],
                )
                ids.extend(node.node_id for node in part)
            return ids

        def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
            """Nearest nodes; similarities are cosines (the collection must use cosine space)."""
            if not query.query_embedding:
                return super().query(query, **kwargs)
            request: dict[str, Any] = {
                "query_embeddings": [list(query.query_embedding)],
                "n_results": query.similarity_top_k,
                "include": ["metadatas", "distances"],
            }
            if query.filters is not None:
                request["where"] = _to_chroma_filter(query.filters)
            if query.node_ids is not None:
                if not query.node_ids:
                    return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
                request["ids"] = list(query.node_ids)
            found = self._collection.query(**request)
            ids = list(found["ids"][0])
            nodes: list[BaseNode] = []
            for node_id, metadata in zip(ids, found["metadatas"][0], strict=True):
                try:
                    nodes.append(metadata_dict_to_node(metadata or {}, text=""))
                except Exception:  # not written by this package: keep the payload at least
                    nodes.append(TextNode(id_=node_id, text="", metadata=dict(metadata or {})))
            similarities = [1.0 - float(d) for d in found["distances"][0]]
            return VectorStoreQueryResult(nodes=nodes, similarities=similarities, ids=ids)

        def delete_nodes(
            self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
        ) -> None:
            """Delete by ids, by filters, or by both (an empty id list with no filters deletes nothing)."""
            where = _to_chroma_filter(filters) if filters is not None else None
            if node_ids:
                for start in range(0, len(node_ids), BATCH):
                    part = list(node_ids[start : start + BATCH])
                    if where:
                        self._collection.delete(ids=part, where=where)
                    else:
                        self._collection.delete(ids=part)
            elif where and node_ids is None:
                self._collection.delete(where=where)

        def point_ids(self, filters: MetadataFilters | None = None) -> set[str]:
            """Every id (matching the filters), paginated, without documents or vectors."""
            where = _to_chroma_filter(filters) if filters is not None else None
            found: set[str] = set()
            offset = 0
            while True:
                page = self._collection.get(where=where or None, include=[], limit=BATCH * 5, offset=offset)
                found.update(page["ids"])
                if len(page["ids"]) < BATCH * 5:
                    return found
                offset += len(page["ids"])

        def point_count(self, filters: MetadataFilters | None = None) -> int:
            """Number of points (matching the filters)."""
            if filters is None:
                return int(self._collection.count())
            return len(self.point_ids(filters))

else:  # pragma: no cover - depends on the extra
    ChromaMemoryStore = None  # type: ignore[assignment,misc]


def _check_collection(collection: Any, dim: int | None) -> None:
    """The collection must use cosine distance; a recorded dimension must match."""
    space = None
    configuration = getattr(collection, "configuration", None) or {}
    hnsw = configuration.get("hnsw") if isinstance(configuration, dict) else None
    if isinstance(hnsw, dict):
        space = hnsw.get("space")
    metadata = collection.metadata or {}
    space = space or metadata.get("hnsw:space")
    if space is not None and str(getattr(space, "value", space)) != "cosine":
        raise MemoryValidationError(
            "vector_store", f"Chroma collection {collection.name!r} uses {space!r} distance; memories need cosine"
        )
    stored = metadata.get("lmh_dim")
    if dim is not None and stored is not None and int(stored) != dim:
        raise EmbeddingDimensionError(
            f"Chroma collection {collection.name!r} holds {stored}-d vectors but the embedding model gives {dim}-d "
            "vectors; use the model it was built with, or another space / collection_prefix"
        )


def adapt_chroma_store(store: Any) -> Any:
    """A plain ``ChromaVectorStore`` as a :class:`ChromaMemoryStore` on the same collection (checked)."""
    _require_chroma()
    _check_collection(store._collection, None)
    return ChromaMemoryStore(chroma_collection=store._collection)


def chroma_vector_index(
    space: str,
    dim: int,
    *,
    url: str | None = None,
    client: Any = None,
    api_key: str | None = None,
    collection_prefix: str = "lmh",
) -> LlamaVectorIndex:
    """A :class:`LlamaVectorIndex` on a Chroma collection ``<prefix>_<space>`` (cosine), created if missing.

    Give ``url`` (``chroma://host:port``, see :func:`parse_chroma_url`) or a ``client``
    (any ``chromadb`` client, e.g. ``chromadb.HttpClient(...)``). ``api_key`` is sent as
    Chroma's ``x-chroma-token`` header.
    """
    _require_chroma()
    space = validate_space(space)
    dim = validate_dim(dim)
    if not isinstance(collection_prefix, str) or not _PREFIX.fullmatch(collection_prefix):
        raise MemoryValidationError(
            "collection_prefix", f"must be 1-64 letters, digits, _ or -, got {collection_prefix!r}"
        )
    if (url is None) == (client is None):
        raise MemoryValidationError("vector_store_url", "give exactly one of url or client for a Chroma index")
    name = collection_name(collection_prefix, space)
    where = f"Chroma collection {name!r}" + (f" at {redact_url(url)}" if url else "")
    try:
        if client is None:
            import chromadb
            from chromadb.config import Settings

            args = parse_chroma_url(url)  # type: ignore[arg-type]
            headers = {"x-chroma-token": api_key} if api_key else None
            client = chromadb.HttpClient(**args, headers=headers, settings=Settings(anonymized_telemetry=False))
        collection = client.get_or_create_collection(
            name=name,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"lmh_space": space, "lmh_dim": dim},
            embedding_function=None,
        )
        _check_collection(collection, dim)
    except (MemoryValidationError, EmbeddingDimensionError):
        raise
    except Exception as exc:
        raise StoreError(f"{where} could not be opened: {exc}") from exc
    store = ChromaMemoryStore(chroma_collection=collection)
    return LlamaVectorIndex(store, space, dim, use_async=False)
