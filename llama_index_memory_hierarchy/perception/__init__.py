"""Perception support: modality detection, media metadata, perceptual hashes, file storage, encoders.

Heavy libraries (Pillow, soundfile, PyAV) are imported inside the functions that
need them, so importing this package stays cheap.
"""

from llama_index_memory_hierarchy.perception.files import FileRef, FileStore, StagedFile, user_dir_name
from llama_index_memory_hierarchy.perception.media import (
    MediaInfo,
    Modality,
    as_modality,
    detect_modality,
    hamming_distance,
    inspect_media,
    read_isobmff_metadata,
)

__all__ = [
    "FileRef",
    "FileStore",
    "MediaInfo",
    "Modality",
    "StagedFile",
    "as_modality",
    "detect_modality",
    "hamming_distance",
    "inspect_media",
    "read_isobmff_metadata",
    "user_dir_name",
]
