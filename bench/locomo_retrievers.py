"""Retrievers compared by ``bench/locomo.py``: baselines and the pipeline under study.

A retriever sees the turns of one conversation (``index``) and then question *strings*
(``search``); it never sees a question's category, evidence or answer, so whatever
works here works in the library too. The pipeline retriever is built from the pure
functions of :mod:`llama_index_memory_hierarchy.ranking.pipeline`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

import bm25s
import numpy as np
from embed_cache import CachedEmbedder
from locomo_data import Turn

from llama_index_memory_hierarchy import turns as T
from llama_index_memory_hierarchy.ranking import fusion as F
from llama_index_memory_hierarchy.ranking import pipeline as P

logger = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import


class Retriever(Protocol):
    """What the benchmark drives: index one conversation, then answer question strings."""

    name: str

    def index(self, turns: Sequence[Turn]) -> None: ...

    def search(self, query: str, k: int) -> list[str]: ...


def baseline_text(turn: Turn) -> str:
    """Baseline document: ``"<session date>: <speaker>: <text>"`` (LoCoMo's own date string)."""
    return f"{turn.session_date_text}: {turn.speaker}: {turn.text}"


# ---------------------------------------------------------------------------- stemming
def make_stemmer(kind: str) -> Callable[[list[str]], list[str]]:
    """A token-list stemmer: ``"snowball"`` (PyStemmer, English), ``"light"`` (pipeline) or ``"none"``."""
    if kind == "none":
        return lambda tokens: tokens
    if kind == "light":
        return lambda tokens: [P.light_stem(t) for t in tokens]
    if kind == "snowball":
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        return stemmer.stemWords
    raise ValueError(f"unknown stemmer {kind!r}")


class _BM25:
    """bm25s over pre-tokenised documents; ``scores`` gives a dense score vector."""

    def __init__(self, docs: Sequence[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self._n = len(docs)
        self._model = bm25s.BM25(k1=k1, b=b)
        self._model.index([d or ["\u2205"] for d in docs], show_progress=False)

    def scores(self, terms: list[str]) -> np.ndarray:
        if not terms:
            return np.zeros(self._n, dtype=np.float32)
        return np.asarray(self._model.get_scores(terms), dtype=np.float32)


class _FTS5:
    """SQLite FTS5 BM25 over pre-tokenised documents, as the library's record store indexes them.

    Documents are stored as space-joined tokens (the record store's ``keyword`` column);
    the query is its tokens, each double-quoted, OR-ed; ``-bm25()`` is the score.
    """

    def __init__(self, docs: Sequence[list[str]]) -> None:
        import sqlite3

        self._n = len(docs)
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(keyword, tokenize='unicode61 remove_diacritics 0')")
        self._db.executemany(
            "INSERT INTO docs(rowid, keyword) VALUES (?, ?)", [(i, " ".join(d)) for i, d in enumerate(docs)]
        )

    def scores(self, terms: list[str]) -> np.ndarray:
        out = np.zeros(self._n, dtype=np.float32)
        if not terms:
            return out
        query = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))
        for rowid, score in self._db.execute("SELECT rowid, -bm25(docs) FROM docs WHERE docs MATCH ?", (query,)):
            out[rowid] = max(float(score), 1e-9)
        return out


def top_n(scores: np.ndarray, n: int) -> list[int]:
    """Indexes of the ``n`` best positive scores, best first (ties: earlier first)."""
    order = np.argsort(-scores, kind="stable")[:n]
    return [int(i) for i in order if scores[i] > 0]


# ---------------------------------------------------------------------------- baselines
class BM25Baseline:
    """BM25 alone with bm25s defaults (English Lucene stopwords, no stemming)."""

    name = "bm25"

    def __init__(self, depth: int = 100) -> None:
        self.depth = depth

    def index(self, turns: Sequence[Turn]) -> None:
        self._ids = [t.dia_id for t in turns]
        tokens = bm25s.tokenize([baseline_text(t) for t in turns], stopwords="en", show_progress=False)
        self._model = bm25s.BM25()
        self._model.index(tokens, show_progress=False)

    def ranked(self, query: str) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self._model.retrieve(tokens, k=min(self.depth, len(self._ids)), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def search(self, query: str, k: int) -> list[str]:
        return [self._ids[i] for i in self.ranked(query)[:k]]


class DenseBaseline:
    """Cosine similarity of all-MiniLM-L6-v2 embeddings alone."""

    name = "dense"

    def __init__(self, embedder: CachedEmbedder, depth: int = 100) -> None:
        self.embedder = embedder
        self.depth = depth

    def index(self, turns: Sequence[Turn]) -> None:
        self._ids = [t.dia_id for t in turns]
        self._matrix = self.embedder.encode([baseline_text(t) for t in turns])

    def ranked(self, query: str) -> list[int]:
        sims = self._matrix @ self.embedder.encode_query(query)
        return [int(i) for i in np.argsort(-sims, kind="stable")[: self.depth]]

    def search(self, query: str, k: int) -> list[str]:
        return [self._ids[i] for i in self.ranked(query)[:k]]


class FusionBaseline:
    """Reciprocal rank fusion (k=60) of the BM25 and dense baselines."""

    name = "fusion"

    def __init__(self, embedder: CachedEmbedder, depth: int = 100) -> None:
        self.bm25 = BM25Baseline(depth)
        self.dense = DenseBaseline(embedder, depth)

    def index(self, turns: Sequence[Turn]) -> None:
        self._ids = [t.dia_id for t in turns]
        self.bm25.index(turns)
        self.dense.index(turns)

    def search(self, query: str, k: int) -> list[str]:
        fused = F.rrf_fuse([self.bm25.ranked(query), self.dense.ranked(query)], k=60)
        return [self._ids[i] for i, _ in fused[:k]]


# ---------------------------------------------------------------------------- the pipeline
@dataclass(frozen=True)
class PipelineConfig:
    """Every switch of the pipeline, so that each technique can be ablated on its own.

    Signals: keyword (BM25) search over the turn alone and over the turn in context,
    dense search over the turn alone and over the turn in context. Each gives its
    ``depth`` best candidates; they are fused (``fusion``: ``"score"`` =
    :func:`fusion.score_fuse`, ``"rrf"`` = :func:`fusion.rrf_fuse`) and re-ranked by
    :func:`pipeline.rerank` priors. With score fusion the dense similarity of every
    candidate is exact (the library reads stored vectors of the candidates), as is
    BM25 only for the keyword hits.
    """

    name: str = "pipeline"
    # indexed text
    speaker_in_text: bool = True
    date_in_text: bool = True
    context_before: int = 2
    context_after: int = 0
    dense_context_before: int = 1
    dense_context_after: int = 0
    # keyword side
    stemmer: str = "light"
    query_stopwords: bool = True
    keyword_backend: str = "bm25s"  # or "fts5": SQLite FTS5 as in the record store
    # signal weights in the fusion (0 switches a signal off)
    w_bm25_turn: float = 0.0
    w_bm25_context: float = 1.0
    w_dense_turn: float = 1.0
    w_dense_context: float = 0.0
    fusion: str = "score"
    rrf_k: float = 60.0
    depth: int = 40
    # priors (pipeline.RerankWeights)
    entity: float = 0.3
    time: float = 1.0
    temporal: float = 0.5
    # explored, not adopted (bench only)
    session_boost: float = 0.0
    neighbour_smoothing: float = 0.0

    def but(self, name: str, **changes: object) -> PipelineConfig:
        """A copy with ``changes`` and a new name (ablation steps)."""
        return replace(self, name=name, **changes)  # type: ignore[arg-type]


class PipelineRetriever:
    """The retrieval pipeline of :mod:`llama_index_memory_hierarchy.ranking.pipeline` over one conversation."""

    def __init__(self, config: PipelineConfig, embedder: CachedEmbedder | None) -> None:
        self.config = config
        self.name = config.name
        self.embedder = embedder
        self._stem = make_stemmer(config.stemmer)
        if (config.w_dense_turn or config.w_dense_context) and embedder is None:
            raise ValueError(f"{config.name} needs an embedder")

    def _keyword_tokens(self, text: str) -> list[str]:
        return self._stem(P.tokenize(text))

    def index(self, turns: Sequence[Turn]) -> None:
        cfg = self.config
        self._ids = [t.dia_id for t in turns]
        self._sessions = np.array([t.session for t in turns])
        lines = [T.format_turn(t.text, t.speaker if cfg.speaker_in_text else None) for t in turns]
        sessions = [t.session for t in turns]

        def dated(text: str, turn: Turn) -> str:
            return T.format_turn(text, None, turn.session_date if cfg.date_in_text else None)

        def window(before: int, after: int) -> list[str]:
            return [T.contextual_text(lines, i, before=before, after=after, groups=sessions) for i in range(len(turns))]

        self._bm25_turn: _BM25 | _FTS5 | None = None
        self._bm25_ctx: _BM25 | _FTS5 | None = None
        self._dense_turn: np.ndarray | None = None
        self._dense_ctx: np.ndarray | None = None
        index = _FTS5 if cfg.keyword_backend == "fts5" else _BM25
        if cfg.w_bm25_turn:
            self._bm25_turn = index(
                [self._keyword_tokens(dated(line, t)) for line, t in zip(lines, turns, strict=True)]
            )
        if cfg.w_bm25_context:
            docs = window(cfg.context_before, cfg.context_after)
            self._bm25_ctx = index([self._keyword_tokens(dated(d, t)) for d, t in zip(docs, turns, strict=True)])
        if cfg.w_dense_turn and self.embedder is not None:
            self._dense_turn = self.embedder.encode(lines)
        if cfg.w_dense_context and self.embedder is not None:
            self._dense_ctx = self.embedder.encode(window(cfg.dense_context_before, cfg.dense_context_after))
        self._candidates = {
            i: P.Candidate(key=i, text=t.text, speaker=t.speaker, event_time=t.session_date)
            for i, t in enumerate(turns)
        }
        self._names = {t.speaker for t in turns}
        # The questions are asked after the last session: "now" is the day after it.
        self._now: datetime = max(t.session_date for t in turns) + timedelta(days=1)

    def _signals(self, query: str) -> list[tuple[dict[int, float], float, str, np.ndarray | None]]:
        """Each signal: ``{turn: score}`` over its ``depth`` best, weight, normalisation, dense matrix."""
        cfg = self.config
        out: list[tuple[dict[int, float], float, str, np.ndarray | None]] = []
        if self._bm25_turn is not None or self._bm25_ctx is not None:
            words = P.keyword_terms(query) if cfg.query_stopwords else P.tokenize(query)
            terms = self._stem(words)
            for model, weight in ((self._bm25_turn, cfg.w_bm25_turn), (self._bm25_ctx, cfg.w_bm25_context)):
                if model is not None:
                    scores = model.scores(terms)
                    out.append(({i: float(scores[i]) for i in top_n(scores, cfg.depth)}, weight, "max", None))
        if self._dense_turn is not None or self._dense_ctx is not None:
            assert self.embedder is not None
            self._query_vector = self.embedder.encode_query(query)
            for matrix, weight in ((self._dense_turn, cfg.w_dense_turn), (self._dense_ctx, cfg.w_dense_context)):
                if matrix is not None:
                    sims = matrix @ self._query_vector
                    order = np.argsort(-sims, kind="stable")[: cfg.depth]
                    out.append(({int(i): float(sims[i]) for i in order}, weight, "clip", matrix))
        return out

    def rank(self, query: str) -> list[tuple[int, float]]:
        """Fused and re-ranked ``(turn index, score)``, best first."""
        cfg = self.config
        signals = self._signals(query)
        weights = [w for _, w, _, _ in signals]
        if cfg.fusion == "rrf":
            rankings = [sorted(s, key=s.__getitem__, reverse=True) for s, _, _, _ in signals]
            fused = F.rrf_fuse(rankings, weights, k=cfg.rrf_k)
        else:
            # Exact similarity for every candidate: the library reads the candidates' stored vectors.
            pool: set[int] = set().union(*(s for s, _, _, _ in signals))
            full = [
                s if matrix is None else {i: float(matrix[i] @ self._query_vector) for i in pool}
                for s, _, _, matrix in signals
            ]
            fused = F.score_fuse(full, weights, normalise=[m for _, _, m, _ in signals])  # type: ignore[misc]
        if cfg.session_boost or cfg.neighbour_smoothing:
            fused = self._smooth(fused)
        if not (cfg.entity or cfg.time or cfg.temporal):
            return fused
        return P.rerank(
            query,
            fused,
            self._candidates,
            now=self._now,
            names=self._names,
            weights=P.RerankWeights(entity=cfg.entity, time=cfg.time, temporal=cfg.temporal),
        )

    def _smooth(self, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Explored techniques: session-level boost (best score of the session) and neighbour smoothing."""
        cfg = self.config
        score = dict(fused)
        best_in_session: dict[int, float] = {}
        for i, value in fused:
            session = int(self._sessions[i])
            best_in_session[session] = max(best_in_session.get(session, 0.0), value)
        out = []
        for i, value in fused:
            boosted = value + cfg.session_boost * best_in_session[int(self._sessions[i])]
            neighbours = [
                score.get(j, 0.0)
                for j in (i - 1, i + 1)
                if 0 <= j < len(self._ids) and self._sessions[j] == self._sessions[i]
            ]
            boosted += cfg.neighbour_smoothing * max(neighbours, default=0.0)
            out.append((i, boosted))
        out.sort(key=lambda kv: kv[1], reverse=True)
        return out

    def search(self, query: str, k: int) -> list[str]:
        return [self._ids[i] for i, _ in self.rank(query)[:k]]
