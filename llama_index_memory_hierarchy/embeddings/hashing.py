"""The hashing embedding: deterministic, model-free, the fallback when no model loads."""

from __future__ import annotations

import itertools
import re

import mmh3
import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field

from llama_index_memory_hierarchy.embeddings.bundled import DEFAULT_DIM, HASHING_MODEL_LABEL

_WORD = re.compile(r"(?u)\b\w+\b")
_SPACES = re.compile(r"\s\s+")


def _word_features(text: str) -> list[str]:
    """Lowercased words and word bigrams."""
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


def _char_features(text: str) -> list[str]:
    """Character 3- to 5-grams inside space-padded words (a word shorter than n counts once)."""
    grams: list[str] = []
    for word in _SPACES.sub(" ", text.lower()).split():
        padded = f" {word} "
        for n in range(3, 6):
            grams.extend(padded[i : i + n] for i in range(max(len(padded) - n + 1, 1)))
            if len(padded) <= n:
                break
    return grams


class HashingEmbedding(BaseEmbedding):
    """A dependency-light, deterministic embedding from hashed word and character n-grams.

    It needs no model files and is stable across processes and machines, but it captures surface overlap, not
    meaning. It is used when chosen (``"hashing"``) or when the default model cannot be loaded. The features are
    scikit-learn's ``HashingVectorizer`` scheme (signed MurmurHash3 buckets, each part l2-normed), so vectors
    stored before it was computed here without scikit-learn stay comparable.
    """

    model_name: str = Field(default=HASHING_MODEL_LABEL, description="Stable name of the feature scheme.")
    dim: int = Field(default=DEFAULT_DIM, ge=8, le=65536, description="Output dimension (hash buckets).")
    char_weight: float = Field(default=0.5, ge=0, description="Weight of character n-grams against words.")

    @classmethod
    def class_name(cls) -> str:
        return "HashingEmbedding"

    def _hashed(self, features: list[str]) -> np.ndarray:
        """Signed bucket counts of ``features``, l2-normed (a text without features is all zeros)."""
        vector = np.zeros(self.dim, dtype=np.float32)
        if features:
            hashes = np.fromiter((mmh3.hash(f, 0, True) for f in features), dtype=np.int64, count=len(features))
            np.add.at(vector, np.abs(hashes) % self.dim, np.where(hashes >= 0, 1.0, -1.0).astype(np.float32))
            norm = np.linalg.norm(vector)
            if norm > 0:
                vector /= norm
        return vector

    def _embed_many(self, texts: list[str]) -> list[list[float]]:
        dense = np.stack(
            [self._hashed(_word_features(t)) + self.char_weight * self._hashed(_char_features(t)) for t in texts]
        )
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
