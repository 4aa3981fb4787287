"""Baseline: the record store schema version 1 (memories, index_outbox, schema_info, keyword index).

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Frozen copy of what ``stores/schema.py`` declared at version 1 (a later change to the metadata
goes into a new revision, never here), plus the dialect's keyword index: an FTS5
external-content table kept in step by triggers on SQLite, a generated ``tsvector`` column with
a GIN index on PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
#: Integer schema version after this revision (written to ``schema_info``).
schema_version = 1

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_FTS_TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False),
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
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("space", sa.String(255), nullable=True),
        sa.Column("keyword", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_memories"),
        sa.UniqueConstraint("id", name="uq_memories_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memories_scope", "memories", ["user_id", "namespace", "memory_type", "timestamp"])
    op.create_index("ix_memories_dedupe", "memories", ["user_id", "content_hash"])
    op.create_index("ix_memories_space", "memories", ["space", "seq"])
    op.create_table(
        "index_outbox",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("op", sa.String(8), nullable=False),
        sa.Column("memory_id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("space", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_index_outbox"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "schema_info",
        sa.Column("component", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("component", name="pk_schema_info"),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        fts = "memories_fts"
        for statement in (
            f"CREATE VIRTUAL TABLE {fts} USING fts5(keyword, content='memories', content_rowid='seq', "
            f'tokenize="{_FTS_TOKENIZE}")',
            f"CREATE TRIGGER {fts}_ai AFTER INSERT ON memories BEGIN "
            f"INSERT INTO {fts}(rowid, keyword) VALUES (new.seq, new.keyword); END",
            f"CREATE TRIGGER {fts}_ad AFTER DELETE ON memories BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, keyword) VALUES ('delete', old.seq, old.keyword); END",
            f"CREATE TRIGGER {fts}_au AFTER UPDATE OF keyword ON memories BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, keyword) VALUES ('delete', old.seq, old.keyword); "
            f"INSERT INTO {fts}(rowid, keyword) VALUES (new.seq, new.keyword); END",
        ):
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(
            "ALTER TABLE memories ADD COLUMN keyword_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, keyword)) STORED"
        )
        op.execute("CREATE INDEX ix_memories_keyword_tsv ON memories USING GIN (keyword_tsv)")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in ("memories_fts_ai", "memories_fts_ad", "memories_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    op.drop_table("schema_info")
    op.drop_table("index_outbox")
    op.drop_index("ix_memories_space", table_name="memories")
    op.drop_index("ix_memories_dedupe", table_name="memories")
    op.drop_index("ix_memories_scope", table_name="memories")
    op.drop_table("memories")
