"""Alembic environment of the record store: the revisions in ``versions/`` on the package metadata.

Two ways in:

* from :func:`llama_index_memory_hierarchy.stores.migrations.upgrade` (every store open): the
  caller's connection arrives in ``config.attributes["connection"]``, already inside the opening
  transaction and holding the schema lock;
* from the ``alembic`` command line: the URL comes from ``-x url=...``, ``sqlalchemy.url`` or
  ``LMH_RECORD_STORE_URL`` (async drivers are fine); this file opens the connection, takes the
  same schema lock and runs the revisions in one transaction. ``--sql`` prints the DDL instead.

After the revisions run, ``schema_info`` is set to the head's ``schema_version`` (the version
that packages predating Alembic check).
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

import sqlalchemy as sa
from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from llama_index_memory_hierarchy.stores.migrations import VERSION_TABLE, include_object
from llama_index_memory_hierarchy.stores.schema import SCHEMA_COMPONENT, metadata, schema_info

#: PostgreSQL advisory-lock key of schema changes (the same as the record store's).
_PG_LOCK_SCHEMA = 0x4C4D4801

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    url = url or os.environ.get("LMH_RECORD_STORE_URL")
    if not url:
        raise SystemExit("give the database: alembic -x url=postgresql+asyncpg://... or LMH_RECORD_STORE_URL")
    return url


def _configure(connection: sa.Connection | None = None, **kwargs: object) -> None:
    dialect = connection.dialect.name if connection is not None else sa.engine.make_url(_url()).get_backend_name()
    context.configure(
        connection=connection,
        target_metadata=metadata,
        include_object=include_object,
        version_table=VERSION_TABLE,
        render_as_batch=dialect == "sqlite",
        compare_type=True,
        transaction_per_migration=False,
        **kwargs,
    )


def _write_schema_version(connection: sa.Connection) -> None:
    from llama_index_memory_hierarchy.stores.migrations import revision_schema_version

    heads = context.get_context().get_current_heads()
    if len(heads) != 1:
        return
    version = revision_schema_version(heads[0], tuple(config.attributes.get("extra_locations", ())))
    updated = connection.execute(
        sa.update(schema_info).where(schema_info.c.component == SCHEMA_COMPONENT).values(version=version)
    )
    if updated.rowcount == 0:
        connection.execute(sa.insert(schema_info).values(component=SCHEMA_COMPONENT, version=version))


def _run(connection: sa.Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_SCHEMA, 0)))
        context.run_migrations()
        _write_schema_version(connection)


async def _run_from_url(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def run() -> None:
    """Entry point Alembic calls."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    if config.config_file_name:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    if context.is_offline_mode():
        _configure(url=_url(), literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = _url()
    if sa.engine.make_url(url).get_dialect().is_async:
        asyncio.run(_run_from_url(url))
    else:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            _run(conn)
        engine.dispose()


run()
