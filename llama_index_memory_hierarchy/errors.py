"""Exceptions raised by the package.

Every error names the field or resource at fault so that a caller can fix the input
without reading our source. All inherit from :class:`MemoryHierarchyError`.
"""

from __future__ import annotations


class MemoryHierarchyError(Exception):
    """Base class of every error raised by this package."""


class MemoryValidationError(MemoryHierarchyError, ValueError):
    """Input failed validation; ``field`` names the offending argument or attribute."""

    #: Longest message kept: an error must not echo a huge hostile input back (into logs, to an LLM).
    max_message_chars = 1000

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        if len(message) > self.max_message_chars:
            message = f"{message[: self.max_message_chars]}... ({len(message)} characters, truncated)"
        super().__init__(f"{field}: {message}")


class MemoryNotFoundError(MemoryHierarchyError, KeyError):
    """No memory with this id exists for this user (another user's id counts as absent)."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"memory_id: no memory {memory_id!r} for this user")

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the args
        return str(self.args[0])


class EmbeddingDimensionError(MemoryHierarchyError):
    """The embedding model's dimension differs from the one an existing store was built with."""


class StoreError(MemoryHierarchyError):
    """A backing store failed, is locked by another process, or is corrupt; the message names it."""


class StoreLockedError(StoreError):
    """The persist folder is held by another process (embedded stores serve one process)."""


class SchemaVersionError(StoreError):
    """The store was written by an incompatible schema version and cannot be migrated."""


class LLMRequiredError(MemoryHierarchyError):
    """A feature needs an LLM and none is configured (pass ``llm=`` or set ``Settings.llm``)."""


class LLMReplyError(MemoryHierarchyError, ValueError):
    """The LLM answered something the caller cannot use (not the JSON or schema asked for)."""
