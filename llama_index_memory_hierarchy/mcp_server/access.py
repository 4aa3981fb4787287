"""Who a request acts for: the fixed user of a stdio server, or the owner of an HTTP bearer token.

A token file (TOML or JSON) lists the tokens the HTTP server accepts; each one maps to one
user, or is an admin token that may name the user in its tool calls::

    [[tokens]]
    token = "s3cr3t-alice"          # or sha256 = "<hex digest of the token>", to keep no secret on disk
    user = "alice"

    [[tokens]]
    sha256 = "9f86d081884c7d65..."
    admin = true                    # may pass user_id="..." (an admin without `user` must)

The same list in JSON is ``{"tokens": [{"token": "...", "user": "alice"}, ...]}``. Tokens are
compared by their SHA-256 digest in constant time, and never logged. Keep the file private
(``chmod 600``): ``lmh mcp`` warns when others may read it (:func:`readable_by_others`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import validate_identifier

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a backport
    import tomli as tomllib

logger = logging.getLogger(__name__)

#: Shortest accepted token: a guessable bearer token is no access control.
MIN_TOKEN_CHARS = 16


class Principal(BaseModel):
    """Whose memories a request may reach: one user, or (admin) any user it names."""

    model_config = ConfigDict(frozen=True)

    user_id: str | None = None
    admin: bool = False

    def resolve_user(self, requested: str | None) -> str:
        """The user a call acts for; a user id this principal does not own is refused (nothing runs)."""
        if requested is not None:
            validate_identifier(requested, "user_id")
            if self.admin or requested == self.user_id:
                return requested
            raise MemoryValidationError("user_id", "this token or server may not act for another user")
        if self.user_id is None:
            raise MemoryValidationError("user_id", "this admin token serves no user of its own: name one")
        return self.user_id


class TokenEntry(BaseModel):
    """One line of the token file."""

    model_config = ConfigDict(extra="forbid")

    token: str | None = Field(default=None, min_length=MIN_TOKEN_CHARS)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    user: str | None = None
    admin: bool = False

    @model_validator(mode="after")
    def _check(self) -> TokenEntry:
        if (self.token is None) == (self.sha256 is None):
            raise ValueError("give exactly one of 'token' and 'sha256'")
        if self.user is None and not self.admin:
            raise ValueError("a token needs a 'user' (or 'admin = true')")
        if self.user is not None:
            validate_identifier(self.user, "user")
        return self

    @property
    def digest(self) -> str:
        return (self.sha256 or "").lower() or token_digest(self.token or "")


def token_digest(token: str) -> str:
    """The SHA-256 hex digest a token file may hold instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class DocumentRoots:
    """The folders a server's document tools may read (``lmh mcp --document-root``); none: no file at all.

    A path is allowed when it resolves (symlinks followed) inside one of them, and so is every file
    a folder yields: a link inside a root that points out of it is refused like the path it points to.
    A relative path is taken from the first root.
    """

    def __init__(self, roots: list[str | Path] | None = None) -> None:
        self.roots: list[Path] = []
        for root in roots or []:
            resolved = Path(root).expanduser().resolve()
            if not resolved.is_dir():
                raise MemoryValidationError("document_root", f"{str(root)!r} is not a folder")
            self.roots.append(resolved)

    def resolve(self, path: str, field: str = "path") -> Path:
        """The real path of ``path``, refused (naming ``field``) when it is outside every root."""
        if not self.roots:
            raise MemoryValidationError(field, "this server reads no files: start it with --document-root FOLDER")
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise MemoryValidationError(field, "must be a file or folder path")
        candidate = Path(path.strip()).expanduser()
        real = (candidate if candidate.is_absolute() else self.roots[0] / candidate).resolve()
        self.check(real, field, shown=path)
        return real

    def check(self, real: Path, field: str, *, shown: str | None = None) -> None:
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise MemoryValidationError(field, f"{shown or str(real)!r} is outside the folders this server may read")

    def __bool__(self) -> bool:
        return bool(self.roots)


def readable_by_others(path: str | Path) -> bool:
    """Whether users other than the file's owner may read the token file (group or world bits set)."""
    try:
        return bool(Path(path).expanduser().stat().st_mode & 0o044)
    except OSError:
        return False  # from_file says what is wrong with it


class TokenTable:
    """The tokens an HTTP server accepts, each mapped to its :class:`Principal`."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        if not entries:
            raise MemoryValidationError("tokens", "the token file lists no tokens")
        self._by_digest: dict[str, Principal] = {}
        for entry in entries:
            if entry.digest in self._by_digest:
                raise MemoryValidationError("tokens", "the same token is listed twice")
            self._by_digest[entry.digest] = Principal(user_id=entry.user, admin=entry.admin)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenTable:
        """Read a TOML (``.toml``) or JSON token file; a bad file is refused with the line at fault, and one that
        others may read is logged as a warning (``lmh mcp`` shows it when it starts)."""
        file = Path(path).expanduser()
        try:
            raw = file.read_text("utf-8")
            data: Any = tomllib.loads(raw) if file.suffix.lower() == ".toml" else json.loads(raw)
        except OSError as exc:
            raise MemoryValidationError("tokens", f"cannot read {str(file)!r}: {exc.strerror or exc}") from None
        except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
            raise MemoryValidationError("tokens", f"{str(file)!r} is not valid TOML or JSON: {exc}") from None
        listed = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            raise MemoryValidationError("tokens", f"{str(file)!r} must hold a list 'tokens' of tables")
        entries = []
        for position, raw_entry in enumerate(listed):
            try:
                entries.append(TokenEntry.model_validate(raw_entry))
            except (ValidationError, MemoryValidationError) as exc:
                reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise MemoryValidationError("tokens", f"entry {position + 1} of {str(file)!r}: {reason}") from None
        table = cls(entries)
        if readable_by_others(file):
            logger.warning("%s: other users of this machine may read the tokens (chmod 600 %s)", file, file)
        return table

    def lookup(self, token: str) -> Principal | None:
        """The principal of ``token``, or None (compared in constant time against every entry)."""
        digest = token_digest(token)
        found = None
        for known, principal in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                found = principal
        return found

    def __len__(self) -> int:
        return len(self._by_digest)


__all__ = [
    "MIN_TOKEN_CHARS",
    "DocumentRoots",
    "Principal",
    "TokenEntry",
    "TokenTable",
    "readable_by_others",
    "token_digest",
]
