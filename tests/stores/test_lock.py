"""``FolderLock`` (issue 30, issue 36 item 5): ordinary opens share the folder; a job that needs it alone is
refused while anyone holds it, and deleting ``.lock`` cannot release the lock (it is on the folder itself)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.errors import StoreLockedError
from llama_index_memory_hierarchy.stores.lock import FolderLock

HOLD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from llama_index_memory_hierarchy.stores.lock import FolderLock
    lock = FolderLock(Path(sys.argv[1]), sys.argv[2])
    print("HELD", flush=True)
    sys.stdin.readline()
    lock.release()
    """
)


def _holder(folder: Path, mode: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "HELD"
    return process


def _release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()
    assert process.wait(60) == 0


def test_opens_share_the_folder_and_a_job_alone_waits_for_none(tmp_path: Path) -> None:
    other = _holder(tmp_path, "shared")
    try:
        mine = FolderLock(tmp_path, "shared")  # any number of processes open the folder at once
        mine.release()
        with pytest.raises(StoreLockedError, match="alone"):
            FolderLock(tmp_path, "exclusive")
    finally:
        _release(other)
    FolderLock(tmp_path, "exclusive").release()  # nobody holds it any more


def test_a_job_alone_keeps_every_open_out(tmp_path: Path) -> None:
    job = _holder(tmp_path, "exclusive")
    try:
        with pytest.raises(StoreLockedError, match=f"pid {job.pid}"):
            FolderLock(tmp_path, "shared")
    finally:
        _release(job)


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_deleting_the_lock_file_does_not_release_the_lock(tmp_path: Path, mode: str) -> None:
    holder = _holder(tmp_path, mode)
    try:
        (tmp_path / ".lock").unlink(missing_ok=True)
        with pytest.raises(StoreLockedError):
            FolderLock(tmp_path, "exclusive")
    finally:
        _release(holder)
