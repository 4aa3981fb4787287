"""``fsync_dir``: make the renames in a folder survive a crash.

Why here: the file store (perception) and the vector rebuild (stores) both rename into place and need the
same directory fsync; the foundation layer is below both, so neither imports upwards.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make the renames in ``folder`` durable (a directory fsync; a no-op where the OS does not allow it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
