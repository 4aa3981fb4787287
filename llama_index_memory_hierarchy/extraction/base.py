"""What an extraction yields (entities, facts) and the :class:`Extractor` interface every extractor implements."""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

from pydantic import BaseModel, Field, field_validator

from llama_index_memory_hierarchy.extraction.relations import NAME_PREDICATE, USER_ENTITY, normalize_predicate
from llama_index_memory_hierarchy.language import FIRST_PERSON

CONFIDENCE_LLM = 0.9
CONFIDENCE_PATTERN = 0.6
CONFIDENCE_APPOSITION = 0.55
CONFIDENCE_REGEX = 0.35

#: Third-person names of the user: an MCP client or an agent writes "The user is vegetarian", "用户住在北京".
USER_MENTIONS = {"user", "the user", "用户", "该用户", "这位用户"}
#: Chat words that end a phrase without being part of it ("lives in Doha btw").
_DISCOURSE_TAIL = re.compile(r"(?:\s+(?:btw|fwiw|imo|imho|tbh|lol|though|anyway|haha))+\W*$", re.IGNORECASE)
LATIN = re.compile(r"[A-Za-z]")


def clean_name(name: str) -> str:
    """An entity mention as stored: whitespace collapsed, edge punctuation and possessive ``'s`` removed."""
    name = re.sub(r"\s+", " ", name).strip()
    name = re.sub(r"(?:'s|’s|')$", "", name).strip()
    name = _DISCOURSE_TAIL.sub("", name)
    return name.strip(" \t\"'“”‘’.,;:!?()[]{}，。！？；：、")


class ExtractedEntity(BaseModel):
    """An entity mention: its name and a coarse type (PERSON, ORG, GPE, ...)."""

    name: str
    type: str = "ENTITY"


class ExtractedFact(BaseModel):
    """One relation ``subject -predicate-> object`` and where it came from."""

    subject: str
    predicate: str
    object: str
    subject_type: str = "ENTITY"
    object_type: str = "ENTITY"
    confidence: float = 0.5
    extractor: str = "unknown"

    @field_validator("confidence")
    @classmethod
    def _clip(cls, value: float) -> float:
        return min(max(float(value), 0.0), 1.0)


class Extraction(BaseModel):
    """What one text yielded."""

    entities: list[ExtractedEntity] = Field(default_factory=list)
    facts: list[ExtractedFact] = Field(default_factory=list)

    def merge(self, other: Extraction) -> Extraction:
        """Both extractions, facts deduplicated on (subject, predicate, object) keeping the most confident."""
        entities = {e.name.lower(): e for e in [*self.entities, *other.entities]}
        facts: dict[tuple[str, str, str], ExtractedFact] = {}
        for fact in [*self.facts, *other.facts]:
            key = (fact.subject.lower(), fact.predicate, fact.object.lower())
            if key not in facts or fact.confidence > facts[key].confidence:
                facts[key] = fact
        return Extraction(entities=list(entities.values()), facts=list(facts.values()))


class Extractor(ABC):
    """Turns texts into entities and facts."""

    @abstractmethod
    async def aextract_many(self, texts: Sequence[str]) -> list[Extraction]:
        """One :class:`Extraction` per text, in order."""

    async def aextract(self, text: str) -> Extraction:
        """Entities and facts of one text."""
        return (await self.aextract_many([text]))[0]

    def extract(self, text: str) -> Extraction:
        """Sync convenience (not for use inside a running event loop)."""
        return asyncio.run(self.aextract(text))


def make_fact(
    subject: str, predicate: str, obj: str, confidence: float, extractor: str, st: str, ot: str
) -> ExtractedFact | None:
    subject, obj = clean_name(subject), clean_name(obj)
    if not subject or not obj or subject.lower() == obj.lower():
        return None
    return ExtractedFact(
        subject=subject,
        predicate=normalize_predicate(predicate),
        object=obj,
        subject_type=st,
        object_type=ot,
        confidence=confidence,
        extractor=extractor,
    )


def unique_facts(facts: Sequence[ExtractedFact | None]) -> list[ExtractedFact]:
    unique: dict[tuple[str, str, str], ExtractedFact] = {}
    for fact in facts:
        if fact is not None:
            unique.setdefault((fact.subject.lower(), fact.predicate, fact.object.lower()), fact)
    return list(unique.values())


def is_user_mention(mention: str) -> bool:
    """Whether a mention names the user: first person, "the user", 用户."""
    return mention.strip().casefold() in FIRST_PERSON | USER_MENTIONS


def with_user_name(extraction: Extraction) -> Extraction:
    """Facts about the name the user gives in the same text are the user's ("I'm Alice. Alice is vegetarian").

    Across texts, semantic memory makes the name an alias of the user's entity instead.
    """
    names = {
        f.object.casefold() for f in extraction.facts if f.subject == USER_ENTITY and f.predicate == NAME_PREDICATE
    }
    if not names:
        return extraction
    facts: list[ExtractedFact | None] = []
    for fact in extraction.facts:
        if fact.predicate != NAME_PREDICATE:
            subject = USER_ENTITY if fact.subject.casefold() in names else fact.subject
            obj = USER_ENTITY if fact.object.casefold() in names else fact.object
            if subject == obj:
                continue
            fact = fact.model_copy(update={"subject": subject, "object": obj})
        facts.append(fact)
    entities = [e for e in extraction.entities if e.name.casefold() not in names]
    return Extraction(entities=entities, facts=unique_facts(facts))
