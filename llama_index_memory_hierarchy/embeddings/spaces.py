"""Vector space ids: stable, path-safe labels of models (``<label>-<dim>``)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from llama_index_memory_hierarchy.embeddings.bundled import DEFAULT_MODEL_LABEL, default_model_path

_SPACE_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_GENERIC_FOLDER_NAMES = {"model", "models", "snapshots", "main", "default", "onnx"}
_MAX_LABEL_CHARS = 96


def sanitize_label(label: str) -> str:
    """Lower-case ``[a-z0-9._-]`` form of a label, bounded, safe as a folder or collection name."""
    cleaned = _SPACE_UNSAFE.sub("-", label.lower()).strip("-._") or "model"
    if len(cleaned) > _MAX_LABEL_CHARS:
        digest = hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]
        cleaned = f"{cleaned[: _MAX_LABEL_CHARS - 9].rstrip('-._')}-{digest}"
    return cleaned


def folder_label(path: Path) -> str:
    """Label of a local model folder: the default's stable name, else folder name plus config digest."""
    default = default_model_path()
    if default is not None and path.resolve() == default.resolve():
        return DEFAULT_MODEL_LABEL
    folder = path.name if path.name.lower() not in _GENERIC_FOLDER_NAMES else path.parent.name
    config = path / "config.json"
    digest = hashlib.sha1(config.read_bytes()).hexdigest()[:8] if config.is_file() else "local"
    return sanitize_label(f"{folder}-{digest}")


def make_space(label: str, dim: int) -> str:
    """The vector space id: ``<label>-<dim>``."""
    return f"{sanitize_label(label)}-{int(dim)}"
