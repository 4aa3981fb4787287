"""``FolderLock``: one process at a time owns an embedded persist folder.

Embedded stores (SQLite, qdrant-edge shards, ``graph.db``) are not safe to open from two
processes, so whoever opens or rebuilds them holds an exclusive advisory lock on the folder.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from llama_index_memory_hierarchy.errors import StoreLockedError


class FolderLock:
    """An exclusive advisory lock on the persist folder: embedded stores serve one process."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ".lock"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder()
            os.close(self._fd)
            if holder == os.getpid():
                raise StoreLockedError(
                    f"{folder}: already open in this process with other settings (embedding model or store "
                    "URLs); open every memory of a folder with the same config and embed_model so they share "
                    "one set of stores"
                ) from None
            raise StoreLockedError(
                f"{folder}: held by another process{f' (pid {holder})' if holder else ''}; embedded stores "
                "serve one process (share one HierarchicalMemory per process, or use a server deployment)"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def _holder(self) -> int | None:
        """The pid the holder wrote into the lock file, if readable."""
        try:
            return int(os.pread(self._fd, 32, 0).decode().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
