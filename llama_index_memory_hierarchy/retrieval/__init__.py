"""Retrieval: rank fusion and scoring (``fusion``), LlamaIndex retrievers (``retriever``)."""
