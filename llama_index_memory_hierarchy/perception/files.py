"""Content-addressed storage of perception files under the persist folder.

Layout: ``<persist_dir>/files/<user>/<sha256[:2]>/<sha256>.<ext>``. Files are copied and
hashed in one streamed pass (constant memory whatever the size), fsynced, then renamed into
place, so a file is either absent or complete. The same bytes stored twice for one user are
one file. Alternatively a file may be *referenced* where it is (hashed, not copied); a
referenced file is never modified or deleted by this package.

Every path that comes back from stored metadata is validated against the expected pattern
and confined to the files folder, so tampered metadata cannot make :meth:`FileStore.delete`
or :meth:`FileStore.resolve` touch anything else.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from llama_index_memory_hierarchy.durability import fsync_dir
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.perception.media import HEAD_BYTES, normalise_extension
from llama_index_memory_hierarchy.types import validate_identifier

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: Default largest accepted file (bytes).
DEFAULT_MAX_FILE_BYTES = 100 * 1024 * 1024
#: Default streaming chunk (bytes).
DEFAULT_CHUNK_BYTES = 1024 * 1024
#: Staging files older than this (seconds) are removed when a store opens.
STALE_STAGING_SECONDS = 24 * 3600

_SHA = re.compile(r"^[0-9a-f]{64}$")
_SAFE_USER_DIR = re.compile(r"^[a-z0-9_\-]{1,64}$")
_REF = re.compile(r"^(?P<user>[a-z0-9_\-]{1,80})/(?P<shard>[0-9a-f]{2})/(?P<sha>[0-9a-f]{64})\.(?P<ext>[a-z0-9]{1,8})$")

Source = bytes | bytearray | memoryview | str | os.PathLike | BinaryIO


def user_dir_name(user_id: str) -> str:
    """Folder name of a user: the id itself when it is lower-case safe, else a slug plus a hash.

    Why: ids may hold ``:`` (invalid on Windows) or differ only by case (one folder on
    macOS), which would let two users share, and delete, each other's files.
    """
    user_id = validate_identifier(user_id, "user_id")
    if _SAFE_USER_DIR.fullmatch(user_id):
        return user_id
    slug = re.sub(r"[^a-z0-9_\-]", "_", user_id.lower())[:48]
    return f"{slug}-{hashlib.sha256(user_id.encode()).hexdigest()[:12]}"


@dataclass
class FileRef:
    """Where a perception's bytes live: ``stored`` (content-addressed copy) or ``reference`` (a path)."""

    mode: Literal["stored", "reference"]
    sha256: str
    size: int
    ext: str
    ref: str | None = None  # stored: path relative to the files folder
    path: str | None = None  # reference: absolute path of the original
    filename: str | None = None  # original name, for display only

    def to_metadata(self) -> dict[str, Any]:
        """JSON-safe dict kept in the memory record's metadata."""
        data: dict[str, Any] = {"mode": self.mode, "sha256": self.sha256, "size": self.size, "ext": self.ext}
        if self.ref is not None:
            data["ref"] = self.ref
        if self.path is not None:
            data["path"] = self.path
        if self.filename is not None:
            data["filename"] = self.filename
        return data

    @classmethod
    def from_metadata(cls, data: Any) -> FileRef:
        """Parse and validate a stored ``file`` dict (metadata can be edited, so trust nothing)."""
        if not isinstance(data, dict):
            raise MemoryValidationError("metadata.file", "missing or not a dict")
        mode = data.get("mode")
        sha = data.get("sha256")
        if mode not in ("stored", "reference"):
            raise MemoryValidationError("metadata.file.mode", f"must be 'stored' or 'reference', got {mode!r}")
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise MemoryValidationError("metadata.file.sha256", "not a SHA-256 hex digest")
        ext = normalise_extension(str(data.get("ext") or "bin")) or "bin"
        size = data.get("size")
        size = size if isinstance(size, int) and size >= 0 else 0
        ref, path = data.get("ref"), data.get("path")
        if mode == "stored" and (not isinstance(ref, str) or not _REF.fullmatch(ref)):
            raise MemoryValidationError("metadata.file.ref", f"not a stored-file reference: {str(ref)[:100]!r}")
        if mode == "reference" and (not isinstance(path, str) or not os.path.isabs(path)):
            raise MemoryValidationError("metadata.file.path", "a referenced file needs an absolute path")
        name = data.get("filename")
        return cls(mode, sha, size, ext, ref, path, name if isinstance(name, str) else None)


