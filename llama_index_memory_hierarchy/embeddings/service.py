"""The :class:`EmbeddingService` every tier embeds through: batching, validation, the query cache."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_memory_hierarchy.embeddings.onnx import OnnxEncoder
from llama_index_memory_hierarchy.embeddings.resolve import model_label, resolve_embed_model
from llama_index_memory_hierarchy.embeddings.spaces import make_space
from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError
from llama_index_memory_hierarchy.types import validate_positive_int

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.runtime import Runtime

logger = logging.getLogger(__name__)


class EmbeddingService:
    """Batched, validated, cached embeddings from one model.

    The model is resolved on first use (loading it can take seconds; it happens in a worker
    thread). Outputs are ``float32`` arrays, L2-normalised, all of one dimension: a NaN,
    infinite or all-zero vector raises :class:`MemoryValidationError` naming the text, and a
    dimension that differs from :attr:`dim` raises :class:`EmbeddingDimensionError`.

    Model calls are serialised by a lock: HuggingFace tokenizers are not safe to use from
    several threads at once, and on CPU one batch already uses every core.
    """

    def __init__(
        self,
        embed_model: str | BaseEmbedding | None = None,
        *,
        batch_size: int = 64,
        query_cache_size: int = 1024,
        dim: int | None = None,
        space: str | None = None,
    ) -> None:
        batch_size = validate_positive_int(batch_size, "batch_size")
        if isinstance(query_cache_size, bool) or not isinstance(query_cache_size, int) or query_cache_size < 0:
            raise MemoryValidationError("query_cache_size", f"must be an integer >= 0, got {query_cache_size!r}")
        dim = None if dim is None else validate_positive_int(dim, "dim")
        self._spec = embed_model
        self._model: BaseEmbedding | None = embed_model if isinstance(embed_model, BaseEmbedding) else None
        self.batch_size = batch_size
        self.query_cache_size = query_cache_size
        self._dim = dim
        self._space_override = space
        self._load_lock = threading.Lock()
        self._infer_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._inflight: dict[str, concurrent.futures.Future[np.ndarray]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._hits = 0
        self._misses = 0
        self._tokenizer: Any = None
        self._label: str | None = None

    @classmethod
    def from_config(cls, config: MemoryConfig, embed_model: str | BaseEmbedding | None = None) -> EmbeddingService:
        """Build from a :class:`MemoryConfig` (``embed_model`` overrides ``config.embed_model``)."""
        return cls(
            embed_model if embed_model is not None else config.embed_model,
            batch_size=config.embed_batch_size,
            query_cache_size=config.query_cache_size,
        )

    # --- model ---------------------------------------------------------------------------

    @property
    def model(self) -> BaseEmbedding:
        """The resolved model (loads it on first access; blocking)."""
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    model = resolve_embed_model(self._spec, embed_batch_size=self.batch_size)
                    self._tokenizer = getattr(getattr(model, "_model", None), "tokenizer", None)
                    self._model = model
        return self._model

    @property
    def loaded(self) -> bool:
        """Whether the model has been resolved yet."""
        return self._model is not None

    async def _amodel(self) -> BaseEmbedding:
        if self._model is None:
            return await asyncio.to_thread(lambda: self.model)
        return self._model

    @property
    def label(self) -> str:
        """Stable model label (see :func:`model_label`)."""
        if self._label is None:
            self._label = model_label(self.model)
        return self._label

    @property
    def dim(self) -> int | None:
        """Output dimension: known after the first embedding or :meth:`aprobe`."""
        return self._dim

    @property
    def space(self) -> str:
        """Vector space id (``<model label>-<dim>``), safe as a folder or collection name."""
        if self._space_override is not None:
            return self._space_override
        if self._dim is None:
            raise RuntimeError("the embedding dimension is not known yet; await EmbeddingService.aprobe() first")
        return make_space(self.label, self._dim)

    @property
    def max_tokens(self) -> int | None:
        """Longest input the model reads, in its tokens (longer text is silently truncated), if known."""
        value = getattr(self.model, "max_length", None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    async def aprobe(self) -> int:
        """Load the model if needed and learn its dimension; returns it."""
        if self._dim is None:
            await self.aembed_texts(["dimension probe"])
        assert self._dim is not None
        return self._dim

    # --- embedding -----------------------------------------------------------------------

    def _check_texts(self, texts: Sequence[str], field: str) -> list[str]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise MemoryValidationError(field, f"expected a sequence of strings, got {type(texts).__name__}")
        out = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise MemoryValidationError(field, f"text #{i} must be a string, got {type(text).__name__}")
            if not text.strip():
                raise MemoryValidationError(field, f"text #{i} is empty or blank; it cannot be embedded")
            out.append(text)
        return out

    def _log_truncation(self, texts: list[str], offset: int) -> None:
        """DEBUG-log texts longer than the model reads (it truncates them silently)."""
        limit = self.max_tokens
        if limit is None:
            return
        # A word piece is at least one character, so shorter strings cannot overflow.
        long_idx = [i for i, text in enumerate(texts) if len(text) > limit - 2]
        if not long_idx:
            return
        counts: list[int | None]
        if isinstance(self.model, OnnxEncoder):
            counts = list(self.model.token_counts([texts[i] for i in long_idx]))
        elif self._tokenizer is not None:
            try:
                encoded = self._tokenizer([texts[i] for i in long_idx], add_special_tokens=True, verbose=False)
                counts = [len(ids) for ids in encoded["input_ids"]]
            except Exception:  # tokenizer API differs: fall back to a character estimate
                counts = [None] * len(long_idx)
        else:
            counts = [None] * len(long_idx)
        for i, count in zip(long_idx, counts, strict=True):
            if count is None:
                logger.debug(
                    "text #%d (%d chars) may exceed the model's %d-token window", offset + i, len(texts[i]), limit
                )
            elif count > limit:
                logger.debug(
                    "text #%d has %d tokens; the model reads only the first %d (the rest is ignored)",
                    offset + i,
                    count,
                    limit,
                )

    def _embed_batch_sync(self, texts: list[str], offset: int) -> list[list[float]]:
        model = self.model
        if logger.isEnabledFor(logging.DEBUG):
            self._log_truncation(texts, offset)
        with self._infer_lock:
            return model.get_text_embedding_batch(texts)

    def _embed_query_sync(self, text: str) -> list[float]:
        model = self.model
        if logger.isEnabledFor(logging.DEBUG):
            self._log_truncation([text], 0)
        with self._infer_lock:
            return model.get_query_embedding(text)

    def _finalize(self, raw: Any, count: int, field: str, offset: int) -> np.ndarray:
        """Check and L2-normalise a batch of model outputs."""
        try:
            arr = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingDimensionError(
                f"the embedding model returned vectors of different lengths in one batch: {exc}"
            ) from exc
        if arr.ndim != 2 or arr.shape[0] != count:
            raise EmbeddingDimensionError(
                f"the embedding model returned shape {arr.shape} for {count} texts; expected ({count}, dim)"
            )
        with self._state_lock:
            if self._dim is None:
                self._dim = int(arr.shape[1])
            expected = self._dim
        if arr.shape[1] != expected:
            raise EmbeddingDimensionError(
                f"the embedding model returned {arr.shape[1]}-d vectors but this service (and its vector "
                f"space) uses {expected}-d vectors; use a model of the same dimension or a new space"
            )
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0])
            raise MemoryValidationError(
                field, f"the embedding of text #{offset + bad} contains NaN or infinite values; it is not stored"
            )
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        zero = norms[:, 0] <= 1e-12
        if zero.any():
            bad = int(np.flatnonzero(zero)[0])
            raise MemoryValidationError(
                field,
                f"the embedding of text #{offset + bad} is an all-zero vector (nothing the model recognises); "
                "it cannot be searched and is not stored",
            )
        return arr / norms

    async def aembed_texts(self, texts: Sequence[str], *, field: str = "content") -> np.ndarray:
        """Embed documents: ``(n, dim)`` float32, L2-normalised; one thread hop per batch."""
        items = self._check_texts(texts, field)
        await self._amodel()
        if not items:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            raw = await asyncio.to_thread(self._embed_batch_sync, batch, start)
            parts.append(self._finalize(raw, len(batch), field, start))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    async def aembed_query(self, text: str, *, field: str = "query") -> np.ndarray:
        """Embed a search query: ``(dim,)`` float32, L2-normalised, served from an LRU cache.

        Concurrent requests for one text (several tiers searching at once) share one
        model call instead of each missing the cache.
        """
        # shielded: a caller cancelled while it waits leaves the shared call to the others
        return (await asyncio.shield(asyncio.wrap_future(self.start_query(text, field=field)))).copy()

    def start_query(self, text: str, *, field: str = "query") -> concurrent.futures.Future[np.ndarray]:
        """Start embedding a query now and return the future of its (read-only) vector; from any thread.

        Why not only :meth:`aembed_query`: a coroutine starts when its loop first runs it, after
        whatever else is ready; a search that also reads the stores starts the model first so that
        the reads run beside it, not before it, and ``get()`` starts it before anything else. A loaded
        ONNX model (the bundled ones) runs on ONNX Runtime's own thread; any other in a worker thread.
        The future is shared by every request for the text until it is done, and cannot be cancelled.
        """
        self._check_texts([text], field)
        with self._state_lock:
            cached = self._cache.get(text) if self.query_cache_size else None
            if cached is not None:
                self._cache.move_to_end(text)
                self._hits += 1
            elif text in self._inflight:
                return self._inflight[text]
            future: concurrent.futures.Future[np.ndarray] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()  # shared: one caller's cancellation must not end it for all
            if cached is not None:
                future.set_result(cached)
                return future
            self._inflight[text] = future
        try:
            model = self._model
            if isinstance(model, OnnxEncoder) and model.loaded:  # no thread to wake, no wait for the GIL
                raw = model.query_future(text)
            else:
                raw = self._query_executor().submit(contextvars.copy_context().run, self._embed_query_sync, text)
        except BaseException as exc:
            self._settle(text, field, future, exc)
            raise
        raw.add_done_callback(functools.partial(self._settle, text, field, future))
        return future

    def _settle(
        self,
        text: str,
        field: str,
        future: concurrent.futures.Future[np.ndarray],
        raw: concurrent.futures.Future[Any] | BaseException,
    ) -> None:
        """Give ``future`` the checked vector of the model's ``raw`` result (or its error), no longer in flight."""
        with self._state_lock:
            del self._inflight[text]
        try:
            if isinstance(raw, BaseException):
                raise raw
            vector = self._checked_query(text, field, raw.result())
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(vector)

    def _query_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """Worker threads for queries of models that run only in the calling thread (made on first use)."""
        with self._state_lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="lmh-embed-query")
            return self._executor

    def _checked_query(self, text: str, field: str, raw: Any) -> np.ndarray:
        """A query's vector checked by :meth:`_finalize`, read-only, and cached."""
        vector = self._finalize([raw], 1, field, 0)[0]
        vector.flags.writeable = False
        if self.query_cache_size:
            with self._state_lock:
                self._misses += 1
                self._cache[text] = vector
                self._cache.move_to_end(text)
                while len(self._cache) > self.query_cache_size:
                    self._cache.popitem(last=False)
        return vector

    def cache_info(self) -> dict[str, int]:
        """Query cache statistics: ``hits``, ``misses``, ``size``, ``maxsize``."""
        with self._state_lock:
            return {
                "hits": self._hits,
                "misses": self._misses,
                "size": len(self._cache),
                "maxsize": self.query_cache_size,
            }

    def clear_cache(self) -> None:
        """Drop every cached query embedding."""
        with self._state_lock:
            self._cache.clear()

    # --- sync twins ------------------------------------------------------------------------

    def _runtime(self) -> Runtime:
        from llama_index_memory_hierarchy.runtime import get_runtime

        return get_runtime()

    def probe(self) -> int:
        """Sync twin of :meth:`aprobe`."""
        return self._runtime().run(self.aprobe())

    def embed_texts(self, texts: Sequence[str], *, field: str = "content") -> np.ndarray:
        """Sync twin of :meth:`aembed_texts`."""
        return self._runtime().run(self.aembed_texts(texts, field=field))

    def embed_query(self, text: str, *, field: str = "query") -> np.ndarray:
        """Sync twin of :meth:`aembed_query`."""
        return self._runtime().run(self.aembed_query(text, field=field))

    def __repr__(self) -> str:
        label = self.label if self.loaded else repr(self._spec)
        return f"EmbeddingService(model={label}, dim={self._dim}, batch_size={self.batch_size})"
