"""A sentence-transformers model on ONNX Runtime, and the cache of its graphs built once from local weights."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.embeddings.bundled import default_threads
from llama_index_memory_hierarchy.embeddings.spaces import folder_label

logger = logging.getLogger(__name__)

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

                    threads = self.num_threads or default_threads()
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
    folder = cache_dir / f"{folder_label(source)}-{'int8' if quantize else 'fp32'}-{_source_digest(source, quantize)}"
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
