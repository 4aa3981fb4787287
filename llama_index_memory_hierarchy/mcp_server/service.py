"""The state an MCP server acts through: the deployment's stores, opened once, and one hierarchy (with its tool
specs and knowledge bases) per user, made on first use and held for the server's life.

Nothing of LlamaIndex is imported until a tool first needs it: a stdio client's ``initialize`` does not
wait for it (``bench/mcp_startup.py``); :meth:`MemoryService.warm_up_in_background` loads it meanwhile.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.errors import MemoryHierarchyError
from llama_index_memory_hierarchy.mcp_server.access import DocumentRoots, Principal

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.stores.context import StoreContext
    from llama_index_memory_hierarchy.tools import MemoryToolSpec, RagToolSpec

logger = logging.getLogger(__name__)


class MemoryService:
    """The stores of one deployment, and one hierarchy (and tool specs) per user, opened on first use."""

    def __init__(
        self,
        config: MemoryConfig,
        *,
        llm: Any = None,
        principal: Principal | None = None,
        document_roots: DocumentRoots | None = None,
    ) -> None:
        self.config = config
        self.llm = llm
        #: The folders add_document / ingest_documents may read (none: no file at all).
        self.document_roots = document_roots or DocumentRoots()
        #: The fixed principal of a stdio server (None: each HTTP request's token says).
        self.principal = principal
        # opened on first use (or by warm_up), then held for the server's life: users come and go
        self._context: StoreContext | None = None
        self._opening = threading.Lock()
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()
        self._memories: dict[str, HierarchicalMemory] = {}
        self._specs: dict[str, MemoryToolSpec] = {}
        self._documents: dict[tuple[str, str], RagToolSpec] = {}
        self._closed = False

    def _stores(self) -> StoreContext:
        """The deployment's stores, opened once (an interrupted erasure is finished first)."""
        from llama_index_memory_hierarchy.lifecycle.erasure import aresume_erasures
        from llama_index_memory_hierarchy.stores.context import StoreContext

        with self._opening:
            if self._context is None:
                self._context = StoreContext.acquire(self.config, on_open=aresume_erasures)
            return self._context

    def warm_up(self) -> None:
        """Open the stores, load the embedding model, (stdio) the user's tools and what a first search measures
        or reads once (the model's calibration, the stopwords), so that the first call does not wait for them."""
        from llama_index_memory_hierarchy.calibration import acalibration
        from llama_index_memory_hierarchy.language import query_stopwords

        context = self._stores()
        context.embeddings.probe()
        if self.principal is not None and self.principal.user_id is not None:
            self.tools(self.principal.user_id)
        context.runtime.run(acalibration(context.embeddings))
        query_stopwords()

    def warm_up_in_background(self) -> None:
        """:meth:`warm_up` in a thread: a stdio client's ``initialize`` is answered meanwhile (the first tool
        call waits only for what is still loading)."""

        def warm() -> None:
            try:
                self.warm_up()
            except Exception:  # the first tool call opens the stores again and reports the error to the client
                if self._closed:  # the client left at once (stdin closed): nothing failed, no traceback to show
                    logger.debug("warm-up stopped: the server is shutting down", exc_info=True)
                else:
                    logger.exception("opening the stores in the background failed")

        self._warming = threading.Thread(target=warm, name="lmh-mcp-warm-up", daemon=True)
        self._warming.start()

    def _after_warm_up(self) -> None:
        """Wait for the background warm-up when another thread runs it, before importing anything of LlamaIndex:
        a tool call importing it beside the warm-up can meet its modules half initialised ("cannot import name
        ... from partially initialized module"), and would measure the calibration a second time."""
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join()

    def memory(self, user_id: str) -> HierarchicalMemory:
        """The hierarchy of ``user_id`` (one per user for the server's life, sharing the stores)."""
        self._after_warm_up()
        from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

        with self._lock:
            if self._closed:
                raise MemoryHierarchyError("the server is shutting down")
            memory = self._memories.get(user_id)
            if memory is None:
                self._stores()  # shared by every user's hierarchy (from_defaults finds it open)
                memory = HierarchicalMemory.from_defaults(config=self.config, user_id=user_id)
                self._memories[user_id] = memory
            return memory

    def tools(self, user_id: str) -> MemoryToolSpec:
        """The memory tools of ``user_id`` (one spec per user)."""
        self._after_warm_up()
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        memory = self.memory(user_id)
        with self._lock:
            return self._specs.setdefault(user_id, MemoryToolSpec(memory))

    def documents(self, user_id: str, namespace: str) -> RagToolSpec:
        """The document tools of knowledge base ``namespace`` of ``user_id``."""
        self._after_warm_up()
        from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase, kb_namespace
        from llama_index_memory_hierarchy.tools import RagToolSpec

        kb_namespace(namespace)
        memory = self.memory(user_id)
        with self._lock:
            spec = self._documents.get((user_id, namespace))
            if spec is None:
                kb = KnowledgeBase.from_defaults(
                    namespace=namespace, user_id=user_id, context=memory.context, llm=self.llm
                )
                spec = self._documents[(user_id, namespace)] = RagToolSpec(kb)
            return spec

    def close(self) -> None:
        """Close every hierarchy and knowledge base and release the stores (pending writes are applied)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            documents, memories = list(self._documents.values()), list(self._memories.values())
        for spec in documents:
            spec.knowledge_base.close()
        for memory in memories:
            memory.close()
        if self._warming is not None:
            self._warming.join()
        if self._context is not None:
            self._context.release()


__all__ = ["MemoryService"]
