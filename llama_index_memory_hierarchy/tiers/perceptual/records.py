"""A perception as records: one memory record for its text, one *satellite* record per other vector.

The memory record's ``content`` is a caption, transcript or description, embedded with the
text model; its metadata holds the modality, the file reference and SHA-256, the perceptual
hash, the media metadata and which encoders embedded it. Every other vector (the phash as a
±1 vector, a CLIP image embedding, an audio embedding) is a satellite record in the namespace
:data:`VECTOR_NAMESPACE`, with an id derived from the perception id and the space: each
encoder has its own vector space, every vector is rebuildable, and removal is one delete.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.perception.encoders import SIGNAL_CAPTION, PerceptionEncoder
from llama_index_memory_hierarchy.perception.files import FileRef
from llama_index_memory_hierarchy.perception.media import MediaInfo
from llama_index_memory_hierarchy.stores.base import VECTOR_NAMESPACE, Record
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

#: Metadata keys the tier owns; user metadata may not set them.
RESERVED_KEYS = frozenset(
    {"modality", "sha256", "file", "media", "phash", "caption_source", "encoders", "filename", "mime_type"}
)
#: Keys a search adds to returned items.
MATCH_KEYS = ("match_signal", "match_signals", "match_distance")
_SATELLITE_UUID = uuid.UUID("7d0c3f9e-5b0a-4f7e-9a55-2f0c6d1b8e41")


def satellite_id(perception_id: str, space: str) -> str:
    """Id of the satellite record holding a perception's vector in ``space`` (deterministic)."""
    return str(uuid.uuid5(_SATELLITE_UUID, f"{perception_id}|{space}"))


def perception_records(
    *,
    user_id: str,
    session_id: str | None,
    info: MediaInfo,
    ref: FileRef,
    content: str,
    source: str,
    text_space: str,
    vectors: dict[str, tuple[PerceptionEncoder, np.ndarray]],
    extra: dict[str, Any],
    when: datetime | None,
    importance: float | None,
) -> list[Record]:
    """The memory record of a perception (first) and its satellites, one per space in ``vectors``."""
    encoders = {SIGNAL_CAPTION: text_space, **{enc.signal: space for space, (enc, _) in vectors.items()}}
    meta: dict[str, Any] = {
        **extra,
        "modality": info.modality.value,
        "sha256": ref.sha256,
        "file": ref.to_metadata(),
        "media": info.metadata,
        "mime_type": info.mime_type,
        "caption_source": source,
        "encoders": encoders,
    }
    if ref.filename:
        meta["filename"] = ref.filename
    if info.phash is not None:
        meta["phash"] = info.phash
    data: dict[str, Any] = {
        "content": content,
        "memory_type": MemoryType.PERCEPTUAL,
        "user_id": user_id,
        "session_id": session_id,
        "metadata": meta,
    }
    moment = when or info.captured_at
    if moment is not None:
        data["timestamp"] = moment
    if importance is not None:
        data["importance"] = importance
    item = MemoryItem.create(**data)
    records = [Record(item=item)]
    for space, (encoder, vector) in vectors.items():
        satellite = MemoryItem.create(
            id=satellite_id(item.id, space),
            content=f"{encoder.signal} vector of perception {item.id}",
            memory_type=MemoryType.PERCEPTUAL,
            user_id=user_id,
            session_id=item.session_id,
            timestamp=item.timestamp,
            importance=item.importance,
            metadata={"perception_id": item.id, "signal": encoder.signal, "modality": info.modality.value},
        )
        records.append(Record(item=satellite, namespace=VECTOR_NAMESPACE, embedding=vector, space=space))
    return records
