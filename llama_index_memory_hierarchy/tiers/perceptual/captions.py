"""The searchable text of a perception: given, transcribed, read from a text file, captioned by an LLM,
or described from what the decoders read."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from llama_index_memory_hierarchy.perception.encoders import acaption_with_llm, llm_accepts_images
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore
from llama_index_memory_hierarchy.perception.media import MediaInfo, Modality, video_keyframe_png
from llama_index_memory_hierarchy.tiers.perceptual.settings import PerceptionSettings
from llama_index_memory_hierarchy.types import validate_content


def given_text(caption: str | None, transcript: str | None) -> tuple[str, str] | None:
    """The content the caller gave (caption and/or transcript) and its source, or None."""
    if caption and transcript:
        return f"{caption}\nTranscript: {transcript}", "given"
    if caption:
        return caption, "given"
    if transcript:
        return transcript, "transcript"
    return None


async def acontent(
    info: MediaInfo,
    path: Path,
    ref: FileRef,
    caption: str | None,
    transcript: str | None,
    *,
    llm: Any,
    files: FileStore,
    settings: PerceptionSettings,
) -> tuple[str, str]:
    """The searchable text of a perception and where it came from."""
    given = given_text(caption, transcript)
    if given is not None:
        return given
    if info.modality is Modality.TEXT and info.text and info.text.strip():
        return info.text[: settings.max_text_chars], "text"
    if (
        llm is not None
        and settings.caption_with_llm
        and info.modality in (Modality.IMAGE, Modality.VIDEO)
        and llm_accepts_images(llm, settings.llm_accepts_images)
    ):
        generated = await _allm_caption(llm, files, info, path)
        if generated:
            return validate_content(generated[:4000], "caption"), "llm"
    return auto_description(info, ref), "metadata"


async def _allm_caption(llm: Any, files: FileStore, info: MediaInfo, path: Path) -> str | None:
    if info.modality is Modality.IMAGE:
        return await acaption_with_llm(llm, path, info.mime_type)
    frame = await asyncio.to_thread(video_keyframe_png, path)
    if frame is None:
        return None
    keyframe = files.root / ".staging" / f"{uuid.uuid4().hex}.png"
    await asyncio.to_thread(keyframe.write_bytes, frame.getvalue())
    try:
        return await acaption_with_llm(llm, keyframe, "image/png")
    finally:
        keyframe.unlink(missing_ok=True)


def auto_description(info: MediaInfo, ref: FileRef) -> str:
    """Content for a perception without caption: its name and what the decoder read."""
    meta = info.metadata
    bits = [info.modality.value]
    if ref.filename:
        stem = Path(ref.filename).stem.replace("_", " ").replace("-", " ")
        bits.append(f"{ref.filename!r} ({stem})")
    if meta.get("width"):
        bits.append(f"{meta['width']}x{meta['height']}")
    if meta.get("duration_s"):
        bits.append(f"{float(meta['duration_s']):.1f} seconds")
    if meta.get("sample_rate"):
        bits.append(f"{meta['sample_rate']} Hz, {meta.get('channels', 1)} channel(s)")
    if meta.get("format") or meta.get("codec"):
        bits.append(str(meta.get("format") or meta.get("codec")))
    if meta.get("exif_time"):
        bits.append(f"taken {meta['exif_time']}")
    return ", ".join(bits)
