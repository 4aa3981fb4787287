"""Validation at the edge: out-of-range times and identifiers with a trailing newline (issue 17, item 11)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    as_utc,
    validate_identifier,
    validate_positive_int,
)


@pytest.mark.parametrize(
    "value",
    ["9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00", 10**400, -(10**400), 1e300],
    ids=["after-max-in-utc", "before-min-in-utc", "10**400", "-10**400", "1e300"],
)
def test_out_of_range_times_are_a_validation_error(value: object) -> None:
    with pytest.raises(MemoryValidationError) as raised:
        as_utc(value)
    assert raised.value.field == "timestamp" and len(str(raised.value)) < 200
    with pytest.raises(MemoryValidationError):
        MemoryItem.create(content="x", timestamp=value)
    with pytest.raises(MemoryValidationError):
        MemoryFilter.from_kwargs(start_time=value)


@pytest.mark.parametrize("value", ["alice\n", "s1\n", "\nalice", "al\nice"])
def test_identifiers_with_line_breaks_are_refused(value: str) -> None:
    with pytest.raises(MemoryValidationError):
        validate_identifier(value, "user_id")
    with pytest.raises(MemoryValidationError):
        MemoryItem.create(content="x", user_id="alice", session_id=value)


@pytest.mark.parametrize("value", [0, -3, True, 2.0, "5", None])
def test_a_positive_integer_check_names_the_field(value: object) -> None:
    with pytest.raises(MemoryValidationError) as raised:
        validate_positive_int(value, "similarity_top_k")
    assert raised.value.field == "similarity_top_k" and "positive integer" in str(raised.value)


def test_a_positive_integer_passes_as_an_int() -> None:
    assert validate_positive_int(3, "limit") == 3
    assert type(validate_positive_int(np.int64(7), "dim")) is int
