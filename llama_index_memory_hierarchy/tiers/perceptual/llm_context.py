"""Perceptions for an LLM: one line of text each, with the images (or video keyframes) attached."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_memory_hierarchy.messages import describe_perception
from llama_index_memory_hierarchy.perception.encoders import aask_llm
from llama_index_memory_hierarchy.perception.media import video_keyframe_png
from llama_index_memory_hierarchy.types import MemoryItem, MemoryType

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ImageBlock

logger = logging.getLogger(__name__)


async def adescribe_for_context(
    items: Sequence[MemoryItem],
    path_of: Callable[[str], Awaitable[Path]],
    *,
    include_images: bool,
    max_images: int,
) -> list[str | ImageBlock]:
    """One line per perception and, with ``include_images``, an ``ImageBlock`` after each image's line
    (the middle keyframe for a video), at most ``max_images``; ``path_of`` finds a perception's file."""
    from llama_index.core.base.llms.types import ImageBlock

    out: list[str | ImageBlock] = []
    images = 0
    for item in items:
        if item.memory_type != MemoryType.PERCEPTUAL:
            continue
        out.append(describe_perception(item))
        modality = item.metadata.get("modality")
        if not include_images or images >= max_images or modality not in ("image", "video"):
            continue
        try:
            path = await path_of(item.id)
            if modality == "image":
                out.append(ImageBlock(path=path, image_mimetype=item.metadata.get("mime_type")))
            else:
                frame = await asyncio.to_thread(video_keyframe_png, path)
                if frame is None:
                    continue
                out.append(ImageBlock(image=frame.getvalue(), image_mimetype="image/png"))
            images += 1
        except Exception as exc:  # a missing or unreadable file must not break the prompt
            logger.warning("perception %s: image not attached (%s)", item.id, exc)
    return out


async def aask_about(model: Any, prompt: str, parts: Sequence[str | ImageBlock], staging: Path) -> str:
    """Ask ``model`` ``prompt`` after the perceptions described by ``parts``; in-memory images are
    written to ``staging`` for the call and removed after it."""
    lines = [p for p in parts if isinstance(p, str)]
    images: list[tuple[Path, str]] = []
    scratch: list[Path] = []
    try:
        for block in parts:
            if isinstance(block, str):
                continue
            if block.path is not None:
                images.append((Path(block.path), block.image_mimetype or "image/png"))
            elif block.image is not None:
                temp = staging / f"{uuid.uuid4().hex}.png"
                await asyncio.to_thread(temp.write_bytes, _raw_image_bytes(block.image))
                scratch.append(temp)
                images.append((temp, "image/png"))
        text = "Perceptions you can refer to:\n" + "\n".join(f"- {line}" for line in lines)
        return await aask_llm(model, f"{text}\n\n{prompt}", images)
    finally:
        for temp in scratch:
            temp.unlink(missing_ok=True)


def _raw_image_bytes(data: bytes) -> bytes:
    """ImageBlock may hold base64 of the bytes it was given; return the raw bytes."""
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data
    return decoded if decoded[:8] == b"\x89PNG\r\n\x1a\n" else data
