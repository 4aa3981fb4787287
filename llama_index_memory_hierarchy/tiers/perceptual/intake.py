"""What the perceptual tier accepts: inputs normalised and staged as files, encoders wrapped."""

from __future__ import annotations

import asyncio
import io
import os
from typing import Any

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.perception.encoders import AudioEncoderAdapter, ImageTextEncoder, PerceptionEncoder
from llama_index_memory_hierarchy.perception.files import FileStore, StagedFile
from llama_index_memory_hierarchy.perception.media import Modality, detect_modality
from llama_index_memory_hierarchy.types import validate_content


def wrap_encoder(encoder: Any) -> PerceptionEncoder:
    """A :class:`PerceptionEncoder` for a LlamaIndex ``MultiModalEmbedding`` or an ``AudioEncoder``."""
    from llama_index.core.embeddings import MultiModalEmbedding

    if isinstance(encoder, PerceptionEncoder):
        return encoder
    if isinstance(encoder, MultiModalEmbedding):
        return ImageTextEncoder(encoder)
    if callable(getattr(encoder, "embed_audio", None)):
        return AudioEncoderAdapter(encoder)
    raise MemoryValidationError(
        "encoders",
        f"expected a PerceptionEncoder, MultiModalEmbedding or AudioEncoder, got {type(encoder).__name__}",
    )


def as_source(data: Any, modality: Modality | None, filename: str | None) -> tuple[Any, str | None, bool]:
    """Normalise the input to something :meth:`FileStore.stage` reads: (source, filename, is_path)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data, filename, False
    if isinstance(data, os.PathLike):
        return data, filename, True
    if isinstance(data, str):
        if "\x00" not in data and len(data) < 4096 and os.path.isfile(os.path.expanduser(data)):
            return data, filename, True
        if modality is Modality.TEXT:
            return validate_content(data, "data_or_path").encode("utf-8"), filename, False
        raise MemoryValidationError(
            "data_or_path",
            f"no file at {data[:120]!r}; pass bytes, a Path, a file object, or modality='text' to store text",
        )
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a core dependency
        Image = None  # type: ignore[assignment]
    if Image is not None and isinstance(data, Image.Image):
        buffer = io.BytesIO()
        data.save(buffer, format="PNG")
        return buffer.getvalue(), filename, False
    if hasattr(data, "read"):
        return data, filename, False
    raise MemoryValidationError(
        "data_or_path", f"expected bytes, a path, a file object or a PIL image, got {type(data).__name__}"
    )


async def astage(
    files: FileStore, data: Any, modality: Modality | None, filename: str | None, copy: bool
) -> tuple[StagedFile, Modality, str]:
    """Stage the input (copied unless a path to reference) and detect its modality and extension."""
    source, name, is_path = as_source(data, modality, filename)
    staged = await asyncio.to_thread(files.stage, source, copy=copy or not is_path, filename=name)
    try:
        detected, ext = detect_modality(staged.head, staged.filename, modality)
    except BaseException:
        await asyncio.to_thread(files.discard, staged)
        raise
    return staged, detected, ext
