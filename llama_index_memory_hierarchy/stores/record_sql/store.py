"""``SQLRecordStore``: the authoritative record store, on :class:`SQLDatabase`.

Its jobs live in one module each: :mod:`.reads` (records by id, queries, counts, keyword search),
:mod:`.writes` (inserts, updates, deletes, erasure) and :mod:`.changes` (the ``index_outbox`` the
vector indexes are kept in step from); this class puts them together.
"""

from __future__ import annotations

from llama_index_memory_hierarchy.stores.record_sql.changes import RecordChanges
from llama_index_memory_hierarchy.stores.record_sql.writes import RecordWrites


class SQLRecordStore(RecordWrites, RecordChanges):
    """Authoritative record store on SQLite (embedded) or PostgreSQL, via SQLAlchemy async.

    Build with ``SQLRecordStore(url)`` or ``SQLRecordStore.from_config(config)``; call
    :meth:`start` (or use ``async with``) before anything else.
    """
