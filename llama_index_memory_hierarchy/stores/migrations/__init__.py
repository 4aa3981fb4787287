"""Schema migrations of the record store, on Alembic: the one migration mechanism.

Why Alembic and only Alembic: it is the standard tool for SQLAlchemy schemas, it runs the
same revisions on SQLite and PostgreSQL (batch mode for SQLite's limited ``ALTER``), an
operator can run it by hand (``alembic -c <this folder>/alembic.ini upgrade head``, or
``--sql`` to review the DDL first) and it can diff the live database against
:data:`~llama_index_memory_hierarchy.stores.schema.metadata` (``alembic check``). The
earlier ``MIGRATIONS`` dict was a home-made second mechanism and is gone.

How it fits the record store:

* ``SQLRecordStore.start`` calls :func:`upgrade` inside its opening transaction, after taking
  the schema lock (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so many
  processes opening one database at once migrate it exactly once, and a failed migration
  leaves the database as it was (both engines have transactional DDL).
* ``schema_info`` (row ``record_store``) keeps the integer schema version that every
  revision module declares (``schema_version``). Packages older than this one read only that
  row, so they still refuse a database migrated by a newer package.
* A database created before Alembic was used (``schema_info`` at version 1, no
  ``alembic_version`` table) is stamped at the baseline revision, which creates exactly
  that schema.
* Tables other modules register on the shared metadata are created afterwards by
  ``metadata.create_all`` (creation only, never a change): a change to any table goes into a
  revision here.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from llama_index_memory_hierarchy.errors import SchemaVersionError
from llama_index_memory_hierarchy.stores.schema import SCHEMA_COMPONENT, schema_info

__all__ = [
    "BASELINE_REVISION",
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "head_revision",
    "head_schema_version",
    "include_object",
    "keyword_index_statements",
    "upgrade",
]

#: This folder: ``env.py``, ``alembic.ini`` and ``versions/``.
MIGRATIONS_DIR = Path(__file__).resolve().parent
#: The revision that creates schema version 1 (what pre-Alembic databases hold).
BASELINE_REVISION = "0001"
#: Legacy ``schema_info`` versions and the revision each one equals.
LEGACY_REVISIONS = {1: BASELINE_REVISION}
VERSION_TABLE = "alembic_version"
#: Objects the dialect strategy owns that are not on the metadata (ignored by ``alembic check``).
_DIALECT_OBJECTS = re.compile(r"^(memories_fts.*|keyword_tsv|ix_memories_keyword_tsv)$")

# alembic.context is a module-global proxy: one migration at a time per process.
_LOCK = threading.RLock()


def alembic_config(connection: Any = None, *, url: str | None = None, extra_locations: tuple[str, ...] = ()) -> Config:
    """An Alembic ``Config`` on this folder (no ini file needed), optionally bound to a connection."""
    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    locations = [str(MIGRATIONS_DIR / "versions"), *extra_locations]
    config.set_main_option("version_locations", " ".join(locations))
    config.set_main_option("path_separator", "space")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    config.attributes["extra_locations"] = tuple(extra_locations)
    return config


def _script(extra_locations: tuple[str, ...] = ()) -> ScriptDirectory:
    return _cached_script(tuple(extra_locations))


@lru_cache(maxsize=8)
def _cached_script(extra_locations: tuple[str, ...]) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(extra_locations=extra_locations))


def head_revision(extra_locations: tuple[str, ...] = ()) -> str:
    """The newest revision this package ships."""
    head = _script(extra_locations).get_current_head()
    assert head is not None
    return head


def head_schema_version(extra_locations: tuple[str, ...] = ()) -> int:
    """The integer schema version of the head revision (``schema_version`` in its module)."""
    return revision_schema_version(head_revision(extra_locations), extra_locations)


def revision_schema_version(revision: str, extra_locations: tuple[str, ...] = ()) -> int:
    """The ``schema_version`` a revision module declares."""
    script = _script(extra_locations).get_revision(revision)
    version = getattr(script.module, "schema_version", None)
    if not isinstance(version, int):
        raise SchemaVersionError(f"migration {revision} declares no integer schema_version")
    return version


def keyword_index_statements() -> tuple[str, ...]:
    """The SQLite keyword index (FTS5 table, its content view and triggers) as the newest revision defining it
    creates it (``KEYWORD_INDEX``): what repairing a damaged index recreates, written once."""
    for script in _script().walk_revisions():
        statements = getattr(script.module, "KEYWORD_INDEX", None)
        if statements is not None:
            return tuple(statements)
    raise SchemaVersionError("no migration defines the keyword index (KEYWORD_INDEX)")


def current_revision(connection: sa.Connection) -> str | None:
    """The revision stored in the database (None when it has none)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """``alembic check`` filter: skip the keyword-index objects the dialect strategy owns."""
    return not (name and _DIALECT_OBJECTS.match(name))


def upgrade(connection: sa.Connection, *, where: str = "record store", extra_locations: tuple[str, ...] = ()) -> None:
    """Bring the database on ``connection`` to the head revision, inside the caller's transaction.

    Refuses (:class:`SchemaVersionError`) a database whose revision or ``schema_info``
    version this package does not know: a newer package migrated it.
    """
    with _LOCK:
        tables = set(sa.inspect(connection).get_table_names())
        head_version = head_schema_version(extra_locations)
        stored: int | None = None
        if schema_info.name in tables:
            stored = connection.execute(
                sa.select(schema_info.c.version).where(schema_info.c.component == SCHEMA_COMPONENT)
            ).scalar_one_or_none()
        if stored is not None and stored > head_version:
            raise SchemaVersionError(
                f"{where} has schema version {stored}, newer than version {head_version} that this "
                "llama-index-memory-hierarchy supports; upgrade the package or use another database"
            )
        config = alembic_config(connection, extra_locations=extra_locations)
        config.attributes["where"] = where
        revision = current_revision(connection) if VERSION_TABLE in tables else None
        try:
            if revision is not None:
                _script(extra_locations).get_revision(revision)
            elif stored is not None:
                legacy = LEGACY_REVISIONS.get(stored)
                if legacy is None:
                    raise SchemaVersionError(
                        f"{where} has schema version {stored} but no Alembic revision, and no migration from it"
                    )
                command.stamp(config, legacy)
            command.upgrade(config, "head")
        except CommandError as exc:
            raise SchemaVersionError(
                f"{where} is at schema revision {revision!r}, which this llama-index-memory-hierarchy does not "
                f"know (a newer package migrated it?): {exc}; upgrade the package or use another database"
            ) from None
