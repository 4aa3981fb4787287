"""BERT encoders on ONNX Runtime, and the cache of their graphs built once from local weights."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.embeddings.bundled import default_threads
from llama_index_memory_hierarchy.embeddings.spaces import folder_label
from llama_index_memory_hierarchy.types import file_sha256

logger = logging.getLogger(__name__)

Precision = Literal["int8", "float32"]


class OnnxEncoder(BaseEmbedding):
    """A BERT-style encoder (mean pooling, L2-normalised) run by ONNX Runtime from graphs built once and cached.

    Subclasses say where their graphs come from (:meth:`graph_path`) and how texts become the
    graph's inputs (:meth:`_feeds`); this class opens the sessions and runs them. By default
    queries run in int8 (one short text: several times faster than float32) and stored texts in
    float32: int8 quantises activations per call, so a text's int8 vector shifts slightly with
    the texts batched beside it, and a stored vector should not depend on its batch.
    ``text_precision="int8"`` trades that for faster ingestion.

    Queries run on one thread of ONNX Runtime's own (a short sequence gains less from a second
    thread than the hop costs on a shared machine), started by :meth:`query_future` without a
    Python thread, and stored texts on ``num_threads``; idle threads do not spin.
    """

    query_precision: Precision = Field(default="int8", description="Graph for queries.")
    text_precision: Precision = Field(default="float32", description="Graph for stored texts.")
    cache_dir: str | None = Field(default=None, description="Folder of built graphs (default: onnx_cache_dir()).")
    num_threads: int | None = Field(default=None, ge=1, le=256, description="Threads for batches of texts.")
    embed_batch_size: int = Field(default=64, gt=0, le=4096)

    _sessions: dict[str, Any] | None = PrivateAttr(default=None)
    _build_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def max_length(self) -> int:
        """Longest input in model tokens."""
        return 512

    def cache_root(self) -> Path:
        """The folder of built graphs."""
        return Path(self.cache_dir).expanduser() if self.cache_dir else onnx_cache_dir()

    @abstractmethod
    def graph_path(self, precision: Precision) -> Path:
        """The built graph of ``precision`` (built first when missing or corrupt)."""

    @abstractmethod
    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens of each text before truncation, special tokens included."""

    def _prepare(self) -> None:
        """Load what :meth:`_feeds` needs (a tokenizer); called once, before the sessions open."""

    def _feeds(self, texts: list[str], *, is_query: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The graph's inputs for one padded batch, and its attention mask (subclasses say how).

        Not an ``abstractmethod``: LlamaIndex wraps every implementation of one in an instrumentation
        span (``DispatcherSpanMixin``), ~0.07 ms of each query's embedding spent on a private step.
        """
        raise NotImplementedError

    def build(self) -> None:
        """Build (or check) every graph this model uses and open them; later calls are free."""
        self._load()

    @property
    def loaded(self) -> bool:
        """Whether the sessions are open (:meth:`query_future` then starts at once)."""
        return self._sessions is not None

    def _load(self) -> dict[str, Any]:
        """Sessions by role: ``query`` (one thread of ORT's pool, for ``run_async``) and ``text`` (``num_threads``,
        no arena)."""
        if self._sessions is None:
            with self._build_lock:
                if self._sessions is None:
                    self._prepare()
                    threads = self.num_threads or default_threads()
                    self._sessions = {
                        "query": _shared_session(self.graph_path(self.query_precision), _QUERY_THREADS),
                        "text": _shared_session(self.graph_path(self.text_precision), threads, arena=False),
                    }
        return self._sessions

    def _run(self, session: Any, texts: list[str], *, is_query: bool) -> np.ndarray:
        """Mean-pooled, L2-normalised embeddings of one padded batch."""
        feeds, mask = self._feeds(texts, is_query=is_query)
        return _pooled(session.run(None, feeds)[0], mask)

    def query_future(self, query: str) -> concurrent.futures.Future[np.ndarray]:
        """The embedding of ``query``, computed on a thread of ONNX Runtime's own pool (``run_async``).

        Why: a Python worker thread must take the GIL before it can start the model, and while the
        caller goes on in Python (a search reading its keyword hits) that took ~1.5 ms of a query's
        ~5. Here the caller tokenises (~0.1 ms), the model starts at once, and the GIL is taken again
        only to pool the result. Opens the sessions first if needed (blocking: call :meth:`build` early).
        """
        session = self._load()["query"]
        feeds, mask = self._feeds([query], is_query=True)
        future: concurrent.futures.Future[np.ndarray] = concurrent.futures.Future()

        def done(outputs: Any, _: Any, error: str, _inputs: Any = feeds) -> None:
            # ``_inputs``: ONNX Runtime reads the feeds' numpy buffers while it runs and keeps no reference to
            # them; held by this callback they live until it is called (freed earlier, a query came out NaN).
            try:
                if error:
                    raise RuntimeError(f"ONNX Runtime failed to embed the query: {error}")
                future.set_result(_pooled(outputs[0], mask)[0])
            except BaseException as exc:  # ORT would swallow it and leave the future pending
                future.set_exception(exc)

        session.run_async(None, feeds, done, None)
        return future

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        sessions = self._load()
        if len(texts) == 1:
            return self._run(sessions["text"], texts, is_query=False)
        # Similar lengths share a call, so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = [order[start : start + _ONNX_SUB_BATCH] for start in range(0, len(order), _ONNX_SUB_BATCH)]
        vectors = [self._run(sessions["text"], [texts[i] for i in part], is_query=False) for part in parts]
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for part, block in zip(parts, vectors, strict=True):
            out[part] = block
        return out

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._run(self._load()["query"], [query], is_query=True)[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        if not self.loaded:  # opening the sessions takes seconds: not on the caller's loop
            await asyncio.to_thread(self._load)
        return (await asyncio.wrap_future(self.query_future(query))).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed_texts([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed_texts(list(texts)).tolist()


class OnnxEmbedding(OnnxEncoder):
    """A local sentence-transformers BERT folder (the bundled all-MiniLM-L6-v2) on ONNX Runtime: the fast English path.

    Its graphs are built once from the folder's own weights (torch export, then ONNX Runtime's
    BERT fusions; ``int8``: weights quantised per output channel); nothing is downloaded. The
    int8 build keeps the second feed-forward matrix of each layer in float32: its input (after
    GELU) is the one whose dynamic quantisation moves the embedding most (the cosine to the
    float model falls from ~0.996 to ~0.93 when it is quantised too).
    """

    model_name: str = Field(description="Local sentence-transformers folder the graphs are built from.")

    _tokenizer: Any = PrivateAttr(default=None)

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
        return ensure_onnx_model(Path(self.model_name), quantize=precision == "int8", cache_dir=self.cache_root())

    def _prepare(self) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(Path(self.model_name) / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_length)
        tokenizer.enable_padding()
        self._tokenizer = tokenizer

    def token_counts(self, texts: list[str]) -> list[int]:
        from tokenizers import Tokenizer

        counter = Tokenizer.from_file(str(Path(self.model_name) / "tokenizer.json"))
        counter.no_truncation()  # the file may carry its own truncation and fixed padding
        counter.no_padding()
        return [len(encoded.ids) for encoded in counter.encode_batch(texts)]

    def _feeds(self, texts: list[str], *, is_query: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}, mask


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of each text's token states under its attention mask, L2-normalised."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


#: Intra-op threads of the query session: ``run_async`` runs on the pool's one thread beside the caller's.
_QUERY_THREADS = 2

_SESSIONS: dict[tuple[str, int, int, bool], Any] = {}
_SESSIONS_LOCK = threading.Lock()


def _shared_session(graph: Path, threads: int, *, arena: bool = True) -> Any:
    """One ONNX Runtime session per graph file and thread count in the process, shared by every model using it.

    Why: each memory resolves its own model, and opening a session costs ~0.1-0.5 s and its own
    copy of the weights; ``InferenceSession.run`` may be called from several threads at once.
    ``arena=False`` returns a call's buffers when it ends: a batch of long texts needs ~0.5 GB
    that an arena would keep for the life of the process.
    """
    key = (str(graph), graph.stat().st_mtime_ns, threads, arena)
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.enable_cpu_mem_arena = arena
            _SESSIONS[key] = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        return _SESSIONS[key]


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


#: Builds whose checksum this process has verified, with their files' modification times then.
_CHECKED: set[tuple[Path, int, int]] = set()


def _stamp(folder: Path) -> tuple[Path, int, int]:
    """A build folder with the modification times of its graph and manifest (-1: missing)."""

    def mtime(path: Path) -> int:
        try:
            return path.stat().st_mtime_ns
        except OSError:
            return -1

    return folder, mtime(folder / "model.onnx"), mtime(folder / _ONNX_MANIFEST)


def _valid_build(folder: Path) -> bool:
    """A build is whole when its manifest names the graph's checksum."""
    try:
        manifest = json.loads((folder / _ONNX_MANIFEST).read_text())
        return file_sha256(folder / "model.onnx") == manifest["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def ensure_onnx_model(source: Path, *, quantize: bool, cache_dir: Path) -> Path:
    """The built graph of the sentence-transformers folder ``source`` in ``cache_dir`` (see :func:`ensure_graph`)."""
    name = f"{folder_label(source)}-{'int8' if quantize else 'fp32'}-{_source_digest(source, quantize)}"
    return ensure_graph(cache_dir, name, lambda target: _build_onnx(source, target, quantize=quantize))


def ensure_graph(cache_dir: Path, name: str, build: Callable[[Path], None]) -> Path:
    """The graph ``cache_dir/name/model.onnx``, made by ``build(target)`` first when missing or corrupt.

    A build is written to a temporary sibling folder and renamed into place, so a crash never
    leaves a half-written graph under the final name, and two processes building at once both
    end up with a whole one.
    """
    folder = cache_dir / name
    graph = folder / "model.onnx"
    if _stamp(folder) in _CHECKED or _valid_build(folder):
        _CHECKED.add(_stamp(folder))
        return graph
    import shutil
    import tempfile

    cache_dir.mkdir(parents=True, exist_ok=True)
    logger.info("building the ONNX graph %s in %s, once", name, cache_dir)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_dir))
    try:
        build(tmp / "model.onnx")
        (tmp / _ONNX_MANIFEST).write_text(json.dumps({"name": name, "sha256": file_sha256(tmp / "model.onnx")}))
        if folder.exists():  # corrupt or partial: replace it
            shutil.rmtree(folder, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process renamed its build first
            if not _valid_build(folder):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _CHECKED.add(_stamp(folder))
    return graph


def _build_onnx(source: Path, target: Path, *, quantize: bool) -> None:
    """Export the folder's model with torch, fuse it with ONNX Runtime's BERT optimiser, optionally quantise."""
    import torch
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
    sample = {name: torch.ones((2, 8), dtype=torch.long) for name in ("input_ids", "attention_mask", "token_type_ids")}
    export_encoder(
        _Encoder(model),
        sample,
        target,
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
        quantize=quantize,
        keep_float=lambda node: "/output/dense" in node.name and "/attention/" not in node.name,
    )


def export_encoder(
    module: Any,
    sample: dict[str, Any],
    target: Path,
    *,
    num_heads: int,
    hidden_size: int,
    quantize: bool,
    quantize_ops: Sequence[str] = ("MatMul",),
    keep_float: Callable[[Any], bool] | None = None,
) -> None:
    """Export a torch encoder (inputs named as in ``sample``, output ``last_hidden_state``) to ``target``.

    The graph is fused by ONNX Runtime's BERT optimiser; with ``quantize`` the weights of the
    ``quantize_ops`` nodes become int8 per output channel (dynamic quantisation), except the
    MatMul nodes ``keep_float`` names.
    """
    import warnings

    import torch
    from onnxruntime.transformers import optimizer

    names = list(sample)
    raw = target.with_name("exported.onnx")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            tuple(sample.values()),
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    fused = optimizer.optimize_model(str(raw), model_type="bert", num_heads=num_heads, hidden_size=hidden_size)
    raw.unlink()
    if not quantize:
        fused.save_model_to_file(str(target))
        return
    fused_path = target.with_name("fused.onnx")
    fused.save_model_to_file(str(fused_path))
    excluded = [n.name for n in fused.model.graph.node if n.op_type == "MatMul" and keep_float and keep_float(n)]
    quantize_graph(fused_path, target, quantize_ops=quantize_ops, exclude=excluded)
    fused_path.unlink()


class _QuietQuantizer(logging.Filter):
    """Drops onnxruntime's advice to pre-process before quantising (logged on the root logger, past ``-q``).

    The graphs quantised here are already fused and shape-inferred by the optimiser or built so.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize_graph(source: Path, target: Path, *, quantize_ops: Sequence[str], exclude: Sequence[str] = ()) -> None:
    """``source``'s weights of the ``quantize_ops`` nodes as int8 per output channel (dynamic quantisation)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = _QuietQuantizer()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=list(quantize_ops),
            nodes_to_exclude=list(exclude),
            extra_options={"DefaultTensorType": 1},  # float: for tensors of fused ops shape inference cannot type
        )
    finally:
        root.removeFilter(quiet)