@dataclass
class StagedFile:
    """A hashed source, copied to a staging file (``copy``) or left where it is (reference)."""

    sha256: str
    size: int
    head: bytes
    filename: str | None
    temp_path: Path | None = None
    source_path: Path | None = None
    #: A descriptor holding an exclusive ``flock`` on the staging copy until it is committed or discarded: what
    #: tells an erasure (in any process) that the copy belongs to a live write.
    lock_fd: int | None = None

    @property
    def read_path(self) -> Path:
        """Where to read the bytes from now (staging copy or the referenced original)."""
        path = self.temp_path or self.source_path
        assert path is not None
        return path

    @property
    def display_name(self) -> str:
        """Name used in error messages."""
        return self.filename or (str(self.source_path) if self.source_path else f"<{self.size} bytes>")


class FileStore:
    """Content-addressed, per-user file storage in ``<persist_dir>/files`` (thread-safe; blocking I/O)."""

    def __init__(
        self,
        persist_dir: str | os.PathLike,
        *,
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        allowed_roots: list[str | os.PathLike] | None = None,
    ) -> None:
        if max_bytes < 1 or chunk_bytes < 1:
            raise MemoryValidationError("max_bytes", "max_bytes and chunk_bytes must be positive")
        self.root = (Path(persist_dir).expanduser() / "files").resolve()
        self.max_bytes = int(max_bytes)
        self.chunk_bytes = int(chunk_bytes)
        self.allowed_roots = [Path(r).expanduser().resolve() for r in allowed_roots] if allowed_roots else None
        self._staging = self.root / ".staging"
        self._staging.mkdir(parents=True, exist_ok=True)
        self._clean_staging()

    # ------------------------------------------------------------------ staging
    def stage(self, source: Source, *, copy: bool = True, filename: str | None = None) -> StagedFile:
        """Hash ``source`` in one streamed pass; with ``copy`` also write it to a staging file.

        ``source`` is bytes, a path (str or PathLike) or a binary file object. Reference
        mode needs a path. Raises :class:`MemoryValidationError` for a missing file, one
        over the size limit (naming both sizes), or a path outside ``allowed_roots``.
        """
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            self._check_size(len(data), filename or f"<{len(data)} bytes>")
            return self._copy_stream(io.BytesIO(data), filename, None, copy=True)
        if isinstance(source, (str, os.PathLike)):
            path = self.check_source_path(source)
            name = filename or path.name
            self._check_size(path.stat().st_size, str(path))
            with open(path, "rb") as stream:
                return self._copy_stream(stream, name, path, copy=copy)
        if hasattr(source, "read"):
            name = filename or _stream_name(source)
            return self._copy_stream(source, name, None, copy=True)
        raise MemoryValidationError(
            "data_or_path", f"expected bytes, a path or a binary file object, got {type(source).__name__}"
        )

    def check_source_path(self, source: str | os.PathLike) -> Path:
        """An existing regular file, inside ``allowed_roots`` when those are set."""
        raw = os.fspath(source)
        if not raw or "\x00" in raw:
            raise MemoryValidationError("data_or_path", "empty path or a path with a NUL character")
        path = Path(raw).expanduser()
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise MemoryValidationError("data_or_path", f"no readable file at {raw!r}") from exc
        if not resolved.is_file():
            raise MemoryValidationError("data_or_path", f"{raw!r} is not a regular file")
        if self.allowed_roots is not None and not any(resolved.is_relative_to(r) for r in self.allowed_roots):
            raise MemoryValidationError("data_or_path", f"{raw!r} is outside the allowed folders")
        return resolved

    def _check_size(self, size: int, name: str) -> None:
        if size > self.max_bytes:
            raise MemoryValidationError(
                "data_or_path",
                f"file {name!r} is {size:,} bytes, over the limit of {self.max_bytes:,} bytes (max_file_bytes)",
            )

    def _copy_stream(self, stream: BinaryIO, name: str | None, source_path: Path | None, *, copy: bool) -> StagedFile:
        digest = hashlib.sha256()
        head = b""
        size = 0
        temp: Path | None = None
        out = None
        lock_fd: int | None = None
        try:
            if copy:
                fd, temp, lock_fd = _new_held_copy(self._staging)
                out = os.fdopen(fd, "wb")
            while True:
                chunk = stream.read(self.chunk_bytes)
                if not chunk:
                    break
                if not isinstance(chunk, (bytes, bytearray)):
                    raise MemoryValidationError("data_or_path", "file object must be opened in binary mode")
                size += len(chunk)
                if size > self.max_bytes:
                    raise MemoryValidationError(
                        "data_or_path",
                        f"file {name or '<stream>'!r} is more than {self.max_bytes:,} bytes "
                        f"(read {size:,} so far), over the limit (max_file_bytes)",
                    )
                if len(head) < HEAD_BYTES:
                    head += bytes(chunk[: HEAD_BYTES - len(head)])
                digest.update(chunk)
                if out is not None:
                    out.write(chunk)
            if size == 0:
                raise MemoryValidationError("data_or_path", f"file {name or '<stream>'!r} is empty")
            if out is not None:
                out.flush()
                os.fsync(out.fileno())
                out.close()
                out = None
        except BaseException:
            if out is not None:
                out.close()
            if temp is not None:
                temp.unlink(missing_ok=True)
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        return StagedFile(digest.hexdigest(), size, head, name, temp, None if copy else source_path, lock_fd)

    def discard(self, staged: StagedFile) -> None:
        """Drop a staging copy (after an error, or when the file was already stored) and its hold."""
        if staged.temp_path is not None:
            staged.temp_path.unlink(missing_ok=True)
            staged.temp_path = None
        if staged.lock_fd is not None:
            os.close(staged.lock_fd)
            staged.lock_fd = None

    def remove_staging_leftovers(self) -> int:
        """Delete every staging copy no live write holds, whoever's it was (erasure: a write killed mid-copy leaves
        its ``.part`` with the bytes of a user nobody can name any more); returns how many."""
        removed = 0
        for part in self._staging.glob("*.part"):
            try:
                fd = os.open(part, os.O_RDONLY)
            except OSError:
                continue  # gone meanwhile
            try:
                if _try_hold(fd):
                    part.unlink(missing_ok=True)
                    removed += 1
            except OSError as exc:
                logger.warning("cannot remove staging leftover %s: %s", part.name, exc)
            finally:
                os.close(fd)
        return removed

    def commit(self, staged: StagedFile, user_id: str, ext: str) -> FileRef:
        """Move a staged copy to its content address (or record the reference); idempotent."""
        ext = normalise_extension(ext) or "bin"
        if staged.temp_path is None:
            if staged.source_path is None:
                raise StoreError("staged file has neither a copy nor a source path")
            return FileRef(
                "reference", staged.sha256, staged.size, ext, path=str(staged.source_path), filename=staged.filename
            )
        ref = f"{user_dir_name(user_id)}/{staged.sha256[:2]}/{staged.sha256}.{ext}"
        final = self._confine(ref)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                self.discard(staged)
            else:
                os.replace(staged.temp_path, final)
                staged.temp_path = None
                fsync_dir(final.parent)
        except OSError as exc:
            self.discard(staged)
            raise StoreError(f"cannot store file under {self.root}: {exc}") from exc
        return FileRef("stored", staged.sha256, staged.size, ext, ref=ref, filename=staged.filename)

    # ------------------------------------------------------------------ access
    def _confine(self, ref: str) -> Path:
        match = _REF.fullmatch(ref) if isinstance(ref, str) else None
        if match is None or match.group("shard") != match.group("sha")[:2]:
            raise MemoryValidationError("metadata.file.ref", f"not a stored-file reference: {str(ref)[:100]!r}")
        path = (self.root / ref).resolve()
        if not path.is_relative_to(self.root):
            raise MemoryValidationError("metadata.file.ref", f"{ref!r} escapes the files folder")
        return path

    def resolve(self, file: FileRef | dict[str, Any], user_id: str) -> Path:
        """Readable path of a perception's file, checked to belong to ``user_id`` and to exist."""
        file = file if isinstance(file, FileRef) else FileRef.from_metadata(file)
        if file.mode == "reference":
            assert file.path is not None
            return self.check_source_path(file.path)
        assert file.ref is not None
        if not file.ref.startswith(user_dir_name(user_id) + "/"):
            raise MemoryValidationError("metadata.file.ref", "the file belongs to another user")
        path = self._confine(file.ref)
        if not path.is_file():
            raise StoreError(f"stored file {file.ref!r} is missing from {self.root}")
        return path

    def open(self, file: FileRef | dict[str, Any], user_id: str) -> BinaryIO:
        """Open a perception's file for reading (binary)."""
        return open(self.resolve(file, user_id), "rb")

    def delete(self, file: FileRef | dict[str, Any], user_id: str) -> bool:
        """Delete a stored file of ``user_id`` (referenced originals are never touched)."""
        file = file if isinstance(file, FileRef) else FileRef.from_metadata(file)
        if file.mode != "stored" or file.ref is None:
            return False
        if not file.ref.startswith(user_dir_name(user_id) + "/"):
            raise MemoryValidationError("metadata.file.ref", "the file belongs to another user")
        path = self._confine(file.ref)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError(f"cannot delete stored file {file.ref!r}: {exc}") from exc
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # only when the shard folder is now empty
        return True

    def delete_user(self, user_id: str) -> int:
        """Delete every stored file of a user (erasure); return how many."""
        base = self.root / user_dir_name(user_id)
        files = self.stored_files(user_id)
        for path in files:
            path.unlink(missing_ok=True)
        if base.is_dir():
            shutil.rmtree(base, ignore_errors=True)
        return len(files)

    def stored_files(self, user_id: str) -> list[Path]:
        """Every stored file of a user (consistency checks and tests)."""
        base = self.root / user_dir_name(user_id)
        return sorted(p for p in base.glob("*/*") if p.is_file()) if base.is_dir() else []

    def _clean_staging(self) -> None:
        cutoff = time.time() - STALE_STAGING_SECONDS
        for part in self._staging.glob("*.part"):
            with contextlib.suppress(OSError):
                if part.stat().st_mtime < cutoff:
                    part.unlink()


