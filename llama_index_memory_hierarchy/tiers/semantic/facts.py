"""A fact, as given and as indexed: the input model, its validation, and the in-memory index entry.

A fact ``subject -predicate-> object`` is a memory record whose metadata holds the triplet
and its provenance; :class:`Fact` is the entry the semantic state keeps for it (the record
itself is the truth).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from llama_index_memory_hierarchy.entity_resolution import normalize_name
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction import ExtractedFact, Extraction, clean_name, normalize_predicate
from llama_index_memory_hierarchy.types import MemoryItem, validate_content, validate_importance, validate_memory_id

logger = logging.getLogger(__name__)

#: ``metadata["kind"]`` of a fact record, and of a statement (plain text kept in this tier).
FACT = "fact"
STATEMENT = "statement"


class FactInput(BaseModel):
    """A fact to add: the triplet and its provenance."""

    subject: str
    predicate: str
    object: str
    subject_type: str = "ENTITY"
    object_type: str = "ENTITY"
    valid_at: datetime | None = None
    source_ids: list[str] = Field(default_factory=list)
    confidence: float = Field(default=1.0, ge=0, le=1)
    extractor: str = "manual"
    importance: float | None = None

    @classmethod
    def extracted(
        cls,
        fact: ExtractedFact,
        *,
        source_ids: Sequence[str],
        valid_at: datetime | None,
        importance: float | None,
        extractor: str | None = None,
    ) -> FactInput:
        """The input for an extractor's fact with its provenance (``extractor`` defaults to the fact's own)."""
        return cls(
            subject=fact.subject,
            predicate=fact.predicate,
            object=fact.object,
            subject_type=fact.subject_type,
            object_type=fact.object_type,
            valid_at=valid_at,
            source_ids=list(source_ids),
            confidence=fact.confidence,
            extractor=extractor or fact.extractor,
            importance=importance,
        )


def fact_input(field: str, **data: Any) -> FactInput:
    """A :class:`FactInput`, with a wrong value reported as a :class:`MemoryValidationError` naming it."""
    try:
        return FactInput(**data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        raise MemoryValidationError(where if field == "fact" else f"{field}.{where}", error.get("msg", "")) from None
    except TypeError as exc:
        raise MemoryValidationError(field, str(exc)) from None


def check_fact(fact: Any, position: int) -> FactInput:
    """A fact given as a :class:`FactInput`, dict or 3-tuple, validated and normalised (names, predicate)."""
    field_name = f"facts[{position}]"
    if isinstance(fact, tuple):
        if len(fact) != 3:
            raise MemoryValidationError(field_name, "a tuple fact must be (subject, predicate, object)")
        fact = fact_input(field_name, subject=fact[0], predicate=fact[1], object=fact[2])
    elif isinstance(fact, dict):
        fact = fact_input(field_name, **fact)
    elif not isinstance(fact, FactInput):
        raise MemoryValidationError(field_name, f"expected a FactInput, dict or tuple, got {type(fact).__name__}")
    for part in ("subject", "predicate", "object"):
        value = getattr(fact, part)
        validate_content(value, f"{field_name}.{part}")
        if len(value) > 500:
            raise MemoryValidationError(f"{field_name}.{part}", "longer than 500 characters")
    subject, obj = clean_name(fact.subject), clean_name(fact.object)
    if not normalize_name(subject) or not normalize_name(obj):
        raise MemoryValidationError(field_name, "subject and object must contain a letter or digit")
    if fact.importance is not None:
        validate_importance(fact.importance)
    return fact.model_copy(
        update={
            "subject": subject,
            "object": obj,
            "predicate": normalize_predicate(fact.predicate),
            "source_ids": [validate_memory_id(s, "source_ids") for s in fact.source_ids],
        }
    )


def item_fact(item: MemoryItem, position: int) -> FactInput | None:
    """The fact an item states by metadata (``subject``, ``predicate``, ``object``), or None for a statement."""
    meta = item.metadata
    if (
        not all(isinstance(meta.get(k), str) for k in ("subject", "predicate", "object"))
        or meta.get("kind") == STATEMENT
    ):
        return None
    return check_fact(
        FactInput(
            subject=meta["subject"],
            predicate=meta["predicate"],
            object=meta["object"],
            valid_at=item.timestamp,
            importance=item.importance,
            confidence=float(meta.get("confidence", 1.0)),
            source_ids=list(meta.get("source_ids") or []),
        ),
        position,
    )


def from_extracted(
    fact: ExtractedFact, source: str | None, valid_at: datetime | None, importance: float | None
) -> FactInput | None:
    """The input for an extracted fact pointing to ``source``; None (logged) when it is not a valid fact."""
    try:
        provenance = [source] if source else []
        return check_fact(FactInput.extracted(fact, source_ids=provenance, valid_at=valid_at, importance=importance), 0)
    except MemoryValidationError as exc:
        logger.debug("skipping extracted fact %r: %s", fact, exc)
        return None


def extracted_facts(
    extractions: Sequence[Extraction],
    sources: Sequence[str | None],
    *,
    valid_at: datetime | None,
    importance: float | None,
    min_confidence: float,
) -> tuple[list[FactInput], list[int]]:
    """The valid facts of each extraction at least ``min_confidence`` sure, and the position each came from."""
    batch: list[FactInput] = []
    owners: list[int] = []
    for position, (extraction, source) in enumerate(zip(extractions, sources, strict=True)):
        for fact in extraction.facts:
            if fact.confidence < min_confidence:
                continue
            candidate = from_extracted(fact, source, valid_at, importance)
            if candidate is not None:
                batch.append(candidate)
                owners.append(position)
    return batch, owners


def fact_content(subject: str, predicate: str, obj: str) -> str:
    """The searchable text of a fact record: ``"subject predicate object"``."""
    return f"{subject} {predicate.replace('_', ' ')} {obj}"


@dataclass
class Fact:
    """In-memory index entry of one fact record (the record itself is the truth)."""

    id: str
    subject_id: str
    predicate: str
    object_id: str
    current: bool
    valid_at: datetime
    metadata: dict[str, Any]
    importance: float

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.subject_id, self.predicate, self.object_id)

    @property
    def source_ids(self) -> list[str]:
        return list(self.metadata.get("source_ids") or [])

    @property
    def confidence(self) -> float:
        return float(self.metadata.get("confidence", 1.0))
