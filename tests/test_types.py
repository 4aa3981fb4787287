"""Validation at the edge: out-of-range times and identifiers with a trailing newline (issue 17, item 11)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from pydantic import ValidationError

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.types import (
    TIME_MAX,
    TIME_MIN,
    MemoryFilter,
    MemoryItem,
    as_utc,
    parse_moment,
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


def test_an_item_from_stored_values_is_the_item_they_validate_to() -> None:
    """``from_stored`` (what the record store builds each row it reads with) makes the same object as validation
    and as ``model_construct``, and refuses anything but every field."""
    original = MemoryItem.create(
        content="Alice went hiking", user_id="alice", session_id="s1", metadata={"role": "user"}, importance=0.7
    )
    values = dict(original.__dict__)
    stored = MemoryItem.from_stored(dict(values))
    assert stored == original == MemoryItem.model_construct(**values)
    assert stored.model_fields_set == MemoryItem.model_construct(**values).model_fields_set
    assert stored.model_dump() == original.model_dump()
    stored.importance = 0.9  # a normal, validating model afterwards
    with pytest.raises(ValidationError):
        stored.importance = "very"  # type: ignore[assignment]
    del values["explanation"]
    with pytest.raises(ValueError, match="every field"):
        MemoryItem.from_stored(values)


@pytest.mark.parametrize(
    "value",
    [datetime.max, datetime.max.replace(tzinfo=UTC), datetime.min, "9999-12-31T23:59:59.999999", "0001-01-01T00:00"],
    ids=["datetime.max", "aware max", "datetime.min", "max as text", "year 1 start"],
)
def test_times_past_the_margin_are_refused_naming_the_field(value: object) -> None:
    """Issue 36, item 3: 9999-12-31T23:59:59.999999 stored as epoch seconds read back as year 10000."""
    with pytest.raises(MemoryValidationError) as raised:
        MemoryItem.create(content="x", timestamp=value)
    assert raised.value.field == "timestamp" and "out of range" in str(raised.value)
    with pytest.raises(MemoryValidationError) as raised:
        MemoryItem.create(content="x", last_accessed=value)
    assert raised.value.field == "last_accessed"
    assert as_utc(TIME_MAX) == TIME_MAX and as_utc(TIME_MIN) == TIME_MIN


@pytest.mark.parametrize(
    "text", ["99999999999d", "9" * 400 + "d", "3000000d", "9999-12-31", "9999-12-31T23:59:59.999999", "0001-01-01"]
)
def test_parse_moment_bounds_ages_and_dates(text: str) -> None:
    with pytest.raises(MemoryValidationError) as raised:
        parse_moment(text, "since", end_of_day=True)
    assert raised.value.field == "since" and len(str(raised.value)) < 200


def test_parse_moment_reads_the_edges_within_bounds() -> None:
    assert parse_moment("9998-12-31", "until", end_of_day=True) == TIME_MAX
    assert parse_moment("0001-01-02", "since") == TIME_MIN
    assert parse_moment("2026-01-05T10:00+02:00", "when") == datetime(2026, 1, 5, 8, tzinfo=UTC)
