"""Scoped keyword terms: on SQLite every indexed term carries its row's scope, so a search reads one user's postings.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Before, the FTS5 table held the scope token in a column of its own and a query intersected it
with the query's terms, whose posting lists span every user: at 100k memories over 100 users
that read a hundred times the postings one user has (5.1 ms p50, against 0.9 ms with the
terms of one user). Now the single indexed column is the keyword text with the scope token
(``memories.keyword_scope``) glued to the front of each term, computed by the view
``memories_scoped_terms`` (the FTS5 table's external content, so ``rebuild`` and
``integrity-check`` still work) and by the triggers, in SQL alone. A side effect that hard
scoping wants anyway: BM25's document frequencies are the user's own, so another user's
memories no longer shift a user's keyword ranking.

PostgreSQL is unchanged (its ``tsvector`` is filtered by ``user_id`` in the same query).
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
#: Integer schema version after this revision (written to ``schema_info``).
schema_version = 3

_FTS = "memories_fts"
_VIEW = "memories_scoped_terms"
_FTS_TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


def _scoped(row: str) -> str:
    """SQL of ``row``'s keyword text with its scope token before each term (keyword terms are single-spaced)."""
    return (
        f"CASE WHEN {row}.keyword = '' THEN '' "
        f"ELSE {row}.keyword_scope || replace({row}.keyword, ' ', ' ' || {row}.keyword_scope) END"
    )


#: The keyword index objects of this revision, in creation order (``migrations.keyword_index_statements``:
#: ``SQLiteFTS5Strategy`` recreates a damaged index with them).
KEYWORD_INDEX = (
    f"CREATE VIEW {_VIEW}(seq, terms) AS SELECT seq, {_scoped('memories')} FROM memories",
    f"CREATE VIRTUAL TABLE {_FTS} USING fts5(terms, content='{_VIEW}', content_rowid='seq', "
    f'tokenize="{_FTS_TOKENIZE}")',
    f"CREATE TRIGGER {_FTS}_ai AFTER INSERT ON memories BEGIN "
    f"INSERT INTO {_FTS}(rowid, terms) VALUES (new.seq, {_scoped('new')}); END",
    f"CREATE TRIGGER {_FTS}_ad AFTER DELETE ON memories BEGIN "
    f"INSERT INTO {_FTS}({_FTS}, rowid, terms) VALUES ('delete', old.seq, {_scoped('old')}); END",
    f"CREATE TRIGGER {_FTS}_au AFTER UPDATE OF keyword, keyword_scope ON memories BEGIN "
    f"INSERT INTO {_FTS}({_FTS}, rowid, terms) VALUES ('delete', old.seq, {_scoped('old')}); "
    f"INSERT INTO {_FTS}(rowid, terms) VALUES (new.seq, {_scoped('new')}); END",
    f"INSERT INTO {_FTS}({_FTS}) VALUES ('rebuild')",
)

_DROP = (
    f"DROP TRIGGER IF EXISTS {_FTS}_ai",
    f"DROP TRIGGER IF EXISTS {_FTS}_ad",
    f"DROP TRIGGER IF EXISTS {_FTS}_au",
    f"DROP TABLE IF EXISTS {_FTS}",
    f"DROP VIEW IF EXISTS {_VIEW}",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in (*_DROP, *KEYWORD_INDEX):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in (
        *_DROP,
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
