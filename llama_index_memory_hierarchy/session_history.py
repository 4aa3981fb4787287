"""A session's short-term history, what ``get()`` replays: exactly as put, durable, shared.

Shared: every memory object on one (user, session), in this process or another, reads the
history from the record store. A turn put by one is in ``get_all()`` of the others; ``reset()``
and ``set()`` write where the session's history starts (a time, and the turns ``set()`` named)
to the record store, so they hold for every object and after reopening. Each read checks that
start (one primary-key read) and reads only the turns stored since the previous read (one
indexed range read on time), not the whole session; and only when something was committed to the
store since then (:meth:`~.stores.base.RecordStore.change_token`, one ``PRAGMA`` on SQLite).

Exact: a message that its text would not reproduce (several blocks, tool calls in
``additional_kwargs``, surrounding whitespace, an empty message) is stored as its JSON; a binary
block (image, audio, video, document) over :data:`INLINE_BYTES` is stored once, content-addressed,
as a perception (so the perceptual tier indexes it and its encoders see it) and referenced from the
JSON. What is searched is the turn's text (``messages.message_text``), apart from what is replayed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock

from llama_index_memory_hierarchy.errors import MemoryHierarchyError
from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.messages import message_text
from llama_index_memory_hierarchy.perception.media import Modality
from llama_index_memory_hierarchy.provenance import asigning_key, is_signed_turn
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.text import count_tokens
from llama_index_memory_hierarchy.tiers.tierset import TierSet
from llama_index_memory_hierarchy.types import MemoryItem, as_utc, utcnow

logger = logging.getLogger(__name__)

#: One message of the history: (turn id, the message as put, its tokens).
Entry = tuple[str, ChatMessage, int]
#: Metadata key of a turn's message as JSON, when its text would not reproduce it.
CHAT_MESSAGE_KEY = "chat_message"
#: Key, in a block of that JSON, of the perception holding the block's bytes.
FILE_KEY = "lmh_file"
#: Binary blocks up to this many base64 characters stay inline in the JSON.
INLINE_BYTES = 4096
#: How far before the previous read a read looks for turns of other objects: a turn's time is taken
#: when its put begins, before it is embedded and committed.
LOOKBACK = timedelta(seconds=5)


@dataclass(frozen=True)
class _Binary:
    field: str
    modality: Modality | None


#: The binary blocks of a chat message: which field holds the (base64) bytes, and as which perception.
_BINARY = {
    "image": _Binary("image", Modality.IMAGE),
    "audio": _Binary("audio", Modality.AUDIO),
    "video": _Binary("video", Modality.VIDEO),
    "document": _Binary("data", None),
}


def _state_key(session_id: str) -> str:
    """The ``lifecycle_state`` key of a session's start (bounded: session ids may be long)."""
    return "history:" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:48]


