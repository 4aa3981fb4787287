"""``FolderLock``: who may open an embedded persist folder, held on the folder itself.

Every process that opens a folder's stores holds a *shared* lock: any number of them read and write it
at once (SQLite serialises the writers; the vector indexes are in-process mirrors of SQLite). A job that
must be alone with the folder (``lmh reindex``, ``lmh migrate``, the explicit single-process qdrant-edge
backend) holds it *exclusive*: it waits for nobody and fails fast with :class:`StoreLockedError` while
any other process has the folder open, and keeps every other process out until it is done.

The lock is an ``flock`` on the folder's own directory inode, not on a file in it: deleting a file (the
``.lock`` that older releases locked) cannot release it, and whoever removes the folder removes the
stores with it. ``.lock`` still receives the exclusive holder's pid, for the message only.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Literal

from llama_index_memory_hierarchy.errors import StoreLockedError

#: File holding the pid of an exclusive holder (informative: the lock itself is on the folder).
PID_FILE = ".lock"


class FolderLock:
    """An advisory lock on the persist folder: ``shared`` for ordinary opens, ``exclusive`` for jobs alone."""

    def __init__(self, folder: Path, mode: Literal["shared", "exclusive"] = "exclusive") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.mode = mode
        self._fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(self._fd, (fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise self._refusal() from None
        if mode == "exclusive":
            self._write_pid(str(os.getpid()))

    def _refusal(self) -> StoreLockedError:
        holder = self._read_pid()
        if self.mode == "shared":
            return StoreLockedError(
                f"{self.folder}: a job that must be alone with the folder is running"
                f"{f' (pid {holder})' if holder else ''} (lmh reindex, lmh migrate, or the single-process "
                "qdrant-edge backend, vector_backend='edge'); open it again when that process is done"
            )
        if holder == os.getpid():
            return StoreLockedError(
                f"{self.folder}: already open in this process with other settings (embedding model or store "
                "URLs); open every memory of a folder with the same config and embed_model so they share "
                "one set of stores"
            )
        return StoreLockedError(
            f"{self.folder}: open in another process; this job needs the folder alone (close the apps, "
            "`lmh mcp` servers and `lmh ui` using it, then run it again)"
        )

    def _read_pid(self) -> int | None:
        """The pid an exclusive holder wrote, if readable."""
        try:
            return int((self.folder / PID_FILE).read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def _write_pid(self, text: str) -> None:
        try:
            fd = os.open(self.folder / PID_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError:  # informative only
            pass

    def release(self) -> None:
        if self.mode == "exclusive":
            self._write_pid("")
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
