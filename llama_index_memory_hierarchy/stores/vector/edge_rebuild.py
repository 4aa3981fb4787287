"""A qdrant-edge folder rebuilt beside the old one and switched in by renames, never removed in place.

Why: an erasure rewrites each embedded vector folder so that no deleted vector stays in its segments
or write-ahead log. Removing the old folder first (``shutil.rmtree``) and killing the process midway
left a folder with segments but no ``edge_config.json`` that no open accepted, so the interrupted
erasure was never resumed (issue 36, item 2). Now the new folder is written as ``.<space>.new``
beside ``<space>``; once complete (flushed and closed), ``<space>`` is renamed ``.<space>.old``,
``.<space>.new`` renamed ``<space>`` (each rename one atomic step), and only then is the old one
deleted. Whatever a kill leaves is put right by :func:`recover_rebuilds` on the next open:

* ``<space>`` there: it is whole (the old one, or the new one already switched in); ``.new`` or
  ``.old`` beside it are leftovers and deleted;
* ``<space>`` missing, ``.old`` and ``.new`` there (killed between the two renames): ``.new`` was
  complete before ``.old`` was made, so it is switched in and ``.old`` deleted;
* ``<space>`` missing and only one of them there: ``.old`` is renamed back; a lone ``.new`` is
  deleted (nothing says it is complete; the space is rebuilt from the records on open).

The folders starting with a dot are never taken for spaces (``reconcile.disk_spaces`` skips them).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from llama_index_memory_hierarchy.durability import fsync_dir

logger = logging.getLogger(__name__)

_NEW, _OLD = ".new", ".old"


def staging_folder(folder: Path) -> Path:
    """Where the rebuild of ``folder`` is written (an earlier attempt's leftover removed)."""
    staging = folder.with_name(f".{folder.name}{_NEW}")
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def switch_in(folder: Path, staging: Path) -> None:
    """Make the complete (closed) ``staging`` the folder ``folder``, then delete the old one."""
    retired = folder.with_name(f".{folder.name}{_OLD}")
    shutil.rmtree(retired, ignore_errors=True)
    os.rename(folder, retired)
    os.rename(staging, folder)
    fsync_dir(folder.parent)
    shutil.rmtree(retired)


def recover_rebuild(folder: Path) -> None:
    """Finish or undo an interrupted rebuild of ``folder`` (see the module docstring)."""
    staging = folder.with_name(f".{folder.name}{_NEW}")
    retired = folder.with_name(f".{folder.name}{_OLD}")
    if not staging.exists() and not retired.exists():
        return
    if not folder.exists():
        if staging.is_dir() and retired.is_dir():
            os.rename(staging, folder)
            logger.warning("vector folder %s: the rebuild killed between its renames is switched in", folder)
        elif retired.is_dir():
            os.rename(retired, folder)
            logger.warning("vector folder %s: put back as it was before an interrupted rebuild", folder)
        fsync_dir(folder.parent)
    for leftover in (staging, retired):
        if leftover.exists():
            shutil.rmtree(leftover)
            logger.info("vector folder %s: leftover %s of an interrupted rebuild removed", folder, leftover.name)


def recover_rebuilds(root: Path) -> None:
    """:func:`recover_rebuild` for every space folder under ``root`` (``<persist_dir>/vectors``) with leftovers."""
    if not root.is_dir():
        return
    spaces = set()
    for entry in root.iterdir():
        for suffix in (_NEW, _OLD):
            if entry.name.startswith(".") and entry.name.endswith(suffix):
                spaces.add(entry.name[1 : -len(suffix)])
    for space in sorted(spaces):
        if space:
            recover_rebuild(root / space)
