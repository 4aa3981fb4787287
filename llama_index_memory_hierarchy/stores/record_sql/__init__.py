"""``SQLRecordStore``: the authoritative record store on SQLAlchemy 2 async.

One implementation serves SQLite embedded (``sqlite+aiosqlite:///path/memory.db``) and
PostgreSQL (``postgresql+asyncpg://...``), in modules by job:

* :mod:`.database`: the engine, schema migration and retrying transactions (:class:`SQLDatabase`);
* :mod:`.dialects`: what differs between the backends (keyword index, JSON equality, locks);
* :mod:`.rows`: validation and conversion between :class:`Record` and ``memories`` rows;
* :mod:`.reads`, :mod:`.writes`, :mod:`.changes`: reads and keyword search, writes and erasure, the index
  outbox; :mod:`.store` puts them together as :class:`SQLRecordStore`.

Every multi-row write is one transaction: rows, keyword index entries (SQLite triggers /
PostgreSQL generated column) and ``index_outbox`` rows commit together or not at all.
"""

from llama_index_memory_hierarchy.stores.record_sql.database import SQLDatabase
from llama_index_memory_hierarchy.stores.record_sql.dialects import (
    DialectStrategy,
    PostgresFTSStrategy,
    SQLiteFTS5Strategy,
)
from llama_index_memory_hierarchy.stores.record_sql.store import SQLRecordStore

__all__ = [
    "DialectStrategy",
    "PostgresFTSStrategy",
    "SQLDatabase",
    "SQLRecordStore",
    "SQLiteFTS5Strategy",
]
