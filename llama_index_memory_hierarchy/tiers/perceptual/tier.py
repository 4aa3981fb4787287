"""``PerceptualMemory``: images, audio, video and text files of one user, stored and searched by modality.

A perception is one memory record (its caption, transcript or description, embedded with
the text model) plus a satellite record per other vector (:mod:`.records`). Adding one
stages the input (:mod:`.intake`), reads it with real decoders, finds its text
(:mod:`.captions`) and writes the records in one transaction; the same bytes are stored
once per user. Searches fuse every signal by reciprocal rank (:mod:`.search`); perceptions
go into an LLM prompt as lines and images (:mod:`.llm_context`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llama_index_memory_hierarchy.errors import LLMRequiredError, MemoryValidationError
from llama_index_memory_hierarchy.perception.encoders import (
    SIGNAL_CAPTION,
    AudioEncoderAdapter,
    PerceptionEncoder,
    PHashEncoder,
    SpectralAudioEncoder,
    llm_accepts_images,
)
from llama_index_memory_hierarchy.perception.files import FileRef, FileStore
from llama_index_memory_hierarchy.perception.media import MediaInfo, Modality, as_modality, inspect_media
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE
from llama_index_memory_hierarchy.stores.worklock import WorkLock
from llama_index_memory_hierarchy.tiers.perceptual.captions import acontent, given_text
from llama_index_memory_hierarchy.tiers.perceptual.intake import astage, wrap_encoder
from llama_index_memory_hierarchy.tiers.perceptual.llm_context import aask_about, adescribe_for_context
from llama_index_memory_hierarchy.tiers.perceptual.records import (
    MATCH_KEYS,
    RESERVED_KEYS,
    VECTOR_NAMESPACE,
    perception_records,
    satellite_id,
)
from llama_index_memory_hierarchy.tiers.perceptual.search import PerceptionSearch
from llama_index_memory_hierarchy.tiers.perceptual.settings import PerceptionSettings
from llama_index_memory_hierarchy.tiers.stored import StoredTier
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    as_utc,
    validate_content,
    validate_importance,
    validate_metadata,
    validate_positive_int,
)

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ImageBlock

    from llama_index_memory_hierarchy.stores.context import StoreContext

logger = logging.getLogger(__name__)


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
        wrapped: list[PerceptionEncoder] = [wrap_encoder(e) for e in encoders]
        if self.settings.audio_fingerprint and not any(Modality.AUDIO in e.modalities for e in wrapped):
            wrapped.append(AudioEncoderAdapter(SpectralAudioEncoder()))
        self.encoders: list[PerceptionEncoder] = wrapped
        self.search = PerceptionSearch(
            user_id=self.user_id,
            context=context,
            files=self.files,
            settings=self.settings,
            phash_encoder=self.phash_encoder,
            encoders=self.encoders,
        )

    def _lock(self) -> WorkLock:
        """One lock per user, in every process of the folder: dedupe check, write and file removal never
        interleave."""
        return self.context.lock(PerceptualMemory, self.user_id)

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

        staged, detected, ext = await astage(self.files, data_or_path, forced, filename, copy)
        async with self._lock():
            try:
                existing = await self._afind_by_sha(staged.sha256)
                if existing is not None:
                    logger.debug("perception %s already holds these bytes; not stored again", existing.id)
                    await self._arecaption(existing, caption, transcript)
                    await self._acite(existing, extra.get("source_ids"))
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

    def add_perception(self, data_or_path: Any, modality: Modality | str | None = None, **kwargs: Any) -> str:
        """Sync twin of :meth:`aadd_perception`."""
        return self.blocking(self.aadd_perception(data_or_path, modality, **kwargs))

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
        content, source = await acontent(
            info, path, ref, caption, transcript, llm=self.llm, files=self.files, settings=self.settings
        )
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
        records = perception_records(
            user_id=self.user_id,
            session_id=session_id if session_id is not None else self.session_id,
            info=info,
            ref=ref,
            content=content,
            source=source,
            text_space=text_space,
            vectors=vectors,
            extra=extra,
            when=when,
            importance=importance,
        )
        ids = await self.context.awrite(records)
        return ids[0]

    async def _arecaption(self, existing: MemoryItem, caption: str | None, transcript: str | None) -> None:
        """The same bytes added again with a caption or transcript: the perception takes the new text.

        Why: the add returns the existing id, and silently keeping the old description would drop
        what the caller just said about it.
        """
        given = given_text(caption, transcript)
        if given is None:
            return
        content, source = given
        if content != existing.content:
            await StoredTier.aupdate(self, existing.id, content=content, metadata={"caption_source": source})

    async def _acite(self, existing: MemoryItem, sources: Any) -> None:
        """The same bytes added again: the perception now also stands for this add's sources.

        Why: a perception derived from a turn (``source_ids``) is deleted with the last turn it cites. The same
        image put in a second turn must add that turn, or deleting the first deletes the second's image too. Added
        without sources (explicitly), it stops being derived: it stays until it is deleted itself.
        """
        cited = existing.metadata.get("source_ids")
        if not cited:
            return  # not derived: no delete of a turn reaches it
        merged = list(dict.fromkeys([*cited, *(sources or [])])) if sources else []
        if merged != cited:
            await StoredTier.aupdate(self, existing.id, metadata={"source_ids": merged})

    async def _afind_by_sha(self, sha256: str) -> MemoryItem | None:
        records = await self.context.records.query(
            self.user_id,
            memory_type=self.memory_type,
            filters=MemoryFilter(metadata={"sha256": sha256}),
            limit=1,
        )
        return records[0].item if records else None

    # ------------------------------------------------------------------ the common interface
    def prepare_item(self, item: MemoryItem) -> MemoryItem:
        """A text-only perception (a description of something seen or heard, no file).

        What :meth:`aadd` and :meth:`aadd_many` store here: its modality checked (text by
        default), and none of the keys this tier sets for a file.
        """
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

    async def _aremove_records(self, ids: Sequence[str]) -> list[str]:
        """Delete perceptions, their vectors, and their stored files when no other perception uses them."""
        async with self._lock():
            items = await self.aget_many(ids)
            if not items:
                return []
            doomed = []
            for item in items:
                doomed.append(item.id)
                spaces = set((item.metadata.get("encoders") or {}).values()) | {
                    e.space for e in self.search.all_encoders() if e.dim is not None
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
        spaces = {e.space: e.dim for e in self.search.all_encoders() if e.dim is not None}
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
        async with self._lock():
            await self._aopen_spaces(await self.aquery())
            deleted = await self.context.records.delete_where(self.user_id, memory_type=self.memory_type)
            await self.context.records.delete_where(
                self.user_id, namespace=VECTOR_NAMESPACE, memory_type=self.memory_type
            )
            await self.context.drain_outbox()
            await asyncio.to_thread(self.files.delete_user, self.user_id)
            return len(deleted)

    async def agarbage_collect(self) -> dict[str, int]:
        """Repair after a crash: delete stored files and satellite vectors no perception refers to."""
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

    def garbage_collect(self) -> dict[str, int]:
        """Sync twin of :meth:`agarbage_collect`."""
        return self.blocking(self.agarbage_collect())

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
            encoders=[e.signal for e in self.search.all_encoders()],
        )
        return stats

    # ------------------------------------------------------------------ reading
    async def aget_by_modality(
        self, modality: Modality | str, limit: int | None = None, **filters: Any
    ) -> list[MemoryItem]:
        """This user's perceptions of one modality, newest first."""
        value = as_modality(modality)
        assert value is not None
        limit = None if limit is None else validate_positive_int(limit, "limit")
        flt = MemoryFilter.from_kwargs(**filters)
        merged = MemoryFilter(**{**flt.model_dump(), "metadata": {**(flt.metadata or {}), "modality": value.value}})
        records = await self.context.records.query(
            self.user_id, memory_type=self.memory_type, filters=merged, order_by="-timestamp", limit=limit
        )
        return [r.item for r in records]

    def get_by_modality(self, modality: Modality | str, limit: int | None = None, **filters: Any) -> list[MemoryItem]:
        """Sync twin of :meth:`aget_by_modality`."""
        return self.blocking(self.aget_by_modality(modality, limit, **filters))

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
        limit = validate_positive_int(limit, "limit")
        flt = MemoryFilter.from_kwargs(**filters)
        wanted = None if signals is None else {str(s) for s in signals}

        if query_modality == "embedding":
            found = await self.search.asearch_vector(query, space, flt, limit, target, wanted)
        elif q_modality is Modality.TEXT:
            if not isinstance(query, str):
                raise MemoryValidationError("query", f"a text query must be a str, got {type(query).__name__}")
            found = await self.search.asearch_text(validate_content(query, "query"), target, flt, limit, wanted)
        else:
            assert q_modality is not None
            found = await self.search.asearch_media(query, q_modality, target, flt, limit, wanted)
        items = await self.search.aload(found, flt, target)
        items.sort(key=lambda item: found.relevance.get(item.id, 0.0), reverse=True)
        top = max(found.relevance.values(), default=1.0) or 1.0
        return [item.model_copy(update={"score": found.relevance[item.id] / top}) for item in items[:limit]]

    def cross_modal_search(
        self,
        query: Any,
        query_modality: Modality | str = "text",
        target_modality: Modality | str | None = None,
        limit: int = 5,
        **kwargs: Any,
    ) -> list[MemoryItem]:
        """Sync twin of :meth:`across_modal_search`."""
        return self.blocking(self.across_modal_search(query, query_modality, target_modality, limit, **kwargs))

    async def aencoder_text_hits(
        self, encoder: PerceptionEncoder, query: str, flt: MemoryFilter, limit: int
    ) -> list[tuple[str, float]]:
        """Perceptions nearest to ``query`` in the text side of ``encoder``'s space: ``(id, cosine)``."""
        return await self.search.aencoder_text_hits(encoder, query, flt, limit)

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
        return self.blocking(self.apath_of(memory_id))

    async def adescribe_for_context(
        self, items: Sequence[MemoryItem], *, include_images: bool = False, max_images: int = 4
    ) -> list[str | ImageBlock]:
        """Perceptions for an LLM prompt: one text line each (with a ``perception:<id>`` reference)
        and, with ``include_images``, an ``ImageBlock`` after the line of each image (the middle
        keyframe for a video), at most ``max_images``. Items of other tiers are skipped.
        """
        return await adescribe_for_context(items, self.apath_of, include_images=include_images, max_images=max_images)

    def describe_for_context(
        self, items: Sequence[MemoryItem], *, include_images: bool = False, max_images: int = 4
    ) -> list[str | ImageBlock]:
        """Sync twin of :meth:`adescribe_for_context`."""
        return self.blocking(self.adescribe_for_context(items, include_images=include_images, max_images=max_images))

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

        items = await self.aget_many(list(perception_ids))
        missing = set(map(str, perception_ids)) - {i.id for i in items}
        if missing:
            raise MemoryValidationError("perception_ids", f"no perception with id {sorted(missing)[0]!r}")
        parts = await self.adescribe_for_context(items, include_images=attach, max_images=len(items))
        return await aask_about(model, prompt, parts, self.files.root / ".staging")

    def generate_content(self, prompt: str, perception_ids: Sequence[str], **kwargs: Any) -> str:
        """Sync twin of :meth:`agenerate_content`."""
        return self.blocking(self.agenerate_content(prompt, perception_ids, **kwargs))
