"""Core data types: :class:`MemoryType`, :class:`MemoryItem` and :class:`MemoryFilter`.

``MemoryItem`` is what every tier stores and returns. Validation happens here, once,
so that a bad value is rejected with a :class:`MemoryValidationError` naming the field
before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
import sys
import uuid
from datetime import date, datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from llama_index_memory_hierarchy.errors import MemoryValidationError

#: Longest accepted memory content, in characters (hostile-input bound) of one memory added explicitly
#: (``add()``, tools, imports). A chat turn (``put()``) has no length bound: it is stored whole, and
#: :data:`INDEXED_CHARS` of it are embedded and keyword-indexed.
MAX_CONTENT_CHARS = 100_000
#: The head of a memory's text that is embedded and keyword-indexed (a longer chat turn is stored and
#: replayed whole; its tail is not searchable).
INDEXED_CHARS = 20_000
#: Longest accepted serialised metadata, in bytes.
MAX_METADATA_BYTES = 64_000
#: Deepest accepted metadata nesting.
MAX_METADATA_DEPTH = 8
#: Most items one batched add accepts (one transaction and one embedding pass hold them all in memory:
#: about 10 KB each at peak); larger inputs are refused with a precise error, so call in batches.
MAX_BATCH_ITEMS = 10_000
#: Earliest and latest time accepted anywhere (UTC), a day inside what ``datetime`` holds: stored times are epoch
#: floats whose rounding, a time zone's offset or a day's arithmetic must never step past year 1 or 9999.
TIME_MIN = datetime(1, 1, 2, tzinfo=timezone.utc)
TIME_MAX = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
#: Identifiers (user, session, namespace): printable, no path separators, bounded.
_ID_PATTERN = re.compile(r"[A-Za-z0-9_.@:+\-=]{1,128}")


class MemoryType(str, Enum):
    """The tiers of the hierarchy, after cognitive psychology (procedural: how to act, rules and procedures)."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PERCEPTUAL = "perceptual"
    PROCEDURAL = "procedural"


def utcnow() -> datetime:
    """Timezone-aware current UTC time (all stored times are UTC)."""
    return datetime.now(timezone.utc)


