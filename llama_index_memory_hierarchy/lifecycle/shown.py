"""What ``get()`` showed earlier in a session, for every memory object on it, in this process and in others.

Why: ``get()`` holds back what an earlier input of the session showed (``retrieval.conversation_query``'s
``ShownEarlier``); kept per object, a second object on the session (a web service opening one per request,
another worker, an MCP server) showed the same memories again. The objects of a process share one per
session (``SharedState.shown``), so theirs is seen at once; other processes' reach it through the access
log (``lifecycle_shown``, written in the background ``stores.access``): the rows after those last read are
read again only when something was committed since (``RecordStore.change_token``: no read while nothing
was), and only those from the session's start on (``reset()``/``set()`` end what was shown before).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
from llama_index_memory_hierarchy.retrieval.conversation_query import ShownEarlier
from llama_index_memory_hierarchy.stores.context import StoreContext

#: Own records kept to be recognised in the access log: beyond this, some are recorded twice (which changes nothing).
_MINE_KEPT = 4 * ShownEarlier.MAX_INPUTS


class _Session:
    """The shared state of one session: what was shown, and how far the access log was read."""

    def __init__(self) -> None:
        self.earlier = ShownEarlier()
        self.seq = 0
        self.token: Hashable | None = None
        self.floor: float | None = None
        self.read = False
        #: What this process recorded that its access-log rows, once written, must not record again.
        self.mine: Counter[tuple[str, tuple[str, ...]]] = Counter()


class SessionShown:
    """One memory object's view of what its session was shown (see the module docstring)."""

    def __init__(self, context: StoreContext, store: LifecycleStore, user_id: str, session_id: str) -> None:
        self._context = context
        self._store = store
        self._key = (user_id, session_id)

    def _session(self) -> _Session:
        shared = self._context.shared.shown
        session = shared.get(self._key)
        if session is None:
            session = shared[self._key] = _Session()
        return session

    async def aearlier(self, floor: float | None) -> ShownEarlier:
        """What the session was shown since ``floor`` (its history's start), with other processes' new rows."""
        session = self._session()
        token = self._context.records.change_token()
        if session.read and token is not None and token == session.token and floor == session.floor:
            return session.earlier
        if floor != session.floor:  # a reset() or set() since: what was shown before it no longer counts
            session.earlier.clear()
            session.seq, session.floor = 0, floor
        user_id, session_id = self._key
        rows = await self._store.ashown_in_session(
            user_id, session_id, after_seq=session.seq, since=floor, limit=ShownEarlier.MAX_INPUTS
        )
        for seq, text, ids in rows:
            mine = (text, tuple(ids))
            if session.mine[mine]:
                session.mine[mine] -= 1  # this process's own row: recorded when it was shown
            else:
                session.earlier.record(text, ids)
            session.seq = max(session.seq, seq)
        session.mine += Counter()  # drops the counts that reached 0
        session.token, session.read = token, True
        return session.earlier

    def record(self, query: str, ids: Sequence[str], logged: str) -> None:
        """``ids`` were shown for ``query`` (logged as ``logged``, the access log's cut of it)."""
        session = self._session()
        session.earlier.record(query, ids)
        if sum(session.mine.values()) >= _MINE_KEPT:  # rows never written (uncounted reads): recorded again, harmless
            session.mine.clear()
        session.mine[logged, tuple(ids)] += 1

    def clear(self) -> None:
        """Forget what was shown (the session's short-term history ends, or the user's memories were erased)."""
        self._context.shared.shown.pop(self._key, None)
