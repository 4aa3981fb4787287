"""The hashing embedding: deterministic, model-free, the fallback when no model loads."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.embeddings.bundled import DEFAULT_DIM, HASHING_MODEL_LABEL


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
