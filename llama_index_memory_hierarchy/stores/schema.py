"""Relational schema of the record store (SQLAlchemy Core), shared by every SQL-backed module.

Other modules add their own tables to :data:`metadata` (``Table("kb_documents", metadata, ...)``):
:meth:`SQLRecordStore.start` creates every table registered on it, and ``delete_user`` deletes
a user's rows from every registered table that has a ``user_id`` column.

Times are float epoch seconds (UTC), embeddings float32 bytes, metadata canonical JSON text
(sorted keys, compact), so the same rows read back identically on SQLite and PostgreSQL.
Dialect-specific objects (the SQLite FTS5 table, the PostgreSQL ``tsvector`` column) are not
declared here. Every schema object of these tables is created and changed by the Alembic
revisions in ``stores/migrations``: a change here needs a new revision there (``alembic check``
and a test compare the two).
"""

from __future__ import annotations

import sqlalchemy as sa

#: Version of the record store schema written by this package (row ``record_store`` of ``schema_info``);
#: the ``schema_version`` of the head Alembic revision in ``stores/migrations/versions`` (a test checks).
SCHEMA_VERSION = 3
#: ``schema_info.component`` of the record store's tables.
SCHEMA_COMPONENT = "record_store"

#: Shared metadata with a naming convention, so constraint names are stable across dialects.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

#: Auto-increment primary key: BIGINT on PostgreSQL, INTEGER (the rowid alias) on SQLite.
SeqType = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

memories = sa.Table(
    "memories",
    metadata,
    sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(36), nullable=False, unique=True),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("session_id", sa.String(128), nullable=True),
    sa.Column("namespace", sa.String(128), nullable=False),
    sa.Column("memory_type", sa.String(16), nullable=False),
    sa.Column("content", sa.Text(), nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("timestamp", sa.Double(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("last_accessed", sa.Double(), nullable=True),
    sa.Column("importance", sa.Double(), nullable=False),
    sa.Column("access_count", sa.Integer(), nullable=False, default=0),
    sa.Column("pinned", sa.Boolean(), nullable=False, default=False),
    sa.Column("metadata", sa.Text(), nullable=False, default="{}"),
    sa.Column("embedding", sa.LargeBinary(), nullable=True),
    sa.Column("space", sa.String(255), nullable=True),
    sa.Column("keyword", sa.Text(), nullable=False, default=""),
    sa.Column("keyword_scope", sa.Text(), nullable=False, default=""),
    sa.Index("ix_memories_scope", "user_id", "namespace", "memory_type", "timestamp"),
    sa.Index("ix_memories_dedupe", "user_id", "content_hash"),
    sa.Index("ix_memories_space", "space", "seq"),
    sqlite_autoincrement=True,  # never reuse a seq: FTS rowids and outbox cursors stay unambiguous
)

index_outbox = sa.Table(
    "index_outbox",
    metadata,
    sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
    sa.Column("op", sa.String(8), nullable=False),
    sa.Column("memory_id", sa.String(36), nullable=False),
    sa.Column("user_id", sa.String(128), nullable=False),
    sa.Column("space", sa.String(255), nullable=True),
    sqlite_autoincrement=True,
)

schema_info = sa.Table(
    "schema_info",
    metadata,
    sa.Column("component", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer(), nullable=False),
)


def user_scoped_tables() -> list[sa.Table]:
    """Registered tables with a ``user_id`` column, dependents first (safe deletion order)."""
    return [table for table in reversed(metadata.sorted_tables) if "user_id" in table.c]
