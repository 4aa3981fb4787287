"""Perceptual memory: images, audio, video and text files, stored and searched by modality.

A perception is one memory record (``memory_type`` perceptual) whose ``content`` is a
caption, transcript or description, embedded with the text model; its metadata holds the
modality, the file reference and SHA-256, the perceptual hash, the media metadata read by
real decoders, and which encoders embedded it. Every other vector of a perception (its
phash as a ±1 vector, a CLIP image embedding, an audio embedding) is a *satellite* record
in the namespace :data:`VECTOR_NAMESPACE`, written in the same transaction, with an id
derived from the perception id and the space. So each encoder has its own vector space,
every vector is rebuildable from the record store, and removal is one delete.

Searches fuse the rankings of every signal by reciprocal rank and record which signal
matched each result in ``metadata["match_signal"]`` (``caption_text``, ``phash``, ``clip``,
``audio``), with per-signal raw scores in ``metadata["match_signals"]``.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryValidationError
from llama_index_memory_hierarchy.messages import describe_perception
from llama_index_memory_hierarchy.perception.encoders import (
    SIGNAL_CAPTION,
    SIGNAL_PHASH,
    AudioEncoderAdapter,
    ImageTextEncoder,
    PerceptionEncoder,
    PHashEncoder,
    SpectralAudioEncoder,
    aask_llm,
    acaption_with_llm,
    llm_accepts_images,
)
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore, StagedFile
from llama_index_memory_hierarchy.perception.media import (
    MediaInfo,
    Modality,
    as_modality,
    detect_modality,
    inspect_media,
    similarity_to_hamming,
    video_keyframe_png,
)
from llama_index_memory_hierarchy.ranking.fusion import rrf_fuse, score_items
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, VECTOR_NAMESPACE, Record
from llama_index_memory_hierarchy.tiers.episodic import StoredTier
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    as_utc,
    matches,
    utcnow,
    validate_content,
    validate_importance,
    validate_metadata,
)

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ImageBlock

    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)

#: Metadata keys the tier owns; user metadata may not set them.
RESERVED_KEYS = frozenset(
    {"modality", "sha256", "file", "media", "phash", "caption_source", "encoders", "filename", "mime_type"}
)
#: Keys a search adds to returned items.
MATCH_KEYS = ("match_signal", "match_signals", "match_distance")
_SATELLITE_UUID = uuid.UUID("7d0c3f9e-5b0a-4f7e-9a55-2f0c6d1b8e41")

#: A ranking: (signal, [(perception id, raw score)]) best first.
Ranking = tuple[str, list[tuple[str, float]]]


@dataclass
class _Matches:
    """Fused relevance of perceptions, the raw score of each signal, and the best-ranked signal."""

    relevance: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    best: dict[str, str] = field(default_factory=dict)


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


def satellite_id(perception_id: str, space: str) -> str:
    """Id of the satellite record holding a perception's vector in ``space`` (deterministic)."""
    return str(uuid.uuid5(_SATELLITE_UUID, f"{perception_id}|{space}"))