def _new_held_copy(staging: Path) -> tuple[int, Path, int | None]:
    """A new staging file, its path and the descriptor that holds it. An erasure may take and delete the file
    between its creation and the hold (it is not held yet): then the hold is on a deleted file, so make another."""
    while True:
        fd, name = tempfile.mkstemp(dir=staging, suffix=".part")
        lock_fd = _hold(fd)
        try:
            if os.stat(name).st_ino == os.fstat(fd).st_ino:
                return fd, Path(name), lock_fd
        except FileNotFoundError:
            pass
        os.close(fd)
        if lock_fd is not None:
            os.close(lock_fd)


def _hold(fd: int) -> int | None:
    """An exclusive ``flock`` on a new staging file, kept by a duplicate of ``fd`` (so closing the file after
    writing keeps it); None where there is no ``flock`` (Windows, where an open file cannot be deleted anyway)."""
    if fcntl is None:  # pragma: no cover - Windows
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return os.dup(fd)


def _try_hold(fd: int) -> bool:
    """Whether an exclusive ``flock`` on ``fd`` was taken (no live write holds the file)."""
    if fcntl is None:  # pragma: no cover - Windows
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _stream_name(stream: Any) -> str | None:
    name = getattr(stream, "name", None)
    return os.path.basename(name) if isinstance(name, str) else None
