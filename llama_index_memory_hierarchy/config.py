"""``MemoryConfig``: every tunable in one pydantic model, readable from ``LMH_*`` variables."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from llama_index_memory_hierarchy.errors import MemoryValidationError

ENV_PREFIX = "LMH_"
_URL_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*://")
_SECRET_PARAM = re.compile(
    r"(?i)(?P<name>[?&;](?:password|passwd|pwd|pass|secret|token|access_token|api[_-]?key|apikey|key|auth)=)[^&#;\s]*"
)


def redact_url(url: str | None) -> str | None:
    """Hide the secrets of a URL (for logs, reprs and messages): the password of
    ``scheme://user:password@host``, even one holding raw ``@``, ``:`` or ``/`` (everything up to
    the last ``@`` of the authority), and secret query parameters (``?password=``, ``api_key=``...).
    """
    if url is None:
        return None
    starts = [m.start() for m in _URL_SCHEME.finditer(url)]
    if not starts:
        return _SECRET_PARAM.sub(lambda m: f"{m.group('name')}***", url)
    pieces = [url[: starts[0]]]
    for begin, end in zip(starts, [*starts[1:], len(url)], strict=True):
        piece = url[begin:end]
        scheme_end = piece.index("://") + 3
        rest = piece[scheme_end:]
        authority = re.split(r"[?#]", rest, maxsplit=1)[0]
        at = authority.rfind("@")
        colon = rest.find(":", 0, at) if at != -1 else -1
        if colon != -1:
            piece = f"{piece[:scheme_end]}{rest[:colon]}:***{rest[at:]}"
        pieces.append(piece)
    return _SECRET_PARAM.sub(lambda m: f"{m.group('name')}***", "".join(pieces))


#: Settings that are secrets: never serialised (see :meth:`MemoryConfig.reference`).
SECRET_FIELDS = frozenset({"qdrant_api_key", "vector_store_api_key", "graph_store_password"})
#: Settings that are URLs, which may hold a password or a token.
URL_FIELDS = frozenset({"record_store_url", "qdrant_url", "graph_store_url", "vector_store_url"})


class MemoryConfig(BaseModel):
    """Settings of a memory hierarchy. Defaults run embedded and offline.

    ``MemoryConfig.from_env()`` reads ``LMH_<FIELD>`` environment variables
    (for example ``LMH_PERSIST_DIR``, ``LMH_RECORD_STORE_URL``, ``LMH_QDRANT_URL``).

    Backends are chosen by these settings alone (see ``docs/deployment.md``): the record store by
    ``record_store_url``, vectors by ``vector_store_factory`` / ``vector_store_url`` / ``qdrant_url`` /
    ``qdrant_path`` (first set wins; none = embedded qdrant-edge), the graph by ``graph_store_url``.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- where and who -------------------------------------------------------------
    persist_dir: Path = Field(default=Path("./memory_data"), description="Folder of the embedded stores.")
    user_id: str = Field(default="default", description="User whose memories this object reads and writes.")
    session_id: str | None = Field(default=None, description="Current session; generated when None.")
    agent_id: str | None = Field(
        default=None, description="The agent whose procedural memory (rules, procedures) this object keeps; None: all."
    )

    # --- stores ------------------------------------------------------------------------
    record_store_url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL of the authoritative record store; "
        "None means sqlite+aiosqlite:///<persist_dir>/memory.db.",
    )
    allow_fresh_store: bool = Field(
        default=False,
        description="Open a missing or empty memory.db beside existing vector, graph or file data as a new, "
        "empty store (that data is then discarded); off: refuse, naming the files.",
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        default="FULL", description="SQLite fsync level; FULL makes every returned id survive power loss."
    )
    vector_backend: Literal["sqlite", "edge", "qdrant"] = Field(
        default="sqlite",
        description="'sqlite' = each process mirrors the embeddings of the SQLite record store in memory (any number "
        "of processes share one folder); 'edge' = embedded qdrant-edge folder (one process at a time); "
        "'qdrant' = qdrant-client (server, cloud or local).",
    )
    qdrant_url: str | None = Field(default=None, description="Qdrant server URL (selects the 'qdrant' backend).")
    qdrant_api_key: str | None = Field(default=None, repr=False, description="Qdrant API key.")
    qdrant_path: str | None = Field(default=None, description="qdrant-client local-mode folder (tests, small data).")
    vector_store_url: str | None = Field(
        default=None,
        description="A vector server other than Qdrant: 'chroma://host:port' ('chromas://' for TLS; "
        "'?tenant=...&database=...' optional). Takes precedence over qdrant_url.",
    )
    vector_store_api_key: str | None = Field(default=None, repr=False, description="Token of vector_store_url.")
    vector_store_factory: str | None = Field(
        default=None,
        description="'module:callable' returning a LlamaIndex BasePydanticVectorStore (or a VectorIndex) for "
        "(space, dim): any vector store, chosen by configuration. Takes precedence over the URLs.",
    )
    collection_prefix: str = Field(default="lmh", description="Prefix of vector collection names.")
    graph_store_url: str | None = Field(
        default=None, description="Graph store URL (bolt://, neo4j://, falkor://); None = embedded SQLite graph."
    )
    graph_store_username: str | None = Field(default=None)
    graph_store_password: str | None = Field(default=None, repr=False)

    # --- embeddings ----------------------------------------------------------------------
    embed_model: str | None = Field(
        default=None,
        description="'default' or 'e5' (bundled multilingual-e5-small: Chinese and English in one space), "
        "'minilm' (bundled all-MiniLM-L6-v2, English, the default before; the torch extra), "
        "'hashing' (lightweight fallback), "
        "a local HuggingFace model path, or None to use "
        "Settings.embed_model when set, else the default. After a change, `lmh reindex` re-embeds the store.",
    )
    embed_batch_size: int = Field(default=64, ge=1, le=4096)
    query_cache_size: int = Field(default=1024, ge=0, description="Query embeddings kept in an LRU cache.")

    # --- working memory ----------------------------------------------------------------------
    working_capacity: int = Field(default=50, ge=1, description="Most items held in working memory.")
    working_token_budget: int = Field(default=2000, ge=1, description="Most tokens held in working memory.")
    working_ttl_seconds: float = Field(default=3600.0, gt=0, description="Working items expire after this.")
    working_decay_half_life_seconds: float = Field(default=600.0, gt=0)

    # --- retrieval -------------------------------------------------------------------------------
    retrieval_top_k: int = Field(default=5, ge=1, le=1000)
    candidate_multiplier: int = Field(default=4, ge=1, le=50, description="Candidates per result fetched per signal.")
    rrf_k: int = Field(default=60, ge=1)
    recency_half_life_hours: float = Field(default=24.0 * 7, gt=0)

    # --- the chat history that get() returns --------------------------------------------------------
    chat_history_token_limit: int = Field(default=3000, ge=1)
    memory_context_token_limit: int = Field(default=800, ge=1)

    # --- tracing (llama_index.core.instrumentation spans and events; see instrumentation.py) -----------
    trace_contents: bool = Field(
        default=False, description="Put memory texts and the user id in trace events (off: counts and timings only)."
    )

    @field_validator("user_id")
    @classmethod
    def _check_user(cls, value: str) -> str:
        from llama_index_memory_hierarchy.types import validate_identifier

        return validate_identifier(value, "user_id")

    @field_validator("persist_dir")
    @classmethod
    def _check_persist_dir(cls, value: Path) -> Path:
        """A folder name the file system can take (a lone surrogate cannot be encoded: refused, not a crash)."""
        try:
            os.fsencode(value)
        except UnicodeEncodeError:
            raise ValueError(f"not a valid file name: {str(value)[:80]!r}") from None
        if "\x00" in str(value):
            raise ValueError("contains a NUL character")
        return value

    @field_validator("session_id", "agent_id")
    @classmethod
    def _check_session(cls, value: str | None, info: ValidationInfo) -> str | None:
        from llama_index_memory_hierarchy.types import validate_identifier

        return None if value is None else validate_identifier(value, info.field_name or "session_id")

    @classmethod
    def create(cls, **data: Any) -> MemoryConfig:
        """Build a config, reporting the offending field as a :class:`MemoryValidationError`."""
        try:
            return cls(**data)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error.get("loc", ())) or "config"
            raise MemoryValidationError(field, error.get("msg", str(exc))) from None

    @classmethod
    def from_env(
        cls, prefix: str = ENV_PREFIX, environ: dict[str, str] | None = None, **overrides: Any
    ) -> MemoryConfig:
        """Read ``<prefix><FIELD>`` variables; explicit ``overrides`` win over the environment."""
        environ = dict(os.environ if environ is None else environ)
        data: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = environ.get(f"{prefix}{name.upper()}")
            if raw is not None:
                data[name] = raw
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.create(**data)

    def reference(self) -> dict[str, Any]:
        """These settings as JSON without a secret, to reopen the memory elsewhere (a saved workflow
        ``Context``, a pickle): the secret fields, and the URLs that hold a password or a token, are left
        out, so :meth:`from_env` takes them from the ``LMH_*`` environment variables there."""
        data = self.model_dump(mode="json", exclude=set(SECRET_FIELDS))
        for name in URL_FIELDS:
            if data.get(name) and redact_url(data[name]) != data[name]:
                del data[name]
        data["persist_dir"] = str(self.persist_dir.expanduser().resolve())
        return data

    @property
    def resolved_record_store_url(self) -> str:
        """The record store URL, defaulting to SQLite inside ``persist_dir``."""
        if self.record_store_url:
            return self.record_store_url
        return f"sqlite+aiosqlite:///{(Path(self.persist_dir).expanduser().resolve() / 'memory.db').as_posix()}"

    @property
    def resolved_vector_backend(self) -> Literal["factory", "chroma", "qdrant", "qdrant-local", "edge", "sqlite"]:
        """Which vector backend the settings select, in order of precedence.

        ``sqlite`` (the default) needs the SQLite record store, whose change log it follows; beside a record
        store on a server the embedded default stays the qdrant-edge folder.
        """
        if self.vector_store_factory:
            return "factory"
        if self.vector_store_url:
            return "chroma"
        if self.qdrant_url:
            return "qdrant"
        if self.qdrant_path or self.vector_backend == "qdrant":
            return "qdrant-local"
        if self.vector_backend == "edge" or self.records_on_server:
            return "edge"
        return "sqlite"

    @property
    def records_on_server(self) -> bool:
        """True when the record store is a database server (not the embedded SQLite file)."""
        return not self.resolved_record_store_url.startswith("sqlite")

    @property
    def vectors_on_server(self) -> bool:
        """True when vectors live outside the persist folder (a server or a store you supply)."""
        return self.resolved_vector_backend in ("factory", "chroma", "qdrant")

    def __repr_args__(self):  # type: ignore[no-untyped-def]
        """Repr without secrets: passwords in URLs are masked."""
        for key, value in super().__repr_args__():
            if key in URL_FIELDS and isinstance(value, str):
                value = redact_url(value)
            yield key, value
