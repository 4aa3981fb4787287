"""Keyword scope: a per-(user, namespace) token column that full-text search intersects with first.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

``memories.keyword_scope`` holds one token naming the row's user and namespace (``"s"`` + hex
of ``user_id \\x1f namespace``, frozen here as :func:`_scope`), so SQLite FTS5 can restrict a
query to one user's rows before ranking. Existing rows are backfilled; on SQLite the FTS5
table gains the column (it is recreated with its triggers and rebuilt from ``memories``).
PostgreSQL's ``tsvector`` index is unchanged (the scope is a plain column there).

Tolerates a database that already has the column (created by a development build that
put it into the baseline).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
#: Integer schema version after this revision (written to ``schema_info``).
schema_version = 2

_FTS = "memories_fts"
_FTS_TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


def _scope(user_id: str, namespace: str) -> str:
    return "s" + f"{user_id}\x1f{namespace}".encode().hex()


def upgrade() -> None:
    bind = op.get_bind()
    columns = {column["name"] for column in sa.inspect(bind).get_columns("memories")}
    if "keyword_scope" not in columns:
        op.add_column("memories", sa.Column("keyword_scope", sa.Text(), nullable=False, server_default=""))
    memories = sa.table("memories", sa.column("user_id"), sa.column("namespace"), sa.column("keyword_scope"))
    pairs = bind.execute(sa.select(memories.c.user_id, memories.c.namespace).distinct()).all()
    for user_id, namespace in pairs:
        bind.execute(
            sa.update(memories)
            .where(memories.c.user_id == user_id, memories.c.namespace == namespace)
            .values(keyword_scope=_scope(user_id, namespace))
        )
    if bind.dialect.name == "sqlite":
        for statement in (
            f"DROP TRIGGER IF EXISTS {_FTS}_ai",
            f"DROP TRIGGER IF EXISTS {_FTS}_ad",
            f"DROP TRIGGER IF EXISTS {_FTS}_au",
            f"DROP TABLE IF EXISTS {_FTS}",
            f"CREATE VIRTUAL TABLE {_FTS} USING fts5(keyword_scope, keyword, content='memories', "
            f"content_rowid='seq', tokenize=\"{_FTS_TOKENIZE}\")",
            f"CREATE TRIGGER {_FTS}_ai AFTER INSERT ON memories BEGIN "
            f"INSERT INTO {_FTS}(rowid, keyword_scope, keyword) VALUES (new.seq, new.keyword_scope, new.keyword); END",
            f"CREATE TRIGGER {_FTS}_ad AFTER DELETE ON memories BEGIN "
            f"INSERT INTO {_FTS}({_FTS}, rowid, keyword_scope, keyword) "
            f"VALUES ('delete', old.seq, old.keyword_scope, old.keyword); END",
            f"CREATE TRIGGER {_FTS}_au AFTER UPDATE OF keyword ON memories BEGIN "
            f"INSERT INTO {_FTS}({_FTS}, rowid, keyword_scope, keyword) "
            f"VALUES ('delete', old.seq, old.keyword_scope, old.keyword); "
            f"INSERT INTO {_FTS}(rowid, keyword_scope, keyword) VALUES (new.seq, new.keyword_scope, new.keyword); END",
            f"INSERT INTO {_FTS}({_FTS}) VALUES ('rebuild')",
        ):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_column("memories", "keyword_scope")
        return
    for statement in (
        f"DROP TRIGGER IF EXISTS {_FTS}_ai",
        f"DROP TRIGGER IF EXISTS {_FTS}_ad",
        f"DROP TRIGGER IF EXISTS {_FTS}_au",
        f"DROP TABLE IF EXISTS {_FTS}",
    ):
        op.execute(statement)
    with op.batch_alter_table("memories") as batch:  # recreates the table: the FTS objects come after
        batch.drop_column("keyword_scope")
    for statement in (
        f"CREATE VIRTUAL TABLE {_FTS} USING fts5(keyword, content='memories', content_rowid='seq', "
        f'tokenize="{_FTS_TOKENIZE}")',
        f"CREATE TRIGGER {_FTS}_ai AFTER INSERT ON memories BEGIN "
        f"INSERT INTO {_FTS}(rowid, keyword) VALUES (new.seq, new.keyword); END",
        f"CREATE TRIGGER {_FTS}_ad AFTER DELETE ON memories BEGIN "
        f"INSERT INTO {_FTS}({_FTS}, rowid, keyword) VALUES ('delete', old.seq, old.keyword); END",
        f"CREATE TRIGGER {_FTS}_au AFTER UPDATE OF keyword ON memories BEGIN "
        f"INSERT INTO {_FTS}({_FTS}, rowid, keyword) VALUES ('delete', old.seq, old.keyword); "
        f"INSERT INTO {_FTS}(rowid, keyword) VALUES (new.seq, new.keyword); END",
        f"INSERT INTO {_FTS}({_FTS}) VALUES ('rebuild')",
    ):
        op.execute(statement)
