"""Which stored records were put as chat messages: a keyed signature that metadata cannot forge.

Why: metadata is caller-controlled (``add(metadata=...)``, agent tool calls, import files). Had
``get()`` replayed a record as a chat message with the role its metadata names, any memory could
come back as a genuine ``system`` message (or break history with a role LlamaIndex rejects).
``HierarchicalMemory.put`` therefore signs each turn (HMAC-SHA256 over user, id, role, text and
the serialised message) with a random key kept in the record store under an owner that is not a
valid user id, so no user's export, import or erasure carries it. Only records whose signature
verifies replay as chat messages; everything else is shown as a memory. Editing a turn's text
invalidates its signature, so an edited turn is shown as a memory too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from llama_index_memory_hierarchy.types import MemoryItem

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from llama_index_memory_hierarchy.stores.context import StoreContext

#: Metadata key holding a turn's signature.
SIGNATURE_KEY = "chat_signature"
#: Owner of the key row in ``lifecycle_state``: not a valid user id, so no per-user operation touches it.
_KEY_OWNER = "#store"
_KEY_NAME = "chat_signing_key"


async def asigning_key(context: StoreContext) -> bytes:
    """The store's signing key, created once (concurrent first opens agree on one key)."""
    shared = context.shared
    if shared.signing_key is not None:
        return shared.signing_key
    from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore, state

    c = state.c
    fresh = json.dumps(secrets.token_hex(32))

    async def work(conn: AsyncConnection) -> str:
        row = {"user_id": _KEY_OWNER, "key": _KEY_NAME, "value": fresh, "updated_at": time.time()}
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert

            await conn.execute(insert(state).values(**row).on_conflict_do_nothing())
        else:
            await conn.execute(sa.insert(state).values(**row).prefix_with("OR IGNORE"))
        found = await conn.execute(sa.select(c.value).where(c.user_id == _KEY_OWNER, c.key == _KEY_NAME))
        return found.scalar_one()

    await LifecycleStore(context).aensure_tables()
    value = await context.records.run_transaction(work, write=True, op="signing key")  # type: ignore[attr-defined]
    shared.signing_key = bytes.fromhex(json.loads(value))
    return shared.signing_key


def sign_turn(key: bytes, *, user_id: str, memory_id: str, role: str, content: str, raw: str | None) -> str:
    """Signature of one turn as ``put()`` stored it."""
    payload = json.dumps([user_id, memory_id, role, content, raw or ""]).encode("ascii")
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def is_signed_turn(key: bytes, item: MemoryItem) -> bool:
    """Whether ``item`` is a chat message exactly as ``put()`` stored it (signature verifies)."""
    metadata: dict[str, Any] = item.metadata
    signature, role, raw = metadata.get(SIGNATURE_KEY), metadata.get("role"), metadata.get("chat_message")
    if not isinstance(signature, str) or not isinstance(role, str) or not isinstance(raw, (str, type(None))):
        return False
    expected = sign_turn(key, user_id=item.user_id, memory_id=item.id, role=role, content=item.content, raw=raw)
    return hmac.compare_digest(signature, expected)
