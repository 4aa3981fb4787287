"""Tunables of the perceptual tier: file storage, near-duplicate distance, captions and encoders."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class PerceptionSettings(BaseModel):
    """Tunables of the perceptual tier."""

    model_config = ConfigDict(extra="forbid")

    store_files: bool = Field(
        default=True, description="Copy files into <persist_dir>/files (False: reference by path)."
    )
    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="Largest accepted file.")
    chunk_bytes: int = Field(default=1024 * 1024, ge=1024, description="Streaming chunk size.")
    allowed_roots: list[Path] | None = Field(
        default=None, description="When set, files are only read from inside these folders."
    )
    phash_max_distance: int = Field(default=10, ge=0, le=64, description="Largest Hamming distance of a phash match.")
    audio_fingerprint: bool = Field(default=True, description="Embed audio with the offline log-mel encoder.")
    caption_with_llm: bool = Field(default=True, description="Caption images and video keyframes with the LLM.")
    llm_accepts_images: bool | None = Field(
        default=None, description="Whether the LLM reads images (None: only a legacy MultiModalLLM is assumed to)."
    )
    max_text_chars: int = Field(default=20_000, ge=100, le=100_000, description="Text of a text file kept as content.")