def file_sha256(path: str | Path) -> str:
    """The hex SHA-256 of a file, read in blocks (``hashlib.file_digest`` is Python 3.11 and later)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_iso(text: str) -> datetime:
    """``datetime.fromisoformat``, reading a ``Z`` suffix (UTC) on Python 3.10 too, as 3.11 does.

    Why: pydantic writes UTC times with ``Z`` (JSON exports, MCP and CLI output) and 3.10's parser refuses it.
    """
    if sys.version_info < (3, 11) and text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


def as_utc(value: datetime | str | float | int, field: str = "timestamp", *, clamp: bool = False) -> datetime:
    """Coerce a datetime, ISO string or epoch seconds to an aware UTC datetime within ``TIME_MIN``..``TIME_MAX``.

    Outside them is an error, or with ``clamp`` (a filter's bound, never stored) the nearest bound: a query
    "until the last stored moment plus a tick" must still run.
    """
    if isinstance(value, bool):
        raise MemoryValidationError(field, "expected a datetime, ISO string or epoch seconds, got bool")
    if isinstance(value, (int, float)):
        try:
            finite = math.isfinite(value)
            moment = datetime.fromtimestamp(value, tz=timezone.utc) if finite else None
        except (OverflowError, OSError, ValueError) as exc:  # past year 9999, or an int too large for a float
            shown = f"{value!r}" if isinstance(value, float) or abs(value) < 10**30 else f"{value.bit_length()} bits"
            raise MemoryValidationError(field, f"epoch seconds out of range: {shown}") from exc
        if moment is None:
            raise MemoryValidationError(field, f"must be finite, got {value!r}")
        return bounded_time(moment, field, clamp=clamp)
    if isinstance(value, str):
        try:
            value = parse_iso(value)
        except ValueError as exc:
            raise MemoryValidationError(field, f"not an ISO datetime: {value!r}") from exc
    if not isinstance(value, datetime):
        raise MemoryValidationError(field, f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return bounded_time(value.replace(tzinfo=timezone.utc), field, clamp=clamp)
    try:
        return bounded_time(value.astimezone(timezone.utc), field, clamp=clamp)
    except OverflowError as exc:  # e.g. 9999-12-31T23:00-05:00 is past datetime.max in UTC
        raise MemoryValidationError(field, f"out of range once converted to UTC: {value.isoformat()}") from exc


def bounded_time(value: datetime, field: str, *, clamp: bool = False) -> datetime:
    """An aware time checked to lie within ``TIME_MIN``..``TIME_MAX`` (why: ``9999-12-31T23:59:59.999999`` stored
    as epoch seconds reads back as year 10000, and every later read of that user would fail)."""
    if not TIME_MIN <= value <= TIME_MAX:
        if clamp:
            return TIME_MIN if value < TIME_MIN else TIME_MAX
        bounds = f"{TIME_MIN.date().isoformat()} and {TIME_MAX.date().isoformat()}"
        raise MemoryValidationError(field, f"out of range: {value.isoformat()} (times must lie between {bounds}, UTC)")
    return value


def validate_identifier(value: Any, field: str) -> str:
    """Check a user, session or namespace id: a short string safe in paths and filters."""
    if not isinstance(value, str):
        raise MemoryValidationError(field, f"must be a string, got {type(value).__name__}")
    if not _ID_PATTERN.fullmatch(value) or value in {".", ".."}:
        raise MemoryValidationError(field, f"must be 1-128 characters of letters, digits and _.@:+-=, got {value!r}")
    return value


#: A UUID as ``str(uuid.UUID(...))`` writes it: what every stored id is, so the common case needs no parse.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def validate_memory_id(value: Any, field: str = "memory_id") -> str:
    """Check a memory id is a UUID string; returns it canonical (lower-case, hyphenated)."""
    if not isinstance(value, str):
        raise MemoryValidationError(field, f"must be a string, got {type(value).__name__}")
    if _CANONICAL_UUID.fullmatch(value):
        return value
    try:
        parsed = uuid.UUID(value)
    except ValueError as exc:
        raise MemoryValidationError(field, f"not a UUID: {value[:80]!r}") from exc
    return str(parsed)


def validate_content(value: Any, field: str = "content", *, bounded: bool = True) -> str:
    """Check memory text: a non-blank string of valid Unicode within the size bound (``bounded``)."""
    if not isinstance(value, str):
        raise MemoryValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise MemoryValidationError(field, "must not be empty or blank")
    if bounded and len(value) > MAX_CONTENT_CHARS:
        raise MemoryValidationError(field, f"longer than {MAX_CONTENT_CHARS} characters ({len(value)})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryValidationError(field, "contains invalid Unicode (lone surrogates)") from exc
    if "\x00" in value:
        raise MemoryValidationError(field, "contains a NUL character")
    return value


def validate_importance(value: Any, field: str = "importance") -> float:
    """Check importance is a finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MemoryValidationError(field, f"must be a number in [0, 1], got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise MemoryValidationError(field, f"must be in [0, 1], got {value!r}")
    return value


def validate_positive_int(value: Any, field: str) -> int:
    """Check a count or limit is a positive integer (``True`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise MemoryValidationError(field, f"must be a positive integer, got {value!r}")
    return int(value)


def validate_metadata(value: Any, field: str = "metadata", *, bounded: bool = True) -> dict[str, Any]:
    """Check metadata is a JSON-serialisable dict with string keys, bounded in depth and (``bounded``) size."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MemoryValidationError(field, f"must be a dict, got {type(value).__name__}")

    def depth(obj: Any, level: int) -> None:
        if level > MAX_METADATA_DEPTH:
            raise MemoryValidationError(field, f"nested deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(obj, dict):
            for key, item in obj.items():
                if not isinstance(key, str):
                    raise MemoryValidationError(field, f"keys must be strings, got {key!r}")
                depth(item, level + 1)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                depth(item, level + 1)
        elif isinstance(obj, float) and not math.isfinite(obj):
            raise MemoryValidationError(field, f"values must be finite numbers, got {obj!r}")

    depth(value, 1)
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        encoded.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise MemoryValidationError(field, f"must be JSON-serialisable: {exc}") from exc
    if bounded and len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise MemoryValidationError(field, f"larger than {MAX_METADATA_BYTES} bytes as JSON")
    return dict(value)


#: Validation context of a chat turn (see :meth:`MemoryItem.create`).
_TURN: dict[str, bool] = {"turn": True}


class MemoryItem(BaseModel):
    """One memory: the unit every tier stores, returns and scores.

    ``timestamp`` is when the remembered event happened; ``created_at`` is when it was
    stored. ``score`` (and ``explanation``) are set only on retrieved items. ``id`` is a UUID string generated
    once and never changed.
    """

    model_config = ConfigDict(validate_assignment=True, use_enum_values=False)

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    content: str
    memory_type: MemoryType = MemoryType.EPISODIC
    user_id: str = "default"
    session_id: str | None = None
    timestamp: datetime = Field(default_factory=utcnow)
    created_at: datetime = Field(default_factory=utcnow)
    importance: float = 0.5
    access_count: int = 0
    last_accessed: datetime | None = None
    pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    #: Set by the cross-tier search on returned items, never stored: each signal's contribution
    #: to ``score`` ("dense", "keyword", "entity", "time", "graph", "recency", "importance",
    #: "tier_evidence", "duplicate_penalty", ...); they sum to ``score``.
    explanation: dict[str, float] | None = None

    @classmethod
    def create(cls, *, turn: bool = False, **data: Any) -> MemoryItem:
        """Build an item, turning pydantic errors into a :class:`MemoryValidationError`.

        ``turn``: a chat message as ``put()`` records it, whose text and replayed message (metadata)
        have no size bound: an agent's run never fails on a long message.
        """
        try:
            return cls.model_validate(data, context=_TURN if turn else None)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error.get("loc", ())) or "memory"
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, MemoryValidationError):
                raise cause from None
            raise MemoryValidationError(field, error.get("msg", str(exc))) from None

    @classmethod
    def from_stored(cls, values: dict[str, Any]) -> MemoryItem:
        """An item from the values of every field as a store read them back, already valid: what
        ``model_construct`` makes, a quarter of its time (it looks each field up by its aliases and
        defaults, and a search builds ~100 items a query)."""
        if values.keys() != _ITEM_FIELDS:
            raise ValueError(f"from_stored needs every field of MemoryItem, got {sorted(values)}")
        item = cls.__new__(cls)
        object.__setattr__(item, "__dict__", values)
        object.__setattr__(item, "__pydantic_fields_set__", set(_ITEM_FIELDS))
        object.__setattr__(item, "__pydantic_extra__", None)
        object.__setattr__(item, "__pydantic_private__", None)
        return item

    @field_validator("id", mode="before")
    @classmethod
    def _check_id(cls, value: Any) -> str:
        return validate_memory_id(value, "id")

    @field_validator("content", mode="before")
    @classmethod
    def _check_content(cls, value: Any, info: ValidationInfo) -> str:
        return validate_content(value, bounded=not (info.context or {}).get("turn"))

    @field_validator("user_id", mode="before")
    @classmethod
    def _check_user(cls, value: Any) -> str:
        return validate_identifier(value, "user_id")

    @field_validator("session_id", mode="before")
    @classmethod
    def _check_session(cls, value: Any) -> str | None:
        return None if value is None else validate_identifier(value, "session_id")

    @field_validator("timestamp", "created_at", mode="before")
    @classmethod
    def _check_time(cls, value: Any, info: Any) -> datetime:
        return as_utc(value, info.field_name)

    @field_validator("last_accessed", mode="before")
    @classmethod
    def _check_last_accessed(cls, value: Any) -> datetime | None:
        return None if value is None else as_utc(value, "last_accessed")

    @field_validator("importance", mode="before")
    @classmethod
    def _check_importance(cls, value: Any) -> float:
        return validate_importance(value)

    @field_validator("metadata", mode="before")
    @classmethod
    def _check_metadata(cls, value: Any, info: ValidationInfo) -> dict[str, Any]:
        return validate_metadata(value, bounded=not (info.context or {}).get("turn"))


#: Every field of :class:`MemoryItem` (``from_stored`` takes all of them).
_ITEM_FIELDS = frozenset(MemoryItem.model_fields)


class MemoryFilter(BaseModel):
    """Filters a tier's ``retrieve``/``query`` accepts; unknown keys are an error.

    ``metadata`` matches by equality on top-level keys. Times are inclusive bounds on
    the event ``timestamp``.
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    min_importance: float | None = None
    metadata: dict[str, Any] | None = None
    memory_ids: list[str] | None = None

    @classmethod
    def from_kwargs(cls, **filters: Any) -> MemoryFilter:
        """Build from a tier's ``**filters``; names the unknown or invalid key."""
        aliases = {"time_range": None, "start": "start_time", "end": "end_time"}
        data: dict[str, Any] = {}
        for key, value in filters.items():
            if key == "time_range":
                if value is None:
                    continue
                if not isinstance(value, (tuple, list)) or len(value) != 2:
                    raise MemoryValidationError("time_range", "must be a (start, end) pair")
                data["start_time"], data["end_time"] = value
                continue
            key = aliases.get(key, key) or key
            if key not in cls.model_fields:
                allowed = sorted([*cls.model_fields, "time_range", "start", "end"])
                raise MemoryValidationError(key, f"unknown filter; allowed: {', '.join(allowed)}")
            data[key] = value
        if data.get("session_id") is not None:
            validate_identifier(data["session_id"], "session_id")
        for key in ("start_time", "end_time"):
            if data.get(key) is not None:
                data[key] = as_utc(data[key], key, clamp=True)
        if data.get("min_importance") is not None:
            data["min_importance"] = validate_importance(data["min_importance"], "min_importance")
        if data.get("metadata") is not None:
            data["metadata"] = validate_metadata(data["metadata"])
        if data.get("memory_ids") is not None:
            data["memory_ids"] = [validate_memory_id(i, "memory_ids") for i in data["memory_ids"]]
        return cls(**data)


def matches(item: MemoryItem, flt: MemoryFilter) -> bool:
    """Whether an item passes a :class:`MemoryFilter` (in-process tiers filter in Python)."""
    if flt.session_id is not None and item.session_id != flt.session_id:
        return False
    if flt.start_time is not None and item.timestamp < flt.start_time:
        return False
    if flt.end_time is not None and item.timestamp > flt.end_time:
        return False
    if flt.min_importance is not None and item.importance < flt.min_importance:
        return False
    if flt.memory_ids is not None and item.id not in flt.memory_ids:
        return False
    return not flt.metadata or all(item.metadata.get(k) == v for k, v in flt.metadata.items())


_RELATIVE_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$", re.IGNORECASE)
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_moment(value: str, field: str, *, end_of_day: bool = False) -> datetime:
    """A time a caller names (a filter bound, a memory's time): an ISO date or datetime, 'now', 'today',
    'yesterday', or an age such as '90m', '12h', '7d', '2w'.

    A bare date means its start (or, with ``end_of_day``, its end). Naive times are UTC. Why one
    home: the command line and the MCP server take the same words and must read them alike.
    """
    text = value.strip().lower()
    now = datetime.now(timezone.utc)
    if text == "now":
        return now
    if text in ("today", "yesterday"):
        return _day_bound(now.date() - timedelta(days=1 if text == "yesterday" else 0), end_of_day)
    match = _RELATIVE_AGE.match(text)
    if match:
        try:
            moment = now - timedelta(**{_AGE_UNITS[match.group(2).lower()]: float(match.group(1))})
        except (OverflowError, ValueError):  # 99999999999d, or a 400-digit age (an infinite float)
            raise MemoryValidationError(field, f"age too large: {_shown(value)} (it reaches before year 1)") from None
        return bounded_time(moment, field)
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
        moment = None if day else parse_iso(value.strip())
    except ValueError:
        raise MemoryValidationError(
            field,
            f"not a time: {_shown(value)} (use an ISO date like 2026-01-31, a datetime, 'today', or an age like 7d)",
        ) from None
    return _day_bound(day, end_of_day, field) if day else as_utc(moment, field)


def _shown(value: str, limit: int = 60) -> str:
    """A caller's text quoted for an error message, cut short (a 400-digit age need not come back whole)."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value)} characters)"


def _day_bound(day: date, end: bool, field: str = "time") -> datetime:
    start = bounded_time(datetime(day.year, day.month, day.day, tzinfo=timezone.utc), field)
    return bounded_time(start + timedelta(days=1, microseconds=-1), field) if end else start