class PerceptualMemory(StoredTier):
    """What was seen and heard: images, audio, video and text files of one user.

    ``encoders``: extra :class:`~.perception.encoders.PerceptionEncoder` objects (a LlamaIndex
    ``MultiModalEmbedding`` or an :class:`~.perception.encoders.AudioEncoder` is wrapped
    automatically). ``llm``: a multi-modal LLM for captions and :meth:`agenerate_content`.
    """

    memory_type = MemoryType.PERCEPTUAL

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str | None,
        context: StoreContext,
        settings: PerceptionSettings | None = None,
        encoders: Sequence[Any] = (),
        llm: Any = None,
    ) -> None:
        super().__init__(user_id=user_id, session_id=session_id, context=context)
        self.settings = settings or PerceptionSettings()
        self.llm = llm
        self.files = FileStore(
            context.persist_dir,
            max_bytes=self.settings.max_file_bytes,
            chunk_bytes=self.settings.chunk_bytes,
            allowed_roots=self.settings.allowed_roots,
        )
        self.phash_encoder = PHashEncoder()
        wrapped: list[PerceptionEncoder] = [self._wrap_encoder(e) for e in encoders]
        if self.settings.audio_fingerprint and not any(Modality.AUDIO in e.modalities for e in wrapped):
            wrapped.append(AudioEncoderAdapter(SpectralAudioEncoder()))
        self.encoders: list[PerceptionEncoder] = wrapped

    @staticmethod
    def _wrap_encoder(encoder: Any) -> PerceptionEncoder:
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

    def _lock(self) -> asyncio.Lock:
        """One lock per user: dedupe check, write and file removal never interleave."""
        return self.context.lock(PerceptualMemory, self.user_id)

    def _all_encoders(self) -> list[PerceptionEncoder]:
        return [self.phash_encoder, *self.encoders]

    # ------------------------------------------------------------------ adding
    async def aadd_perception(
        self,
        data_or_path: Any,
        modality: Modality | str | None = None,
        *,
        caption: str | None = None,
        transcript: str | None = None,
        metadata: dict[str, Any] | None = None,
        filename: str | None = None,
        timestamp: datetime | str | float | None = None,
        importance: float | None = None,
        session_id: str | None = None,
        store_file: bool | None = None,
    ) -> str:
        """Store a perception; return its id (the existing id when this user already has these bytes,
        whose text then becomes the ``caption``/``transcript`` given, if any).

        ``data_or_path``: bytes, a path (``str`` or ``Path``), a binary file object or a PIL
        image; a ``str`` that is not an existing file is stored as text only with
        ``modality="text"``. ``modality`` overrides detection. ``caption``/``transcript`` become
        the searchable content; without them an image is captioned by the LLM when one is
        configured, else the content describes the file from its metadata. ``store_file``
        overrides ``settings.store_files`` (copy vs reference by path). The event time
        defaults to the EXIF capture time, else now.
        """
        return await self._runtime.arun(
            self._aadd_perception(
                data_or_path,
                modality,
                caption=caption,
                transcript=transcript,
                metadata=metadata,
                filename=filename,
                timestamp=timestamp,
                importance=importance,
                session_id=session_id,
                store_file=store_file,
            )
        )

    def add_perception(self, data_or_path: Any, modality: Modality | str | None = None, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd_perception`."""
        return self._run(self.aadd_perception(data_or_path, modality, **kwargs))

    def _source(self, data: Any, modality: Modality | None, filename: str | None) -> tuple[Any, str | None, bool]:
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

    async def _astage(
        self, data: Any, modality: Modality | None, filename: str | None, copy: bool
    ) -> tuple[StagedFile, Modality, str]:
        source, name, is_path = self._source(data, modality, filename)
        staged = await asyncio.to_thread(self.files.stage, source, copy=copy or not is_path, filename=name)
        try:
            detected, ext = detect_modality(staged.head, staged.filename, modality)
        except BaseException:
            await asyncio.to_thread(self.files.discard, staged)
            raise
        return staged, detected, ext

    async def _aadd_perception(
        self,
        data: Any,
        modality: Modality | str | None,
        *,
        caption: str | None,
        transcript: str | None,
        metadata: dict[str, Any] | None,
        filename: str | None,
        timestamp: datetime | str | float | None,
        importance: float | None,
        session_id: str | None,
        store_file: bool | None,
    ) -> str:
        forced = as_modality(modality)
        caption = None if caption is None else validate_content(caption, "caption")
        transcript = None if transcript is None else validate_content(transcript, "transcript")
        extra = validate_metadata(metadata)
        reserved = sorted(RESERVED_KEYS.intersection(extra) | set(MATCH_KEYS).intersection(extra))
        if reserved:
            raise MemoryValidationError("metadata", f"keys {', '.join(reserved)} are set by the perceptual tier")
        when = None if timestamp is None else as_utc(timestamp)
        importance = None if importance is None else validate_importance(importance)
        copy = self.settings.store_files if store_file is None else bool(store_file)

        staged, detected, ext = await self._astage(data, forced, filename, copy)
        async with self._lock():
            try:
                existing = await self._afind_by_sha(staged.sha256)
                if existing is not None:
                    logger.debug("perception %s already holds these bytes; not stored again", existing.id)
                    await self._arecaption(existing, caption, transcript)
                    return existing.id
                info = await asyncio.to_thread(inspect_media, staged.read_path, detected, ext, staged.display_name)
                ref = await asyncio.to_thread(self.files.commit, staged, self.user_id, info.ext or ext)
            finally:
                await asyncio.to_thread(self.files.discard, staged)
            try:
                return await self._awrite_perception(
                    info, ref, caption, transcript, extra, when, importance, session_id
                )
            except BaseException:
                await asyncio.to_thread(self.files.delete, ref, self.user_id)
                raise

    async def _awrite_perception(
        self,
        info: MediaInfo,
        ref: FileRef,
        caption: str | None,
        transcript: str | None,
        extra: dict[str, Any],
        when: datetime | None,
        importance: float | None,
        session_id: str | None,
    ) -> str:
        path = self.files.resolve(ref, self.user_id)
        content, source = await self._acontent(info, path, ref, caption, transcript)
        text_space = await self.context.aspace()
        vectors: dict[str, tuple[PerceptionEncoder, np.ndarray]] = {}
        if info.phash is not None:
            vectors[self.phash_encoder.space] = (self.phash_encoder, self.phash_encoder.vector(info.phash))
        for encoder in self.encoders:
            if not encoder.handles(info.modality):
                continue
            try:
                vector = await encoder.aembed_file(path, info.modality)
            except MemoryValidationError as exc:
                logger.warning("encoder %s skipped %s: %s", encoder.signal, ref.filename or ref.sha256[:12], exc)
                continue
            vectors[encoder.space] = (encoder, vector)
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
            "memory_type": self.memory_type,
            "user_id": self.user_id,
            "session_id": session_id if session_id is not None else self.session_id,
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
                memory_type=self.memory_type,
                user_id=self.user_id,
                session_id=item.session_id,
                timestamp=item.timestamp,
                importance=item.importance,
                metadata={"perception_id": item.id, "signal": encoder.signal, "modality": info.modality.value},
            )
            records.append(Record(item=satellite, namespace=VECTOR_NAMESPACE, embedding=vector, space=space))
        ids = await self.context.awrite(records)
        return ids[0]

    async def _arecaption(self, existing: MemoryItem, caption: str | None, transcript: str | None) -> None:
        """The same bytes added again with a caption or transcript: the perception takes the new text.

        Why: the add returns the existing id, and silently keeping the old description would drop
        what the caller just said about it.
        """
        if not caption and not transcript:
            return
        content = f"{caption}\nTranscript: {transcript}" if caption and transcript else caption or transcript
        if content != existing.content:
            source = "given" if caption else "transcript"
            await StoredTier.aupdate(self, existing.id, content=content, metadata={"caption_source": source})

    async def _acontent(
        self, info: MediaInfo, path: Path, ref: FileRef, caption: str | None, transcript: str | None
    ) -> tuple[str, str]:
        """The searchable text of a perception and where it came from."""
        if caption and transcript:
            return f"{caption}\nTranscript: {transcript}", "given"
        if caption:
            return caption, "given"
        if transcript:
            return transcript, "transcript"
        if info.modality is Modality.TEXT and info.text and info.text.strip():
            return info.text[: self.settings.max_text_chars], "text"
        if (
            self.llm is not None
            and self.settings.caption_with_llm
            and info.modality in (Modality.IMAGE, Modality.VIDEO)
            and llm_accepts_images(self.llm, self.settings.llm_accepts_images)
        ):
            generated = await self._allm_caption(info, path)
            if generated:
                return validate_content(generated[:4000], "caption"), "llm"
        return self._auto_description(info, ref), "metadata"

    async def _allm_caption(self, info: MediaInfo, path: Path) -> str | None:
        if info.modality is Modality.IMAGE:
            return await acaption_with_llm(self.llm, path, info.mime_type)
        frame = await asyncio.to_thread(video_keyframe_png, path)
        if frame is None:
            return None
        keyframe = self.files.root / ".staging" / f"{uuid.uuid4().hex}.png"
        await asyncio.to_thread(keyframe.write_bytes, frame.getvalue())
        try:
            return await acaption_with_llm(self.llm, keyframe, "image/png")
        finally:
            keyframe.unlink(missing_ok=True)

    @staticmethod
    def _auto_description(info: MediaInfo, ref: FileRef) -> str:
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

    async def _afind_by_sha(self, sha256: str) -> MemoryItem | None:
        records = await self.context.records.query(
            self.user_id,
            memory_type=self.memory_type,
            filters=MemoryFilter(metadata={"sha256": sha256}),
            limit=1,
        )
        return records[0].item if records else None

    # ------------------------------------------------------------------ the common interface
    async def aadd(
        self,
        item_or_text: MemoryItem | str,
        *,
        timestamp: datetime | str | float | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
        dedupe: bool = False,
    ) -> str:
        """A text-only perception (a description of something seen or heard, no file)."""
        item = self.make_item(
            item_or_text, timestamp=timestamp, importance=importance, metadata=metadata, session_id=session_id
        )
        return (await self.aadd_items([self._as_text_perception(item)], dedupe=dedupe))[0]

    async def aadd_many(self, items: Sequence[MemoryItem | str], *, dedupe: bool = False) -> list[str]:
        return await self.aadd_items([self._as_text_perception(i) for i in self.make_items(items)], dedupe=dedupe)

    def _as_text_perception(self, item: MemoryItem) -> MemoryItem:
        reserved = sorted((RESERVED_KEYS - {"modality"}).intersection(item.metadata))
        if reserved:
            raise MemoryValidationError("metadata", f"keys {', '.join(reserved)} are set by the perceptual tier")
        modality = as_modality(item.metadata.get("modality", Modality.TEXT.value), "metadata.modality")
        return item.model_copy(update={"metadata": {**item.metadata, "modality": modality.value}})

    async def aget(self, memory_id: str) -> MemoryItem | None:
        items = await self.aget_many([memory_id])
        return items[0] if items else None

    async def aget_many(self, ids: Sequence[str]) -> list[MemoryItem]:
        """Perceptions with these ids, in order (absent ids and vector records skipped)."""
        records = await self.context.records.get(self.user_id, [self.check_id(i) for i in ids])
        return [r.item for r in records if r.namespace == MEMORY_NAMESPACE and r.item.memory_type == self.memory_type]

    async def aupdate(
        self,
        memory_id: str,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Change caption, importance or user metadata (file, hash and media fields are fixed)."""
        if metadata is not None:
            reserved = sorted(RESERVED_KEYS.intersection(validate_metadata(metadata)))
            if reserved:
                raise MemoryValidationError("metadata", f"keys {', '.join(reserved)} are set by the perceptual tier")
        return await super().aupdate(memory_id, content=content, importance=importance, metadata=metadata)

    async def _adelete_records(self, ids: Sequence[str]) -> tuple[list[str], int]:
        """Delete perceptions, their vectors, and their stored files when no other perception uses them."""
        deleted = await self._aremove_items(ids)
        return deleted, await self._aforget_sources(deleted)

    async def _aremove_items(self, ids: Sequence[str]) -> list[str]:
        async with self._lock():
            items = await self.aget_many(ids)
            if not items:
                return []
            doomed = []
            for item in items:
                doomed.append(item.id)
                spaces = set((item.metadata.get("encoders") or {}).values()) | {
                    e.space for e in self._all_encoders() if e.dim is not None
                }
                doomed.extend(satellite_id(item.id, space) for space in spaces if isinstance(space, str))
            await self._aopen_spaces(items)
            await self.context.adelete(self.user_id, doomed)
            await self._adelete_unreferenced_files(items)
            return [item.id for item in items]

    async def _aopen_spaces(self, items: Sequence[MemoryItem] = ()) -> None:
        """Open the vector indexes of every satellite space involved, so that deletes reach them.

        The context applies a delete to the indexes open in this process; after a restart an
        encoder space may not be open yet. Space ids end in ``-<dim>``.
        """
        spaces = {e.space: e.dim for e in self._all_encoders() if e.dim is not None}
        for item in items:
            for signal, space in (item.metadata.get("encoders") or {}).items():
                if signal != SIGNAL_CAPTION and isinstance(space, str) and space.rsplit("-", 1)[-1].isdigit():
                    spaces.setdefault(space, int(space.rsplit("-", 1)[-1]))
        for space, dim in spaces.items():
            await self.context.avector_index(space, dim)

    async def _adelete_unreferenced_files(self, items: Sequence[MemoryItem]) -> None:
        for item in items:
            file = item.metadata.get("file")
            sha = item.metadata.get("sha256")
            if not isinstance(file, dict) or file.get("mode") != "stored" or not isinstance(sha, str):
                continue
            if await self._afind_by_sha(sha) is not None:
                continue  # another perception of this user still shows these bytes
            try:
                await asyncio.to_thread(self.files.delete, file, self.user_id)
            except MemoryValidationError as exc:
                logger.warning("not deleting the file of perception %s: %s", item.id, exc)

    async def aclear(self) -> int:
        """Delete every perception of this user, their vectors and their stored files."""

        async def clear() -> int:
            async with self._lock():
                await self._aopen_spaces(await self.aquery())
                deleted = await self.context.records.delete_where(self.user_id, memory_type=self.memory_type)
                await self.context.records.delete_where(
                    self.user_id, namespace=VECTOR_NAMESPACE, memory_type=self.memory_type
                )
                await self.context.drain_outbox()
                await asyncio.to_thread(self.files.delete_user, self.user_id)
                return len(deleted)

        return await self._runtime.arun(clear())

    async def agarbage_collect(self) -> dict[str, int]:
        """Repair after a crash: delete stored files and satellite vectors no perception refers to."""

        async def collect() -> dict[str, int]:
            async with self._lock():
                items = await self.aquery()
                live_ids = {item.id for item in items}
                live_shas = {item.metadata.get("sha256") for item in items}
                orphans = [
                    r.item.id
                    for r in await self.context.records.query(
                        self.user_id, namespace=VECTOR_NAMESPACE, memory_type=self.memory_type
                    )
                    if r.item.metadata.get("perception_id") not in live_ids
                ]
                if orphans:
                    await self._aopen_spaces()
                    await self.context.adelete(self.user_id, orphans)
                files = 0
                for path in await asyncio.to_thread(self.files.stored_files, self.user_id):
                    if path.stem not in live_shas:
                        await asyncio.to_thread(path.unlink, True)
                        files += 1
                return {"vectors": len(orphans), "files": files}

        return await self._runtime.arun(collect())

    def garbage_collect(self) -> dict[str, int]:
        """Sync twin of :meth:`agarbage_collect`."""
        return self._run(self.agarbage_collect())

    async def aget_stats(self) -> dict[str, Any]:
        stats = await super().aget_stats()
        by_modality = {}
        for modality in Modality:
            by_modality[modality.value] = await self.context.records.count(
                self.user_id,
                memory_type=self.memory_type,
                filters=MemoryFilter(metadata={"modality": modality.value}),
            )
        files = await asyncio.to_thread(self.files.stored_files, self.user_id)
        stats.update(
            by_modality=by_modality,
            stored_files=len(files),
            stored_bytes=sum(p.stat().st_size for p in files),
            encoders=[e.signal for e in self._all_encoders()],
        )
        return stats

    # ------------------------------------------------------------------ reading
    async def aget_by_modality(
        self, modality: Modality | str, limit: int | None = None, **filters: Any
    ) -> list[MemoryItem]:
        """This user's perceptions of one modality, newest first."""
        value = as_modality(modality)
        assert value is not None
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise MemoryValidationError("limit", f"must be a positive integer, got {limit!r}")
        flt = MemoryFilter.from_kwargs(**filters)
        merged = MemoryFilter(**{**flt.model_dump(), "metadata": {**(flt.metadata or {}), "modality": value.value}})
        records = await self._runtime.arun(
            self.context.records.query(
                self.user_id, memory_type=self.memory_type, filters=merged, order_by="-timestamp", limit=limit
            )
        )
        return [r.item for r in records]

    def get_by_modality(self, modality: Modality | str, limit: int | None = None, **filters: Any) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_by_modality`."""
        return self._run(self.aget_by_modality(modality, limit, **filters))

    async def aretrieve(self, query: str, limit: int = 5, **filters: Any) -> list[MemoryItem]:
        """Perceptions for a text query (captions, and CLIP/audio text spaces when configured).

        Scored like the other stored tiers (relevance, recency, importance); each item says
        which signal matched in ``metadata["match_signal"]``.
        """
        query = validate_content(query, "query")
        limit = self._check_limit(limit)
        flt = MemoryFilter.from_kwargs(**filters)

        async def run() -> list[MemoryItem]:
            found = await self._asearch_text(query, None, flt, limit, None)
            items = await self._aload(found, flt, None)
            ranked = score_items(
                items,
                found.relevance,
                now=utcnow(),
                relevance_weight=self.config.relevance_weight,
                recency_weight=self.config.recency_weight,
                importance_weight=self.config.importance_weight,
                half_life_hours=self.config.recency_half_life_hours,
            )[:limit]
            if ranked:
                self.context.spawn(self.context.records.touch(self.user_id, [item.id for item in ranked]))
            return ranked

        return await self._runtime.arun(run())

    async def arank(self, query: str, flt: MemoryFilter, limit: int) -> dict[str, float]:
        return (await self._asearch_text(query, None, flt, limit, None)).relevance

    async def across_modal_search(
        self,
        query: Any,
        query_modality: Modality | str = "text",
        target_modality: Modality | str | None = None,
        limit: int = 5,
        *,
        signals: Sequence[str] | None = None,
        space: str | None = None,
        **filters: Any,
    ) -> list[MemoryItem]:
        """Perceptions similar to ``query``, best first, fused over every applicable signal.

        * ``text``: captions (dense and keyword), plus each encoder that embeds text (CLIP, CLAP);
        * ``image``/``video`` (bytes, path, file object or PIL image): perceptual-hash near
          duplicates within ``settings.phash_max_distance`` bits, plus image encoders;
        * ``audio``: audio encoders (the offline log-mel fingerprint by default);
        * ``embedding``: a vector searched directly in ``space`` (or the one encoder space of
          its dimension).

        ``target_modality`` keeps only perceptions of that modality; ``signals`` restricts the
        signals used (``caption_text``, ``phash``, ``clip``, ``audio``). ``score`` is the fused
        relevance scaled to (0, 1]; ``metadata`` gains ``match_signal``, ``match_signals``
        (raw score per signal) and, for phash, ``match_distance`` (Hamming bits).
        """
        q_modality = as_modality(query_modality, "query_modality") if query_modality != "embedding" else None
        target = as_modality(target_modality, "target_modality")
        limit = self._check_limit(limit)
        flt = MemoryFilter.from_kwargs(**filters)
        wanted = None if signals is None else {str(s) for s in signals}

        async def run() -> list[MemoryItem]:
            if query_modality == "embedding":
                found = await self._asearch_vector(query, space, flt, limit, target, wanted)
            elif q_modality is Modality.TEXT:
                if not isinstance(query, str):
                    raise MemoryValidationError("query", f"a text query must be a str, got {type(query).__name__}")
                found = await self._asearch_text(validate_content(query, "query"), target, flt, limit, wanted)
            else:
                assert q_modality is not None
                found = await self._asearch_media(query, q_modality, target, flt, limit, wanted)
            items = await self._aload(found, flt, target)
            items.sort(key=lambda item: found.relevance.get(item.id, 0.0), reverse=True)
            top = max(found.relevance.values(), default=1.0) or 1.0
            return [item.model_copy(update={"score": found.relevance[item.id] / top}) for item in items[:limit]]

        return await self._runtime.arun(run())

    def cross_modal_search(
        self,
        query: Any,
        query_modality: Modality | str = "text",
        target_modality: Modality | str | None = None,
        limit: int = 5,
        **kwargs: Any,
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`across_modal_search`."""
        return self._run(self.across_modal_search(query, query_modality, target_modality, limit, **kwargs))

    @staticmethod
    def _check_limit(limit: Any) -> int:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryValidationError("limit", f"must be a positive integer, got {limit!r}")
        return limit

    def _candidates(self, limit: int, target: Modality | None) -> int:
        base = max(limit * self.config.candidate_multiplier, 20)
        return base * 4 if target is not None else base

    async def _asearch_text(
        self, query: str, target: Modality | None, flt: MemoryFilter, limit: int, wanted: set[str] | None
    ) -> _Matches:
        candidates = self._candidates(limit, target)
        tasks = []
        if wanted is None or SIGNAL_CAPTION in wanted:
            tasks.append(self._acaption_rankings(query, flt, candidates))
        for encoder in self.encoders:
            if encoder.supports_text and (wanted is None or encoder.signal in wanted):
                tasks.append(self._aencoder_text_ranking(encoder, query, flt, candidates))
        rankings = [r for group in await asyncio.gather(*tasks) for r in group]
        return self._fuse(rankings)

    async def _acaption_rankings(self, query: str, flt: MemoryFilter, candidates: int) -> list[Ranking]:
        vector = await self.context.embeddings.aembed_query(query)
        dense, keyword = await asyncio.gather(
            self.context.adense_search(
                self.user_id, vector, memory_type=self.memory_type, filters=flt, limit=candidates
            ),
            self.context.records.keyword_search(
                self.user_id, query, memory_type=self.memory_type, filters=flt, limit=candidates
            ),
        )
        return [(SIGNAL_CAPTION, dense), (SIGNAL_CAPTION, keyword)]

    async def _aencoder_text_ranking(
        self, encoder: PerceptionEncoder, query: str, flt: MemoryFilter, candidates: int
    ) -> list[Ranking]:
        vector = await encoder.aembed_text(query)
        return [(encoder.signal, await self._asatellite_search(encoder.space, vector, flt, candidates))]

    async def aencoder_text_hits(
        self, encoder: PerceptionEncoder, query: str, flt: MemoryFilter, limit: int
    ) -> list[tuple[str, float]]:
        """Perceptions nearest to ``query`` in the text side of ``encoder``'s space: ``(id, cosine)``."""
        return (await self._aencoder_text_ranking(encoder, query, flt, limit))[0][1]

    async def _asatellite_search(
        self, space: str, vector: np.ndarray, flt: MemoryFilter, candidates: int
    ) -> list[tuple[str, float]]:
        """Search one encoder space and map satellite hits to perception ids (best first)."""
        sat_filter = MemoryFilter(**{**flt.model_dump(), "memory_ids": None, "metadata": None})
        hits = await self.context.adense_search(
            self.user_id,
            np.asarray(vector, dtype=np.float32),
            namespace=VECTOR_NAMESPACE,
            memory_type=self.memory_type,
            filters=sat_filter,
            limit=candidates,
            space=space,
        )
        if not hits:
            return []
        owners = {
            r.item.id: r.item.metadata.get("perception_id")
            for r in await self.context.records.get(self.user_id, [i for i, _ in hits])
        }
        ranking: list[tuple[str, float]] = []
        seen: set[str] = set()
        for sat_id, score in hits:
            owner = owners.get(sat_id)
            if isinstance(owner, str) and owner not in seen:
                seen.add(owner)
                ranking.append((owner, float(score)))
        return ranking

    async def _asearch_media(
        self,
        query: Any,
        modality: Modality,
        target: Modality | None,
        flt: MemoryFilter,
        limit: int,
        wanted: set[str] | None,
    ) -> _Matches:
        candidates = self._candidates(limit, target)
        staged, detected, ext = await self._astage(query, modality, None, True)
        try:
            path = staged.read_path
            info = await asyncio.to_thread(inspect_media, path, detected, ext, staged.display_name)
            rankings: list[Ranking] = []
            if info.phash is not None and (wanted is None or SIGNAL_PHASH in wanted):
                hits = await self._asatellite_search(
                    self.phash_encoder.space, self.phash_encoder.vector(info.phash), flt, candidates
                )
                near = [(i, float(similarity_to_hamming(s))) for i, s in hits]
                near = [(i, d) for i, d in near if d <= self.settings.phash_max_distance]
                rankings.append((SIGNAL_PHASH, near))
            for encoder in self.encoders:
                if encoder.handles(detected) and (wanted is None or encoder.signal in wanted):
                    vector = await encoder.aembed_file(path, detected)
                    rankings.append(
                        (encoder.signal, await self._asatellite_search(encoder.space, vector, flt, candidates))
                    )
        finally:
            await asyncio.to_thread(self.files.discard, staged)
        if not rankings:
            logger.info("no signal can search %s queries with the configured encoders", modality.value)
        return self._fuse(rankings)

    async def _asearch_vector(
        self,
        query: Any,
        space: str | None,
        flt: MemoryFilter,
        limit: int,
        target: Modality | None,
        wanted: set[str] | None,
    ) -> _Matches:
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if not np.isfinite(vector).all() or float(np.linalg.norm(vector)) <= 1e-12:
            raise MemoryValidationError("query", "an embedding query must be a finite, non-zero vector")
        choices = [e for e in self._all_encoders() if e.dim is not None and (wanted is None or e.signal in wanted)]
        if space is not None:
            choices = [e for e in choices if e.space == space]
        else:
            choices = [e for e in choices if e.dim == vector.shape[0]]
        if len(choices) != 1:
            known = ", ".join(f"{e.space} ({e.dim}-d)" for e in self._all_encoders() if e.dim is not None)
            raise MemoryValidationError(
                "space", f"name one encoder space for a {vector.shape[0]}-d vector; known: {known or 'none yet'}"
            )
        encoder = choices[0]
        if encoder.dim != vector.shape[0]:
            raise MemoryValidationError("query", f"space {encoder.space} holds {encoder.dim}-d vectors")
        hits = await self._asatellite_search(
            encoder.space, vector / np.linalg.norm(vector), flt, self._candidates(limit, target)
        )
        return self._fuse([(encoder.signal, hits)])

    def _fuse(self, rankings: Sequence[Ranking]) -> _Matches:
        """RRF over rankings, keeping each signal's raw score and the signal that ranked a perception best."""
        found = _Matches(dict(rrf_fuse([[i for i, _ in hits] for _, hits in rankings], k=self.config.rrf_k)))
        best_rank: dict[str, int] = {}
        for signal, hits in rankings:
            for rank, (memory_id, score) in enumerate(hits):
                found.scores.setdefault(memory_id, {}).setdefault(signal, score)
                if rank < best_rank.get(memory_id, len(hits) + 1):
                    best_rank[memory_id] = rank
                    found.best[memory_id] = signal
        return found

    async def _aload(self, found: _Matches, flt: MemoryFilter, target: Modality | None) -> list[MemoryItem]:
        """Fetch ranked perceptions, filter them, and annotate which signal matched."""
        if not found.relevance:
            return []
        records = await self.context.records.get(self.user_id, list(found.relevance))
        items: list[MemoryItem] = []
        for record in records:
            item = record.item
            if record.namespace != MEMORY_NAMESPACE or item.memory_type != self.memory_type:
                continue
            if not matches(item, flt) or (target is not None and item.metadata.get("modality") != target.value):
                continue
            signals = found.scores.get(item.id, {})
            meta = {**item.metadata, "match_signal": found.best.get(item.id), "match_signals": dict(signals)}
            if SIGNAL_PHASH in signals:
                meta["match_distance"] = int(signals[SIGNAL_PHASH])
            items.append(item.model_copy(update={"metadata": meta}))
        return items

    # ------------------------------------------------------------------ files and LLM context
    async def aopen(self, memory_id: str) -> bytes:
        """The bytes of a perception's file (for small files; use :meth:`path_of` to stream)."""
        path = await self.apath_of(memory_id)
        return await asyncio.to_thread(path.read_bytes)

    async def apath_of(self, memory_id: str) -> Path:
        """Readable path of a perception's file (checked to belong to this user)."""
        item = await self.aget(memory_id)
        if item is None or not isinstance(item.metadata.get("file"), dict):
            raise MemoryValidationError("memory_id", f"no perception with a file has id {memory_id!r}")
        return await asyncio.to_thread(self.files.resolve, item.metadata["file"], self.user_id)

    def path_of(self, memory_id: str) -> Path:
        """Sync twin of :meth:`apath_of`."""
        return self._run(self.apath_of(memory_id))

    async def adescribe_for_context(
        self, items: Sequence[MemoryItem], *, include_images: bool = False, max_images: int = 4
    ) -> list[str | ImageBlock]:
        """Perceptions for an LLM prompt: one text line each (with a ``perception:<id>`` reference)
        and, with ``include_images``, an ``ImageBlock`` after the line of each image (the middle
        keyframe for a video), at most ``max_images``. Items of other tiers are skipped.
        """
        from llama_index.core.base.llms.types import ImageBlock

        out: list[str | ImageBlock] = []
        images = 0
        for item in items:
            if item.memory_type != self.memory_type:
                continue
            out.append(describe_perception(item))
            modality = item.metadata.get("modality")
            if not include_images or images >= max_images or modality not in ("image", "video"):
                continue
            try:
                path = await self.apath_of(item.id)
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

    def describe_for_context(
        self, items: Sequence[MemoryItem], *, include_images: bool = False, max_images: int = 4
    ) -> list[str | ImageBlock]:
        """Sync twin of :meth:`adescribe_for_context`."""
        return self._run(self.adescribe_for_context(items, include_images=include_images, max_images=max_images))

    async def agenerate_content(
        self,
        prompt: str,
        perception_ids: Sequence[str],
        *,
        llm: Any = None,
        include_images: bool | None = None,
    ) -> str:
        """Ask an LLM ``prompt`` about stored perceptions; return its answer.

        The perceptions are described in text (caption, modality, size, reference); images
        (and video keyframes) are attached when the LLM accepts them (``include_images``,
        else ``settings.llm_accepts_images``, else only for a legacy ``MultiModalLLM``).
        """
        prompt = validate_content(prompt, "prompt")
        if isinstance(perception_ids, str):
            raise MemoryValidationError("perception_ids", "expected a list of ids, got a single string")
        model = llm or self.llm
        if model is None:
            from llama_index.core import Settings

            model = getattr(Settings, "_llm", None)
        if model is None:
            raise LLMRequiredError("generate_content needs an LLM: pass llm= or set Settings.llm")
        attach = llm_accepts_images(
            model, self.settings.llm_accepts_images if include_images is None else include_images
        )

        async def run() -> str:
            items = await self.aget_many(list(perception_ids))
            missing = set(map(str, perception_ids)) - {i.id for i in items}
            if missing:
                raise MemoryValidationError("perception_ids", f"no perception with id {sorted(missing)[0]!r}")
            parts = await self.adescribe_for_context(items, include_images=attach, max_images=len(items))
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
                        temp = self.files.root / ".staging" / f"{uuid.uuid4().hex}.png"
                        await asyncio.to_thread(temp.write_bytes, _raw_image_bytes(block.image))
                        scratch.append(temp)
                        images.append((temp, "image/png"))
                text = "Perceptions you can refer to:\n" + "\n".join(f"- {line}" for line in lines)
                return await aask_llm(model, f"{text}\n\n{prompt}", images)
            finally:
                for temp in scratch:
                    temp.unlink(missing_ok=True)

        return await self._runtime.arun(run())

    def generate_content(self, prompt: str, perception_ids: Sequence[str], **kwargs: Any) -> str:
        """Sync twin of :meth:`agenerate_content`."""
        return self._run(self.agenerate_content(prompt, perception_ids, **kwargs))


def _raw_image_bytes(data: bytes) -> bytes:
    """ImageBlock may hold base64 of the bytes it was given; return the raw bytes."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data
    return decoded if decoded[:8] == b"\x89PNG\r\n\x1a\n" else data
