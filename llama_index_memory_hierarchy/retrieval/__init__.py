"""Retrieval above the tiers: the cross-tier search (``search``) and LlamaIndex retrievers (``retriever``)."""