class SessionHistory:
    """The short-term history of one session as one memory object reads and writes it."""

    def __init__(
        self,
        context: StoreContext,
        tiers: TierSet,
        *,
        user_id: str,
        session_id: str,
        on_foreign_start: Callable[[], Awaitable[None]],
    ) -> None:
        self._context = context
        self._tiers = tiers
        self._user_id = user_id
        self._session_id = session_id
        self._store = LifecycleStore(context)
        self._key = _state_key(session_id)
        self._on_foreign_start = on_foreign_start
        self._entries: list[Entry] | None = None
        self._start: tuple[float | None, tuple[str, ...]] | None = None
        self._checked: datetime | None = None
        self._foreign: tuple[int, int] | None = None
        self._lock: asyncio.Lock | None = None
        #: The record store's change token when the entries were last read (:meth:`RecordStore.change_token`).
        self._token: Hashable | None = None
        #: Grows with every change of the entries (a cache of what depends on them keys on it).
        self.version = 0

    @property
    def floor(self) -> float | None:
        """Where the history starts as last read (epoch seconds; None: the session's beginning)."""
        return self._start[0] if self._start is not None else None

    # ------------------------------------------------------------------ encoding
    async def aencode(self, message: ChatMessage, turn_id: str, text: str) -> str | None:
        """The JSON to store for ``message`` (None when ``text`` alone reproduces it), binary blocks
        stored as perceptions of this session that cite the turn (deleting the turn deletes them)."""
        blocks = message.blocks
        if (
            not message.additional_kwargs
            and len(blocks) == 1
            and isinstance(blocks[0], TextBlock)
            and blocks[0].text == text
        ):
            return None
        try:
            data = message.model_dump(mode="json")
            for block in data.get("blocks") or []:
                await self._astore_binary(block, turn_id)
            return json.dumps(data, ensure_ascii=False)
        except (TypeError, ValueError) as exc:  # additional_kwargs a caller filled with objects JSON cannot hold
            logger.warning("turn %s: message not serialisable (%s); only its text replays", turn_id, exc)
            return None

    async def _astore_binary(self, block: dict[str, Any], turn_id: str) -> None:
        spec = _BINARY.get(block.get("block_type", ""))
        encoded = block.get(spec.field) if spec else None
        if spec is None or not isinstance(encoded, str) or len(encoded) <= INLINE_BYTES:
            return
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return  # not base64: stays inline, as given
        perceptual = self._tiers.perceptual
        try:
            perception_id = await perceptual.aadd_perception(
                data, spec.modality, session_id=self._session_id, metadata={"source_ids": [turn_id]}
            )
            item = await perceptual.aget(perception_id)
        except MemoryHierarchyError as exc:  # bytes the tier does not take (format, size): kept inline
            logger.info("turn %s: a %s block stays inline (%s)", turn_id, block["block_type"], exc)
            return
        if item is None or not isinstance(item.metadata.get("file"), dict):
            return
        block[spec.field] = None
        block[FILE_KEY] = {"perception": perception_id, "file": item.metadata["file"]}

    async def adecode(self, item: MemoryItem) -> ChatMessage:
        """The chat message a signed turn was put as, its binary blocks read back from their files."""
        role = MessageRole(item.metadata["role"])
        raw = item.metadata.get(CHAT_MESSAGE_KEY)
        if raw:
            try:
                data = json.loads(raw)
                for block in data.get("blocks") or []:
                    await self._aload_binary(block, item.id)
                message = ChatMessage.model_validate(data)
                if message.role == role:
                    return message
            except (TypeError, ValueError, KeyError):
                pass
            logger.warning("memory %s: stored chat message unreadable; using its text", item.id)
        return ChatMessage(role=role, content=item.content)

    async def _aload_binary(self, block: dict[str, Any], turn_id: str) -> None:
        ref = block.pop(FILE_KEY, None)
        spec = _BINARY.get(block.get("block_type", ""))
        if not isinstance(ref, dict) or spec is None:
            return
        files = self._tiers.perceptual.files
        try:
            path = await asyncio.to_thread(files.resolve, ref.get("file"), self._user_id)
            data = await asyncio.to_thread(path.read_bytes)
        except (MemoryHierarchyError, OSError) as exc:  # the perception was deleted since
            logger.info("turn %s: a %s block is no longer stored (%s)", turn_id, block["block_type"], exc)
            kind = block["block_type"]
            block.clear()
            block.update(block_type="text", text=f"[{kind} deleted]")
            return
        block[spec.field] = base64.b64encode(data).decode("ascii")

    # ------------------------------------------------------------------ reads
    async def aentries(self) -> list[Entry]:
        """The history now: reloaded when its start changed (a ``reset()``/``set()`` by another object),
        else with the turns other objects put since the previous read appended."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            token = self._context.records.change_token()
            if token is not None and token == self._token and self._entries is not None:
                return self._entries  # nothing was committed since the last read, by anyone
            await self._context.afollow()  # other processes' deletes counted before _adrop_deleted reads them
            state = await self._store.aget_state(self._user_id, self._key) or {}
            start = (state.get("floor"), tuple(state.get("ids") or ()))
            if self._entries is None or start != self._start:
                foreign = self._entries is not None
                await self._aload(start)
                if foreign:
                    await self._on_foreign_start()
            else:
                await self._acatch_up()
                await self._adrop_deleted()
            assert self._entries is not None
            self._token = token
            return self._entries

    async def _aload(self, start: tuple[float | None, tuple[str, ...]]) -> None:
        floor, ids = start
        checked = utcnow()
        key = await asigning_key(self._context)
        episodic = self._tiers.episodic
        named = [i for i in await episodic.aget_many(list(ids)) if is_signed_turn(key, i)] if ids else []
        named_ids = {i.id for i in named}
        items = await episodic.aget_session(self._session_id)
        after = [i for i in items if self._after(i, floor) and i.id not in named_ids and is_signed_turn(key, i)]
        self._entries = [await self._aentry(i) for i in [*named, *after]]
        self._start, self._checked = start, checked
        self._foreign = self._context.foreign_revision(self._user_id)
        self.version += 1

    async def _acatch_up(self) -> None:
        assert self._entries is not None and self._checked is not None and self._start is not None
        checked = utcnow()
        items = await self._tiers.episodic.aquery(session_id=self._session_id, start_time=self._checked - LOOKBACK)
        known = {memory_id for memory_id, _, _ in self._entries}
        fresh = [i for i in items if i.id not in known and self._after(i, self._start[0])]
        if fresh:
            key = await asigning_key(self._context)
            added = [await self._aentry(i) for i in fresh if is_signed_turn(key, i)]
            if added:
                self._entries.extend(added)
                self.version += 1
        self._checked = checked

    async def _adrop_deleted(self) -> None:
        """After other processes changed this user's records (as the store context saw in its change log), drop
        the turns they deleted: one read of the history's ids, only then."""
        foreign = self._context.foreign_revision(self._user_id)
        if foreign == self._foreign:
            return
        self._foreign = foreign
        assert self._entries is not None
        ids = [memory_id for memory_id, _, _ in self._entries]
        if ids:
            present = {item.id for item in await self._tiers.episodic.aget_many(ids)}
            if len(present) < len(ids):
                self.forget(set(ids) - present)

    @staticmethod
    def _after(item: MemoryItem, floor: float | None) -> bool:
        return floor is None or item.timestamp.timestamp() >= floor

    async def _aentry(self, item: MemoryItem) -> Entry:
        return item.id, await self.adecode(item), count_tokens(item.content)

    # ------------------------------------------------------------------ writes
    async def aappend(self, ids: Sequence[str], messages: Sequence[ChatMessage]) -> None:
        """These turns were just put (ids as stored, in order)."""
        entries = await self.aentries()
        known = {memory_id for memory_id, _, _ in entries}
        for memory_id, message in zip(ids, messages, strict=True):
            if memory_id not in known:
                entries.append((memory_id, message, count_tokens(message_text(message))))
                known.add(memory_id)
        self.version += 1

    async def astart(
        self, floor: datetime | None = None, ids: Sequence[str] = (), messages: Sequence[ChatMessage] = ()
    ) -> None:
        """The session's history starts now (``reset()``), or at ``floor`` with the turns ``ids`` first
        (``set()``: the messages it named, some of them stored earlier), for every object on the session."""
        moment = as_utc(floor or utcnow(), "floor")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            state = {"floor": moment.timestamp(), "ids": list(ids)}
            await self._store.aset_state(self._user_id, self._key, state)
            entries: list[Entry] = []
            seen: set[str] = set()
            for memory_id, message in zip(ids, messages, strict=True):
                if memory_id not in seen:
                    entries.append((memory_id, message, count_tokens(message_text(message))))
                    seen.add(memory_id)
            self._entries = entries
            self._start = (state["floor"], tuple(state["ids"]))
            self._checked = moment
            self.version += 1

    def forget(self, ids: set[str]) -> bool:
        """Deleted turns leave the history; whether one was there."""
        entries = self._entries
        if entries is None:
            return False
        kept = [entry for entry in entries if entry[0] not in ids]
        found = len(kept) < len(entries)
        entries[:] = kept
        self.version += found
        return found

    def invalidate(self) -> None:
        """Read the history from the store again on next use (after an erasure or an import)."""
        self._entries = None
        self.version += 1
