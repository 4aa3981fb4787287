"""Extraction with an LLM: structured output, bounded concurrency, replies grounded in the text, offline fallback."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import LLMReplyError, MemoryValidationError
from llama_index_memory_hierarchy.extraction.base import (
    CONFIDENCE_LLM,
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    Extractor,
    is_user_mention,
    make_fact,
    with_user_name,
)
from llama_index_memory_hierarchy.extraction.claims import without_claims
from llama_index_memory_hierarchy.extraction.offline import OfflineExtractor
from llama_index_memory_hierarchy.extraction.relations import USER_ENTITY
from llama_index_memory_hierarchy.language import FIRST_PERSON, FIRST_PERSON_PLURAL, HAN_CHAR, HAN_RUN, split_sentences

logger = logging.getLogger(__name__)

_THE_USER = re.compile(r"\bthe user\b|用户", re.IGNORECASE)
#: First-person mentions, which name the writer, not the user, in a text about "the user".
_WRITER = FIRST_PERSON | FIRST_PERSON_PLURAL


class _LLMTriplet(BaseModel):
    """One fact stated in the text."""

    subject: str = Field(description="Entity the fact is about; 'User' for the user (I, me, my, the user, 用户).")
    subject_type: str = Field(default="ENTITY", description="PERSON, ORG, PLACE, CONCEPT, ...")
    predicate: str = Field(description="Short relation in snake_case, e.g. works_at, lives_in, spouse, prefers.")
    object: str = Field(description="Entity or value the subject relates to.")
    object_type: str = Field(default="ENTITY", description="PERSON, ORG, PLACE, CONCEPT, ...")
    confidence: float = Field(default=CONFIDENCE_LLM, description="How sure the text makes the fact, 0 to 1.")


class _LLMTriplets(BaseModel):
    """Facts (subject, predicate, object) stated in the text."""

    triplets: list[_LLMTriplet] = Field(default_factory=list)


EXTRACTION_PROMPT = (
    "Extract the durable facts stated in the text below as (subject, predicate, object) triplets.\n"
    "- Use full entity names as written; use 'User' for the user: the speaker (I, me, my), 'the user', 用户.\n"
    "- The user's own name ('I'm Alice') is (User, named, Alice); later facts about that name are User's.\n"
    "- Predicates are short snake_case relations: works_at, lives_in, spouse, prefers, knows, capital_of, ...\n"
    "- A negated fact keeps its negation in the predicate (does_not_like, is_not); never state its opposite.\n"
    "- The one asked to do something does it: 'Tom asked me to fix the bug' -> (User, asked_to_fix, bug).\n"
    "- Keep objects whole: 'allergic to peanuts' -> (User, is_allergic_to, peanuts).\n"
    "- Skip greetings, questions, small talk and anything hypothetical.\n"
    "- At most {max_triplets} triplets.\n\n"
    "Text:\n{text}\n"
)


def _model_name(llm: Any) -> str:
    try:
        return str(llm.metadata.model_name or type(llm).__name__)
    except Exception:
        return type(llm).__name__


class LLMExtractor(Extractor):
    """Structured-output extraction with an LLM; bounded concurrency; offline fallback per text."""

    def __init__(
        self,
        llm: Any,
        *,
        max_concurrency: int = 4,
        max_triplets: int = 20,
        max_chars: int = 6000,
        fallback: Extractor | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise MemoryValidationError("max_concurrency", "must be at least 1")
        self.llm = llm
        self.max_concurrency = max_concurrency
        self.max_triplets = max_triplets
        self.max_chars = max_chars
        self.fallback = fallback if fallback is not None else OfflineExtractor()
        self.name = f"llm:{_model_name(llm)}"
        #: Texts answered by the offline extractor because the LLM failed or gave nothing usable.
        self.fallbacks = 0

    def _chunks(self, text: str) -> list[str]:
        """Texts longer than ``max_chars`` split at sentence ends."""
        if len(text) <= self.max_chars:
            return [text]
        chunks, current = [], ""
        for sentence in split_sentences(text):
            if current and len(current) + len(sentence) + 1 > self.max_chars:
                chunks.append(current)
                current = ""
            current = f"{current} {sentence}".strip() if current else sentence[: self.max_chars]
        if current:
            chunks.append(current)
        return chunks

    async def _one(self, text: str, semaphore: asyncio.Semaphore) -> Extraction:
        from llama_index.core.prompts import PromptTemplate

        result = Extraction()
        for chunk in self._chunks(text):
            async with semaphore:
                output = await self.llm.astructured_predict(
                    _LLMTriplets, PromptTemplate(EXTRACTION_PROMPT), text=chunk, max_triplets=self.max_triplets
                )
            if not isinstance(output, _LLMTriplets):
                raise LLMReplyError(f"expected {_LLMTriplets.__name__}, got {type(output).__name__}")
            facts = []
            reported = _THE_USER.search(chunk) is not None  # "The user asked me to ...": "me" is the writer
            for triplet in output.triplets[: self.max_triplets]:
                if reported and {triplet.subject.strip().casefold(), triplet.object.strip().casefold()} & _WRITER:
                    continue
                subject = USER_ENTITY if is_user_mention(triplet.subject) else triplet.subject
                obj = USER_ENTITY if is_user_mention(triplet.object) else triplet.object
                fact = make_fact(
                    subject,
                    triplet.predicate,
                    obj,
                    triplet.confidence,
                    self.name,
                    triplet.subject_type,
                    triplet.object_type,
                )
                if fact is not None and grounded(fact, chunk):
                    facts.append(fact)
            entities = [ExtractedEntity(name=f.subject, type=f.subject_type) for f in facts]
            entities += [ExtractedEntity(name=f.object, type=f.object_type) for f in facts]
            result = result.merge(without_claims(Extraction(entities=entities, facts=facts), chunk))
        return with_user_name(result)

    async def aextract_many(self, texts: Sequence[str]) -> list[Extraction]:
        semaphore = asyncio.Semaphore(self.max_concurrency)
        outcomes = await asyncio.gather(*(self._one(t, semaphore) for t in texts), return_exceptions=True)
        failed = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)]
        results: list[Extraction] = [o if isinstance(o, Extraction) else Extraction() for o in outcomes]
        if failed:
            first = outcomes[failed[0]]
            if isinstance(first, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise first
            logger.warning(
                "LLM extraction failed for %d of %d texts (%s: %s); using the offline extractor for them",
                len(failed), len(texts), type(first).__name__, first,
            )  # fmt: skip
            for i, extraction in zip(
                failed, await self.fallback.aextract_many([texts[i] for i in failed]), strict=True
            ):
                results[i] = extraction
        # a reply with no fact where the offline extractor is sure of some is not usable: use those
        empty = [i for i, r in enumerate(results) if not r.facts and i not in failed]
        if empty:
            offline = await self.fallback.aextract_many([texts[i] for i in empty])
            replaced = 0
            for i, extraction in zip(empty, offline, strict=True):
                if extraction.facts:
                    results[i] = extraction
                    replaced += 1
            if replaced:
                logger.warning(
                    "the LLM found no fact in %d of %d texts that state facts; using the offline extractor for them",
                    replaced, len(texts),
                )  # fmt: skip
            failed = [*failed, *(i for i, e in zip(empty, offline, strict=True) if e.facts)]
        self.fallbacks += len(failed)
        return results


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 1 or HAN_CHAR.match(w)}


def grounded(fact: ExtractedFact, text: str) -> bool:
    """Whether the subject and object of an LLM fact are in ``text`` (the user, or a word or CJK run of it)."""
    folded = text.casefold()
    for mention in (fact.subject, fact.object):
        if mention == USER_ENTITY:
            continue
        if HAN_CHAR.search(mention):
            if not any(part in folded for part in HAN_RUN.findall(mention)):
                return False
        elif not _words(mention) & _words(text):
            return False
    return True


def default_extractor(llm: Any = None, **kwargs: Any) -> Extractor:
    """An :class:`LLMExtractor` when an LLM is given, else the :class:`OfflineExtractor`."""
    return LLMExtractor(llm, **kwargs) if llm is not None else OfflineExtractor()
