"""``lmh ui``: a local, server-rendered inspector of one user's memory (see :mod:`.app`).

Needs the ``ui`` extra (Starlette, Jinja2, uvicorn); nothing is fetched from a CDN: the page's CSS and
icon ship in ``static/``, and the knowledge-graph view is the self-contained page of ``graph_export``.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":
        from llama_index_memory_hierarchy.ui.app import create_app

        return create_app
    raise AttributeError(name)
