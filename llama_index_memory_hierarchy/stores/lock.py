"""``FolderLock``: who may open an embedded persist folder, held on the folder itself.

Every process that opens a folder's stores holds a *shared* lock: any number of them read and write it
at once (SQLite serialises the writers; the vector indexes are in-process mirrors of SQLite). A job that
must be alone with the folder (``lmh reindex``, ``lmh migrate``, the explicit single-process qdrant-edge
backend) holds it *exclusive*: it waits for nobody and fails fast with :class:`StoreLockedError` while
any other process has the folder open, and keeps every other process out until it is done.

The lock is an ``flock`` on the folder's own directory inode, not on a file in it: deleting a file (the
``.lock`` that older releases locked) cannot release it, and whoever removes the folder removes the
stores with it. ``.lock`` still receives the exclusive holder's pid, for the message only.

The work locks (:mod:`.worklock`) are byte locks on ``.work.lock``, a file, so a deleted one would let a
later opener lock a new file while earlier ones hold the old (two holders of one key, issue 36 item 5).
So that file is only ever created by an opener alone with the folder; an open that finds it missing
while other processes have the folder open is refused.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Literal

from llama_index_memory_hierarchy.errors import StoreLockedError
from llama_index_memory_hierarchy.stores.worklock import LOCK_FILE

#: File holding the pid of an exclusive holder (informative: the lock itself is on the folder).
PID_FILE = ".lock"
#: How long an open waits for another opener, alone with the folder, to create the work-lock file.
_CREATE_WAIT_S = 2.0


class FolderLock:
    """An advisory lock on the persist folder: ``shared`` for ordinary opens, ``exclusive`` for jobs alone."""

    def __init__(self, folder: Path, mode: Literal["shared", "exclusive"] = "exclusive") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.mode = mode
        self._fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            self._ensure_work_lock_file()
            fcntl.flock(self._fd, (fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise self._refusal() from None
        except BaseException:
            os.close(self._fd)
            raise
        if mode == "exclusive":
            self._write_pid(str(os.getpid()))

    def _ensure_work_lock_file(self) -> None:
        """Create the work locks' file if missing, alone with the folder only (see the module docstring)."""
        path = self.folder / LOCK_FILE
        deadline = time.monotonic() + _CREATE_WAIT_S
        while not path.exists():
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if self.mode == "exclusive":
                    raise  # others have it open: refused as any job alone is
                fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a job alone with it: refused as usual
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                if time.monotonic() > deadline:
                    raise StoreLockedError(
                        f"{self.folder}: {LOCK_FILE} was deleted while other processes have the folder open, so "
                        "their work locks cannot be shared any more; close every process using the folder (apps, "
                        "`lmh mcp`, `lmh ui`), then open it again"
                    ) from None
                time.sleep(0.02)  # another opener may be creating it, alone with the folder
                continue
            try:
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)  # the mode's own lock is taken next

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
