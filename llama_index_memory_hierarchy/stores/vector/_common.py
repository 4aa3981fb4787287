"""Validation shared by the vector backends, so every backend rejects the same inputs.

Points and filters are checked here once, before any backend call: ids are canonical
UUIDs, vectors have the index dimension and are finite and non-zero, every point carries
a valid ``user_id`` and filter field names are plain identifiers (values travel as typed
values, never formatted into query text).

Booleans are stored and matched as integers 0/1 in every backend: LlamaIndex
``MetadataFilter`` rejects ``bool`` values, and qdrant-edge-py 0.9 turns ``MatchValue(True)``
into the integer 1, which never matches a stored ``true``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError
from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorPoint
from llama_index_memory_hierarchy.types import validate_identifier, validate_memory_id, validate_positive_int

_SPACE = re.compile(r"^[A-Za-z0-9._\-]{1,160}$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Payload keys that the backends index (keyword) ...
KEYWORD_KEYS = ("user_id", "namespace", "memory_type", "session_id")
#: ... and (float).
FLOAT_KEYS = ("timestamp", "importance")


def validate_space(space: Any) -> str:
    """A vector space id: safe as a folder and collection name."""
    if not isinstance(space, str) or not _SPACE.fullmatch(space) or space in {".", ".."}:
        raise MemoryValidationError("space", f"must be 1-160 characters of letters, digits and ._-, got {space!r}")
    return space


def validate_dim(dim: Any) -> int:
    """A positive vector dimension."""
    return validate_positive_int(dim, "dim")


def _field_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _FIELD.fullmatch(name):
        raise MemoryValidationError(where, f"payload field names must be identifiers, got {name!r}")
    return name


def encode_value(value: Any) -> Any:
    """Payload/filter value as stored: booleans become 0/1, lists are encoded item-wise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, np.generic):
        return encode_value(value.item())
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    return value


def check_vector(vector: Any, dim: int, where: str) -> np.ndarray:
    """A finite, non-zero float32 vector of the index dimension."""
    try:
        arr = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(where, f"not a numeric vector: {exc}") from exc
    if arr.ndim != 1:
        raise MemoryValidationError(where, f"must be a 1-d vector, got shape {arr.shape}")
    if arr.shape[0] != dim:
        raise EmbeddingDimensionError(f"{where}: vector has dimension {arr.shape[0]}, this index uses {dim}")
    if not np.isfinite(arr).all():
        raise MemoryValidationError(where, "contains NaN or infinite values")
    if not np.any(arr):
        raise MemoryValidationError(where, "is an all-zero vector, which has no direction and cannot be searched")
    return arr


@dataclass
class PreparedPoint:
    """A validated point: canonical id, float32 vector, encoded payload."""

    id: str
    vector: np.ndarray
    payload: dict[str, Any]


def prepare_points(points: Sequence[VectorPoint], dim: int) -> list[PreparedPoint]:
    """Validate a batch of points; the error names the offending point."""
    if isinstance(points, VectorPoint) or not isinstance(points, Sequence):
        raise MemoryValidationError("points", f"expected a sequence of VectorPoint, got {type(points).__name__}")
    out: list[PreparedPoint] = []
    for i, point in enumerate(points):
        if not isinstance(point, VectorPoint):
            raise MemoryValidationError(f"points[{i}]", f"expected a VectorPoint, got {type(point).__name__}")
        pid = validate_memory_id(point.id, f"points[{i}].id")
        vector = check_vector(point.vector, dim, f"points[{i}].vector")
        payload = point.payload or {}
        if not isinstance(payload, dict):
            raise MemoryValidationError(f"points[{i}].payload", f"must be a dict, got {type(payload).__name__}")
        for key in payload:
            _field_name(key, f"points[{i}].payload")
        validate_identifier(payload.get("user_id"), f"points[{i}].payload.user_id")
        for key in FLOAT_KEYS:
            value = payload.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise MemoryValidationError(f"points[{i}].payload.{key}", f"must be a finite number, got {value!r}")
        out.append(PreparedPoint(pid, vector, encode_value(payload)))
    return out


def prepare_ids(ids: Sequence[str], where: str = "ids") -> list[str]:
    """Canonical UUID strings, order kept, duplicates dropped."""
    if isinstance(ids, str) or not isinstance(ids, (Sequence, set, frozenset)):
        raise MemoryValidationError(where, f"expected a sequence of ids, got {type(ids).__name__}")
    return list(dict.fromkeys(validate_memory_id(i, where) for i in ids))


@dataclass
class PreparedFilter:
    """A validated :class:`VectorFilter` in backend-neutral form."""

    user_id: str
    equals: dict[str, Any] = field(default_factory=dict)  # scalar -> match, list -> any-of
    ranges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    ids: list[str] | None = None
    #: True when the filter can match nothing (an empty any-of list or id list).
    empty: bool = False


def prepare_filter(flt: VectorFilter) -> PreparedFilter:
    """Check a filter: ``user_id`` is mandatory; fields are identifiers; values are typed."""
    if not isinstance(flt, VectorFilter):
        raise MemoryValidationError("filter", f"expected a VectorFilter, got {type(flt).__name__}")
    out = PreparedFilter(user_id=validate_identifier(flt.user_id, "filter.user_id"))
    for key, value in (flt.equals or {}).items():
        name = _field_name(key, "filter.equals")
        if name == "user_id":
            raise MemoryValidationError("filter.equals", "user_id is set by VectorFilter.user_id, not equals")
        if isinstance(value, (list, tuple, set, frozenset)):
            values = list(value)
            if not all(isinstance(v, str) for v in values) and not all(
                isinstance(v, int) and not isinstance(v, bool) for v in values
            ):
                raise MemoryValidationError(
                    f"filter.equals.{name}", "an any-of list must hold only strings or only ints"
                )
            if not values:
                out.empty = True
            out.equals[name] = values
        elif isinstance(value, (str, bool, int)) and not isinstance(value, float):
            out.equals[name] = encode_value(value)
        else:
            raise MemoryValidationError(
                f"filter.equals.{name}", f"must be a string, int, bool or list of strings, got {type(value).__name__}"
            )
    for key, bounds in (flt.ranges or {}).items():
        name = _field_name(key, "filter.ranges")
        if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
            raise MemoryValidationError(f"filter.ranges.{name}", "must be a (low, high) pair; None leaves a side open")
        low, high = bounds
        for side, value in (("low", low), ("high", high)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise MemoryValidationError(f"filter.ranges.{name}", f"{side} bound must be a finite number or None")
        if low is None and high is None:
            continue
        if low is not None and high is not None and low > high:
            out.empty = True
        out.ranges[name] = (None if low is None else float(low), None if high is None else float(high))
    if flt.ids is not None:
        out.ids = prepare_ids(flt.ids, "filter.ids")
        if not out.ids:
            out.empty = True
    return out


#: Largest result limit passed to a backend (larger ones mean the same: every match); avoids integer overflow.
MAX_LIMIT = 2**31 - 1


def check_limit(limit: Any) -> int:
    """A non-negative integer result limit (clamped to :data:`MAX_LIMIT`)."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or int(limit) < 0:
        raise MemoryValidationError("limit", f"must be a non-negative integer, got {limit!r}")
    return min(int(limit), MAX_LIMIT)
